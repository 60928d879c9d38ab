import FaceTrain
import FaceTrainBenchmark
import FaceTrainEngine
import Foundation

/// `facetrain detector train` and `facetrain detector eval`: train a face detector on a detection
/// set (photos, face boxes, 5 landmarks) and score one on a split of it. Not `detect` (Detect.swift),
/// which runs a detector on the user's photos.
struct DetectorTrain: Command {
    static let name = "detector train"
    static let abstract =
        "Train a face detector (boxes, 5 landmarks, scores) on a detection set such as faces_in_photos."
    static var options: [OptionSpec] {
        [
            .required(
                "data", "dir",
                "Detection set: annotations.jsonl, splits.json and images/ (faces_in_photos' layout; "
                    + "`facetrain synth --scenes` writes one)."),
            .required("out", "dir", "Detector folder to write (must not exist)."),
            .option("split", "name", "Split of splits.json to train on.", default: "train"),
            TrainingOptions.inputSize(default: "320"),
            TrainingOptions.epochs(default: String(DetectorTrainingConfiguration().epochs)),
            TrainingOptions.batchSize(default: "32", "Training crops per step."),
            TrainingOptions.learningRate(default: "0.02", "Peak SGD learning rate (momentum 0.9)."),
            .option(
                "hold-out", "share", "Share of the split's photos kept out of training to measure average precision.",
                default: "0.1"),
            .option(
                "landmark-weight", "w", "Weight of the landmarks' term in the loss (box term 2, score term 1).",
                default: String(DetectorTrainingConfiguration().landmarkWeight)),
            .option(
                "occlusion", "share",
                "Share of the faces in each training crop partly covered by a patch (a flat colour or a piece of "
                    + "the crop).", default: "0"),
            .option(
                "blur", "share", "Share of the training crops blurred (a Gaussian of sigma 0.5-2 px).",
                default: String(DetectionAugmentation().blurShare)),
            .option(
                "measure-every", "n", "Measure the held-out photos every n epochs (and after the last).", default: "10"),
            TrainingOptions.seed("Seed of everything random; the same seed gives the same weights."),
            .option("name", "text", "Name recorded in the detector manifest.", default: "facetrain-detector"),
            .option("version", "n", "Version recorded in the detector manifest.", default: "1"),
            .option(
                "from", "detector",
                "Start from this detector's weights (builtin or a folder) instead of random ones: a finetune. "
                    + "Its input size must match --input-size."),
            TrainingOptions.resume,
            TrainingOptions.jsonEvents,
        ]
    }

    let data: URL
    let from: String?
    let out: URL
    let split: String
    let configuration: DetectorTrainingConfiguration
    let name: String
    let version: Int
    let resume: Bool
    let json: Bool

    init(arguments: ParsedArguments) throws {
        try arguments.expectPositionals(atMost: 0)
        data = URL(fileURLWithPath: try arguments.required("data"))
        out = URL(fileURLWithPath: try arguments.required("out"))
        split = try arguments.required("split")
        var configuration = DetectorTrainingConfiguration()
        configuration.augmentation.outputSize = try arguments.required("input-size")
        configuration.epochs = try arguments.required("epochs")
        configuration.batchSize = try arguments.required("batch-size")
        configuration.learningRate = try arguments.required("learning-rate")
        configuration.holdOut = try arguments.required("hold-out")
        configuration.measureEvery = try arguments.required("measure-every")
        configuration.landmarkWeight = try arguments.required("landmark-weight")
        configuration.augmentation.occlusionShare = try arguments.required("occlusion")
        configuration.augmentation.blurShare = try arguments.required("blur")
        configuration.seed = try arguments.required("seed")
        try requireValid { () throws(ConfigurationError) in try configuration.validate() }
        self.configuration = configuration
        name = try arguments.required("name")
        version = try arguments.required("version")
        guard version >= 1 else { throw UsageError(message: "--version must be a positive integer") }
        resume = arguments.flag("resume")
        json = arguments.flag("json")
        from = arguments.string("from")
    }

    func run() throws -> ExitCode {
        installInterruptHandler()
        guard !FileManager.default.fileExists(atPath: out.path) else { throw DetectorModelError.exists(path: out.path) }
        let printer = ProgressPrinter(json: json)
        let set = try DetectionSet.load(data)
        let definition = ModelDefinition.denseDetector(inputSize: configuration.augmentation.outputSize)
        let startingPoint = try from.map { option throws(DetectorModelError) in try DetectorModel.resolve(option) }
        let session = try DetectorTrainingSession(
            set: set, split: split, configuration: configuration, definition: definition, startingPoint: startingPoint,
            checkpointDirectory: out.deletingLastPathComponent().appendingPathComponent(".checkpoints"))
        let progress = DetectorProgress(printer: printer)
        let (model, history) = try session.run(resume: resume, observer: progress) { interruptRequested }
        if interruptRequested { throw FitError.interrupted(checkpoint: session.checkpointURL.path) }
        var metrics: [String: Double] = [:]
        for (category, value) in history.last?.heldOutAveragePrecision ?? [:] {
            metrics["held_out.ap.\(category)"] = value
        }
        let faces = session.training.reduce(0) { $0 + $1.faces.count }
        var manifest = DetectorModel.Manifest(
            name: name, version: version, facetrainVersion: FaceTrainVersion.string, architecture: "det-dense",
            definition: model.definition, strides: DetectionHeads.strides,
            data: .init(
                set: set.root.standardizedFileURL.lastPathComponent, fingerprint: set.fingerprint,
                photos: session.training.count, faces: faces, heldOutPhotos: session.heldOut.count),
            recipe: configuration,
            training: .init(
                // The epochs' own times, so a resumed run counts the processes before it too.
                epochs: history, seconds: history.reduce(0) { $0 + $1.seconds }, threads: Parallel.workerCount,
                blas: BLASRuntime.summary),
            metrics: metrics,
            provenance:
                "Trained by facetrain \(FaceTrainVersion.string) `detector train` on the `\(split)` split of "
                + "\(set.root.standardizedFileURL.lastPathComponent) (fingerprint \(set.fingerprint.prefix(16))), less "
                + "its held-out photos, with the recipe below.",
            license: DetectorModel.licenseNote(set: set.root.standardizedFileURL.lastPathComponent))
        if let startingPoint {
            manifest.startedFrom =
                "\(startingPoint.manifest.name) v\(startingPoint.manifest.version), weights.h5 SHA-256 "
                + startingPoint.weightsChecksum
            manifest.provenance += " Started from the weights of \(manifest.startedFrom!)."
        }
        try DetectorModel.write(manifest: manifest, model: model, to: out)
        session.removeCheckpoint()
        if json {
            printer.event("detector", ["path": out.path, "metrics": metrics])
        } else {
            for key in metrics.keys.sorted() { print(String(format: "%@ %.4f", key, metrics[key]!)) }
            print(out.path)
        }
        return .success
    }
}

/// `facetrain detector eval`: runs a detector on a split's photos and scores it as score_detection.py does.
struct DetectorEval: Command {
    static let name = "detector eval"
    static let abstract = "Score a face detector on a split of a detection set; write its predictions for the scorer."
    static var options: [OptionSpec] {
        [
            .option(
                "detector", "dir", "Detector folder written by `facetrain detector train`, or builtin.",
                default: "builtin"),
            .required("data", "dir", "Detection set: annotations.jsonl, splits.json and images/."),
            .option("split", "name", "Split of splits.json to score.", default: "dev"),
            .option("predictions", "file", "Write every detection (score >= 0.02) as score_detection.py's JSONL."),
            .flag("json", "Print the figures as one JSON object."),
        ]
    }

    let detector: String
    let data: URL
    let split: String
    let predictions: URL?
    let json: Bool

    init(arguments: ParsedArguments) throws {
        try arguments.expectPositionals(atMost: 0)
        detector = try arguments.required("detector")
        data = URL(fileURLWithPath: try arguments.required("data"))
        split = try arguments.required("split")
        predictions = arguments.string("predictions").map { URL(fileURLWithPath: $0) }
        json = arguments.flag("json")
    }

    func run() throws -> ExitCode {
        let model = try DetectorModel.resolve(detector)
        let set = try DetectionSet.load(data)
        let photos = try set.photos(inSplit: split)
        let images = try DetectorTrainingSession.decode(photos, of: set)
        let faceDetector = FaceDetector(model: model.model, strides: model.manifest.strides)
        let started = Date()
        let (found, seconds) = faceDetector.detect(in: images, scoreFloor: DetectionDecoder().scoreFloor)
        let wall = Date().timeIntervalSince(started)
        var detections: [String: [Detection]] = [:]
        for (photo, faces) in zip(photos, found) { detections[photo.file] = faces }
        if let predictions {
            try DetectionPredictions.write(photos.map { ($0.file, detections[$0.file] ?? []) }, to: predictions)
        }
        // Each photo's own time (one core), and the split's wall time over all cores.
        let sorted = seconds.sorted()
        var figures: [String: Double] = [
            "ms_per_photo_median": sorted.isEmpty ? 0 : 1000 * sorted[sorted.count / 2],
            "ms_per_photo_wall": 1000 * wall / Double(max(photos.count, 1)),
        ]
        for category in [DetectionAveragePrecision.Category.easyMedium, .all] {
            if let value = DetectionAveragePrecision.averagePrecision(
                photos: photos, detections: detections, category: category)
            {
                figures["ap.\(category.name)"] = value
            }
        }
        if json {
            print(String(decoding: try JSONText.data(figures, pretty: false), as: UTF8.self))
        } else {
            print("\(photos.count) photos of split \(split) in \(set.root.path)")
            for key in figures.keys.sorted() { print(String(format: "%@ %.4f", key, figures[key]!)) }
        }
        return .success
    }
}

/// `facetrain detector export`: a detector's network as ONNX for other runtimes (onnxruntime and
/// `make bench-inference`), its heads as outputs; the file's metadata says how to read them.
struct DetectorExport: Command {
    static let name = "detector export"
    static let abstract = "Write a face detector's network as ONNX: any input size, its heads as outputs."
    static var options: [OptionSpec] {
        [
            .option(
                "detector", "dir", "Detector folder written by `facetrain detector train`, or builtin.",
                default: "builtin"),
            .required("out", "file", "ONNX file to write (atomically)."),
        ]
    }

    let detector: String
    let out: URL

    init(arguments: ParsedArguments) throws {
        try arguments.expectPositionals(atMost: 0)
        detector = try arguments.required("detector")
        out = URL(fileURLWithPath: try arguments.required("out"))
    }

    func run() throws -> ExitCode {
        let model = try DetectorModel.resolve(detector)
        let data = try model.onnxExport()
        try DurableFile.write(data, to: out)
        print(
            "\(out.path): ONNX export of detector \(model.manifest.name) v\(model.manifest.version) (\(model.source)), "
                + "outputs \(model.onnxHeadNames.joined(separator: ", ")), \(data.count) bytes, sha256 \(SHA256.hash(data))"
        )
        return .success
    }
}

/// `facetrain detector bench`: the detector's network alone on random photos of one size, batch
/// throughput and batch-1 latency (`make bench-inference` runs it beside onnxruntime on the export).
struct DetectorBench: Command {
    static let name = "detector bench"
    static let abstract = "Time a face detector's network on random photos: batch throughput and batch-1 latency."
    static var options: [OptionSpec] {
        [
            .option(
                "detector", "dir", "Detector folder written by `facetrain detector train`, or builtin.",
                default: "builtin"),
            .option("size", "WxH", "Network input size (multiples of 32; a 640x480 photo).", default: "640x480"),
            .option("batch-size", "n", "Batch size of the throughput run.", default: "16"),
            .option("seconds", "s", "Seconds spent on each of the two runs.", default: "3"),
            .flag("json", "Print the result as one JSON object."),
        ]
    }

    let detector: String
    let width: Int
    let height: Int
    let batchSize: Int
    let seconds: Double
    let json: Bool

    init(arguments: ParsedArguments) throws {
        try arguments.expectPositionals(atMost: 0)
        detector = try arguments.required("detector")
        let size: String = try arguments.required("size")
        let parts = size.lowercased().split(separator: "x").compactMap { Int($0) }
        guard parts.count == 2, parts.allSatisfy({ (32...4096).contains($0) && $0 % 32 == 0 }) else {
            throw UsageError(message: "--size must be WIDTHxHEIGHT, each a multiple of 32 in 32...4096 (got '\(size)')")
        }
        (width, height) = (parts[0], parts[1])
        batchSize = try arguments.required("batch-size")
        guard (1...256).contains(batchSize) else { throw UsageError(message: "--batch-size must be in 1...256") }
        seconds = try arguments.required("seconds")
        guard seconds.isFinite, (0...3600).contains(seconds) else {
            throw UsageError(message: "--seconds must be in 0...3600")
        }
        json = arguments.flag("json")
    }

    func run() throws -> ExitCode {
        let model = try DetectorModel.resolve(detector)
        let result = try InferenceBenchmark.run(
            model: model.model, height: height, width: width, batchSize: batchSize, seconds: seconds)
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            print(String(decoding: try encoder.encode(result), as: UTF8.self))
        } else {
            print("detector \(model.manifest.name) v\(model.manifest.version) (\(model.source)), random pixels")
            print(result.summary)
        }
        return .success
    }
}

/// Detector training progress: a live bar on a terminal, a line per epoch, JSON lines with --json.
final class DetectorProgress: DetectorTrainingObserver {
    private let printer: ProgressPrinter
    private var epochs = 0

    init(printer: ProgressPrinter) { self.printer = printer }

    func trainingStarted(photos: Int, heldOutPhotos: Int, epochs: Int, resumedFrom: Int?) {
        self.epochs = epochs
        if printer.style == .json {
            printer.event(
                "start",
                [
                    "photos": photos, "held_out_photos": heldOutPhotos, "epochs": epochs,
                    "resumed_from_epoch": resumedFrom as Any,
                ])
        } else {
            let resumed = resumedFrom.map { ", resuming after epoch \($0)" } ?? ""
            printer.say(
                "training a detector on \(photos) photos, measuring on \(heldOutPhotos), \(epochs) epochs\(resumed)")
        }
    }

    func batchFinished(epoch: Int, batch: Int, batches: Int, imagesPerSecond: Double, loss: Double) {
        printer.epochs = epochs
        printer.batchFinished(
            epoch: epoch, batch: batch, batches: batches, imagesPerSecond: imagesPerSecond, loss: loss)
    }

    func epochFinished(_ record: DetectorEpochRecord) {
        let precision = record.heldOutAveragePrecision ?? [:]
        if printer.style == .json {
            printer.event(
                "epoch",
                [
                    "epoch": record.epoch, "loss": record.loss, "score_loss": record.scoreLoss,
                    "box_loss": record.boxLoss, "landmark_loss": record.landmarkLoss,
                    "learning_rate": record.learningRate, "seconds": record.seconds,
                    "images_per_second": record.imagesPerSecond, "held_out_ap": precision,
                ])
        } else {
            let clear = printer.style == .terminal ? "\r\u{1B}[K" : ""
            let measured =
                precision.isEmpty
                ? ""
                : String(
                    format: "  AP e+m %.3f all %.3f", precision["easy_medium"] ?? .nan, precision["all"] ?? .nan)
            FileHandle.standardOutput.write(
                Data(
                    String(
                        format:
                            "%@epoch %3d/%d  loss %.4f (score %.4f box %.4f landmarks %.4f)  lr %.2e  %.0f img/s  %.1fs%@\n",
                        clear, record.epoch, epochs, record.loss, record.scoreLoss, record.boxLoss, record.landmarkLoss,
                        record.learningRate, record.imagesPerSecond, record.seconds, measured
                    ).utf8))
        }
    }
}
