import Foundation

/// A system call on a path failed: what every file step in Support throws. It says what the errno
/// means for the user; callers that know more (the bundle writer, the user store) say it in their
/// own errors. Not for refusals decided before any system call (those are the callers' errors).
public struct FileSystemError: Error, CustomStringConvertible, Equatable, Sendable {
    /// What was being done, completing "could not …": "create directory", "sync", "rename a to".
    public var operation: String
    public var path: String
    /// The errno.
    public var code: Int32

    public init(operation: String, path: String, code: Int32) {
        self.operation = operation
        self.path = path
        self.code = code
    }

    /// The system's words for `code`, such as "No space left on device".
    public var reason: String { String(cString: strerror(code)) }

    public var description: String { "could not \(operation) \(path): \(reason)\n" + Self.hint(forErrno: code) }

    /// What to do about an errno, as a "HINT: …" line.
    public static func hint(forErrno code: Int32) -> String {
        switch code {
        case ENOSPC, EDQUOT, EFBIG: "HINT: the disk is full (or a size limit was hit); free space and run again."
        case EROFS: "HINT: the file system is read-only; choose a writable directory."
        case EACCES, EPERM: "HINT: no permission; check the owner and mode of the directory."
        case ENOENT: "HINT: check the path exists."
        case EWOULDBLOCK: "HINT: another facetrain process holds it; wait for it to finish."
        default: "HINT: check the path and run again."
        }
    }
}
