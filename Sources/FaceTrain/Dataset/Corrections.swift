import Foundation

/// One correction: a face the server recognised, filed by an admin under the right class.
public struct CorrectionRecord: Codable, Sendable, Equatable {
    public var correctedAt: String
    /// SHA-256 of the stored crop.
    public var crop: String
    /// The class it was filed under: a user id, 2 (stranger) or 1 (not a face).
    public var filedUnder: Int
    /// The version that recognised it, and the user it decided on (nil: it rejected the face).
    public var version: Int?
    public var decidedUser: Int?

    public init(correctedAt: String, crop: String, filedUnder: Int, version: Int?, decidedUser: Int?) {
        self.correctedAt = correctedAt
        self.crop = crop
        self.filedUnder = filedUnder
        self.version = version
        self.decidedUser = decidedUser
    }
}

/// `<data>/.corrections.jsonl`: the corrections filed, oldest first. The crops themselves live in
/// their class folders like any other; `fit` reads the log only to keep them in training (an
/// admin asked for exactly these to be learnt, so none is held out).
public final class CorrectionLog: @unchecked Sendable {
    public static let name = ".corrections.jsonl"
    private let file: JSONLines<CorrectionRecord>
    private let lock = NSLock()

    public init(data: URL) { file = JSONLines(url: data.appendingPathComponent(Self.name)) }

    public var url: URL { file.url }

    public func records() throws -> [CorrectionRecord] { try lock.withLock { try file.read() } }

    public func append(_ record: CorrectionRecord) throws { try lock.withLock { try file.append(record) } }

    /// Removes the corrections that filed a face under `user`, decided on them, or hold one of
    /// their crops; returns how many.
    public func forget(user: Int, cropHashes: Set<String>) throws -> Int {
        try lock.withLock {
            let records = try file.read()
            let kept = records.filter {
                $0.filedUnder != user && $0.decidedUser != user && !cropHashes.contains($0.crop)
            }
            if kept.count != records.count { try file.write(kept) }
            return records.count - kept.count
        }
    }
}
