import FaceTrainSynthesis
import Foundation
import Testing

@testable import FaceTrain
@testable import FaceTrainEngine

/// The detector's pipeline around the loss: training crops carry boxes and landmarks to where the
/// pixels went, photos of any size become letterboxed input, detector folders round-trip and are
/// refused when damaged, and an interrupted training resumes to the same weights as a straight run.
@Suite("Detector pipeline")
struct DetectorPipelineTests {
    static func temporaryFolder(_ name: String) -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "facetrain-\(name)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }

    /// A mid-grey photo with a white 3x3 dot at each landmark of one upright face.
    static func dottedPhoto() -> (Image, LabelledFace) {
        let (width, height) = (200, 150)
        var pixels = [UInt8](repeating: 128, count: width * height * 3)
        let points = [(80.0, 60.0), (120.0, 60.0), (100.0, 80.0), (85.0, 100.0), (115.0, 100.0)].map {
            FacePoint(x: $0.0 + 0.5, y: $0.1 + 0.5)
        }
        for point in points {
            for y in (Int(point.y) - 1)...(Int(point.y) + 1) {
                for x in (Int(point.x) - 1)...(Int(point.x) + 1) {
                    for channel in 0..<3 { pixels[(y * width + x) * 3 + channel] = 255 }
                }
            }
        }
        let face = LabelledFace(box: DetectionBox(x: 65, y: 40, width: 70, height: 80), landmarks: points)
        return (Image(width: width, height: height, channels: 3, pixels: pixels), face)
    }

    /// Without colour changes, each landmark of a kept face lands on its white dot, flipped or not,
    /// at every crop scale; image-left points stay first; boxes stay inside the crop.
    @Test func cropsCarryLandmarksToTheirPixels() {
        let (photo, face) = Self.dottedPhoto()
        var settings = DetectionAugmentation.none
        settings.outputSize = 96
        settings.cropShares = [0.6, 0.8, 1.0, 1.2]
        settings.horizontalFlip = true
        let input = InputSpecification(width: 96, height: 96, channels: 3)
        var output = [Float](repeating: 0, count: 3 * 96 * 96)
        var checked = 0
        var flipped = 0
        for seed in 0..<40 {
            var random = SplitMix64(seed: UInt64(seed))
            let crop = output.withUnsafeMutableBufferPointer {
                settings.writeCrop(of: photo, faces: [face], input: input, random: &random, to: $0.baseAddress!)
            }
            for kept in crop.faces {
                #expect(kept.box.x >= 0 && kept.box.y >= 0 && kept.box.right <= 96 && kept.box.bottom <= 96)
                let points = try! #require(kept.landmarks)
                #expect(points[0].x < points[1].x && points[3].x < points[4].x, "seed \(seed)")
                for point in points where point.x >= 1 && point.x < 95 && point.y >= 1 && point.y < 95 {
                    // A white dot normalises to 1, the grey around it to about 0.
                    let value = output[Int(point.y) * 96 + Int(point.x)]
                    #expect(value > 0.5, "seed \(seed): landmark at \(point) reads \(value)")
                    checked += 1
                }
            }
            flipped += crop.isFlipped ? 1 : 0
        }
        #expect(checked >= 100 && flipped > 5 && flipped < 35)
    }

    /// The same seed gives the same crop, every augmentation on.
    @Test func cropsAreReproducible() {
        let (photo, face) = Self.dottedPhoto()
        var settings = DetectionAugmentation()
        settings.outputSize = 64
        settings.blurShare = 1
        let input = InputSpecification(width: 64, height: 64, channels: 3)
        func crop(_ seed: UInt64) -> ([Float], [LabelledFace]) {
            var output = [Float](repeating: 0, count: 3 * 64 * 64)
            var random = SplitMix64(seed: seed)
            let result = output.withUnsafeMutableBufferPointer {
                settings.writeCrop(of: photo, faces: [face], input: input, random: &random, to: $0.baseAddress!)
            }
            return (output, result.faces)
        }
        #expect(crop(7) == crop(7))
        #expect(crop(7).0 != crop(8).0)
    }

    /// Occlusion paints only inside learnt faces' boxes, keeps their labels, and draws nothing when
    /// off, so a recipe without it gives the crops it gave before the option existed; a recipe
    /// written before it reads as 0.
    @Test func occlusionCoversPartOfEachFaceOnly() throws {
        let (dotted, face) = Self.dottedPhoto()
        // Texture, so that a piece moved from elsewhere differs from what it covers.
        var texture = dotted.pixels
        for index in texture.indices { texture[index] = UInt8(truncatingIfNeeded: (index &* 2_654_435_761) >> 13) }
        let photo = Image(width: dotted.width, height: dotted.height, channels: 3, pixels: texture)
        var settings = DetectionAugmentation.none
        settings.outputSize = 96
        let input = InputSpecification(width: 96, height: 96, channels: 3)
        func crop(_ share: Double) -> ([Float], [LabelledFace]) {
            settings.occlusionShare = share
            var output = [Float](repeating: 0, count: 3 * 96 * 96)
            var random = SplitMix64(seed: 3)
            let result = output.withUnsafeMutableBufferPointer {
                settings.writeCrop(of: photo, faces: [face], input: input, random: &random, to: $0.baseAddress!)
            }
            return (output, result.faces)
        }
        let (plain, plainFaces) = crop(0)
        let (covered, coveredFaces) = crop(1)
        #expect(plainFaces == coveredFaces, "an occluded face keeps its box and landmarks")
        let box = try #require(coveredFaces.first?.box)
        var inside = 0
        for index in plain.indices where plain[index] != covered[index] {
            let (x, y) = (Double(index % (96 * 96) % 96), Double(index % (96 * 96) / 96))
            #expect(x >= box.x - 1 && x <= box.right && y >= box.y - 1 && y <= box.bottom, "pixel (\(x), \(y))")
            inside += 1
        }
        let area = box.width * box.height
        #expect(Double(inside / 3) >= 0.02 * area && Double(inside / 3) <= 0.4 * area, "\(inside / 3) of \(area)")
        var old =
            try JSONSerialization.jsonObject(with: JSONEncoder().encode(DetectionAugmentation())) as! [String: Any]
        old["occlusionShare"] = nil
        let decoded = try JSONDecoder().decode(
            DetectionAugmentation.self, from: JSONSerialization.data(withJSONObject: old))
        #expect(decoded == DetectionAugmentation() && decoded.occlusionShare == 0)
    }

    /// Large photos shrink to the longest side allowed, small ones keep their size; both pad right and
    /// below to the stride with the value grey normalises to; a grey photo fills all three channels.
    @Test func letterboxShrinksPadsAndMapsBack() {
        let input = InputSpecification(width: 64, height: 64, channels: 3)
        let wide = Image(width: 100, height: 50, channels: 1, pixels: (0..<5000).map { UInt8($0 % 251) })
        let large = DetectorInput(photo: wide, maximumSide: 64, stride: 32, input: input)
        #expect(large.tensor.shape == [1, 3, 32, 64])
        #expect(abs(large.placement.scale - 0.64) < 1e-9)
        let plane = 32 * 64
        #expect((0..<plane).allSatisfy { large.tensor.scalars[$0] == large.tensor.scalars[plane + $0] })
        let tiny = Image(width: 1, height: 1, channels: 3, pixels: [255, 0, 128])
        let padded = DetectorInput(photo: tiny, maximumSide: 640, stride: 32, input: input)
        #expect(padded.tensor.shape == [1, 3, 32, 32] && padded.placement.scale == 1)
        #expect(padded.tensor.scalars[0] == 1 && padded.tensor.scalars[1024] == -1)
        #expect(abs(padded.tensor.scalars[1]) < 0.01, "padding is mid-grey")
        let box = large.placement.toPhoto(DetectionBox(x: 32, y: 16, width: 6.4, height: 6.4))
        #expect(abs(box.x - 50) < 1e-9 && abs(box.y - 25) < 1e-9 && abs(box.width - 10) < 1e-9)
    }

    static func tinyModel() throws -> TrainedModel {
        try Network(definition: ModelDefinition.denseDetector(inputSize: 64), seed: 3).trainedModel
    }

    static func manifest(for model: TrainedModel) -> DetectorModel.Manifest {
        DetectorModel.Manifest(
            name: "test", version: 1, facetrainVersion: FaceTrainVersion.string, architecture: "det-dense",
            definition: model.definition, strides: DetectionHeads.strides,
            data: .init(set: "scenes", fingerprint: "0", photos: 1, faces: 1, heldOutPhotos: 0),
            recipe: DetectorTrainingConfiguration(),
            training: .init(epochs: [], seconds: 0, threads: 1, blas: "test"), metrics: [:], provenance: "a test",
            license: DetectorModel.licenseNote(set: "scenes"))
    }

    /// A written detector loads with the same weights; a changed byte or a missing file is refused
    /// by name.
    @Test func detectorFoldersRoundTripAndRefuseDamage() throws {
        let folder = Self.temporaryFolder("detector")
        defer { try? FileManager.default.removeItem(at: folder) }
        let model = try Self.tinyModel()
        let path = folder.appendingPathComponent("detector")
        try DetectorModel.write(manifest: Self.manifest(for: model), model: model, to: path)
        let loaded = try DetectorModel.load(from: path)
        #expect(loaded.model == model && loaded.manifest == Self.manifest(for: model))
        #expect(throws: DetectorModelError.exists(path: path.path)) {
            try DetectorModel.write(manifest: Self.manifest(for: model), model: model, to: path)
        }
        let weights = path.appendingPathComponent("weights.h5")
        var bytes = try Data(contentsOf: weights)
        bytes[bytes.count / 2] ^= 0x40
        try bytes.write(to: weights)
        #expect(
            throws: DetectorModelError.damaged(
                detector: path.path, file: "weights.h5", reason: "its SHA-256 does not match SHA256SUMS")
        ) {
            try DetectorModel.load(from: path)
        }
        try FileManager.default.removeItem(at: path.appendingPathComponent("SHA256SUMS"))
        #expect(throws: DetectorModelError.missingFile(detector: path.path, file: "SHA256SUMS")) {
            try DetectorModel.load(from: path)
        }
        // The builtin detector is verified the same way, from the bytes compiled in.
        let builtin = try DetectorModel.resolve("builtin")
        #expect(builtin.source == "builtin" && builtin.manifest.strides == DetectionHeads.strides)
    }

    /// Stopped in its second epoch and resumed, training ends with exactly the weights and records of
    /// a run that was never stopped.
    @Test func resumedTrainingEqualsAStraightRun() throws {
        let folder = Self.temporaryFolder("detector-resume")
        defer { try? FileManager.default.removeItem(at: folder) }
        let scenes = folder.appendingPathComponent("scenes")
        _ = try SyntheticScenes.generate(
            configuration: SceneConfiguration(outputDirectory: scenes, sceneCount: 24, seed: 2, maximumSide: 128))
        let set = try DetectionSet.load(scenes)
        var configuration = DetectorTrainingConfiguration()
        configuration.epochs = 2
        configuration.batchSize = 4
        configuration.holdOut = 0.2
        configuration.measureEvery = 1
        configuration.augmentation.outputSize = 64
        let definition = ModelDefinition.denseDetector(inputSize: 64)
        func session(_ name: String) throws -> DetectorTrainingSession {
            try DetectorTrainingSession(
                set: set, split: "train", configuration: configuration, definition: definition,
                checkpointDirectory: folder.appendingPathComponent(name))
        }
        let straight = try session("straight").run(resume: false, observer: nil)
        do {
            // Released (with its checkpoint lock) at the end of this scope, as when a process ends.
            let interrupted = try session("interrupted")
            // Polled once before each batch: this stops before the second batch of epoch 2.
            let stopAt = interrupted.training.count / configuration.batchSize + 2
            var polls = 0
            #expect(throws: FitError.self) {
                _ = try interrupted.run(resume: false, observer: nil) {
                    polls += 1
                    return polls == stopAt
                }
            }
            #expect(polls == stopAt)
        }
        let resumed = try session("interrupted").run(resume: true, observer: nil)
        #expect(resumed.model == straight.model)
        #expect(resumed.history.map(\.loss) == straight.history.map(\.loss))
        #expect(straight.history.count == 2 && straight.history.allSatisfy { $0.heldOutAveragePrecision != nil })
    }

    /// `--from`: a finetune starts from the given detector's weights (its first epoch's loss is that
    /// of a trained network, below a fresh one's), keeps its own checkpoint, and a detector of
    /// another input size is refused by option name.
    @Test func finetuningStartsFromTheGivenWeights() throws {
        let folder = Self.temporaryFolder("detector-finetune")
        defer { try? FileManager.default.removeItem(at: folder) }
        let scenes = folder.appendingPathComponent("scenes")
        _ = try SyntheticScenes.generate(
            configuration: SceneConfiguration(outputDirectory: scenes, sceneCount: 24, seed: 4, maximumSide: 128))
        let set = try DetectionSet.load(scenes)
        var configuration = DetectorTrainingConfiguration()
        configuration.epochs = 6
        configuration.batchSize = 4
        configuration.holdOut = 0.2
        configuration.measureEvery = 6
        configuration.augmentation.outputSize = 64
        let definition = ModelDefinition.denseDetector(inputSize: 64)
        func session(_ name: String, from startingPoint: DetectorModel?) throws -> DetectorTrainingSession {
            try DetectorTrainingSession(
                set: set, split: "train", configuration: configuration, definition: definition,
                startingPoint: startingPoint, checkpointDirectory: folder.appendingPathComponent(name))
        }
        let trained = try session("first", from: nil).run(resume: false, observer: nil)
        let path = folder.appendingPathComponent("detector")
        try DetectorModel.write(manifest: Self.manifest(for: trained.model), model: trained.model, to: path)
        let start = try DetectorModel.load(from: path)
        #expect(start.weightsChecksum.count == 64)

        configuration.epochs = 1
        let fresh = try session("fresh", from: nil)
        let finetune = try session("finetune", from: start)
        #expect(finetune.checkpointURL != fresh.checkpointURL)
        let freshLoss = try #require(try fresh.run(resume: false, observer: nil).history.first?.loss)
        let finetuneLoss = try #require(try finetune.run(resume: false, observer: nil).history.first?.loss)
        let trainedLastLoss = try #require(trained.history.last?.loss)
        // A fresh network's first epoch is far above where six epochs ended; the finetune starts there.
        #expect(finetuneLoss < (freshLoss + trainedLastLoss) / 2, "finetune \(finetuneLoss), fresh \(freshLoss)")

        let other = try Network(definition: ModelDefinition.denseDetector(inputSize: 96), seed: 3).trainedModel
        let otherPath = folder.appendingPathComponent("other")
        try DetectorModel.write(manifest: Self.manifest(for: other), model: other, to: otherPath)
        let mismatch = try DetectorModel.load(from: otherPath)
        #expect {
            _ = try session("mismatch", from: mismatch)
        } throws: { error in
            (error as? ConfigurationError)?.option == "from"
        }
    }
}
