import Foundation

/// The claim a long-lived writer (`facetrain serve`, `facetrain erase`) holds on its data and
/// models folders: an exclusive `flock` on `<folder>/.owner.lock`, taken before anything in the
/// folder is written and held until the process ends, so a second writer is refused before it
/// can hand out an id, rewrite a record or mix crops. Short writers (`fit`, `publish`) take the
/// models folder's own `.lock` per step instead (ModelRepository); this is not that lock.
public final class FolderOwnership {
    static let lockName = ".owner.lock"
    private var locks: [FileLock]

    private init(locks: [FileLock]) { self.locks = locks }

    /// Claims every folder (creating it) for `command`, or throws `FolderInUse` naming the
    /// process that holds one; a refused claim releases what it had taken.
    public static func claim(_ folders: [URL], for command: String) throws -> FolderOwnership {
        var taken: [FileLock] = []
        for folder in folders {
            try FileSystem.createDirectory(folder)
            let url = folder.appendingPathComponent(lockName)
            guard let lock = try FileLock.acquire(url, create: true, wait: false) else {
                for lock in taken { lock.release() }
                let holder = (try? String(contentsOf: url, encoding: .utf8))?
                    .trimmingCharacters(in: .whitespacesAndNewlines)
                throw FolderInUse(folder: folder.path, holder: holder?.isEmpty == false ? holder : nil)
            }
            // Who holds it, for the refusal a second writer prints; the lock, not this text, decides.
            let note = Data("\(command) (pid \(getpid()))\n".utf8)
            _ = ftruncate(lock.descriptorForNote, 0)
            _ = note.withUnsafeBytes { pwrite(lock.descriptorForNote, $0.baseAddress, $0.count, 0) }
            taken.append(lock)
        }
        return FolderOwnership(locks: taken)
    }

    /// Lets go of every folder (also done when the process ends).
    public func release() {
        for lock in locks { lock.release() }
        locks = []
    }
}

/// Another process owns a folder this command must write.
public struct FolderInUse: Error, CustomStringConvertible {
    public var folder: String
    /// "facetrain serve (pid 1234)", when the holder wrote it.
    public var holder: String?

    public var description: String {
        "\(folder) is in use by \(holder ?? "another facetrain process"); two writers on one folder would hand out "
            + "the same ids and mix crops. Stop that process first (to erase a person while a server runs, send "
            + "DELETE /v1/users/{id} to it)"
    }
}
