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
    struct Kind: LayerKind {
        var name: String { "globalavgpool" }
        func check(_ input: LayerInput) throws(LayerProblem) { _ = try input.featureMap() }
        func outputShape(for inputShape: [Int]) -> [Int] { [inputShape[0]] }
        var summary: String { "GlobalAveragePool" }
        func makeLayer(using generator: inout SplitMix64) -> any Layer { GlobalAveragePool() }

        var exportForm: ExportForm? {
            ExportForm(onnxOperator: "GlobalAveragePool", coreMLLayer: "pooling", coreMLField: 120)
        }

        /// Kernel and stride are ignored with globalPooling; zeros are what coremltools writes.
        func lowered(_ input: LoweringInput) -> ExportOperation {
            ExportOperation(form: exportForm!) { pool in
                pool.writeUnsigned(1, 1)  // PoolingType AVERAGE
                pool.writePackedUnsigned(10, [0, 0])
                pool.writePackedUnsigned(20, [0, 0])
                pool.writeMessage(30) { ExportOperation.writeValidPadding(0, to: &$0) }
                pool.writeBool(50, true)
                pool.writeBool(60, true)
            }
        }
    }
}
