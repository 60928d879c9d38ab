import Foundation

/// A models directory: `models/<version>/` bundles, `models/latest.json` naming the published
/// one, and the hidden bookkeeping that keeps concurrent writers apart.
///
/// Hidden entries: `.lock` (flock held while allocating versions or moving latest.json),
/// `.last-version` (the highest version ever allocated, so numbers never repeat even after a
/// directory is deleted), `.staging-<version>-<pid>-<random>/` plus its `.lock` (a bundle being
/// written; its writer holds the flock until it publishes or dies), `.withdrawn-<version>/` (a
/// bundle an erasure is removing), `.owner.lock` (FolderOwnership), `.embeddings/`, `.checkpoints/`
/// and `.jobs/` (the embeddings cache, interrupted fits, the server's job records).
public struct ModelRepository: Sendable {
    public let directory: URL

    static let lockName = ".lock"
    static let counterName = ".last-version"
    static let stagingPrefix = ".staging-"
    /// A bundle being removed by an erasure (`withdraw(trainedOn:)`); gone once the erasure ends.
    static let withdrawnPrefix = ".withdrawn-"
    /// The pointer file the app's `model/info` endpoint can serve as is.
    public static let pointerName = "latest.json"

    public init(directory: URL) {
        self.directory = directory
    }

    /// Makes sure bundles can be written here before a long job starts: the folder exists (or is
    /// created) and its lock file opens, so a bad `--out` fails at once instead of after training.
    public func prepareForWriting() throws {
        try FileSystem.createDirectory(directory)
        let lock = try FileLock.acquire(
            directory.appendingPathComponent(ModelRepository.lockName), create: true, wait: true)
        lock?.release()
    }

    /// The directory of a version.
    public func bundleURL(version: Int) -> URL { directory.appendingPathComponent(String(version)) }

    /// Versions present as directories, ascending. Only canonical names count ("7", not "07").
    public func versions() throws -> [Int] {
        guard FileSystem.kind(at: directory) != .missing else { return [] }
        return try FileSystem.entries(of: directory).compactMap { name in
            guard let version = ModelRepository.parseVersion(name),
                FileSystem.kind(at: directory.appendingPathComponent(name)) == .directory
            else { return nil }
            return version
        }.sorted()
    }

    /// A positive integer written without sign or leading zeros, or nil.
    public static func parseVersion(_ text: String) -> Int? {
        guard let first = text.utf8.first, first != UInt8(ascii: "0"), text.utf8.allSatisfy({ (48...57).contains($0) }),
            let value = Int(text), value > 0
        else { return nil }
        return value
    }

    /// The published pointer, or nil when nothing was published.
    public func latestPointer() throws -> LatestPointer? {
        let url = directory.appendingPathComponent(ModelRepository.pointerName)
        guard FileSystem.kind(at: url) != .missing else { return nil }
        do {
            return try JSONDecoder().decode(LatestPointer.self, from: Data(contentsOf: url))
        } catch {
            throw BundleError.unreadablePointer(path: url.path, detail: "\(error)")
        }
    }

    /// The bundle directory for "latest" (the published version) or a version number.
    public func resolve(_ reference: String) throws -> URL {
        if reference == "latest" {
            guard let pointer = try latestPointer() else {
                throw BundleError.nothingPublished(modelsDirectory: directory.path)
            }
            return bundleURL(version: pointer.version)
        }
        guard let version = ModelRepository.parseVersion(reference),
            FileSystem.kind(at: bundleURL(version: version)) == .directory
        else {
            throw BundleError.versionNotFound(modelsDirectory: directory.path, reference: reference)
        }
        return bundleURL(version: version)
    }

    /// A bundle named on a command line: a bundle directory ("models/7"), "models/latest", or
    /// a bare "7" / "latest" inside `modelsDirectory`.
    public static func locateBundle(_ argument: String, modelsDirectory: URL) throws -> URL {
        let url = URL(fileURLWithPath: argument)
        if FileSystem.kind(at: url) == .directory {
            if FileSystem.kind(at: url.appendingPathComponent(BundleVerifier.manifestName)) != .missing
                || parseVersion(url.lastPathComponent) != nil
            {
                return url
            }
            throw BundleError.notABundle(path: url.path)
        }
        let last = url.lastPathComponent
        if !argument.contains("/"), !last.isEmpty, last.utf8.allSatisfy({ (48...57).contains($0) }),
            parseVersion(last) == nil
        {
            // "0", "007" or a number too large: meant as a version, so say so in the models folder.
            throw BundleError.versionNotFound(modelsDirectory: modelsDirectory.path, reference: argument)
        }
        guard last == "latest" || parseVersion(last) != nil else { throw BundleError.notABundle(path: url.path) }
        if !argument.contains("/") { return try ModelRepository(directory: modelsDirectory).resolve(last) }
        return try ModelRepository(directory: url.deletingLastPathComponent()).resolve(last)
    }

    // MARK: Locking and allocation

    /// Runs `body` holding the models lock (waits for other writers).
    func withLock<T>(_ body: () throws -> T) throws -> T {
        try FileSystem.createDirectory(directory)
        guard
            let lock = try FileLock.acquire(
                directory.appendingPathComponent(ModelRepository.lockName), create: true, wait: true)
        else { throw BundleError.io(operation: "lock", path: directory.path, code: EWOULDBLOCK) }
        defer { lock.release() }
        return try body()
    }

    /// Removes staging areas whose writer died and temporary files of interrupted pointer
    /// updates; returns their names. Call with the models lock held.
    @discardableResult
    func removeStaleEntries() throws -> [String] {
        var removed: [String] = []
        let names = try FileSystem.entries(of: directory)
        for name in names {
            let url = directory.appendingPathComponent(name)
            if FileSystem.isTemporaryName(name) || name.hasPrefix(ModelRepository.withdrawnPrefix) {
                // Temporary files and withdrawn bundles are only written under the models lock, which we hold.
                try FileSystem.removeTree(url)
                removed.append(name)
            } else if name.hasPrefix(ModelRepository.stagingPrefix) && name.hasSuffix(".lock") {
                // Held: its writer lives. Missing: its writer finished since the listing.
                guard case .acquired(let lock) = try FileLock.tryListed(url) else { continue }
                // Nobody holds it: the writer is gone. Directory first, then the lock file.
                let staging = directory.appendingPathComponent(String(name.dropLast(".lock".count)))
                try FileSystem.removeTree(staging)
                unlink(url.path)
                lock.release()
                removed.append(String(name.dropLast(".lock".count)))
            } else if name.hasPrefix(ModelRepository.stagingPrefix),
                FileSystem.kind(at: directory.appendingPathComponent(name + ".lock")) == .missing
            {
                // Writers create the lock file before the directory, under the models lock.
                try FileSystem.removeTree(url)
                removed.append(name)
            }
        }
        return removed
    }

    /// A staging area whose writer is alive (its lock is held), by path; nil when none is.
    func liveStagingArea() throws -> String? {
        guard FileSystem.kind(at: directory) == .directory else { return nil }
        for name in try FileSystem.entries(of: directory)
        where name.hasPrefix(ModelRepository.stagingPrefix) && name.hasSuffix(".lock") {
            let url = directory.appendingPathComponent(name)
            switch try FileLock.tryListed(url) {
            case .held: return String(url.path.dropLast(".lock".count))
            case .acquired(let lock): lock.release()
            case .missing: continue  // its writer finished since the listing
            }
        }
        return nil
    }

    /// The next free version: above every directory, live staging area, the published
    /// version and the highest number ever allocated. Call with the models lock held.
    func nextVersion() throws -> Int {
        var highest = try versions().last ?? 0
        if let pointer = try? latestPointer() { highest = max(highest, pointer.version) }
        let counterURL = directory.appendingPathComponent(ModelRepository.counterName)
        if let text = try? String(contentsOf: counterURL, encoding: .utf8),
            let recorded = Int(text.trimmingCharacters(in: .whitespacesAndNewlines))
        {
            highest = max(highest, recorded)
        }
        for name in try FileSystem.entries(of: directory) where name.hasPrefix(ModelRepository.stagingPrefix) {
            let token = name.dropFirst(ModelRepository.stagingPrefix.count)
            if let number = token.split(separator: "-").first.flatMap({ Int($0) }) { highest = max(highest, number) }
        }
        return highest + 1
    }

    /// Records `version` as allocated, durably. Call with the models lock held.
    func recordAllocated(_ version: Int) throws {
        try FileSystem.replaceAtomically(
            Data("\(version)\n".utf8), at: directory.appendingPathComponent(ModelRepository.counterName))
    }

    // MARK: Listing

    /// One line of `facetrain list`.
    public struct VersionSummary: Codable, Sendable, Equatable {
        public var version: Int
        public var createdAt: String?
        public var users: Int?
        public var userAccuracy: Double?
        public var isLatest: Bool
        /// Empty when the bundle verified.
        public var problems: [BundleProblem]
    }

    /// Every version with its headline facts, verifying each bundle.
    public func summaries() throws -> [VersionSummary] {
        let latest = try? latestPointer()
        return try versions().map { version in
            let verification = BundleVerifier.verify(bundleURL(version: version))
            let manifest = verification.manifest
            return VersionSummary(
                version: version, createdAt: manifest?.createdAt, users: manifest?.users.count,
                userAccuracy: verification.metrics?.userAccuracy ?? manifest?.metrics["user_accuracy"],
                isLatest: latest?.version == version, problems: verification.problems)
        }
    }
}
