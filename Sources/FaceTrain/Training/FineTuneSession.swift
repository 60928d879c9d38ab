import FaceTrainEngine
import Foundation

/// `fit --fine-tune all`: the whole network, started from the base's extractor, trained on the
/// users' crops at a lower learning rate.
///
/// The extractor then learns the users, so the strangers that calibrate the threshold must be
/// strangers to a network trained the same way: the users are split into folds, a network is
/// fine-tuned without each fold, and that fold's crops (training and held-out) are scored by it
/// (leave-users-out). The base's bank cannot count here, since its embeddings belong to the
/// frozen extractor. Costs one more fine-tune per fold.
public final class FineTuneSession {
    public let dataset: FaceDataset
    public let configuration: FitConfiguration
    public let base: BaseModel
    let checkpointDirectory: URL
    public let folds: Int

    public init(
        dataset: FaceDataset, configuration: FitConfiguration, base: BaseModel, checkpointDirectory: URL, folds: Int = 3
    ) {
        self.dataset = dataset
        self.configuration = configuration
        self.base = base
        self.checkpointDirectory = checkpointDirectory
        self.folds = folds
    }

    /// The base's architecture at its width and input, with a classifier over `labels`.
    func definition(labels: [Int]) throws(FitError) -> ModelDefinition {
        try base.classifier(labels: labels.map(String.init))
    }

    /// One fine-tune of `data` from the base; its checkpoint is removed however it ends.
    private func fineTune(_ data: FaceDataset, observer: FitObserver?, shouldStop: () -> Bool) throws(FitError)
        -> FitResult
    {
        let session = try FitSession(
            dataset: data, configuration: configuration, checkpointDirectory: checkpointDirectory,
            definition: try definition(labels: data.labels), initialWeights: base.extractor.weights)
        defer { session.removeCheckpoint() }
        return try session.run(resume: false, observer: observer, shouldStop: shouldStop)
    }

    public func run(observer: FitObserver?, shouldStop: () -> Bool = { false }) throws(FitError)
        -> (fit: FitResult, strangers: CalibrationStrangers)
    {
        do { return try runSessions(observer: observer, shouldStop: shouldStop) } catch {
            if case .interrupted = error { throw .interruptedWithoutResume }
            throw error
        }
    }

    private func runSessions(observer: FitObserver?, shouldStop: () -> Bool) throws(FitError)
        -> (fit: FitResult, strangers: CalibrationStrangers)
    {
        try BaseModel.checkExtractor(base)
        let result = try fineTune(dataset, observer: observer, shouldStop: shouldStop)

        let started = Date()
        let users = dataset.labels.filter(ClassLabel.isUser(id:))
        var order = users
        var shuffler = SplitMix64(seed: configuration.seed ^ 0x5EED)
        order.shuffle(using: &shuffler)
        let foldCount = min(folds, users.count)
        var leftOut: [Prediction] = []
        let labels = dataset.labels.map(String.init)
        if foldCount >= 2 {
            for fold in 0..<foldCount {
                let foldUsers = Set(order.enumerated().filter { $0.offset % foldCount == fold }.map(\.element))
                let kept = dataset.without(labels: foldUsers)
                let foldResult = try fineTune(kept, observer: nil, shouldStop: shouldStop)
                let probes = dataset.samples.filter { foldUsers.contains($0.label) }
                var network: Network
                do { network = try Network(model: foldResult.model) } catch { throw .engine("\(error)") }
                let probabilities: [[Float]]
                do {
                    probabilities = try Inference.probabilities(
                        of: probes, with: &network, definition: foldResult.model.definition)
                } catch { throw .engine("\(error)") }
                let columns = kept.labels.map { label in labels.firstIndex(of: String(label))! }
                // Not `Scoring.countingAbsentUsers`: a network fine-tuned on the kept users is no
                // judge of how the absent ones would score, and counting them measured far too
                // lenient here (3 seeds: CS131 23 %, ORL 12 % of never-seen strangers for 5 %).
                for (probe, row) in zip(probes, probabilities) {
                    var full = [Float](repeating: 0, count: labels.count)
                    for (column, value) in zip(columns, row) { full[column] = value }
                    leftOut.append(Prediction(path: probe.path, trueLabel: .unknownPerson, probabilities: full))
                }
            }
        }
        return (
            result,
            CalibrationStrangers(
                sources: ["leave_users_out": leftOut], folds: foldCount, seconds: Date().timeIntervalSince(started))
        )
    }
}
