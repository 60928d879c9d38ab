import FaceTrainEngine
import Foundation

/// Trains a face detector on whole photos with their face boxes and landmarks: augmented square
/// crops, the detection loss on the network's three heads, SGD with momentum, warm-up and cosine
/// decay, a checkpoint after every epoch that `--resume` continues from byte for byte, and the
/// average precision of a held-out share of the photos every few epochs. Not the network
/// (DetectorDefinition), the loss (DetectionLoss) or the file a finished detector becomes
/// (DetectorModel).
package struct DetectorTrainingConfiguration: Codable, Sendable, Equatable {
    package var epochs = 120
    package var batchSize = 32
    package var learningRate = 0.02
    package var momentum = 0.9
    package var weightDecay = 5e-4
    package var warmupEpochs = 3
    package var seed: UInt64 = 1
    package var augmentation = DetectionAugmentation()
    /// Share of the training photos held out (by a seeded draw) to measure average precision.
    package var holdOut = 0.1
    /// Measure the held-out photos every this many epochs (and after the last).
    package var measureEvery = 10
    /// Weight of the landmarks' smooth-L1 term in the loss (DetectionLoss).
    package var landmarkWeight = 0.1
    package init() {}

    private enum CodingKeys: String, CodingKey {
        case epochs, batchSize, learningRate, momentum, weightDecay, warmupEpochs, seed, augmentation, holdOut
        case measureEvery, landmarkWeight
    }

    /// Recipes written before a field existed read as the value they were trained with.
    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        epochs = try container.decode(Int.self, forKey: .epochs)
        batchSize = try container.decode(Int.self, forKey: .batchSize)
        learningRate = try container.decode(Double.self, forKey: .learningRate)
        momentum = try container.decode(Double.self, forKey: .momentum)
        weightDecay = try container.decode(Double.self, forKey: .weightDecay)
        warmupEpochs = try container.decode(Int.self, forKey: .warmupEpochs)
        seed = try container.decode(UInt64.self, forKey: .seed)
        augmentation = try container.decode(DetectionAugmentation.self, forKey: .augmentation)
        holdOut = try container.decode(Double.self, forKey: .holdOut)
        measureEvery = try container.decode(Int.self, forKey: .measureEvery)
        landmarkWeight = try container.decodeIfPresent(Double.self, forKey: .landmarkWeight) ?? 0.1
    }

    /// Checks every option against its range, naming the option that is out of it.
    package func validate() throws(ConfigurationError) {
        func check(_ ok: Bool, _ option: String, _ range: String, _ value: Any) throws(ConfigurationError) {
            guard ok else {
                throw ConfigurationError(option: option, message: "--\(option) must be \(range), got \(value)")
            }
        }
        try check((1...10_000).contains(epochs), "epochs", "1...10000", epochs)
        try check((1...512).contains(batchSize), "batch-size", "1...512", batchSize)
        try check(learningRate > 0 && learningRate <= 1, "learning-rate", "in (0, 1]", learningRate)
        try check((0..<1).contains(momentum), "momentum", "in [0, 1)", momentum)
        try check(weightDecay >= 0 && weightDecay < 1, "weight-decay", "in [0, 1)", weightDecay)
        try check((0..<0.9).contains(holdOut), "hold-out", "in [0, 0.9)", holdOut)
        try check(measureEvery >= 1, "measure-every", "at least 1", measureEvery)
        try check((0...100).contains(landmarkWeight), "landmark-weight", "0...100", landmarkWeight)
        let occlusion = augmentation.occlusionShare
        try check((0...1).contains(occlusion), "occlusion", "in [0, 1]", occlusion)
        try check((0...1).contains(augmentation.blurShare), "blur", "in [0, 1]", augmentation.blurShare)
        let size = augmentation.outputSize
        try check((64...1024).contains(size) && size % 32 == 0, "input-size", "a multiple of 32 in 64...1024", size)
    }
}

/// One finished epoch of a detector's training.
package struct DetectorEpochRecord: Codable, Sendable, Equatable {
    package var epoch: Int
    /// Mean total loss per batch and its three terms.
    package var loss: Double
    package var scoreLoss: Double
    package var boxLoss: Double
    package var landmarkLoss: Double
    package var learningRate: Double
    package var seconds: Double
    package var imagesPerSecond: Double
    /// Average precision at IoU 0.5 on the held-out photos (easy+medium, all), when measured.
    package var heldOutAveragePrecision: [String: Double]?
}

/// Receives progress of a detector's training.
package protocol DetectorTrainingObserver: AnyObject {
    func trainingStarted(photos: Int, heldOutPhotos: Int, epochs: Int, resumedFrom: Int?)
    func batchFinished(epoch: Int, batch: Int, batches: Int, imagesPerSecond: Double, loss: Double)
    func epochFinished(_ record: DetectorEpochRecord)
}

/// A detector's training run over the photos of one split of a detection set. Unchecked Sendable:
/// the batch-preparation queue reads only its constants; the checkpoint lock is used from `run`'s
/// thread alone.
package final class DetectorTrainingSession: @unchecked Sendable {
    package let configuration: DetectorTrainingConfiguration
    package let definition: ModelDefinition
    package let set: DetectionSet
    package let training: [DetectionPhoto]
    package let heldOut: [DetectionPhoto]
    /// The decoded photos, in the order of `training` and `heldOut`.
    let trainingImages: [Image]
    let heldOutImages: [Image]
    /// Identifies the data, recipe and network: names the checkpoint.
    let key: String
    package let checkpointURL: URL
    private lazy var checkpointLock = CheckpointLock(checkpointURL: checkpointURL)
    let loss: DetectionLoss
    package let startingPoint: DetectorModel?

    /// Decodes every photo of `split` once (they stay in memory: 1,905 photos of 640 px are 1.7 GB).
    /// `startingPoint` continues from a trained detector's weights (its network must be
    /// `definition`) instead of random ones.
    package init(
        set: DetectionSet, split: String, configuration: DetectorTrainingConfiguration, definition: ModelDefinition,
        startingPoint: DetectorModel? = nil, checkpointDirectory: URL
    ) throws {
        try configuration.validate()
        if let startingPoint, startingPoint.model.definition != definition {
            throw ConfigurationError(
                option: "from",
                message: "--from \(startingPoint.source) is a different network from the one this training builds "
                    + "(input size or layers differ); start from a detector trained with the same --input-size")
        }
        self.set = set
        self.configuration = configuration
        self.definition = definition
        self.startingPoint = startingPoint
        loss = DetectionLoss(landmarkWeight: configuration.landmarkWeight)
        let photos = try set.photos(inSplit: split)
        // A seeded share of the photos, drawn by file name so the draw does not depend on order.
        var heldOut: [DetectionPhoto] = []
        var training: [DetectionPhoto] = []
        for photo in photos.sorted(by: { $0.file < $1.file }) {
            var generator = SplitMix64(
                seed: configuration.seed ^ UInt64(truncatingIfNeeded: Self.stableHash(photo.file)))
            if Double(generator.next() >> 11) / Double(1 << 53) < configuration.holdOut {
                heldOut.append(photo)
            } else {
                training.append(photo)
            }
        }
        guard !training.isEmpty else {
            throw ConfigurationError(
                option: "hold-out",
                message: "--hold-out \(configuration.holdOut) leaves none of the \(photos.count) photos of split "
                    + "\(split) in \(set.root.path) to train on")
        }
        self.training = training
        self.heldOut = heldOut
        trainingImages = try Self.decode(training, of: set)
        heldOutImages = try Self.decode(heldOut, of: set)
        let recipe = (try? JSONText.data(configuration, pretty: false)) ?? Data()
        let network = (try? JSONText.data(definition, pretty: false)) ?? Data()
        let start = Data((startingPoint?.weightsChecksum ?? "").utf8)
        key = SHA256.hash(Data(set.fingerprint.utf8) + Data(split.utf8) + recipe + network + start)
        checkpointURL = checkpointDirectory.appendingPathComponent("detector-\(key.prefix(16)).checkpoint")
    }

    /// FNV-1a of the UTF-8 bytes: a hash that is the same in every process (Swift's is seeded).
    static func stableHash(_ text: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return hash
    }

    /// The photos decoded in parallel; a photo that does not decode, or whose size is not the one
    /// its boxes were drawn on, stops the run by name.
    package static func decode(_ photos: [DetectionPhoto], of set: DetectionSet) throws -> [Image] {
        let results = UnsafeMutableBufferPointer<Result<Image, DetectionSetError>?>.allocate(capacity: photos.count)
        results.initialize(repeating: nil)
        defer {
            // Deinitialised first: the images the buffer holds would otherwise never be released.
            results.deinitialize()
            results.deallocate()
        }
        let box = UncheckedResults(pointer: results.baseAddress!)
        Parallel.forEach(photos.count) { index in
            let photo = photos[index]
            let url = set.url(of: photo)
            do {
                let image = try ImageDecoder.decode(contentsOf: url)
                guard image.width == photo.width, image.height == photo.height else {
                    box.pointer[index] = .failure(
                        .unreadable(
                            path: url.path,
                            reason:
                                "it is \(image.width) x \(image.height) but annotations.jsonl says "
                                + "\(photo.width) x \(photo.height), so its boxes would be misplaced"))
                    return
                }
                box.pointer[index] = .success(image)
            } catch {
                box.pointer[index] = .failure(.unreadable(path: url.path, reason: "\(error)"))
            }
        }
        return try results.map { try $0!.get() }
    }

    private struct UncheckedResults: @unchecked Sendable {
        let pointer: UnsafeMutablePointer<Result<Image, DetectionSetError>?>
    }

    func seed(epoch: Int, stream: UInt64, index: Int) -> UInt64 {
        FitSession.seed(configuration.seed, epoch: epoch, stream: stream, index: index)
    }

    /// Augmented crops of the photos `order` names into `images`, in parallel; their faces.
    private func fill(_ order: ArraySlice<Int>, epoch: Int, into images: UnsafeMutablePointer<Float>)
        -> [[LabelledFace]]
    {
        let size = configuration.augmentation.outputSize
        let plane = 3 * size * size
        let list = Array(order)
        let box = UncheckedPointer(images)
        let faces = UnsafeMutableBufferPointer<[LabelledFace]>.allocate(capacity: list.count)
        faces.initialize(repeating: [])
        defer {
            faces.deinitialize()
            faces.deallocate()
        }
        let facesBox = UncheckedFaces(pointer: faces.baseAddress!)
        let (augmentation, input) = (configuration.augmentation, definition.input)
        Parallel.forEach(list.count) { position in
            let index = list[position]
            var random = SplitMix64(seed: seed(epoch: epoch, stream: 1, index: index))
            let crop = augmentation.writeCrop(
                of: trainingImages[index], faces: training[index].faces.map(\.labelled), input: input,
                random: &random, to: box.pointer + position * plane)
            facesBox.pointer[position] = crop.faces
        }
        return Array(faces)
    }

    private struct UncheckedFaces: @unchecked Sendable {
        let pointer: UnsafeMutablePointer<[LabelledFace]>
    }

    /// Trains; `resume` continues from the checkpoint, `shouldStop` is polled between batches.
    /// Returns the trained network's model and the epochs' records.
    package func run(resume: Bool, observer: DetectorTrainingObserver?, shouldStop: () -> Bool = { false })
        throws(FitError) -> (model: TrainedModel, history: [DetectorEpochRecord])
    {
        try checkpointLock.acquire()
        let batchSize = min(configuration.batchSize, training.count)
        let batchCount = max(training.count / batchSize, 1)
        let totalSteps = configuration.epochs * batchCount
        let schedule = LearningRateSchedule.cosine(
            warmupSteps: min(configuration.warmupEpochs * batchCount, totalSteps / 5), totalSteps: totalSteps,
            minimumFactor: 0)
        var state = try start(resume: resume, batchCount: batchCount)
        let firstEpoch = state.history.count + 1
        observer?.trainingStarted(
            photos: training.count, heldOutPhotos: heldOut.count, epochs: configuration.epochs,
            resumedFrom: resume ? firstEpoch - 1 : nil)

        let size = configuration.augmentation.outputSize
        let batchShape = [batchSize, 3, size, size]
        let batchScalars = batchShape.reduce(1, *)
        // Two batch buffers: the next batch is augmented while the current one trains.
        let buffers = [
            UnsafeMutablePointer<Float>.allocate(capacity: batchScalars),
            UnsafeMutablePointer<Float>.allocate(capacity: batchScalars),
        ]
        let batchFaces = BatchFaces()
        let preparation = DispatchQueue(label: "facetrain.detector.batches")
        defer {
            preparation.sync {}
            for buffer in buffers { buffer.deallocate() }
        }
        for epoch in firstEpoch..<(configuration.epochs + 1) {
            let started = Date()
            var order = Array(training.indices)
            var shuffler = SplitMix64(seed: seed(epoch: epoch, stream: 0, index: 0))
            order.shuffle(using: &shuffler)
            var sums = (total: 0.0, score: 0.0, box: 0.0, landmarks: 0.0)
            var seen = 0
            var learningRate = 0.0
            let ready = DispatchSemaphore(value: 0)
            func prepare(_ batch: Int) {
                let slice = order[(batch * batchSize)..<((batch + 1) * batchSize)]
                let target = UncheckedPointer(buffers[batch % 2])
                preparation.async { [self] in
                    let faces = fill(slice, epoch: epoch, into: target.pointer)
                    batchFaces.set(faces, slot: batch % 2)
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
                let faces = batchFaces.get(slot: batch % 2)
                if batch + 1 < batchCount { prepare(batch + 1) }
                let (result, rate) = try trainingStep(
                    &state, images: images, faces: faces, schedule: schedule, epoch: epoch, batch: batch)
                learningRate = Double(rate)
                sums.total += result.total
                sums.score += result.score
                sums.box += result.box
                sums.landmarks += result.landmarks
                seen += batchSize
                observer?.batchFinished(
                    epoch: epoch, batch: batch + 1, batches: batchCount,
                    imagesPerSecond: Double(seen) / max(Date().timeIntervalSince(started), 1e-9),
                    loss: sums.total / Double(batch + 1))
            }
            let trainingSeconds = Date().timeIntervalSince(started)
            let measure = !heldOut.isEmpty && (epoch % configuration.measureEvery == 0 || epoch == configuration.epochs)
            let batches = Double(batchCount)
            let record = DetectorEpochRecord(
                epoch: epoch, loss: sums.total / batches, scoreLoss: sums.score / batches, boxLoss: sums.box / batches,
                landmarkLoss: sums.landmarks / batches, learningRate: learningRate, seconds: trainingSeconds,
                imagesPerSecond: Double(seen) / max(trainingSeconds, 1e-9),
                heldOutAveragePrecision: measure ? heldOutAveragePrecision(state.network) : nil)
            state.history.append(record)
            try writeCheckpoint(
                network: state.network, optimizer: state.optimizer, step: state.step, epoch: epoch,
                history: state.history)
            observer?.epochFinished(record)
        }
        return (state.network.trainedModel, state.history)
    }

    /// Where a run stands: its network and optimizer, steps taken and epochs recorded.
    private struct RunState {
        var network: Network
        var optimizer: SGD
        var step = 0
        var history: [DetectorEpochRecord] = []
    }

    /// A new network (its score biases at the prior) and optimizer, or the checkpoint's.
    private func start(resume: Bool, batchCount: Int) throws(FitError) -> RunState {
        var network: Network
        if let startingPoint {
            do { network = try Network(model: startingPoint.model) } catch { throw .engine("\(error)") }
        } else {
            do { network = try Network(definition: definition, seed: configuration.seed) } catch {
                throw .engine("\(error)")
            }
            // Every cell starts out scoring about 0.01, not 0.5: thousands of background cells at 0.5
            // would swamp the few faces' loss in the first steps (RetinaNet's prior).
            let headBiases = Set(definition.outputLayers.map { "\(definition.layerNames[$0]).bias" })
            network.updateParameters { key, parameter in
                guard headBiases.contains(key) else { return }
                parameter.value.scalars[DetectionHeads.scoreChannel] = Float(-log((1 - 0.01) / 0.01))
            }
        }
        let optimizer = SGD(momentum: Float(configuration.momentum), weightDecay: Float(configuration.weightDecay))
        var state = RunState(network: network, optimizer: optimizer)
        guard resume else { return state }
        let (checkpoint, trainer) = try Checkpoint.readForResume(
            at: checkpointURL, key: key, epochs: configuration.epochs, batchesPerEpoch: batchCount,
            recordCount: { $0.detectorHistory?.count ?? 0 })
        do {
            try checkpoint.restore(
                &state.network, definition: definition, optimizer: &state.optimizer, trainer: trainer)
        } catch {
            let reason = if case TrainingError.stateMismatch(let reason) = error { reason } else { "\(error)" }
            throw .checkpointUnreadable(path: checkpointURL.path, reason: reason)
        }
        state.step = trainer.step
        state.history = checkpoint.header.detectorHistory ?? []
        return state
    }

    /// One optimizer step on a batch: forward, the detection loss, backward, update; the loss and
    /// the learning rate used.
    private func trainingStep(
        _ state: inout RunState, images: Tensor, faces: [[LabelledFace]], schedule: LearningRateSchedule, epoch: Int,
        batch: Int
    ) throws(FitError) -> (DetectionLoss.Result, Float) {
        let heads = state.network.forwardOutputs(images, mode: .training)
        let result = loss.evaluate(heads: heads, faces: faces)
        guard result.total.isFinite else { throw .diverged(epoch: epoch, batch: batch + 1, loss: Float(result.total)) }
        state.network.zeroGradients()
        state.network.backward(outputGradients: result.gradients)
        let rate = schedule.learningRate(base: Float(configuration.learningRate), step: state.step)
        state.optimizer.update(&state.network, learningRate: rate)
        state.step += 1
        return (result, rate)
    }

    /// Average precision at IoU 0.5 on the held-out photos, by the scorer's categories.
    package func heldOutAveragePrecision(_ network: Network) -> [String: Double] {
        let detector = FaceDetector(model: network.trainedModel, strides: DetectionHeads.strides)
        let found = detector.detect(in: heldOutImages, scoreFloor: DetectionDecoder().scoreFloor).detections
        var detections: [String: [Detection]] = [:]
        for (photo, faces) in zip(heldOut, found) { detections[photo.file] = faces }
        var result: [String: Double] = [:]
        for category in [DetectionAveragePrecision.Category.easyMedium, .all] {
            if let value = DetectionAveragePrecision.averagePrecision(
                photos: heldOut, detections: detections, category: category)
            {
                result[category.name] = value
            }
        }
        return result
    }

    private func writeCheckpoint(
        network: Network, optimizer: SGD, step: Int, epoch: Int, history: [DetectorEpochRecord]
    ) throws(FitError) {
        let state = optimizer.state
        let tensors = Checkpoint.trainingTensors(network: network, optimizer: state)
        try Checkpoint(
            header: .init(
                key: key, epochsDone: epoch, history: [], bestEpoch: epoch, bestHeldOutLoss: 0,
                trainer: Checkpoint.TrainerState(
                    step: step, optimizerKind: state.kind, optimizerStep: state.step, generators: [:]),
                tensors: [], detectorHistory: history),
            tensors: tensors
        ).write(to: checkpointURL)
    }

    /// The faces of the two batch buffers, handed from the preparation queue to the training loop.
    private final class BatchFaces: @unchecked Sendable {
        private let lock = NSLock()
        private var slots: [[[LabelledFace]]] = [[], []]

        func set(_ faces: [[LabelledFace]], slot: Int) { lock.withLock { slots[slot] = faces } }
        func get(slot: Int) -> [[LabelledFace]] { lock.withLock { slots[slot] } }
    }

    /// Deletes the checkpoint once its run has become a detector.
    package func removeCheckpoint() { checkpointLock.removeCheckpoint() }
}
