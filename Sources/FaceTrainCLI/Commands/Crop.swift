import FaceTrain
import FaceTrainSynthesis
import Foundation

/// `facetrain crop`: every photo of a folder (recursively) through the face detector, the largest
/// clear face (or every face) aligned by its 5 landmarks and written as a square JPEG under the
/// same relative path; refused photos are named with their reason. Not the choice of faces
/// (CropPlanner) nor the alignment (FaceAlignment), and never a file of the input folder changed.
struct Crop: Command {
    static let name = "crop"
    static let abstract = "Cut aligned face crops out of a folder of photos, for training or data check."
    static var options: [OptionSpec] {
        [
            .required("in", "dir", "Folder of photos, read recursively (JPEG, PNG, PGM/PPM)."),
            .required(
                "out", "dir",
                "Folder for the crops, <name>.jpg under the photo's relative folder; existing crops are "
                    + "never replaced. Must not be inside --in."),
            .option(
                "detector", "dir", "Detector folder written by `facetrain detector train`, or builtin.",
                default: "builtin"),
            .option(
                "template", "name",
                "Where the 5 landmarks go: celeba96 (the base's training crops) or arcface112.",
                default: AlignmentTemplate.celebaMean96.name),
            .option("size", "px", "Side of the square crops (default: the template's own, 96 or 112)."),
            .flag("all", "Crop every clear face as <name>_<k>.jpg, largest first, instead of the largest only."),
            .option("threshold", "score", "A face scores at least this (0 to 1).", default: "0.5"),
            .option("min-face", "px", "Refuse faces whose box is less high than this.", default: "24"),
            .option(
                "max-side", "px", "Shrink photos whose longer side is above this before detecting.", default: "640"),
            .option(
                "pad", "share",
                "Grey border added on every side before detecting, as a share of the side: 0.25 finds the faces of "
                    + "tight face crops (as the face check does); 0 suits photos.", default: "0"),
            .flag(
                "json",
                "Print one JSON object per line per photo: file, width, height, crops (file, score, box, "
                    + "outside) and refused; the summary goes to standard error."),
        ]
    }

    let input: URL
    let output: URL
    let detector: String
    let planner: CropPlanner
    let maximumSide: Int
    let padding: Double
    let json: Bool

    init(arguments: ParsedArguments) throws {
        try arguments.expectPositionals(atMost: 0)
        input = URL(fileURLWithPath: try arguments.required("in"))
        output = URL(fileURLWithPath: try arguments.required("out"))
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: input.path, isDirectory: &isDirectory), isDirectory.boolValue
        else {
            throw UsageError(
                message: "--in \(input.path) is not a folder.\nHINT: pass the folder that holds the photos.")
        }
        // Crops inside the photos' folder would be read as photos by the next run.
        let inputPath = realPath(input)
        let outputPath = realPath(output)
        guard outputPath != inputPath, !outputPath.hasPrefix(inputPath.hasSuffix("/") ? inputPath : inputPath + "/")
        else {
            throw UsageError(
                message: "--out \(output.path) is inside --in \(input.path).\n"
                    + "HINT: put the crops in a folder beside the photos, e.g. --out \(input.path)-crops.")
        }
        detector = try arguments.required("detector")
        let templateName: String = try arguments.required("template")
        guard let template = AlignmentTemplate.named(templateName) else {
            let names = AlignmentTemplate.all.map(\.name).joined(separator: ", ")
            throw UsageError(message: "--template \(templateName) is not a template.\nHINT: use one of \(names).")
        }
        let side: Int = arguments.given("size") ? try arguments.required("size") : Int(template.side)
        guard (16...1024).contains(side) else {
            throw UsageError(message: "--size must be 16...1024 pixels, got \(side)")
        }
        let threshold: Double = try arguments.required("threshold")
        guard (0...1).contains(threshold) else {
            throw UsageError(message: "--threshold must be between 0 and 1, got \(threshold)")
        }
        var planner = CropPlanner(template: template, side: side, threshold: threshold)
        planner.minimumFaceHeight = try arguments.required("min-face")
        guard planner.minimumFaceHeight >= 0 else {
            throw UsageError(message: "--min-face must be 0 or more pixels, got \(planner.minimumFaceHeight)")
        }
        planner.everyFace = arguments.flag("all")
        self.planner = planner
        maximumSide = try arguments.required("max-side")
        guard (32...8192).contains(maximumSide) else {
            throw UsageError(message: "--max-side must be 32...8192 pixels, got \(maximumSide)")
        }
        padding = try arguments.required("pad")
        guard (0...1).contains(padding) else {
            throw UsageError(message: "--pad must be between 0 and 1, got \(padding)")
        }
        json = arguments.flag("json")
    }

    /// One photo's line of `--json`.
    struct PhotoRecord: Encodable {
        struct CropRecord: Encodable {
            var file: String
            var score: Double
            var box: [Double]
            /// Share of the crop that repeats the photo's border.
            var outside: Double
        }
        var file: String
        var width: Int?
        var height: Int?
        var crops: [CropRecord] = []
        /// Why the photo gave no crop ("no face", "second face", ..., "unreadable", "crop exists").
        var refused: String?
        var detail: String?
    }

    func run() throws -> ExitCode {
        let model = try DetectorModel.resolve(detector)
        var faceDetector = FaceDetector(model: model.model, strides: model.manifest.strides, maximumSide: maximumSide)
        let photos = try photoPaths()
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var written = 0
        var refusedByReason: [String: Int] = [:]
        for relativePath in photos {
            var record = PhotoRecord(file: relativePath)
            defer {
                if let reason = record.refused { refusedByReason[reason, default: 0] += 1 }
                if json {
                    print(String(decoding: (try? encoder.encode(record)) ?? Data(), as: UTF8.self))
                } else if let reason = record.refused {
                    print("\(relativePath): refused, \(record.detail ?? reason)")
                }
            }
            let photo: Image
            do { photo = try ImageDecoder.decode(contentsOf: input.appendingPathComponent(relativePath)) } catch {
                (record.refused, record.detail) = ("unreadable", "unreadable (\(error))")
                continue
            }
            (record.width, record.height) = (photo.width, photo.height)
            let plan = planner.plan(
                faceDetector.detect(in: photo, padding: padding, scoreFloor: planner.threshold),
                photoWidth: photo.width,
                photoHeight: photo.height)
            if let refusal = plan.refusal {
                (record.refused, record.detail) = (refusal.name, refusal.description)
                continue
            }
            let stem = (relativePath as NSString).deletingPathExtension
            let names = plan.crops.indices.map { planner.everyFace ? "\(stem)_\($0 + 1).jpg" : "\(stem).jpg" }
            // All or nothing per photo, and nothing replaced: a clash leaves every crop of it unwritten.
            if let clash = names.first(where: { FileManager.default.fileExists(atPath: path(of: $0).path) }) {
                (record.refused, record.detail) = ("crop exists", "crop exists (\(path(of: clash).path))")
                continue
            }
            for (crop, name) in zip(plan.crops, names) {
                // The transform came from the planner, so it has an inverse and the warp gives a crop.
                let aligned = FaceAlignment.warp(photo, transform: crop.transform, side: planner.side)!
                // A grey photo gives a grey-looking RGB crop: the JPEG writer takes RGB.
                let rgb = aligned.image.converted(channels: 3)
                let data = try JPEGWriter.encode(rgb: rgb.pixels, width: rgb.width, height: rgb.height, quality: 95)
                let target = path(of: name)
                try FileManager.default.createDirectory(
                    at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
                try data.write(to: target, options: .withoutOverwriting)
                written += 1
                let box = crop.detection.box
                record.crops.append(
                    PhotoRecord.CropRecord(
                        file: name, score: crop.detection.score, box: [box.x, box.y, box.width, box.height],
                        outside: crop.outsideFraction))
            }
        }
        let refused = refusedByReason.values.reduce(0, +)
        let reasons = refusedByReason.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        let summary =
            "Read \(photos.count) photo\(photos.count == 1 ? "" : "s"), wrote \(written) crop\(written == 1 ? "" : "s")"
            + " into \(output.path); refused \(refused)" + (reasons.isEmpty ? "." : ": \(reasons).")
        if json { printError(summary) } else { print(summary) }
        if refusedByReason["crop exists"] != nil {
            printError(
                "HINT: existing crops are never replaced; move them away or choose another --out to cut those photos again."
            )
        }
        if written == 0 {
            printError(
                photos.isEmpty
                    ? "Error: no photos in \(input.path).\nHINT: --in must hold .jpg, .png, .pgm or .ppm files."
                    : "Error: no crop written.\nHINT: if the refusals above look wrong, try a lower --threshold or "
                        + "--min-face, or --all for photos with several faces.")
            return .failure
        }
        return .success
    }

    /// The crop file for a path relative to --out.
    private func path(of relativePath: String) -> URL { output.appendingPathComponent(relativePath) }

    /// The photos under --in, relative to it and sorted; hidden files and folders are skipped.
    private func photoPaths() throws -> [String] {
        guard let paths = ImageDecoder.imageFiles(under: input) else {
            throw UsageError(message: "--in \(input.path) cannot be read.\nHINT: check its permissions.")
        }
        return paths
    }
}
