/// Rectified linear unit, y = max(0, x); any shape.
public struct ReLU: Layer {
    private var output = Tensor(zeros: [0])

    public init() {}

    public var specification: LayerSpecification { .relu }
    public mutating func releaseCaches() { output = Tensor(zeros: [0]) }

    public mutating func forward(_ input: Tensor, mode: Mode) -> Tensor {
        let result = Tensor(shape: input.shape, scalars: input.scalars.map { max(0, $0) })
        if mode == .training { output = result }
        return result
    }

    /// dx = dy where the output is positive, else 0 (the subgradient at 0 is taken as 0).
    public mutating func backward(_ outputGradient: Tensor) -> Tensor {
        var gradient = outputGradient
        for index in 0..<gradient.count where output.scalars[index] <= 0 { gradient.scalars[index] = 0 }
        return gradient
    }
}

// MARK: - The kind

extension ReLU {
    /// `relu` in the manifest: ONNX Relu, Core ML activation ReLU.
    package struct Kind: LayerKind {
        package var name: LayerKindName { .relu }
        /// max(0, s·x) = s·max(0, x) for s > 0.
        package var normalizationScale: NormalizationScaleRule { .passes }
        package func check(_ input: LayerInput) throws(LayerProblem) {}
        package func outputShape(for inputShape: [Int]) -> [Int] { inputShape }
        package var summary: String { "ReLU" }
        package func makeLayer(using generator: inout SplitMix64) -> any Layer { ReLU() }
    }
}
