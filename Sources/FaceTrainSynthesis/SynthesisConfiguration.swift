import Foundation

/// Settings of one synthetic data set: who is in it, how many crops, and where they go.
public struct SynthesisConfiguration: Sendable, Equatable {
    /// Folder that receives `<label>/<image>.jpg` and `users.json`.
    public var outputDirectory: URL
    /// Enrolled people, labelled 3, 4, … (labels 1 and 2 are the reserved negative classes).
    public var userCount: Int
    public var imagesPerUser: Int
    /// The same seed and counts always give byte-identical files.
    public var seed: UInt64
    /// Width and height of every crop in pixels.
    public var imageSize: Int
    /// Crops of class 1, "not a face".
    public var nonFaceCount: Int
    /// People of class 2, "unknown person": strangers who are not among the users.
    public var unknownIdentityCount: Int
    public var imagesPerUnknownIdentity: Int
    /// Allows writing into a non-empty folder; only the files this run generates are replaced.
    public var replaceExisting: Bool

    public static let defaultImageSize = 64
    /// Four times a typical user's 25 crops: "not a face" is a broad class and benefits from many examples.
    public static let defaultNonFaceCount = 100
    /// Many strangers with few crops each, so class 2 means "any other face", not a few specific people.
    public static let defaultUnknownIdentityCount = 40
    public static let defaultImagesPerUnknownIdentity = 3
    /// Largest accepted crop size; larger crops add nothing for a 64×64 classifier and cost time and disk.
    public static let maximumImageSize = 512
    /// Smallest accepted crop size at which eyes, nose and mouth still cover a few pixels.
    public static let minimumImageSize = 16

    /// A configuration with the default crop size and negative classes.
    public init(
        outputDirectory: URL, userCount: Int, imagesPerUser: Int, seed: UInt64,
        imageSize: Int = defaultImageSize, nonFaceCount: Int = defaultNonFaceCount,
        unknownIdentityCount: Int = defaultUnknownIdentityCount,
        imagesPerUnknownIdentity: Int = defaultImagesPerUnknownIdentity, replaceExisting: Bool = false
    ) {
        self.outputDirectory = outputDirectory
        self.userCount = userCount
        self.imagesPerUser = imagesPerUser
        self.seed = seed
        self.imageSize = imageSize
        self.nonFaceCount = nonFaceCount
        self.unknownIdentityCount = unknownIdentityCount
        self.imagesPerUnknownIdentity = imagesPerUnknownIdentity
        self.replaceExisting = replaceExisting
    }

    /// Throws `SynthesisError.invalidConfiguration` for counts or sizes that cannot make a data set.
    public func validate() throws {
        func check(_ condition: Bool, _ message: String) throws {
            if !condition { throw SynthesisError.invalidConfiguration(message) }
        }
        try check(userCount >= 1, "the user count must be at least 1, not \(userCount)")
        try check(imagesPerUser >= 1, "the images per user must be at least 1, not \(imagesPerUser)")
        try check(nonFaceCount >= 0, "the non-face count cannot be negative (\(nonFaceCount))")
        try check(unknownIdentityCount >= 0, "the unknown-identity count cannot be negative (\(unknownIdentityCount))")
        try check(
            imagesPerUnknownIdentity >= 1,
            "the images per unknown identity must be at least 1, not \(imagesPerUnknownIdentity)")
        try check(
            (Self.minimumImageSize...Self.maximumImageSize).contains(imageSize),
            "the image size must be within \(Self.minimumImageSize)...\(Self.maximumImageSize), not \(imageSize)")
        let total = userCount.multipliedReportingOverflow(by: imagesPerUser)
        let strangers = unknownIdentityCount.multipliedReportingOverflow(by: imagesPerUnknownIdentity)
        try check(
            !total.overflow && !strangers.overflow
                && total.partialValue + strangers.partialValue + nonFaceCount
                    <= 10_000_000,
            "more than 10 million images were requested")
    }
}

/// Why a synthetic data set could not be written.
public enum SynthesisError: Error, CustomStringConvertible, Equatable {
    case invalidConfiguration(String)
    /// The output folder already holds files and replacing was not allowed.
    case outputNotEmpty(path: String)
    /// The output path exists and is a file.
    case outputIsNotDirectory(path: String)
    case cannotCreateDirectory(path: String, reason: String)
    case cannotWrite(path: String, reason: String)
    case encodingFailed(path: String, reason: String)
    /// Every drawing of a face was refused by the face check it was drawn for.
    case refusedByFaceCheck(path: String, drawings: Int, reason: String)

    public var description: String {
        switch self {
        case .invalidConfiguration(let message):
            return "Invalid synthesis settings: \(message)."
        case .outputNotEmpty(let path):
            return "The output folder \(path) is not empty.\n"
                + "HINT: choose a new folder, or pass --force to replace the files this command generates there."
        case .outputIsNotDirectory(let path):
            return "The output path \(path) is a file, not a folder.\nHINT: choose a folder path for --out."
        case .cannotCreateDirectory(let path, let reason):
            return "Cannot create the folder \(path): \(reason).\n"
                + "HINT: check that the parent folder exists and is writable, or choose another --out."
        case .cannotWrite(let path, let reason):
            return "Cannot write \(path): \(reason).\nHINT: check free disk space and permissions of the output folder."
        case .encodingFailed(let path, let reason):
            return "Cannot encode \(path): \(reason)."
        case .refusedByFaceCheck(let path, let drawings, let reason):
            return "The face check refused all \(drawings) drawings of \(path) (last: \(reason)).\n"
                + "HINT: pass --face-check off to write the faces as drawn; the check normally takes 99 in 100."
        }
    }
}
