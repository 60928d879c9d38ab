import FaceTrainTestSupport
import Foundation
import Testing

@testable import FaceTrain

@Suite("Publishing and rollback")
struct PublishTests {
    func pointerFile(_ models: URL) throws -> Data {
        try Data(contentsOf: models.appendingPathComponent("latest.json"))
    }

    @Test func firstPublishWritesTheAppPayload() throws {
        let models = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: models) }
        let url = try BundleFixture.publish(in: models)
        let repository = ModelRepository(directory: models)
        let outcome = try repository.publish(
            version: 1, gate: PublishGate(minimumUserAccuracy: 0.9, maximumFalseAcceptRate: 0.05))
        #expect(outcome.skipped.isEmpty && !outcome.unchanged)
        let object = try #require(try JSONSerialization.jsonObject(with: pointerFile(models)) as? [String: Any])
        #expect(object["version"] as? Int == 1)
        #expect(object["url"] as? String == "1/FaceClassifier.mlmodel")
        #expect(
            object["sha256"] as? String
                == (try SHA256.hashFile(at: url.appendingPathComponent("FaceClassifier.mlmodel")).sha256))
        let users = try #require(object["users"] as? [[String: Any]])
        #expect(users.map { $0["id"] as? Int } == [17, 23])
        #expect(users.first?["name"] as? String == "User 17")
        #expect(users.first?.keys.contains("position") == true)
        #expect(object["manifestSHA256"] as? String == (try ModelBundle.open(url).manifest.contentSHA256))
        #expect(try repository.resolve("latest").path == url.path)
        // Publishing it again changes nothing.
        let before = try pointerFile(models)
        #expect(try repository.publish(version: 1, gate: PublishGate()).unchanged)
        #expect(try pointerFile(models) == before)
    }

    /// latest.json is only ever replaced when it is a regular file: a link there was not put by
    /// facetrain, and renaming over it would silently cut it.
    @Test func pointerThatIsNotARegularFileIsNotReplaced() throws {
        let models = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: models) }
        try BundleFixture.publish(in: models)
        let pointer = models.appendingPathComponent("latest.json")
        try FileManager.default.createSymbolicLink(atPath: pointer.path, withDestinationPath: "elsewhere.json")
        #expect(throws: FileSystemError.self) {
            try ModelRepository(directory: models).publish(version: 1, gate: PublishGate(), force: true)
        }
        #expect(FileSystem.kind(at: pointer) == .symbolicLink)
    }

    @Test func belowThresholdIsRefusedAndForceOverrides() throws {
        let models = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: models) }
        try BundleFixture.publish(
            in: models, metrics: BundleFixture.metrics(userAccuracy: 0.7, unknownFAR: 0.2, nonfaceFAR: 0.01))
        let repository = ModelRepository(directory: models)
        let gate = PublishGate(minimumUserAccuracy: 0.9, maximumFalseAcceptRate: 0.1)
        #expect {
            try repository.publish(version: 1, gate: gate)
        } throws: { error in
            let text = "\(error)"
            return text.contains("user_accuracy 0.7 is below --min-accuracy 0.9") && text.contains("0.2 (unknown_far)")
                && (error as? PublishRefused)?.forceable == true
        }
        #expect(FileSystem.kind(at: models.appendingPathComponent("latest.json")) == .missing)
        let forced = try repository.publish(version: 1, gate: gate, force: true)
        #expect(forced.skipped.count == 2)
        #expect(try repository.latestPointer()?.version == 1)
    }

    @Test func worseBundleIsRefusedOnCommonUsers() throws {
        let models = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: models) }
        try BundleFixture.publish(
            in: models, users: [17, 23], metrics: BundleFixture.metrics(recalls: ["17": 0.95, "23": 0.9]))
        // Version 2 adds user 31 (perfect recall, which must not mask the drop on 17 and 23).
        try BundleFixture.publish(
            in: models, users: [17, 23, 31], seed: 2,
            metrics: BundleFixture.metrics(recalls: ["17": 0.95, "23": 0.6, "31": 1.0]))
        // Version 3 is within tolerance of version 1 on the shared users.
        try BundleFixture.publish(
            in: models, users: [17, 23, 31], seed: 3,
            metrics: BundleFixture.metrics(recalls: ["17": 0.94, "23": 0.9, "31": 0.5]))
        let repository = ModelRepository(directory: models)
        _ = try repository.publish(version: 1, gate: PublishGate())
        #expect {
            try repository.publish(version: 2, gate: PublishGate(allowedRegression: 0.05))
        } throws: { error in
            "\(error)".contains("mean recall on the 2 users both versions know fell from 0.925 (version 1) to 0.775")
                && "\(error)".contains("user 23 0.9 -> 0.6")
        }
        #expect(try repository.latestPointer()?.version == 1)
        // A larger allowance lets it through.
        #expect(try repository.publish(version: 2, gate: PublishGate(allowedRegression: 0.2)).pointer.version == 2)
        _ = try repository.rollback(to: 1)
        let outcome = try repository.publish(version: 3, gate: PublishGate(allowedRegression: 0.02))
        #expect(outcome.pointer.version == 3 && outcome.pointer.previousVersion == 1)
    }

    @Test func gateNeedsMetricsAndVerification() throws {
        let models = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: models) }
        let url = try BundleFixture.publish(in: models, metrics: nil)
        let repository = ModelRepository(directory: models)
        #expect { try repository.publish(version: 1, gate: PublishGate()) } throws: {
            "\($0)".contains("no metrics.json")
        }
        try BundleFixture.flipByte(in: url.appendingPathComponent("weights.h5"), at: 900)
        #expect {
            try repository.publish(version: 1, gate: PublishGate(), force: true)
        } throws: { error in
            (error as? PublishRefused)?.forceable == false && "\(error)".contains("weights.h5")
        }
        #expect(try repository.latestPointer() == nil)
    }

    @Test func rollbackOnlyGoesBackToVerifiedVersions() throws {
        let models = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: models) }
        let first = try BundleFixture.publish(in: models)
        try BundleFixture.publish(in: models, seed: 2)
        let repository = ModelRepository(directory: models)
        #expect(throws: BundleError.nothingPublished(modelsDirectory: models.path)) { try repository.rollback(to: 1) }
        _ = try repository.publish(version: 1, gate: PublishGate())
        _ = try repository.publish(version: 2, gate: PublishGate(), baseURL: "https://models.example.com/faces/")
        #expect(try repository.latestPointer()?.url == "https://models.example.com/faces/2/FaceClassifier.mlmodel")
        #expect(throws: BundleError.rollbackNotEarlier(target: 2, published: 2)) { try repository.rollback(to: 2) }
        #expect { try repository.publish(version: 1, gate: PublishGate()) } throws: { "\($0)".contains("rollback") }
        try BundleFixture.flipByte(in: first.appendingPathComponent("metrics.json"), at: 3)
        #expect { try repository.rollback(to: 1) } throws: { "\($0)".contains("metrics.json") }
        #expect(try repository.latestPointer()?.version == 2)
        try BundleFixture.flipByte(in: first.appendingPathComponent("metrics.json"), at: 3)
        let pointer = try repository.rollback(to: 1)
        #expect(pointer.version == 1 && pointer.action == "rollback" && pointer.previousVersion == 2)
        #expect(try repository.latestPointer() == pointer)
    }

    @Test func bundleArgumentsResolve() throws {
        let models = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: models) }
        let url = try BundleFixture.publish(in: models)
        #expect(try ModelRepository.locateBundle(url.path, modelsDirectory: models).path == url.path)
        #expect(try ModelRepository.locateBundle("1", modelsDirectory: models).path == url.path)
        #expect(throws: BundleError.nothingPublished(modelsDirectory: models.path)) {
            try ModelRepository.locateBundle(models.appendingPathComponent("latest").path, modelsDirectory: models)
        }
        _ = try ModelRepository(directory: models).publish(version: 1, gate: PublishGate())
        #expect(
            try ModelRepository.locateBundle(models.appendingPathComponent("latest").path, modelsDirectory: models).path
                == url.path)
        #expect(throws: BundleError.versionNotFound(modelsDirectory: models.path, reference: "7")) {
            try ModelRepository.locateBundle("7", modelsDirectory: models)
        }
        #expect(ModelRepository.parseVersion("07") == nil && ModelRepository.parseVersion("+7") == nil)
        #expect(ModelRepository.parseVersion("12") == 12)
    }
}
