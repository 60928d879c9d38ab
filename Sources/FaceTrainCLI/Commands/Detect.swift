import FaceTrain
import FaceTrainSynthesis
import Foundation

/// `facetrain detect`: every face in each photo, with its box, 5 landmarks and score; `--draw`
/// writes each photo with them drawn. Not training or scoring a detector (Detector.swift).
struct Detect: Command {
    static let name = "detect"
    static let abstract = "Find the faces in photos: box, 5 landmarks and score of each; optionally draw them."
    static let arguments = "<image>..."
    static var options: [OptionSpec] {
        [
            .option(
                "detector", "dir", "Detector folder written by `facetrain detector train`, or builtin.",
                default: "builtin"),
            .option("threshold", "score", "Report faces scoring at least this (0 to 1).", default: "0.5"),
            .option(
                "max-side", "px", "Shrink photos whose longer side is above this before detecting.", default: "640"),
            .option("draw", "dir", "Write each photo with its faces drawn into this folder, as <name>.faces.jpg."),
            .flag(
                "json",
                "Print one JSON object per line per photo: file, width, height and faces with box [x, y, w, h], "
                    + "score and landmarks5 (score_detection.py reads these lines)."),
        ]
    }

    let images: [String]
    let detector: String
    let threshold: Double
    let maximumSide: Int
    let draw: URL?
    let json: Bool

    init(arguments: ParsedArguments) throws {
        images = arguments.positionals
        guard !images.isEmpty else { throw UsageError(message: "Missing expected argument '<image>...'") }
        detector = try arguments.required("detector")
        threshold = try arguments.required("threshold")
        guard (0...1).contains(threshold) else {
            throw UsageError(message: "--threshold must be between 0 and 1, got \(threshold)")
        }
        maximumSide = try arguments.required("max-side")
        guard (32...8192).contains(maximumSide) else {
            throw UsageError(message: "--max-side must be 32...8192 pixels, got \(maximumSide)")
        }
        draw = arguments.string("draw").map { URL(fileURLWithPath: $0) }
        json = arguments.flag("json")
    }

    func run() throws -> ExitCode {
        let model = try DetectorModel.resolve(detector)
        var faceDetector = FaceDetector(model: model.model, strides: model.manifest.strides, maximumSide: maximumSide)
        if let draw { try FileManager.default.createDirectory(at: draw, withIntermediateDirectories: true) }
        var failures = 0
        for file in images {
            let url = URL(fileURLWithPath: file)
            let photo: Image
            do { photo = try ImageDecoder.decode(contentsOf: url) } catch {
                failures += 1
                printError("Error: \(error)")
                continue
            }
            let faces = faceDetector.detect(in: photo, scoreFloor: threshold)
            if json {
                print(
                    try DetectionPredictions.line(
                        file: file, detections: faces, width: photo.width, height: photo.height))
            } else {
                print("\(file): \(faces.count) face\(faces.count == 1 ? "" : "s") (\(photo.width) x \(photo.height))")
                for face in faces {
                    let box = face.box
                    let points = face.landmarks.map { String(format: "(%.1f, %.1f)", $0.x, $0.y) }.joined(
                        separator: " ")
                    print(
                        String(
                            format: "  score %.3f  box x %.1f y %.1f w %.1f h %.1f  landmarks %@", face.score, box.x,
                            box.y,
                            box.width, box.height, points))
                }
            }
            if let draw {
                let drawn = DetectionDrawing.draw(faces, on: photo)
                let name = url.deletingPathExtension().lastPathComponent + ".faces.jpg"
                let data = try JPEGWriter.encode(
                    rgb: drawn.pixels, width: drawn.width, height: drawn.height, quality: 90)
                try data.write(to: draw.appendingPathComponent(name))
            }
        }
        if failures > 0 {
            printError("Error: \(failures) of \(images.count) photo(s) could not be read")
            return .failure
        }
        return .success
    }
}
