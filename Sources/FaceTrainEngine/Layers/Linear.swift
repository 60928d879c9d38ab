/// Fully connected layer: y = x·Wᵀ + b.
///
/// Shapes: input [N, in] (or [N, …] with in values per sample, flattened); weight [out, in]
/// (the ONNX Gemm transB=1 and Core ML inner-product layout); bias [out]; output [N, out].
public struct Linear: WeightAndBiasLayer {
    public let inputFeatures: Int
    public let outputFeatures: Int
    public var weight: Parameter
    public var bias: Parameter
    private var input = Tensor(zeros: [0])

    /// He-normal weights (std √(2 / in)) and zero bias.
    public init(inputFeatures: Int, outputFeatures: Int, using generator: inout SplitMix64) {
        self.inputFeatures = inputFeatures
        self.outputFeatures = outputFeatures
        weight = Parameter(
            name: "weight",
            value: Tensor(
                randomNormal: [outputFeatures, inputFeatures],
                standardDeviation: (2 / Float(inputFeatures)).squareRoot(),
                using: &generator))
        bias = Parameter(name: "bias", value: Tensor(zeros: [outputFeatures]))
    }

    public var specification: LayerSpecification {
        .linear(inputFeatures: inputFeatures, outputFeatures: outputFeatures)
    }
    public mutating func releaseCaches() { input = Tensor(zeros: [0]) }

    public mutating func forward(_ input: Tensor, mode: Mode) -> Tensor {
        let batch = input.shape[0]
        precondition(
            input.count == batch * inputFeatures,
            "Linear expects \(inputFeatures) features per sample, got \(input.shape)")
        if mode == .training { self.input = input }
        let (n, k) = (outputFeatures, inputFeatures)
        return input.scalars.withUnsafeBufferPointer { x in
            weight.value.scalars.withUnsafeBufferPointer { w in
                bias.value.scalars.withUnsafeBufferPointer { b in
                    Tensor(shape: [batch, n]) { y in
                        for row in 0..<batch { (y + row * n).update(from: b.baseAddress!, count: n) }
                        gemm(
                            transposeA: false, transposeB: true, m: batch, n: n, k: k, a: x.baseAddress!,
                            b: w.baseAddress!, beta: 1, c: y)
                    }
                }
            }
        }
    }

    /// dW += dyᵀ·x, db += Σ_N dy; returns dx = dy·W (dx keeps the input's shape).
    public mutating func backward(_ outputGradient: Tensor) -> Tensor {
        let batch = input.shape[0]
        let (n, k) = (outputFeatures, inputFeatures)
        return input.scalars.withUnsafeBufferPointer { x in
            weight.value.scalars.withUnsafeBufferPointer { w in
                outputGradient.scalars.withUnsafeBufferPointer { dy in
                    weight.gradient.scalars.withUnsafeMutableBufferPointer { dw in
                        gemm(
                            transposeA: true, transposeB: false, m: n, n: k, k: batch, a: dy.baseAddress!,
                            b: x.baseAddress!, beta: 1, c: dw.baseAddress!)
                    }
                    for feature in 0..<n {
                        var total: Float = 0
                        for row in 0..<batch { total += dy[row * n + feature] }
                        bias.gradient.scalars[feature] += total
                    }
                    return Tensor(shape: input.shape) { dx in
                        gemm(
                            transposeA: false, transposeB: false, m: batch, n: k, k: n, a: dy.baseAddress!,
                            b: w.baseAddress!, c: dx)
                    }
                }
            }
        }
    }
}

// MARK: - The kind

extension Linear {
    /// `linear` in the manifest: ONNX Gemm (transB 1), Core ML innerProduct; exports flatten a
    /// feature map before it.
    package struct Kind: LayerKind {
        package let inputFeatures: Int
        package let outputFeatures: Int

        package var name: LayerKindName { .linear }
        package var parameterShapes: [(name: String, shape: [Int])] {
            [("weight", [outputFeatures, inputFeatures]), ("bias", [outputFeatures])]
        }
        package var flattensInput: Bool { true }
        package var normalizationScale: NormalizationScaleRule { .absorbs }

        package func check(_ input: LayerInput) throws(LayerProblem) {
            let features = input.shape.reduce(1, *)
            guard inputFeatures == features else {
                throw LayerProblem("it expects \(inputFeatures) features but gets \(features)")
            }
            guard outputFeatures > 0 else { throw LayerProblem("it has \(outputFeatures) outputs") }
        }

        package func outputShape(for inputShape: [Int]) -> [Int] { [outputFeatures] }

        package func forwardFLOPs(inputShape: [Int], outputShape: [Int]) -> Double {
            2.0 * Double(inputFeatures * outputFeatures)
        }

        package var summary: String { "Linear (fully connected) \(inputFeatures)->\(outputFeatures)" }

        package var weightsFileAttributes: [WeightsFileAttribute] {
            [.integers("features_in_out", [inputFeatures, outputFeatures], scalar: false)]
        }

        package func makeLayer(using generator: inout SplitMix64) -> any Layer {
            Linear(inputFeatures: inputFeatures, outputFeatures: outputFeatures, using: &generator)
        }
    }
}
