import FaceTrain
import Foundation
import Testing

/// `detector train`, `detector eval` and `detect` end to end through the binary, on synthetic
/// scenes: what they print, what they write, and how they refuse damaged detectors and bad photos.
@Suite("detect commands", .serialized)
struct DetectCommandTests {
    /// Scenes and a detector trained on them for two epochs (its quality does not matter here).
    static let fixture: (folder: URL, scenes: URL, detector: URL) = {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("detect-cli-\(UUID().uuidString)")
        let scenes = folder.appendingPathComponent("scenes")
        let detector = folder.appendingPathComponent("detector")
        let synth = try! CLIRunner.run(["synth", "--scenes", "20", "--out", scenes.path, "--max-side", "128"])
        precondition(synth.status == 0, synth.standardError)
        let train = try! CLIRunner.run([
            "detector", "train", "--data", scenes.path, "--out", detector.path, "--epochs", "2", "--input-size", "64",
            "--batch-size", "4", "--hold-out", "0.2", "--measure-every", "1", "--occlusion", "0.5", "--blur", "0.4",
        ])
        precondition(train.status == 0, train.standardError)
        return (folder, scenes, detector)
    }()

    static func photos() throws -> [URL] {
        let folder = fixture.scenes.appendingPathComponent("images/0--Synthetic")
        return try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted().prefix(3).map {
            folder.appendingPathComponent($0)
        }
    }

    /// A copy of the fixture's detector named `name` with one bit of its weights flipped.
    static func damagedCopy(_ name: String) throws -> URL {
        let copy = fixture.folder.appendingPathComponent(name)
        try? FileManager.default.removeItem(at: copy)
        try FileManager.default.copyItem(at: fixture.detector, to: copy)
        let weights = copy.appendingPathComponent("weights.h5")
        var bytes = try Data(contentsOf: weights)
        bytes[bytes.count - 100] ^= 1
        try bytes.write(to: weights)
        return copy
    }

    @Test func trainingWritesAVerifiedDetectorWithItsRecord() throws {
        let detector = try DetectorModel.load(from: Self.fixture.detector)
        #expect(detector.manifest.training.epochs.count == 2)
        #expect(detector.manifest.metrics.keys.contains("held_out.ap.all"))
        #expect(detector.manifest.license.contains("non-commercial research"))
        #expect(detector.manifest.data.fingerprint == (try DetectionSet.load(Self.fixture.scenes)).fingerprint)
        #expect(detector.manifest.startedFrom == nil)
        // The augmentation options reach the training and its recorded recipe.
        #expect(detector.manifest.recipe.augmentation.occlusionShare == 0.5)
        #expect(detector.manifest.recipe.augmentation.blurShare == 0.4)
        // A finetune from a detector that is not there names it, and writes nothing.
        let out = Self.fixture.folder.appendingPathComponent("finetune")
        let missing = Self.fixture.folder.appendingPathComponent("no-such-detector")
        let refused = try CLIRunner.run([
            "detector", "train", "--data", Self.fixture.scenes.path, "--out", out.path, "--from", missing.path,
            "--input-size", "64", "--epochs", "1",
        ])
        #expect(refused.status == 1 && refused.standardError.contains(missing.path), "\(refused.standardError)")
        #expect(!FileManager.default.fileExists(atPath: out.path))
    }

    /// One JSON line per photo with the photo's size and, per face, a box of 4 numbers, a score in
    /// [threshold, 1] and 5 landmark points; `--draw` writes each photo at its own size.
    @Test func detectPrintsJSONLinesAndDrawsPhotos() throws {
        let photos = try Self.photos()
        let drawn = Self.fixture.folder.appendingPathComponent("drawn")
        let result = try CLIRunner.run(
            ["detect", "--detector", Self.fixture.detector.path, "--threshold", "0.05", "--json", "--draw", drawn.path]
                + photos.map(\.path))
        #expect(result.status == 0, "\(result.standardError)")
        let lines = result.standardOutput.split(separator: "\n")
        #expect(lines.count == photos.count)
        for (line, photo) in zip(lines, photos) {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            #expect(object["file"] as? String == photo.path)
            let image = try ImageDecoder.decode(contentsOf: photo)
            #expect(object["width"] as? Int == image.width && object["height"] as? Int == image.height)
            for face in try #require(object["faces"] as? [[String: Any]]) {
                #expect((face["box"] as? [Double])?.count == 4)
                let score = try #require(face["score"] as? Double)
                #expect(score >= 0.05 && score <= 1)
                let points = try #require(face["landmarks5"] as? [[Double]])
                #expect(points.count == 5 && points.allSatisfy { $0.count == 2 })
            }
            let picture = drawn.appendingPathComponent(
                photo.deletingPathExtension().lastPathComponent + ".faces.jpg")
            let decoded = try ImageDecoder.decode(contentsOf: picture)
            #expect(decoded.width == image.width && decoded.height == image.height)
        }
    }

    /// A file that is not a photo is named and the others are still detected; exit status 1.
    @Test func detectNamesABadPhotoAndGoesOn() throws {
        let bad = Self.fixture.folder.appendingPathComponent("notes.jpg")
        try Data("not a photo".utf8).write(to: bad)
        let photo = try #require(try Self.photos().first)
        let result = try CLIRunner.run(["detect", "--detector", Self.fixture.detector.path, bad.path, photo.path])
        #expect(result.status == 1)
        #expect(result.standardError.contains("notes.jpg"))
        #expect(result.standardOutput.contains(photo.path))
    }

    /// `face-check` on a folder: a faceless image refused as no_face, a file that is not an image
    /// as unreadable, one JSON line each with the measures; exit 1; a missing path is a usage error.
    @Test func faceCheckNamesEachRefusalWithItsReason() throws {
        let folder = Self.fixture.folder.appendingPathComponent("face-check")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let wall = folder.appendingPathComponent("wall.pgm")
        try (Data("P5\n64 64\n255\n".utf8) + Data(repeating: 140, count: 64 * 64)).write(to: wall)
        try Data("not an image".utf8).write(to: folder.appendingPathComponent("notes.jpg"))
        let result = try CLIRunner.run(["face-check", "--json", folder.path])
        #expect(result.status == 1, "\(result.standardError)")
        let lines = result.standardOutput.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        #expect(lines.count == 2)
        let byFile = Dictionary(uniqueKeysWithValues: lines.map { (($0["file"] as? String) ?? "", $0) })
        let blank = try #require(byFile[wall.path])
        #expect(blank["accepted"] as? Bool == false && blank["refusal"] as? String == "no_face")
        #expect((blank["measures"] as? [String: Any])?["faces"] as? Int == 0)
        #expect(byFile[folder.appendingPathComponent("notes.jpg").path]?["refusal"] as? String == "unreadable")
        #expect(result.standardError.contains("0 of 2 images pass"))
        #expect(try CLIRunner.run(["face-check", folder.appendingPathComponent("missing").path]).status == 64)
    }

    /// A grey photo is detected like a colour one (its size stated); a 1x1 image is refused by name
    /// with the smallest size detect reads, and the other photos are still detected.
    @Test func detectReadsGreyPhotosAndRefusesTinyOnes() throws {
        func pgm(width: Int, height: Int, name: String) throws -> URL {
            let url = Self.fixture.folder.appendingPathComponent(name)
            let pixels = (0..<(width * height)).map { UInt8(($0 * 7) % 256) }
            try (Data("P5\n\(width) \(height)\n255\n".utf8) + Data(pixels)).write(to: url)
            return url
        }
        let grey = try pgm(width: 200, height: 150, name: "grey.pgm")
        let tiny = try pgm(width: 1, height: 1, name: "tiny.pgm")
        let result = try CLIRunner.run([
            "detect", "--detector", Self.fixture.detector.path, "--json", tiny.path, grey.path,
        ])
        #expect(result.status == 1)
        #expect(result.standardError.contains("tiny.pgm") && result.standardError.contains("1 x 1"))
        let line = try #require(result.standardOutput.split(separator: "\n").first)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(object["file"] as? String == grey.path)
        #expect(object["width"] as? Int == 200 && object["height"] as? Int == 150)
    }

    @Test func evalScoresASplitAndWritesPredictions() throws {
        let predictions = Self.fixture.folder.appendingPathComponent("predictions.jsonl")
        let result = try CLIRunner.run([
            "detector", "eval", "--detector", Self.fixture.detector.path, "--data", Self.fixture.scenes.path,
            "--predictions", predictions.path, "--json",
        ])
        #expect(result.status == 0, "\(result.standardError)")
        let figures = try #require(
            try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Double])
        let dev = try DetectionSet.load(Self.fixture.scenes).photos(inSplit: "dev")
        // AP exists when the split has a face the scorer counts (valid, at least 20 px high).
        let counted = dev.contains { $0.faces.contains { $0.invalid == 0 && $0.box.height >= 20 } }
        #expect(figures["ap.all"].map { (0...1).contains($0) } ?? !counted)
        #expect(figures["ms_per_photo_median"].map { $0 > 0 } == true)
        let written = try String(contentsOf: predictions, encoding: .utf8).split(separator: "\n")
        #expect(written.count == dev.count)
    }

    /// `detector export` writes the trained detector as ONNX (checked further by DetectorExportTests)
    /// and says what it wrote; `detector bench` prints its timings as JSON; a damaged detector is
    /// refused by both, and nothing is written.
    @Test func exportAndBenchTheDetector() throws {
        let file = Self.fixture.folder.appendingPathComponent("detector.onnx")
        let export = try CLIRunner.run([
            "detector", "export", "--detector", Self.fixture.detector.path, "--out", file.path,
        ])
        #expect(export.status == 0, "\(export.standardError)")
        #expect(export.standardOutput.contains("outputs stride8, stride16, stride32"), "\(export.standardOutput)")
        let bytes = try Data(contentsOf: file)
        #expect(bytes.count > 10_000 && export.standardOutput.contains(SHA256.hash(bytes)))

        let bench = try CLIRunner.run([
            "detector", "bench", "--detector", Self.fixture.detector.path, "--size", "96x64", "--batch-size", "2",
            "--seconds", "0", "--json",
        ])
        #expect(bench.status == 0, "\(bench.standardError)")
        let figures = try #require(
            try JSONSerialization.jsonObject(with: Data(bench.standardOutput.utf8)) as? [String: Any])
        #expect(figures["input"] as? [Int] == [2, 3, 64, 96])
        #expect((figures["inference_images_per_second"] as? Double ?? 0) > 0)
        #expect((figures["latency_batch1_ms"] as? Double ?? 0) > 0)

        let copy = try Self.damagedCopy("damaged-export")
        let refusedFile = Self.fixture.folder.appendingPathComponent("never.onnx")
        let refused = try CLIRunner.run(["detector", "export", "--detector", copy.path, "--out", refusedFile.path])
        #expect(refused.status == 1 && refused.standardError.contains("is damaged: weights.h5"))
        #expect(!FileManager.default.fileExists(atPath: refusedFile.path))
    }

    /// A detector whose weights changed is refused by name, and nothing is detected.
    @Test func aDamagedDetectorIsRefused() throws {
        let copy = try Self.damagedCopy("damaged")
        let photo = try #require(try Self.photos().first)
        let result = try CLIRunner.run(["detect", "--detector", copy.path, photo.path])
        #expect(result.status == 1)
        #expect(result.standardError.contains("is damaged: weights.h5"))
        #expect(result.standardOutput.isEmpty)
    }

    @Test func badOptionsAreUsageErrors() throws {
        for arguments in [
            ["detect"], ["detect", "--threshold", "2", "x.jpg"], ["detect", "--max-side", "8", "x.jpg"],
            ["detector", "train", "--data", "x", "--out", "y", "--input-size", "100"],
            ["detector", "train", "--data", "x", "--out", "y", "--hold-out", "0.95"],
            ["detector", "train", "--data", "x", "--out", "y", "--occlusion", "1.5"],
            ["detector", "train", "--data", "x", "--out", "y", "--blur", "-0.1"],
            ["detector", "export"], ["detector", "bench", "--size", "641x480"], ["detector", "bench", "--size", "64"],
            ["detector", "bench", "--batch-size", "0"], ["detector", "bench", "--seconds", "-1"],
        ] {
            let result = try CLIRunner.run(arguments)
            #expect(result.status == 64, "\(arguments): \(result.standardError)")
        }
        let missing = try CLIRunner.run(["detector", "train", "--data", "/nonexistent", "--out", "/tmp/never"])
        #expect(missing.status == 1 && missing.standardError.contains("faces_in_photos"))
    }
}
