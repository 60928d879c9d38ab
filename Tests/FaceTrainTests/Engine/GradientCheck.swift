@testable import FaceTrain
@testable import FaceTrainEngine

/// The one finite-difference gradient check used for every layer.
///
/// The probe loss is L = Σ output·probe with a fixed random probe, so dL/dOutput = probe and the
/// analytic gradients come from one `backward(probe)`. Numerical gradients are central differences
/// (L(v + h) - L(v - h)) / 2h with L summed in Double. The layers compute in Float, so each L
/// carries a rounding error near 1e-7·Σ|output·probe|; with h = 1e-2 that is ~1e-4 relative, and the
/// O(h²) truncation error is smaller still for these smooth (or piecewise-linear) layers. Errors are
/// compared as ‖analytic - numeric‖ / max(‖analytic‖, ‖numeric‖, 1e-3) over each whole tensor, so a
/// tolerance of 1e-2 is two orders above the noise and far below what a wrong formula gives (a halved
/// bias gradient scores 0.33; a dropped batch-mean term in batch norm scores > 0.1).
struct GradientCheck {
    /// Relative error for the input gradient.
    var input: Double
    /// Relative error per parameter name (trainable parameters only).
    var parameters: [String: Double]

    /// Conv biases right before a batch norm (training mode), by key: the norm subtracts them
    /// again, so their gradient is exactly zero and a relative error would only compare Float noise;
    /// instead the largest magnitudes of the analytic values (rounding only) and of the numeric ones
    /// (the loss's rounding divided by the step).
    var cancelled: [String: (analytic: Double, numeric: Double)] = [:]

    /// The largest of all errors.
    var worst: Double { ([input] + Array(parameters.values)).max() ?? 0 }

    init<L: Layer>(_ layer: L, input: Tensor, mode: Mode = .training, step: Float = 1e-2, seed: UInt64 = 7) {
        var generator = SplitMix64(seed: seed)
        var probing = layer
        let output = probing.forward(input, mode: mode)
        let probe = Tensor(randomNormal: output.shape, standardDeviation: 1, using: &generator)
        let analyticInput = probing.backward(probe)

        func loss(_ layer: L, _ x: Tensor) -> Double {
            var copy = layer
            let y = copy.forward(x, mode: mode)
            return zip(y.scalars, probe.scalars).reduce(0) { $0 + Double($1.0) * Double($1.1) }
        }

        var numericInput = [Double](repeating: 0, count: input.count)
        for index in 0..<input.count {
            var plus = input
            var minus = input
            plus.scalars[index] += step
            minus.scalars[index] -= step
            numericInput[index] = (loss(layer, plus) - loss(layer, minus)) / Double(2 * step)
        }
        self.input = Self.relativeError(analyticInput.scalars, numericInput)

        var errors: [String: Double] = [:]
        for (position, parameter) in probing.parameters.enumerated() where parameter.isTrainable {
            var numeric = [Double](repeating: 0, count: parameter.value.count)
            for index in 0..<parameter.value.count {
                func shifted(_ delta: Float) -> L {
                    var copy = layer
                    var current = 0
                    copy.updateParameters { p in
                        if current == position { p.value.scalars[index] += delta }
                        current += 1
                    }
                    return copy
                }
                numeric[index] = (loss(shifted(step), input) - loss(shifted(-step), input)) / Double(2 * step)
            }
            errors[parameter.name] = Self.relativeError(parameter.gradient.scalars, numeric)
        }
        parameters = errors
    }

    /// The same check for a whole network (its trainable parameters; `input` stays 0, since
    /// `Network.backward` does not compute the image gradient), probe loss Σ logits·probe. The step
    /// is smaller than for single layers: a network has many ReLU kinks a large step could cross.
    init(_ network: Network, input: Tensor, mode: Mode = .training, step: Float = 1e-3, seed: UInt64 = 7) {
        var generator = SplitMix64(seed: seed)
        var probing = network
        let output = probing.forward(input, mode: mode)
        let probe = Tensor(randomNormal: output.shape, standardDeviation: 1, using: &generator)
        probing.zeroGradients()
        probing.backward(probe)

        func loss(_ network: Network) -> Double {
            var copy = network
            let y = copy.forward(input, mode: mode)
            return zip(y.scalars, probe.scalars).reduce(0) { $0 + Double($1.0) * Double($1.1) }
        }
        let layers = network.definition.layers
        var errors: [String: Double] = [:]
        var cancelled: [String: (analytic: Double, numeric: Double)] = [:]
        var analytic: [(key: String, gradient: [Float], count: Int)] = []
        probing.updateParameters { key, parameter in
            if parameter.isTrainable { analytic.append((key, parameter.gradient.scalars, parameter.value.count)) }
        }
        for (key, gradient, count) in analytic {
            var numeric = [Double](repeating: 0, count: count)
            for index in 0..<count {
                func shifted(_ delta: Float) -> Network {
                    var copy = network
                    copy.updateParameters { name, parameter in
                        if name == key { parameter.value.scalars[index] += delta }
                    }
                    return copy
                }
                numeric[index] = (loss(shifted(step)) - loss(shifted(-step))) / Double(2 * step)
            }
            let layer = Int(key.prefix { $0 != "." })!
            if key.hasSuffix(".conv2d.bias"), mode == .training, layer + 1 < layers.count,
                case .batchNorm2D = layers[layer + 1]
            {
                cancelled[key] = (gradient.map { abs(Double($0)) }.max() ?? 0, numeric.map(abs).max() ?? 0)
            } else {
                errors[key] = Self.relativeError(gradient, numeric)
            }
        }
        self.input = 0
        self.parameters = errors
        self.cancelled = cancelled
    }

    static func relativeError(_ analytic: [Float], _ numeric: [Double]) -> Double {
        var difference: Double = 0
        var a: Double = 0
        var n: Double = 0
        for (x, y) in zip(analytic, numeric) {
            difference += (Double(x) - y) * (Double(x) - y)
            a += Double(x) * Double(x)
            n += y * y
        }
        return difference.squareRoot() / max(a.squareRoot(), n.squareRoot(), 1e-3)
    }
}

/// Random test tensors.
enum TestData {
    static func normal(_ shape: [Int], seed: UInt64, standardDeviation: Float = 1) -> Tensor {
        var generator = SplitMix64(seed: seed)
        return Tensor(randomNormal: shape, standardDeviation: standardDeviation, using: &generator)
    }

    /// Values that stay at least `gap` apart from each other and from zero, shuffled: no max-pool
    /// tie or ReLU kink lies within a finite-difference step.
    static func spaced(_ shape: [Int], seed: UInt64, gap: Float = 0.05) -> Tensor {
        var generator = SplitMix64(seed: seed)
        let count = shape.reduce(1, *)
        var values = (0..<count).map { Float($0 - count / 2) * gap + gap / 2 }
        values.shuffle(using: &generator)
        return Tensor(shape: shape, scalars: values)
    }

    /// A tiny ref-small-like definition: every fused block kind and a dropout; with `neck`, the
    /// embedding's batch norm and L2 normalisation before the classifier, as in ref-small.
    static func tinyDefinition(classes: Int = 3, dropout: Float = 0, neck: Bool = false) -> ModelDefinition {
        var layers: [LayerSpecification] = [
            .conv2D(inputChannels: 3, outputChannels: 4, kernelSize: 3, stride: 1, padding: 1),
            .batchNorm2D(channels: 4, epsilon: 1e-5, momentum: 0.1),
            .relu,
            .maxPool2D(size: 2, stride: 2),
            .conv2D(inputChannels: 4, outputChannels: 6, kernelSize: 3, stride: 1, padding: 1),
            .batchNorm2D(channels: 6, epsilon: 1e-5, momentum: 0.1),
            .relu,
            .conv2D(inputChannels: 6, outputChannels: 8, kernelSize: 3, stride: 1, padding: 1),
            .batchNorm2D(channels: 8, epsilon: 1e-5, momentum: 0.1),
            .relu,
            .globalAveragePool,
        ]
        if dropout > 0 { layers.append(.dropout(rate: dropout)) }
        if neck { layers += [.batchNorm2D(channels: 8, epsilon: 1e-5, momentum: 0.1), .l2Normalize(scale: 4)] }
        layers.append(.linear(inputFeatures: 8, outputFeatures: classes))
        return ModelDefinition(
            input: InputSpecification(width: 8, height: 8, channels: 3), layers: layers,
            classLabels: (0..<classes).map(String.init))
    }
}
