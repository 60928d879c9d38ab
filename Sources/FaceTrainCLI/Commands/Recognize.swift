import FaceTrain
import Foundation

/// `facetrain recognize`: who is in each photo or crop, face by face (the detector finds them, a
/// bundle classifies each), as `POST /v1/recognize` answers. Not `predict`, which classifies each
/// image as one crop without looking for faces.
struct Recognize: Command {
    static let name = "recognize"
    static let abstract =
        "Find every face in photos or crops and say who each is, with the app's accept decision."
    static let arguments = "<image>..."
    static var options: [OptionSpec] {
        [
            BundleOptions.model, BundleOptions.models,
            .option(
                "detector", "dir", "Detector folder written by `facetrain detector train`, or builtin.",
                default: "builtin"),
            BundleOptions.top("Classes listed per face, most probable first."),
            .flag(
                "json",
                "Print one JSON object per line per image: file, width, height and faces (box, score, landmarks, "
                    + "whole_image, label, name, probability, accepted, decision, threshold, top)."),
        ]
    }

    let model: String
    let models: URL
    let detector: String
    let top: Int
    let json: Bool
    let images: [String]

    init(arguments: ParsedArguments) throws {
        images = arguments.positionals
        guard !images.isEmpty else { throw UsageError(message: "Missing expected argument '<image>...'") }
        (model, models) = try BundleOptions.bundle(arguments)
        detector = try arguments.required("detector")
        top = try BundleOptions.top(arguments)
        json = arguments.flag("json")
    }

    struct Record: Encodable {
        var file: String
        var width: Int
        var height: Int
        var faces: [RecognizedFaceRecord]
    }

    func run() throws -> ExitCode {
        let bundle = try ModelBundle.open(ModelRepository.locateBundle(model, modelsDirectory: models))
        let detectorModel = try DetectorModel.resolve(detector)
        var recognizer = FaceRecognizer(
            detector: FaceDetector(model: detectorModel.model, strides: detectorModel.manifest.strides),
            predictor: try FacePredictor(bundle: bundle))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var failures = 0
        for file in images {
            let image: Image
            do { image = try ImageDecoder.decode(contentsOf: URL(fileURLWithPath: file)) } catch {
                failures += 1
                printError("Error: \(error)")
                continue
            }
            let faces = try recognizer.recognize(image).map { RecognizedFaceRecord($0, top: top) }
            if json {
                let record = Record(file: file, width: image.width, height: image.height, faces: faces)
                print(String(decoding: try encoder.encode(record), as: UTF8.self))
            } else {
                print(text(file: file, faces: faces))
            }
        }
        if failures > 0 {
            printError("Error: \(failures) of \(images.count) image(s) could not be read")
            return .failure
        }
        return .success
    }

    private func text(file: String, faces: [RecognizedFaceRecord]) -> String {
        guard !faces.isEmpty else { return "\(file): no face found" }
        var lines = ["\(file): \(faces.count) face\(faces.count == 1 ? "" : "s")"]
        for (index, face) in faces.enumerated() {
            let who = face.name.isEmpty ? "class \(face.label)" : "\(face.name) (\(face.label))"
            let verdict =
                face.accepted
                ? "accepted"
                : face.decision == "2" ? "not accepted (unknown person)" : "not accepted (\(face.decision))"
            let box = face.box.map { String(format: "%.0f", $0) }.joined(separator: ",")
            lines.append(
                "  face \(index + 1) at [\(box)]: \(who) \(String(format: "%.4f", face.probability)) - \(verdict)")
        }
        return lines.joined(separator: "\n")
    }
}
