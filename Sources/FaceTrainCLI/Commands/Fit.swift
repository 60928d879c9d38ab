import FaceTrain
import FaceTrainEngine
import Foundation

/// `facetrain fit`: trains, evaluates and writes a bundle; prints the bundle's path last.
struct Fit: Command {
    static let name = "fit"
    static let abstract = "Train a face classifier from per-user folders and write a versioned bundle."
    static var options: [OptionSpec] {
        [
            .required(
                "data", "dir", "Folder with one sub-folder of crops per user id (1 = not a face, 2 = unknown person)."),
            .option("out", "dir", "Models folder the bundle version is written into.", default: "models"),
            TrainingOptions.epochs(default: "90"),
            TrainingOptions.batchSize(default: "32"),
            TrainingOptions.seed("Seed of everything random; the same seed gives the same model."),
            TrainingOptions.inputSize(),
            .option(
                "holdout", "share", "Share of each class held out for model selection and evaluation.", default: "0.2"),
            TrainingOptions.learningRate(default: "0.003", "Peak AdamW learning rate."),
            TrainingOptions.architecture(
                "Network trained with --base none (" + ModelDefinition.extractorArchitectures.joined(separator: ", ")
                    + "; `facetrain architectures` lists them). With a base: the base's, which it must then name.",
                default: "ref-small"),
            TrainingOptions.width(default: "16", "Channels of the first block (16 gives ref-small)."),
            .option(
                "target-far", "rate", "Unknown-person false accept rate the accept threshold is chosen for.",
                default: "0.05"),
            DataOptions.minimumImages(),
            .option(
                "margin", "m", "Additive margin on the true class's logit while training (0 = plain cross-entropy).",
                default: "2"),
            .option(
                "base", "builtin|none|dir",
                "Extractor to start from: the builtin pretrained base, a folder from `facetrain pretrain`, or none "
                    + "(train the whole network from scratch).", default: "builtin"),
            .option(
                "fine-tune", "head|all",
                "With a base: train only the classifier on the frozen extractor's embeddings (head), or the whole "
                    + "network at a lower learning rate (all; --epochs 20 and --learning-rate 0.001 unless given).",
                default: "head"),
            DataOptions.skipBad,
            DataOptions.faceCheck,
            TrainingOptions.resume,
            TrainingOptions.jsonEvents,
        ]
    }

    let data: URL
    let out: URL
    let configuration: FitConfiguration
    let loadOptions: DataLoadOptions
    let resume: Bool
    let json: Bool
    let baseOption: String
    let fineTune: String
    let givenEpochs: Bool
    let givenLearningRate: Bool
    let givenArchitecture: Bool

    init(arguments: ParsedArguments) throws {
        try arguments.expectPositionals(atMost: 0)
        data = URL(fileURLWithPath: try arguments.required("data"))
        out = URL(fileURLWithPath: try arguments.required("out"))
        // Bundles inside the data folder would read as user folders on the next run.
        let dataPath = realPath(data)
        let outPath = realPath(out)
        guard outPath != dataPath, !outPath.hasPrefix(dataPath.hasSuffix("/") ? dataPath : dataPath + "/") else {
            throw UsageError(
                message: "--out \(out.path) is inside --data \(data.path); put the models folder elsewhere")
        }
        var configuration = FitConfiguration()
        configuration.epochs = try arguments.required("epochs")
        configuration.batchSize = try arguments.required("batch-size")
        configuration.seed = try arguments.required("seed")
        configuration.inputSize = try arguments.required("input-size")
        configuration.holdout = try arguments.required("holdout")
        configuration.learningRate = try arguments.required("learning-rate")
        configuration.width = try arguments.required("width")
        configuration.architecture = try arguments.required("architecture")
        givenArchitecture = arguments.isGiven("architecture")
        configuration.targetFalseAcceptRate = try arguments.required("target-far")
        configuration.margin = try arguments.required("margin")
        try requireValid { () throws(ConfigurationError) in try configuration.validate() }
        self.configuration = configuration
        loadOptions = try DataOptions.loadOptions(
            arguments,
            base: DataLoadOptions(
                inputWidth: configuration.inputSize, inputHeight: configuration.inputSize, channels: 3))
        resume = arguments.flag("resume")
        json = arguments.flag("json")
        baseOption = try arguments.required("base")
        fineTune = try arguments.required("fine-tune")
        guard ["head", "all"].contains(fineTune) else { throw UsageError(message: "--fine-tune must be head or all") }
        givenEpochs = arguments.isGiven("epochs")
        givenLearningRate = arguments.isGiven("learning-rate")
        let refused =
            baseOption == "none" ? [] : FitJob.optionsTakenFromBase(fineTuning: FineTuning(rawValue: fineTune)!)
        if let given = refused.first(where: { arguments.isGiven($0) }) {
            throw UsageError(
                message: "--\(given) applies to --base none only: a fit from a base (here --base \(baseOption)) keeps "
                    + "the base's architecture"
                    + (fineTune == "head" ? " and trains the classifier on its embeddings" : "")
                    + "; add --base none to train the whole network from scratch")
        }
    }

    func run() throws -> ExitCode {
        installInterruptHandler()
        let progress = ProgressPrinter(json: json)
        let base = try BaseModel.resolve(baseOption)
        if let base, givenArchitecture, configuration.architecture != base.manifest.recipe.architecture {
            throw UsageError(
                message:
                    "--architecture \(configuration.architecture) clashes with --base \(baseOption), whose extractor "
                    + "is \(base.manifest.recipe.architecture); leave --architecture out to use the base's, or add "
                    + "--base none to train \(configuration.architecture) from scratch")
        }
        let fineTuning = FineTuning(rawValue: fineTune)!
        let configuration =
            base.map {
                FitJob.configuration(
                    self.configuration, base: $0, fineTuning: fineTuning, keepEpochs: givenEpochs,
                    keepLearningRate: givenLearningRate)
            } ?? self.configuration
        let job = FitJob(
            data: data, models: out, configuration: configuration, loadOptions: loadOptions, base: base,
            fineTuning: fineTuning, resume: resume)
        let result = try job.run(observer: progress) { interruptRequested }
        report(bundle: result.bundle, bestEpoch: result.bestEpoch, metrics: result.metrics, progress: progress)
        return .success
    }

    private func report(bundle: URL, bestEpoch: Int, metrics: EvaluationMetrics, progress: ProgressPrinter) {
        if json {
            progress.event(
                "bundle",
                [
                    "path": bundle.path, "best_epoch": bestEpoch, "threshold": metrics.threshold,
                    "user_accuracy": metrics.userAccuracy, "unknown_far": metrics.unknownFalseAcceptRate,
                    "nonface_far": metrics.nonfaceFalseAcceptRate,
                ])
        } else {
            progress.say(
                String(
                    format: "held-out (best epoch %d, threshold %.2f): user_accuracy %.3f  unknown_far %.3f  "
                        + "nonface_far %.3f  (no threshold: %.3f / %.3f)",
                    bestEpoch, metrics.threshold, metrics.userAccuracy, metrics.unknownFalseAcceptRate,
                    metrics.nonfaceFalseAcceptRate,
                    metrics.unthresholded["user_accuracy"] ?? 0, metrics.unthresholded["unknown_far"] ?? 0))
            print(bundle.path)
        }
    }
}
