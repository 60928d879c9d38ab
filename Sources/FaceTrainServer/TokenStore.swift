import FaceTrain
import Foundation

/// What a scoped token may do; the `--token-file` token is `admin`. The routes each role opens are
/// defined once, in `Route.roles(_:)`.
public enum TokenRole: String, Codable, Sendable, CaseIterable {
    /// Everything, as the `--token-file` token.
    case admin
    /// Registers people and uploads their crops (`POST /v1/users`, `POST /v1/users/{id}/photos`):
    /// an enrolment kiosk, which never sees who else is registered, the model, or the metrics.
    case enrol
    /// The app: reads the model (when `--private` closes them), recognises and verifies faces.
    case app
}

/// A scoped token as listed: its secret is never stored, only the SHA-256 of it.
public struct AccessToken: Codable, Sendable, Equatable {
    public var id: Int
    public var name: String
    public var role: TokenRole
    /// The SHA-256 of the secret, in hex.
    public var sha256: String
    public var createdAt: String
    /// The last request that used it, as of the last write of the file (the listing shows the
    /// time held in memory, which is newer).
    public var lastUsedAt: String?
}

/// Why the token store refused a change; the routes give each its status.
public enum TokenStoreError: Error, Equatable, CustomStringConvertible {
    case noSuchToken(id: Int)
    case invalidName(reason: String)

    public var description: String {
        switch self {
        case .noSuchToken(let id): "there is no token \(id) (it may be revoked already); GET /v1/tokens lists them"
        case .invalidName(let reason): "\"name\" \(reason); name the token after who uses it, e.g. \"front desk\""
        }
    }
}

/// The scoped tokens of a server, in `<data>/.tokens.json` (hidden, so `fit` and `data check` skip
/// it): created and revoked through the admin API, each change written durably (temporary file,
/// fsync, rename) before it is answered, so a revoked token is refused from the next request on,
/// across kills. Not the `--token-file` token, which stays outside the data folder.
///
/// "Last used" is kept in memory and written in the background, at most once a minute for all tokens
/// and within a minute of a use, and on `flush()`: a request never waits for a file write, and a kill
/// loses at most a minute of it.
public final class TokenStore: @unchecked Sendable {
    public let url: URL
    /// Seconds between two writes caused by "last used" alone.
    var lastUsedInterval: TimeInterval = 60

    /// The file's shape: the next id (ids are never reused) and the live tokens.
    struct File: Codable {
        var nextId: Int
        var tokens: [AccessToken]
    }

    static let fileName = ".tokens.json"
    /// The admin session key's file, beside the token list.
    static let sessionKeyName = ".session-key"
    /// The key admin session cookies are made with (with the `--token-file` token's digest): drawn
    /// once per data folder, so a cookie cannot be computed from a guess of the token, and logins
    /// survive a restart.
    public let sessionKey: String
    /// Prefix of every secret, so one found in a log or a chat is recognisable as this server's.
    static let secretPrefix = "ft_"

    /// Guards the memory below; `writing` orders the file writes, so an older snapshot never
    /// lands after a newer one (a revocation is never undone by a lazy "last used" write).
    private let lock = NSLock()
    private let writing = NSLock()
    private var tokens: [Int: AccessToken] = [:]
    private var byDigest: [String: Int] = [:]
    private var nextId = 1
    /// Use times not yet written, by token id.
    private var usedSinceWrite: [Int: Date] = [:]
    private var lastWrite = Date.distantPast
    private var writeScheduled = false
    private let background = DispatchQueue(label: "facetrain.tokens.last-used")

    /// Opens the store in `folder` (reading `.tokens.json` when it exists).
    public init(folder: URL) throws {
        url = folder.appendingPathComponent(Self.fileName)
        sessionKey = try Self.sessionKey(at: folder.appendingPathComponent(Self.sessionKeyName))
        guard FileSystem.kind(at: url) != .missing else { return }
        let file: File
        do {
            file = try JSONDecoder().decode(File.self, from: Data(contentsOf: url))
        } catch {
            throw DataProblem.invalidMetadata(
                path: url.path,
                reason: "is not a token list (\(error)); restore it from a backup, or delete it to revoke every "
                    + "scoped token (the --token-file token is not in it)")
        }
        nextId = file.nextId
        for token in file.tokens {
            tokens[token.id] = token
            byDigest[token.sha256] = token.id
            nextId = max(nextId, token.id + 1)
        }
    }

    /// The key in `file`, drawn and written there first when it is missing or not 64 hex digits.
    private static func sessionKey(at file: URL) throws -> String {
        if let text = try? String(contentsOf: file, encoding: .utf8), text.utf8.count == 64,
            text.allSatisfy(\.isHexDigit)
        {
            return text
        }
        var generator = SystemRandomNumberGenerator()
        let key = SHA256.hex((0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) })
        try FileSystem.replaceAtomically(Data(key.utf8), at: file)
        return key
    }

    /// Every live token, oldest first, with the last use held in memory.
    public func list() -> [AccessToken] {
        lock.lock()
        defer { lock.unlock() }
        return tokens.keys.sorted().map { current($0) }
    }

    /// Creates a token and returns it with its secret, which is shown this once and never stored.
    public func create(name: String, role: TokenRole) throws -> (token: AccessToken, secret: String) {
        let trimmed = name.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty, trimmed.count <= 100 else {
            throw TokenStoreError.invalidName(reason: "must be 1 to 100 characters")
        }
        if let problem = trimmed.displayProblem { throw TokenStoreError.invalidName(reason: problem) }
        var generator = SystemRandomNumberGenerator()
        let secret = Self.secretPrefix + SHA256.hex((0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) })
        writing.lock()
        defer { writing.unlock() }
        lock.lock()
        let token = AccessToken(
            id: nextId, name: trimmed, role: role, sha256: SHA256.hash(Data(secret.utf8)),
            createdAt: Manifest.timestamp(Date()), lastUsedAt: nil)
        var file = snapshot()
        lock.unlock()
        file.tokens.append(token)
        file.nextId = token.id + 1
        try write(file)
        lock.lock()
        tokens[token.id] = token
        byDigest[token.sha256] = token.id
        nextId = token.id + 1
        lock.unlock()
        return (token, secret)
    }

    /// Removes a token: from the file first, then from memory, so the next request with it is refused
    /// and a restart does not bring it back.
    @discardableResult
    public func revoke(_ id: Int) throws -> AccessToken {
        writing.lock()
        defer { writing.unlock() }
        lock.lock()
        guard let token = tokens[id] else {
            lock.unlock()
            throw TokenStoreError.noSuchToken(id: id)
        }
        var file = snapshot()
        lock.unlock()
        file.tokens.removeAll { $0.id == id }
        try write(file)
        lock.lock()
        tokens[id] = nil
        byDigest[token.sha256] = nil
        usedSinceWrite[id] = nil
        lock.unlock()
        return token
    }

    /// The token whose secret this is, recording its use; nil for any other text.
    public func authenticate(_ secret: String) -> AccessToken? {
        // Only a secret of ours is hashed: the admin token and garbage cost nothing here.
        guard secret.hasPrefix(Self.secretPrefix), secret.utf8.count == Self.secretPrefix.utf8.count + 64 else {
            return nil
        }
        let digest = SHA256.hash(Data(secret.utf8))
        let now = Date()
        lock.lock()
        defer { lock.unlock() }
        guard let id = byDigest[digest], let token = tokens[id] else { return nil }
        usedSinceWrite[id] = now
        // One write at most per interval, and within one of the use: a kill loses at most that much.
        if !writeScheduled {
            writeScheduled = true
            let wait = max(0, lastUsedInterval - now.timeIntervalSince(lastWrite))
            background.asyncAfter(deadline: .now() + wait) { [self] in try? flush() }
        }
        return token
    }

    /// Writes the use times held in memory (at most one write per `lastUsedInterval`, and at stop).
    public func flush() throws {
        writing.lock()
        defer { writing.unlock() }
        lock.lock()
        let pending = !usedSinceWrite.isEmpty
        let file = snapshot()
        writeScheduled = false
        lock.unlock()
        guard pending else { return }
        try write(file)
        lock.lock()
        for token in file.tokens where tokens[token.id] != nil {
            tokens[token.id]?.lastUsedAt = token.lastUsedAt
            if usedSinceWrite[token.id].map(Manifest.timestamp) == token.lastUsedAt { usedSinceWrite[token.id] = nil }
        }
        lastWrite = Date()
        lock.unlock()
    }

    /// The token with its newest use time; call with `lock` held.
    private func current(_ id: Int) -> AccessToken {
        var token = tokens[id]!
        if let used = usedSinceWrite[id] { token.lastUsedAt = Manifest.timestamp(used) }
        return token
    }

    /// The file as memory says it should be; call with `lock` held.
    private func snapshot() -> File {
        File(nextId: nextId, tokens: tokens.keys.sorted().map { current($0) })
    }

    private func write(_ file: File) throws {
        try FileSystem.replaceAtomically(try JSONText.data(file), at: url)
    }
}
