import FaceTrainTestSupport
import Foundation
import Testing

@testable import FaceTrain

@Suite("Bundle writing and opening")
struct BundleStagingTests {
    @Test func publishedBundleRoundTrips() throws {
        let models = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: models) }
        let url = try BundleFixture.publish(in: models, seed: 9)
        #expect(url.lastPathComponent == "1")
        let names = try FileManager.default.contentsOfDirectory(atPath: url.path).sorted()
        #expect(
            names == [
                "FaceClassifier.mlmodel", "SHA256SUMS", "manifest.json", "metrics.json", "model.onnx", "weights.h5",
            ])
        let bundle = try ModelBundle.open(url)
        #expect(bundle.model == BundleFixture.model(seed: 9))
        #expect(bundle.version == 1)
        #expect(bundle.metrics?.userAccuracy == 0.95)
        #expect(
            bundle.manifest.files.map(\.path) == ["FaceClassifier.mlmodel", "metrics.json", "model.onnx", "weights.h5"])
        let weights = try #require(bundle.fileEntry("weights.h5"))
        #expect(weights.sha256 == (try SHA256.hashFile(at: url.appendingPathComponent("weights.h5")).sha256))
        // Nothing left behind but the bookkeeping.
        let hidden = try FileManager.default.contentsOfDirectory(atPath: models.path).filter {
            $0.hasPrefix(".staging")
        }
        #expect(hidden.isEmpty)
    }

    @Test func sha256sumAcceptsTheChecksumFile() throws {
        let models = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: models) }
        let url = try BundleFixture.publish(in: models)
        let result = try BundleFixture.run("/usr/bin/sha256sum", ["--strict", "-c", "SHA256SUMS"], in: url)
        #expect(result.status == 0, "\(result.output)")
        for name in ["manifest.json", "weights.h5", "metrics.json", "FaceClassifier.mlmodel", "model.onnx"] {
            #expect(result.output.contains("\(name): OK"))
        }
        try BundleFixture.flipByte(in: url.appendingPathComponent("model.onnx"), at: 3)
        let failed = try BundleFixture.run("/usr/bin/sha256sum", ["-c", "SHA256SUMS"], in: url)
        #expect(failed.status != 0)
        #expect(failed.output.contains("model.onnx: FAILED"))
    }

    @Test func versionsGrowAndAreNeverReused() throws {
        let models = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: models) }
        try BundleFixture.publish(in: models)
        let second = try BundleFixture.publish(in: models, seed: 2)
        #expect(second.lastPathComponent == "2")
        // Deleting the newest directory must not hand its number out again.
        try FileSystem.removeTree(second)
        let discarded = try BundleStaging(modelsDirectory: models)
        #expect(discarded.version == 3)
        discarded.discard()
        #expect(FileSystem.kind(at: discarded.directory) == .missing)
        let next = try BundleStaging(modelsDirectory: models)
        #expect(next.version == 4)
        #expect(try ModelRepository(directory: models).versions() == [1])
    }

    @Test func liveStagingAreasGetDistinctVersionsAndSurviveCleanup() throws {
        let models = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: models) }
        let first = try BundleStaging(modelsDirectory: models)
        let second = try BundleStaging(modelsDirectory: models)
        #expect(first.version == 1 && second.version == 2)
        // The second allocation ran cleanup; the first (alive, lock held) must still be there.
        #expect(FileSystem.kind(at: first.directory) == .directory)
        try second.writeWeights(BundleFixture.model())
        let manifest = Manifest(
            version: second.version, definition: BundleFixture.model().definition,
            users: BundleFixture.users([17, 23]), training: [:], seed: 1, dataFingerprint: "x", gitCommit: nil)
        let url = try second.publishVersion(manifest: manifest)
        #expect(url.lastPathComponent == "2")
        #expect(FileSystem.kind(at: first.directory) == .directory)
    }

    @Test func deadStagingAreasAreRemoved() throws {
        let models = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: models) }
        // What a killed writer leaves: a staging directory with files and an unheld lock file,
        // an orphaned lock file, and a pointer update's temporary file.
        let dead = models.appendingPathComponent(".staging-5-999999-abc")
        try FileManager.default.createDirectory(at: dead, withIntermediateDirectories: true)
        try Data("partial".utf8).write(to: dead.appendingPathComponent("weights.h5"))
        try Data().write(to: models.appendingPathComponent(".staging-5-999999-abc.lock"))
        try Data().write(to: models.appendingPathComponent(".staging-6-999998-def.lock"))
        try Data("{".utf8).write(to: models.appendingPathComponent(".latest.json.tmp-999999-1"))
        let staging = try BundleStaging(modelsDirectory: models)
        let left = try FileSystem.entries(of: models)
        // By name: the new staging area's random suffix may itself contain "999".
        let deadNames = [
            ".staging-5-999999-abc", ".staging-5-999999-abc.lock", ".staging-6-999998-def.lock",
            ".latest.json.tmp-999999-1",
        ]
        #expect(Set(left).isDisjoint(with: deadNames), "\(left)")
        // Dead reservations were not published, but their numbers are not reused either.
        #expect(staging.version == 7)
    }

    /// A writer unlinks its lock file when it publishes or discards, without the models lock, so a
    /// cleanup or an erasure can list a lock file that is gone when it opens it (schemathesis hit
    /// it: DELETE /v1/users/{id} answered 500 "could not open lock file"). A dangling symbolic link
    /// is such a listing, made to stay: it is skipped, not an error, and no writer is taken as alive.
    @Test func aLockFileThatVanishedSinceTheListingIsSkipped() throws {
        let models = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: models) }
        try FileManager.default.createDirectory(at: models, withIntermediateDirectories: true)
        let vanished = models.appendingPathComponent(".staging-3-999997-xyz.lock")
        try FileManager.default.createSymbolicLink(
            atPath: vanished.path, withDestinationPath: models.appendingPathComponent("gone").path)
        let repository = ModelRepository(directory: models)
        #expect(try repository.withLock { try repository.removeStaleEntries() } == [])
        #expect(try repository.liveStagingArea() == nil)
        #expect(ModelsScrub(models: models).writerInProgress() == nil)
        let checkpoints = models.appendingPathComponent("checkpoints")
        try FileManager.default.createDirectory(at: checkpoints, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(
            atPath: checkpoints.appendingPathComponent("fit-1.lock").path,
            withDestinationPath: models.appendingPathComponent("gone").path)
        #expect(FitSession.runningCheckpoint(in: checkpoints) == nil)
        // A staging area allocated after it works as before (the listed number is not reused).
        #expect(try BundleStaging(modelsDirectory: models).version == 4)
    }

    @Test func publishRefusesAMismatchedManifestAndKeepsNothing() throws {
        let models = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: models) }
        let staging = try BundleStaging(modelsDirectory: models)
        try staging.writeWeights(BundleFixture.model(users: [17, 23]))
        // The manifest claims three users: the weights' classifier has four outputs, not five.
        let wrong = Manifest(
            version: staging.version, definition: BundleFixture.model(users: [17, 23, 31]).definition,
            users: BundleFixture.users([17, 23, 31]), training: [:], seed: 1, dataFingerprint: "x", gitCommit: nil)
        #expect { try staging.publishVersion(manifest: wrong) } throws: { error in
            "\(error)".contains("weights.h5") && "\(error)".contains("4 outputs")
        }
        #expect(try ModelRepository(directory: models).versions().isEmpty)
        let late = Manifest(
            version: staging.version + 1, definition: BundleFixture.model().definition,
            users: BundleFixture.users([17, 23]), training: [:], seed: 1, dataFingerprint: "x", gitCommit: nil)
        #expect(throws: BundleError.manifestVersionMismatch(staged: 1, manifest: 2)) {
            try staging.publishVersion(manifest: late)
        }
        staging.discard()
        #expect(try FileSystem.entries(of: models).filter { $0.hasPrefix(".staging") }.isEmpty)
    }

    @Test func writerRejectsReservedAndEscapingNames() throws {
        let models = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: models) }
        let staging = try BundleStaging(modelsDirectory: models)
        for name in ["manifest.json", "SHA256SUMS", "weights.h5", "../x", "a/b", ".hidden", ""] {
            #expect(throws: BundleError.self) { try staging.write(Data("x".utf8), named: name) }
        }
        try staging.write(Data("x".utf8), named: "notes.txt")
        #expect(throws: FileSystemError(operation: "create", path: staging.directory.path + "/notes.txt", code: EEXIST))
        {
            try staging.write(Data("y".utf8), named: "notes.txt")
        }
        #expect(throws: BundleError.missingWeights(path: staging.directory.path)) {
            try staging.publishVersion(
                manifest: Manifest(
                    version: staging.version, definition: BundleFixture.model().definition,
                    users: [], training: [:], seed: 1, dataFingerprint: "x", gitCommit: nil))
        }
    }

    @Test func exportLabelsMustMatchTheManifest() throws {
        let models = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: models) }
        #expect {
            try BundleFixture.publish(in: models, exportLabels: ["1", "2", "23", "17"])
        } throws: { error in
            "\(error)".contains("FaceClassifier.mlmodel: has class labels") && "\(error)".contains("model.onnx")
        }
        #expect(try ModelRepository(directory: models).versions().isEmpty)
    }

    @Test func referenceExportsParse() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        let reference = root.deletingLastPathComponent().appendingPathComponent("shared/docs/formats-ref")
        let coreMLURL = reference.appendingPathComponent("tiny_classifier.mlmodel")
        guard FileManager.default.fileExists(atPath: coreMLURL.path) else {
            #expect(ProcessInfo.processInfo.environment["CI"] != "true", "missing \(coreMLURL.path)")
            return
        }
        let coreML = try ExportInspector.coreML(Data(contentsOf: coreMLURL))
        #expect(coreML.classLabels == ["1", "2", "17"])
        let onnx = try ExportInspector.onnx(Data(contentsOf: reference.appendingPathComponent("tiny_classifier.onnx")))
        #expect(onnx.classLabels == ["1", "2", "17"])
        #expect(throws: ExportInspector.Failure.self) { try ExportInspector.coreML(Data([0x0a, 0x7f, 0x01])) }
    }
}
