/// Mean over the spatial positions of each channel: [N, C, H, W] → [N, C].
///
/// In ref-small its output, batch-normalised, is the 128-d face embedding. (ONNX's GlobalAveragePool
/// keeps [N, C, 1, 1]; the exporters add the flatten.)
public struct GlobalAveragePool: Layer {
    private var inputShape: [Int] = []

    public init() {}

    public var specification: LayerSpecification { .globalAveragePool }

    public mutating func forward(_ input: Tensor, mode: Mode) -> Tensor {
        precondition(input.shape.count == 4, "GlobalAveragePool expects [N, C, H, W], got \(input.shape)")
        inputShape = input.shape
        let pixels = input.shape[2] * input.shape[3]
        return input.scalars.withUnsafeBufferPointer { x in
            Tensor(shape: outputShape(for: input.shape)) { y in
                for plane in 0..<(input.shape[0] * input.shape[1]) {
                    y[plane] = sum(x.baseAddress! + plane * pixels, count: pixels) / Float(pixels)
                }
            }
        }
    }

    /// Each position receives dy / (H·W).
    public mutating func backward(_ outputGradient: Tensor) -> Tensor {
        let pixels = inputShape[2] * inputShape[3]
        return Tensor(shape: inputShape) { dx in
            for plane in 0..<outputGradient.count {
                (dx + plane * pixels).update(repeating: outputGradient.scalars[plane] / Float(pixels), count: pixels)
            }
        }
    }
}

// MARK: - The kind

extension GlobalAveragePool {
    /// `globalAveragePool` in the manifest: ONNX GlobalAveragePool, Core ML global AVERAGE pooling;
    /// both keep [C, 1, 1].
    package struct Kind: LayerKind {
        package var name: LayerKindName { .globalAveragePool }
        package func check(_ input: LayerInput) throws(LayerProblem) { _ = try input.featureMap() }
        package func outputShape(for inputShape: [Int]) -> [Int] { [inputShape[0]] }
        package var summary: String { "GlobalAveragePool" }
        package func makeLayer(using generator: inout SplitMix64) -> any Layer { GlobalAveragePool() }
    }
}
