import Foundation

/// A registered person as the iOS app knows them: the manifest's `users` array has this shape.
public struct UserRecord: Codable, Sendable, Equatable {
    public var id: Int
    public var name: String
    public var position: String?

    public init(id: Int, name: String, position: String? = nil) {
        self.id = id
        self.name = name
        self.position = position
    }

    /// Always writes `position`, as null when unknown: the app reads the key.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(name, forKey: .name)
        try container.encode(position, forKey: .position)
    }
}

/// Reads `users.json` (an array of records) and `<id>/user.json` (one record) of a data folder.
package enum UserMetadataReader {
    /// The JSON of one record; `id` may be missing in `<id>/user.json` (the folder says it).
    private struct RawRecord: Decodable {
        var id: Int?
        var name: String?
        var position: String?
    }

    /// Parses `users.json`; throws a `DataProblem` naming the file on invalid JSON.
    package static func readList(at url: URL) throws(DataProblem) -> [RawUser] {
        let data: Data
        do { data = try Data(contentsOf: url) } catch {
            throw .invalidMetadata(path: url.path, reason: "cannot be read (\(error.localizedDescription))")
        }
        do {
            return try JSONDecoder().decode([RawRecord].self, from: data).enumerated().map { index, record in
                RawUser(
                    id: record.id, name: record.name, position: record.position,
                    source: "\(url.path) entry \(index + 1)")
            }
        } catch {
            throw .invalidMetadata(
                path: url.path,
                reason: describe(error) + "; expected [{\"id\": 17, \"name\": \"...\", \"position\": \"...\"}]")
        }
    }

    /// Parses `<id>/user.json`.
    package static func readSingle(at url: URL) throws(DataProblem) -> RawUser {
        let data: Data
        do { data = try Data(contentsOf: url) } catch {
            throw .invalidMetadata(path: url.path, reason: "cannot be read (\(error.localizedDescription))")
        }
        do {
            let record = try JSONDecoder().decode(RawRecord.self, from: data)
            return RawUser(id: record.id, name: record.name, position: record.position, source: url.path)
        } catch {
            throw .invalidMetadata(
                path: url.path, reason: describe(error) + "; expected {\"name\": \"...\", \"position\": \"...\"}")
        }
    }

    private static func describe(_ error: Error) -> String {
        switch error {
        case DecodingError.dataCorrupted(let context):
            let reason = context.underlyingError.map { "\($0.localizedDescription)" } ?? context.debugDescription
            return "is not valid JSON (\(reason))"
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context):
            let path = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
            return "has a wrong value at \(path.isEmpty ? "top level" : path): \(context.debugDescription)"
        default:
            return "is not valid JSON (\(error))"
        }
    }
}

/// A metadata record before validation, with where it came from for error messages.
package struct RawUser {
    package var id: Int?
    package var name: String?
    package var position: String?
    package var source: String
}

extension Unicode.Scalar {
    /// Control characters, line and paragraph separators, bidirectional controls, invisible
    /// formatting characters (U+2060-2064, tags, ...) and blank "letters" (Hangul fillers, the blank
    /// Braille pattern): in a name or a file name they can move the cursor, break lines, hide, or
    /// make one text read as another. Joiners (U+200C, U+200D), the soft hyphen and the Mongolian
    /// vowel separator are ordinary spelling. Tags are refused even in the flags of England,
    /// Scotland and Wales: invisible alone, they can carry hidden text.
    public var isHiddenControl: Bool {
        switch properties.generalCategory {
        case .control, .lineSeparator, .paragraphSeparator: return true
        case .format: return ![0x00AD, 0x180E, 0x200C, 0x200D].contains(value)
        default:
            return [0x115F, 0x1160, 0x2800, 0x3164, 0xFFA0].contains(value)
        }
    }
}

extension String {
    /// Scalars one character (a letter with its marks, an emoji sequence) may have: the longest
    /// emoji sequences (families with skin tones) have 11; a letter under dozens of combining marks
    /// draws over the lines around it.
    package static let scalarsPerCharacterLimit = 16

    /// Why this name or position cannot be shown as it is, or nil: a hidden or control character, or
    /// a character piled with marks. One rule for `data check` and the server.
    package var displayProblem: String? {
        if let scalar = unicodeScalars.first(where: \.isHiddenControl) {
            return "contains the invisible or control character U+" + String(format: "%04X", scalar.value)
                + "; remove it"
        }
        if let character = first(where: { $0.unicodeScalars.count > Self.scalarsPerCharacterLimit }) {
            return "has a character made of \(character.unicodeScalars.count) code points (at most "
                + "\(Self.scalarsPerCharacterLimit): a letter under a pile of combining marks); remove the marks"
        }
        return nil
    }
}
