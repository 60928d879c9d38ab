import FaceTrain
import FaceTrainBenchmark
import FaceTrainEngine
import Foundation

/// `facetrain architectures`: the named architectures with their size and work per image.
struct Architectures: Command {
    static let name = "architectures"
    static let abstract = "List the named architectures with parameters, FLOPs per image and input size."
    static var options: [OptionSpec] {
        [
            TrainingOptions.width(
                default: "32", "Width to size them at (32 with --input-size 80: the builtin base's)."),
            TrainingOptions.inputSize(),
            .option("classes", "n", "Classes of the classifier counted in (42, as `facetrain bench`).", default: "42"),
            .flag("json", "Print the list as JSON."),
        ]
    }
    let width: Int
    let inputSize: Int
    let classes: Int
    let json: Bool

    init(arguments: ParsedArguments) throws {
        try arguments.expectPositionals(atMost: 0)
        width = try arguments.required("width")
        inputSize = try arguments.required("input-size")
        classes = try arguments.required("classes")
        let (width, inputSize) = (self.width, self.inputSize)
        try requireValid { () throws(ConfigurationError) in
            try TrainingLimits.checkWidth(width)
            try TrainingLimits.checkInputSize(inputSize)
        }
        guard (1...100_000).contains(classes) else { throw UsageError(message: "--classes must be in 1...100000") }
        json = arguments.flag("json")
    }

    func run() throws -> ExitCode {
        let summaries = try ModelDefinition.architectures.map {
            try ArchitectureSummary($0, inputSize: inputSize, width: width, classes: classes)
        }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            print(String(decoding: try encoder.encode(summaries), as: UTF8.self))
            return .success
        }
        var rows = [["NAME", "INPUT", "LAYERS", "PARAMETERS", "EXTRACTOR", "EMBEDDING", "MFLOP/IMAGE", "TRAIN MFLOP"]]
        for summary in summaries {
            rows.append([
                summary.name, "\(summary.inputSize)x\(summary.inputSize)", String(summary.layers),
                String(summary.parameters), String(summary.extractorParameters), String(summary.embeddingFeatures),
                String(format: "%.1f", summary.forwardMFLOPPerImage),
                String(format: "%.1f", summary.trainingMFLOPPerImage),
            ])
        }
        let widths = (0..<rows[0].count).map { column in rows.map { $0[column].count }.max() ?? 0 }
        for row in rows {
            let line = zip(row, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }
            print(line.joined(separator: "  ").replacingOccurrences(of: " +$", with: "", options: .regularExpression))
        }
        print("")
        for summary in summaries { print("\(summary.name): \(summary.summary)") }
        print(
            "At width \(width) with a \(classes)-class classifier; FLOPs count conv and linear multiply-adds x 2, "
                + "as `facetrain bench` does.")
        return .success
    }
}
