import CVectorKernels

/// Conv2D → BatchNorm2D → ReLU (→ MaxPool 2×2 or global average pool), run as one fused stage;
/// the convolution is ungrouped (Winograd's F(4×4, 3×3) where `WinogradGeometry.suits`; at
/// inference with the C vector kernels, the direct kernel where `suitsDirectKernel`: a first layer;
/// im2col + GEMM otherwise) or depthwise (its own direct kernel).
///
/// Same arithmetic as the four layers one after another, in fewer passes over memory: per image,
/// the convolution and the per-channel moments while the output is in cache; then one pass that
/// normalises, rectifies and pools. Backward recomputes im2col (or Winograd's input transform) per
/// image instead of keeping the column matrices (tens of MB per batch), and folds batch norm's gradient into the conv's dY.
/// Parameters and gradients stay in the `Conv2D` and `BatchNorm2D` layers themselves.
///
/// Legend: N images, F conv output channels, P = h·w conv output pixels, K = patch size.
struct ConvolutionBlock: Sendable {
    enum Pooling: Sendable, Equatable { case none, max2x2, globalAverage }

    let convolution: Int
    let normalization: Int
    let pooling: Pooling
    /// Index of the block's last layer (the ReLU or the pool).
    let lastLayer: Int

    /// Conv output x [N, F, h, w], kept for backward.
    private var convolutionOutput = Buffer<Float>()
    /// Winner (0…3) of each 2×2 window, [N, F, h/2, w/2].
    private var winners = Buffer<UInt8>()
    /// Per image and channel: two floats of statistics (moments, or gradient sums).
    private var perImage = Buffer<Float>()
    private var scratch = Buffer<Float>()
    /// The weights in Winograd's domain (U), for 3×3 stride-1 convolutions.
    private var transformedWeight = Buffer<Float>()
    /// The weights `transformedWeight` was made from.
    private var transformedFrom: [Float] = []
    /// U packed for the C kernels' products (inference), and the weights it was made from.
    private var packedWeight = Buffer<Float>()
    private var packedFrom: [Float] = []
    private var mean: [Float] = []
    private var inverseStandardDeviation: [Float] = []
    private var scale: [Float] = []
    private var shift: [Float] = []

    init(convolution: Int, normalization: Int, pooling: Pooling, lastLayer: Int) {
        self.convolution = convolution
        self.normalization = normalization
        self.pooling = pooling
        self.lastLayer = lastLayer
    }

    static func outputShape(convolutionOutput shape: [Int], pooling: Pooling) -> [Int] {
        switch pooling {
        case .none: shape
        case .max2x2: [shape[0], shape[1], shape[2] / 2, shape[3] / 2]
        case .globalAverage: [shape[0], shape[1]]
        }
    }

    /// Runs the block on `input` [N, C, H, W] and writes its output (shape from `outputShape`);
    /// with `shareImages`, inference of fewer images than workers splits each among them.
    mutating func forward(
        input: UnsafePointer<Float>, inputShape: [Int], convolution conv: Conv2D, normalization norm: inout BatchNorm2D,
        mode: Mode, shareImages: Bool, output: UnsafeMutablePointer<Float>
    ) {
        let g = conv.geometry(for: inputShape)
        let depthwise = conv.isDepthwise
        // The depthwise kernel reads the image directly: no column matrix.
        let (batch, f, pixels, patch) = (
            inputShape[0], conv.outputChannels, g.outputPixels, depthwise ? 0 : g.patchSize
        )
        let (h, w) = (g.outputHeight, g.outputWidth)
        let chunks = Parallel.ranges(batch, parts: Parallel.chunkCount)
        let training = mode == .training
        let winograd = depthwise ? nil : WinogradGeometry(g)
        let packed = !training && VectorKernels.vectorized
        // Inference with the C vector kernels runs a large plane's Winograd band by band, and a shallow
        // im2col layer directly (no column matrix).
        let bandRows = packed ? winograd?.bandRows(outputChannels: f) : nil
        let direct = packed && winograd == nil && !depthwise && g.suitsDirectKernel
        let group = bandRows != nil ? 1 : winograd?.imagesPerGroup(available: chunks.map(\.count).max() ?? 1) ?? 1
        let scratchSize =
            winograd.map { w in
                bandRows.map { winogradBandScratchSize(w, outputChannels: f, bandRows: $0) }
                    ?? winogradScratchSize(w, outputChannels: f, images: group)
            } ?? (direct ? 0 : patch * pixels)
        let fusedPool = fusesPool(direct: direct, training: training)
        // A fused kernel writes the pooled output only: the convolution's would go unused.
        convolutionOutput.resize(fusedPool ? 0 : batch * f * pixels)
        scratch.resize(chunks.count * scratchSize)
        let transformed = transformWeights(conv, winograd, packed: packed)
        perImage.resize(batch * 2 * f)
        if training && pooling == .max2x2 { winners.resize(batch * f * (h / 2) * (w / 2)) }
        let (x, columns, moments) = (
            convolutionOutput.mutablePointer(), scratch.mutablePointer(), perImage.mutablePointer()
        )
        let winnerBase: UnsafeMutablePointer<UInt8>? = training && pooling == .max2x2 ? winners.mutablePointer() : nil
        let (inputSize, outputSize) = (g.channels * g.inputPixels, f * pixels)
        let pooledSize = Self.outputShape(convolutionOutput: [1, f, h, w], pooling: pooling).reduce(1, *)
        let pooling = pooling

        if !training {
            mean = norm.runningMean.value.scalars
            inverseStandardDeviation = norm.runningVariance.value.scalars.map { 1 / ($0 + norm.epsilon).squareRoot() }
            (scale, shift) = BatchNorm2D.affine(
                gamma: norm.weight.value.scalars, beta: norm.bias.value.scalars, mean: mean,
                inverseStandardDeviation: inverseStandardDeviation)
        }
        if !training && !depthwise && shareImages && batch < Parallel.workerCount {
            for image in 0..<batch {
                forwardSharingImage(
                    input + image * inputSize, geometry: g, winograd: winograd, transformedWeight: transformed,
                    packed: packed, bandRows: bandRows, direct: direct, convolution: conv,
                    output: output + image * pooledSize)
            }
            return
        }
        let (inferenceScale, inferenceShift) = (scale, shift)
        let folded = !training && winograd != nil && Self.foldsActivation(pooling, height: h, width: w)
        // Winograd and the fused direct kernel never both run: `activation` is for whichever does.
        withFoldedActivation(folded || fusedPool) { activation in
            conv.weight.value.scalars.withUnsafeBufferPointer { weight in
                conv.bias.value.scalars.withUnsafeBufferPointer { bias in
                    Parallel.forEach(chunks.count) { chunk in
                        let range = chunks[chunk]
                        for first in stride(from: range.lowerBound, to: range.upperBound, by: group) {
                            let images = first..<min(first + group, range.upperBound)
                            if let winograd, let transformed, let bandRows {
                                for image in images {
                                    winogradConvolutionForwardBands(
                                        image: input + image * inputSize, geometry: winograd, outputChannels: f,
                                        packedWeight: transformed, bias: bias.baseAddress!, activation: activation,
                                        bandRows: bandRows, tileRows: 0..<winograd.tileRows,
                                        scratch: columns + chunk * scratchSize,
                                        output: activation == nil ? x + image * outputSize : output + image * pooledSize
                                    )
                                }
                                if activation != nil { continue }
                            } else if let winograd, let transformed {
                                winogradConvolutionForward(
                                    images: input + first * inputSize, count: images.count, geometry: winograd,
                                    outputChannels: f, transformedWeight: transformed, packed: packed,
                                    bias: bias.baseAddress!, scratch: columns + chunk * scratchSize,
                                    activation: activation,
                                    output: activation == nil ? x + first * outputSize : output + first * pooledSize)
                                if activation != nil { continue }
                            }
                            for image in images {
                                let y = x + image * outputSize
                                if fusedPool, let activation {
                                    // The convolution's output never goes to memory (the image is then done).
                                    directConvolutionPooledForward(
                                        image: input + image * inputSize, geometry: g, weight: weight.baseAddress!,
                                        bias: bias.baseAddress!, scale: activation.scale, shift: activation.shift,
                                        channels: 0..<f, pooledRows: 0..<(h / 2), output: output + image * pooledSize)
                                    continue
                                }
                                if depthwise {
                                    depthwiseConvolutionForward(
                                        image: input + image * inputSize, geometry: g, multiplier: f / g.channels,
                                        weight: weight.baseAddress!, bias: bias.baseAddress!, output: y)
                                } else if direct {
                                    directConvolutionForward(
                                        image: input + image * inputSize, geometry: g, weight: weight.baseAddress!,
                                        bias: bias.baseAddress!, channels: 0..<f, rows: 0..<h, output: y)
                                } else if winograd == nil {
                                    convolutionForward(
                                        image: input + image * inputSize, geometry: g, outputChannels: f,
                                        weight: weight.baseAddress!, bias: bias.baseAddress!,
                                        columns: columns + chunk * scratchSize, output: y)
                                }
                                if training {
                                    channelMoments(
                                        y, channels: f, pixels: pixels, means: moments + image * 2 * f,
                                        squaredDeviations: moments + image * 2 * f + f)
                                } else {
                                    Self.activate(
                                        y, pooling: pooling, channels: f, height: h, width: w, scale: inferenceScale,
                                        shift: inferenceShift, output: output + image * pooledSize, winners: nil)
                                }
                            }
                        }
                    }
                }
            }
        }
        guard training else { return }

        // Batch statistics from per-image moments (Chan et al.'s parallel variance), in image order.
        var batchMean = [Float](repeating: 0, count: f)
        var variance = batchMean
        for channel in 0..<f {
            var total: Double = 0
            for image in 0..<batch { total += Double(moments[image * 2 * f + channel]) }
            let mu = total / Double(batch)
            var deviations: Double = 0
            for image in 0..<batch {
                let d = Double(moments[image * 2 * f + channel]) - mu
                deviations += Double(moments[image * 2 * f + f + channel]) + Double(pixels) * d * d
            }
            batchMean[channel] = Float(mu)
            variance[channel] = Float(deviations / Double(batch * pixels))
        }
        norm.updateRunningStatistics(mean: batchMean, variance: variance, count: batch * pixels)
        mean = batchMean
        inverseStandardDeviation = variance.map { 1 / ($0 + norm.epsilon).squareRoot() }
        (scale, shift) = BatchNorm2D.affine(
            gamma: norm.weight.value.scalars, beta: norm.bias.value.scalars, mean: mean,
            inverseStandardDeviation: inverseStandardDeviation)
        let (trainingScale, trainingShift) = (scale, shift)
        let winnerSize = f * (h / 2) * (w / 2)
        Parallel.forEach(chunks.count) { chunk in
            for image in chunks[chunk] {
                Self.activate(
                    x + image * outputSize, pooling: pooling, channels: f, height: h, width: w, scale: trainingScale,
                    shift: trainingShift, output: output + image * pooledSize,
                    winners: winnerBase.map { $0 + image * winnerSize })
            }
        }
    }

    /// Inference of one image with every worker on it, for batches smaller than the workers (batch-1
    /// latency: a recognised photo, an embedding asked for): Winograd's work split by channels, then
    /// output channels, im2col's product by output channels, each worker normalising and pooling the
    /// channels it wrote. The same output as `forward`'s per-image path to float rounding (OpenBLAS
    /// may round a product of fewer rows differently). Depthwise convolutions (one global one in the
    /// shipped networks, a small share of their work) stay on one worker.
    private mutating func forwardSharingImage(
        _ image: UnsafePointer<Float>, geometry g: ConvolutionGeometry, winograd: WinogradGeometry?,
        transformedWeight: UnsafePointer<Float>?, packed: Bool, bandRows: Int?, direct: Bool, convolution conv: Conv2D,
        output: UnsafeMutablePointer<Float>
    ) {
        let (f, pixels, parts) = (conv.outputChannels, g.outputPixels, Parallel.workerCount)
        let (h, w, pooling) = (g.outputHeight, g.outputWidth, pooling)
        let pooledPerChannel = Self.outputShape(convolutionOutput: [1, 1, h, w], pooling: pooling).reduce(1, *)
        let (scale, shift) = (scale, shift)
        let x = convolutionOutput.mutablePointer()
        let folded = winograd != nil && Self.foldsActivation(pooling, height: h, width: w)
        let finish = { (channels: Range<Int>) in
            guard !folded else { return }
            Self.activate(
                x + channels.lowerBound * pixels, pooling: pooling, channels: channels.count, height: h, width: w,
                scale: Array(scale[channels]), shift: Array(shift[channels]),
                output: output + channels.lowerBound * pooledPerChannel, winners: nil)
        }
        conv.bias.value.scalars.withUnsafeBufferPointer { bias in
            if let winograd, let transformedWeight, let bandRows {
                // A large plane: each worker takes a share of the tile rows, band by band.
                let shares = Parallel.ranges(winograd.tileRows, parts: parts)
                let size = winogradBandScratchSize(winograd, outputChannels: f, bandRows: bandRows)
                scratch.resize(shares.count * size)
                let work = scratch.mutablePointer()
                withFoldedActivation(folded) { activation in
                    Parallel.forEach(shares.count) { part in
                        winogradConvolutionForwardBands(
                            image: image, geometry: winograd, outputChannels: f, packedWeight: transformedWeight,
                            bias: bias.baseAddress!, activation: activation, bandRows: bandRows, tileRows: shares[part],
                            scratch: work + part * size, output: folded ? output : x)
                    }
                }
                let ranges = Parallel.ranges(f, parts: parts)
                Parallel.forEach(ranges.count) { finish(ranges[$0]) }
                return
            }
            if let winograd, let transformedWeight {
                scratch.resize(winogradSharedScratchSize(winograd, outputChannels: f, parts: parts))
                let work = scratch.mutablePointer()
                withFoldedActivation(folded) { activation in
                    winogradConvolutionForwardShared(
                        image: image, geometry: winograd, outputChannels: f, transformedWeight: transformedWeight,
                        packed: packed, bias: bias.baseAddress!, scratch: work, parts: parts, activation: activation,
                        output: folded ? output : x, finish: finish)
                }
                return
            }
            if fusesPool(direct: direct, training: false) {
                // Split by pooled rows, the convolution, normalisation and pool in one kernel.
                withFoldedActivation(true) { activation in
                    conv.weight.value.scalars.withUnsafeBufferPointer { weight in
                        let rows = Parallel.ranges(h / 2, parts: parts)
                        Parallel.forEach(rows.count) { part in
                            directConvolutionPooledForward(
                                image: image, geometry: g, weight: weight.baseAddress!, bias: bias.baseAddress!,
                                scale: activation!.scale, shift: activation!.shift, channels: 0..<f,
                                pooledRows: rows[part], output: output)
                        }
                    }
                }
                return
            }
            if direct {
                // Split by output rows: a first layer has too few output channels to share.
                conv.weight.value.scalars.withUnsafeBufferPointer { weight in
                    let rows = Parallel.ranges(h, parts: parts)
                    Parallel.forEach(rows.count) { part in
                        directConvolutionForward(
                            image: image, geometry: g, weight: weight.baseAddress!, bias: bias.baseAddress!,
                            channels: 0..<f, rows: rows[part], output: x)
                    }
                }
                let ranges = Parallel.ranges(f, parts: parts)
                Parallel.forEach(ranges.count) { finish(ranges[$0]) }
                return
            }
            var source = image
            if !g.isPointwise {
                scratch.resize(g.patchSize * pixels)
                im2col(image, g, scratch.mutablePointer())
                source = scratch.pointer
            }
            conv.weight.value.scalars.withUnsafeBufferPointer { weight in
                let ranges = Parallel.ranges(f, parts: parts)
                Parallel.forEach(ranges.count) { part in
                    let channels = ranges[part]
                    let y = x + channels.lowerBound * pixels
                    for channel in channels {
                        (x + channel * pixels).update(repeating: bias[channel], count: pixels)
                    }
                    gemm(
                        transposeA: false, transposeB: false, m: channels.count, n: pixels, k: g.patchSize,
                        a: weight.baseAddress! + channels.lowerBound * g.patchSize, b: source, beta: 1, c: y)
                    finish(channels)
                }
            }
        }
    }

    /// Whether inference runs a direct layer's normalisation, ReLU and 2×2 max-pool in its kernel
    /// (a first layer followed by a pool: the stems of the base and the detector).
    private func fusesPool(direct: Bool, training: Bool) -> Bool {
        !training && direct && pooling == .max2x2 && directPoolingFused
    }

    /// `body` with the block's inference scale and shift as the kernels read them when `folded` (a
    /// Winograd output transform or a direct kernel that normalises what it computes), else nil.
    private func withFoldedActivation<R>(_ folded: Bool, _ body: (WinogradActivation?) -> R) -> R {
        guard folded else { return body(nil) }
        let f = scale.count
        return (scale + shift).withUnsafeBufferPointer { affine in
            body(
                WinogradActivation(scale: affine.baseAddress!, shift: affine.baseAddress! + f, pool: pooling == .max2x2)
            )
        }
    }

    /// Whether inference folds normalisation, ReLU and pooling into Winograd's output transform:
    /// with the C vector kernels, for no pooling or a 2×2 max-pool of even planes (its windows then
    /// lie inside the 4×4 tiles). The same operations in the same order as `activate`, so the same bits.
    private static func foldsActivation(_ pooling: Pooling, height: Int, width: Int) -> Bool {
        VectorKernels.vectorized && (pooling == .none || (pooling == .max2x2 && height % 2 == 0 && width % 2 == 0))
    }

    /// Makes now what inference makes on its first call and keeps while the weights stay: Winograd's
    /// U (packed for the AVX-512 products when they run) of a convolution that can run as Winograd at
    /// some input size. A copy of the network then shares it, where a copy of an unprepared network
    /// made it again on its first forward (a server copies its models for every request).
    mutating func prepareForInference(convolution conv: Conv2D) {
        guard !conv.isDepthwise,
            WinogradGeometry.suits(
                kernelSize: conv.kernelSize, stride: conv.stride, padding: conv.padding, channels: conv.inputChannels)
        else { return }
        _ = VectorKernels.vectorized ? packWeights(conv) : plainWeights(conv)
    }

    /// Winograd's U of the convolution's weights (nil when it runs as im2col or depthwise); `packed`
    /// (inference with the C vector kernels) packs it for their products, and keeps only that.
    private mutating func transformWeights(
        _ conv: Conv2D, _ winograd: WinogradGeometry?, packed: Bool
    ) -> UnsafePointer<Float>? {
        guard winograd != nil else { return nil }
        return packed ? packWeights(conv) : plainWeights(conv)
    }

    /// Winograd's U, kept while the weights are those it was made from.
    private mutating func plainWeights(_ conv: Conv2D) -> UnsafePointer<Float> {
        // Inference calls forward again and again with the same weights (batch-1 latency): keep U
        // while the weights are those it was made from. Sharing the array makes that check O(1) until
        // an update copies the weights on write, and then the comparison ends at the first change.
        if transformedFrom == conv.weight.value.scalars { return transformedWeight.pointer }
        transformedFrom = conv.weight.value.scalars
        transformedWeight.resize(
            winogradFilterSize(
                outputChannels: conv.outputChannels, inputChannels: conv.weight.value.count / (9 * conv.outputChannels))
        )
        conv.weight.value.scalars.withUnsafeBufferPointer { weight in
            winogradFilterTransform(
                weight: weight.baseAddress!, outputChannels: conv.outputChannels,
                inputChannels: conv.weight.value.count / (9 * conv.outputChannels),
                transformed: transformedWeight.mutablePointer())
        }
        return transformedWeight.pointer
    }

    /// U packed for the C kernels' products (`facetrain_winograd_pack`), kept like U while the weights
    /// are those it was made from. U itself is made in a scratch and dropped, unless training keeps it.
    private mutating func packWeights(_ conv: Conv2D) -> UnsafePointer<Float> {
        if packedFrom == conv.weight.value.scalars { return packedWeight.pointer }
        packedFrom = conv.weight.value.scalars
        let (f, c) = (conv.outputChannels, conv.weight.value.count / (9 * conv.outputChannels))
        packedWeight.resize(facetrain_winograd_packed_size(f, c))
        let target = packedWeight.mutablePointer()
        if transformedFrom == conv.weight.value.scalars {
            facetrain_winograd_pack(
                transformedWeight.pointer, winogradFilterStride(outputChannels: f, inputChannels: c), f, c, target)
            return packedWeight.pointer
        }
        let plain = UnsafeMutablePointer<Float>.allocate(
            capacity: winogradFilterSize(outputChannels: f, inputChannels: c))
        defer { plain.deallocate() }
        conv.weight.value.scalars.withUnsafeBufferPointer { weight in
            winogradFilterTransform(
                weight: weight.baseAddress!, outputChannels: f, inputChannels: c, transformed: plain)
        }
        facetrain_winograd_pack(plain, winogradFilterStride(outputChannels: f, inputChannels: c), f, c, target)
        return packedWeight.pointer
    }

    private static func activate(
        _ x: UnsafePointer<Float>, pooling: Pooling, channels: Int, height: Int, width: Int,
        scale: [Float], shift: [Float], output: UnsafeMutablePointer<Float>, winners: UnsafeMutablePointer<UInt8>?
    ) {
        scale.withUnsafeBufferPointer { s in
            shift.withUnsafeBufferPointer { t in
                let (s, t) = (s.baseAddress!, t.baseAddress!)
                switch pooling {
                case .none:
                    normalizeReLU(x, channels: channels, pixels: height * width, scale: s, shift: t, output: output)
                case .max2x2:
                    normalizeReLUMaxPool2x2(
                        x, channels: channels, height: height, width: width, scale: s, shift: t, output: output,
                        argmax: winners)
                case .globalAverage:
                    normalizeReLUAverage(
                        x, channels: channels, pixels: height * width, scale: s, shift: t, output: output)
                }
            }
        }
    }

    /// Adds to the conv and batch-norm gradients and, when `inputGradient` is given, writes dInput.
    ///
    /// `output` is what `forward` wrote (the ReLU mask comes from it); `outputGradient` has its shape.
    mutating func backward(
        input: UnsafePointer<Float>, inputShape: [Int], output: UnsafePointer<Float>,
        outputGradient: UnsafePointer<Float>, convolution conv: inout Conv2D, normalization norm: inout BatchNorm2D,
        inputGradient: UnsafeMutablePointer<Float>?
    ) {
        let g = conv.geometry(for: inputShape)
        let depthwise = conv.isDepthwise
        let (batch, f, pixels, patch) = (
            inputShape[0], conv.outputChannels, g.outputPixels, depthwise ? 0 : g.patchSize
        )
        let (h, w) = (g.outputHeight, g.outputWidth)
        let chunks = Parallel.ranges(batch, parts: Parallel.chunkCount)
        let pooledSize = Self.outputShape(convolutionOutput: [1, f, h, w], pooling: pooling).reduce(1, *)
        let (outputSize, inputSize, winnerSize) = (f * pixels, g.channels * g.inputPixels, f * (h / 2) * (w / 2))
        let x = UnsafePointer(convolutionOutput.mutablePointer())
        let sums = perImage.mutablePointer()
        let winners: UnsafePointer<UInt8>? = pooling == .max2x2 ? UnsafePointer(self.winners.mutablePointer()) : nil
        let pooling = pooling
        let (mean, scale, shift) = (mean, scale, shift)

        // Phase A: per image, Σdz and Σdz·(x - μ) per channel.
        mean.withUnsafeBufferPointer { mu in
            scale.withUnsafeBufferPointer { s in
                shift.withUnsafeBufferPointer { t in
                    Parallel.forEach(chunks.count) { chunk in
                        for image in chunks[chunk] {
                            let (xi, gi, gxi) = (x + image * outputSize, sums + image * 2 * f, sums + image * 2 * f + f)
                            let (yi, dyi) = (output + image * pooledSize, outputGradient + image * pooledSize)
                            switch pooling {
                            case .none:
                                reluGradientSums(
                                    xi, channels: f, pixels: pixels, output: yi, outputGradient: dyi,
                                    mean: mu.baseAddress!, sumGradient: gi, sumGradientTimesX: gxi)
                            case .max2x2:
                                maxPool2x2ReLUGradientSums(
                                    xi, channels: f, height: h, width: w, pooledOutput: yi, pooledGradient: dyi,
                                    argmax: winners! + image * winnerSize, mean: mu.baseAddress!, sumGradient: gi,
                                    sumGradientTimesX: gxi)
                            case .globalAverage:
                                reluAverageGradientSums(
                                    xi, channels: f, pixels: pixels, scale: s.baseAddress!, shift: t.baseAddress!,
                                    pooledGradient: dyi, mean: mu.baseAddress!, sumGradient: gi, sumGradientTimesX: gxi)
                            }
                        }
                    }
                }
            }
        }
        var sumGradient = [Double](repeating: 0, count: f)
        var sumCentered = sumGradient
        for image in 0..<batch {
            for channel in 0..<f {
                sumGradient[channel] += Double(sums[image * 2 * f + channel])
                sumCentered[channel] += Double(sums[image * 2 * f + f + channel])
            }
        }
        let invstd = inverseStandardDeviation
        for channel in 0..<f {
            norm.weight.gradient.scalars[channel] += Float(sumCentered[channel]) * invstd[channel]
            norm.bias.gradient.scalars[channel] += Float(sumGradient[channel])
        }
        let coefficients = norm.weight.value.scalars.withUnsafeBufferPointer { gamma in
            BatchNormGradientCoefficients(
                gamma: gamma.baseAddress!, mean: mean, inverseStandardDeviation: invstd, sumGradient: sumGradient,
                sumGradientTimesCenteredX: sumCentered, valuesPerChannel: batch * pixels)
        }

        // Phase B: per image, dY of the conv, then its GEMMs (per group of images for Winograd); partial
        // dW, dBias per chunk.
        let columnSize = patch * pixels
        let weightSize = conv.weight.value.count
        let winograd = depthwise ? nil : WinogradGeometry(g)
        let transformed = transformWeights(conv, winograd, packed: false)
        // Per chunk: the kernel's scratch (im2col's columns and their gradient, or Winograd's
        // transforms and the chunk's dU), dY of a group, then partial dW and dBias.
        let transformedWeightSize = winogradFilterSize(outputChannels: f, inputChannels: g.channels)
        let group = winograd?.imagesPerGroup(available: chunks.map(\.count).max() ?? 1) ?? 1
        let workSize =
            winograd.map { winogradScratchSize($0, outputChannels: f, images: group) + transformedWeightSize }
            ?? 2 * columnSize
        let perChunk = workSize + group * outputSize + weightSize + f
        scratch.resize(chunks.count * perChunk)
        let base = scratch.mutablePointer()
        conv.weight.value.scalars.withUnsafeBufferPointer { weightBuffer in
            shift.withUnsafeBufferPointer { shiftBuffer in
                let (weight, t) = (weightBuffer.baseAddress!, shiftBuffer.baseAddress!)
                Parallel.forEach(chunks.count) { chunk in
                    let work = base + chunk * perChunk
                    let (columns, columnGradient, dy) = (work, work + columnSize, work + workSize)
                    let (weightGradient, biasGradient) = (
                        dy + group * outputSize, dy + group * outputSize + weightSize
                    )
                    weightGradient.update(repeating: 0, count: weightSize + f)
                    let transformedGradient = winograd.map {
                        let du = work + winogradScratchSize($0, outputChannels: f, images: group)
                        du.update(repeating: 0, count: transformedWeightSize)
                        return du
                    }
                    let range = chunks[chunk]
                    for first in stride(from: range.lowerBound, to: range.upperBound, by: group) {
                        let images = first..<min(first + group, range.upperBound)
                        for image in images {
                            let (xi, yi, dyi) = (
                                x + image * outputSize, output + image * pooledSize, outputGradient + image * pooledSize
                            )
                            let dy = dy + (image - first) * outputSize
                            switch pooling {
                            case .none:
                                reluNormalizeBackward(
                                    xi, channels: f, pixels: pixels, output: yi, outputGradient: dyi,
                                    coefficients: coefficients, inputGradient: dy)
                            case .max2x2:
                                maxPool2x2ReLUNormalizeBackward(
                                    xi, channels: f, height: h, width: w, pooledOutput: yi, pooledGradient: dyi,
                                    argmax: winners! + image * winnerSize, coefficients: coefficients, inputGradient: dy
                                )
                            case .globalAverage:
                                reluAverageNormalizeBackward(
                                    xi, channels: f, pixels: pixels, shift: t, pooledGradient: dyi,
                                    coefficients: coefficients, inputGradient: dy)
                            }
                            if depthwise {
                                depthwiseConvolutionBackward(
                                    image: input + image * inputSize, geometry: g, multiplier: f / g.channels,
                                    weight: weight, outputGradient: dy, weightGradient: weightGradient,
                                    biasGradient: biasGradient,
                                    inputGradient: inputGradient.map { $0 + image * inputSize })
                                continue
                            }
                            if winograd != nil { continue }
                            convolutionBackward(
                                image: input + image * inputSize, geometry: g, outputChannels: f, weight: weight,
                                outputGradient: dy, columns: columns, columnGradient: columnGradient,
                                weightGradient: weightGradient, biasGradient: biasGradient,
                                inputGradient: inputGradient.map { $0 + image * inputSize })
                        }
                        if let winograd, let transformed, let transformedGradient {
                            winogradConvolutionBackward(
                                images: input + first * inputSize, count: images.count, geometry: winograd,
                                outputChannels: f, transformedWeight: transformed, outputGradient: dy, scratch: work,
                                transformedWeightGradient: transformedGradient, biasGradient: biasGradient,
                                inputGradient: inputGradient.map { $0 + first * inputSize })
                        }
                    }
                    if let transformedGradient {
                        winogradFilterGradient(
                            transformedGradient: transformedGradient, outputChannels: f, inputChannels: g.channels,
                            weightGradient: weightGradient)
                    }
                }
            }
        }
        let dWeightOffset = workSize + group * outputSize
        conv.weight.gradient.scalars.withUnsafeMutableBufferPointer { dw in
            addChunks(
                base + dWeightOffset, count: weightSize, chunks: chunks.count, stride: perChunk, into: dw.baseAddress!)
        }
        conv.bias.gradient.scalars.withUnsafeMutableBufferPointer { db in
            addChunks(
                base + dWeightOffset + weightSize, count: f, chunks: chunks.count, stride: perChunk,
                into: db.baseAddress!)
        }
    }
}
