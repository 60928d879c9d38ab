import FaceTrain
import FaceTrainSynthesis
import Foundation

/// `facetrain synth`: writes a deterministic synthetic data set of face crops, strangers and non-faces.
struct Synth: Command {
    static let name = "synth"
    static let abstract = "Generate a synthetic data set of face crops for demos and tests."
    static var options: [OptionSpec] {
        [
            .required("out", "dir", "Folder to create: <id>/<n>.jpg per class and users.json."),
            .option("users", "n", "Enrolled people; their ids start at 3.", default: "20"),
            .option("per-user", "n", "Crops per enrolled person.", default: "25"),
            .option("seed", "n", "Same seed and counts give byte-identical files.", default: "1"),
            .option(
                "size", "px", "Width and height of each crop.",
                default: String(SynthesisConfiguration.defaultImageSize)),
            .option(
                "negatives", "n", "Crops of class 1 (not a face).",
                default: String(SynthesisConfiguration.defaultNonFaceCount)),
            .option(
                "unknown-identities", "n", "Strangers in class 2 (unknown person).",
                default: String(SynthesisConfiguration.defaultUnknownIdentityCount)),
            .option(
                "per-unknown", "n", "Crops per stranger.",
                default: String(SynthesisConfiguration.defaultImagesPerUnknownIdentity)),
            .flag("force", "Write into a non-empty folder, replacing only the files this command generates."),
        ]
    }
    let configuration: SynthesisConfiguration

    init(arguments: ParsedArguments) throws {
        try arguments.expectPositionals(atMost: 0)
        let out: String = try arguments.required("out")
        guard !out.isEmpty else { throw UsageError(message: "The value '' is invalid for '--out <dir>'") }
        configuration = SynthesisConfiguration(
            outputDirectory: URL(fileURLWithPath: out), userCount: try arguments.required("users"),
            imagesPerUser: try arguments.required("per-user"), seed: try arguments.required("seed"),
            imageSize: try arguments.required("size"), nonFaceCount: try arguments.required("negatives"),
            unknownIdentityCount: try arguments.required("unknown-identities"),
            imagesPerUnknownIdentity: try arguments.required("per-unknown"), replaceExisting: arguments.flag("force"))
        do {
            try configuration.validate()
        } catch let error as SynthesisError {
            throw UsageError(message: error.description)
        }
    }

    func run() throws -> ExitCode {
        let summary = try SyntheticFaces.generate(configuration: configuration)
        let path = summary.outputDirectory.path
        let counts = summary.imageCounts
        let firstID = SyntheticFaces.firstUserID
        let lastID = firstID + configuration.userCount - 1
        let size = configuration.imageSize
        print(
            "Wrote \(Self.count(summary.imageCount, "crop")) of \(size)x\(size) to \(path) in "
                + String(format: "%.1f s:", summary.seconds))
        print(
            "  users \(firstID == lastID ? "\(firstID)" : "\(firstID)-\(lastID)"): "
                + "\(Self.count(configuration.userCount, "person", "people")), "
                + "\(Self.count(configuration.imagesPerUser, "crop")) each")
        print(
            "  class \(SyntheticFaces.unknownPersonLabel) (unknown person): "
                + "\(Self.count(counts[SyntheticFaces.unknownPersonLabel] ?? 0, "crop")) of "
                + Self.count(configuration.unknownIdentityCount, "stranger"))
        print(
            "  class \(SyntheticFaces.nonFaceLabel) (not a face): "
                + Self.count(counts[SyntheticFaces.nonFaceLabel] ?? 0, "crop"))
        print("  names and positions: \(path)/\(SyntheticFaces.usersFileName)")
        if !summary.leftoverFiles.isEmpty {
            let examples = summary.leftoverFiles.prefix(3).joined(separator: ", ")
            printError(
                "warning: \(Self.count(summary.leftoverFiles.count, "file")) in \(path) were not written by this run "
                    + "and were kept (\(examples)\(summary.leftoverFiles.count > 3 ? ", …" : "")); delete them or "
                    + "use an empty --out so they do not mix into the data set.")
        }
        return .success
    }

    /// "1 crop", "2 crops".
    private static func count(_ number: Int, _ singular: String, _ plural: String? = nil) -> String {
        "\(number) " + (number == 1 ? singular : plural ?? singular + "s")
    }
}
