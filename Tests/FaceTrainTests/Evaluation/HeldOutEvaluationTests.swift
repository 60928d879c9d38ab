// HeldOutEvaluation, the one re-evaluation of a bundle behind `facetrain eval` and the server's
// report: it finds the crops a fit held out and reproduces the fit's figures on them. Not the
// scoring arithmetic (ScoringTests) nor the document's reading and writing (MetricsDocumentTests).
import FaceTrainTestSupport
import Foundation
import Testing

@testable import FaceTrain

@Suite("Held-out evaluation", .serialized)
struct HeldOutEvaluationTests {
    /// A bundle fitted from scratch on synthetic faces (4 users) and its data folder.
    static func fittedBundle() throws -> (root: URL, data: URL, bundle: ModelBundle) {
        let root = try FitJobTests.syntheticData(users: 4)
        let data = root.appendingPathComponent("data")
        var configuration = FitConfiguration()
        configuration.epochs = 3
        configuration.batchSize = 16
        configuration.inputSize = 32
        configuration.width = 4
        let job = FitJob(
            data: data, models: root.appendingPathComponent("models"), configuration: configuration,
            loadOptions: DataLoadOptions(inputWidth: 32, inputHeight: 32, channels: 3), base: nil)
        let result = try job.run(observer: nil)
        return (root, data, try ModelBundle.open(result.bundle))
    }

    @Test func reEvaluatingAFreshBundleGivesTheFiguresItsFitRecorded() throws {
        let (root, _, bundle) = try Self.fittedBundle()
        defer { try? FileManager.default.removeItem(at: root) }
        let recorded = try #require(bundle.metrics)
        let evaluation = HeldOutEvaluation(bundle: bundle)
        let samples = try evaluation.heldOutSamples()
        #expect(Set(samples.map(\.contentHash)) == recorded.heldOutHashes && samples.count == recorded.heldOut?.count)
        // The target the fit chose for is the default, so the suggested threshold is the fit's.
        let run = try evaluation.run(on: samples, withEmbeddings: true)
        #expect(run.chosenThreshold == recorded.chosenThreshold)
        #expect(run.metrics.threshold == bundle.manifest.acceptThreshold)
        #expect(run.metrics.userAccuracy == recorded.userAccuracy)
        #expect(run.metrics.unknownFalseAcceptRate == recorded.unknownFalseAcceptRate)
        #expect(run.metrics.nonfaceFalseAcceptRate == recorded.nonFaceFalseAcceptRate)
        #expect(run.metrics.overallAccuracy == recorded.overallAccuracy)
        #expect(run.metrics.counts == recorded.counts && run.metrics.confusion == recorded.confusion)
        #expect(run.embeddings.count == samples.count)
        // An explicit target (eval's --target-far) moves only the suggestion, never the bundle's threshold.
        let strict = try evaluation.run(on: samples, targetFalseAcceptRate: 0, withEmbeddings: false)
        #expect(strict.metrics.threshold == run.metrics.threshold && strict.embeddings.isEmpty)
    }

    @Test func aMissingCropStopsItAndACopiedOneIsScoredPerCopy() throws {
        let (root, data, bundle) = try Self.fittedBundle()
        defer { try? FileManager.default.removeItem(at: root) }
        let evaluation = HeldOutEvaluation(bundle: bundle)
        let held = (bundle.metrics?.heldOut ?? []).compactMap(\.path)
        try #require(held.count > 2)
        let expected = held.count

        // A copy within its class (the same bytes twice): every file is scored, nothing is missing.
        let first = URL(fileURLWithPath: held[0])
        let copy = first.deletingLastPathComponent().appendingPathComponent("copy-of-\(first.lastPathComponent)")
        try FileManager.default.copyItem(at: first, to: copy)
        #expect(try evaluation.heldOutSamples().count == expected + 1)
        // The same crops through a reader of the caller's own (the server's, under its lock).
        var reads = 0
        let read = try evaluation.heldOutSamples(in: data) { folder, options in
            reads += 1
            return try FaceDataset.load(from: folder, options: options)
        }
        #expect(reads == 1 && read.count == expected + 1)

        // One crop gone, though the copy is still there: its hash is missing, and said so.
        try FileManager.default.removeItem(at: URL(fileURLWithPath: held[1]))
        #expect {
            try evaluation.heldOutSamples()
        } throws: { error in
            guard case HeldOutEvaluationError.heldOutMissing(let folder, let found, let total) = error else {
                return false
            }
            return found == expected - 1 && total == expected && folder == data.standardizedFileURL.path
        }
    }

    @Test func aBundleThatRecordsNoHeldOutCropsSaysSoBeforeReadingAnything() throws {
        let models = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: models) }
        let url = try BundleFixture.publish(in: models)
        let evaluation = HeldOutEvaluation(bundle: try ModelBundle.open(url))
        #expect(evaluation.trainingDataFolder == nil)
        for folder in [nil, models] {
            #expect {
                try evaluation.heldOutSamples(in: folder) { _, _ in
                    Issue.record("the folder was read")
                    throw CancellationError()
                }
            } throws: { error in
                guard case HeldOutEvaluationError.noHeldOutRecord(let bundle) = error else { return false }
                return bundle == url.path
            }
        }
    }
}
