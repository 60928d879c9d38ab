import FaceTrainEngine
import Foundation

/// Points inside the staging writer where tests (and only tests) pause a process to kill it.
public enum StagingCheckpoint: String, CaseIterable, Sendable {
    /// A file (or weights.h5) was written.
    case fileWritten = "file-written"
    /// manifest.json and SHA256SUMS are written, not yet synced or verified.
    case listsWritten = "lists-written"
    /// Everything is synced and verified; the rename is next.
    case readyToRename = "ready-to-rename"
    /// The version directory is visible; the models directory is not synced yet.
    case renamed
}

/// Writes one new bundle version safely.
///
/// `init` reserves the next version under the models lock and creates a hidden staging
/// directory `models/.staging-<version>-<pid>-<random>/` whose lock file stays flocked while
/// this object lives. Files are written there; `publishVersion` completes the manifest and
/// SHA256SUMS, fsyncs every file and the directory, verifies the result and makes it visible
/// as `models/<version>/` with one rename. A process killed at any moment leaves either no
/// version or a complete one, and never touches latest.json; the next writer removes staging
/// directories whose lock it can take (their writer is dead).
///
/// ```swift
/// let staging = try BundleStaging(modelsDirectory: models)
/// try staging.writeWeights(model)
/// try staging.write(metricsJSON, named: "metrics.json")
/// var manifest = Manifest(version: staging.version, definition: model.definition, ...)
/// try staging.write(coreML(embedding: try manifest.contentSHA256), named: "FaceClassifier.mlmodel")
/// let published = try staging.publishVersion(manifest: manifest)
/// ```
public final class BundleStaging {
    public let modelsDirectory: URL
    /// The version this bundle will be published as.
    public let version: Int
    /// The hidden directory being filled.
    public let directory: URL
    /// Called at each checkpoint; tests use it to pause the process.
    public var checkpoint: ((StagingCheckpoint) -> Void)?

    private var lock: FileLock?
    private let lockURL: URL
    private var open = true

    /// Names `write(_:named:)` refuses: the writer creates them itself.
    static let reservedNames: Set<String> = [
        BundleVerifier.manifestName, BundleVerifier.checksumsName, BundleVerifier.weightsName,
    ]

    /// Reserves the next version in `modelsDirectory` (created if missing) and its staging area.
    public init(modelsDirectory: URL) throws {
        let repository = ModelRepository(directory: modelsDirectory)
        let reservation = try repository.withLock { () throws -> (Int, URL, URL, FileLock) in
            // Count dead reservations too, then clear them: numbers are never handed out twice.
            let version = try repository.nextVersion()
            try repository.removeStaleEntries()
            try repository.recordAllocated(version)
            let token =
                ModelRepository.stagingPrefix
                + "\(version)-\(getpid())-\(String(UInt32.random(in: 0...UInt32.max), radix: 16))"
            let lockURL = modelsDirectory.appendingPathComponent(token + ".lock")
            guard let lock = try FileLock.acquire(lockURL, create: true, exclusiveCreate: true, wait: false) else {
                throw BundleError.io(operation: "lock", path: lockURL.path, code: EWOULDBLOCK)
            }
            let directory = modelsDirectory.appendingPathComponent(token)
            guard mkdir(directory.path, 0o755) == 0 else {
                let code = errno
                unlink(lockURL.path)
                lock.release()
                throw BundleError.io(operation: "create directory", path: directory.path, code: code)
            }
            return (version, directory, lockURL, lock)
        }
        self.modelsDirectory = modelsDirectory
        (version, directory, lockURL, lock) = reservation
    }

    deinit { discard() }

    /// Adds a file (metrics.json, FaceClassifier.mlmodel, model.onnx…) with the given bytes.
    public func write(_ data: Data, named name: String) throws {
        try ensureOpen()
        if let reason = BundleStaging.nameProblem(name) {
            throw BundleError.invalidFileName(name: name, reason: reason)
        }
        try FileSystem.writeNewFile(data, to: directory.appendingPathComponent(name))
        checkpoint?(.fileWritten)
    }

    /// Writes weights.h5 for `model`.
    public func writeWeights(_ model: TrainedModel) throws {
        try ensureOpen()
        let url = directory.appendingPathComponent(BundleVerifier.weightsName)
        try WeightsFile.write(model, to: url)
        checkpoint?(.fileWritten)
    }

    /// Completes and publishes the bundle as `models/<version>/` and returns that URL.
    ///
    /// Fills `manifest.files`, writes manifest.json and SHA256SUMS, makes the files read-only,
    /// fsyncs everything, verifies the staged bundle, then renames it into place (never over
    /// an existing directory) and syncs the models directory. On error nothing is published
    /// and the staging area remains until `discard()`.
    @discardableResult
    public func publishVersion(manifest: Manifest) throws -> URL {
        try ensureOpen()
        guard manifest.version == version else {
            throw BundleError.manifestVersionMismatch(staged: version, manifest: manifest.version)
        }
        guard FileSystem.kind(at: directory.appendingPathComponent(BundleVerifier.weightsName)) == .regular else {
            throw BundleError.missingWeights(path: directory.path)
        }
        var complete = manifest
        complete.files = try FileSystem.entries(of: directory).map { name in
            let digest = try SHA256.hashFile(at: directory.appendingPathComponent(name))
            return Manifest.FileEntry(path: name, sha256: digest.sha256, size: digest.size)
        }
        let manifestData = try complete.encoded()
        try FileSystem.writeNewFile(manifestData, to: directory.appendingPathComponent(BundleVerifier.manifestName))
        let sums = ChecksumList.render(
            complete.files.map { ($0.path, $0.sha256) } + [(BundleVerifier.manifestName, SHA256.hash(manifestData))])
        try FileSystem.writeNewFile(Data(sums.utf8), to: directory.appendingPathComponent(BundleVerifier.checksumsName))
        checkpoint?(.listsWritten)

        for name in try FileSystem.entries(of: directory) {
            let url = directory.appendingPathComponent(name)
            chmod(url.path, 0o444)
            try FileSystem.sync(url)
        }
        try FileSystem.sync(directory)
        let verification = BundleVerifier.verify(directory, expectedVersion: version)
        guard verification.isValid else {
            throw BundleError.verificationFailed(path: directory.path, problems: verification.problems)
        }
        checkpoint?(.readyToRename)

        let target = modelsDirectory.appendingPathComponent(String(version))
        try ModelRepository(directory: modelsDirectory).withLock {
            try FileSystem.renameNoReplace(directory, to: target)
        }
        open = false
        checkpoint?(.renamed)
        try FileSystem.sync(modelsDirectory)
        releaseLock()
        return target
    }

    /// Deletes the staging area and frees the reservation; does nothing after publishing.
    public func discard() {
        guard open else { return }
        open = false
        try? FileSystem.removeTree(directory)
        releaseLock()
    }

    private func releaseLock() {
        guard let lock else { return }
        // Unlink while still holding the lock, so no cleaner sees it free before it is gone.
        unlink(lockURL.path)
        lock.release()
        self.lock = nil
    }

    private func ensureOpen() throws {
        guard open else { throw BundleError.stagingClosed(path: directory.path) }
    }

    /// Why `name` cannot be a bundle file written with `write(_:named:)`.
    static func nameProblem(_ name: String) -> String? {
        if reservedNames.contains(name) { return "the bundle writer creates \(name) itself" }
        if name.isEmpty || name.hasPrefix(".") { return "names must be non-empty and not start with '.'" }
        if name.contains("/") || name.contains("\\") || name.contains("\0") || name.contains("\n") {
            return "names must be plain file names without slashes or control characters"
        }
        return nil
    }
}
