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
        if mode == .inference && size == 2 && stride == 2 { return Self.pool2x2(input, shape: shape) }
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

    /// Inference's 2x2, stride-2 pool: no winners to record, so each output is the maximum of its
    /// window, the first of equal maxima as in training (the same value either way).
    private static func pool2x2(_ input: Tensor, shape: [Int]) -> Tensor {
        let (planes, h, w, oh, ow) = (shape[0] * shape[1], input.shape[2], input.shape[3], shape[2], shape[3])
        return input.scalars.withUnsafeBufferPointer { x in
            Tensor(shape: shape) { y in
                Parallel.forEach(planes) { plane in
                    for oy in 0..<oh {
                        let top = x.baseAddress! + plane * h * w + 2 * oy * w
                        let bottom = top + w
                        let row = y + (plane * oh + oy) * ow
                        for ox in 0..<ow {
                            var best = top[2 * ox]
                            if top[2 * ox + 1] > best { best = top[2 * ox + 1] }
                            if bottom[2 * ox] > best { best = bottom[2 * ox] }
                            if bottom[2 * ox + 1] > best { best = bottom[2 * ox + 1] }
                            row[ox] = best
                        }
                    }
                }
            }
        }
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
    package struct Kind: LayerKind {
        package let size: Int
        package let stride: Int

        package var name: LayerKindName { .maxPool2D }
        package var spatialStride: Int { stride }

        package func check(_ input: LayerInput) throws(LayerProblem) {
            let (_, height, width) = try input.featureMap()
            guard size > 0, stride > 0, size <= height, size <= width else {
                throw LayerProblem("a \(size)x\(size) window does not fit the \(height)x\(width) input")
            }
        }

        /// [C, (H - size)/stride + 1, (W - size)/stride + 1].
        package func outputShape(for inputShape: [Int]) -> [Int] {
            [inputShape[0], (inputShape[1] - size) / stride + 1, (inputShape[2] - size) / stride + 1]
        }

        package var summary: String { "MaxPool2D \(size)x\(size), stride \(stride)" }

        package var weightsFileAttributes: [WeightsFileAttribute] {
            [
                .integers("kernel_size", [size, size], scalar: false),
                .integers("stride", [stride, stride], scalar: false),
            ]
        }

        package func makeLayer(using generator: inout SplitMix64) -> any Layer { MaxPool2D(size: size, stride: stride) }
    }
}
