import Foundation

/// JSON the way facetrain prints and writes it: sorted keys, no escaped slashes.
public enum JSONText {
    /// Pretty-printed JSON (for files and reports).
    public static func encode<T: Encodable>(_ value: T, pretty: Bool = true) throws -> String {
        String(decoding: try data(value, pretty: pretty), as: UTF8.self)
    }

    /// The same as bytes.
    public static func data<T: Encodable>(_ value: T, pretty: Bool = true) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting =
            pretty ? [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes] : [.sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(value)
    }
}
