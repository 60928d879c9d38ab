import FaceTrainTestSupport
import Foundation
import Testing

@testable import FaceTrain
@testable import FaceTrainEngine

#if canImport(FoundationXML)
    import FoundationXML
#endif

@Suite("Metrics, threshold sweep and report")
struct ScoringTests {
    let labels: [ClassLabel] = [.notAFace, .unknownPerson, .user(3), .user(4)]

    /// Six crops worked out by hand: user 3 right (0.9), user 3 taken for 4 (0.6), user 4 right but
    /// unsure (0.45), a stranger taken for 3 (0.7), a stranger rejected, a non-face taken for 4 (0.5).
    var predictions: [Prediction] {
        [
            Prediction(path: "a", trueLabel: .user(3), probabilities: [0.0, 0.05, 0.9, 0.05]),
            Prediction(path: "b", trueLabel: .user(3), probabilities: [0.0, 0.1, 0.3, 0.6]),
            Prediction(path: "c", trueLabel: .user(4), probabilities: [0.1, 0.2, 0.25, 0.45]),
            Prediction(path: "d", trueLabel: .unknownPerson, probabilities: [0.0, 0.2, 0.7, 0.1]),
            Prediction(path: "e", trueLabel: .unknownPerson, probabilities: [0.1, 0.8, 0.05, 0.05]),
            Prediction(path: "f", trueLabel: .notAFace, probabilities: [0.3, 0.1, 0.1, 0.5]),
        ]
    }

    /// A fit from a base calibrates on named stranger sources: a bank whose strangers score high
    /// must raise the threshold above what the held-out strangers alone allow, and each source's
    /// rate at the chosen threshold is reported.
    @Test func bankStrangersThatScoreHighChooseAStricterThreshold() {
        let users = (0..<20).map { index in
            Prediction(
                path: "u\(index)", trueLabel: .user(3),
                probabilities: [0, 0, 0.5 + Float(index) / 40, 0.5 - Float(index) / 40])
        }
        let heldOutStrangers = (0..<20).map { index in
            Prediction(path: "s\(index)", trueLabel: .unknownPerson, probabilities: [0, 0.7, 0.3, 0])
        }
        let quietBank = (0..<20).map {
            Prediction(path: "b\($0)", trueLabel: .unknownPerson, probabilities: [0, 0.6, 0.4, 0])
        }
        let loudBank = (0..<20).map { index in
            Prediction(path: "b\(index)", trueLabel: .unknownPerson, probabilities: [0, 0, 0.5 + Float(index) / 50, 0])
        }
        let all = users + heldOutStrangers
        let lenient = Scoring.chooseThreshold(
            Scoring.sweep(all, classLabels: labels, strangers: ["bank": quietBank]), targetFalseAcceptRate: 0.05)
        let strict = Scoring.chooseThreshold(
            Scoring.sweep(all, classLabels: labels, strangers: ["bank": loudBank]), targetFalseAcceptRate: 0.05)
        #expect(strict > lenient, "threshold \(lenient) with a quiet bank, \(strict) with a loud one")
        // The loud bank's scores reach 0.88: at most one of 20 (5 %) may pass.
        #expect(strict >= 0.87)
        let rates = Scoring.calibrationRates(
            all, classLabels: labels, strangers: ["bank": loudBank], threshold: strict)
        #expect(Set(rates.keys) == ["held_out_unknown", "bank", "pooled"])
        #expect(rates["pooled"] == 0)
        #expect(rates["bank"]! <= 0.05)
        #expect(rates["held_out_unknown"] == 0)
    }

    @Test func metricsWithoutThreshold() {
        let metrics = Scoring.metrics(
            predictions, rule: DecisionRule(classLabels: labels, threshold: 0), names: ["3": "Ada"])
        #expect(abs(metrics.userAccuracy - 2.0 / 3) < 1e-12)
        #expect(metrics.unknownFalseAcceptRate == 0.5)
        #expect(metrics.nonfaceFalseAcceptRate == 1)
        #expect(metrics.userRejected == 0)
        #expect(abs(metrics.overallAccuracy - 3.0 / 6) < 1e-12)
        // User 3: predicted twice (a, d), right once -> precision 1/2, recall 1/2.
        #expect(metrics.perUser["3"] == UserScore(name: "Ada", precision: 0.5, recall: 0.5, support: 2))
        // User 4: predicted three times (b, c, f), right once -> precision 1/3, recall 1.
        #expect(abs(metrics.perUser["4"]!.precision - 1.0 / 3) < 1e-12)
        #expect(metrics.perUser["4"]!.recall == 1)
        #expect(metrics.confusion == [[0, 0, 0, 1], [0, 1, 1, 0], [0, 0, 1, 1], [0, 0, 0, 1]])
        #expect(metrics.misclassified.map(\.file) == ["d", "b", "f"])
    }

    @Test func thresholdTurnsUnsureUsersIntoUnknown() {
        let metrics = Scoring.metrics(predictions, rule: DecisionRule(classLabels: labels, threshold: 0.65))
        // a (0.9) stays, b (0.6) and c (0.45) become "2", d (0.7) still accepted, f (0.5) rejected.
        #expect(abs(metrics.userAccuracy - 1.0 / 3) < 1e-12)
        #expect(abs(metrics.userRejected - 2.0 / 3) < 1e-12)
        #expect(metrics.unknownFalseAcceptRate == 0.5)
        #expect(metrics.nonfaceFalseAcceptRate == 0)
        #expect(metrics.unthresholded["nonface_far"] == 1)
    }

    @Test func simulatedStrangersDropTheTrueClass() {
        let strangers = Scoring.simulatedStrangers(predictions, classLabels: labels)
        #expect(strangers.count == 3)
        #expect(strangers.allSatisfy { $0.trueLabel == .unknownPerson })
        // Crop a without class 3: [0, 0.05, 0, 0.05] / 0.1 -> user 4 at 0.5.
        #expect(abs(strangers[0].probabilities[3] - 0.5) < 1e-6)
        #expect(strangers[0].probabilities[2] == 0)
    }

    /// A fold's head lacks the fold's users; counting them back is the softmax over the kept
    /// logits plus that many classes at the kept users' mean exp-logit, worked out directly here.
    @Test func absentUsersCountBackAsTheKeptUsersMean() {
        // Classes "1", "2", then three kept users; two users of the fold are absent.
        let logits: [Float] = [1, 2, 6, 4, 3]
        let exps = logits.map { expf($0) }
        let probabilities = exps.map { $0 / exps.reduce(0, +) }
        let counted = Scoring.countingAbsentUsers(probabilities, absent: 2, users: [2, 3, 4])
        let meanUser = (exps[2] + exps[3] + exps[4]) / 3
        let expected = exps.map { $0 / (exps.reduce(0, +) + 2 * meanUser) }
        for (got, want) in zip(counted, expected) { #expect(abs(got - want) < 1e-6) }
        // The best user's share falls from 0.83 to 0.50: fewer strangers pass a threshold.
        #expect(abs(counted[2] - 0.5) < 1e-3 && abs(probabilities[2] - 0.826) < 1e-3)
        #expect(Scoring.countingAbsentUsers(probabilities, absent: 0, users: [2, 3, 4]) == probabilities)
    }

    @Test func chosenThresholdMeetsTheTargetWithTheMostAccuracy() {
        let sweep = Scoring.sweep(predictions, classLabels: labels)
        #expect(sweep.count == 101)
        #expect(sweep.first!.calibrationFalseAcceptRate >= sweep.last!.calibrationFalseAcceptRate)
        let threshold = Scoring.chooseThreshold(sweep, targetFalseAcceptRate: 0.0)
        #expect(sweep.first { $0.threshold == threshold }!.calibrationFalseAcceptRate == 0)
        // Simulated strangers: b without user 3 puts user 4 at 0.6 / 0.7 = 0.857, c without user 4 puts
        // user 3 at 0.25 / 0.55 = 0.45; the real stranger d is user 3 at 0.7. Zero FAR needs t > 0.857,
        // and crop a (0.9 as a Float, just under 0.90) stays recognised up to 0.89: the lower middle of
        // the plateau 0.86-0.89 is 0.87.
        #expect(abs(threshold - 0.87) < 1e-9)
        let impossible = [
            ThresholdPoint(
                threshold: 0.5, userAccuracy: 1, unknownFalseAcceptRate: 1, nonfaceFalseAcceptRate: 1,
                calibrationFalseAcceptRate: 1)
        ]
        #expect(Scoring.chooseThreshold(impossible, targetFalseAcceptRate: 0.05) == 1)
    }

    @Test func tiedThresholdsGiveTheMiddleOfThePlateau() {
        // Strangers fall under 5 % from 0.50 on; users stay at 0.98 up to 0.76, then drop.
        func point(_ threshold: Double) -> ThresholdPoint {
            let far = threshold < 0.5 ? 0.2 : 0.04
            let accuracy = threshold <= 0.76 ? 0.98 : 0.9
            return ThresholdPoint(
                threshold: threshold, userAccuracy: accuracy, unknownFalseAcceptRate: far, nonfaceFalseAcceptRate: 0,
                calibrationFalseAcceptRate: far)
        }
        let plateau = (0...100).map { point(Double($0) / 100) }
        #expect(Scoring.chooseThreshold(plateau, targetFalseAcceptRate: 0.05) == 0.63)
        // An odd number of grid steps has no single middle: the lower of the two is taken.
        #expect(
            Scoring.chooseThreshold(
                plateau.filter { $0.threshold <= 0.75 || $0.threshold > 0.76 }, targetFalseAcceptRate: 0.05) == 0.62)
        // No plateau: the lowest admissible threshold already has the most accuracy.
        let steep = (0...100).map { step -> ThresholdPoint in
            let threshold = Double(step) / 100
            return ThresholdPoint(
                threshold: threshold, userAccuracy: 1 - threshold, unknownFalseAcceptRate: 1 - threshold,
                nonfaceFalseAcceptRate: 0, calibrationFalseAcceptRate: 1 - threshold)
        }
        #expect(abs(Scoring.chooseThreshold(steep, targetFalseAcceptRate: 0.1) - 0.9) < 1e-9)
    }

    @Test func metricsJSONUsesTheKeysCIReads() throws {
        let metrics = Scoring.metrics(predictions, rule: DecisionRule(classLabels: labels, threshold: 0.5))
        let object = try JSONSerialization.jsonObject(with: JSONText.data(metrics)) as! [String: Any]
        for key in [
            "user_accuracy", "macro_user_recall", "macro_user_precision", "unknown_far", "nonface_far", "user_rejected",
            "overall_accuracy", "per_user", "confusion", "misclassified", "threshold",
        ] {
            #expect(object[key] != nil, "missing \(key)")
        }
    }

    @Test func htmlReportIsWellFormedAndSelfContained() throws {
        let metrics = Scoring.metrics(predictions, rule: DecisionRule(classLabels: labels, threshold: 0.5))
        let report = HTMLReport(
            title: "Model <7>",
            history: [
                EpochRecord(
                    epoch: 1, trainLoss: 1.2, trainAccuracy: 0.5, heldOutLoss: 1.3, heldOutAccuracy: 0.4,
                    learningRate: 0.001, seconds: 2)
            ],
            metrics: metrics, sweep: Scoring.sweep(predictions, classLabels: labels),
            embeddings: [
                .init(x: 0, y: 1, label: "3"), .init(x: 1, y: 0, label: "2"), .init(x: 0.5, y: 0.5, label: "1"),
            ],
            explainedVariance: [0.6, 0.3], thumbnails: ["b": "data:image/png;base64,AAAA"])
        let html = report.html
        #expect(html.contains("Model &lt;7&gt;"))
        #expect(
            !html.contains("http://")
                || html.components(separatedBy: "http://").dropFirst().allSatisfy {
                    $0.hasPrefix("www.w3.org/2000/svg")
                })
        #expect(!html.contains("<script"))
        // Strict XML parse of each inline SVG proves the drawings are well-formed.
        var rest = Substring(html)
        var svgs = 0
        while let start = rest.range(of: "<svg"),
            let end = rest.range(of: "</svg>", range: start.upperBound..<rest.endIndex)
        {
            let svg = String(rest[start.lowerBound..<end.upperBound])
            let parser = XMLParser(data: Data(svg.utf8))
            #expect(parser.parse(), "SVG \(svgs) is not well-formed: \(parser.parserError.map { "\($0)" } ?? "")")
            svgs += 1
            rest = rest[end.upperBound...]
        }
        #expect(svgs == 6)
    }

    /// The report's map shows what the classifier compares: for a model that normalises its
    /// embedding (ref-small), unit-length rows in the direction of the network's embedding.
    @Test func reportEmbeddingsAreUnitDirections() throws {
        let model = BundleFixture.model(users: [3, 4])
        let samples = (0..<5).map { index in
            var generator = SplitMix64(seed: UInt64(index) + 40)
            let pixels = (0..<(16 * 16 * 3)).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            return FaceSample(
                path: "crop\(index)", label: [1, 2, 3, 4, 9][index], contentHash: "",
                image: Image(width: 16, height: 16, channels: 3, pixels: pixels), originalWidth: 16, originalHeight: 16)
        }
        let run = try ModelEvaluation.evaluate(
            model, on: samples, names: [:], targetFalseAcceptRate: 0.05, withEmbeddings: true)
        var network = try Network(model: model)
        let raw = try Inference.embeddings(of: samples, with: &network, definition: model.definition)
        #expect(run.embeddings.count == samples.count)
        for (unit, row) in zip(run.embeddings, raw) {
            let length = unit.reduce(0) { $0 + $1 * $1 }.squareRoot()
            #expect(abs(length - 1) < 1e-5)
            let rowLength = row.reduce(0) { $0 + $1 * $1 }.squareRoot()
            let cosine = zip(unit, row).reduce(0) { $0 + $1.0 * $1.1 } / rowLength
            #expect(abs(cosine - 1) < 1e-5)
        }
        #expect(
            try ModelEvaluation.evaluate(model, on: samples, names: [:], targetFalseAcceptRate: 0.05).embeddings
                .isEmpty)
    }
}
