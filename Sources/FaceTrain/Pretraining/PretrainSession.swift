import Dispatch
import FaceTrainEngine
import Foundation

/// Everything that decides how `pretrain` trains a base extractor.
public struct PretrainConfiguration: Codable, Sendable, Equatable {
    /// Architecture of the extractor (`ModelDefinition.extractor(named:...)`).
    public var architecture = "ref-small"
    public var width = 32
    public var inputSize = 64
    public var epochs = 15
    public var batchSize = 128
    public var seed: UInt64 = 1
    public var learningRate = 3e-3
    public var weightDecay = 5e-4
    /// Linear warm-up steps (at most a fifth of the run).
    public var warmupSteps = 300
    /// CosFace scale s and margin m: logits s·(cos θ − m) on the true identity, s·cos θ elsewhere.
    public var scale = 30.0
    public var margin = 0.35
    public var augmentation = AugmentationSettings.pretraining
    /// Weight of the distillation toward a teacher's descriptors (0 = none).
    public var teacherWeight = 0.0
    /// File name of the teacher's descriptors, when distilling.
    public var teacher: String?
    /// How the teacher is distilled; nil (recipes recorded before there was a choice) is relational.
    public var teacherLoss: TeacherLoss?
    /// The distillation this recipe trains with: none without a teacher weight.
    public var distillation: TeacherLoss? { teacherWeight > 0 ? teacherLoss ?? .relational : nil }
    /// Share of a crop's side the base's embeddings see (verification, the bank, `fit`, the exports):
    /// its centre, at the input size. Training's random resized crops keep on average
    /// E[sqrt(area)] of the side (0.80 for areas of 30-100 %), so the extractor knows faces at that
    /// scale. Nil (the recipes recorded before it) is the whole crop; it changes no training step.
    public var centreCrop: Double?

    /// See `TeacherDescriptors`.
    public enum TeacherLoss: String, Codable, Sendable, CaseIterable {
        case relational, feature
    }

    public init() {}

    /// Side at which crops are cached: half again the input, so the tightest random crops
    /// (55 % of the side) still have about the input's resolution.
    public var cropSide: Int { inputSize * 3 / 2 }

    /// Pixels the embedding input adds on every side of the input size (0: the whole crop).
    public var centreCropBorder: Int {
        guard let share = centreCrop, share < 1 else { return 0 }
        return Int((Double(inputSize) * (1 / share - 1) / 2).rounded())
    }

    enum CodingKeys: String, CodingKey {
        case architecture, width, epochs, seed, scale, margin, augmentation
        case teacher
        case teacherWeight = "teacher_weight"
        case teacherLoss = "teacher_loss"
        case centreCrop = "centre_crop"
        case inputSize = "input_size"
        case batchSize = "batch_size"
        case learningRate = "learning_rate"
        case weightDecay = "weight_decay"
        case warmupSteps = "warmup_steps"
    }
}

/// One finished pretraining epoch.
public struct PretrainEpochRecord: Codable, Sendable, Equatable {
    public var epoch: Int
    public var loss: Double
    /// Share of training crops whose nearest identity row (without margin) is their own.
    public var accuracy: Double
    /// Pair accuracy on the verification identities after this epoch.
    public var verificationAccuracy: Double
    public var learningRate: Double
    public var seconds: Double
    /// Images per second of the whole loop (augmentation, step, checkpoint excluded).
    public var imagesPerSecond: Double

    enum CodingKeys: String, CodingKey {
        case epoch, loss, accuracy, seconds
        case verificationAccuracy = "verification_accuracy"
        case learningRate = "learning_rate"
        case imagesPerSecond = "images_per_second"
    }
}

/// Receives pretraining progress.
public protocol PretrainObserver: AnyObject {
    func pretrainStarted(crops: Int, identities: Int, verificationCrops: Int, epochs: Int, resumedFrom: Int?)
    func batchFinished(epoch: Int, batch: Int, batches: Int, imagesPerSecond: Double, loss: Double)
    func epochFinished(_ record: PretrainEpochRecord)
}

/// What a finished pretraining hands to the base-model writer.
public struct PretrainResult: Sendable {
    /// The extractor: input to the batch-normalised embedding.
    public var extractor: TrainedModel
    public var history: [PretrainEpochRecord]
    public var verification: VerificationMetrics
    public var trainingCrops: Int
    public var trainingIdentities: Int
}

/// Trains an extractor on many identities with a CosFace softmax, from a crop cache.
public final class PretrainSession: @unchecked Sendable {
    public let corpus: IdentityCorpus
    public let cache: CropCache
    public let configuration: PretrainConfiguration
    /// What trains: the extractor at the input size, fed augmented crops.
    public let definition: ModelDefinition
    /// What embeds whole crops and ships: the same layers, whose input has the recipe's centre crop.
    public let embeddingDefinition: ModelDefinition
    /// Training crops (of the `train` identities) and their identity index among them.
    let training: [(slot: Int, identity: Int)]
    let trainingIdentities: Int
    /// Verification crops (of the `val` identities): slots and identity.
    let verification: [(slot: Int, identity: Int)]
    /// The teacher's descriptor of each training crop, when distilling.
    let teacherRows: [[Float]?]
    /// Identifies the run (data, recipe and architecture): names its checkpoint.
    let key: String
    /// Identifies the training data alone (paths and content of every crop used, the splits and the
    /// teacher), so two recipes on the same corpus record the same fingerprint.
    public let dataFingerprint: String
    public let checkpointURL: URL
    private lazy var checkpointLock = CheckpointLock(checkpointURL: checkpointURL)

    public init(
        corpus: IdentityCorpus, cache: CropCache, configuration: PretrainConfiguration, checkpointDirectory: URL,
        teacher: TeacherDescriptors? = nil
    ) throws(CorpusError) {
        self.corpus = corpus
        self.cache = cache
        self.configuration = configuration
        definition = ModelDefinition.extractor(
            architecture: configuration.architecture, inputSize: configuration.inputSize, width: configuration.width)
        var embeddingDefinition = definition
        embeddingDefinition.input = definition.input.cropping(configuration.centreCropBorder)
        self.embeddingDefinition = embeddingDefinition
        let trainNames = corpus.identities(ofSplit: "train")
        let validationNames = corpus.identities(ofSplit: "val")
        var trainIndex: [Int: Int] = [:]
        for (index, name) in corpus.identities.enumerated() where trainNames.contains(name) {
            trainIndex[index] = trainIndex.count
        }
        var training: [(slot: Int, identity: Int)] = []
        var verification: [(slot: Int, identity: Int)] = []
        var teacherRows: [[Float]?] = []
        for crop in corpus.crops {
            guard let slot = cache.slots[crop.path] else { continue }
            if let identity = trainIndex[crop.identity] {
                training.append((slot, identity))
                teacherRows.append(teacher?.byPath[crop.path])
            } else if validationNames.contains(corpus.identities[crop.identity]) {
                verification.append((slot, crop.identity))
            }
        }
        var counts = [Int](repeating: 0, count: trainIndex.count)
        for sample in training { counts[sample.identity] += 1 }
        guard counts.contains(where: { $0 >= 2 }) else {
            throw .noRepeatedIdentity(path: corpus.imagesRoot.path, identities: trainIndex.count)
        }
        var verificationCounts: [Int: Int] = [:]
        for sample in verification { verificationCounts[sample.identity, default: 0] += 1 }
        guard verificationCounts.count >= 2, verificationCounts.values.contains(where: { $0 >= 2 }) else {
            throw .noVerificationIdentities(path: corpus.root.path, identities: verificationCounts.count)
        }
        // All-pairs verification is quadratic: at most 6,000 crops, a fixed choice.
        if verification.count > 6000 {
            let step = Double(verification.count) / 6000
            verification = (0..<6000).map { verification[Int(Double($0) * step)] }
        }
        if let teacher, !teacherRows.contains(where: { $0 != nil }) {
            throw .badTeacher(path: teacher.path, reason: "it has a descriptor for none of the training crops")
        }
        self.training = training
        self.teacherRows = TeacherDescriptors.centredUnitRows(teacherRows)
        self.verification = verification
        trainingIdentities = trainIndex.count
        // The run is what it learns from: every used crop's path and content, the splits (which
        // identity trains, verifies or is a stranger) and the teacher's content.
        let sources = corpus.crops.compactMap { crop in
            cache.slots[crop.path].map { _ in "\(crop.path):\(cache.contentHashes[crop.path] ?? "")" }
        }
        let splits = ["train", "val", "bank"].map { corpus.identities(ofSplit: $0).sorted().joined(separator: ",") }
        let settings = (try? JSONText.data(configuration, pretty: false)) ?? Data()
        let architecture = (try? JSONText.data(definition, pretty: false)) ?? Data()
        let data = Data((sources + splits + [teacher?.contentSHA256 ?? "no teacher"]).joined(separator: "\n").utf8)
        dataFingerprint = contentHash(data)
        key = contentHash(data + settings + architecture)
        checkpointURL = checkpointDirectory.appendingPathComponent("pretrain-\(key.prefix(16)).checkpoint")
    }

    func seed(epoch: Int, stream: UInt64, index: Int) -> UInt64 {
        FitSession.seed(configuration.seed, epoch: epoch, stream: stream, index: index)
    }

    /// Augmented crops of `order` into `images`, in parallel.
    private func fill(_ order: ArraySlice<Int>, epoch: Int, into images: UnsafeMutablePointer<Float>) {
        let input = definition.input
        let plane = input.channels * input.width * input.height
        let list = Array(order)
        let settings = configuration.augmentation
        let box = UncheckedPointer(images)
        Parallel.forEach(list.count) { position in
            let index = list[position]
            var random = SplitMix64(seed: seed(epoch: epoch, stream: 1, index: index))
            ImageTensor.writeAugmented(
                cache.image(slot: training[index].slot), input: input, settings: settings, random: &random,
                to: box.pointer + position * plane)
        }
    }

    /// Trains; `resume` continues from the checkpoint, `shouldStop` is polled between batches.
    public func run(resume: Bool, observer: PretrainObserver?, shouldStop: () -> Bool = { false }) throws(FitError)
        -> PretrainResult
    {
        // Before the first step: the base this writes must take a classifier head that exports.
        do { try definition.validate(as: .extractor) } catch { throw .invalidDefinition(error) }
        try lockCheckpoint()
        let batchSize = min(configuration.batchSize, training.count)
        let batchCount = max(training.count / batchSize, 1)
        var generator = SplitMix64(seed: configuration.seed)
        var network: Network
        do { network = try Network(definition: definition, seed: generator.next()) } catch {
            throw .engine("\(error)")
        }
        let features = Self.embeddingFeatures(of: definition)
        var head = CosineMarginSoftmax(
            classes: trainingIdentities, features: features, scale: Float(configuration.scale),
            margin: Float(configuration.margin), using: &generator)
        let distillation = configuration.distillation
        // Feature distillation's map from the embedding to the teacher's space (not shipped).
        var projection = Parameter(
            name: "weight",
            value: distillation == .feature
                ? Tensor(
                    randomNormal: [teacherRows.first { $0 != nil }??.count ?? 0, features],
                    standardDeviation: 1 / Float(features).squareRoot(), using: &generator)
                : Tensor(zeros: [0]))
        var optimizer = AdamW(weightDecay: Float(configuration.weightDecay))
        // A short run (a small corpus) warms up for at most a fifth of its steps.
        let totalSteps = configuration.epochs * batchCount
        let schedule = LearningRateSchedule.cosine(
            warmupSteps: min(configuration.warmupSteps, totalSteps / 5), totalSteps: totalSteps, minimumFactor: 0)
        var step = 0
        var history: [PretrainEpochRecord] = []
        var firstEpoch = 1
        if resume {
            let (checkpoint, state) = try Checkpoint.readForResume(
                at: checkpointURL, key: key, epochs: configuration.epochs, batchesPerEpoch: batchCount,
                recordCount: { $0.pretrainHistory?.count ?? 0 })
            do {
                try checkpoint.restore(&network, definition: definition, optimizer: &optimizer, trainer: state)
                guard let weight = checkpoint.tensors["head/weight"], weight.shape == head.weight.value.shape else {
                    throw TrainingError.stateMismatch("no head weight of shape \(head.weight.value.shape)")
                }
                head.weight.value = weight
                if distillation == .feature {
                    guard let saved = checkpoint.tensors["teacher/projection"], saved.shape == projection.value.shape
                    else {
                        throw TrainingError.stateMismatch("no teacher projection of shape \(projection.value.shape)")
                    }
                    projection.value = saved
                }
            } catch {
                let reason = if case TrainingError.stateMismatch(let reason) = error { reason } else { "\(error)" }
                throw .checkpointUnreadable(path: checkpointURL.path, reason: reason)
            }
            step = state.step
            history = checkpoint.header.pretrainHistory ?? []
            firstEpoch = checkpoint.header.epochsDone + 1
        }
        observer?.pretrainStarted(
            crops: training.count, identities: trainingIdentities, verificationCrops: verification.count,
            epochs: configuration.epochs, resumedFrom: resume ? firstEpoch - 1 : nil)

        let input = definition.input
        let batchShape = [batchSize, input.channels, input.height, input.width]
        let batchScalars = batchShape.reduce(1, *)
        // Two batch buffers: the next batch is augmented while the current one trains.
        let buffers = [
            UnsafeMutablePointer<Float>.allocate(capacity: batchScalars),
            UnsafeMutablePointer<Float>.allocate(capacity: batchScalars),
        ]
        let preparation = DispatchQueue(label: "facetrain.pretrain.batches")
        defer {
            preparation.sync {}
            for buffer in buffers { buffer.deallocate() }
        }
        for epoch in firstEpoch..<(configuration.epochs + 1) {
            let started = Date()
            var order = Array(training.indices)
            var shuffler = SplitMix64(seed: seed(epoch: epoch, stream: 0, index: 0))
            order.shuffle(using: &shuffler)
            var lossSum = 0.0
            var correct = 0.0
            var seen = 0
            var learningRate = 0.0
            let ready = DispatchSemaphore(value: 0)
            func prepare(_ batch: Int) {
                let slice = order[(batch * batchSize)..<((batch + 1) * batchSize)]
                let target = UncheckedPointer(buffers[batch % 2])
                preparation.async { [self] in
                    fill(slice, epoch: epoch, into: target.pointer)
                    ready.signal()
                }
            }
            prepare(0)
            for batch in 0..<batchCount {
                ready.wait()
                if shouldStop() { throw .interrupted(checkpoint: checkpointURL.path) }
                let images = Tensor(
                    shape: batchShape,
                    scalars: Array(UnsafeBufferPointer(start: buffers[batch % 2], count: batchScalars)))
                if batch + 1 < batchCount { prepare(batch + 1) }
                let labels = order[(batch * batchSize)..<((batch + 1) * batchSize)].map { training[$0].identity }
                let embeddings = network.forward(images, mode: .training)
                var result = head.lossAndGradient(embeddings: embeddings, labels: labels)
                if let distillation {
                    let rows = order[(batch * batchSize)..<((batch + 1) * batchSize)].map { teacherRows[$0] }
                    let weight = Float(configuration.teacherWeight)
                    let gradient: Tensor
                    switch distillation {
                    case .relational:
                        let distilled = TeacherDescriptors.relationalLoss(
                            embeddings: embeddings, teacher: rows, weight: weight)
                        result.loss += distilled.loss
                        gradient = distilled.gradient
                    case .feature:
                        let distilled = TeacherDescriptors.featureLoss(
                            embeddings: embeddings, teacher: rows, projection: projection.value, weight: weight)
                        result.loss += distilled.loss
                        gradient = distilled.embeddingGradient
                        projection.gradient = distilled.projectionGradient
                    }
                    for index in result.embeddingGradient.scalars.indices {
                        result.embeddingGradient.scalars[index] += gradient.scalars[index]
                    }
                }
                network.zeroGradients()
                network.backward(result.embeddingGradient)
                guard result.loss.isFinite else { throw .diverged(epoch: epoch, batch: batch + 1, loss: result.loss) }
                let rate = schedule.learningRate(base: Float(configuration.learningRate), step: step)
                optimizer.update(&network, learningRate: rate)
                optimizer.update(key: "head.weight", &head.weight, learningRate: rate)
                if distillation == .feature {
                    optimizer.update(key: "teacher.projection", &projection, learningRate: rate)
                }
                step += 1
                learningRate = Double(rate)
                lossSum += Double(result.loss) * Double(labels.count)
                correct += Double(result.accuracy) * Double(labels.count)
                seen += labels.count
                cache.releaseResidentPages()
                observer?.batchFinished(
                    epoch: epoch, batch: batch + 1, batches: batchCount,
                    imagesPerSecond: Double(seen) / max(Date().timeIntervalSince(started), 1e-9),
                    loss: lossSum / Double(seen))
            }
            let trainingSeconds = Date().timeIntervalSince(started)
            let metrics = try measureVerification(&network)
            cache.releaseResidentPages()
            let record = PretrainEpochRecord(
                epoch: epoch, loss: lossSum / Double(max(seen, 1)), accuracy: correct / Double(max(seen, 1)),
                verificationAccuracy: metrics.pairAccuracy, learningRate: learningRate,
                seconds: Date().timeIntervalSince(started), imagesPerSecond: Double(seen) / max(trainingSeconds, 1e-9))
            history.append(record)
            try writeCheckpoint(
                network: network, head: head, projection: distillation == .feature ? projection.value : nil,
                optimizer: optimizer, step: step, epoch: epoch, history: history)
            observer?.epochFinished(record)
        }
        let verificationMetrics = try measureVerification(&network)
        return PretrainResult(
            extractor: TrainedModel(definition: embeddingDefinition, weights: network.weights),
            history: history, verification: verificationMetrics,
            trainingCrops: training.count, trainingIdentities: trainingIdentities)
    }

    /// The result of the run that made `base`, with its verification measured again by this
    /// facetrain (after a change in how embeddings or metrics are computed); the recorded
    /// history stays as it was measured then.
    public func remeasure(_ base: BaseModel) throws(FitError) -> PretrainResult {
        var network: Network
        do { network = try Network(model: base.extractor) } catch { throw .engine("\(error)") }
        return PretrainResult(
            extractor: TrainedModel(definition: embeddingDefinition, weights: base.extractor.weights),
            history: base.manifest.training.epochs, verification: try measureVerification(&network),
            trainingCrops: training.count, trainingIdentities: trainingIdentities)
    }

    /// Embedding width: the size of the extractor's output (0 when the definition does not check,
    /// which `run` refuses before using it).
    static func embeddingFeatures(of definition: ModelDefinition) -> Int {
        (try? definition.layerOutputShapes())?.last.map { $0.reduce(1, *) } ?? 0
    }

    /// Embeddings of cached crops (whole crop resized to the network's input, no augmentation),
    /// by a network of `embeddingDefinition`.
    public func embeddings(ofSlots slots: [Int], with network: inout Network) throws(FitError) -> [[Float]] {
        let input = network.definition.input
        let plane = input.channels * input.width * input.height
        var rows: [[Float]] = []
        rows.reserveCapacity(slots.count)
        var start = 0
        while start < slots.count {
            let end = min(start + 128, slots.count)
            var images = Tensor(zeros: [end - start, input.channels, input.height, input.width])
            images.scalars.withUnsafeMutableBufferPointer { buffer in
                let box = UncheckedPointer(buffer.baseAddress!)
                Parallel.forEach(end - start) { position in
                    let image = cache.image(slot: slots[start + position]).resized(
                        width: input.width, height: input.height)
                    ImageTensor.write(image, input: input, to: box.pointer + position * plane)
                }
            }
            cache.releaseResidentPages()
            let output: Tensor
            do { output = try network.embeddings(for: images) } catch { throw .engine("\(error)") }
            let width = output.count / (end - start)
            for row in 0..<(end - start) { rows.append(Array(output.scalars[(row * width)..<((row + 1) * width)])) }
            start = end
        }
        return rows
    }

    /// A network of `embeddingDefinition` with the weights of `network`.
    private func embeddingNetwork(_ network: Network) throws(FitError) -> Network {
        do { return try Network(definition: embeddingDefinition, weights: network.weights) } catch {
            throw .engine("\(error)")
        }
    }

    private func measureVerification(_ network: inout Network) throws(FitError) -> VerificationMetrics {
        var embedding = try embeddingNetwork(network)
        let rows = try embeddings(ofSlots: verification.map(\.slot), with: &embedding)
        return VerificationMetrics.measure(embeddings: rows, identities: verification.map(\.identity))
    }

    private func writeCheckpoint(
        network: Network, head: CosineMarginSoftmax, projection: Tensor?, optimizer: AdamW, step: Int, epoch: Int,
        history: [PretrainEpochRecord]
    ) throws(FitError) {
        let state = optimizer.state
        var tensors = Checkpoint.trainingTensors(network: network, optimizer: state)
        tensors["head/weight"] = head.weight.value
        if let projection { tensors["teacher/projection"] = projection }
        try Checkpoint(
            header: .init(
                key: key, epochsDone: epoch, history: [], bestEpoch: epoch, bestHeldOutLoss: 0,
                trainer: Checkpoint.TrainerState(
                    step: step, optimizerKind: state.kind, optimizerStep: state.step, generators: [:]),
                tensors: [], pretrainHistory: history),
            tensors: tensors
        ).write(to: checkpointURL)
    }

    /// Writes the base model of a finished run to `folder`: the extractor, its verification
    /// metrics, and the unit embeddings of the `bank` identities' crops. Returns its manifest.
    /// `trainedOn` is the data fingerprint of the run that trained the weights, when that was another
    /// run (a re-measured base keeps its own: this session may not have loaded its teacher).
    @discardableResult
    public func writeBase(
        _ result: PretrainResult, name: String, version: Int, seconds: Double, trainedOn: String? = nil, to folder: URL
    ) throws -> BaseModel.Manifest {
        let bankNames = corpus.identities(ofSplit: "bank")
        let bankCrops = corpus.crops.filter {
            bankNames.contains(corpus.identities[$0.identity]) && cache.slots[$0.path] != nil
        }
        var network = try Network(model: result.extractor)  // of embeddingDefinition
        let bankRows = try embeddings(ofSlots: bankCrops.map { cache.slots[$0.path]! }, with: &network).map(
            ModelEvaluation.unitLength)
        let corpusName = corpus.root.lastPathComponent
        var manifest = BaseModel.Manifest(
            name: name, version: version, facetrainVersion: FaceTrainVersion.string,
            architecture: configuration.architecture, width: configuration.width,
            definition: result.extractor.definition,
            embeddingFeatures: Self.embeddingFeatures(of: definition),
            data: .init(
                corpus: corpusName, fingerprint: trainedOn ?? dataFingerprint, identities: result.trainingIdentities,
                crops: result.trainingCrops, verificationIdentities: result.verification.identities,
                verificationCrops: result.verification.crops),
            recipe: configuration,
            training: .init(
                epochs: result.history, seconds: seconds, threads: Parallel.workerCount, blas: BLASRuntime.summary),
            verification: result.verification,
            bank: .init(identities: Set(bankCrops.map(\.identity)).count, crops: bankCrops.count, split: "bank"),
            provenance:
                "Pretrained by facetrain \(FaceTrainVersion.string) `pretrain` on the `train` identities of \(corpusName) "
                + "with the recipe below; verified on its `val` identities; the bank holds embeddings of its `bank` "
                + "identities, none of which it trained on.",
            license:
                "Trained on CelebA face crops (MMLAB, The Chinese University of Hong Kong), which are available for "
                + "non-commercial research purposes only; these weights derive from them, so use them for "
                + "non-commercial research only, or pretrain a base on data you hold rights to.")
        // Base format 2 is the one whose input may have a crop: older facetrains refuse it by version,
        // and a base without one stays readable by them.
        manifest.formatVersion = result.extractor.definition.input.crop > 0 ? 2 : 1
        try BaseModel.write(
            manifest: manifest, extractor: result.extractor, bankEmbeddings: bankRows,
            bankIdentities: bankCrops.map(\.identity), to: folder)
        return manifest
    }

    /// Deletes the checkpoint once its run has become a bundle (or a base).
    public func removeCheckpoint() { checkpointLock.removeCheckpoint() }

    private func lockCheckpoint() throws(FitError) { try checkpointLock.acquire() }
}

/// A pointer the caller has made safe to hand to parallel workers (each writes its own part).
struct UncheckedPointer: @unchecked Sendable {
    let pointer: UnsafeMutablePointer<Float>
    init(_ pointer: UnsafeMutablePointer<Float>) { self.pointer = pointer }
}
