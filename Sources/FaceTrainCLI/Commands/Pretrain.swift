import FaceTrain
import FaceTrainEngine
import Foundation

/// `facetrain pretrain`: trains a base extractor on identity folders and writes a base model.
struct Pretrain: Command {
    static let name = "pretrain"
    static let abstract = "Pretrain a base face extractor on folders of many identities (a base model for fit --base)."
    static var options: [OptionSpec] {
        [
            .required(
                "data", "dir",
                "Identity folders: <identity>/<crop>, or images/<identity>/<crop> beside splits.json (train, val, bank)."
            ),
            .required("out", "dir", "Base model folder to write (must not exist)."),
            TrainingOptions.architecture(
                "Extractor architecture (known: " + ModelDefinition.extractorArchitectures.joined(separator: ", ")
                    + "; `facetrain architectures` lists them).", default: "ref-small"),
            TrainingOptions.width(default: "32"),
            TrainingOptions.inputSize(),
            TrainingOptions.epochs(default: "15"),
            TrainingOptions.batchSize(default: "128"),
            TrainingOptions.learningRate(default: "0.003", "Peak AdamW learning rate."),
            .option(
                "weight-decay", "rate",
                "AdamW's decoupled weight decay: each step shrinks the weights by learning rate x rate.",
                default: "0.0005"),
            TrainingOptions.seed("Seed of everything random; the same seed gives the same weights."),
            .option(
                "name", "text", "Name recorded in the base manifest (default: <data folder>-<architecture>-<width>)."),
            .option("version", "n", "Version recorded in the base manifest.", default: "1"),
            .option("teacher", "file.h5", "Descriptors of a stronger network per crop, to distil."),
            .option(
                "greyscale", "share", "Share of training crops turned grey (0 to 1; none by default).", default: "0"),
            .option(
                "min-area", "share",
                "Smallest share of a crop's area a random resized crop keeps (0.1 to 1; areas are drawn from it to 1).",
                default: "0.3"),
            .option("teacher-weight", "w", "Weight of the distillation term (with --teacher).", default: "20"),
            .option(
                "teacher-loss", "kind",
                "relational (the student's similarities follow the teacher's) or feature (a linear map of the embedding follows each descriptor).",
                default: "feature"),
            .option(
                "centre-crop", "share",
                "Share of a crop's side the base's embeddings see (verification, bank, fit, exports): its centre, "
                    + "0.5 to 1 (1: the whole crop). Training's random resized crops keep on average 0.8 of the side "
                    + "with --min-area 0.3, 0.86 with 0.5. With --remeasure: a new crop for an existing base.",
                default: "1"),
            .option(
                "cache", "dir", "Folder of the decoded-crop cache, reused by later runs (default: ~/.cache/facetrain)."),
            .option(
                "remeasure", "dir",
                "Do not train: measure the verification and bank of an existing base (its recipe, or the "
                    + "--centre-crop, --name and --version given) again, into --out."),
            .flag("skip-bad", "Train without crops that cannot be decoded, naming each one."),
            TrainingOptions.resume,
            TrainingOptions.jsonEvents,
        ]
    }

    let data: URL
    let out: URL
    let configuration: PretrainConfiguration
    let cache: URL
    let name: String
    let version: Int
    let teacher: URL?
    let remeasure: URL?
    /// With --remeasure, what the command line changes of the old base (nil: keep).
    let newCentreCrop: Double??
    let newName: String?
    let newVersion: Int?
    let skipBad: Bool
    let resume: Bool
    let json: Bool

    init(arguments: ParsedArguments) throws {
        try arguments.expectPositionals(atMost: 0)
        data = URL(fileURLWithPath: try arguments.required("data"))
        out = URL(fileURLWithPath: try arguments.required("out"))
        var configuration = PretrainConfiguration()
        configuration.architecture = try arguments.required("architecture")
        configuration.width = try arguments.required("width")
        configuration.inputSize = try arguments.required("input-size")
        configuration.epochs = try arguments.required("epochs")
        configuration.batchSize = try arguments.required("batch-size")
        configuration.learningRate = try arguments.required("learning-rate")
        configuration.seed = try arguments.required("seed")
        configuration.weightDecay = try arguments.required("weight-decay")
        // 0 and 1 mean "none" and "the whole crop"; anything else is kept for the check to judge.
        let greyscale: Double = try arguments.required("greyscale")
        configuration.augmentation.greyscaleShare = greyscale == 0 ? nil : greyscale
        configuration.augmentation.minimumArea = try arguments.required("min-area")
        let centreCrop: Double = try arguments.required("centre-crop")
        configuration.centreCrop = centreCrop == 1 ? nil : centreCrop
        newCentreCrop = arguments.given("centre-crop") ? .some(configuration.centreCrop) : .none
        newName = arguments.given("name") ? arguments.string("name") : nil
        newVersion = arguments.given("version") ? try arguments.required("version") : nil
        remeasure = arguments.string("remeasure").map { URL(fileURLWithPath: $0) }
        teacher = arguments.string("teacher").map { URL(fileURLWithPath: $0) }
        if let teacher {
            configuration.teacher = teacher.lastPathComponent
            configuration.teacherWeight = try arguments.required("teacher-weight")
            let loss = arguments.string("teacher-loss") ?? "feature"
            guard let kind = PretrainConfiguration.TeacherLoss(rawValue: loss) else {
                throw UsageError(
                    message: "--teacher-loss \(loss) is not known; use "
                        + PretrainConfiguration.TeacherLoss.allCases.map(\.rawValue).joined(separator: " or "))
            }
            configuration.teacherLoss = kind
        }
        try requireValid { () throws(ConfigurationError) in try configuration.validate() }
        self.configuration = configuration
        name =
            arguments.string("name")
            ?? "\(data.standardizedFileURL.lastPathComponent)-\(configuration.architecture)-\(configuration.width)"
        version = try arguments.required("version")
        guard version >= 1 else { throw UsageError(message: "--version must be a positive integer") }
        cache =
            arguments.string("cache").map { URL(fileURLWithPath: $0) }
            ?? URL(
                fileURLWithPath: ProcessInfo.processInfo.environment["XDG_CACHE_HOME"]
                    ?? (NSHomeDirectory() + "/.cache")
            )
            .appendingPathComponent("facetrain")
        skipBad = arguments.flag("skip-bad")
        resume = arguments.flag("resume")
        json = arguments.flag("json")
    }

    func run() throws -> ExitCode {
        installInterruptHandler()
        guard !FileManager.default.fileExists(atPath: out.path) else { throw BaseModelError.exists(path: out.path) }
        // A base or cache inside the corpus would be read as an identity folder by the next run.
        let dataPath = realPath(data)
        let inside = dataPath.hasSuffix("/") ? dataPath : dataPath + "/"
        for (option, url) in [("--out", out), ("--cache", cache)] {
            let path = realPath(url)
            guard path != dataPath, !path.hasPrefix(inside) else {
                throw UsageError(message: "\(option) \(url.path) is inside --data \(data.path); put it elsewhere")
            }
        }
        let progress = PretrainProgress(json: json)
        let started = Date()
        let corpus = try IdentityCorpus.scan(data)
        progress.say(
            "corpus: \(corpus.identities.count) identities, \(corpus.crops.count) crops in \(corpus.imagesRoot.path)")
        // A base is re-measured on crops of the size it was trained on.
        let old = try remeasure.map { url throws(BaseModelError) in try BaseModel.load(from: url) }
        let (cropCache, report) = try CropCache.open(
            for: corpus, side: old?.manifest.recipe.cropSide ?? configuration.cropSide, folder: cache,
            progress: progress.cacheProgress, shouldStop: { interruptRequested })
        if let reason = report.rebuiltBecause { progress.warn("the crop cache was rebuilt: \(reason)") }
        progress.say(
            String(
                format: "crop cache %@: %d crops reused, %d decoded in %.1fs", cropCache.url.path, report.reused,
                report.decoded, report.seconds))
        if !cropCache.problems.isEmpty {
            guard skipBad else { throw CorpusError.unreadableImages(cropCache.problems) }
            for problem in cropCache.problems { progress.warn("skipped: \(problem)") }
        }
        if let old {
            guard ModelDefinition.extractorArchitectures.contains(old.manifest.recipe.architecture) else {
                throw BaseModelError.incompatible(
                    base: old.source, reason: "its architecture \(old.manifest.recipe.architecture) is not known here")
            }
            var recipe = old.manifest.recipe
            if let newCentreCrop { recipe.centreCrop = newCentreCrop }
            let session = try PretrainSession(
                corpus: corpus, cache: cropCache, configuration: recipe,
                checkpointDirectory: out.deletingLastPathComponent().appendingPathComponent(".checkpoints"))
            let result = try session.remeasure(old)
            try session.writeBase(
                result, name: newName ?? old.manifest.name, version: newVersion ?? old.manifest.version,
                seconds: old.manifest.training.seconds, trainedOn: old.manifest.data.fingerprint, to: out)
            printVerification(result.verification)
            print(out.path)
            return .success
        }
        let descriptors = try teacher.map { url throws(CorpusError) in try TeacherDescriptors.load(url) }
        let session = try PretrainSession(
            corpus: corpus, cache: cropCache, configuration: configuration,
            checkpointDirectory: out.deletingLastPathComponent().appendingPathComponent(".checkpoints"),
            teacher: descriptors)
        let result = try session.run(resume: resume, observer: progress) { interruptRequested }
        if interruptRequested { throw FitError.interrupted(checkpoint: session.checkpointURL.path) }
        let base = try session.writeBase(
            result, name: name, version: version, seconds: Date().timeIntervalSince(started), to: out)
        session.removeCheckpoint()
        let metrics = result.verification
        if json {
            progress.event(
                "base",
                [
                    "path": out.path, "pair_accuracy": metrics.pairAccuracy, "tar_at_far_1e-2": metrics.trueAcceptAt1e2,
                    "tar_at_far_1e-3": metrics.trueAcceptAt1e3, "bank_crops": base.bank.crops,
                ])
        } else {
            printVerification(metrics)
            print(out.path)
        }
        return .success
    }

    private func printVerification(_ metrics: VerificationMetrics) {
        print(
            String(
                format: "verification on %d identities (%d crops): pair accuracy %.4f (±%.4f), TAR %.3f at FAR 1e-2, "
                    + "%.3f at FAR 1e-3", metrics.identities, metrics.crops, metrics.pairAccuracy,
                metrics.pairAccuracyStandardDeviation, metrics.trueAcceptAt1e2, metrics.trueAcceptAt1e3))
    }
}

/// Pretraining progress: a live bar on a terminal, one line per epoch otherwise, JSON lines with --json.
final class PretrainProgress: PretrainObserver {
    private let printer: ProgressPrinter
    private var epochs = 0

    init(json: Bool) { printer = ProgressPrinter(json: json) }

    func event(_ name: String, _ fields: [String: Any]) { printer.event(name, fields) }
    func say(_ text: String) { printer.say(text) }
    func warn(_ text: String) {
        if printer.style == .json {
            printer.event("warning", ["message": text])
        } else {
            printError("warning: \(text)")
        }
    }

    func cacheProgress(done: Int, total: Int) {
        guard printer.style == .terminal else { return }
        FileHandle.standardOutput.write(Data("\r caching crops \(done)/\(total) ".utf8))
        if done == total { FileHandle.standardOutput.write(Data("\r\u{1B}[K".utf8)) }
    }

    func pretrainStarted(crops: Int, identities: Int, verificationCrops: Int, epochs: Int, resumedFrom: Int?) {
        self.epochs = epochs
        if printer.style == .json {
            printer.event(
                "start",
                [
                    "training_crops": crops, "identities": identities, "verification_crops": verificationCrops,
                    "epochs": epochs, "resumed_from_epoch": resumedFrom as Any,
                ])
        } else {
            let resumed = resumedFrom.map { ", resuming after epoch \($0)" } ?? ""
            say(
                "pretraining on \(crops) crops of \(identities) identities, verifying on \(verificationCrops) crops, "
                    + "\(epochs) epochs\(resumed)")
        }
    }

    func batchFinished(epoch: Int, batch: Int, batches: Int, imagesPerSecond: Double, loss: Double) {
        printer.epochs = epochs
        printer.batchFinished(
            epoch: epoch, batch: batch, batches: batches, imagesPerSecond: imagesPerSecond, loss: loss)
    }

    func epochFinished(_ record: PretrainEpochRecord) {
        if printer.style == .json {
            printer.event(
                "epoch",
                [
                    "epoch": record.epoch, "loss": record.loss, "accuracy": record.accuracy,
                    "verification_accuracy": record.verificationAccuracy, "learning_rate": record.learningRate,
                    "seconds": record.seconds, "images_per_second": record.imagesPerSecond,
                ])
        } else {
            let clear = printer.style == .terminal ? "\r\u{1B}[K" : ""
            FileHandle.standardOutput.write(
                Data(
                    String(
                        format:
                            "%@epoch %3d/%d  loss %.4f  identity acc %.3f  verification %.4f  lr %.2e  %.0f img/s  %.1fs\n",
                        clear, record.epoch, epochs, record.loss, record.accuracy, record.verificationAccuracy,
                        record.learningRate, record.imagesPerSecond, record.seconds
                    ).utf8))
        }
    }
}
