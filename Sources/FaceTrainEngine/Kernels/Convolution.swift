import CVectorKernels

/// Convolution of one image as im2col + GEMM, forward and backward, and the direct kernel inference
/// runs instead on layers with few input channels.
///
/// Legend: f = output channels, P = output pixels (oh·ow), K = patch size (c·k·k).
/// Shapes: image [c, h, w]; weight [f, K]; bias [f]; output and outputGradient [f, P];
/// columns scratch [K, P].

/// `output[f, P] = weight · im2col(image) + bias`.
func convolutionForward(
    image: UnsafePointer<Float>, geometry g: ConvolutionGeometry, outputChannels f: Int,
    weight: UnsafePointer<Float>, bias: UnsafePointer<Float>,
    columns: UnsafeMutablePointer<Float>, output: UnsafeMutablePointer<Float>
) {
    let pixels = g.outputPixels
    var source = image
    if !g.isPointwise {
        im2col(image, g, columns)
        source = UnsafePointer(columns)
    }
    // Start from the bias and let the GEMM accumulate (beta = 1): one pass fewer over the output.
    for channel in 0..<f { (output + channel * pixels).update(repeating: bias[channel], count: pixels) }
    gemm(
        transposeA: false, transposeB: false, m: f, n: pixels, k: g.patchSize, a: weight, b: source, beta: 1, c: output)
}

extension ConvolutionGeometry {
    /// Whether inference runs this convolution as the C direct kernel rather than im2col +
    /// GEMM: a kernel with few taps (a first layer over 3 colour channels: 27), stride 1 or 2, where
    /// the column matrix is too shallow for GEMM to pay for writing and packing it. The one rule;
    /// callers also check `VectorKernels.vectorized`. Winograd's layers are chosen before this.
    var suitsDirectKernel: Bool {
        !isPointwise && (stride == 1 || stride == 2) && patchSize <= Int(FACETRAIN_DIRECT_CONVOLUTION_MAX_TAPS)
    }
}

/// Whether inference runs a direct-kernel layer followed by a 2×2 max-pool as one kernel
/// (`directConvolutionPooledForward`): with the AVX-512 kernels only (AVX2 writes the convolution
/// and pools it after: the same bits).
var directPoolingFused: Bool { VectorKernels.level == .avx512 }

/// `directConvolutionForward`, then inference's batch norm (`scale`, `shift` per output channel),
/// ReLU and 2×2 max-pool (`normalizeReLUMaxPool2x2`'s operations, so its bits), for output channels
/// `channels` and pooled rows `pooledRows`; `output` is the pooled [F, outputHeight / 2, outputWidth / 2].
func directConvolutionPooledForward(
    image: UnsafePointer<Float>, geometry g: ConvolutionGeometry, weight: UnsafePointer<Float>,
    bias: UnsafePointer<Float>, scale: UnsafePointer<Float>, shift: UnsafePointer<Float>, channels: Range<Int>,
    pooledRows: Range<Int>, output: UnsafeMutablePointer<Float>
) {
    precondition(directPoolingFused, "the fused direct kernel needs the AVX-512 kernels")
    facetrain_direct_convolution_pooled_avx512(
        image, g.channels, g.height, g.width, g.kernelSize, g.stride, g.padding, weight, bias, scale, shift,
        channels.lowerBound, channels.upperBound, pooledRows.lowerBound, pooledRows.upperBound, output,
        g.outputHeight, g.outputWidth)
}

/// `output[f, P] = weight · image + bias` by the C direct kernel (`suitsDirectKernel`; AVX-512 or AVX2), for
/// output channels `channels` and output rows `rows`: the sums are fused multiply-adds in weight
/// order, so the bits do not depend on the ranges, but they are not im2col + GEMM's.
func directConvolutionForward(
    image: UnsafePointer<Float>, geometry g: ConvolutionGeometry, weight: UnsafePointer<Float>,
    bias: UnsafePointer<Float>, channels: Range<Int>, rows: Range<Int>, output: UnsafeMutablePointer<Float>,
    kernels: VectorKernels.Level = VectorKernels.level
) {
    let direct = kernels == .avx2 ? facetrain_direct_convolution_avx2 : facetrain_direct_convolution_avx512
    direct(
        image, g.channels, g.height, g.width, g.kernelSize, g.stride, g.padding, weight, bias, channels.lowerBound,
        channels.upperBound, rows.lowerBound, rows.upperBound, output, g.outputHeight, g.outputWidth)
}

/// Adds this image's weight and bias gradients and, when `inputGradient` is given, writes dImage.
///
/// `dWeight += dY · im2col(image)ᵀ`, `dBias += Σ_P dY`, `dImage = col2im(weightᵀ · dY)`.
/// `columns` is overwritten; `columnGradient` is scratch of the same size.
func convolutionBackward(
    image: UnsafePointer<Float>, geometry g: ConvolutionGeometry, outputChannels f: Int,
    weight: UnsafePointer<Float>, outputGradient dy: UnsafePointer<Float>,
    columns: UnsafeMutablePointer<Float>, columnGradient: UnsafeMutablePointer<Float>,
    weightGradient: UnsafeMutablePointer<Float>, biasGradient: UnsafeMutablePointer<Float>,
    inputGradient: UnsafeMutablePointer<Float>?
) {
    let (pixels, patch) = (g.outputPixels, g.patchSize)
    var source = image
    if !g.isPointwise {
        im2col(image, g, columns)
        source = UnsafePointer(columns)
    }
    gemm(transposeA: false, transposeB: true, m: f, n: patch, k: pixels, a: dy, b: source, beta: 1, c: weightGradient)
    for channel in 0..<f { biasGradient[channel] += sum(dy + channel * pixels, count: pixels) }
    guard let inputGradient else { return }
    if g.isPointwise {
        gemm(transposeA: true, transposeB: false, m: patch, n: pixels, k: f, a: weight, b: dy, c: inputGradient)
    } else {
        gemm(transposeA: true, transposeB: false, m: patch, n: pixels, k: f, a: weight, b: dy, c: columnGradient)
        col2im(columnGradient, g, inputGradient)
    }
}
