/// 2-D convolution over NCHW input: im2col + one GEMM per image, images in parallel.
///
/// Shapes: input [N, C, H, W]; weight [F, C, K, K] (the ONNX and Core ML layout); bias [F];
/// output [N, F, oH, oW] with oH = (H + 2·padding - K) / stride + 1, likewise oW.
public struct Conv2D: WeightAndBiasLayer {
    public let inputChannels: Int
    public let outputChannels: Int
    public let kernelSize: Int
    public let stride: Int
    public let padding: Int
    public var weight: Parameter
    public var bias: Parameter
    private var input = Tensor(zeros: [0])
    private var scratch = Buffer<Float>()

    /// A convolution with He-normal weights (std √(2 / (C·K·K))) and zero bias.
    public init(
        inputChannels: Int, outputChannels: Int, kernelSize: Int, stride: Int = 1, padding: Int = 0,
        using generator: inout SplitMix64
    ) {
        self.inputChannels = inputChannels
        self.outputChannels = outputChannels
        self.kernelSize = kernelSize
        self.stride = stride
        self.padding = padding
        let fanIn = Float(inputChannels * kernelSize * kernelSize)
        weight = Parameter(
            name: "weight",
            value: Tensor(
                randomNormal: [outputChannels, inputChannels, kernelSize, kernelSize],
                standardDeviation: (2 / fanIn).squareRoot(), using: &generator))
        bias = Parameter(name: "bias", value: Tensor(zeros: [outputChannels]))
        _ = Parallel.configureOnce
    }

    public var specification: LayerSpecification {
        .conv2D(
            inputChannels: inputChannels, outputChannels: outputChannels, kernelSize: kernelSize, stride: stride,
            padding: padding)
    }

    func geometry(for shape: [Int]) -> ConvolutionGeometry {
        ConvolutionGeometry(
            channels: shape[1], height: shape[2], width: shape[3], kernelSize: kernelSize, stride: stride,
            padding: padding)
    }

    public func outputShape(for inputShape: [Int]) -> [Int] {
        let g = geometry(for: inputShape)
        return [inputShape[0], outputChannels, g.outputHeight, g.outputWidth]
    }

    public mutating func releaseCaches() { input = Tensor(zeros: [0]) }

    public mutating func forward(_ input: Tensor, mode: Mode) -> Tensor {
        precondition(
            input.shape.count == 4 && input.shape[1] == inputChannels,
            "Conv2D expects [N, \(inputChannels), H, W], got \(input.shape)")
        if mode == .training { self.input = input }
        let g = geometry(for: input.shape)
        let (batch, f) = (input.shape[0], outputChannels)
        let chunks = Parallel.ranges(batch, parts: Parallel.chunkCount)
        scratch.resize(chunks.count * g.patchSize * g.outputPixels)
        let columns = scratch.mutablePointer()
        let (inputSize, outputSize) = (g.channels * g.inputPixels, f * g.outputPixels)
        return input.scalars.withUnsafeBufferPointer { x in
            weight.value.scalars.withUnsafeBufferPointer { w in
                bias.value.scalars.withUnsafeBufferPointer { b in
                    Tensor(shape: outputShape(for: input.shape)) { y in
                        Parallel.forEach(chunks.count) { chunk in
                            for image in chunks[chunk] {
                                convolutionForward(
                                    image: x.baseAddress! + image * inputSize, geometry: g, outputChannels: f,
                                    weight: w.baseAddress!, bias: b.baseAddress!,
                                    columns: columns + chunk * g.patchSize * g.outputPixels,
                                    output: y + image * outputSize)
                            }
                        }
                    }
                }
            }
        }
    }

    public mutating func backward(_ outputGradient: Tensor) -> Tensor {
        let g = geometry(for: input.shape)
        let (batch, f) = (input.shape[0], outputChannels)
        let chunks = Parallel.ranges(batch, parts: Parallel.chunkCount)
        let (columnSize, weightSize) = (g.patchSize * g.outputPixels, f * g.patchSize)
        // Per chunk: columns, column gradient, then partial dW and dBias, summed in chunk order.
        let perChunk = 2 * columnSize + weightSize + f
        scratch.resize(chunks.count * perChunk)
        scratch.fill(0)
        let base = scratch.mutablePointer()
        let (inputSize, outputSize) = (g.channels * g.inputPixels, f * g.outputPixels)
        let inputGradient = input.scalars.withUnsafeBufferPointer { x in
            weight.value.scalars.withUnsafeBufferPointer { w in
                outputGradient.scalars.withUnsafeBufferPointer { dy in
                    Tensor(shape: input.shape) { dx in
                        Parallel.forEach(chunks.count) { chunk in
                            let work = base + chunk * perChunk
                            for image in chunks[chunk] {
                                convolutionBackward(
                                    image: x.baseAddress! + image * inputSize, geometry: g, outputChannels: f,
                                    weight: w.baseAddress!, outputGradient: dy.baseAddress! + image * outputSize,
                                    columns: work, columnGradient: work + columnSize,
                                    weightGradient: work + 2 * columnSize,
                                    biasGradient: work + 2 * columnSize + weightSize,
                                    inputGradient: dx + image * inputSize)
                            }
                        }
                    }
                }
            }
        }
        weight.gradient = Tensor(shape: weight.value.shape) { dw in
            sumChunks(base + 2 * columnSize, count: weightSize, chunks: chunks.count, stride: perChunk, into: dw)
        }
        bias.gradient = Tensor(shape: [f]) { db in
            sumChunks(base + 2 * columnSize + weightSize, count: f, chunks: chunks.count, stride: perChunk, into: db)
        }
        return inputGradient
    }
}

/// `out[i] = Σ_chunk partial[chunk·stride + i]`, chunks added in order (deterministic).
func sumChunks(
    _ partial: UnsafePointer<Float>, count: Int, chunks: Int, stride: Int, into out: UnsafeMutablePointer<Float>
) {
    out.update(from: partial, count: count)
    for chunk in 1..<max(chunks, 1) {
        let source = partial + chunk * stride
        for index in 0..<count { out[index] += source[index] }
    }
}
