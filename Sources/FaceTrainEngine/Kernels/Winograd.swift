import CVectorKernels

/// 3×3 stride-1 convolution as Winograd's minimal filtering F(4×4, 3×3) (Lavin and Gray, "Fast
/// Algorithms for Convolutional Neural Networks", 2016; interpolation points 0, ±1, ±2, ∞), forward
/// and backward.
///
/// Each 4×4 block of outputs (a tile) is `Aᵀ [U ⊙ V] A`, with `U = G g Gᵀ` the 6×6 transform of a 3×3
/// filter and `V = Bᵀ d B` that of the 6×6 input patch under the tile. Summed over input channels the
/// 36 positions ξ of the 6×6 domain become 36 independent matrix products
/// `M[ξ] = U[ξ] · V[ξ]` ([F, C] · [C, T]): 36 multiplies per tile and channel pair where im2col's
/// GEMM takes 144, and the transforms move 2.25 values per output where F(2×2, 3×3) moved 4.
/// Backward is the adjoint of every step: `dM = A dY Aᵀ`, `dU[ξ] = dM[ξ] · V[ξ]ᵀ` (then `Gᵀ dU G`),
/// `dV[ξ] = U[ξ]ᵀ · dM[ξ]` (then `B dV Bᵀ`, added onto the overlapping patches).
///
/// Legend: c = input channels, f = output channels, T = tiles (⌈oh/4⌉·⌈ow/4⌉) rounded up to a
/// multiple of 4 (`WinogradGeometry.columns`), ξ = 6·row + column.
/// Layouts: U [36, F, C], V and dV [36, C, n·T], M and dM [36, F, n·T] for a group of n images side
/// by side (image i in columns i·T ..< (i+1)·T), so that each product has n·T columns; each position
/// ξ starts `winogradPositionStride` floats after the previous one. The plane scratch holds one input
/// channel with the padding (and the tiles' overhang) as zeros, or one output-gradient channel.

/// Positions of the transform domain: 6×6.
let winogradPositions = 36

/// Floats from one position ξ of U, V or M to the next, for `count` floats a position. A transform
/// writes (or reads) all 36 positions at once: at a stride that is a multiple of 4 KB they all fall
/// in one set of the L1 cache and evict each other; an odd multiple of 64 bytes past a multiple of
/// 128 spreads them over the sets.
func winogradPositionStride(_ count: Int) -> Int { (count + 31) / 32 * 32 + 16 }

/// Tiles of one image, the padded plane they read, and where each tile lies.
///
/// Tiles are transformed 4 at a time, one SIMD4 per value (a register even without AVX, which the
/// baseline x86-64 build lacks), in row-major order across tile rows, so every group is whole: the
/// rows of V and M are `columns` long, the tiles rounded up to a multiple of 4. The few phantom tiles
/// at the end read tile 0's patch (finite values), are never written out, and their output
/// gradient is zero, so they add nothing to the weight or input gradient.
struct WinogradGeometry: Sendable, Equatable {
    let convolution: ConvolutionGeometry
    let tileRows: Int
    let tileColumns: Int
    var tiles: Int { tileRows * tileColumns }
    var columns: Int { (tiles + 3) / 4 * 4 }
    /// The plane every tile's 6×6 patch lies in: input at offset (p, p), zeros around it.
    var paddedHeight: Int { 4 * tileRows + 2 }
    var paddedWidth: Int { 4 * tileColumns + 2 }
    /// The output gradient's plane, widened to whole tiles, with 4 more rows of zeros that the
    /// phantom tiles read.
    var gradientWidth: Int { 4 * tileColumns }
    var gradientHeight: Int { 4 * tileRows + 4 }
    /// Per tile (phantoms included): its patch in the padded plane, its first output, how many of its
    /// 4×4 outputs lie inside the output (rows, columns; 0 rows for phantoms), and its block in the
    /// widened gradient plane.
    let patchOffsets: [Int]
    let outputOffsets: [Int]
    let outputRows: [Int]
    let outputColumns: [Int]
    let gradientOffsets: [Int]

    /// 3×3 kernels at stride 1 with padding up to 2, where the tiles take fewer multiplies than
    /// im2col (not on planes of 2×2 or less); a handful of input channels is left to im2col, whose
    /// one product is then as cheap as 36 thin ones.
    init?(_ g: ConvolutionGeometry) {
        guard Self.suits(kernelSize: g.kernelSize, stride: g.stride, padding: g.padding, channels: g.channels),
            g.outputHeight > 0, g.outputWidth > 0
        else { return nil }
        convolution = g
        (tileRows, tileColumns) = ((g.outputHeight + 3) / 4, (g.outputWidth + 3) / 4)
        guard winogradPositions * tileRows * tileColumns < 9 * g.outputPixels else { return nil }
        let (tiles, columns) = (tileRows * tileColumns, (tileRows * tileColumns + 3) / 4 * 4)
        let (pw, gw) = (4 * tileColumns + 2, 4 * tileColumns)
        // Phantoms: tile 0's patch, no outputs, the zero rows below the gradient plane.
        var (patch, output, rows, outputColumns) = (
            [Int](repeating: 0, count: columns), [Int](repeating: 0, count: columns),
            [Int](repeating: 0, count: columns), [Int](repeating: 0, count: columns)
        )
        var gradient = [Int](repeating: 4 * tileRows * gw, count: columns)
        for tile in 0..<tiles {
            let (row, column) = (tile / tileColumns, tile % tileColumns)
            patch[tile] = 4 * row * pw + 4 * column
            output[tile] = 4 * row * g.outputWidth + 4 * column
            rows[tile] = min(4, g.outputHeight - 4 * row)
            outputColumns[tile] = min(4, g.outputWidth - 4 * column)
            gradient[tile] = 4 * row * gw + 4 * column
        }
        (patchOffsets, outputOffsets, outputRows, self.outputColumns, gradientOffsets) =
            (patch, output, rows, outputColumns, gradient)
    }

    /// Whether a (non-grouped) convolution of this kind runs as Winograd at some input size: the
    /// part of `init`'s rule that does not depend on the planes.
    static func suits(kernelSize: Int, stride: Int, padding: Int, channels: Int) -> Bool {
        kernelSize == 3 && stride == 1 && padding <= 2 && channels >= 8
    }

    /// Floats from one position of V (or dV) to the next, and of all of V, for a group of images.
    func inputStride(images: Int) -> Int { winogradPositionStride(convolution.channels * images * columns) }
    func inputTransformSize(images: Int) -> Int { winogradPositions * inputStride(images: images) }
    /// The same for M (or dM).
    func outputStride(outputChannels f: Int, images: Int) -> Int { winogradPositionStride(f * images * columns) }
    func outputTransformSize(outputChannels f: Int, images: Int) -> Int {
        winogradPositions * outputStride(outputChannels: f, images: images)
    }

    /// Columns the 36 products should have at least: an 8×8 plane has 4 tiles, and a product that
    /// thin spends its time packing its operands, not multiplying. Measured with `facetrain bench`
    /// (ref-small, width 32, train img/s): 520 one image at a time, 662-682 at 64-256 columns.
    static let groupColumns = 128

    /// Images transformed together, at most `available`: enough for `groupColumns` columns.
    func imagesPerGroup(available: Int) -> Int {
        max(1, min(available, (Self.groupColumns + columns - 1) / columns))
    }
    /// Floats of one band's V and M (768 KB: L2 is 1 MB on the Zen 4 and 2 MB on the Xeons facetrain
    /// runs on), and of one image's V and M above which inference bands it (4 MB). Measured on one
    /// core of a Zen 4, one layer at a time: a 160×120 plane of 16 -> 24 channels took 0.80 ms in
    /// bands of 3 tile rows against 1.00 whole (24 -> 24: 0.96 against 1.18), while below about 4 MB
    /// (80×60 and 80×80 planes of 24-40 channels, and every plane of the 80-px base) whole images
    /// were as fast or faster: there the products' longer rows and U read once matter more.
    static let bandFloats = 192 * 1024
    static let bandingThreshold = 1024 * 1024

    /// Tile rows of a band for inference on the C kernels (`facetrain_winograd_forward_bands_avx512` or `_avx2`),
    /// or nil when one image's V and M are below `bandingThreshold`.
    func bandRows(outputChannels f: Int) -> Int? {
        let perRow = winogradPositions * (convolution.channels + f) * tileColumns
        guard perRow * tileRows > Self.bandingThreshold else { return nil }
        return max(1, Self.bandFloats / perRow)
    }

    /// Floats of the plane scratch: the padded input plane or the widened gradient plane.
    var paddedPlaneSize: Int { max(paddedHeight * paddedWidth, gradientHeight * gradientWidth) }
}

// MARK: - The three matrices, as combinations of values (one value per lane: 4 tiles, or scalars)

/// `Bᵀ x` for the 6 values of a patch row or column.
@inline(__always)
private func inputCombination<V: SIMD>(_ x: (V, V, V, V, V, V)) -> (V, V, V, V, V, V) where V.Scalar == Float {
    let (x0, x1, x2, x3, x4, x5) = x
    let (four, five, two) = (V(repeating: 4), V(repeating: 5), V(repeating: 2))
    let a = x4 - four * x2
    let b = x3 - four * x1
    let c = x4 - x2
    let d = two * (x3 - x1)
    return (four * x0 - five * x2 + x4, a + b, a - b, c + d, c - d, four * x1 - five * x3 + x5)
}

/// `B y`: the adjoint of `inputCombination`.
@inline(__always)
private func inputAdjoint<V: SIMD>(_ y: (V, V, V, V, V, V)) -> (V, V, V, V, V, V) where V.Scalar == Float {
    let (y0, y1, y2, y3, y4, y5) = y
    let (four, five, two) = (V(repeating: 4), V(repeating: 5), V(repeating: 2))
    let (plus, minus) = (y1 + y2, y2 - y1)
    let (plus34, minus34) = (y3 + y4, y4 - y3)
    return (
        four * y0,
        four * minus + two * minus34 + four * y5,
        -five * y0 - four * plus - plus34,
        -minus - two * minus34 - five * y5,
        y0 + plus + plus34,
        y5
    )
}

/// `Aᵀ x`: 4 outputs from 6 values.
@inline(__always)
private func outputCombination<V: SIMD>(_ x: (V, V, V, V, V, V)) -> (V, V, V, V) where V.Scalar == Float {
    let (x0, x1, x2, x3, x4, x5) = x
    let (two, four, eight) = (V(repeating: 2), V(repeating: 4), V(repeating: 8))
    let (p12, m12, p34, m34) = (x1 + x2, x1 - x2, x3 + x4, x3 - x4)
    return (x0 + p12 + p34, m12 + two * m34, p12 + four * p34, m12 + eight * m34 + x5)
}

/// `A z`: the adjoint of `outputCombination`, 6 values from 4.
@inline(__always)
private func outputAdjoint<V: SIMD>(_ z: (V, V, V, V)) -> (V, V, V, V, V, V) where V.Scalar == Float {
    let (z0, z1, z2, z3) = z
    let (two, four, eight) = (V(repeating: 2), V(repeating: 4), V(repeating: 8))
    let (even, odd) = (z0 + z2, z1 + z3)
    let (even4, odd4) = (z0 + four * z2, two * z1 + eight * z3)
    return (z0, even + odd, even - odd, even4 + odd4, even4 - odd4, z3)
}

/// `G g`: 6 values from a filter row or column.
@inline(__always)
private func filterCombination(_ g0: Float, _ g1: Float, _ g2: Float) -> (Float, Float, Float, Float, Float, Float) {
    let even = g0 + g2
    return (
        g0 / 4, -(even + g1) / 6, -(even - g1) / 6, g0 / 24 + g1 / 12 + g2 / 6, g0 / 24 - g1 / 12 + g2 / 6, g2
    )
}

/// `Gᵀ u`: the adjoint of `filterCombination`.
@inline(__always)
private func filterAdjoint(_ u: (Float, Float, Float, Float, Float, Float)) -> (Float, Float, Float) {
    let (u0, u1, u2, u3, u4, u5) = u
    let (p12, m12, p34, m34) = (u1 + u2, u2 - u1, u3 + u4, u3 - u4)
    return (u0 / 4 - p12 / 6 + p34 / 24, m12 / 6 + m34 / 12, -p12 / 6 + p34 / 6 + u5)
}

// MARK: - Filters

/// Floats from one position of U (or dU) to the next, and of all of it.
func winogradFilterStride(outputChannels f: Int, inputChannels c: Int) -> Int { winogradPositionStride(f * c) }
func winogradFilterSize(outputChannels f: Int, inputChannels c: Int) -> Int {
    winogradPositions * winogradFilterStride(outputChannels: f, inputChannels: c)
}

/// `U[ξ, f, c] = (G g Gᵀ)[ξ]` for weights [F, C, 3, 3].
func winogradFilterTransform(
    weight: UnsafePointer<Float>, outputChannels f: Int, inputChannels c: Int, transformed: UnsafeMutablePointer<Float>
) {
    let plane = winogradFilterStride(outputChannels: f, inputChannels: c)
    for pair in 0..<f * c {
        let g = weight + pair * 9
        // G g column by column (6×3), then (G g) Gᵀ row by row.
        let columns = (
            filterCombination(g[0], g[3], g[6]), filterCombination(g[1], g[4], g[7]),
            filterCombination(g[2], g[5], g[8])
        )
        @inline(__always) func store(_ row: Int, _ a: Float, _ b: Float, _ c: Float) {
            let u = filterCombination(a, b, c)
            let target = transformed + row * 6 * plane + pair
            (target[0], target[plane], target[2 * plane]) = (u.0, u.1, u.2)
            (target[3 * plane], target[4 * plane], target[5 * plane]) = (u.3, u.4, u.5)
        }
        store(0, columns.0.0, columns.1.0, columns.2.0)
        store(1, columns.0.1, columns.1.1, columns.2.1)
        store(2, columns.0.2, columns.1.2, columns.2.2)
        store(3, columns.0.3, columns.1.3, columns.2.3)
        store(4, columns.0.4, columns.1.4, columns.2.4)
        store(5, columns.0.5, columns.1.5, columns.2.5)
    }
}

/// Adds `Gᵀ dU G` to the weight gradient [F, C, 3, 3]: the adjoint of the filter transform.
func winogradFilterGradient(
    transformedGradient d: UnsafePointer<Float>, outputChannels f: Int, inputChannels c: Int,
    weightGradient: UnsafeMutablePointer<Float>
) {
    let plane = winogradFilterStride(outputChannels: f, inputChannels: c)
    for pair in 0..<f * c {
        // dU G row by row (3 values from each row's 6), then Gᵀ (dU G) column by column.
        @inline(__always) func row(_ k: Int) -> (Float, Float, Float) {
            let s = d + k * 6 * plane + pair
            return filterAdjoint((s[0], s[plane], s[2 * plane], s[3 * plane], s[4 * plane], s[5 * plane]))
        }
        let q = (row(0), row(1), row(2), row(3), row(4), row(5))
        let dg = weightGradient + pair * 9
        let c0 = filterAdjoint((q.0.0, q.1.0, q.2.0, q.3.0, q.4.0, q.5.0))
        let c1 = filterAdjoint((q.0.1, q.1.1, q.2.1, q.3.1, q.4.1, q.5.1))
        let c2 = filterAdjoint((q.0.2, q.1.2, q.2.2, q.3.2, q.4.2, q.5.2))
        dg[0] += c0.0
        dg[1] += c1.0
        dg[2] += c2.0
        dg[3] += c0.1
        dg[4] += c1.1
        dg[5] += c2.1
        dg[6] += c0.2
        dg[7] += c1.2
        dg[8] += c2.2
    }
}

// MARK: - SIMD helpers

/// Copies one channel plane into the padded plane (zeros elsewhere).
@inline(__always)
private func padPlane(_ source: UnsafePointer<Float>, _ w: WinogradGeometry, into padded: UnsafeMutablePointer<Float>) {
    let g = w.convolution
    let (ph, pw) = (w.paddedHeight, w.paddedWidth)
    padded.update(repeating: 0, count: ph * pw)
    let rows = min(g.height, ph - g.padding)
    let columns = min(g.width, pw - g.padding)
    for y in 0..<rows {
        (padded + (y + g.padding) * pw + g.padding).update(from: source + y * g.width, count: columns)
    }
}

@inline(__always)
private func load(_ p: UnsafePointer<Float>) -> SIMD4<Float> {
    UnsafeRawPointer(p).loadUnaligned(as: SIMD4<Float>.self)
}

@inline(__always)
private func store(_ v: SIMD4<Float>, _ p: UnsafeMutablePointer<Float>) {
    UnsafeMutableRawPointer(p).storeBytes(of: v, as: SIMD4<Float>.self)
}

/// Rows become columns: lane k of result j is lane j of `r.k`.
@inline(__always)
private func transpose(
    _ r0: SIMD4<Float>, _ r1: SIMD4<Float>, _ r2: SIMD4<Float>, _ r3: SIMD4<Float>
) -> (SIMD4<Float>, SIMD4<Float>, SIMD4<Float>, SIMD4<Float>) {
    (
        SIMD4(r0[0], r1[0], r2[0], r3[0]), SIMD4(r0[1], r1[1], r2[1], r3[1]),
        SIMD4(r0[2], r1[2], r2[2], r3[2]), SIMD4(r0[3], r1[3], r2[3], r3[3])
    )
}

/// Row `i` of the 6×6 patches of 4 tiles as 6 columns: lane k of column j is `p[offsets[k] + j]`.
@inline(__always)
private func patchRow(_ p: UnsafePointer<Float>, _ o: (Int, Int, Int, Int)) -> (
    SIMD4<Float>, SIMD4<Float>, SIMD4<Float>, SIMD4<Float>, SIMD4<Float>, SIMD4<Float>
) {
    let (c0, c1, c2, c3) = transpose(load(p + o.0), load(p + o.1), load(p + o.2), load(p + o.3))
    return (
        c0, c1, c2, c3, SIMD4(p[o.0 + 4], p[o.1 + 4], p[o.2 + 4], p[o.3 + 4]),
        SIMD4(p[o.0 + 5], p[o.1 + 5], p[o.2 + 5], p[o.3 + 5])
    )
}

@inline(__always)
private func four(_ a: UnsafePointer<Int>, _ group: Int) -> (Int, Int, Int, Int) {
    (a[4 * group], a[4 * group + 1], a[4 * group + 2], a[4 * group + 3])
}

/// Six SIMD4 values of one row or column of the transform domain, kept in a small scratch between
/// the two passes of a transform (36 of them would not fit in registers).
private typealias Six = (SIMD4<Float>, SIMD4<Float>, SIMD4<Float>, SIMD4<Float>, SIMD4<Float>, SIMD4<Float>)

/// Stores column `l` of the transform domain (positions 6k + l, k = 0..<6) for 4 tiles.
@inline(__always)
private func storeColumn(_ v: Six, _ l: Int, _ target: UnsafeMutablePointer<Float>, stride: Int) {
    store(v.0, target + l * stride)
    store(v.1, target + (6 + l) * stride)
    store(v.2, target + (12 + l) * stride)
    store(v.3, target + (18 + l) * stride)
    store(v.4, target + (24 + l) * stride)
    store(v.5, target + (30 + l) * stride)
}

// MARK: - Inputs

/// `V[ξ, c, t] = (Bᵀ d B)[ξ]` for every channel (or those of `channels`) and tile of one image
/// [c, h, w], into its columns of a group of `n` images (`transformed` points at this image's first
/// column). Channels are independent, so workers may each take a range of them.
func winogradInputTransform(
    image: UnsafePointer<Float>, geometry w: WinogradGeometry, images n: Int, padded: UnsafeMutablePointer<Float>,
    transformed: UnsafeMutablePointer<Float>, channels: Range<Int>? = nil,
    kernels: VectorKernels.Level = VectorKernels.level
) {
    let g = w.convolution
    let (columns, pw) = (w.columns, w.paddedWidth)
    let stride = w.inputStride(images: n)
    if kernels != .portable {
        let range = channels ?? 0..<g.channels
        let input = kernels == .avx2 ? facetrain_winograd_input_avx2 : facetrain_winograd_input_avx512
        w.patchOffsets.withUnsafeBufferPointer { offsets in
            input(
                image, g.height, g.width, g.padding, w.paddedHeight, pw, offsets.baseAddress!, columns,
                range.lowerBound, range.upperBound, padded, transformed, n * columns, stride)
        }
        return
    }
    w.patchOffsets.withUnsafeBufferPointer { offsets in
        withUnsafeTemporaryAllocation(of: Six.self, capacity: 6) { rows in
            for channel in channels ?? 0..<g.channels {
                padPlane(image + channel * g.inputPixels, w, into: padded)
                let plane = UnsafePointer(padded)
                for group in 0..<columns / 4 {
                    let o = four(offsets.baseAddress!, group)
                    let target = transformed + channel * n * columns + 4 * group
                    // d B, one patch row at a time (4 tiles in the lanes) ...
                    for i in 0..<6 { rows[i] = inputCombination(patchRow(plane + i * pw, o)) }
                    // ... then Bᵀ (d B), one column at a time; ξ = 6k + l.
                    @inline(__always) func column(_ l: Int, _ x: Six) {
                        storeColumn(inputCombination(x), l, target, stride: stride)
                    }
                    column(0, (rows[0].0, rows[1].0, rows[2].0, rows[3].0, rows[4].0, rows[5].0))
                    column(1, (rows[0].1, rows[1].1, rows[2].1, rows[3].1, rows[4].1, rows[5].1))
                    column(2, (rows[0].2, rows[1].2, rows[2].2, rows[3].2, rows[4].2, rows[5].2))
                    column(3, (rows[0].3, rows[1].3, rows[2].3, rows[3].3, rows[4].3, rows[5].3))
                    column(4, (rows[0].4, rows[1].4, rows[2].4, rows[3].4, rows[4].4, rows[5].4))
                    column(5, (rows[0].5, rows[1].5, rows[2].5, rows[3].5, rows[4].5, rows[5].5))
                }
            }
        }
    }
}

/// Adds `B dV Bᵀ` of every tile onto the overlapping patches, and writes the input gradient [c, h, w]:
/// the adjoint of `winogradInputTransform` (padding and overhang are dropped). The phantom tiles'
/// dV is zero (their dM is), so adding it onto tile 0's patch changes nothing.
func winogradInputGradient(
    transformedGradient dv: UnsafePointer<Float>, geometry w: WinogradGeometry, images n: Int,
    padded: UnsafeMutablePointer<Float>,
    inputGradient: UnsafeMutablePointer<Float>
) {
    let g = w.convolution
    let (columns, pw) = (w.columns, w.paddedWidth)
    let stride = w.inputStride(images: n)
    w.patchOffsets.withUnsafeBufferPointer { offsets in
        withUnsafeTemporaryAllocation(of: Six.self, capacity: 6) { rows in
            for channel in 0..<g.channels {
                padded.update(repeating: 0, count: w.paddedHeight * pw)
                for group in 0..<columns / 4 {
                    let o = four(offsets.baseAddress!, group)
                    let from = dv + channel * n * columns + 4 * group
                    // dV Bᵀ, one row k of dV at a time ...
                    for k in 0..<6 {
                        let row = from + 6 * k * stride
                        rows[k] = inputAdjoint(
                            (
                                load(row), load(row + stride), load(row + 2 * stride), load(row + 3 * stride),
                                load(row + 4 * stride), load(row + 5 * stride)
                            ))
                    }
                    // ... then B on the left, column j at a time, and each tile's 6×6 patch added onto
                    // the plane row by row, one tile after another (their patches overlap).
                    let c = (
                        inputAdjoint((rows[0].0, rows[1].0, rows[2].0, rows[3].0, rows[4].0, rows[5].0)),
                        inputAdjoint((rows[0].1, rows[1].1, rows[2].1, rows[3].1, rows[4].1, rows[5].1)),
                        inputAdjoint((rows[0].2, rows[1].2, rows[2].2, rows[3].2, rows[4].2, rows[5].2)),
                        inputAdjoint((rows[0].3, rows[1].3, rows[2].3, rows[3].3, rows[4].3, rows[5].3)),
                        inputAdjoint((rows[0].4, rows[1].4, rows[2].4, rows[3].4, rows[4].4, rows[5].4)),
                        inputAdjoint((rows[0].5, rows[1].5, rows[2].5, rows[3].5, rows[4].5, rows[5].5))
                    )
                    @inline(__always) func add(_ i: Int, _ x: Six) {
                        let p = padded + i * pw
                        let (t0, t1, t2, t3) = transpose(x.0, x.1, x.2, x.3)
                        @inline(__always) func tile(_ offset: Int, _ t: SIMD4<Float>, _ lane: Int) {
                            store(load(p + offset) + t, p + offset)
                            p[offset + 4] += x.4[lane]
                            p[offset + 5] += x.5[lane]
                        }
                        tile(o.0, t0, 0)
                        tile(o.1, t1, 1)
                        tile(o.2, t2, 2)
                        tile(o.3, t3, 3)
                    }
                    add(0, (c.0.0, c.1.0, c.2.0, c.3.0, c.4.0, c.5.0))
                    add(1, (c.0.1, c.1.1, c.2.1, c.3.1, c.4.1, c.5.1))
                    add(2, (c.0.2, c.1.2, c.2.2, c.3.2, c.4.2, c.5.2))
                    add(3, (c.0.3, c.1.3, c.2.3, c.3.3, c.4.3, c.5.3))
                    add(4, (c.0.4, c.1.4, c.2.4, c.3.4, c.4.4, c.5.4))
                    add(5, (c.0.5, c.1.5, c.2.5, c.3.5, c.4.5, c.5.5))
                }
                let plane = inputGradient + channel * g.inputPixels
                for y in 0..<g.height {
                    (plane + y * g.width).update(from: padded + (y + g.padding) * pw + g.padding, count: g.width)
                }
            }
        }
    }
}

// MARK: - Outputs

/// A block's normalisation, ReLU and optional 2×2 max-pool, folded into the output transform at
/// inference (AVX-512 kernels only): `y = max(0, x·scale + shift)`, pooled into [f, oh/2, ow/2].
struct WinogradActivation {
    let scale: UnsafePointer<Float>
    let shift: UnsafePointer<Float>
    let pool: Bool
}

/// `output[f, oh, ow] = (Aᵀ M A)` of every tile, plus the bias, for every output channel (or those of
/// `channels`); the overhang of sizes that are not multiples of 4, and the phantom tiles, are dropped.
/// With `activation` (which needs `vector`), the activated (and pooled) values instead.
func winogradOutputTransform(
    transformed m: UnsafePointer<Float>, geometry w: WinogradGeometry, images n: Int, outputChannels f: Int,
    bias: UnsafePointer<Float>, output: UnsafeMutablePointer<Float>, channels: Range<Int>? = nil,
    activation: WinogradActivation? = nil, kernels: VectorKernels.Level = VectorKernels.level
) {
    let (oh, ow) = (w.convolution.outputHeight, w.convolution.outputWidth)
    let columns = w.columns
    let stride = w.outputStride(outputChannels: f, images: n)
    if kernels != .portable {
        let range = channels ?? 0..<f
        let outputTransform = kernels == .avx2 ? facetrain_winograd_output_avx2 : facetrain_winograd_output_avx512
        outputTransform(
            m, n * columns, stride, w.tiles, w.tileColumns, oh, ow,
            activation?.pool == true ? (oh / 2) * (ow / 2) : oh * ow,
            bias, activation?.scale, activation?.shift, activation?.pool == true ? 1 : 0, range.lowerBound,
            range.upperBound, output)
        return
    }
    precondition(activation == nil, "the activation is folded into the C output transforms only")
    w.outputOffsets.withUnsafeBufferPointer { offsets in
        w.outputRows.withUnsafeBufferPointer { validRows in
            w.outputColumns.withUnsafeBufferPointer { validColumns in
                for channel in channels ?? 0..<f {
                    let plane = output + channel * oh * ow
                    let b = SIMD4<Float>(repeating: bias[channel])
                    for group in 0..<columns / 4 {
                        let from = m + channel * n * columns + 4 * group
                        // Aᵀ M one column l at a time (4 rows from 6) ...
                        @inline(__always) func column(_ l: Int) -> (
                            SIMD4<Float>, SIMD4<Float>, SIMD4<Float>, SIMD4<Float>
                        ) {
                            let p = from + l * stride
                            return outputCombination(
                                (
                                    load(p), load(p + 6 * stride), load(p + 12 * stride), load(p + 18 * stride),
                                    load(p + 24 * stride), load(p + 30 * stride)
                                ))
                        }
                        let (c0, c1, c2, c3, c4, c5) = (
                            column(0), column(1), column(2), column(3), column(4), column(5)
                        )
                        // ... then (Aᵀ M) A across the columns: row r of each tile's 4×4 outputs.
                        @inline(__always) func write(_ r: Int, _ row: Six) {
                            let o = outputCombination(row)
                            let (t0, t1, t2, t3) = transpose(o.0 + b, o.1 + b, o.2 + b, o.3 + b)
                            @inline(__always) func tile(_ lane: Int, _ t: SIMD4<Float>) {
                                let tile = 4 * group + lane
                                guard r < validRows[tile] else { return }
                                let p = plane + offsets[tile] + r * ow
                                if validColumns[tile] == 4 {
                                    store(t, p)
                                } else {
                                    for x in 0..<validColumns[tile] { p[x] = t[x] }
                                }
                            }
                            tile(0, t0)
                            tile(1, t1)
                            tile(2, t2)
                            tile(3, t3)
                        }
                        write(0, (c0.0, c1.0, c2.0, c3.0, c4.0, c5.0))
                        write(1, (c0.1, c1.1, c2.1, c3.1, c4.1, c5.1))
                        write(2, (c0.2, c1.2, c2.2, c3.2, c4.2, c5.2))
                        write(3, (c0.3, c1.3, c2.3, c3.3, c4.3, c5.3))
                    }
                }
            }
        }
    }
}

/// `dM = A dY Aᵀ` of every tile of the output gradient [f, oh, ow] (outside the output, and for the
/// phantom tiles: zero). `padded` holds one output plane at a time, widened to whole tiles.
func winogradOutputGradientTransform(
    outputGradient dy: UnsafePointer<Float>, geometry w: WinogradGeometry, images n: Int, outputChannels f: Int,
    padded: UnsafeMutablePointer<Float>, transformed: UnsafeMutablePointer<Float>
) {
    let (oh, ow) = (w.convolution.outputHeight, w.convolution.outputWidth)
    let (columns, width) = (w.columns, w.gradientWidth)
    let stride = w.outputStride(outputChannels: f, images: n)
    w.gradientOffsets.withUnsafeBufferPointer { offsets in
        for channel in 0..<f {
            let plane = dy + channel * oh * ow
            padded.update(repeating: 0, count: w.gradientHeight * width)
            for y in 0..<oh { (padded + y * width).update(from: plane + y * ow, count: ow) }
            let source = UnsafePointer(padded)
            for group in 0..<columns / 4 {
                let o = four(offsets.baseAddress!, group)
                let target = transformed + channel * n * columns + 4 * group
                // dY Aᵀ on each of the tiles' 4 rows (6 values from 4 columns) ...
                @inline(__always) func row(_ r: Int) -> Six {
                    let p = source + r * width
                    return outputAdjoint(transpose(load(p + o.0), load(p + o.1), load(p + o.2), load(p + o.3)))
                }
                let (r0, r1, r2, r3) = (row(0), row(1), row(2), row(3))
                // ... then A on the left, column l at a time; ξ = 6k + l.
                @inline(__always) func column(
                    _ l: Int, _ z: (SIMD4<Float>, SIMD4<Float>, SIMD4<Float>, SIMD4<Float>)
                ) {
                    storeColumn(outputAdjoint(z), l, target, stride: stride)
                }
                column(0, (r0.0, r1.0, r2.0, r3.0))
                column(1, (r0.1, r1.1, r2.1, r3.1))
                column(2, (r0.2, r1.2, r2.2, r3.2))
                column(3, (r0.3, r1.3, r2.3, r3.3))
                column(4, (r0.4, r1.4, r2.4, r3.4))
                column(5, (r0.5, r1.5, r2.5, r3.5))
            }
        }
    }
}
