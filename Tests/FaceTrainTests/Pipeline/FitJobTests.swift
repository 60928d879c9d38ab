import Foundation
import Testing

@testable import FaceTrain
@testable import FaceTrainEngine
@testable import FaceTrainSynthesis

/// The library-level fit job, without the CLI: what a server would call.
@Suite("fit job", .serialized)
struct FitJobTests {
    /// Records what the job reports, in order.
    final class Recorder: FitJobObserver {
        var events: [String] = []
        var epochs: [EpochRecord] = []
        var calibration: [String: Double]?
        func dataLoaded(users: Int, crops: Int, warnings: [DataWarning]) { events.append("data \(users) \(crops)") }
        func baseChosen(_ base: BaseModel, fineTuning: FineTuning) {
            events.append("base \(base.manifest.name) \(fineTuning.rawValue)")
        }
        func calibrated(rates: [String: Double], folds: Int, seconds: Double) {
            events.append("calibrated \(folds)")
            calibration = rates
        }
        func fitStarted(trainingCrops: Int, heldOutCrops: Int, classes: Int, epochs: Int, resumedFrom: Int?) {
            events.append("start \(classes) \(epochs)")
        }
        func batchFinished(epoch: Int, batch: Int, batches: Int, imagesPerSecond: Double, loss: Double) {}
        func epochFinished(_ record: EpochRecord, isBest: Bool) { epochs.append(record) }
    }

    static func syntheticData(users: Int) throws -> URL {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("facetrain-job-\(UUID().uuidString)")
        let configuration = SynthesisConfiguration(
            outputDirectory: root.appendingPathComponent("data"), userCount: users, imagesPerUser: 12, seed: 3,
            imageSize: 48, nonFaceCount: 20, unknownIdentityCount: 6, imagesPerUnknownIdentity: 3)
        _ = try SyntheticFaces.generate(configuration: configuration)
        return root
    }

    /// The builtin base, the data folder under `root` read at the base's input size, and a head
    /// fit's configuration from it: what the tests of `BaseFitSession` start from.
    static func headFit(root: URL) throws -> (base: BaseModel, dataset: FaceDataset, configuration: FitConfiguration) {
        let base = try #require(try BaseModel.resolve("builtin"))
        let input = base.manifest.definition.input
        let dataset = try FaceDataset.load(
            from: root.appendingPathComponent("data"),
            options: DataLoadOptions(inputWidth: input.width, inputHeight: input.height, channels: input.channels))
        let configuration = FitJob.configuration(
            FitConfiguration(), base: base, fineTuning: .head, keepEpochs: false, keepLearningRate: false)
        return (base, dataset, configuration)
    }

    @Test func fromScratchTrainsEvaluatesAndWritesAVerifiedBundle() throws {
        let root = try Self.syntheticData(users: 4)
        defer { try? FileManager.default.removeItem(at: root) }
        var configuration = FitConfiguration()
        configuration.epochs = 12
        configuration.batchSize = 16
        configuration.inputSize = 32
        configuration.width = 8
        let models = root.appendingPathComponent("models")
        let job = FitJob(
            data: root.appendingPathComponent("data"), models: models, configuration: configuration,
            loadOptions: DataLoadOptions(inputWidth: 32, inputHeight: 32, channels: 3), base: nil)
        let recorder = Recorder()
        let result = try job.run(observer: recorder)
        #expect(recorder.events == ["data 4 \(4 * 12 + 20 + 6 * 3)", "start 6 12"])
        #expect(recorder.epochs.count == 12)
        #expect(result.bundle.standardizedFileURL.path == models.appendingPathComponent("1").standardizedFileURL.path)
        let verification = BundleVerifier.verify(result.bundle, expectedVersion: 1)
        #expect(verification.isValid, "\(verification.problems)")
        #expect(verification.manifest?.users.map(\.id).sorted() == [3, 4, 5, 6])
        #expect(result.metrics.unthresholded["user_accuracy"]! > 0.5)
        // The checkpoint of a finished job is gone.
        let left = (try? FileManager.default.contentsOfDirectory(atPath: job.checkpointDirectory.path)) ?? []
        #expect(left.isEmpty, "\(left)")
    }

    @Test func fromTheBuiltinBaseCalibratesOnStrangersAndNamesTheBase() throws {
        let root = try Self.syntheticData(users: 6)
        defer { try? FileManager.default.removeItem(at: root) }
        let base = try #require(try BaseModel.resolve("builtin"))
        let configuration = FitJob.configuration(
            FitConfiguration(), base: base, fineTuning: .head, keepEpochs: false, keepLearningRate: false)
        #expect(configuration.inputSize == base.manifest.definition.input.width)
        let job = FitJob(
            data: root.appendingPathComponent("data"), models: root.appendingPathComponent("models"),
            configuration: configuration, loadOptions: DataLoadOptions(inputWidth: 32, inputHeight: 32, channels: 3),
            base: base)
        let recorder = Recorder()
        let result = try job.run(observer: recorder)
        #expect(recorder.events.first == "data 6 \(6 * 12 + 20 + 6 * 3)")
        #expect(recorder.events.contains("base \(base.manifest.name) head"))
        #expect(recorder.events.last?.hasPrefix("calibrated ") == true)
        #expect(recorder.calibration?["leave_users_out"] != nil, "\(recorder.calibration ?? [:])")
        // Each epoch of the head reports the held-out crops' real loss and accuracy (not zeros).
        #expect(recorder.epochs.count == BaseFitSession.headEpochs)
        for record in recorder.epochs {
            #expect(record.heldOutLoss.isFinite && record.heldOutLoss > 0, "\(record)")
            #expect((0...1).contains(record.heldOutAccuracy), "\(record)")
        }
        let last = try #require(recorder.epochs.last)
        #expect(last.heldOutAccuracy > 0.3, "\(last)")
        #expect(recorder.epochs.first!.heldOutLoss != last.heldOutLoss)
        let verification = BundleVerifier.verify(result.bundle, expectedVersion: 1)
        #expect(verification.isValid, "\(verification.problems)")
        // The job read the crops at the base's input size, whatever the options said.
        #expect(verification.manifest?.input.width == base.manifest.definition.input.width)
    }
    /// A head fit scores its held-out crops from their cached embeddings instead of running the
    /// model again: those scores must be what the model itself outputs for the crops, also with
    /// corrected strangers' centres (the exported model then takes class 2's largest row in layers
    /// of its own).
    @Test(arguments: [false, true])
    func aHeadFitsHeldOutScoresAreTheModelsOwnOutputs(withCorrections: Bool) throws {
        let root = try Self.syntheticData(users: 6)
        defer { try? FileManager.default.removeItem(at: root) }
        let (base, loaded, configuration) = try Self.headFit(root: root)
        var dataset = loaded
        if withCorrections {
            // Eight of the unknown people's crops filed as corrections: two centres beside class 2's.
            let strangers = dataset.samples.filter { $0.label == ClassLabel.unknownPerson.id }
            dataset.corrections = Set(strangers.prefix(8).map(\.contentHash))
        }
        let (fit, _) = try BaseFitSession(
            dataset: dataset, configuration: configuration, base: base,
            cacheDirectory: root.appendingPathComponent("embeddings")
        ).run(observer: nil)
        let known = try #require(fit.heldOutProbabilities)
        var network = try Network(model: fit.model)
        let computed = try Inference.probabilities(of: fit.heldOut, with: &network, definition: fit.model.definition)
        #expect(!fit.heldOut.isEmpty && known.count == fit.heldOut.count && computed.count == known.count)
        var largest: Float = 0
        for (row, other) in zip(known, computed) {
            #expect(row.count == other.count && row.count == dataset.labels.count)
            for (a, b) in zip(row, other) { largest = max(largest, abs(a - b)) }
        }
        #expect(largest < 1e-5, "largest difference \(largest)")
        let linearLayers = fit.model.definition.layers.filter { $0.kind == .linear }.count
        #expect(withCorrections ? linearLayers > 1 : linearLayers == 1, "\(linearLayers) linear layers")
    }

    /// After an upgrade from a facetrain that cached more views a crop, a head fit takes the old
    /// cache's first views (no crop embedded again), writes its own cache and deletes the old one;
    /// a damaged old cache is no reason to fail: every crop is embedded again, and it is deleted too.
    @Test(arguments: [false, true])
    func aHeadFitTakesOverAnOlderCachesFirstViews(damaged: Bool) throws {
        let root = try Self.syntheticData(users: 4)
        defer { try? FileManager.default.removeItem(at: root) }
        let (base, dataset, configuration) = try Self.headFit(root: root)
        let cacheDirectory = root.appendingPathComponent("embeddings")
        func session() throws -> BaseFitSession {
            try BaseFitSession(
                dataset: dataset, configuration: configuration, base: base, cacheDirectory: cacheDirectory)
        }
        _ = try session().run(observer: nil)
        let current = try session().cacheURL
        let written = try Checkpoint.read(from: current)
        // The older cache: one more view a crop, its first view twice this one's (told apart below).
        let views = BaseFitSession.views
        let older = cacheDirectory.appendingPathComponent(
            current.lastPathComponent.replacingOccurrences(of: "-\(views)views", with: "-\(views + 1)views"))
        let features = base.manifest.embeddingFeatures
        var tensors: [String: Tensor] = [:]
        for (hash, tensor) in written.tensors {
            tensors[hash] = Tensor(
                shape: [views + 1, features],
                scalars: tensor.scalars.map { 2 * $0 } + [Float](repeating: 7, count: features))
        }
        if damaged {
            try Data(repeating: 0xA5, count: 4_096).write(to: older)
        } else {
            try Checkpoint(header: written.header, tensors: tensors).write(to: older)
        }
        try FileManager.default.removeItem(at: current)

        _ = try session().run(observer: nil)
        let names = try FileSystem.entries(of: cacheDirectory)
        #expect(names.contains(current.lastPathComponent) && !names.contains(older.lastPathComponent), "\(names)")
        let after = try Checkpoint.read(from: current)
        #expect(after.tensors.count == written.tensors.count)
        for (hash, tensor) in written.tensors {
            let scalars = after.tensors[hash]?.scalars ?? []
            if damaged {
                // Embedded again: the first fit's values, to float rounding.
                let largest = zip(scalars, tensor.scalars).map { abs($0 - $1) }.max() ?? 1
                #expect(scalars.count == tensor.scalars.count && largest < 1e-5, "crop \(hash.prefix(8))")
            } else {
                #expect(scalars == tensor.scalars.map { 2 * $0 }, "crop \(hash.prefix(8))")
            }
        }
    }

    /// Each left-out crop's softmax counts the fold's absent users: its row sums to
    /// 1 / (1 + absent · the kept users' mean share), not 1, and its own user's column is empty.
    @Test func leftOutUsersAreScoredWithTheirFoldsAbsentUsersCounted() throws {
        let root = try Self.syntheticData(users: 6)
        defer { try? FileManager.default.removeItem(at: root) }
        let (base, dataset, configuration) = try Self.headFit(root: root)
        let (_, strangers) = try BaseFitSession(
            dataset: dataset, configuration: configuration, base: base,
            cacheDirectory: root.appendingPathComponent("embeddings")
        ).run(observer: nil)
        // Six users in six folds: each fold leaves out one user, so one user is absent.
        #expect(strangers.folds == 6)
        let rows = try #require(strangers.sources["leave_users_out"])
        #expect(!rows.isEmpty)
        let labels = dataset.labels.map(String.init)
        let userColumns = labels.indices.filter { ClassLabel.isUser(id: dataset.labels[$0]) }
        var sums: [Float] = []
        for row in rows {
            let kept = userColumns.filter { row.probabilities[$0] > 0 }
            #expect(kept.count == userColumns.count - 1, "\(row.probabilities)")
            let sum = row.probabilities.reduce(0, +)
            let meanShare = kept.reduce(Float(0)) { $0 + row.probabilities[$1] / sum } / Float(kept.count)
            #expect(abs(sum - 1 / (1 + meanShare)) < 1e-4, "sum \(sum), mean share \(meanShare)")
            sums.append(sum)
        }
        // Rows the fold gives to its users lose visible mass (a crop it calls a non-face, whose users'
        // share is tiny, barely does): without the correction every row would sum to exactly 1.
        #expect(sums.contains { $0 < 0.99 }, "\(sums.sorted().prefix(5))")
    }

    @Test func aHeadFitStoppedByCtrlCCachesItsEmbeddingsAndPublishesNothing() throws {
        let root = try Self.syntheticData(users: 6)
        defer { try? FileManager.default.removeItem(at: root) }
        let base = try #require(try BaseModel.resolve("builtin"))
        let configuration = FitJob.configuration(
            FitConfiguration(), base: base, fineTuning: .head, keepEpochs: false, keepLearningRate: false)
        let models = root.appendingPathComponent("models")
        let job = FitJob(
            data: root.appendingPathComponent("data"), models: models, configuration: configuration,
            loadOptions: DataLoadOptions(inputWidth: 32, inputHeight: 32, channels: 3), base: base)
        // Ctrl-C arrives after the first batch of embeddings.
        var polls = 0
        #expect {
            _ = try job.run(observer: nil) {
                polls += 1
                return polls > 1
            }
        } throws: { error in
            guard case FitError.interruptedHead = error else { return false }
            return "\(error)".contains("nothing was published")
        }
        #expect(!FileManager.default.fileExists(atPath: models.appendingPathComponent("1").path))
        let cacheFolder = models.appendingPathComponent(".embeddings")
        // The cache and its writers' lock.
        let cacheFiles = try FileManager.default.contentsOfDirectory(atPath: cacheFolder.path).filter {
            $0 != BaseFitSession.cacheLockName
        }
        #expect(cacheFiles.count == 1, "\(cacheFiles)")
        let partial = try Checkpoint.read(from: cacheFolder.appendingPathComponent(cacheFiles[0]))
        // One batch of crops was embedded before the stop, not all of them.
        #expect(partial.tensors.count == BaseFitSession.cropsPerBatch, "\(partial.tensors.count)")

        // Run again: it starts from the cached embeddings and finishes.
        let result = try job.run(observer: nil)
        #expect(BundleVerifier.verify(result.bundle, expectedVersion: 1).isValid)
        let full = try Checkpoint.read(from: cacheFolder.appendingPathComponent(cacheFiles[0]))
        #expect(full.tensors.count > partial.tensors.count)
        for (hash, tensor) in partial.tensors { #expect(full.tensors[hash]?.scalars == tensor.scalars) }
    }
}
