import FaceTrain
import FaceTrainTestSupport
import Foundation
import Testing

/// A bundle written by facetrain before branching layers existed (Tests/Fixtures/format1-bundle)
/// still verifies, keeps its manifest bytes, re-exports byte for byte and predicts the same.
@Suite struct FormatOneBundleTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/format1-bundle")

    @Test func aFormat1BundleVerifiesReexportsAndPredictsTheSame() throws {
        let root = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let bundle = root.appendingPathComponent("models/1")
        try FileManager.default.createDirectory(
            at: bundle.deletingLastPathComponent(), withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: Self.fixtures.appendingPathComponent("1"), to: bundle)

        let verified = try CLIRunner.run(["verify", bundle.path])
        #expect(verified.status == 0, "\(verified.standardOutput)\(verified.standardError)")

        // The manifest decodes to the old layer list (groups 1) and encodes to the same bytes.
        let manifestData = try Data(contentsOf: bundle.appendingPathComponent("manifest.json"))
        let manifest = try Manifest.decode(manifestData)
        #expect(manifest.formatVersion == 1)
        #expect(try manifest.encoded() == manifestData)
        #expect(!manifest.definition.layers.contains { $0.kind == .add || $0.kind == .prelu })

        for (format, file) in [("onnx", "model.onnx"), ("coreml", "FaceClassifier.mlmodel")] {
            let out = root.appendingPathComponent("again-\(file)")
            let exported = try CLIRunner.run(["export", bundle.path, "--format", format, "--out", out.path])
            #expect(exported.status == 0, "\(exported.standardError)")
            #expect(try Data(contentsOf: out) == Data(contentsOf: bundle.appendingPathComponent(file)), "\(file)")
        }

        let predicted = try CLIRunner.run(
            ["predict", "--model", bundle.path, "--json", Self.fixtures.appendingPathComponent("noise.ppm").path])
        #expect(predicted.status == 0, "\(predicted.standardError)")
        func probabilities(_ text: String) throws -> [String: Double] {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
            return try #require(object["probabilities"] as? [String: Double])
        }
        let expected = try String(
            contentsOf: Self.fixtures.appendingPathComponent("noise-predictions.json"), encoding: .utf8)
        // The same function of the same weights: since the 3x3 convolutions run as Winograd's
        // F(2x2, 3x3), their sums are taken in another order, so equal to float rounding.
        let (now, then) = (try probabilities(predicted.standardOutput), try probabilities(expected))
        #expect(Set(now.keys) == Set(then.keys))
        for (label, probability) in then {
            #expect(
                abs((now[label] ?? -1) - probability) <= 1e-5, "\(label): \(now[label] ?? -1) against \(probability)")
        }
    }
}
