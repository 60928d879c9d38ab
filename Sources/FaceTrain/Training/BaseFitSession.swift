import FaceTrainEngine
import Foundation

/// Which base model a fit started from, as the bundle's manifest records it.
public struct BaseReference: Codable, Sendable, Equatable {
    public var name: String
    public var version: Int
    /// SHA-256 of the base's manifest.json.
    public var sha256: String
    /// "head": the extractor is frozen and only the classifier is trained.
    public var training: String

    public init(name: String, version: Int, sha256: String, training: String) {
        self.name = name
        self.version = version
        self.sha256 = sha256
        self.training = training
    }
}

/// Stranger scores that calibrate the accept threshold, by source, and how `fit` made them.
public struct CalibrationStrangers: Sendable {
    /// Source name ("leave_users_out", "bank") -> predictions of strangers (true label "2").
    public var sources: [String: [Prediction]]
    /// Folds of users left out, and seconds the extra heads took.
    public var folds: Int
    public var seconds: Double
}

/// `fit` from a frozen base extractor: every crop's embedding is computed once (several
/// augmented views, cached by content hash, so adding a user re-embeds only that user's crops),
/// and only a cosine classifier over "1", "2" and the users is trained on them, in seconds.
///
/// Because the extractor never saw the users, the threshold can be calibrated on strangers that
/// are strangers to the network that ships: heads trained K times, each without a fold of the
/// users, score those users' crops (leave-users-out); the bank of strangers shipped with the
/// base adds a floor, and the held-out class-2 crops count as well.
public final class BaseFitSession {
    public let dataset: FaceDataset
    public let configuration: FitConfiguration
    public let base: BaseModel
    public let definition: ModelDefinition
    public let training: [FaceSample]
    public let heldOut: [FaceSample]
    let classIndex: [Int: Int]
    let cacheURL: URL
    /// Class 2's prototypes in the head (StrangerCentres.count).
    let centreCount: Int

    /// Embedding views per crop: the crop itself, then its mirror image, then random augmentations.
    /// Three measured as good as four with base v4, two (no random view) as good as three with base
    /// v6, and one (no mirror image) as good as two with base v9 (3 seeds of each protocol), each
    /// time for less embedding time: one view halves a cold fit's embedding.
    public static let views = 1
    /// Crops embedded per extractor batch (and between two polls of Ctrl-C): about 64 images.
    static let cropsPerBatch = 64 / views
    /// Length the embedding is scaled to before the classifier (logits are 16·cos θ).
    static let scale: Float = 16
    /// Margin on the true class's cosine while training the head (CosFace).
    static let margin: Float = 0.2
    static let headEpochs = 30
    static let headLearningRate: Float = 0.01
    /// Folds of users left out. Each fold's head knows (K-1)/K of the users; fewer classes give a
    /// stranger more probability, so small K over-estimates the rate (celeba: 5 folds delivered
    /// 2.8 % for 5 % promised, 10 folds 3.3 %, at 0.1-1.5 s a head).
    static let folds = 10

    public init(dataset: FaceDataset, configuration: FitConfiguration, base: BaseModel, cacheDirectory: URL)
        throws(FitError)
    {
        self.dataset = dataset
        self.configuration = configuration
        self.base = base
        try BaseModel.checkExtractor(base)
        (training, heldOut) = try FitSession.split(dataset, holdout: configuration.holdout)
        var definition = try base.classifier(labels: dataset.labels.map(String.init))
        if let index = definition.layers.firstIndex(where: { $0.kind == .l2Normalize }) {
            definition.layers[index] = .l2Normalize(scale: Self.scale)
        }
        // Class 2's extra prototypes for corrected strangers, and the layers that take their maximum.
        let labels = dataset.labels
        centreCount = StrangerCentres.count(
            corrected: StrangerCentres.corrected(training, corrections: dataset.corrections).count)
        if centreCount > 1, let strangers = labels.firstIndex(of: ClassLabel.unknownPerson.id),
            let last = definition.layers.indices.last, case .linear(let features, _) = definition.layers[last]
        {
            definition.layers[last] = .linear(inputFeatures: features, outputFeatures: labels.count + centreCount - 1)
            definition.layers += StrangerCentres.mergeLayers(
                classes: labels.count, strangers: strangers, centres: centreCount
            ).map(\.0)
        }
        // The base's trunk with this head is what gets exported: check it before training the head.
        do { try definition.validate(as: .classifier) } catch { throw .invalidDefinition(error) }
        self.definition = definition
        classIndex = Dictionary(uniqueKeysWithValues: dataset.labels.enumerated().map { ($1, $0) })
        cacheURL = cacheDirectory.appendingPathComponent(
            "embeddings-\(base.manifestSHA256.prefix(16))-\(Self.views)views.cache")
    }

    /// Loss weight per class, as in `FitSession`: inverse frequency clipped to 0.2...5.
    func classWeights(of samples: [FaceSample], classes: [Int]) -> [Float] {
        var counts = [Int](repeating: 0, count: classes.count)
        let index = Dictionary(uniqueKeysWithValues: classes.enumerated().map { ($1, $0) })
        for sample in samples { if let position = index[sample.label] { counts[position] += 1 } }
        let total = Float(counts.reduce(0, +))
        let present = Float(counts.filter { $0 > 0 }.count)
        return counts.map { $0 == 0 ? 1 : min(max(total / (present * Float($0)), 0.2), 5) }
    }

    /// Trains the head and the leave-users-out heads; the model is the base's extractor with it.
    /// `shouldStop` is polled between batches of embeddings and between heads (Ctrl-C): the run
    /// then ends with `FitError.interruptedHead`, the embeddings computed so far cached for the next.
    public func run(observer: FitObserver?, shouldStop: () -> Bool = { false }) throws(FitError)
        -> (fit: FitResult, strangers: CalibrationStrangers)
    {
        let all = training + heldOut
        let views = try embeddingViews(of: all, shouldStop: shouldStop)
        if shouldStop() { throw .interruptedHead(cache: cacheURL.path) }
        let trainingViews = Array(views[0..<training.count])
        let labels = dataset.labels
        observer?.fitStarted(
            trainingCrops: training.count, heldOutCrops: heldOut.count, classes: labels.count,
            epochs: Self.headEpochs, resumedFrom: nil)
        let centres = StrangerCentres(
            samples: training, views: trainingViews, corrections: dataset.corrections, seed: configuration.seed)
        precondition(centres.count == centreCount, "the centres are counted from the same training crops")
        let (weight, history) = trainHead(
            samples: training, views: trainingViews, classes: labels, seed: configuration.seed, observer: observer,
            heldOut: (heldOut, Array(views[training.count...])), centres: (centres, centres.assignment))
        var layerWeights = base.extractor.weights
        // After the extractor: the normalisation, the prototypes (`weight`), then the merge's layers.
        var merge = StrangerCentres.mergeLayers(
            classes: labels.count, strangers: labels.firstIndex(of: ClassLabel.unknownPerson.id) ?? 0,
            centres: centres.count
        ).map(\.1)[...]
        var prototypesWritten = false
        for (index, layer) in definition.layers.enumerated().dropFirst(base.extractor.definition.layers.count) {
            let name = definition.layerNames[index]
            switch layer {
            case .linear(_, let outputs) where !prototypesWritten:
                prototypesWritten = true
                layerWeights.append(
                    LayerWeights(
                        name: name,
                        tensors: [
                            NamedTensor(name: "weight", tensor: weight),
                            NamedTensor(name: "bias", tensor: Tensor(zeros: [outputs])),
                        ]))
            case .linear, .relu:
                layerWeights.append(LayerWeights(name: name, tensors: merge.popFirst() ?? []))
            default:
                layerWeights.append(LayerWeights(name: name, tensors: []))
            }
        }
        let model = TrainedModel(definition: definition, weights: layerWeights)

        // Leave-users-out: each fold's users are strangers to a head trained without them (and
        // the extractor never saw anyone here), so their crops are what unseen strangers look like.
        let calibrationStarted = Date()
        let users = labels.filter(ClassLabel.isUser(id:))
        var order = users
        var shuffler = SplitMix64(seed: configuration.seed ^ 0x5EED)
        order.shuffle(using: &shuffler)
        let folds = min(Self.folds, users.count)
        var leftOut: [Prediction] = []
        if folds >= 2 {
            // The folds are independent heads with their own seeds: trained side by side, one per
            // core (a head's own batches are too small to keep two cores busy), gathered in fold order.
            // The caller's `shouldStop` need not be thread-safe: the workers take turns calling it.
            let stopLock = NSLock()
            let foldPredictions = Parallel.map(folds) { fold -> [Prediction]? in
                if stopLock.withLock(shouldStop) { return nil }
                let foldUsers = Set(order.enumerated().filter { $0.offset % folds == fold }.map(\.element))
                let keptClasses = labels.filter { !foldUsers.contains($0) }
                let keep = training.indices.filter { !foldUsers.contains(training[$0].label) }
                let (foldWeight, _) = trainHead(
                    samples: keep.map { training[$0] }, views: keep.map { trainingViews[$0] }, classes: keptClasses,
                    seed: configuration.seed &+ UInt64(fold + 1), observer: nil,
                    centres: (centres, keep.map { centres.assignment[$0] }))
                let probes = all.indices.filter { foldUsers.contains(all[$0].label) }
                let rows = probes.map { views[$0][0] }
                let probabilities = Self.probabilities(
                    rows, weight: foldWeight, classOfRow: centres.classOfRow(classes: keptClasses))
                let columns = keptClasses.map { label in labels.firstIndex(of: label)! }
                let keptUsers = keptClasses.indices.filter { ClassLabel.isUser(id: keptClasses[$0]) }
                return probes.enumerated().map { position, probe in
                    let row = Scoring.countingAbsentUsers(
                        probabilities[position], absent: foldUsers.count, users: keptUsers)
                    var full = [Float](repeating: 0, count: labels.count)
                    for (column, value) in zip(columns, row) { full[column] = value }
                    return Prediction(path: all[probe].path, trueLabel: .unknownPerson, probabilities: full)
                }
            }
            for predictions in foldPredictions {
                guard let predictions else { throw .interruptedHead(cache: cacheURL.path) }
                leftOut += predictions
            }
        }
        var sources = ["leave_users_out": leftOut]
        if !base.bankEmbeddings.isEmpty {
            sources["bank"] = Self.probabilities(
                base.bankEmbeddings, weight: weight, classOfRow: centres.classOfRow(classes: labels)
            ).enumerated().map {
                Prediction(path: "bank/\($0.offset)", trueLabel: .unknownPerson, probabilities: $0.element)
            }
        }
        // The held-out crops' scores from their embeddings, by the rule the exported model computes,
        // to float rounding (FitJobTests checks both agree, with and without corrected strangers'
        // centres): running the whole network over them again cost a second.
        let heldOutProbabilities = Self.probabilities(
            views[training.count...].map { $0[0] }, weight: weight, classOfRow: centres.classOfRow(classes: labels))
        let fit = FitResult(
            model: model, history: history, bestEpoch: Self.headEpochs, training: training, heldOut: heldOut,
            heldOutProbabilities: heldOutProbabilities)
        return (
            fit,
            CalibrationStrangers(
                sources: sources, folds: folds, seconds: Date().timeIntervalSince(calibrationStarted))
        )
    }

    /// Mean cross-entropy and accuracy of the held-out crops whose class the head has, under the
    /// head's probabilities without margin (what the exported model computes); NaN when none is.
    static func heldOutScores(
        _ samples: [FaceSample], views: [[[Float]]], weight: Tensor, classes: [Int], index: [Int: Int],
        classOfRow: [Int]
    ) -> (loss: Double, accuracy: Double) {
        let kept = samples.indices.filter { index[samples[$0].label] != nil }
        guard !kept.isEmpty else { return (.nan, .nan) }
        let (unit, _) = CosineMarginSoftmax.normalizeRows(
            weight.scalars, rows: weight.shape[0], columns: weight.shape[1])
        let rows = probabilities(
            kept.map { views[$0][0] }, weight: Tensor(shape: weight.shape, scalars: unit), classOfRow: classOfRow)
        var loss = 0.0
        var correct = 0
        for (position, sample) in kept.enumerated() {
            let truth = index[samples[sample].label]!
            loss -= log(Double(max(rows[position][truth], 1e-12)))
            if rows[position].indices.max(by: { rows[position][$0] < rows[position][$1] }) == truth { correct += 1 }
        }
        return (loss / Double(kept.count), Double(correct) / Double(kept.count))
    }

    /// Softmax of 16·cos θ against the unit rows of `weight`, per embedding row, a class's logit
    /// being the largest of its rows (`classOfRow`: the class of each row), as the exported model computes.
    static func probabilities(_ rows: [[Float]], weight: Tensor, classOfRow: [Int]) -> [[Float]] {
        let (prototypes, features) = (weight.shape[0], weight.shape[1])
        let classes = (classOfRow.max() ?? -1) + 1
        guard !rows.isEmpty else { return [] }
        let cosines = CosineMarginSoftmax.cosines(
            Tensor(shape: [rows.count, features], scalars: rows.flatMap { $0 }), unitRows: weight)
        return rows.indices.map { row in
            var logits = [Float](repeating: -.infinity, count: classes)
            for prototype in 0..<prototypes {
                let logit = scale * cosines.scalars[row * prototypes + prototype]
                logits[classOfRow[prototype]] = max(logits[classOfRow[prototype]], logit)
            }
            let maximum = logits.max() ?? 0
            var sum: Float = 0
            for index in logits.indices {
                logits[index] = expf(logits[index] - maximum)
                sum += logits[index]
            }
            return logits.map { $0 / sum }
        }
    }

    /// A cosine classifier over `classes` trained on the views of `samples`: unit rows [classes, features].
    /// With `heldOut` (its samples and their views), every epoch's record carries the loss and
    /// accuracy of the held-out crops (their first view, the crop itself) under the head as it would
    /// ship; without, both are NaN (the leave-users-out heads, whose records nobody reads).
    /// `centres` gives class 2's prototypes and each sample's centre (aligned with `samples`).
    func trainHead(
        samples: [FaceSample], views: [[[Float]]], classes: [Int], seed: UInt64, observer: FitObserver?,
        heldOut: (samples: [FaceSample], views: [[[Float]]])? = nil,
        centres: (centres: StrangerCentres, assignment: [Int])
    ) -> (weight: Tensor, history: [EpochRecord]) {
        let features = base.manifest.embeddingFeatures
        var generator = SplitMix64(seed: seed)
        let classOfRow = centres.centres.classOfRow(classes: classes)
        var head = CosineMarginSoftmax(
            classes: classOfRow.count, features: features, scale: Self.scale, margin: Self.margin,
            using: &generator)
        let index = Dictionary(uniqueKeysWithValues: classes.enumerated().map { ($1, $0) })
        let targets = centres.centres.rows(of: samples, assignment: centres.assignment, classes: classes)
        var rows: [(sample: Int, view: Int)] = []
        for sample in samples.indices where targets[sample] != nil {
            for view in 0..<Self.views { rows.append((sample, view)) }
        }
        // Class weights by class, shared by a class's prototypes: more centres are not more weight.
        let classWeights = classWeights(of: samples, classes: classes)
        let weights = classOfRow.map { classWeights[$0] }
        var optimizer = AdamW(weightDecay: 5e-4)
        let batchSize = min(128, rows.count)
        let batches = max(rows.count / batchSize, 1)
        let schedule = LearningRateSchedule.cosine(
            warmupSteps: batches, totalSteps: Self.headEpochs * batches, minimumFactor: 0)
        var history: [EpochRecord] = []
        var step = 0
        for epoch in 1...Self.headEpochs {
            let started = Date()
            var order = Array(rows.indices)
            order.shuffle(using: &generator)
            var lossSum = 0.0
            var correct = 0.0
            for batch in 0..<batches {
                let picked = order[(batch * batchSize)..<((batch + 1) * batchSize)]
                var scalars: [Float] = []
                scalars.reserveCapacity(picked.count * features)
                for row in picked { scalars += views[rows[row].sample][rows[row].view] }
                let labels = picked.map { targets[rows[$0].sample]! }
                let result = head.lossAndWeightGradient(
                    embeddings: Tensor(shape: [picked.count, features], scalars: scalars), labels: labels,
                    classWeights: weights)
                let rate = schedule.learningRate(base: Self.headLearningRate, step: step)
                optimizer.beginStep()
                optimizer.update(key: "head.weight", &head.weight, learningRate: rate)
                step += 1
                lossSum += Double(result.loss)
                correct += Double(result.accuracy)
                if observer != nil {
                    observer?.batchFinished(
                        epoch: epoch, batch: batch + 1, batches: batches,
                        imagesPerSecond: Double((batch + 1) * batchSize) / max(Date().timeIntervalSince(started), 1e-9),
                        loss: lossSum / Double(batch + 1))
                }
            }
            let (heldOutLoss, heldOutAccuracy) =
                heldOut.map {
                    Self.heldOutScores(
                        $0.samples, views: $0.views, weight: head.weight.value, classes: classes, index: index,
                        classOfRow: classOfRow)
                } ?? (.nan, .nan)
            let record = EpochRecord(
                epoch: epoch, trainLoss: lossSum / Double(batches), trainAccuracy: correct / Double(batches),
                heldOutLoss: heldOutLoss, heldOutAccuracy: heldOutAccuracy,
                learningRate: Double(schedule.learningRate(base: Self.headLearningRate, step: step - 1)),
                seconds: Date().timeIntervalSince(started))
            history.append(record)
            observer?.epochFinished(record, isBest: epoch == Self.headEpochs)
        }
        let (unit, _) = CosineMarginSoftmax.normalizeRows(
            head.weight.value.scalars, rows: classOfRow.count, columns: features)
        return (Tensor(shape: [classOfRow.count, features], scalars: unit), history)
    }

    /// The first `views` embeddings of every crop in this base's caches made with more views a crop
    /// (an older facetrain's), keyed by content hash; nothing when there are none or they are unreadable.
    static func firstViewsOfOtherCaches(besides cacheURL: URL, key: String, features: Int) -> [String: Tensor] {
        var found: [String: Tensor] = [:]
        for (other, count) in (try? otherViewCounts(besides: cacheURL)) ?? [] where count > views {
            guard let checkpoint = try? Checkpoint.read(from: other), checkpoint.header.key == key else { continue }
            for (hash, tensor) in checkpoint.tensors where tensor.shape == [count, features] {
                found[hash] = Tensor(shape: [views, features], scalars: Array(tensor.scalars[..<(views * features)]))
            }
        }
        return found
    }

    /// Deletes the caches of this base made with another number of views (an older facetrain's,
    /// whose first views `firstViewsOfOtherCaches` has taken over). Called holding the cache lock.
    static func removeOtherViewCounts(besides cacheURL: URL) throws {
        for (other, _) in try otherViewCounts(besides: cacheURL) { try FileSystem.removeTree(other) }
    }

    /// The caches beside `cacheURL` of the same base with another view count (its name up to the last
    /// dash, then "<n>views.cache"), each with that count; the one place that reads these names.
    static func otherViewCounts(besides cacheURL: URL) throws -> [(url: URL, views: Int)] {
        let name = cacheURL.lastPathComponent
        guard let dash = name.lastIndex(of: "-") else { return [] }
        let (prefix, suffix) = (String(name[...dash]), "views.cache")
        let directory = cacheURL.deletingLastPathComponent()
        return try FileSystem.entries(of: directory).compactMap { other in
            guard other != name, other.hasPrefix(prefix), other.hasSuffix(suffix),
                let count = Int(other.dropFirst(prefix.count).dropLast(suffix.count))
            else { return nil }
            return (directory.appendingPathComponent(other), count)
        }
    }

    /// Removes the embeddings of the crops with these content hashes from every embeddings cache
    /// in `cacheDirectory` (an erasure); a cache that cannot be read is deleted (it is only a
    /// cache). Returns how many crops' embeddings were removed.
    package static func forgetEmbeddings(of hashes: Set<String>, in cacheDirectory: URL) throws -> Int {
        guard FileSystem.kind(at: cacheDirectory) == .directory else { return 0 }
        return try withCacheLock(in: cacheDirectory) {
            var removed = 0
            for name in try FileSystem.entries(of: cacheDirectory)
            where name.hasPrefix("embeddings-") || name.hasPrefix(".embeddings-") {
                let url = cacheDirectory.appendingPathComponent(name)
                // Leftovers of an interrupted write hold embeddings too (a live writer holds the lock).
                guard !name.hasPrefix("."), name.hasSuffix(".cache"), var checkpoint = try? Checkpoint.read(from: url)
                else {
                    try FileSystem.removeTree(url)
                    continue
                }
                let forgotten = checkpoint.tensors.keys.filter(hashes.contains)
                guard !forgotten.isEmpty else { continue }
                for hash in forgotten { checkpoint.tensors[hash] = nil }
                try checkpoint.write(to: url)
                removed += forgotten.count
            }
            return removed
        }
    }

    /// Runs `body` holding `<cacheDirectory>/.lock`: every writer of an embeddings cache and every
    /// erasure takes it, across threads and processes, so an erasure never removes the temporary
    /// file of a write in progress, and two erasures never rewrite one cache at once.
    static func withCacheLock<Result>(in cacheDirectory: URL, _ body: () throws -> Result) throws -> Result {
        try FileManager.default.createDirectory(at: cacheDirectory, withIntermediateDirectories: true)
        let lock = try FileLock.acquire(
            cacheDirectory.appendingPathComponent(cacheLockName), create: true, wait: true)
        defer { lock?.release() }
        return try body()
    }

    static let cacheLockName = ".lock"

    /// Every view's embedding of every sample: from the cache when its content hash is there,
    /// otherwise computed (and the cache rewritten, also when `shouldStop` ends the run early).
    func embeddingViews(of samples: [FaceSample], shouldStop: () -> Bool = { false }) throws(FitError)
        -> [[[Float]]]
    {
        var cached: [String: Tensor] = [:]
        if let checkpoint = try? Checkpoint.read(from: cacheURL), checkpoint.header.key == base.manifestSHA256 {
            cached = checkpoint.tensors
        }
        let features = base.manifest.embeddingFeatures
        var tookOver = false
        // An older facetrain's cache of this base with more views a crop holds these views first:
        // the first fit after an upgrade takes them instead of embedding every crop again.
        for (hash, views) in Self.firstViewsOfOtherCaches(
            besides: cacheURL, key: base.manifestSHA256, features: features)
        where cached[hash] == nil {
            cached[hash] = views
            tookOver = true
        }
        /// Rewrites the cache with what this data folder uses (so it does not grow without bound)
        /// and deletes this base's caches of other view counts.
        func writeCache() {
            let used = Set(samples.map(\.contentHash))
            let cache = Checkpoint(
                header: .init(
                    key: base.manifestSHA256, epochsDone: 0, history: [], bestEpoch: 0, bestHeldOutLoss: 0,
                    trainer: nil, tensors: []),
                tensors: cached.filter { used.contains($0.key) })
            try? Self.withCacheLock(in: cacheURL.deletingLastPathComponent()) {
                try cache.write(to: cacheURL)
                try Self.removeOtherViewCounts(besides: cacheURL)
            }
        }
        var missing: [Int] = []
        var queued = Set<String>()
        for (position, sample) in samples.enumerated()
        where cached[sample.contentHash]?.shape != [Self.views, features] && !queued.contains(sample.contentHash) {
            queued.insert(sample.contentHash)
            missing.append(position)
        }
        if !missing.isEmpty {
            var network: Network
            do { network = try Network(model: base.extractor) } catch { throw .engine("\(error)") }
            let input = base.extractor.definition.input
            let plane = input.channels * input.width * input.height
            let chunk = Self.cropsPerBatch
            var start = 0
            while start < missing.count, !shouldStop() {
                let end = min(start + chunk, missing.count)
                let count = (end - start) * Self.views
                var images = Tensor(zeros: [count, input.channels, input.height, input.width])
                images.scalars.withUnsafeMutableBufferPointer { buffer in
                    let box = UncheckedPointer(buffer.baseAddress!)
                    Parallel.forEach(count) { item in
                        let sample = samples[missing[start + item / Self.views]]
                        let view = item % Self.views
                        let target = box.pointer + item * plane
                        let image = sample.image
                        switch view {
                        case 0: ImageTensor.write(image, input: input, to: target)
                        case 1: ImageTensor.write(image.mirroredHorizontally(), input: input, to: target)
                        default:
                            // Seeded by content, not by the fit's seed: the cache serves every fit.
                            var random = SplitMix64(
                                seed: UInt64(sample.contentHash.prefix(16), radix: 16)! ^ UInt64(view))
                            ImageTensor.writeAugmented(
                                image, input: input, settings: configuration.augmentation, random: &random, to: target)
                        }
                    }
                }
                let output: Tensor
                do { output = try network.embeddings(for: images) } catch { throw .engine("\(error)") }
                for crop in 0..<(end - start) {
                    let rows = Array(
                        output.scalars[(crop * Self.views * features)..<((crop + 1) * Self.views * features)])
                    cached[samples[missing[start + crop]].contentHash] = Tensor(
                        shape: [Self.views, features], scalars: rows)
                }
                start = end
            }
            writeCache()
            if start < missing.count { throw .interruptedHead(cache: cacheURL.path) }
        } else if tookOver {
            writeCache()
        }
        return samples.map { sample in
            let tensor = cached[sample.contentHash]!
            return (0..<Self.views).map { Array(tensor.scalars[($0 * features)..<(($0 + 1) * features)]) }
        }
    }
}
