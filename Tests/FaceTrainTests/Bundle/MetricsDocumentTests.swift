// metrics.json as `MetricsDocument`: every document facetrain wrote still reads (missing fields
// as nil), and writing gives the bytes the untyped writer gave plus `format_version`. Not the
// scoring behind the numbers (ScoringTests) nor re-evaluating a bundle (HeldOutEvaluationTests).
import FaceTrainTestSupport
import Foundation
import Testing

@testable import FaceTrain
@testable import FaceTrainEngine

@Suite("Metrics document")
struct MetricsDocumentTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fixtures")

    /// Every metrics.json kept from earlier facetrains.
    static let written = [
        "golden-0.1.0/models/1/metrics.json", "golden-0.1.0/models/2/metrics.json", "format1-bundle/1/metrics.json",
    ]

    /// JSON bytes as today's Foundation spells them (sorted keys), to compare documents value for value.
    static func canonical(_ data: Data) throws -> String {
        let object = try JSONSerialization.jsonObject(with: data)
        return String(
            decoding: try JSONSerialization.data(
                withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]),
            as: UTF8.self)
    }

    @Test(arguments: written)
    func anOldDocumentReadsAndWritesBackValueForValue(path: String) throws {
        let bytes = try Data(contentsOf: Self.fixtures.appendingPathComponent(path))
        let document = try MetricsDocument.decode(bytes)
        #expect(document.formatVersion == nil, "written before metrics.json had a version")
        #expect(document.targetFalseAcceptRate == 0.05)
        #expect(document.history?.isEmpty == false && document.bestEpoch != nil)
        #expect(document.thresholdSweep?.count == 101)
        #expect(document.heldOutHashes.count == document.heldOut?.count && !document.heldOutHashes.isEmpty)
        // Same keys and numbers: nothing was lost or made up on the way through. (Bytes can differ
        // only where an older Foundation spelt a small number without an exponent.)
        #expect(try Self.canonical(document.encoded()) == Self.canonical(bytes))
    }

    @Test func fieldsAnOldDocumentLacksAreNilNotDefaults() throws {
        // Before fits from a base, there was no calibration and no per-source rate in the sweep.
        let scratch = try MetricsDocument.decode(
            Data(contentsOf: Self.fixtures.appendingPathComponent("golden-0.1.0/models/1/metrics.json")))
        #expect(scratch.calibration == nil)
        #expect(scratch.thresholdSweep?.allSatisfy { $0.sources == nil } == true)
        let fromBase = try MetricsDocument.decode(
            Data(contentsOf: Self.fixtures.appendingPathComponent("golden-0.1.0/models/2/metrics.json")))
        #expect(fromBase.calibration?.keys.sorted() == ["held_out_unknown", "leave_users_out", "pooled"])

        // A document with the headline numbers only (as the publish gate's tests write).
        let headline = try MetricsDocument.decode(BundleFixture.metrics(userAccuracy: 0.8))
        #expect(headline.userAccuracy == 0.8 && headline.threshold?.accept == 0.6)
        #expect(headline.perUser?.isEmpty == true)
        #expect(headline.targetFalseAcceptRate == nil, "not the 0.05 a fit defaults to")
        #expect(headline.chosenThreshold == nil && headline.calibration == nil && headline.formatVersion == nil)
        #expect(headline.heldOut == nil && headline.heldOutHashes.isEmpty)
        #expect(headline.history == nil && headline.bestEpoch == nil && headline.thresholdSweep == nil)
        #expect(headline.counts == nil && headline.unthresholded == nil && headline.misclassified == nil)

        let bare = try MetricsDocument.decode(Data(#"{"per_user": {"17": {"recall": 0.5}}}"#.utf8))
        #expect(bare.perUser?["17"] == MetricsDocument.ClassMetrics(precision: nil, recall: 0.5, support: nil))
        #expect(bare.keyNumbers.isEmpty && bare.worstFalseAcceptRate == nil)
    }

    /// What the bundle writer wrote before the document had a type: the evaluation metrics, then
    /// the threshold, target, sweep, curves and held-out crops merged in through dictionaries.
    static func untypedDocument(run: EvaluationRun, fit: FitResult, targetFalseAcceptRate: Double) throws -> Data {
        var object = try JSONSerialization.jsonObject(with: JSONText.data(run.metrics)) as? [String: Any] ?? [:]
        object["chosen_threshold"] = run.chosenThreshold
        object["target_far"] = targetFalseAcceptRate
        object["threshold_sweep"] = try JSONSerialization.jsonObject(with: JSONText.data(run.sweep))
        object["history"] = try JSONSerialization.jsonObject(with: JSONText.data(fit.history))
        object["best_epoch"] = fit.bestEpoch
        object["held_out"] = fit.heldOut.map { ["path": $0.path, "sha256": $0.contentHash, "label": String($0.label)] }
        return try JSONSerialization.data(
            withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
    }

    @Test(arguments: [false, true])
    func writingGivesTheUntypedWritersBytesPlusTheFormatVersion(calibrated: Bool) throws {
        let model = BundleFixture.model(users: [3, 4])
        let samples = (0..<8).map { index in
            var generator = SplitMix64(seed: UInt64(index) + 7)
            let pixels = (0..<(16 * 16 * 3)).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            return FaceSample(
                path: "data/\([1, 2, 3, 4][index % 4])/crop \(index).jpg", label: [1, 2, 3, 4][index % 4],
                contentHash: "hash\(index)", image: Image(width: 16, height: 16, channels: 3, pixels: pixels),
                originalWidth: 16, originalHeight: 16)
        }
        var run = try ModelEvaluation.evaluate(
            model, on: samples, names: ["3": "Ada", "4": "Grace"], targetFalseAcceptRate: 0.05)
        if calibrated {
            run.metrics.calibration = ["bank": 0.02, "leave_users_out": 1.0 / 3, "pooled": 0.1]
            run.sweep[0].sources = ["bank": 0.5, "pooled": 0.25]
        }
        let history = [
            EpochRecord(
                epoch: 1, trainLoss: 1.25, trainAccuracy: 0.5, heldOutLoss: 1.5, heldOutAccuracy: 0.25,
                learningRate: 3e-3, seconds: 0.1),
            EpochRecord(
                epoch: 2, trainLoss: 0.75, trainAccuracy: 1, heldOutLoss: 1, heldOutAccuracy: 0.5,
                learningRate: 1e-3, seconds: 0.2),
        ]
        let fit = FitResult(model: model, history: history, bestEpoch: 2, training: [], heldOut: samples)

        let written = try MetricsDocument(run: run, fit: fit, targetFalseAcceptRate: 0.05).encoded()
        var object = try #require(try JSONSerialization.jsonObject(with: written) as? [String: Any])
        #expect(object.removeValue(forKey: "format_version") as? Int == MetricsDocument.currentFormatVersion)
        let withoutVersion = try JSONSerialization.data(
            withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        let untyped = try Self.untypedDocument(run: run, fit: fit, targetFalseAcceptRate: 0.05)
        #expect(String(decoding: withoutVersion, as: UTF8.self) == String(decoding: untyped, as: UTF8.self))
        #expect((object["calibration"] != nil) == calibrated)

        // And it reads back as written.
        let document = try MetricsDocument.decode(written)
        #expect(document.formatVersion == MetricsDocument.currentFormatVersion)
        #expect(document.heldOutHashes == Set(samples.map(\.contentHash)))
        #expect(document.history == history && document.thresholdSweep == run.sweep)
        #expect(document.perUser?["3"]?.name == "Ada" && document.threshold?.accept == run.metrics.threshold)
    }

    @Test func aNewerFormatIsRefusedNamingMetricsJSON() throws {
        let models = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: models) }
        let current = try BundleFixture.publish(
            in: models, metrics: Data(#"{"format_version": 1, "user_accuracy": 0.9}"#.utf8))
        #expect(BundleVerifier.verify(current).isValid)
        // Publishing verifies the staged bundle, so a newer document never becomes a version.
        #expect {
            try BundleFixture.publish(
                in: models, seed: 2, metrics: Data(#"{"format_version": 2, "user_accuracy": 0.9}"#.utf8))
        } throws: { error in
            guard case BundleError.verificationFailed(_, let problems) = error else { return false }
            return problems.contains { $0.file == "metrics.json" && $0.message.contains("format version 2") }
        }
    }
}
