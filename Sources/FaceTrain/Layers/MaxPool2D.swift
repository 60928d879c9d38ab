/// Max pooling over square windows of NCHW input.
///
/// Shapes: input [N, C, H, W]; output [N, C, (H - size)/stride + 1, (W - size)/stride + 1].
/// The first of equal maxima wins, and backward routes each output's gradient to it.
public struct MaxPool2D: Layer {
    public let size: Int
    public let stride: Int
    private var inputShape: [Int] = []
    /// Flat input index of the winner of each output.
    private var winners: [Int32] = []

    public init(size: Int = 2, stride: Int = 2) {
        self.size = size
        self.stride = stride
    }

    public var specification: LayerSpecification { .maxPool2D(size: size, stride: stride) }

    public mutating func releaseCaches() { winners = [] }

    public mutating func forward(_ input: Tensor, mode: Mode) -> Tensor {
        precondition(
            input.shape.count == 4 && input.shape[2] >= size && input.shape[3] >= size,
            "MaxPool2D expects [N, C, H, W] with H, W ≥ \(size), got \(input.shape)")
        let shape = outputShape(for: input.shape)
        let (planes, h, w, oh, ow) = (shape[0] * shape[1], input.shape[2], input.shape[3], shape[2], shape[3])
        var winners = [Int32](repeating: 0, count: planes * oh * ow)
        let (size, stride) = (size, stride)
        let output = input.scalars.withUnsafeBufferPointer { x in
            winners.withUnsafeMutableBufferPointer { best in
                Tensor(shape: shape) { y in
                    Parallel.forEach(planes) { plane in
                        for oy in 0..<oh {
                            for ox in 0..<ow {
                                var winner = plane * h * w + oy * stride * w + ox * stride
                                for ky in 0..<size {
                                    for kx in 0..<size {
                                        let index = plane * h * w + (oy * stride + ky) * w + ox * stride + kx
                                        if x[index] > x[winner] { winner = index }
                                    }
                                }
                                let q = (plane * oh + oy) * ow + ox
                                y[q] = x[winner]
                                best[q] = Int32(winner)
                            }
                        }
                    }
                }
            }
        }
        if mode == .training {
            inputShape = input.shape
            self.winners = winners
        }
        return output
    }

    public mutating func backward(_ outputGradient: Tensor) -> Tensor {
        var gradient = Tensor(zeros: inputShape)
        for (q, winner) in winners.enumerated() { gradient.scalars[Int(winner)] += outputGradient.scalars[q] }
        return gradient
    }
}

// MARK: - The kind

extension MaxPool2D {
    /// `maxPool2D` in the manifest: ONNX MaxPool, Core ML pooling MAX (valid padding).
    struct Kind: LayerKind {
        let size: Int
        let stride: Int

        var name: String { "maxpool2d" }

        func check(_ input: LayerInput) throws(LayerProblem) {
            let (_, height, width) = try input.featureMap()
            guard size > 0, stride > 0, size <= height, size <= width else {
                throw LayerProblem("a \(size)x\(size) window does not fit the \(height)x\(width) input")
            }
        }

        /// [C, (H - size)/stride + 1, (W - size)/stride + 1].
        func outputShape(for inputShape: [Int]) -> [Int] {
            [inputShape[0], (inputShape[1] - size) / stride + 1, (inputShape[2] - size) / stride + 1]
        }

        var summary: String { "MaxPool2D \(size)x\(size), stride \(stride)" }

        var weightsFileAttributes: [WeightsFileAttribute] {
            [
                .integers("kernel_size", [size, size], scalar: false),
                .integers("stride", [stride, stride], scalar: false),
            ]
        }

        func makeLayer(using generator: inout SplitMix64) -> any Layer { MaxPool2D(size: size, stride: stride) }

        var exportForm: ExportForm? { ExportForm(onnxOperator: "MaxPool", coreMLLayer: "pooling", coreMLField: 120) }

        func lowered(_ input: LoweringInput) -> ExportOperation {
            let (size, stride) = (size, stride)
            return ExportOperation(
                form: exportForm!,
                onnxAttributes: [.ints("kernel_shape", [size, size]), .ints("strides", [stride, stride])]
            ) { pool in
                pool.writeUnsigned(1, 0)  // PoolingType MAX
                pool.writePackedUnsigned(10, [UInt64(size), UInt64(size)])
                pool.writePackedUnsigned(20, [UInt64(stride), UInt64(stride)])
                pool.writeMessage(30) { ExportOperation.writeValidPadding(0, to: &$0) }
                pool.writeBool(50, true)
            }
        }
    }
}
