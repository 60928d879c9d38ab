import FaceTrainTestSupport
import Foundation
import Testing

/// Bundles written by an earlier facetrain (Tests/Fixtures/golden-0.1.0, see its README) still
/// verify, predict the same and re-export byte for byte.
@Suite("golden bundles", .serialized)
struct GoldenBundleTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/golden-0.1.0")

    /// The probe crops the predictions were recorded on, rendered again (synth is deterministic; the
    /// face check is off so no detector's verdict, nor a kernel's rounding of it, redraws a probe).
    static func probes(in root: URL) throws -> [String] {
        let synth = try CLIRunner.run([
            "synth", "--out", root.path, "--users", "2", "--per-user", "2", "--seed", "42", "--negatives", "2",
            "--unknown-identities", "1", "--per-unknown", "2", "--face-check", "off",
        ])
        try #require(synth.status == 0, "\(synth.standardError)")
        let files = FileManager.default.enumerator(atPath: root.path)!.compactMap { $0 as? String }
        return files.filter { $0.hasSuffix(".jpg") }.sorted()
    }

    static func lines(_ text: String) throws -> [[String: Any]] {
        try text.split(separator: "\n").map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
    }

    @Test(arguments: [1, 2])
    func anOldBundleVerifiesPredictsTheSameAndReexportsByteForByte(version: Int) throws {
        let root = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        // A copy: nothing a test does may touch the fixture.
        let bundle = root.appendingPathComponent("models/\(version)")
        try FileManager.default.createDirectory(
            at: bundle.deletingLastPathComponent(), withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: Self.fixtures.appendingPathComponent("models/\(version)"), to: bundle)

        let verify = try CLIRunner.run(["verify", bundle.path])
        #expect(verify.status == 0, "\(verify.standardOutput)\(verify.standardError)")

        let probeRoot = root.appendingPathComponent("probes")
        let probes = try Self.probes(in: probeRoot)
        #expect(probes.count == 8)
        let predict = try CLIRunner.run(["predict"] + probes + ["--model", bundle.path, "--json"], in: probeRoot)
        try #require(predict.status == 0, "\(predict.standardError)")
        let now = try Self.lines(predict.standardOutput)
        let then = try Self.lines(
            String(contentsOf: Self.fixtures.appendingPathComponent("predictions-\(version).jsonl"), encoding: .utf8))
        try #require(now.count == then.count)
        for (current, recorded) in zip(now, then) {
            #expect(current["file"] as? String == recorded["file"] as? String)
            #expect(current["label"] as? String == recorded["label"] as? String)
            #expect(current["decision"] as? String == recorded["decision"] as? String)
            #expect(current["threshold"] as? Double == recorded["threshold"] as? Double)
            let p = try #require(current["probabilities"] as? [String: Double])
            let q = try #require(recorded["probabilities"] as? [String: Double])
            #expect(Set(p.keys) == Set(q.keys))
            for (label, value) in q {
                #expect(
                    abs((p[label] ?? -1) - value) < 1e-5, "\(current["file"]!) class \(label): \(p[label]!) vs \(value)"
                )
            }
        }

        for (format, file) in [("coreml", "FaceClassifier.mlmodel"), ("onnx", "model.onnx")] {
            let out = root.appendingPathComponent("again-\(file)")
            let export = try CLIRunner.run(["export", bundle.path, "--format", format, "--out", out.path])
            #expect(export.status == 0, "\(export.standardError)")
            #expect(
                try Data(contentsOf: out) == Data(contentsOf: bundle.appendingPathComponent(file)),
                "\(file) of version \(version) re-exports differently")
        }
    }
}
