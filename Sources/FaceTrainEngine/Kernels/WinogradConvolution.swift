import CVectorKernels

/// Winograd F(4×4, 3×3) convolution, forward and backward, from the pieces of Winograd.swift (its
/// geometry, layouts and transforms): the scratch of a group of images, the 36 products, and the
/// order of the steps, for a group of images on one worker or one image shared by all. Not the
/// transforms themselves, nor the choice of when Winograd runs (ConvolutionBlock).

/// Scratch floats a group of `images` images needs in Winograd's forward or backward (V, M and a
/// plane).
func winogradScratchSize(_ w: WinogradGeometry, outputChannels f: Int, images: Int) -> Int {
    w.inputTransformSize(images: images) + w.outputTransformSize(outputChannels: f, images: images)
        + w.paddedPlaneSize
}

/// Where a group's V (or dV), M (or dM) and plane lie in its scratch (`winogradScratchSize`), and
/// the position strides of U, V and M.
private struct WinogradWorkspace {
    let uStride: Int
    let vStride: Int
    let mStride: Int
    let v: UnsafeMutablePointer<Float>
    let m: UnsafeMutablePointer<Float>
    let plane: UnsafeMutablePointer<Float>

    init(_ w: WinogradGeometry, outputChannels f: Int, images: Int, scratch: UnsafeMutablePointer<Float>) {
        uStride = winogradFilterStride(outputChannels: f, inputChannels: w.convolution.channels)
        (vStride, mStride) = (w.inputStride(images: images), w.outputStride(outputChannels: f, images: images))
        v = scratch
        m = v + w.inputTransformSize(images: images)
        plane = m + w.outputTransformSize(outputChannels: f, images: images)
    }
}

/// `M[ξ] = U[ξ] · V[ξ]` for the 36 positions ξ, rows `outputChannels` of M only: with `packed` U
/// (`facetrain_winograd_pack`, inference on the C kernels) the C kernel, one call for all positions; else
/// OpenBLAS, one product per position. The two round differently (the kernel's sums are fused
/// multiply-adds in channel order), which the comparisons with im2col allow for; the kernel gives
/// the same bits however the rows are split, OpenBLAS not always.
private func winogradProducts(
    _ u: UnsafePointer<Float>, packed: Bool, _ work: WinogradWorkspace, channels c: Int, columns: Int,
    outputChannels f: Int, rows: Range<Int>
) {
    if packed {
        let products =
            VectorKernels.level == .avx2 ? facetrain_winograd_products_avx2 : facetrain_winograd_products_avx512
        products(
            u, f, work.v, work.vStride, work.m, work.mStride, c, columns, rows.lowerBound, rows.upperBound)
        return
    }
    let outputChannels = rows
    let first = outputChannels.lowerBound
    for xi in 0..<winogradPositions {
        gemm(
            transposeA: false, transposeB: false, m: outputChannels.count, n: columns, k: c,
            a: u + xi * work.uStride + first * c, b: work.v + xi * work.vStride,
            c: work.m + xi * work.mStride + first * columns)
    }
}

/// `output = conv(images) + bias` for `count` consecutive images [n, c, h, w] into [n, f, oh, ow],
/// transformed side by side (one product per position for all of them); `transformedWeight` is
/// `winogradFilterTransform`'s U.
func winogradConvolutionForward(
    images: UnsafePointer<Float>, count: Int, geometry w: WinogradGeometry, outputChannels f: Int,
    transformedWeight u: UnsafePointer<Float>, packed: Bool = false, bias: UnsafePointer<Float>,
    scratch: UnsafeMutablePointer<Float>, activation: WinogradActivation? = nil, output: UnsafeMutablePointer<Float>
) {
    let (c, tiles, columns) = (w.convolution.channels, w.columns, count * w.columns)
    let pooled = activation?.pool == true ? 4 : 1
    let (inputSize, outputSize) = (c * w.convolution.inputPixels, f * w.convolution.outputPixels / pooled)
    let work = WinogradWorkspace(w, outputChannels: f, images: count, scratch: scratch)
    for image in 0..<count {
        winogradInputTransform(
            image: images + image * inputSize, geometry: w, images: count, padded: work.plane,
            transformed: work.v + image * tiles)
    }
    winogradProducts(u, packed: packed, work, channels: c, columns: columns, outputChannels: f, rows: 0..<f)
    for image in 0..<count {
        winogradOutputTransform(
            transformed: work.m + image * tiles, geometry: w, images: count, outputChannels: f, bias: bias,
            output: output + image * outputSize, activation: activation)
    }
}

/// `winogradConvolutionForward` of one image with its work shared by `parts` workers: the input
/// channels, then the output channels (products and output transform), each split into ranges;
/// `finish` runs on the worker that wrote a range of output channels, with that range (the block's
/// normalisation and pooling of those channels). The transforms are the unshared forward's calls;
/// the products too with packed U, whose sums do not depend on the rows asked for, while OpenBLAS
/// may round a product of fewer rows differently (its Prescott and Haswell kernels do): the same
/// output to float rounding. Batch-1 inference (a photo being recognised, an embedding asked for)
/// would otherwise leave all cores but one idle. `scratch` holds `winogradSharedScratchSize` floats.
func winogradConvolutionForwardShared(
    image: UnsafePointer<Float>, geometry w: WinogradGeometry, outputChannels f: Int,
    transformedWeight u: UnsafePointer<Float>, packed: Bool = false, bias: UnsafePointer<Float>,
    scratch: UnsafeMutablePointer<Float>, parts: Int, activation: WinogradActivation? = nil,
    output: UnsafeMutablePointer<Float>,
    finish: (Range<Int>) -> Void
) {
    let c = w.convolution.channels
    let work = WinogradWorkspace(w, outputChannels: f, images: 1, scratch: scratch)
    let channelRanges = Parallel.ranges(c, parts: parts)
    Parallel.forEach(channelRanges.count) { part in
        winogradInputTransform(
            image: image, geometry: w, images: 1, padded: work.plane + part * w.paddedPlaneSize,
            transformed: work.v, channels: channelRanges[part])
    }
    // Products and output transform by output channels: no worker waits for another between them.
    // Packed U comes in blocks of rows, which the ranges keep whole.
    let block = packed ? Int(FACETRAIN_WINOGRAD_ROW_BLOCK) : 1
    let outputRanges = Parallel.ranges((f + block - 1) / block, parts: parts).map {
        $0.lowerBound * block..<min(f, $0.upperBound * block)
    }
    Parallel.forEach(outputRanges.count) { part in
        winogradProducts(
            u, packed: packed, work, channels: c, columns: w.columns, outputChannels: f, rows: outputRanges[part])
        winogradOutputTransform(
            transformed: work.m, geometry: w, images: 1, outputChannels: f, bias: bias, output: output,
            channels: outputRanges[part], activation: activation)
        finish(outputRanges[part])
    }
}

/// `winogradConvolutionForward` of one image at inference on the C kernels (U packed), band
/// by band (`WinogradGeometry.bandRows`) over the tile rows `tileRows` (all of them, or a worker's
/// share: bands are independent): the same bits as the three steps over the whole image.
/// `scratch` holds `winogradBandScratchSize` floats.
func winogradConvolutionForwardBands(
    image: UnsafePointer<Float>, geometry w: WinogradGeometry, outputChannels f: Int,
    packedWeight: UnsafePointer<Float>,
    bias: UnsafePointer<Float>, activation: WinogradActivation?, bandRows: Int, tileRows: Range<Int>,
    scratch: UnsafeMutablePointer<Float>, output: UnsafeMutablePointer<Float>,
    kernels: VectorKernels.Level = VectorKernels.level
) {
    let g = w.convolution
    let bands =
        kernels == .avx2
        ? facetrain_winograd_forward_bands_avx2 : facetrain_winograd_forward_bands_avx512
    bands(
        image, g.channels, g.height, g.width, g.padding, g.outputHeight, g.outputWidth, w.tileColumns, packedWeight, f,
        bias, activation?.scale, activation?.shift, activation?.pool == true ? 1 : 0, bandRows, tileRows.lowerBound,
        tileRows.upperBound, scratch, output)
}

/// Scratch floats of `winogradConvolutionForwardBands` (a band's V, M, plane and patch offsets).
func winogradBandScratchSize(_ w: WinogradGeometry, outputChannels f: Int, bandRows: Int) -> Int {
    facetrain_winograd_band_scratch_size(w.convolution.channels, f, w.tileColumns, bandRows)
}

/// Scratch floats of `winogradConvolutionForwardShared`: one image's V and M, and a plane per part.
func winogradSharedScratchSize(_ w: WinogradGeometry, outputChannels f: Int, parts: Int) -> Int {
    winogradScratchSize(w, outputChannels: f, images: 1) + (parts - 1) * w.paddedPlaneSize
}

/// Backward of `count` consecutive images: adds to `transformedWeightGradient` (dU, in the
/// transform domain: the caller sums it over groups and applies `winogradFilterGradient` once) and
/// the bias gradient and, when `inputGradient` is given, writes dImages.
func winogradConvolutionBackward(
    images: UnsafePointer<Float>, count: Int, geometry w: WinogradGeometry, outputChannels f: Int,
    transformedWeight u: UnsafePointer<Float>, outputGradient dy: UnsafePointer<Float>,
    scratch: UnsafeMutablePointer<Float>, transformedWeightGradient du: UnsafeMutablePointer<Float>,
    biasGradient: UnsafeMutablePointer<Float>, inputGradient: UnsafeMutablePointer<Float>?
) {
    let (c, tiles, columns) = (w.convolution.channels, w.columns, count * w.columns)
    let pixels = w.convolution.outputPixels
    let (inputSize, outputSize) = (c * w.convolution.inputPixels, f * pixels)
    let work = WinogradWorkspace(w, outputChannels: f, images: count, scratch: scratch)
    for image in 0..<count {
        winogradInputTransform(
            image: images + image * inputSize, geometry: w, images: count, padded: work.plane,
            transformed: work.v + image * tiles)
        winogradOutputGradientTransform(
            outputGradient: dy + image * outputSize, geometry: w, images: count, outputChannels: f,
            padded: work.plane, transformed: work.m + image * tiles)
        let dyi = dy + image * outputSize
        for channel in 0..<f { biasGradient[channel] += sum(dyi + channel * pixels, count: pixels) }
    }
    for xi in 0..<winogradPositions {
        gemm(
            transposeA: false, transposeB: true, m: f, n: c, k: columns, a: work.m + xi * work.mStride,
            b: work.v + xi * work.vStride,
            beta: 1, c: du + xi * work.uStride)
    }
    guard let inputGradient else { return }
    // dV overwrites V, which the weight gradient no longer needs.
    for xi in 0..<winogradPositions {
        gemm(
            transposeA: true, transposeB: false, m: c, n: columns, k: f, a: u + xi * work.uStride,
            b: work.m + xi * work.mStride,
            c: work.v + xi * work.vStride)
    }
    for image in 0..<count {
        winogradInputGradient(
            transformedGradient: work.v + image * tiles, geometry: w, images: count, padded: work.plane,
            inputGradient: inputGradient + image * inputSize)
    }
}
