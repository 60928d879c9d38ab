import Foundation

/// POSIX steps for crash-safe writing: exclusive create, fsync, no-replace rename, directory sync.
///
/// Foundation's `Data.write(options: .atomic)` neither fsyncs nor syncs the directory, so a crash
/// can leave an empty file under the final name; these helpers do both.
package enum FileSystem {
    /// What `lstat` says is at a path.
    package enum Kind { case missing, regular, directory, symbolicLink, other }

    package static func kind(at url: URL) -> Kind {
        var status = stat()
        guard lstat(url.path, &status) == 0 else { return .missing }
        switch status.st_mode & S_IFMT {
        case S_IFREG: return .regular
        case S_IFDIR: return .directory
        case S_IFLNK: return .symbolicLink
        default: return .other
        }
    }

    /// Creates a directory and its parents.
    package static func createDirectory(_ url: URL) throws {
        var path = ""
        for component in url.standardizedFileURL.pathComponents {
            path = component == "/" ? "/" : (path.hasSuffix("/") ? path + component : path + "/" + component)
            if mkdir(path, 0o755) != 0 && errno != EEXIST {
                throw FileSystemError(operation: "create directory", path: path, code: errno)
            }
        }
        guard kind(at: url) == .directory else {
            throw FileSystemError(operation: "create directory", path: url.path, code: ENOTDIR)
        }
    }

    /// Writes `data` to a file that must not exist yet, fsyncs and closes it.
    package static func writeNewFile(_ data: Data, to url: URL, mode: mode_t = 0o644) throws {
        let descriptor = open(url.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard descriptor >= 0 else { throw FileSystemError(operation: "create", path: url.path, code: errno) }
        do {
            try writeAll(data, to: descriptor, path: url.path)
            guard fsync(descriptor) == 0 else { throw FileSystemError(operation: "sync", path: url.path, code: errno) }
        } catch {
            close(descriptor)
            unlink(url.path)
            throw error
        }
        guard close(descriptor) == 0 else { throw FileSystemError(operation: "close", path: url.path, code: errno) }
    }

    private static func writeAll(_ data: Data, to descriptor: Int32, path: String) throws {
        let result: Int32 = data.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                offset += written
            }
            return 0
        }
        if result != 0 { throw FileSystemError(operation: "write", path: path, code: result) }
    }

    /// fsyncs a file or directory.
    package static func sync(_ url: URL) throws {
        let descriptor = open(url.path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw FileSystemError(operation: "open", path: url.path, code: errno) }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else { throw FileSystemError(operation: "sync", path: url.path, code: errno) }
    }

    /// Renames without replacing an existing target (`renameat2(RENAME_NOREPLACE)` where the
    /// kernel and file system have it; otherwise a check first, which callers make safe by
    /// holding the models lock).
    package static func renameNoReplace(_ source: URL, to target: URL) throws {
        typealias RenameAt2 =
            @convention(c) (Int32, UnsafePointer<CChar>?, Int32, UnsafePointer<CChar>?, UInt32) -> Int32
        if let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "renameat2") {
            let renameat2 = unsafeBitCast(symbol, to: RenameAt2.self)
            let noReplace: UInt32 = 1
            if renameat2(AT_FDCWD, source.path, AT_FDCWD, target.path, noReplace) == 0 { return }
            let code = errno
            if code != EINVAL && code != ENOSYS {
                throw FileSystemError(operation: "rename \(source.lastPathComponent) to", path: target.path, code: code)
            }
        }
        guard kind(at: target) == .missing else {
            throw FileSystemError(operation: "rename \(source.lastPathComponent) to", path: target.path, code: EEXIST)
        }
        guard rename(source.path, target.path) == 0 else {
            throw FileSystemError(operation: "rename \(source.lastPathComponent) to", path: target.path, code: errno)
        }
    }

    /// Replaces the file at `url` in one step: a temporary file next to it, fsync, rename, and
    /// an fsync of the directory. `beforeRename` runs between the last two (tests pause there).
    package static func replaceAtomically(_ data: Data, at url: URL, beforeRename: (() -> Void)? = nil) throws {
        // Only a regular file is replaced: a link, pipe or folder there was not put by facetrain.
        if kind(at: url) != .missing && kind(at: url) != .regular {
            throw FileSystemError(operation: "replace (it is not a regular file)", path: url.path, code: EEXIST)
        }
        let directory = url.deletingLastPathComponent()
        let temporary = directory.appendingPathComponent(temporaryName(for: url.lastPathComponent))
        try writeNewFile(data, to: temporary)
        beforeRename?()
        guard rename(temporary.path, url.path) == 0 else {
            let code = errno
            unlink(temporary.path)
            throw FileSystemError(operation: "rename \(temporary.lastPathComponent) to", path: url.path, code: code)
        }
        try sync(directory)
    }

    /// ".<name>.tmp-<pid>-<random>": hidden, and recognisable as stale by `isTemporaryName`.
    package static func temporaryName(for name: String) -> String {
        temporaryPrefix(for: name) + "\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    }

    /// What every temporary file written on the way to `name` starts with.
    static func temporaryPrefix(for name: String) -> String { ".\(name).tmp-" }

    package static func isTemporaryName(_ name: String) -> Bool { name.hasPrefix(".") && name.contains(".tmp-") }

    /// Names in a directory, without "." and "..".
    package static func entries(of url: URL) throws -> [String] {
        let listing = try listing(of: url)
        return (listing.names + listing.notUTF8).sorted()
    }

    /// Entry names, apart from those whose bytes are not UTF-8 (shown with U+FFFD in `notUTF8`):
    /// such a name cannot be passed back to the file system through a Swift string.
    static func listing(of url: URL) throws -> (names: [String], notUTF8: [String]) {
        guard let directory = opendir(url.path) else {
            throw FileSystemError(operation: "list", path: url.path, code: errno)
        }
        defer { closedir(directory) }
        var names: [String] = []
        var notUTF8: [String] = []
        while let entry = readdir(directory) {
            let (name, valid) = withUnsafePointer(to: entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: 256) {
                    (String(cString: $0), String(validatingCString: $0) != nil)
                }
            }
            if name == "." || name == ".." { continue }
            if valid { names.append(name) } else { notUTF8.append(name) }
        }
        return (names.sorted(), notUTF8.sorted())
    }

    /// Removes a file or a directory tree without following symbolic links.
    package static func removeTree(_ url: URL) throws {
        switch kind(at: url) {
        case .missing:
            return
        case .directory:
            chmod(url.path, 0o755)
            for name in try entries(of: url) { try removeTree(url.appendingPathComponent(name)) }
            guard rmdir(url.path) == 0 || errno == ENOENT else {
                throw FileSystemError(operation: "remove", path: url.path, code: errno)
            }
        default:
            guard unlink(url.path) == 0 || errno == ENOENT else {
                throw FileSystemError(operation: "remove", path: url.path, code: errno)
            }
        }
    }
}

/// An exclusive `flock(2)` on a file, held until `release()` or until the process dies —
/// which is what lets another process prove a staging area dead.
final class FileLock {
    let url: URL
    private var descriptor: Int32

    private init(url: URL, descriptor: Int32) {
        self.url = url
        self.descriptor = descriptor
    }

    /// Opens (creating if asked) and locks `url`; waits for the lock, or returns nil at once
    /// when `wait` is false and another open file holds it.
    static func acquire(_ url: URL, create: Bool, exclusiveCreate: Bool = false, wait: Bool) throws -> FileLock? {
        var flags = O_RDWR | O_CLOEXEC
        if create { flags |= O_CREAT }
        if exclusiveCreate { flags |= O_EXCL }
        let descriptor = open(url.path, flags, 0o644)
        guard descriptor >= 0 else { throw FileSystemError(operation: "open lock file", path: url.path, code: errno) }
        while flock(descriptor, wait ? LOCK_EX : LOCK_EX | LOCK_NB) != 0 {
            let code = errno
            if code == EINTR { continue }
            close(descriptor)
            if code == EWOULDBLOCK { return nil }
            throw FileSystemError(operation: "lock", path: url.path, code: code)
        }
        return FileLock(url: url, descriptor: descriptor)
    }

    /// What a non-blocking try on a listed lock file found.
    enum Attempt {
        case acquired(FileLock)
        /// Another open file holds it: its writer is alive.
        case held
        /// It is gone: its holder released and unlinked it since it was listed.
        case missing
    }

    /// Tries a lock file that a directory listing named, without creating it or waiting: its
    /// holder unlinks it when done, possibly between the listing and this call, which is
    /// `.missing`, not an error.
    static func tryListed(_ url: URL) throws -> Attempt {
        do {
            guard let lock = try acquire(url, create: false, wait: false) else { return .held }
            return .acquired(lock)
        } catch let error as FileSystemError where error.code == ENOENT {
            return .missing
        }
    }

    /// The open descriptor, for a holder's note written into the lock file itself.
    var descriptorForNote: Int32 { descriptor }

    /// Unlocks and closes; safe to call twice.
    func release() {
        guard descriptor >= 0 else { return }
        close(descriptor)
        descriptor = -1
    }

    deinit { release() }
}
