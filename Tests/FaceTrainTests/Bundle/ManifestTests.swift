import FaceTrainTestSupport
import Foundation
import Testing

@testable import FaceTrain
@testable import FaceTrainEngine

@Suite("Manifest")
struct ManifestTests {
    func manifest() -> Manifest {
        let model = BundleFixture.model(users: [17, 23])
        return Manifest(
            version: 3, definition: model.definition, users: BundleFixture.users([17, 23]),
            training: ["epochs": 30, "learningRate": 0.01, "augment": true, "schedule": ["cosine", 5]], seed: 1234,
            dataFingerprint: "sha256:abc", gitCommit: nil,
            metrics: MetricsDocument(userAccuracy: 0.9, unknownFalseAcceptRate: 0.03), acceptThreshold: 0.6,
            parentVersion: 2, createdAt: Date(timeIntervalSince1970: 1_700_000_000), blas: "OpenBLAS 0.3.21 (test)")
    }

    @Test func classesAndUsersHaveTheAppShape() throws {
        let data = try manifest().encoded()
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let classes = try #require(object["classes"] as? [[String: Any]])
        #expect(classes.map { $0["label"] as? String } == ["1", "2", "17", "23"])
        #expect(classes[0]["kind"] as? String == "negative")
        #expect(classes[0]["name"] as? String == "not a face")
        #expect(classes[1]["name"] as? String == "unknown person")
        #expect(classes[2]["kind"] as? String == "user")
        #expect(classes[2]["id"] as? Int == 17)
        #expect(classes[2]["name"] as? String == "User 17")
        #expect(classes[0]["id"] == nil)
        let users = try #require(object["users"] as? [[String: Any]])
        #expect(users.first?["id"] as? Int == 17)
        #expect(users.first?["position"] as? String == "Engineer")
        #expect(object["createdAt"] as? String == "2023-11-14T22:13:20Z")
        #expect(object["gitCommit"] is NSNull)
        #expect(object["facetrainVersion"] as? String == FaceTrainVersion.string)
        #expect((object["metrics"] as? [String: Double])?["user_accuracy"] == 0.9)
        let architecture = try #require(object["architecture"] as? [[String: Any]])
        #expect(architecture.first?["summary"] as? String == "Conv2D 3->4, kernel 3x3, stride 1, padding 1")
        #expect(architecture.last?["name"] as? String == "18.linear")
    }

    @Test func encodingIsPrettySortedAndRoundTrips() throws {
        let original = manifest()
        let data = try original.encoded()
        let text = String(decoding: data, as: UTF8.self)
        #expect(text.contains("\n  \"acceptThreshold\" : 0.6,\n  \"architecture\""))
        let decoded = try Manifest.decode(data)
        #expect(decoded == original)
        #expect(decoded.definition == BundleFixture.model(users: [17, 23]).definition)
        #expect(try decoded.encoded() == data)
    }

    @Test func contentHashIgnoresFilesButNothingElse() throws {
        var manifest = manifest()
        let hash = try manifest.contentSHA256
        #expect(SHA256.isHexDigest(hash))
        manifest.files = [Manifest.FileEntry(path: "weights.h5", sha256: String(repeating: "0", count: 64), size: 9)]
        #expect(try manifest.contentSHA256 == hash)
        #expect(!String(decoding: try manifest.canonicalContent(), as: UTF8.self).contains("files"))
        #expect(String(decoding: try manifest.encoded(), as: UTF8.self).contains("\"files\""))
        // Survives a trip through manifest.json.
        #expect(try Manifest.decode(try manifest.encoded()).contentSHA256 == hash)
        manifest.users[0].name = "Someone Else"
        #expect(try manifest.contentSHA256 != hash)
    }

    @Test func metricsDocumentReadsEvalKeysAndIgnoresOthers() throws {
        let metrics = try MetricsDocument.decode(
            BundleFixture.metrics(
                userAccuracy: 0.8, unknownFAR: 0.04, nonfaceFAR: 0.07, recalls: ["17": 0.9, "23": 0.7]))
        #expect(metrics.userAccuracy == 0.8)
        #expect(metrics.worstFalseAcceptRate == 0.07)
        #expect(metrics.perUser?["23"]?.recall == 0.7)
        #expect(metrics.perUser?["23"]?.support == 10)
        #expect(metrics.keyNumbers["nonface_far"] == 0.07)
        #expect(metrics.keyNumbers["overall_accuracy"] == 0.93)
        #expect(try MetricsDocument.decode(Data("{}".utf8)) == MetricsDocument())
    }
}
