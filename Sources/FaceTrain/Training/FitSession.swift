import FaceTrainEngine
import Foundation

/// Receives progress from a fit: per batch (for a live bar) and per epoch (for a summary line).
public protocol FitObserver: AnyObject {
    func fitStarted(trainingCrops: Int, heldOutCrops: Int, classes: Int, epochs: Int, resumedFrom: Int?)
    func batchFinished(epoch: Int, batch: Int, batches: Int, imagesPerSecond: Double, loss: Double)
    func epochFinished(_ record: EpochRecord, isBest: Bool)
}

/// What a finished fit hands to evaluation and the bundle writer.
public struct FitResult: Sendable {
    /// The weights of the epoch with the lowest held-out loss.
    public var model: TrainedModel
    public var history: [EpochRecord]
    public var bestEpoch: Int
    public var training: [FaceSample]
    public var heldOut: [FaceSample]
    /// The model's probabilities for each held-out crop when the session already has them (a head
    /// on a frozen extractor scores the crops' cached embeddings); nil: run the model to get them.
    public var heldOutProbabilities: [[Float]]? = nil
}

/// Trains a classifier (ref-small unless the configuration names another architecture) on a data
/// folder: augmentation, AdamW with cosine schedule and warm-up, label smoothing, class-weighted
/// loss, best epoch by held-out loss, a checkpoint after every epoch.
public final class FitSession {
    public let dataset: FaceDataset
    public let configuration: FitConfiguration
    public let definition: ModelDefinition
    public let training: [FaceSample]
    public let heldOut: [FaceSample]
    /// Identifies this fit's data, configuration and architecture (see `key(dataset:configuration:definition:)`).
    let key: String
    /// Where the checkpoint of this data and configuration lives.
    public let checkpointURL: URL
    /// Class index of each label.
    let classIndex: [Int: Int]
    /// Held from `run` until the checkpoint is removed: one fit per checkpoint at a time.
    private lazy var checkpointLock = CheckpointLock(checkpointURL: checkpointURL)

    /// Weights the network starts from (matching tensors only: a base's trunk); nil starts from
    /// He-initialised weights.
    let initialWeights: [LayerWeights]?

    /// With `definition` nil, the configuration's architecture at its width and input size.
    public init(
        dataset: FaceDataset, configuration: FitConfiguration, checkpointDirectory: URL,
        definition: ModelDefinition? = nil, initialWeights: [LayerWeights]? = nil
    ) throws(FitError) {
        self.initialWeights = initialWeights
        self.dataset = dataset
        self.configuration = configuration
        (training, heldOut) = try Self.split(dataset, holdout: configuration.holdout)
        if let definition {
            self.definition = definition
        } else {
            do {
                self.definition = try ModelDefinition.architecture(named: configuration.architecture).classifier(
                    classLabels: dataset.labels.map(String.init), inputSize: configuration.inputSize, channels: 3,
                    width: configuration.width)
            } catch { throw .engine(error.description) }
        }
        // Before any step: a definition the exporters would refuse must not train for hours first.
        do { try self.definition.validate(as: .classifier) } catch { throw .invalidDefinition(error) }
        classIndex = Dictionary(uniqueKeysWithValues: dataset.labels.enumerated().map { ($1, $0) })
        key = Self.key(dataset: dataset, configuration: configuration, definition: self.definition)
        checkpointURL = checkpointDirectory.appendingPathComponent("fit-\(key.prefix(16)).checkpoint")
    }

    /// The content-hash split of `dataset`, refused when too little is left to train on or no
    /// user crop is held out: users' held-out crops choose the epoch and calibrate the threshold,
    /// and without any both would be guesses.
    static func split(_ dataset: FaceDataset, holdout: Double) throws(FitError)
        -> (training: [FaceSample], heldOut: [FaceSample])
    {
        let split = dataset.split(holdout: holdout)
        guard split.training.count >= 2 else { throw .tooFewTrainingCrops(count: split.training.count) }
        guard split.heldOut.contains(where: { ClassLabel.isUser(id: $0.label) }) else {
            throw .noHeldOutUsers(holdout: holdout)
        }
        return split
    }

    /// Identifies a fit: the same data, configuration and architecture give the same key (so a
    /// checkpoint of an older facetrain whose ref-small differs is not resumed into this one).
    static func key(dataset: FaceDataset, configuration: FitConfiguration, definition: ModelDefinition) -> String {
        let settings = (try? JSONText.data(configuration, pretty: false)) ?? Data()
        let architecture = (try? JSONText.data(definition, pretty: false)) ?? Data()
        // Corrections change the split, so they are part of what a checkpoint was trained on.
        let corrections = Data(dataset.corrections.sorted().joined(separator: "\n").utf8)
        return contentHash(Data(dataset.fingerprint.utf8) + corrections + settings + architecture)
    }

    /// Loss weight per class: inverse frequency in the training split, normalised to mean 1 over
    /// crops and clipped to 0.2...5, so a large class 1 or 2 cannot drown 25 crops of a user.
    var classWeights: [Float] {
        var counts = [Int](repeating: 0, count: dataset.labels.count)
        for sample in training { counts[classIndex[sample.label]!] += 1 }
        let total = Float(training.count)
        let classes = Float(counts.filter { $0 > 0 }.count)
        return counts.map { $0 == 0 ? 1 : min(max(total / (classes * Float($0)), 0.2), 5) }
    }

    /// Seed of everything random at one position of one epoch, independent of threads and of resuming.
    func seed(epoch: Int, stream: UInt64, index: Int) -> UInt64 {
        Self.seed(configuration.seed, epoch: epoch, stream: stream, index: index)
    }

    /// The seed of one position of one epoch of a run seeded `base` (fit and pretrain share it).
    static func seed(_ base: UInt64, epoch: Int, stream: UInt64, index: Int) -> UInt64 {
        var generator = SplitMix64(
            seed: base ^ (UInt64(epoch) &* 0x9E37_79B9_7F4A_7C15) ^ (stream &* 0xBF58_476D_1CE4_E5B9) ^ UInt64(index))
        return generator.next()
    }

    /// Fills `images` (a [n, 3, H, W] buffer) with the given samples, augmented or not, in parallel.
    func fillBatch(
        _ samples: [FaceSample], indices: ArraySlice<Int>, epoch: Int, augment: Bool, into images: inout Tensor
    ) {
        let input = definition.input
        let plane = input.channels * input.width * input.height
        let order = Array(indices)
        let settings = configuration.augmentation
        images.scalars.withUnsafeMutableBufferPointer { buffer in
            let base = buffer.baseAddress!
            Parallel.forEach(order.count) { position in
                let sample = samples[order[position]]
                if augment {
                    var random = SplitMix64(seed: seed(epoch: epoch, stream: 1, index: order[position]))
                    ImageTensor.writeAugmented(
                        sample.image, input: input, settings: settings, random: &random, to: base + position * plane)
                } else {
                    ImageTensor.write(sample.image, input: input, to: base + position * plane)
                }
            }
        }
    }

    /// Trains; with `resume`, continues from the checkpoint. `shouldStop` is polled between
    /// batches (Ctrl-C): the run then ends with `FitError.interrupted` and the checkpoint kept.
    public func run(resume: Bool, observer: FitObserver?, shouldStop: () -> Bool = { false }) throws(FitError)
        -> FitResult
    {
        try lockCheckpoint()
        let batchSize = min(configuration.batchSize, training.count)
        let batchCount = max(training.count / batchSize, 1)  // the remainder waits for the next shuffle
        var trainer = try makeTrainer(batchCount: batchCount)
        var history: [EpochRecord] = []
        var bestEpoch = 0
        var bestLoss = Double.infinity
        var bestWeights = trainer.network.weights
        var firstEpoch = 1
        if resume {
            let checkpoint = try Checkpoint.read(from: checkpointURL)
            guard checkpoint.header.key == key else { throw .checkpointMismatch(path: checkpointURL.path) }
            let header = checkpoint.header
            // A genuine checkpoint took one optimizer step per batch of every finished epoch.
            let steps = header.epochsDone * batchCount
            guard (0...configuration.epochs).contains(header.epochsDone), header.history.count == header.epochsDone,
                (0...header.epochsDone).contains(header.bestEpoch), header.trainer?.step == steps,
                header.trainer?.optimizerStep == steps
            else {
                throw .checkpointUnreadable(
                    path: checkpointURL.path,
                    reason: "its counters (\(header.epochsDone) epochs done, history, best epoch, steps) do not fit "
                        + "a run of \(configuration.epochs) epochs of \(batchCount) batches")
            }
            do {
                try trainer.network.load(Self.weights(checkpoint.tensors, prefix: "weights/", definition: definition))
                bestWeights = try Self.weights(checkpoint.tensors, prefix: "best/", definition: definition)
                var slots: [String: Tensor] = [:]
                for (name, tensor) in checkpoint.tensors where name.hasPrefix("optimizer/") {
                    slots[String(name.dropFirst(10))] = tensor
                }
                guard let state = checkpoint.header.trainer else {
                    throw TrainingError.stateMismatch("no trainer state")
                }
                try trainer.restore(
                    TrainingState(
                        step: state.step,
                        optimizer: OptimizerState(kind: state.optimizerKind, step: state.optimizerStep, slots: slots),
                        generators: state.generators))
            } catch {
                let reason = if case TrainingError.stateMismatch(let reason) = error { reason } else { "\(error)" }
                throw .checkpointUnreadable(path: checkpointURL.path, reason: reason)
            }
            history = checkpoint.header.history
            bestEpoch = checkpoint.header.bestEpoch
            bestLoss = checkpoint.header.bestHeldOutLoss
            firstEpoch = checkpoint.header.epochsDone + 1
        }
        observer?.fitStarted(
            trainingCrops: training.count, heldOutCrops: heldOut.count, classes: definition.classLabels.count,
            epochs: configuration.epochs, resumedFrom: resume ? firstEpoch - 1 : nil)

        let input = definition.input
        var images = Tensor(zeros: [batchSize, input.channels, input.height, input.width])
        let labels = training.map { classIndex[$0.label]! }
        var learningRate = 0.0
        for epoch in firstEpoch..<(configuration.epochs + 1) {  // empty when a finished fit is resumed
            let started = Date()
            var order = Array(training.indices)
            var shuffler = SplitMix64(seed: seed(epoch: epoch, stream: 0, index: 0))
            order.shuffle(using: &shuffler)
            var lossSum = 0.0
            var correct = 0
            var seen = 0
            for batch in 0..<batchCount {
                if shouldStop() { throw .interrupted(checkpoint: checkpointURL.path) }
                let indices = order[(batch * batchSize)..<((batch + 1) * batchSize)]
                fillBatch(training, indices: indices, epoch: epoch, augment: true, into: &images)
                let batchLabels = indices.map { labels[$0] }
                let step: TrainingStepResult
                do { step = try trainer.trainStep(images: images, labels: batchLabels) } catch {
                    throw .engine("\(error)")
                }
                guard step.loss.isFinite, step.gradientNorm.isFinite else {
                    throw .diverged(epoch: epoch, batch: batch + 1, loss: step.loss)
                }
                learningRate = Double(step.learningRate)
                lossSum += Double(step.loss) * Double(indices.count)
                correct += Int((step.accuracy * Float(indices.count)).rounded())
                seen += indices.count
                let elapsed = Date().timeIntervalSince(started)
                observer?.batchFinished(
                    epoch: epoch, batch: batch + 1, batches: batchCount,
                    imagesPerSecond: Double(seen) / max(elapsed, 1e-9), loss: lossSum / Double(seen))
            }
            let (heldOutLoss, heldOutAccuracy) = try evaluateHeldOut(trainer: &trainer)
            // Weights can overflow in the last update of an epoch while every batch loss was finite.
            guard heldOutLoss.isFinite else { throw .divergedHeldOut(epoch: epoch, loss: heldOutLoss) }
            let record = EpochRecord(
                epoch: epoch, trainLoss: lossSum / Double(max(seen, 1)),
                trainAccuracy: Double(correct) / Double(max(seen, 1)),
                heldOutLoss: heldOutLoss, heldOutAccuracy: heldOutAccuracy,
                learningRate: learningRate, seconds: Date().timeIntervalSince(started))
            history.append(record)
            let isBest = heldOutLoss < bestLoss || heldOut.isEmpty
            if isBest {
                bestLoss = heldOut.isEmpty ? 0 : heldOutLoss
                bestEpoch = epoch
                bestWeights = trainer.network.weights
            }
            let state = trainer.state
            var tensors: [String: Tensor] = [:]
            for (name, tensor) in state.optimizer.slots { tensors["optimizer/" + name] = tensor }
            for layer in trainer.network.weights {
                for named in layer.tensors { tensors["weights/\(layer.name).\(named.name)"] = named.tensor }
            }
            for layer in bestWeights {
                for named in layer.tensors { tensors["best/\(layer.name).\(named.name)"] = named.tensor }
            }
            let trainerState = Checkpoint.TrainerState(
                step: state.step, optimizerKind: state.optimizer.kind, optimizerStep: state.optimizer.step,
                generators: state.generators)
            try Checkpoint(
                header: .init(
                    key: key, epochsDone: epoch, history: history, bestEpoch: bestEpoch, bestHeldOutLoss: bestLoss,
                    trainer: trainerState, tensors: []),
                tensors: tensors
            ).write(to: checkpointURL)
            observer?.epochFinished(record, isBest: isBest)
        }
        return FitResult(
            model: TrainedModel(definition: definition, weights: bestWeights), history: history, bestEpoch: bestEpoch,
            training: training, heldOut: heldOut)
    }

    /// Mean cross-entropy (no smoothing, no weights) and accuracy of the held-out crops.
    private func evaluateHeldOut(trainer: inout Trainer) throws(FitError) -> (loss: Double, accuracy: Double) {
        guard !heldOut.isEmpty else { return (0, 0) }
        let probabilities: [[Float]]
        do {
            probabilities = try Inference.probabilities(of: heldOut, with: &trainer.network, definition: definition)
        } catch { throw .engine("\(error)") }
        var loss = 0.0
        var correct = 0
        for (sample, row) in zip(heldOut, probabilities) {
            let target = classIndex[sample.label]!
            loss -= log(max(Double(row[target]), 1e-12))
            if row.indices.max(by: { row[$0] < row[$1] }) == target { correct += 1 }
        }
        return (loss / Double(heldOut.count), Double(correct) / Double(heldOut.count))
    }

    /// The trainer of this fit: He-initialised ref-small, AdamW, cosine schedule with warm-up,
    /// label smoothing, class weights and gradient clipping.
    private func makeTrainer(batchCount: Int) throws(FitError) -> Trainer {
        do {
            var network = try Network(definition: definition, seed: configuration.seed)
            if let initialWeights { network.loadMatching(initialWeights) }
            return Trainer(
                network: network, optimizer: AdamW(weightDecay: Float(configuration.weightDecay)),
                learningRate: Float(configuration.learningRate),
                schedule: .cosine(
                    warmupSteps: configuration.warmupEpochs * batchCount, totalSteps: configuration.epochs * batchCount,
                    minimumFactor: 0),
                loss: SoftmaxCrossEntropy(
                    labelSmoothing: Float(configuration.labelSmoothing), classWeights: classWeights,
                    targetMargin: Float(configuration.margin)),
                maximumGradientNorm: Float(configuration.gradientClipNorm))
        } catch {
            throw .engine("\(error)")
        }
    }

    /// Layer weights stored under `prefix` in a checkpoint, in the definition's layout.
    static func weights(_ tensors: [String: Tensor], prefix: String, definition: ModelDefinition) throws
        -> [LayerWeights]
    {
        try zip(definition.layerNames, definition.layers).map { name, layer in
            LayerWeights(
                name: name,
                tensors: try layer.parameterShapes.map { parameter in
                    guard let tensor = tensors["\(prefix)\(name).\(parameter.name)"], tensor.shape == parameter.shape
                    else {
                        throw TrainingError.stateMismatch(
                            "no tensor \(prefix)\(name).\(parameter.name) of shape \(parameter.shape)")
                    }
                    return NamedTensor(name: parameter.name, tensor: tensor)
                })
        }
    }

    /// Deletes the checkpoint once its run has become a bundle (or a base).
    public func removeCheckpoint() { checkpointLock.removeCheckpoint() }

    /// Deletes every fit checkpoint in `directory` (an erasure: each was trained on everyone in its
    /// data folder), with its lock and temporary files; returns how many checkpoints there were.
    package static func removeCheckpoints(in directory: URL) throws -> Int {
        let names = (try? FileSystem.entries(of: directory)) ?? []
        for name in names where name.hasPrefix("fit-") || name.hasPrefix(".fit-") {
            try FileSystem.removeTree(directory.appendingPathComponent(name))
        }
        return names.filter { $0.hasPrefix("fit-") && $0.hasSuffix(".checkpoint") }.count
    }

    /// Whether a fit is running on a checkpoint in `directory` (its lock is held), by its path.
    package static func runningCheckpoint(in directory: URL) -> String? {
        for name in (try? FileSystem.entries(of: directory)) ?? []
        where name.hasPrefix("fit-") && name.hasSuffix(".lock") {
            let url = directory.appendingPathComponent(name)
            switch try? FileLock.tryListed(url) {
            case .acquired(let lock): lock.release()
            case .missing: continue  // its fit finished since the listing
            case .held, nil: return url.path
            }
        }
        return nil
    }

    private func lockCheckpoint() throws(FitError) { try checkpointLock.acquire() }
}
