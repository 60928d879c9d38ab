import FaceTrain
import FaceTrainBenchmark
import FaceTrainEngine
import Foundation

/// `facetrain bench`: times training and inference of a named architecture on random data.
struct Bench: Command {
    static let name = "bench"
    static let abstract = "Measure training and inference speed of an architecture (ref-small) on random data."
    static var options: [OptionSpec] {
        [
            TrainingOptions.architecture(
                "Network to time (" + ModelDefinition.extractorArchitectures.joined(separator: ", ") + ").",
                default: "ref-small"),
            TrainingOptions.batchSize(default: "32", "Training batch size."),
            TrainingOptions.width(
                default: "16", "Width of the architecture (32 with --input-size 80: the builtin base's extractor)."),
            TrainingOptions.inputSize(),
            .option("steps", "n", "Timed training steps (after 5 warm-up steps).", default: "30"),
            .option("inference-batch-size", "n", "Batch size of the inference throughput run.", default: "64"),
            .option("latency-seconds", "s", "Seconds spent sampling batch-1 latency.", default: "1"),
            .option("peak-gflops", "x", "Peak GFLOP/s to report shares against (default: from /proc/cpuinfo)."),
            .flag("with-load", "Keep one core busy with another process while measuring."),
            .flag("json", "Print the result as one JSON object."),
        ]
    }
    let configuration: TrainingBenchmark.Configuration
    let withLoad: Bool
    let json: Bool

    init(arguments: ParsedArguments) throws {
        try arguments.expectPositionals(atMost: 0)
        var configuration = TrainingBenchmark.Configuration()
        configuration.batchSize = try arguments.required("batch-size")
        configuration.width = try arguments.required("width")
        configuration.architecture = try arguments.required("architecture")
        configuration.inputSize = try arguments.required("input-size")
        try requireValid { () throws(ConfigurationError) in
            try TrainingLimits.checkArchitecture(configuration.architecture)
            try TrainingLimits.checkWidth(configuration.width)
            try TrainingLimits.checkInputSize(configuration.inputSize)
            try TrainingLimits.checkBatchSize(configuration.batchSize)
        }
        configuration.steps = try arguments.required("steps")
        configuration.inferenceBatchSize = try arguments.required("inference-batch-size")
        configuration.latencySeconds = try arguments.required("latency-seconds")
        configuration.peakGFLOPS = try arguments.value("peak-gflops")
        guard configuration.steps >= 1 else { throw UsageError(message: "--steps must be at least 1") }
        guard (1...4096).contains(configuration.inferenceBatchSize) else {
            throw UsageError(message: "--inference-batch-size must be in 1...4096")
        }
        guard configuration.latencySeconds.isFinite, (0...3600).contains(configuration.latencySeconds) else {
            throw UsageError(message: "--latency-seconds must be in 0...3600")
        }
        if let peak = configuration.peakGFLOPS, !(peak.isFinite && peak > 0) {
            throw UsageError(message: "--peak-gflops must be a positive number")
        }
        self.configuration = configuration
        withLoad = arguments.flag("with-load")
        json = arguments.flag("json")
    }

    func run() throws -> ExitCode {
        let neighbour = withLoad ? try BusyNeighbour() : nil
        defer { neighbour?.stop() }
        let result = try TrainingBenchmark.run(configuration)
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            print(String(decoding: try encoder.encode(result), as: UTF8.self))
        } else {
            print(
                "\(configuration.architecture) at width \(configuration.width), \(configuration.inputSize)-px input, random data"
                    + (withLoad ? ", one core kept busy by another process" : ""))
            print(result.summary)
        }
        return .success
    }
}
