import Foundation

/// Why a bundle could not be written, opened, published or rolled back.
public enum BundleError: Error, CustomStringConvertible, Equatable {
    /// A system call on a path failed; `code` is the errno.
    case io(operation: String, path: String, code: Int32)
    /// The directory has no manifest.json.
    case notABundle(path: String)
    /// The bundle failed verification; every problem names its file.
    case verificationFailed(path: String, problems: [BundleProblem])
    /// A file name the staging writer does not accept.
    case invalidFileName(name: String, reason: String)
    /// The manifest handed to `publishVersion` carries another version than the staging area.
    case manifestVersionMismatch(staged: Int, manifest: Int)
    /// `publishVersion` was called before `writeWeights`.
    case missingWeights(path: String)
    /// The staging area was already published or discarded.
    case stagingClosed(path: String)
    /// No such version in the models directory.
    case versionNotFound(modelsDirectory: String, reference: String)
    /// `latest` was asked for but nothing was published.
    case nothingPublished(modelsDirectory: String)
    /// models/latest.json exists but cannot be read.
    case unreadablePointer(path: String, detail: String)
    /// A JSON file of the bundle cannot be decoded.
    case unreadableJSON(path: String, detail: String)
    /// Rollback target is not older than the published version.
    case rollbackNotEarlier(target: Int, published: Int)

    public var description: String {
        switch self {
        case .io(let operation, let path, let code):
            let reason = String(cString: strerror(code))
            return "could not \(operation) \(path): \(reason)\n" + BundleError.hint(forErrno: code)
        case .notABundle(let path):
            return "\(path) is not a model bundle: it has no manifest.json\n"
                + "HINT: pass a version directory such as models/7, or the models directory with --models."
        case .verificationFailed(let path, let problems):
            let lines = problems.map { "  \($0)" }.joined(separator: "\n")
            return "bundle \(path) failed verification:\n\(lines)\n"
                + "HINT: a published bundle is never modified; restore it from a copy or retrain, "
                + "and run 'facetrain verify \(path)' to check."
        case .invalidFileName(let name, let reason):
            return "cannot add '\(name)' to a bundle: \(reason)"
        case .manifestVersionMismatch(let staged, let manifest):
            return "the manifest says version \(manifest) but the staging area holds version \(staged)\n"
                + "HINT: set manifest.version = staging.version before computing contentSHA256."
        case .missingWeights(let path):
            return
                "staging area \(path) has no weights.h5\nHINT: call writeWeights(_:) before publishVersion(manifest:)."
        case .stagingClosed(let path):
            return "staging area \(path) was already published or discarded"
        case .versionNotFound(let directory, let reference):
            return "no model version '\(reference)' in \(directory)\n"
                + "HINT: 'facetrain list --models \(directory)' shows the versions."
        case .nothingPublished(let directory):
            return "nothing is published in \(directory) (no latest.json)\n"
                + "HINT: publish a version with 'facetrain publish \(directory)/<version>', or name a version."
        case .unreadablePointer(let path, let detail):
            return "cannot read \(path): \(detail)\n"
                + "HINT: re-point it with 'facetrain rollback <version>' or 'facetrain publish'."
        case .unreadableJSON(let path, let detail):
            return "cannot read \(path): \(detail)"
        case .rollbackNotEarlier(let target, let published):
            return "version \(target) is not earlier than the published version \(published)\n"
                + "HINT: rollback moves latest back; use 'facetrain publish' to move it forward."
        }
    }

    /// What to do about a failed system call.
    static func hint(forErrno code: Int32) -> String {
        switch code {
        case ENOSPC, EDQUOT, EFBIG:
            return "HINT: the disk is full (or a size limit was hit); free space and run again. "
                + "Published versions and latest.json were not changed."
        case EROFS:
            return "HINT: the file system is read-only; point --models at a writable directory. "
                + "Published versions and latest.json were not changed."
        case EACCES, EPERM:
            return "HINT: no permission; check the owner and mode of the models directory. "
                + "Published versions and latest.json were not changed."
        case ENOENT:
            return "HINT: check the path exists."
        default:
            return "HINT: published versions and latest.json were not changed."
        }
    }
}

/// One thing wrong with a bundle, naming the file it concerns.
public struct BundleProblem: Sendable, Equatable, Codable, CustomStringConvertible {
    /// Path relative to the bundle ("weights.h5"), or nil for the bundle as a whole.
    public var file: String?
    public var message: String

    public init(file: String?, message: String) {
        self.file = file
        self.message = message
    }

    public var description: String { file.map { "\($0): \(message)" } ?? message }
}
