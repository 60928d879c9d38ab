/// Batch normalisation over the channels of NCHW (or NC) input.
///
/// Training: y = γ·(x - μ_B)/√(σ²_B + ε) + β with the batch's biased mean and variance over
/// N·H·W, and running = (1 - momentum)·running + momentum·batch (unbiased variance, as PyTorch).
/// Inference uses the running statistics. Shapes: input and output [N, C, H, W], or [N, C] (as
/// PyTorch's BatchNorm1d, for the pooled embedding); γ, β, running mean and variance [C].
public struct BatchNorm2D: Layer {
    public let channels: Int
    public let epsilon: Float
    public let momentum: Float
    /// γ.
    public var weight: Parameter
    /// β.
    public var bias: Parameter
    public var runningMean: Parameter
    public var runningVariance: Parameter
    private var input = Tensor(zeros: [0])
    private var mean: [Float] = []
    private var inverseStandardDeviation: [Float] = []

    /// γ = 1, β = 0, running mean 0 and running variance 1.
    public init(channels: Int, epsilon: Float = 1e-5, momentum: Float = 0.1) {
        self.channels = channels
        self.epsilon = epsilon
        self.momentum = momentum
        weight = Parameter(name: "weight", value: Tensor(repeating: 1, shape: [channels]))
        bias = Parameter(name: "bias", value: Tensor(zeros: [channels]))
        runningMean = Parameter(name: "running_mean", value: Tensor(zeros: [channels]), isTrainable: false)
        runningVariance = Parameter(
            name: "running_var", value: Tensor(repeating: 1, shape: [channels]), isTrainable: false)
    }

    public var specification: LayerSpecification {
        .batchNorm2D(channels: channels, epsilon: epsilon, momentum: momentum)
    }
    public var parameters: [Parameter] { [weight, bias, runningMean, runningVariance] }

    public mutating func updateParameters(_ update: (inout Parameter) -> Void) {
        update(&weight)
        update(&bias)
        update(&runningMean)
        update(&runningVariance)
    }

    public mutating func releaseCaches() { input = Tensor(zeros: [0]) }

    /// Folds the statistics into y = x·scale + shift per channel.
    static func affine(gamma: [Float], beta: [Float], mean: [Float], inverseStandardDeviation: [Float]) -> (
        scale: [Float], shift: [Float]
    ) {
        let scale = (0..<gamma.count).map { gamma[$0] * inverseStandardDeviation[$0] }
        let shift = (0..<gamma.count).map { beta[$0] - mean[$0] * scale[$0] }
        return (scale, shift)
    }

    /// Blends batch statistics into the running ones; `count` values per channel went into them.
    mutating func updateRunningStatistics(mean batchMean: [Float], variance: [Float], count: Int) {
        let unbiased = Float(count) / Float(max(count - 1, 1))
        for channel in 0..<channels {
            runningMean.value.scalars[channel] += momentum * (batchMean[channel] - runningMean.value.scalars[channel])
            runningVariance.value.scalars[channel] +=
                momentum * (variance[channel] * unbiased - runningVariance.value.scalars[channel])
        }
    }

    public mutating func forward(_ input: Tensor, mode: Mode) -> Tensor {
        precondition(
            (input.shape.count == 4 || input.shape.count == 2) && input.shape[1] == channels,
            "BatchNorm2D expects [N, \(channels), H, W] or [N, \(channels)], got \(input.shape)")
        let (batch, pixels) = (input.shape[0], input.count / max(input.shape[0] * channels, 1))
        var statisticsMean = runningMean.value.scalars
        var variance = runningVariance.value.scalars
        if mode == .training {
            // One value per channel has no variance: the output would be β and the running variance 0.
            precondition(
                batch * pixels > 1, "BatchNorm2D needs more than one value per channel to train, got \(input.shape)")
            self.input = input
            // Two passes per channel in double: mean, then squared deviations from it.
            var means = [Double](repeating: 0, count: channels)
            var squares = means
            input.scalars.withUnsafeBufferPointer { x in
                means.withUnsafeMutableBufferPointer { meanOut in
                    squares.withUnsafeMutableBufferPointer { squareOut in
                        Parallel.forEach(channels) { channel in
                            var total: Double = 0
                            for image in 0..<batch {
                                total += Double(
                                    sum(x.baseAddress! + (image * channels + channel) * pixels, count: pixels))
                            }
                            let mean = total / Double(batch * pixels)
                            var deviations: Double = 0
                            for image in 0..<batch {
                                deviations += Double(
                                    sumOfSquaredDeviations(
                                        x.baseAddress! + (image * channels + channel) * pixels, count: pixels,
                                        center: Float(mean)))
                            }
                            meanOut[channel] = mean
                            squareOut[channel] = deviations / Double(batch * pixels)
                        }
                    }
                }
            }
            statisticsMean = means.map { Float($0) }
            variance = squares.map { Float($0) }
            updateRunningStatistics(mean: statisticsMean, variance: variance, count: batch * pixels)
            mean = statisticsMean
        }
        inverseStandardDeviation = variance.map { 1 / ($0 + epsilon).squareRoot() }
        let (scale, shift) = Self.affine(
            gamma: weight.value.scalars, beta: bias.value.scalars, mean: statisticsMean,
            inverseStandardDeviation: inverseStandardDeviation)
        return input.scalars.withUnsafeBufferPointer { x in
            Tensor(shape: input.shape) { y in
                Parallel.forEach(batch) { image in
                    for channel in 0..<channels {
                        let offset = (image * channels + channel) * pixels
                        let (s, t) = (scale[channel], shift[channel])
                        for index in offset..<(offset + pixels) { y[index] = x[index] * s + t }
                    }
                }
            }
        }
    }

    public mutating func backward(_ outputGradient: Tensor) -> Tensor {
        let (batch, pixels) = (input.shape[0], input.count / max(input.shape[0] * channels, 1))
        var sumGradient = [Double](repeating: 0, count: channels)
        var sumCentered = sumGradient
        let mean = self.mean
        input.scalars.withUnsafeBufferPointer { x in
            outputGradient.scalars.withUnsafeBufferPointer { dy in
                sumGradient.withUnsafeMutableBufferPointer { g in
                    sumCentered.withUnsafeMutableBufferPointer { gx in
                        Parallel.forEach(channels) { channel in
                            var (totalG, totalGX): (Double, Double) = (0, 0)
                            for image in 0..<batch {
                                let offset = (image * channels + channel) * pixels
                                var (partG, partGX): (Float, Float) = (0, 0)
                                for index in offset..<(offset + pixels) {
                                    partG += dy[index]
                                    partGX += dy[index] * (x[index] - mean[channel])
                                }
                                totalG += Double(partG)
                                totalGX += Double(partGX)
                            }
                            g[channel] = totalG
                            gx[channel] = totalGX
                        }
                    }
                }
            }
        }
        let coefficients = weight.value.scalars.withUnsafeBufferPointer { gamma in
            BatchNormGradientCoefficients(
                gamma: gamma.baseAddress!, mean: mean, inverseStandardDeviation: inverseStandardDeviation,
                sumGradient: sumGradient, sumGradientTimesCenteredX: sumCentered, valuesPerChannel: batch * pixels)
        }
        for channel in 0..<channels {
            weight.gradient.scalars[channel] += Float(sumCentered[channel]) * inverseStandardDeviation[channel]
            bias.gradient.scalars[channel] += Float(sumGradient[channel])
        }
        return input.scalars.withUnsafeBufferPointer { x in
            outputGradient.scalars.withUnsafeBufferPointer { dy in
                Tensor(shape: input.shape) { dx in
                    Parallel.forEach(batch) { image in
                        for channel in 0..<channels {
                            let offset = (image * channels + channel) * pixels
                            let (a, b, s) = (
                                coefficients.a[channel], coefficients.b[channel], coefficients.scale[channel]
                            )
                            for index in offset..<(offset + pixels) { dx[index] = a * x[index] + b + s * dy[index] }
                        }
                    }
                }
            }
        }
    }
}

// MARK: - The kind

extension BatchNorm2D {
    /// `batchNorm2D` in the manifest: ONNX BatchNormalization, Core ML batchnorm (stored statistics).
    package struct Kind: LayerKind {
        package let channels: Int
        package let epsilon: Float
        package let momentum: Float

        package var name: LayerKindName { .batchNorm2D }

        package var parameterShapes: [(name: String, shape: [Int])] {
            [("weight", [channels]), ("bias", [channels]), ("running_mean", [channels]), ("running_var", [channels])]
        }

        package func check(_ input: LayerInput) throws(LayerProblem) {
            // After a linear layer the exported data is [N, F], which Core ML's batchnorm does not take.
            let isVector = input.shape.count == 1 && !input.isFlattened
            if !isVector { _ = try input.featureMap() }
            guard channels == input.shape[0] else {
                throw LayerProblem("it normalises \(channels) channels but gets \(input.shape[0])")
            }
            // Core ML reads an epsilon of 0 as "unset" (1e-5), and 0 divides by zero on dead channels anyway.
            guard epsilon > 0, epsilon.isFinite else { throw LayerProblem("epsilon \(epsilon) must be positive") }
            guard (0...1).contains(momentum) else { throw LayerProblem("momentum \(momentum) is not in 0...1") }
        }

        package func outputShape(for inputShape: [Int]) -> [Int] { inputShape }

        package var summary: String { "BatchNorm2D \(channels) channels, epsilon \(epsilon), momentum \(momentum)" }

        package var weightsFileAttributes: [WeightsFileAttribute] {
            [.floats("epsilon", [epsilon], scalar: true), .floats("momentum", [momentum], scalar: true)]
        }

        package func makeLayer(using generator: inout SplitMix64) -> any Layer {
            BatchNorm2D(channels: channels, epsilon: epsilon, momentum: momentum)
        }
    }
}
