import Foundation

/// Something wrong with a data folder that stops a run before training (unless `--skip-bad`
/// applies). Each case names the path and says what to do.
public enum DataProblem: Error, Sendable, Equatable, CustomStringConvertible {
    case missingFolder(path: String)
    case unreadableImage(path: String, reason: String)
    case folderNotAnId(path: String)
    case emptyUser(path: String)
    case tooFewImages(path: String, count: Int, minimum: Int)
    case duplicateAcrossUsers(paths: [String])
    case missingNegativeClass(label: Int, path: String)
    case invalidMetadata(path: String, reason: String)
    case reservedIdInMetadata(source: String, id: Int)
    case conflictingMetadata(id: Int, sources: [String])
    case noUsers(path: String)
    case notAFolder(path: String)
    case unreadableFolder(path: String, reason: String)
    /// The face check refused the image; `kind` names the reason ("no_face", ...).
    case refusedFace(path: String, kind: String, reason: String, hint: String)

    /// Machine-readable kind, the key of `--json` reports.
    public var kind: String {
        switch self {
        case .missingFolder: "missing_folder"
        case .unreadableImage: "unreadable_image"
        case .folderNotAnId: "folder_not_an_id"
        case .emptyUser: "empty_user"
        case .tooFewImages: "too_few_images"
        case .duplicateAcrossUsers: "duplicate_across_users"
        case .missingNegativeClass: "missing_negative_class"
        case .invalidMetadata: "invalid_metadata"
        case .reservedIdInMetadata: "reserved_id_in_metadata"
        case .conflictingMetadata: "conflicting_metadata"
        case .noUsers: "no_users"
        case .notAFolder: "not_a_folder"
        case .unreadableFolder: "unreadable_folder"
        case .refusedFace(_, let kind, _, _): kind
        }
    }

    /// The file or folder the problem is about.
    public var path: String {
        switch self {
        case .missingFolder(let path), .unreadableImage(let path, _), .folderNotAnId(let path), .emptyUser(let path),
            .noUsers(let path), .unreadableFolder(let path, _), .notAFolder(let path),
            .tooFewImages(let path, _, _), .missingNegativeClass(_, let path), .invalidMetadata(let path, _),
            .refusedFace(let path, _, _, _):
            path
        case .duplicateAcrossUsers(let paths): paths.first ?? ""
        case .reservedIdInMetadata(let source, _): source
        case .conflictingMetadata(_, let sources): sources.first ?? ""
        }
    }

    public var description: String {
        switch self {
        case .missingFolder(let path):
            "\(path): no such folder. HINT: pass the folder that holds one sub-folder per user id (users/<id>/*.jpg)."
        case .unreadableImage(let path, let reason):
            "\(path): unreadable image: \(reason.replacingOccurrences(of: "\n", with: " "))"
                + (reason.contains("HINT")
                    ? " (or pass --skip-bad to train without it)"
                    : " HINT: replace or delete the file, or pass --skip-bad to train without it.")
        case .folderNotAnId(let path):
            "\(path): folder name is not a user id (a positive integer). "
                + "HINT: rename it to the user's id, or move it out of the data folder."
        case .emptyUser(let path):
            "\(path): user folder has no images. HINT: add the user's face crops or remove the folder."
        case .tooFewImages(let path, let count, let minimum):
            "\(path): only \(count) image\(count == 1 ? "" : "s"), at least \(minimum) needed. "
                + "HINT: record more crops of this person, or lower --min-images."
        case .duplicateAcrossUsers(let paths):
            "the same image is in more than one class: \(paths.joined(separator: ", ")). "
                + "HINT: keep it only in the folder of the person it shows."
        case .missingNegativeClass(let label, let path):
            ClassLabel(id: label) == .notAFace
                ? "\(path): class 1 (not a face) is missing or empty. "
                    + "HINT: put images that are not faces there (background, walls, objects) so the model can reject "
                    + "them; `facetrain synth` can make some."
                : "\(path): class 2 (unknown person) is missing or empty. "
                    + "HINT: put faces of people who are not registered there, so the model learns to say 'unknown'."
        case .invalidMetadata(let path, let reason):
            "\(path): \(reason)."
        case .reservedIdInMetadata(let source, let id):
            "\(source): gives a person the id \(id), which is reserved (1 = not a face, 2 = unknown person). "
                + "HINT: user ids 1 and 2 usually come from a database counter starting at 1; "
                + "renumber those people (e.g. add an offset) or start the counter at 3."
        case .conflictingMetadata(let id, let sources):
            "user \(id) is described differently in \(sources.joined(separator: " and ")). "
                + "HINT: keep one description, or make them agree."
        case .unreadableFolder(let path, let reason):
            "\(path): cannot list this folder (\(reason)). "
                + "HINT: give the user running facetrain read and execute permission on it."
        case .notAFolder(let path):
            "\(path): is a file, not a folder. "
                + "HINT: pass the folder that holds one sub-folder per user id (users/<id>/*.jpg)."
        case .refusedFace(let path, _, let reason, let hint):
            "\(path): refused by the face check: \(reason). HINT: \(hint); or pass --skip-bad to train without "
                + "it, or --face-check off if the check is wrong about it."
        case .noUsers(let path):
            "\(path): no user folders. "
                + "HINT: add one folder of face crops per registered person, named by the person's id (3 or more)."
        }
    }
}

/// A note about the data that does not stop a run: the run says it and goes on.
public struct DataWarning: Sendable, Equatable, Codable, CustomStringConvertible {
    public var kind: String
    public var path: String
    public var message: String
    public var description: String { "\(path): \(message)" }
}
