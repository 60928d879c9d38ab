import FaceTrain
import FaceTrainEngine
import Foundation

/// Times the engine on a named architecture (ref-small by default) with random data: training steps, batched inference and
/// batch-1 latency, with FLOP rates, peak memory and how busy the rest of the machine was.
public enum TrainingBenchmark {
    /// What to measure.
    public struct Configuration: Sendable {
        /// A name of `ModelDefinition.architectures`.
        public var architecture = "ref-small"
        public var batchSize = 32
        /// Timed training steps (after `warmupSteps` untimed ones).
        public var steps = 30
        public var warmupSteps = 5
        public var classes = 42
        public var inputSize = 64
        /// Width of the architecture (32 is the builtin base's extractor).
        public var width = 16
        public var inferenceBatchSize = 64
        /// Seconds spent collecting batch-1 latencies.
        public var latencySeconds = 1.0
        /// Peak GFLOP/s to report shares against; nil derives it from /proc/cpuinfo.
        public var peakGFLOPS: Double?
        public var seed: UInt64 = 1

        public init() {}
    }

    /// The measurements; JSON keys are snake_case.
    public struct Result: Sendable, Codable, Equatable {
        public var architecture: String
        public var width: Int
        public var inputSize: Int
        public var trainImagesPerSecond: Double
        public var trainMillisecondsPerStep: Double
        /// CPU time (all threads) per training step: the work, whatever the machine's load.
        public var trainCPUMillisecondsPerStep: Double
        /// Images per second times the FLOPs of a direct convolution (`train_mflop_per_image`):
        /// Winograd's 3x3 convolutions do fewer, so this rate can pass the arithmetic peak.
        public var trainGFLOPS: Double
        /// trainGFLOPS / peakGFLOPS, in percent.
        public var trainPeakPercent: Double
        public var inferenceImagesPerSecond: Double
        public var inferenceGFLOPS: Double
        public var latencyBatch1Milliseconds: Double
        public var latencyBatch1P90Milliseconds: Double
        public var latencyBatch1P99Milliseconds: Double
        public var peakRSSMegabytes: Double
        public var blasKernel: String
        /// The engine's own vector kernels: "avx512" or "portable" (VectorKernels).
        public var vectorKernels: String
        public var blasThreads: Int
        public var engineThreads: Int
        public var batchSize: Int
        public var inferenceBatchSize: Int
        public var trainMFLOPPerImage: Double
        public var peakGFLOPS: Double
        /// Cores' worth of CPU other processes used while the training steps ran (0 = quiet machine).
        public var otherCores: Double

        enum CodingKeys: String, CodingKey {
            case architecture, width
            case inputSize = "input_size"
            case trainImagesPerSecond = "train_images_per_second"
            case trainMillisecondsPerStep = "train_ms_per_step"
            case trainCPUMillisecondsPerStep = "train_cpu_ms_per_step"
            case trainGFLOPS = "train_gflops"
            case trainPeakPercent = "train_peak_percent"
            case inferenceImagesPerSecond = "inference_images_per_second"
            case inferenceGFLOPS = "inference_gflops"
            case latencyBatch1Milliseconds = "latency_batch1_ms"
            case latencyBatch1P90Milliseconds = "latency_batch1_p90_ms"
            case latencyBatch1P99Milliseconds = "latency_batch1_p99_ms"
            case peakRSSMegabytes = "peak_rss_mb"
            case blasKernel = "blas_kernel"
            case vectorKernels = "vector_kernels"
            case blasThreads = "blas_threads"
            case engineThreads = "engine_threads"
            case batchSize = "batch_size"
            case inferenceBatchSize = "inference_batch_size"
            case trainMFLOPPerImage = "train_mflop_per_image"
            case peakGFLOPS = "peak_gflops"
            case otherCores = "other_cores"
        }

        /// A few human-readable lines.
        public var summary: String {
            func f(_ value: Double, _ digits: Int = 1) -> String { String(format: "%.\(digits)f", value) }
            return """
                train      batch \(batchSize): \(f(trainImagesPerSecond)) img/s, \
                \(f(trainMillisecondsPerStep, 2)) ms/step \
                (\(f(trainCPUMillisecondsPerStep, 1)) ms CPU), \
                \(f(trainGFLOPS)) GFLOP/s counted as direct convolution \
                (\(f(trainPeakPercent))% of \(f(peakGFLOPS, 0)) peak; Winograd's 3x3 layers do fewer)
                inference  batch \(inferenceBatchSize): \(f(inferenceImagesPerSecond)) img/s, \
                \(f(inferenceGFLOPS)) GFLOP/s
                latency    batch 1: median \(f(latencyBatch1Milliseconds, 3)) ms, \
                p90 \(f(latencyBatch1P90Milliseconds, 3)) ms, p99 \(f(latencyBatch1P99Milliseconds, 3)) ms
                memory     peak RSS \(f(peakRSSMegabytes)) MB
                machine    BLAS \(blasKernel) kernel, \(vectorKernels) engine kernels, \(blasThreads) BLAS thread(s), \(engineThreads) engine workers; \
                other processes used \(f(otherCores, 2)) cores
                """
        }
    }

    /// Runs the benchmark.
    public static func run(_ configuration: Configuration = Configuration()) throws -> Result {
        let classes = (0..<configuration.classes).map { "class\($0)" }
        let definition = try ModelDefinition.architecture(named: configuration.architecture).classifier(
            classLabels: classes, inputSize: configuration.inputSize, width: configuration.width)
        var generator = SplitMix64(seed: configuration.seed)
        let channels = definition.input.channels
        func images(_ count: Int) -> Tensor {
            Tensor(
                randomNormal: [count, channels, configuration.inputSize, configuration.inputSize], standardDeviation: 1,
                using: &generator)
        }
        let batch = images(configuration.batchSize)
        let labels = (0..<configuration.batchSize).map { _ in Int(generator.next() % UInt64(configuration.classes)) }
        var trainer = Trainer(
            network: try Network(definition: definition, seed: configuration.seed),
            optimizer: SGD(momentum: 0.9, weightDecay: 5e-4), learningRate: 0.01)

        for _ in 0..<min(configuration.warmupSteps, configuration.steps) {
            try trainer.trainStep(images: batch, labels: labels)
        }
        let contention = Contention()
        let cpuStart = Contention.ownSeconds()
        var stepTimes: [Double] = []
        for _ in 0..<configuration.steps {
            let start = DispatchTime.now().uptimeNanoseconds
            try trainer.trainStep(images: batch, labels: labels)
            stepTimes.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
        }
        let otherCores = contention.otherCores()
        let cpuPerStep = (Contention.ownSeconds() - cpuStart) / Double(configuration.steps)
        let stepTime = median(stepTimes)

        var network = trainer.network
        let inferenceBatch = images(configuration.inferenceBatchSize)
        _ = network.forward(inferenceBatch, mode: .inference)
        var inferenceTimes: [Double] = []
        for _ in 0..<max(1, configuration.steps / 2) {
            let start = DispatchTime.now().uptimeNanoseconds
            _ = network.forward(inferenceBatch, mode: .inference)
            inferenceTimes.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
        }
        let single = images(1)
        for _ in 0..<min(20, configuration.steps) { _ = network.forward(single, mode: .inference) }
        var latencies: [Double] = []
        let latencyStart = DispatchTime.now().uptimeNanoseconds
        repeat {
            let start = DispatchTime.now().uptimeNanoseconds
            _ = network.forward(single, mode: .inference)
            latencies.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
        } while Double(DispatchTime.now().uptimeNanoseconds - latencyStart) / 1e9 < configuration.latencySeconds
        latencies.sort()

        let flops = try FLOPCount(definition: definition)
        let peak = configuration.peakGFLOPS ?? theoreticalPeakGFLOPS()
        let trainImagesPerSecond = Double(configuration.batchSize) / stepTime
        let inferenceImagesPerSecond = Double(configuration.inferenceBatchSize) / median(inferenceTimes)
        let trainGFLOPS = trainImagesPerSecond * flops.trainingPerImage / 1e9
        return Result(
            architecture: configuration.architecture, width: configuration.width, inputSize: configuration.inputSize,
            trainImagesPerSecond: trainImagesPerSecond,
            trainMillisecondsPerStep: stepTime * 1e3,
            trainCPUMillisecondsPerStep: cpuPerStep * 1e3, trainGFLOPS: trainGFLOPS,
            trainPeakPercent: peak > 0 ? 100 * trainGFLOPS / peak : 0,
            inferenceImagesPerSecond: inferenceImagesPerSecond,
            inferenceGFLOPS: inferenceImagesPerSecond * flops.forwardPerImage / 1e9,
            latencyBatch1Milliseconds: median(latencies) * 1e3,
            latencyBatch1P90Milliseconds: percentile(latencies, 0.9) * 1e3,
            latencyBatch1P99Milliseconds: percentile(latencies, 0.99) * 1e3,
            peakRSSMegabytes: peakResidentMegabytes(), blasKernel: BLASRuntime.kernel,
            vectorKernels: VectorKernels.name,
            blasThreads: BLASRuntime.threadCount, engineThreads: Parallel.workerCount,
            batchSize: configuration.batchSize,
            inferenceBatchSize: configuration.inferenceBatchSize, trainMFLOPPerImage: flops.trainingPerImage / 1e6,
            peakGFLOPS: peak, otherCores: otherCores)
    }

    /// The value `share` of the way up `sorted` (ascending, not empty): the benchmarks' p90 and p99.
    static func percentile(_ sorted: [Double], _ share: Double) -> Double {
        sorted[min(sorted.count - 1, Int(Double(sorted.count) * share))]
    }

    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return .nan }
        return sorted.count % 2 == 1
            ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
    }

    /// Cores × FMA flops per cycle from the CPU flags (AVX-512: 64, AVX2 + FMA: 32, else 8) × the
    /// "cpu MHz" of /proc/cpuinfo. A nominal figure: turbo and AVX clocks differ.
    public static func theoreticalPeakGFLOPS() -> Double {
        let flags = BLASRuntime.cpuFlags()
        let perCycle: Double =
            flags.contains("avx512f") ? 64 : (flags.contains("avx2") && flags.contains("fma") ? 32 : 8)
        guard let text = try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8),
            let line = text.split(separator: "\n").first(where: { $0.hasPrefix("cpu MHz") }),
            let megahertz = Double(line.split(separator: ":").last?.trimmingCharacters(in: .whitespaces) ?? "")
        else { return 0 }
        return Double(ProcessInfo.processInfo.activeProcessorCount) * perCycle * megahertz / 1e3
    }

    /// Peak resident set size of this process so far, in MB (getrusage ru_maxrss is in KiB on Linux).
    public static func peakResidentMegabytes() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_maxrss) / 1024
    }
}

/// Multiply-add work of a definition, 2 flops per multiply-add, as each layer kind counts it
/// (`LayerKind.forwardFLOPs`: conv, a grouped one doing 1/groups of the work of an ungrouped one,
/// and linear layers; adds, norms and pools are left out).
///
/// Backward is dWeight for every layer plus dInput for every layer but a leading conv (nobody needs
/// the gradient of the images): 2 × forward - first conv. ref-small at 64×64 with 42 classes gives
/// 31.86 MFLOP forward and 92.04 MFLOP per training image.
public struct FLOPCount: Sendable, Equatable {
    public var forwardPerImage: Double
    public var trainingPerImage: Double

    /// Throws when the definition does not check (`ModelDefinition.layerOutputShapes`).
    public init(definition: ModelDefinition) throws(ModelDefinitionError) {
        let outputs = try definition.layerOutputShapes()
        let inputs =
            [[definition.input.channels, definition.input.networkHeight, definition.input.networkWidth]] + outputs
        let perLayer = definition.layers.indices.map {
            definition.layers[$0].layerKind.forwardFLOPs(inputShape: inputs[$0], outputShape: outputs[$0])
        }
        let first = definition.layers.first?.kind == .conv2D ? perLayer[0] : 0
        forwardPerImage = perLayer.reduce(0, +)
        trainingPerImage = 3 * forwardPerImage - first
    }
}

/// CPU time other processes used while this one measured, from /proc/stat minus our own rusage.
struct Contention {
    private let start = DispatchTime.now().uptimeNanoseconds
    private let busyStart = Contention.machineBusySeconds()
    private let ownStart = Contention.ownSeconds()

    /// Cores' worth of CPU used by others since `init` (0 on a quiet machine, ~1 with one busy core).
    func otherCores() -> Double {
        let wall = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        let others = (Self.machineBusySeconds() - busyStart) - (Self.ownSeconds() - ownStart)
        return wall > 0 ? max(0, others) / wall : 0
    }

    static func machineBusySeconds() -> Double {
        guard let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
            let line = text.split(separator: "\n").first
        else { return 0 }
        let values = line.split(separator: " ").dropFirst().compactMap { Double($0) }
        guard values.count >= 8 else { return 0 }
        let busy = values[0..<8].reduce(0, +) - values[3] - values[4]
        return busy / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    static func ownSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }
}

/// A process that keeps one core busy, to measure under a noisy neighbour.
///
/// A shell loop that spins while this process lives, so it ends by itself even if we are killed.
public final class BusyNeighbour {
    private let process = Process()

    /// Starts the neighbour; throws when /bin/sh cannot run.
    public init() throws {
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "while kill -0 \(getpid()) 2>/dev/null; do :; done"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
    }

    /// Stops the neighbour (also done on deinit).
    public func stop() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
    }

    deinit { stop() }
}
