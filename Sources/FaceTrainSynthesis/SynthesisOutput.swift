import Foundation

// How `facetrain synth` writes its output folder, for crops and scenes alike: refuse a non-empty folder
// unless replacing is allowed, and fill a new folder beside it so an interrupted run leaves nothing
// half-written behind. Not what goes into the folder (SyntheticFaces, SyntheticScenes).

enum SynthesisOutput {
    /// Fills `output` through `write`, which receives the folder to write into, and returns whether `output`
    /// was missing or empty before.
    ///
    /// A new output folder is filled as a hidden sibling folder and renamed into place at the end; an existing
    /// empty folder (possibly a symbolic link or a mount point) is filled in place. A non-empty folder is refused
    /// unless `replaceExisting` is set; then `write` replaces its own files and keeps the others.
    static func fill(_ output: URL, replaceExisting: Bool, write: (URL) throws -> Void) throws -> Bool {
        let fileManager = FileManager.default
        var isDirectory: ObjCBool = false
        let exists = fileManager.fileExists(atPath: output.path, isDirectory: &isDirectory)
        if exists && !isDirectory.boolValue { throw SynthesisError.outputIsNotDirectory(path: output.path) }
        var isEmpty = true
        if exists {
            do {
                isEmpty = try fileManager.contentsOfDirectory(atPath: output.path).isEmpty
            } catch {
                throw SynthesisError.cannotWrite(path: output.path, reason: reason(error))
            }
        }
        if !isEmpty && !replaceExisting { throw SynthesisError.outputNotEmpty(path: output.path) }

        if exists {
            try write(output)
            return isEmpty
        }
        let staging = try makeStagingDirectory(for: output)
        do {
            try write(staging)
            do {
                try fileManager.moveItem(at: staging, to: output)
            } catch {
                throw SynthesisError.cannotWrite(path: output.path, reason: reason(error))
            }
        } catch {
            try? fileManager.removeItem(at: staging)
            throw error
        }
        return true
    }

    /// Creates `folder` and its parents.
    static func createDirectory(_ folder: URL) throws {
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        } catch {
            throw SynthesisError.cannotCreateDirectory(path: folder.path, reason: reason(error))
        }
    }

    /// Writes `data` to `file` atomically.
    static func write(_ data: Data, to file: URL) throws {
        do {
            try data.write(to: file, options: .atomic)
        } catch {
            throw SynthesisError.cannotWrite(path: file.path, reason: reason(error))
        }
    }

    /// A new hidden folder beside `output`, creating `output`'s parents when needed.
    private static func makeStagingDirectory(for output: URL) throws -> URL {
        try createDirectory(output.deletingLastPathComponent())
        let suffix = "\(ProcessInfo.processInfo.processIdentifier)-\(UInt32.random(in: 0...UInt32.max))"
        let staging = output.deletingLastPathComponent()
            .appendingPathComponent(".\(output.lastPathComponent).partial-\(suffix)")
        do {
            try FileManager.default.createDirectory(at: staging, withIntermediateDirectories: false)
        } catch {
            throw SynthesisError.cannotCreateDirectory(path: staging.path, reason: reason(error))
        }
        return staging
    }

    /// Regular files under `directory` whose relative paths are not in `expected`, sorted.
    static func leftoverFiles(in directory: URL, expected: Set<String>) -> [String] {
        guard let enumerator = FileManager.default.enumerator(atPath: directory.path) else { return [] }
        var leftovers: [String] = []
        while let path = enumerator.nextObject() as? String {
            var isDirectory: ObjCBool = false
            let full = directory.appendingPathComponent(path).path
            guard FileManager.default.fileExists(atPath: full, isDirectory: &isDirectory), !isDirectory.boolValue else {
                continue
            }
            if !expected.contains(path) { leftovers.append(path) }
        }
        return leftovers.sorted()
    }

    /// The most readable text of a file-system error: the POSIX reason when there is one, without a final period.
    static func reason(_ error: Error) -> String {
        let nsError = error as NSError
        var text = nsError.localizedDescription
        if let underlying = nsError.userInfo[NSUnderlyingErrorKey] as? NSError,
            underlying.domain == NSPOSIXErrorDomain
        {
            text = String(cString: strerror(Int32(underlying.code)))
        } else if nsError.domain == NSPOSIXErrorDomain {
            text = String(cString: strerror(Int32(nsError.code)))
        } else if let cocoa = error as? CocoaError {
            switch cocoa.code {
            case .fileNoSuchFile, .fileReadNoSuchFile: text = "a folder on the path does not exist or cannot be created"
            case .fileWriteNoPermission, .fileReadNoPermission: text = "permission denied"
            case .fileWriteVolumeReadOnly: text = "read-only file system"
            case .fileWriteOutOfSpace: text = "no space left on device"
            case .fileWriteFileExists: text = "a file is in the way"
            default: break
            }
        }
        while text.hasSuffix(".") { text.removeLast() }
        return text
    }
}

/// Errors raised on worker threads, kept by item index so the reported one does not depend on scheduling.
final class FailureList: @unchecked Sendable {
    private let lock = NSLock()
    private var failures: [(Int, SynthesisError)] = []

    func record(_ index: Int, _ error: SynthesisError) {
        lock.lock()
        failures.append((index, error))
        lock.unlock()
    }

    var first: SynthesisError? {
        lock.lock()
        defer { lock.unlock() }
        return failures.min { $0.0 < $1.0 }?.1
    }
}
