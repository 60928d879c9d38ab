import Foundation

/// A file that could not be written; names it and says why.
public struct FileWriteError: Error, CustomStringConvertible {
    public var path: String
    public var reason: String
    public var hint = "check that the folder exists, is writable and has free space."
    public var description: String { "cannot write \(path): \(reason). HINT: \(hint)" }

    init(path: String, code: Int32) {
        self.path = path
        self.reason = String(cString: strerror(code))
    }

    init(path: String, reason: String, hint: String) {
        self.path = path
        self.reason = reason
        self.hint = hint
    }
}

/// Writes files so that a crash leaves the old content or the new, never a mix.
public enum DurableFile {
    /// Throws unless `url` can take a new file: its folder exists, and the rename that installs the
    /// file would not replace a device, pipe, folder, link, read-only file, or anything of a model
    /// bundle or the models folder's `latest.json` (published versions are never changed).
    public static func checkTarget(_ url: URL) throws {
        func refuse(_ reason: String, _ hint: String = "choose a path for a new or ordinary file.") -> FileWriteError {
            FileWriteError(path: url.path, reason: reason, hint: hint)
        }
        let folder = url.deletingLastPathComponent()
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: folder.path, isDirectory: &isDirectory), isDirectory.boolValue
        else { throw refuse("its folder \(folder.path) does not exist", "create the folder first.") }
        // A bundle holds its manifest and checksums; a models folder its version counter.
        let exists = { (name: String) in
            FileManager.default.fileExists(atPath: folder.appendingPathComponent(name).path)
        }
        if exists("manifest.json") && exists("SHA256SUMS") {
            throw refuse("it is inside a model bundle, which is never changed")
        }
        if url.lastPathComponent == "latest.json" && exists(".last-version") {
            throw refuse("it is the models folder's latest.json, which only publish and rollback write")
        }
        var status = stat()
        guard lstat(url.path, &status) == 0 else { return }
        switch status.st_mode & S_IFMT {
        case S_IFREG where status.st_mode & S_IWUSR == 0:
            throw refuse("it is read-only; nothing was replaced")
        case S_IFREG: return
        case S_IFLNK: throw refuse("it is a symbolic link, which would be replaced; pass the path it points to")
        default: throw refuse("it exists and is not a regular file (a folder, device or pipe); nothing was replaced")
        }
    }

    /// Writes `data` to a temporary sibling, fsyncs it, renames it over `url` and fsyncs the folder
    /// (`FileSystem.replaceAtomically`), after `checkTarget`.
    public static func write(_ data: Data, to url: URL) throws {
        try checkTarget(url)
        do {
            try FileSystem.replaceAtomically(data, at: url)
        } catch let error as FileSystemError {
            throw FileWriteError(path: url.path, code: error.code)
        }
    }
}
