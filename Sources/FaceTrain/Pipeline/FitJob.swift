import Foundation

/// How much of the network a fit from a base trains.
public enum FineTuning: String, Sendable, CaseIterable {
    /// The extractor frozen; only the classifier trains, on cached embeddings.
    case head
    /// The whole network from the base's extractor, at a lower learning rate.
    case all
}

/// Receives a fit job's progress: the training's own events (`FitObserver`) and the job's steps.
/// The CLI prints them; a server would record them for its job status.
public protocol FitJobObserver: FitObserver {
    /// The data folder was read and validated.
    func dataLoaded(users: Int, crops: Int, warnings: [DataWarning])
    /// A fit from a base is about to train.
    func baseChosen(_ base: BaseModel, fineTuning: FineTuning)
    /// The threshold was calibrated on simulated strangers: rate accepted per source.
    func calibrated(rates: [String: Double], folds: Int, seconds: Double)
}

/// What a finished fit job wrote.
public struct FitJobResult: Sendable {
    /// The new bundle version's folder.
    public var bundle: URL
    public var bestEpoch: Int
    public var metrics: EvaluationMetrics
}

/// `fit` as one job: data folder -> validated dataset -> training (from scratch or from a base)
/// -> evaluation and threshold -> verified bundle version in the models folder. The CLI only
/// parses its arguments into one and prints what the observer hears; a server runs the same.
public struct FitJob: Sendable {
    public var data: URL
    public var models: URL
    public var configuration: FitConfiguration
    public var loadOptions: DataLoadOptions
    /// nil trains the whole network from scratch.
    public var base: BaseModel?
    public var fineTuning: FineTuning
    /// Continue an interrupted from-scratch fit from its checkpoint.
    public var resume: Bool

    public init(
        data: URL, models: URL, configuration: FitConfiguration, loadOptions: DataLoadOptions, base: BaseModel?,
        fineTuning: FineTuning = .head, resume: Bool = false
    ) {
        self.data = data
        self.models = models
        self.configuration = configuration
        self.loadOptions = loadOptions
        self.base = base
        self.fineTuning = fineTuning
        self.resume = resume
    }

    /// Where checkpoints of interrupted fits wait for `resume`.
    public var checkpointDirectory: URL { models.appendingPathComponent(Self.checkpointsFolderName) }
    static let checkpointsFolderName = ".checkpoints"
    /// Where head-only fits cache their crops' embeddings, by content hash.
    static let embeddingsFolderName = ".embeddings"

    /// The options (as the command line names them) that a fit from a base does not take, because
    /// `configuration(_:base:…)` below sets them from the base: the whole network and its training
    /// for `.head` (only the classifier trains, on cached embeddings, so nothing resumes either),
    /// the network's shape for `.all` (it trains like a fit from scratch otherwise).
    public static func optionsTakenFromBase(fineTuning: FineTuning) -> [String] {
        switch fineTuning {
        case .head: ["epochs", "batch-size", "input-size", "learning-rate", "width", "margin", "resume"]
        case .all: ["input-size", "width", "resume"]
        }
    }

    /// The configuration a fit from `base` trains with: the base's architecture, width and input; for
    /// `.all`, 20 epochs at 1e-3 unless `keepEpochs` / `keepLearningRate` (given by the user).
    public static func configuration(
        _ configuration: FitConfiguration, base: BaseModel, fineTuning: FineTuning, keepEpochs: Bool,
        keepLearningRate: Bool
    ) -> FitConfiguration {
        var configuration = configuration
        configuration.architecture = base.manifest.recipe.architecture
        configuration.base = base.reference(training: fineTuning.rawValue)
        configuration.width = base.manifest.width
        configuration.inputSize = base.manifest.definition.input.width
        if fineTuning == .all {
            if !keepEpochs { configuration.epochs = 20 }
            if !keepLearningRate { configuration.learningRate = 1e-3 }
            configuration.warmupEpochs = 1
        }
        return configuration
    }

    /// Runs the job; `shouldStop` is polled between batches (Ctrl-C, a server's cancel).
    public func run(observer: FitJobObserver?, shouldStop: @escaping () -> Bool = { false }) throws -> FitJobResult {
        // The server's trainings come here without the command line's checks.
        try configuration.validate()
        try loadOptions.validate()
        var loadOptions = self.loadOptions
        if let base {
            // The network's input is the base's.
            loadOptions.inputWidth = base.manifest.definition.input.width
            loadOptions.inputHeight = base.manifest.definition.input.height
        }
        let dataset = try FaceDataset.load(from: data, options: loadOptions)
        try ModelRepository(directory: models).prepareForWriting()
        observer?.dataLoaded(
            users: dataset.users.count, crops: dataset.samples.count, warnings: dataset.report.warnings)
        let names = Dictionary(uniqueKeysWithValues: dataset.users.map { (String($0.id), $0.name) })

        guard let base else {
            let session = try FitSession(
                dataset: dataset, configuration: configuration, checkpointDirectory: checkpointDirectory)
            let result = try session.run(resume: resume, observer: observer, shouldStop: shouldStop)
            let evaluation = try ModelEvaluation.evaluate(
                result.model, on: result.heldOut, names: names,
                targetFalseAcceptRate: configuration.targetFalseAcceptRate)
            if shouldStop() { throw FitError.interrupted(checkpoint: session.checkpointURL.path) }
            let bundle = try BundleWriter.write(
                fit: result, run: evaluation, dataset: dataset, configuration: configuration, modelsDirectory: models)
            session.removeCheckpoint()
            return FitJobResult(bundle: bundle, bestEpoch: result.bestEpoch, metrics: evaluation.metrics)
        }

        observer?.baseChosen(base, fineTuning: fineTuning)
        let (result, strangers): (FitResult, CalibrationStrangers)
        switch fineTuning {
        case .all:
            (result, strangers) = try FineTuneSession(
                dataset: dataset, configuration: configuration, base: base, checkpointDirectory: checkpointDirectory
            ).run(observer: observer, shouldStop: shouldStop)
        case .head:
            (result, strangers) = try BaseFitSession(
                dataset: dataset, configuration: configuration, base: base,
                cacheDirectory: models.appendingPathComponent(Self.embeddingsFolderName)
            ).run(observer: observer, shouldStop: shouldStop)
        }
        let evaluation = try ModelEvaluation.evaluate(
            result.model, on: result.heldOut, names: names, targetFalseAcceptRate: configuration.targetFalseAcceptRate,
            strangers: strangers.sources, probabilities: result.heldOutProbabilities)
        let bundle = try BundleWriter.write(
            fit: result, run: evaluation, dataset: dataset, configuration: configuration, modelsDirectory: models)
        if let rates = evaluation.metrics.calibration {
            observer?.calibrated(rates: rates, folds: strangers.folds, seconds: strangers.seconds)
        }
        return FitJobResult(bundle: bundle, bestEpoch: result.bestEpoch, metrics: evaluation.metrics)
    }
}
