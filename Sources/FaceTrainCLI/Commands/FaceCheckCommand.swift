import FaceTrain
import Foundation

/// `facetrain face-check`: whether each image would pass the face check that `data check`, `fit`
/// and the server's upload apply to faces, with what it measured; nothing is written. Not the rules
/// (FaceCheck, CropPlanner) nor cutting crops (`facetrain crop`).
struct FaceCheckCommand: Command {
    static let name = "face-check"
    static let abstract =
        "Say whether images pass the face check of fit and the server (one clear, large, sharp, lit face), and why not."
    static let arguments = "<image or folder>..."
    static var options: [OptionSpec] {
        [
            .option(
                "detector", "dir", "Detector folder written by `facetrain detector train`, or builtin.",
                default: "builtin"),
            .option(
                "face-score", "score",
                "Count detections scoring at least this as faces (to explore; fit and the server use the default).",
                default: String(FaceCheckThresholds.standard.faceScore)),
            .flag(
                "json",
                "Print one JSON object per line per image: file, accepted, kind (crop, photo or refused), refusal, "
                    + "detail and the measures (score, faces, second_area_ratio, face_height, face_share, sharpness, "
                    + "brightness)."),
        ]
    }

    let paths: [String]
    let detector: String
    let thresholds: FaceCheckThresholds
    let json: Bool

    init(arguments: ParsedArguments) throws {
        paths = arguments.positionals
        guard !paths.isEmpty else { throw UsageError(message: "Missing expected argument '<image or folder>...'") }
        detector = try arguments.required("detector")
        var thresholds = FaceCheckThresholds.standard
        thresholds.faceScore = try arguments.required("face-score")
        guard (0...1).contains(thresholds.faceScore) else {
            throw UsageError(message: "--face-score must be between 0 and 1, got \(thresholds.faceScore)")
        }
        self.thresholds = thresholds
        json = arguments.flag("json")
    }

    struct Record: Encodable {
        var file: String
        var accepted: Bool
        /// "crop" (kept as it is), "photo" (an aligned crop of its face is used) or "refused".
        var kind: String
        var refusal: String?
        var detail: String?
        var measures: FaceCheckMeasures?
    }

    func run() throws -> ExitCode {
        let files = try imageFiles()
        guard !files.isEmpty else {
            printError("Error: no images in \(paths.joined(separator: ", ")).\nHINT: pass .jpg, .png or .pgm files.")
            return .failure
        }
        let model = try DetectorModel.resolve(detector)
        let check = FaceCheck(
            detector: FaceDetector(model: model.model, strides: model.manifest.strides), thresholds: thresholds)
        let records = check.map(files.count) { check, index in
            let file = files[index]
            let image: Image
            do { image = try ImageDecoder.decode(contentsOf: URL(fileURLWithPath: file)) } catch {
                return Record(
                    file: file, accepted: false, kind: "refused", refusal: "unreadable", detail: "\(error)",
                    measures: nil)
            }
            let result = check.examine(image)
            return Record(
                file: file, accepted: result.accepted,
                kind: result.refusal != nil ? "refused" : result.alignedCrop != nil ? "photo" : "crop",
                refusal: result.refusal?.kind,
                detail: result.refusal.map { "\($0.description). HINT: \($0.hint)." }, measures: result.measures)
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.keyEncodingStrategy = .convertToSnakeCase
        var refusedByReason: [String: Int] = [:]
        for record in records {
            if let refusal = record.refusal { refusedByReason[refusal, default: 0] += 1 }
            if json {
                print(String(decoding: try encoder.encode(record), as: UTF8.self))
            } else if let detail = record.detail {
                print("\(record.file): refused: \(detail)")
            } else if let measures = record.measures {
                print(
                    "\(record.file): passes as a \(record.kind) (score "
                        + String(
                            format: "%.2f, face %.0f px, sharpness %.3f, brightness %.0f)", measures.score,
                            measures.faceHeight, measures.sharpness, measures.brightness))
            }
        }
        let refused = refusedByReason.values.reduce(0, +)
        let reasons = refusedByReason.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        let summary =
            "\(records.count - refused) of \(records.count) image\(records.count == 1 ? "" : "s") pass"
            + (refused == 0 ? "." : "; refused: \(reasons).")
        if json { printError(summary) } else { print(summary) }
        return refused == 0 ? .success : .failure
    }

    /// The files named and the images under the folders named (recursively, hidden ones skipped),
    /// each folder's sorted.
    private func imageFiles() throws -> [String] {
        var files: [String] = []
        for path in paths {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
                throw UsageError(message: "\(path): no such file or folder.")
            }
            guard isDirectory.boolValue else {
                files.append(path)
                continue
            }
            guard let found = ImageDecoder.imageFiles(under: URL(fileURLWithPath: path)) else {
                throw UsageError(message: "\(path) cannot be read.\nHINT: check its permissions.")
            }
            files += found.map { (path as NSString).appendingPathComponent($0) }
        }
        return files
    }
}
