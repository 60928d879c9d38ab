import Foundation

/// A data folder in a temporary directory, filled with small generated PGM crops; deleted on deinit.
final class TemporaryDataFolder {
    let root: URL

    init() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("facetrain-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: root) }

    /// A 32x32 grey PGM whose pixels depend on `seed`, so different seeds give different bytes.
    static func pgm(seed: Int, width: Int = 32, height: Int = 32) -> Data {
        var state = UInt64(truncatingIfNeeded: seed) &* 0x9E37_79B9_7F4A_7C15 &+ 1
        var bytes = Array("P5\n\(width) \(height)\n255\n".utf8)
        for _ in 0..<(width * height) {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            bytes.append(UInt8(truncatingIfNeeded: state >> 56))
        }
        return Data(bytes)
    }

    /// Writes `count` distinct crops into `<root>/<folder>/`, seeds starting at `seed`.
    @discardableResult
    func addImages(_ folder: String, count: Int, seed: Int, prefix: String = "img") throws -> [URL] {
        try (0..<count).map { index in try write("\(folder)/\(prefix)\(index).pgm", Self.pgm(seed: seed + index)) }
    }

    /// Writes raw bytes at a path relative to the root, creating folders.
    @discardableResult
    func write(_ relativePath: String, _ data: Data) throws -> URL {
        let url = root.appendingPathComponent(relativePath)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try data.write(to: url)
        return url
    }

    /// A valid folder: negatives 1 and 2 plus `users` users with `perUser` crops each, ids from 3.
    static func valid(users: Int = 3, perUser: Int = 6) throws -> TemporaryDataFolder {
        let folder = try TemporaryDataFolder()
        try folder.addImages("1", count: 6, seed: 10_000_000)
        try folder.addImages("2", count: 6, seed: 20_000_000)
        for user in 0..<users { try folder.addImages(String(user + 3), count: perUser, seed: 1000 * (user + 1)) }
        return folder
    }
}
