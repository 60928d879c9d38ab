import FaceTrain
import FaceTrainEngine
import Foundation

/// Times inference of a trained network as it is (the detector: `facetrain detector bench`) on
/// random photos of one size: throughput at a batch, and batch-1 latency. Not training, and not
/// the work around the network (letterbox, decoding, suppression: `detector eval` times those too).
public enum InferenceBenchmark {
    public struct Result: Sendable, Codable, Equatable {
        /// [batch, channels, height, width] of the throughput run.
        public var input: [Int]
        public var inferenceImagesPerSecond: Double
        public var latencyBatch1Milliseconds: Double
        public var latencyBatch1P99Milliseconds: Double
        public var blasKernel: String
        public var vectorKernels: String
        public var engineThreads: Int

        enum CodingKeys: String, CodingKey {
            case input
            case inferenceImagesPerSecond = "inference_images_per_second"
            case latencyBatch1Milliseconds = "latency_batch1_ms"
            case latencyBatch1P99Milliseconds = "latency_batch1_p99_ms"
            case blasKernel = "blas_kernel"
            case vectorKernels = "vector_kernels"
            case engineThreads = "engine_threads"
        }

        public var summary: String {
            String(
                format: "inference  batch %d of %dx%d: %.1f img/s\nlatency    batch 1: median %.3f ms, p99 %.3f ms\n"
                    + "machine    BLAS %@ kernel, %@ engine kernels, %d engine workers",
                input[0], input[3], input[2], inferenceImagesPerSecond, latencyBatch1Milliseconds,
                latencyBatch1P99Milliseconds, blasKernel, vectorKernels, engineThreads)
        }
    }

    /// `seconds` of batch-1 runs after 10 untimed ones; the batch's median over at least 3 runs and
    /// `seconds`. Pixels are random 0...255 values, scaled as the network's input asks.
    public static func run(
        model: TrainedModel, height: Int, width: Int, batchSize: Int, seconds: Double, seed: UInt64 = 1
    ) throws -> Result {
        var network = try Network(model: model)
        let input = model.definition.input
        var generator = SplitMix64(seed: seed)
        func photos(_ count: Int) -> Tensor {
            let plane = height * width
            let scalars = (0..<(count * input.channels * plane)).map { index in
                Float(generator.next() % 256) * input.scale + input.bias[index / plane % input.channels]
            }
            return Tensor(shape: [count, input.channels, height, width], scalars: scalars)
        }
        func timed(_ batch: Tensor, warmUps: Int, atLeast: Int) -> [Double] {
            for _ in 0..<warmUps { _ = network.forwardOutputs(batch, mode: .inference) }
            var times: [Double] = []
            let started = DispatchTime.now().uptimeNanoseconds
            repeat {
                let start = DispatchTime.now().uptimeNanoseconds
                _ = network.forwardOutputs(batch, mode: .inference)
                times.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
            } while Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9 < seconds || times.count < atLeast
            return times.sorted()
        }
        let batchTimes = timed(photos(batchSize), warmUps: 1, atLeast: 3)
        let latencies = timed(photos(1), warmUps: 10, atLeast: 10)
        return Result(
            input: [batchSize, input.channels, height, width],
            inferenceImagesPerSecond: Double(batchSize) / TrainingBenchmark.median(batchTimes),
            latencyBatch1Milliseconds: TrainingBenchmark.median(latencies) * 1e3,
            latencyBatch1P99Milliseconds: TrainingBenchmark.percentile(latencies, 0.99) * 1e3,
            blasKernel: BLASRuntime.kernel, vectorKernels: VectorKernels.name, engineThreads: Parallel.workerCount)
    }
}
