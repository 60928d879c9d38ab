import FaceTrain
import Foundation

/// `facetrain eval`: scores a bundle on its held-out crops or on a folder of crops.
struct Eval: Command {
    static let name = "eval"
    static let abstract =
        "Score a bundle: user accuracy, per-user precision/recall, how often strangers and non-faces get in."
    static var options: [OptionSpec] {
        [
            BundleOptions.model, BundleOptions.models,
            .option(
                "data", "dir",
                "Score every crop here (folder = true label; folders the model does not know count as unknown people). "
                    + "Default: the bundle's held-out crops."),
            .option(
                "target-far", "rate", "Unknown-person false accept rate the suggested threshold is chosen for.",
                default: "0.05"),
            .option("report", "file.html", "Also write a self-contained HTML report."),
            .option(
                "predictions", "file.csv",
                "Also write path,true_label,predicted_label,confidence per crop (argmax, no threshold)."),
            .flag("json", "Print the metrics as JSON."),
        ]
    }

    let model: String
    let models: URL
    let data: URL?
    let targetFalseAcceptRate: Double
    let report: URL?
    let predictions: URL?
    let json: Bool

    init(arguments: ParsedArguments) throws {
        try arguments.expectPositionals(atMost: 0)
        (model, models) = try BundleOptions.bundle(arguments)
        data = arguments.string("data").map { URL(fileURLWithPath: $0) }
        targetFalseAcceptRate = try arguments.required("target-far")
        let rate = targetFalseAcceptRate
        try requireValid { () throws(ConfigurationError) in
            try TrainingLimits.checkTargetFalseAcceptRate(rate)
        }
        report = arguments.string("report").map { URL(fileURLWithPath: $0) }
        predictions = arguments.string("predictions").map { URL(fileURLWithPath: $0) }
        json = arguments.flag("json")
    }

    func run() throws -> ExitCode {
        // Both outputs are checked before scoring, so a bad one leaves neither behind.
        for output in [predictions, report].compactMap({ $0 }) { try DurableFile.checkTarget(output) }
        let bundle = try ModelBundle.open(ModelRepository.locateBundle(model, modelsDirectory: models))
        let evaluation = HeldOutEvaluation(bundle: bundle)
        let samples: [FaceSample]
        var notScored: [DataWarning] = []
        if let data {
            let dataset = try FaceDataset.load(from: data, options: evaluation.loadOptions)
            // Unreadable crops are left out of the scores, never silently.
            notScored = dataset.report.warnings.filter { $0.kind == "skipped_image" }
            for warning in notScored { printError("warning: \(warning) (not scored)") }
            samples = dataset.samples
        } else {
            do {
                samples = try evaluation.heldOutSamples()
            } catch let reason as HeldOutEvaluationError {
                throw EvalError.heldOut(reason)
            }
        }
        guard !samples.isEmpty else { throw EvalError.nothingToScore }
        let run = try evaluation.run(
            on: samples, targetFalseAcceptRate: targetFalseAcceptRate, withEmbeddings: report != nil)
        let calibration = bundle.metrics?.calibration
        if let predictions { try writePredictions(run, labels: bundle.model.definition.classLabels, to: predictions) }
        if let report {
            try DurableFile.write(Data(HTMLReport(bundle: bundle, run: run, samples: samples).html.utf8), to: report)
        }
        if json {
            var object = try JSONSerialization.jsonObject(with: JSONText.data(run.metrics)) as? [String: Any] ?? [:]
            object["suggested_threshold"] = run.chosenThreshold
            object["target_far"] = targetFalseAcceptRate
            object["threshold_sweep"] = try JSONSerialization.jsonObject(with: JSONText.data(run.sweep))
            object["model"] = bundle.directory.path
            object["not_scored"] = notScored.map { ["path": $0.path, "reason": $0.message] }
            if let sources = calibration {
                // What the threshold was calibrated on at fit time, next to what these crops deliver.
                object["calibration"] = [
                    "target_far": bundle.metrics?.targetFalseAcceptRate ?? NSNull(), "sources": sources,
                    "delivered_unknown_far": run.metrics.unknownFalseAcceptRate,
                ]
            }
            print(
                String(
                    decoding: try JSONSerialization.data(
                        withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]),
                    as: UTF8.self))
        } else {
            printTable(run, bundle: bundle)
            if let sources = calibration {
                let target = bundle.metrics?.targetFalseAcceptRate.map { String(format: "%.3f", $0) } ?? "?"
                print("")
                print(
                    "calibration at fit time (target unknown_far \(target)): "
                        + sources.keys.sorted().map { String(format: "%@ %.3f", $0, sources[$0]!) }.joined(
                            separator: ", ")
                        + String(format: "; delivered on these crops: %.3f", run.metrics.unknownFalseAcceptRate))
            }
        }
        return .success
    }

    private func printTable(_ run: EvaluationRun, bundle: ModelBundle) {
        let metrics = run.metrics
        print(
            "model \(bundle.directory.path) (version \(bundle.version)), \(run.predictions.count) crops: "
                + "\(metrics.counts["users"] ?? 0) of users, \(metrics.counts["unknown"] ?? 0) unknown, "
                + "\(metrics.counts["nonface"] ?? 0) non-faces")
        print("")
        print("metric                 threshold \(String(format: "%.2f", metrics.threshold))   no threshold")
        for (key, value) in [
            ("user_accuracy", metrics.userAccuracy), ("macro_user_recall", metrics.macroUserRecall),
            ("macro_user_precision", metrics.macroUserPrecision), ("unknown_far", metrics.unknownFalseAcceptRate),
            ("nonface_far", metrics.nonfaceFalseAcceptRate), ("user_rejected", metrics.userRejected),
            ("overall_accuracy", metrics.overallAccuracy),
        ] {
            let plain = metrics.unthresholded[key].map { String(format: "%.3f", $0) } ?? ""
            print(
                key.padding(toLength: 23, withPad: " ", startingAt: 0)
                    + String(format: "%.3f", value).padding(toLength: 17, withPad: " ", startingAt: 0) + plain)
        }
        print("")
        print("per user:  label  precision  recall  crops  name")
        for (label, score) in metrics.perUser.sorted(by: { (Int($0.key) ?? 0) < (Int($1.key) ?? 0) }) {
            print(
                String(
                    format: "           %-6@ %9.3f  %6.3f  %5d  %@", label, score.precision, score.recall,
                    score.support, score.name))
        }
        print("")
        print(
            String(
                format: "threshold for unknown_far <= %.2f on held-out and simulated unseen strangers: "
                    + "%.2f (the bundle uses %.2f)",
                targetFalseAcceptRate, run.chosenThreshold, metrics.threshold))
        if !metrics.misclassified.isEmpty {
            print("\nmisclassified (\(metrics.misclassified.count)):")
            for item in metrics.misclassified.prefix(20) {
                print(
                    String(
                        format: "  %@: true %@, predicted %@ (%.2f)", item.file, item.trueLabel, item.predictedLabel,
                        item.confidence))
            }
            if metrics.misclassified.count > 20 { print("  ... (all of them in --json)") }
        }
    }

    private func writePredictions(_ run: EvaluationRun, labels: [String], to url: URL) throws {
        var text = "path,true_label,predicted_label,confidence\n"
        let rule = try DecisionRule(classLabels: ClassLabel.parse(labels), threshold: 0)
        for prediction in run.predictions {
            let decided = rule.decide(prediction.probabilities)
            let path =
                prediction.path.contains(where: { ",\"\n\r".contains($0) })
                ? "\"" + prediction.path.replacingOccurrences(of: "\"", with: "\"\"") + "\"" : prediction.path
            text += "\(path),\(prediction.trueLabel),\(decided.label),\(decided.confidence)\n"
        }
        try DurableFile.write(Data(text.utf8), to: url)
    }
}

/// Why `eval` has nothing to score.
enum EvalError: Error, CustomStringConvertible {
    /// The bundle's own held-out crops cannot be scored; `--data` can score others.
    case heldOut(HeldOutEvaluationError)
    case nothingToScore

    var description: String {
        switch self {
        case .heldOut(let reason):
            switch reason {
            case .noHeldOutRecord: "\(reason). HINT: pass --data DIR to score a folder of crops."
            case .heldOutMissing: "\(reason). HINT: pass --data DIR to score another folder."
            }
        case .nothingToScore:
            "no crops to score. HINT: --data must hold one folder of images per class."
        }
    }
}
