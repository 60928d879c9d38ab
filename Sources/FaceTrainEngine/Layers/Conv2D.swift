/// 2-D convolution over NCHW input, images in parallel: im2col + one GEMM per image (per group of
/// channels when `groups` > 1), or the direct depthwise kernel when every group is one channel.
///
/// Shapes: input [N, C, H, W]; weight [F, C / groups, K, K] (the ONNX and Core ML layout); bias
/// [F]; output [N, F, oH, oW] with oH = (H + 2·padding - K) / stride + 1, likewise oW. Group g
/// maps input channels g·C/groups ..< (g+1)·C/groups to output channels g·F/groups ..< (g+1)·F/groups.
public struct Conv2D: WeightAndBiasLayer {
    public let inputChannels: Int
    public let outputChannels: Int
    public let kernelSize: Int
    public let stride: Int
    public let padding: Int
    public let groups: Int
    public var weight: Parameter
    public var bias: Parameter
    private var input = Tensor(zeros: [0])
    private var scratch = Buffer<Float>()

    /// A convolution with He-normal weights (std √(2 / (C/groups·K·K))) and zero bias.
    public init(
        inputChannels: Int, outputChannels: Int, kernelSize: Int, stride: Int = 1, padding: Int = 0, groups: Int = 1,
        using generator: inout SplitMix64
    ) {
        self.inputChannels = inputChannels
        self.outputChannels = outputChannels
        self.kernelSize = kernelSize
        self.stride = stride
        self.padding = padding
        self.groups = groups
        let groupChannels = inputChannels / max(groups, 1)
        let fanIn = Float(groupChannels * kernelSize * kernelSize)
        weight = Parameter(
            name: "weight",
            value: Tensor(
                randomNormal: [outputChannels, groupChannels, kernelSize, kernelSize],
                standardDeviation: (2 / fanIn).squareRoot(), using: &generator))
        bias = Parameter(name: "bias", value: Tensor(zeros: [outputChannels]))
        _ = Parallel.configureOnce
    }

    public var specification: LayerSpecification {
        .conv2D(
            inputChannels: inputChannels, outputChannels: outputChannels, kernelSize: kernelSize, stride: stride,
            padding: padding, groups: groups)
    }

    /// One channel per group: the direct kernel instead of im2col + GEMM.
    public var isDepthwise: Bool { groups > 1 && groups == inputChannels }

    /// Geometry of the whole input (what the fused blocks and the depthwise kernel use).
    func geometry(for shape: [Int]) -> ConvolutionGeometry {
        ConvolutionGeometry(
            channels: shape[1], height: shape[2], width: shape[3], kernelSize: kernelSize, stride: stride,
            padding: padding)
    }

    /// Geometry of one group's channels (all of them when groups == 1).
    private func groupGeometry(for shape: [Int]) -> ConvolutionGeometry {
        ConvolutionGeometry(
            channels: shape[1] / groups, height: shape[2], width: shape[3], kernelSize: kernelSize, stride: stride,
            padding: padding)
    }

    public mutating func releaseCaches() { input = Tensor(zeros: [0]) }

    public mutating func forward(_ input: Tensor, mode: Mode) -> Tensor {
        precondition(
            input.shape.count == 4 && input.shape[1] == inputChannels,
            "Conv2D expects [N, \(inputChannels), H, W], got \(input.shape)")
        if mode == .training { self.input = input }
        let g = groupGeometry(for: input.shape)
        let (batch, f, groups) = (input.shape[0], outputChannels, groups)
        let (fg, depthwise) = (f / groups, isDepthwise)
        let chunks = Parallel.ranges(batch, parts: Parallel.chunkCount)
        let columnSize = depthwise ? 0 : g.patchSize * g.outputPixels
        scratch.resize(chunks.count * columnSize)
        let columns = scratch.mutablePointer()
        let (inputSize, outputSize) = (inputChannels * g.inputPixels, f * g.outputPixels)
        let wholeGeometry = geometry(for: input.shape)
        return input.scalars.withUnsafeBufferPointer { x in
            weight.value.scalars.withUnsafeBufferPointer { w in
                bias.value.scalars.withUnsafeBufferPointer { b in
                    Tensor(shape: outputShape(for: input.shape)) { y in
                        Parallel.forEach(chunks.count) { chunk in
                            for image in chunks[chunk] {
                                let (xi, yi) = (x.baseAddress! + image * inputSize, y + image * outputSize)
                                if depthwise {
                                    depthwiseConvolutionForward(
                                        image: xi, geometry: wholeGeometry, multiplier: f / inputChannels,
                                        weight: w.baseAddress!, bias: b.baseAddress!, output: yi)
                                    continue
                                }
                                for group in 0..<groups {
                                    convolutionForward(
                                        image: xi + group * g.channels * g.inputPixels, geometry: g,
                                        outputChannels: fg, weight: w.baseAddress! + group * fg * g.patchSize,
                                        bias: b.baseAddress! + group * fg, columns: columns + chunk * columnSize,
                                        output: yi + group * fg * g.outputPixels)
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// Adds this batch's dWeight and dBias to the gradients and returns dInput.
    public mutating func backward(_ outputGradient: Tensor) -> Tensor {
        let g = groupGeometry(for: input.shape)
        let (batch, f, groups) = (input.shape[0], outputChannels, groups)
        let (fg, depthwise) = (f / groups, isDepthwise)
        let chunks = Parallel.ranges(batch, parts: Parallel.chunkCount)
        let columnSize = depthwise ? 0 : g.patchSize * g.outputPixels
        let weightSize = weight.value.count
        // Per chunk: columns, column gradient, then partial dW and dBias, summed in chunk order.
        let perChunk = 2 * columnSize + weightSize + f
        scratch.resize(chunks.count * perChunk)
        scratch.fill(0)
        let base = scratch.mutablePointer()
        let (inputSize, outputSize) = (inputChannels * g.inputPixels, f * g.outputPixels)
        let wholeGeometry = geometry(for: input.shape)
        let inputGradient = input.scalars.withUnsafeBufferPointer { x in
            weight.value.scalars.withUnsafeBufferPointer { w in
                outputGradient.scalars.withUnsafeBufferPointer { dy in
                    Tensor(shape: input.shape) { dx in
                        Parallel.forEach(chunks.count) { chunk in
                            let work = base + chunk * perChunk
                            let (weightGradient, biasGradient) = (
                                work + 2 * columnSize, work + 2 * columnSize + weightSize
                            )
                            for image in chunks[chunk] {
                                let (xi, dyi, dxi) = (
                                    x.baseAddress! + image * inputSize, dy.baseAddress! + image * outputSize,
                                    dx + image * inputSize
                                )
                                if depthwise {
                                    depthwiseConvolutionBackward(
                                        image: xi, geometry: wholeGeometry, multiplier: f / inputChannels,
                                        weight: w.baseAddress!, outputGradient: dyi, weightGradient: weightGradient,
                                        biasGradient: biasGradient, inputGradient: dxi)
                                    continue
                                }
                                for group in 0..<groups {
                                    let (inputOffset, outputOffset) = (
                                        group * g.channels * g.inputPixels, group * fg * g.outputPixels
                                    )
                                    convolutionBackward(
                                        image: xi + inputOffset, geometry: g, outputChannels: fg,
                                        weight: w.baseAddress! + group * fg * g.patchSize,
                                        outputGradient: dyi + outputOffset, columns: work,
                                        columnGradient: work + columnSize,
                                        weightGradient: weightGradient + group * fg * g.patchSize,
                                        biasGradient: biasGradient + group * fg, inputGradient: dxi + inputOffset)
                                }
                            }
                        }
                    }
                }
            }
        }
        weight.gradient.scalars.withUnsafeMutableBufferPointer { dw in
            addChunks(
                base + 2 * columnSize, count: weightSize, chunks: chunks.count, stride: perChunk, into: dw.baseAddress!)
        }
        bias.gradient.scalars.withUnsafeMutableBufferPointer { db in
            addChunks(
                base + 2 * columnSize + weightSize, count: f, chunks: chunks.count, stride: perChunk,
                into: db.baseAddress!)
        }
        return inputGradient
    }
}

/// `out[i] += Σ_chunk partial[chunk·stride + i]`, chunks added in order (deterministic; onto zeros
/// it gives the same bits as the sum alone).
func addChunks(
    _ partial: UnsafePointer<Float>, count: Int, chunks: Int, stride: Int, into out: UnsafeMutablePointer<Float>
) {
    for chunk in 0..<max(chunks, 1) {
        let source = partial + chunk * stride
        for index in 0..<count { out[index] += source[index] }
    }
}

// MARK: - The kind

extension Conv2D {
    /// `conv2D` in the manifest: ONNX Conv (with `group` when grouped), Core ML convolution (`nGroups`).
    package struct Kind: LayerKind {
        package let inputChannels: Int
        package let outputChannels: Int
        package let kernelSize: Int
        package let stride: Int
        package let padding: Int
        package let groups: Int

        package var name: LayerKindName { .conv2D }
        package var spatialStride: Int { stride }
        /// Grouped convolutions came with format 2.
        package var minimumFormatVersion: Int { groups == 1 ? 1 : 2 }

        package var parameterShapes: [(name: String, shape: [Int])] {
            [
                ("weight", [outputChannels, inputChannels / max(groups, 1), kernelSize, kernelSize]),
                ("bias", [outputChannels]),
            ]
        }

        package func check(_ input: LayerInput) throws(LayerProblem) {
            let (channels, height, width) = try input.featureMap()
            guard inputChannels == channels else {
                throw LayerProblem("it expects \(inputChannels) channels but gets \(channels)")
            }
            guard groups >= 1, inputChannels % groups == 0, outputChannels % groups == 0 else {
                throw LayerProblem("\(groups) groups do not divide \(inputChannels) -> \(outputChannels) channels")
            }
            // Core ML and ONNX both take padding below the kernel size only.
            guard outputChannels > 0, kernelSize > 0, stride > 0, padding >= 0, padding < kernelSize else {
                throw LayerProblem(
                    "kernel \(kernelSize), stride \(stride), padding \(padding) is not a valid window "
                        + "(the padding must be smaller than the kernel)")
            }
            guard height + 2 * padding >= kernelSize, width + 2 * padding >= kernelSize else {
                throw LayerProblem("its \(kernelSize)x\(kernelSize) kernel is larger than the \(height)x\(width) input")
            }
        }

        /// oH = (H + 2·padding - K) / stride + 1, likewise oW.
        package func outputShape(for inputShape: [Int]) -> [Int] {
            [
                outputChannels, (inputShape[1] + 2 * padding - kernelSize) / stride + 1,
                (inputShape[2] + 2 * padding - kernelSize) / stride + 1,
            ]
        }

        /// A grouped convolution does 1/groups of the work of an ungrouped one.
        package func forwardFLOPs(inputShape: [Int], outputShape: [Int]) -> Double {
            2.0 * Double(outputChannels * (inputChannels / max(groups, 1)) * kernelSize * kernelSize)
                * Double(outputShape[1] * outputShape[2])
        }

        package var summary: String {
            "Conv2D \(inputChannels)->\(outputChannels), kernel \(kernelSize)x\(kernelSize), "
                + "stride \(stride), padding \(padding)"
                + (groups == 1 ? "" : groups == inputChannels ? ", depthwise" : ", \(groups) groups")
        }

        package var weightsFileAttributes: [WeightsFileAttribute] {
            [
                .integers("channels_in_out", [inputChannels, outputChannels], scalar: false),
                .integers("kernel_size", [kernelSize, kernelSize], scalar: false),
                .integers("stride", [stride, stride], scalar: false),
                .integers("padding", [padding, padding], scalar: false),
            ]
                // Only when grouped, so files of ungrouped models keep their bytes.
                + (groups == 1 ? [] : [.integers("groups", [groups], scalar: true)])
        }

        package func makeLayer(using generator: inout SplitMix64) -> any Layer {
            Conv2D(
                inputChannels: inputChannels, outputChannels: outputChannels, kernelSize: kernelSize, stride: stride,
                padding: padding, groups: max(groups, 1), using: &generator)
        }
    }
}
