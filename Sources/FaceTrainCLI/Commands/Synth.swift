import FaceTrain
import FaceTrainSynthesis
import Foundation

/// `facetrain synth`: writes a deterministic synthetic data set of face crops, strangers and non-faces, or
/// with `--scenes` photos with faces at known boxes and 5 landmarks for the face detector.
struct Synth: Command {
    static let name = "synth"
    static let abstract = "Generate synthetic face crops, or with --scenes photos of faces, for demos and tests."
    /// Options that shape the crops only, refused with `--scenes`.
    static let cropOptions = [
        "users", "per-user", "size", "negatives", "unknown-identities", "per-unknown", "face-check",
    ]
    /// Options that shape the scenes only, refused without `--scenes`.
    static let sceneOptions = ["max-side", "dev-fraction"]
    static var options: [OptionSpec] {
        [
            .required("out", "dir", "Folder to create: <id>/<n>.jpg per class and users.json, or the scenes."),
            .option(
                "scenes", "n",
                "Write n photos with faces at known boxes and 5 landmarks instead of crops: images/, "
                    + "annotations.jsonl and splits.json as in faces_in_photos."),
            .option(
                "max-side", "px", "With --scenes: longer side of each photo.",
                default: String(SceneConfiguration.defaultMaximumSide)),
            .option(
                "dev-fraction", "f", "With --scenes: share of the photos in the dev split.",
                default: String(SceneConfiguration.defaultDevFraction)),
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
            .option(
                "face-check", "on|off",
                "on: a face the face check refuses (about 1 drawing in 100) is drawn again, so `fit` takes "
                    + "every crop; off: write the faces as drawn (to measure the check on them).",
                default: "on"),
            .flag("force", "Write into a non-empty folder, replacing only the files this command generates."),
        ]
    }
    /// What to write: crops for recognition, or scenes for the detector.
    enum Output: Equatable {
        case crops(SynthesisConfiguration)
        case scenes(SceneConfiguration)
    }
    let output: Output
    /// The check each face is drawn for (crops only), nil with `--face-check off`.
    let faceCheck: FaceCheck?

    /// The crop settings, nil with `--scenes`.
    var configuration: SynthesisConfiguration? {
        if case .crops(let configuration) = output { return configuration }
        return nil
    }

    init(arguments: ParsedArguments) throws {
        try arguments.expectPositionals(atMost: 0)
        let out: String = try arguments.required("out")
        guard !out.isEmpty else { throw UsageError(message: "The value '' is invalid for '--out <dir>'") }
        if arguments.given("scenes") {
            if let option = Self.cropOptions.first(where: arguments.given) {
                throw UsageError(
                    message: "--\(option) shapes face crops and does not apply to --scenes.\n"
                        + "HINT: drop --\(option), or drop --scenes to write crops.")
            }
            let scenes = SceneConfiguration(
                outputDirectory: URL(fileURLWithPath: out), sceneCount: try arguments.required("scenes"),
                seed: try arguments.required("seed"), maximumSide: try arguments.required("max-side"),
                devFraction: try arguments.required("dev-fraction"), replaceExisting: arguments.flag("force"))
            do {
                try scenes.validate()
            } catch let error as SynthesisError {
                throw UsageError(message: error.description)
            }
            output = .scenes(scenes)
            faceCheck = nil
            return
        }
        if let option = Self.sceneOptions.first(where: arguments.given) {
            throw UsageError(
                message: "--\(option) applies to scenes only.\nHINT: add --scenes N, or drop --\(option).")
        }
        let configuration = SynthesisConfiguration(
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
        output = .crops(configuration)
        faceCheck = try DataOptions.faceCheck(arguments)
        // A drawn face is at least half its crop's height: below twice the check's minimum face
        // height some faces could never pass, however often they were drawn.
        if let faceCheck, Double(configuration.imageSize) < 2 * faceCheck.thresholds.minimumFaceHeight {
            let smallest = Int((2 * faceCheck.thresholds.minimumFaceHeight).rounded(.up))
            throw UsageError(
                message: "--size \(configuration.imageSize) draws faces below the face check's smallest face "
                    + "(\(Int(faceCheck.thresholds.minimumFaceHeight)) px high).\n"
                    + "HINT: use --size \(smallest) or more, or --face-check off to write them unchecked.")
        }
    }

    func run() throws -> ExitCode {
        switch output {
        case .crops(let configuration): return try writeCrops(configuration)
        case .scenes(let configuration): return try writeScenes(configuration)
        }
    }

    private func writeScenes(_ configuration: SceneConfiguration) throws -> ExitCode {
        let summary = try SyntheticScenes.generate(configuration: configuration)
        let path = summary.outputDirectory.path
        let empty = summary.annotations.filter { $0.faces.isEmpty }.count
        print(
            "Wrote \(Self.count(summary.annotations.count, "scene")) (longer side \(configuration.maximumSide) px) "
                + "to \(path) in " + String(format: "%.1f s:", summary.seconds))
        print(
            "  \(Self.count(summary.faceCount, "face")) with boxes and 5 landmarks, "
                + "\(Self.count(empty, "photo")) without a face")
        print(
            "  splits: \(summary.trainFiles.count) train, \(summary.devFiles.count) dev "
                + "(\(path)/\(SyntheticScenes.splitsFileName))")
        print("  annotations: \(path)/\(SyntheticScenes.annotationsFileName)")
        warnAboutLeftovers(summary.leftoverFiles, in: path)
        return .success
    }

    private func writeCrops(_ configuration: SynthesisConfiguration) throws -> ExitCode {
        let summary = try SyntheticFaces.generate(configuration: configuration, faceCheck: faceCheck)
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
        if !summary.redrawn.isEmpty {
            let examples = summary.redrawn.prefix(3).joined(separator: ", ") + (summary.redrawn.count > 3 ? ", …" : "")
            print("  drawn again, the face check refusing the first drawing: \(summary.redrawn.count) (\(examples))")
        }
        warnAboutLeftovers(summary.leftoverFiles, in: path)
        return .success
    }

    private func warnAboutLeftovers(_ leftovers: [String], in path: String) {
        guard !leftovers.isEmpty else { return }
        let examples = leftovers.prefix(3).joined(separator: ", ")
        printError(
            "warning: \(Self.count(leftovers.count, "file")) in \(path) were not written by this run "
                + "and were kept (\(examples)\(leftovers.count > 3 ? ", …" : "")); delete them or "
                + "use an empty --out so they do not mix into the data set.")
    }

    /// "1 crop", "2 crops".
    private static func count(_ number: Int, _ singular: String, _ plural: String? = nil) -> String {
        "\(number) " + (number == 1 ? singular : plural ?? singular + "s")
    }
}
