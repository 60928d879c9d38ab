import FaceTrain
import Foundation

/// `facetrain predict`: classifies image files with a bundle, as the app would.
struct Predict: Command {
    static let name = "predict"
    static let abstract =
        "Classify images with a bundle: top labels with names and probabilities, and whether the app would accept."
    static let arguments = "<image>..."
    static var options: [OptionSpec] {
        [
            BundleOptions.model, BundleOptions.models,
            BundleOptions.top("Classes listed per image, most probable first."),
            .flag("json", "Print one JSON object per line per image, with every class's probability."),
        ]
    }

    let model: String
    let models: URL
    let top: Int
    let json: Bool
    let images: [String]

    init(arguments: ParsedArguments) throws {
        images = arguments.positionals
        guard !images.isEmpty else { throw UsageError(message: "Missing expected argument '<image>...'") }
        (model, models) = try BundleOptions.bundle(arguments)
        top = try BundleOptions.top(arguments)
        json = arguments.flag("json")
    }

    func run() throws -> ExitCode {
        let bundle = try ModelBundle.open(ModelRepository.locateBundle(model, modelsDirectory: models))
        var predictor = try FacePredictor(bundle: bundle)
        var failures = 0
        var start = 0
        // One batch at a time, so results appear as they are computed and memory stays bounded.
        while start < images.count {
            let end = min(start + FacePredictor.batchSize, images.count)
            let outcomes = try predictor.classify(images[start..<end].map { URL(fileURLWithPath: $0) })
            for (given, outcome) in zip(images[start..<end], outcomes) {
                switch outcome {
                case .failed(_, let error):
                    failures += 1
                    printError("Error: \(error)")
                case .classified(var classification):
                    classification.file = given
                    print(json ? jsonLine(classification) : text(classification))
                }
            }
            start = end
        }
        if failures > 0 {
            printError("Error: \(failures) of \(images.count) image(s) could not be classified")
            return .failure
        }
        return .success
    }

    private func text(_ result: ImageClassification) -> String {
        let best = result.top
        let threshold = String(format: "%.2f", result.threshold)
        let verdict: String
        if result.accepted {
            verdict = "accepted (threshold \(threshold))"
        } else if best.label.isUser {
            verdict = "not accepted: below the accept threshold \(threshold), the app answers unknown person"
        } else {
            verdict = "not accepted"
        }
        var lines = ["\(result.file): \(display(best)) \(String(format: "%.4f", best.probability)) - \(verdict)"]
        let width = result.ranking.prefix(top).map { $0.label.description.count }.max() ?? 1
        for score in result.ranking.prefix(top) {
            let text = score.label.description
            let label = String(repeating: " ", count: width - text.count) + text
            lines.append("    \(label)  \(String(format: "%.6f", score.probability))  \(score.name)")
        }
        return lines.joined(separator: "\n")
    }

    private func display(_ score: ClassScore) -> String {
        if !score.label.isUser { return score.name }
        return score.name.isEmpty ? "user \(score.label)" : "\(score.name) (\(score.label))"
    }

    /// One line of JSON; probabilities in class order, each float printed so that it reads back exactly.
    private func jsonLine(_ result: ImageClassification) -> String {
        let probabilities = zip(result.classLabels, result.probabilities).map { "\(quoted($0)):\(number($1))" }
        let topList = result.ranking.prefix(top).map {
            "{\"label\":\(quoted($0.label)),\"name\":\(quoted($0.name)),\"probability\":\(number($0.probability))}"
        }
        return
            "{\"file\":\(quoted(result.file)),\"label\":\(quoted(result.top.label)),"
            + "\"name\":\(quoted(result.top.name)),"
            + "\"confidence\":\(number(result.top.probability)),\"accepted\":\(result.accepted),"
            + "\"decision\":\(quoted(result.decidedLabel)),\"threshold\":\(result.threshold),"
            + "\"top\":[\(topList.joined(separator: ","))],\"probabilities\":{\(probabilities.joined(separator: ","))}}"
    }

    private func number(_ value: Float) -> String { value.isFinite ? "\(value)" : "null" }

    private func quoted(_ label: ClassLabel) -> String { quoted(label.description) }

    private func quoted(_ text: String) -> String {
        let data =
            (try? JSONSerialization.data(withJSONObject: [text], options: [.withoutEscapingSlashes]))
            ?? Data("[\"\"]".utf8)
        return String(decoding: data.dropFirst().dropLast(), as: UTF8.self)
    }
}
