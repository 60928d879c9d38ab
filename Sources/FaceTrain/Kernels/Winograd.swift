/// 3×3 stride-1 convolution as Winograd's minimal filtering F(2×2, 3×3) (Lavin and Gray, "Fast
/// Algorithms for Convolutional Neural Networks", 2016), forward and backward.
///
/// Each 2×2 block of outputs (a tile) is `Aᵀ [U ⊙ V] A`, with `U = G g Gᵀ` the 4×4 transform of a 3×3
/// filter and `V = Bᵀ d B` that of the 4×4 input patch under the tile. Summed over input channels the
/// 16 positions ξ of the 4×4 domain become 16 independent matrix products
/// `M[ξ] = U[ξ] · V[ξ]` ([F, C] · [C, T]), which take 16 multiplies per tile and channel pair where
/// im2col's GEMM takes 36: 2.25 times fewer, and the transforms are cheap passes over memory.
/// Backward is the adjoint of every step: `dM = A dY Aᵀ`, `dU[ξ] = dM[ξ] · V[ξ]ᵀ` (then `Gᵀ dU G`),
/// `dV[ξ] = U[ξ]ᵀ · dM[ξ]` (then `B dV Bᵀ`, added onto the overlapping patches).
///
/// Legend: c = input channels, f = output channels, T = tiles (⌈oh/2⌉·⌈ow/2⌉), ξ = 0..<16.
/// Layouts: U [16, F, C], V and dV [16, C, T], M and dM [16, F, T]. The padded plane scratch holds
/// one input channel with the padding (and the tiles' overhang) as zeros.

/// Tiles of one image and the padded plane they read.
struct WinogradGeometry: Sendable, Equatable {
    let convolution: ConvolutionGeometry
    var tileRows: Int { (convolution.outputHeight + 1) / 2 }
    var tileColumns: Int { (convolution.outputWidth + 1) / 2 }
    var tiles: Int { tileRows * tileColumns }
    /// Tiles are transformed 4 at a time (one SIMD4 per value: a register even without AVX, which
    /// the baseline x86-64 build lacks): groups of them in a tile row.
    var tileGroups: Int { (tileColumns + 3) / 4 }
    /// The plane every tile's 4×4 patch lies in: input at offset (p, p), zeros around it, wide
    /// enough for whole groups (a group reads 10 columns).
    var paddedHeight: Int { 2 * tileRows + 2 }
    var paddedWidth: Int { 8 * tileGroups + 2 }

    /// 3×3 kernels at stride 1 with padding up to 2; a handful of input channels is left to im2col,
    /// whose one product is then as cheap as 16 thin ones.
    init?(_ g: ConvolutionGeometry) {
        guard g.kernelSize == 3, g.stride == 1, g.padding <= 2, g.channels >= 8, g.outputHeight > 0,
            g.outputWidth > 0
        else { return nil }
        convolution = g
    }

    /// Floats of V (or dV) for one image: 16·c·T.
    var inputTransformSize: Int { 16 * convolution.channels * tiles }
    /// Floats of M (or dM) for one image: 16·f·T.
    func outputTransformSize(outputChannels f: Int) -> Int { 16 * f * tiles }
    var paddedPlaneSize: Int { paddedHeight * paddedWidth }
}

/// `U[ξ, f, c] = (G g Gᵀ)[ξ]` for weights [F, C, 3, 3].
func winogradFilterTransform(
    weight: UnsafePointer<Float>, outputChannels f: Int, inputChannels c: Int, transformed: UnsafeMutablePointer<Float>
) {
    let plane = f * c
    for pair in 0..<plane {
        let g = weight + pair * 9
        // G g (4×3: one SIMD4 per row, from the filter's rows), then (G g) Gᵀ row by row.
        let (g0, g1, g2) = (SIMD4(g[0], g[1], g[2], 0), SIMD4(g[3], g[4], g[5], 0), SIMD4(g[6], g[7], g[8], 0))
        let rows = (g0, 0.5 * (g0 + g1 + g2), 0.5 * (g0 - g1 + g2), g2)
        @inline(__always) func store(_ row: Int, _ r: SIMD4<Float>) {
            transformed[(row * 4 + 0) * plane + pair] = r[0]
            transformed[(row * 4 + 1) * plane + pair] = 0.5 * (r[0] + r[1] + r[2])
            transformed[(row * 4 + 2) * plane + pair] = 0.5 * (r[0] - r[1] + r[2])
            transformed[(row * 4 + 3) * plane + pair] = r[2]
        }
        store(0, rows.0)
        store(1, rows.1)
        store(2, rows.2)
        store(3, rows.3)
    }
}

/// Adds `Gᵀ dU G` to the weight gradient [F, C, 3, 3]: the adjoint of the filter transform.
func winogradFilterGradient(
    transformedGradient d: UnsafePointer<Float>, outputChannels f: Int, inputChannels c: Int,
    weightGradient: UnsafeMutablePointer<Float>
) {
    let plane = f * c
    for pair in 0..<plane {
        @inline(__always) func row(_ i: Int) -> SIMD4<Float> {
            SIMD4(d[(i * 4) * plane + pair], d[(i * 4 + 1) * plane + pair], d[(i * 4 + 2) * plane + pair],
                d[(i * 4 + 3) * plane + pair])
        }
        let (u0, u1, u2, u3) = (row(0), row(1), row(2), row(3))
        // Gᵀ dU (3×4), then (Gᵀ dU) G.
        let q = (u0 + 0.5 * (u1 + u2), 0.5 * (u1 - u2), 0.5 * (u1 + u2) + u3)
        let dg = weightGradient + pair * 9
        @inline(__always) func add(_ index: Int, _ r: SIMD4<Float>) {
            dg[index * 3] += r[0] + 0.5 * (r[1] + r[2])
            dg[index * 3 + 1] += 0.5 * (r[1] - r[2])
            dg[index * 3 + 2] += 0.5 * (r[1] + r[2]) + r[3]
        }
        add(0, q.0)
        add(1, q.1)
        add(2, q.2)
    }
}

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
private func load8(_ p: UnsafePointer<Float>) -> SIMD8<Float> {
    UnsafeRawPointer(p).loadUnaligned(as: SIMD8<Float>.self)
}

/// The first `count` lanes of a group at `p` (tiles past the row's end are not there).
@inline(__always)
private func load4(_ p: UnsafePointer<Float>, count: Int) -> SIMD4<Float> {
    if count == 4 { return UnsafeRawPointer(p).loadUnaligned(as: SIMD4<Float>.self) }
    var v = SIMD4<Float>()
    for lane in 0..<count { v[lane] = p[lane] }
    return v
}

@inline(__always)
private func store4(_ v: SIMD4<Float>, _ p: UnsafeMutablePointer<Float>, count: Int) {
    if count == 4 {
        UnsafeMutableRawPointer(p).storeBytes(of: v, as: SIMD4<Float>.self)
    } else {
        for lane in 0..<count { p[lane] = v[lane] }
    }
}

/// Lanes of `even` and `odd` alternated: tile k's two columns side by side.
@inline(__always)
private func interleave(_ even: SIMD4<Float>, _ odd: SIMD4<Float>) -> SIMD8<Float> {
    SIMD8(even[0], odd[0], even[1], odd[1], even[2], odd[2], even[3], odd[3])
}

/// `V[ξ, c, t] = (Bᵀ d B)[ξ]` for every channel and tile of one image [c, h, w].
func winogradInputTransform(
    image: UnsafePointer<Float>, geometry w: WinogradGeometry, padded: UnsafeMutablePointer<Float>,
    transformed: UnsafeMutablePointer<Float>
) {
    let g = w.convolution
    let (tiles, tileColumns, pw) = (w.tiles, w.tileColumns, w.paddedWidth)
    let stride = g.channels * tiles
    for channel in 0..<g.channels {
        padPlane(image + channel * g.inputPixels, w, into: padded)
        let out = transformed + channel * tiles
        for tileRow in 0..<w.tileRows {
            let top = UnsafePointer(padded + 2 * tileRow * pw)
            for group in 0..<w.tileGroups {
                let count = min(4, tileColumns - 4 * group)
                let target = out + tileRow * tileColumns + 4 * group
                // Bᵀ d, one patch column j at a time (rows d0 - d2, d1 + d2, d2 - d1, d1 - d3): column j
                // of 4 tiles side by side is the even or odd lanes of 8 plane columns.
                @inline(__always) func column(_ j: Int) -> (SIMD4<Float>, SIMD4<Float>, SIMD4<Float>, SIMD4<Float>) {
                    let offset = 8 * group + (j & 2)
                    @inline(__always) func lane(_ i: Int) -> SIMD4<Float> {
                        let run = load8(top + i * pw + offset)
                        return j & 1 == 0 ? run.evenHalf : run.oddHalf
                    }
                    let (d0, d1, d2, d3) = (lane(0), lane(1), lane(2), lane(3))
                    return (d0 - d2, d1 + d2, d2 - d1, d1 - d3)
                }
                let (c0, c1, c2, c3) = (column(0), column(1), column(2), column(3))
                // Then the same combination across the columns, for each row i of Bᵀ d.
                @inline(__always) func store(_ i: Int, _ a: SIMD4<Float>, _ b: SIMD4<Float>, _ c: SIMD4<Float>, _ d: SIMD4<Float>) {
                    store4(a - c, target + (i * 4) * stride, count: count)
                    store4(b + c, target + (i * 4 + 1) * stride, count: count)
                    store4(c - b, target + (i * 4 + 2) * stride, count: count)
                    store4(b - d, target + (i * 4 + 3) * stride, count: count)
                }
                store(0, c0.0, c1.0, c2.0, c3.0)
                store(1, c0.1, c1.1, c2.1, c3.1)
                store(2, c0.2, c1.2, c2.2, c3.2)
                store(3, c0.3, c1.3, c2.3, c3.3)
            }
        }
    }
}

/// Adds `B dV Bᵀ` of every tile onto the overlapping patches, and writes the input gradient [c, h, w]:
/// the adjoint of `winogradInputTransform` (padding and overhang are dropped).
func winogradInputGradient(
    transformedGradient dv: UnsafePointer<Float>, geometry w: WinogradGeometry, padded: UnsafeMutablePointer<Float>,
    inputGradient: UnsafeMutablePointer<Float>
) {
    let g = w.convolution
    let (tiles, tileColumns, pw) = (w.tiles, w.tileColumns, w.paddedWidth)
    let stride = g.channels * tiles
    for channel in 0..<g.channels {
        padded.update(repeating: 0, count: w.paddedPlaneSize)
        let source = dv + channel * tiles
        for tileRow in 0..<w.tileRows {
            let top = padded + 2 * tileRow * pw
            for group in 0..<w.tileGroups {
                let count = min(4, tileColumns - 4 * group)
                let from = source + tileRow * tileColumns + 4 * group
                // dV Bᵀ, one row i of dV at a time (columns v0, v1 - v2 + v3, v1 + v2 - v0, -v3) ...
                @inline(__always) func row(_ i: Int) -> (SIMD4<Float>, SIMD4<Float>, SIMD4<Float>, SIMD4<Float>) {
                    let v0 = load4(from + (i * 4) * stride, count: count)
                    let v1 = load4(from + (i * 4 + 1) * stride, count: count)
                    let v2 = load4(from + (i * 4 + 2) * stride, count: count)
                    let v3 = load4(from + (i * 4 + 3) * stride, count: count)
                    return (v0, v1 - v2 + v3, v1 + v2 - v0, -v3)
                }
                let (r0, r1, r2, r3) = (row(0), row(1), row(2), row(3))
                // ... then B on the left, added onto the patch row by row; a tile's columns 0-1 and
                // 2-3 go on as two interleaved runs (its right neighbour overlaps the second).
                @inline(__always) func add(_ i: Int, _ a: SIMD4<Float>, _ b: SIMD4<Float>, _ c: SIMD4<Float>, _ d: SIMD4<Float>) {
                    let p = top + i * pw + 8 * group
                    UnsafeMutableRawPointer(p).storeBytes(of: load8(p) + interleave(a, b), as: SIMD8<Float>.self)
                    UnsafeMutableRawPointer(p + 2).storeBytes(of: load8(p + 2) + interleave(c, d), as: SIMD8<Float>.self)
                }
                add(0, r0.0, r0.1, r0.2, r0.3)
                add(1, r1.0 - r2.0 + r3.0, r1.1 - r2.1 + r3.1, r1.2 - r2.2 + r3.2, r1.3 - r2.3 + r3.3)
                add(2, r1.0 + r2.0 - r0.0, r1.1 + r2.1 - r0.1, r1.2 + r2.2 - r0.2, r1.3 + r2.3 - r0.3)
                add(3, -r3.0, -r3.1, -r3.2, -r3.3)
            }
        }
        let plane = inputGradient + channel * g.inputPixels
        for y in 0..<g.height {
            (plane + y * g.width).update(from: padded + (y + g.padding) * pw + g.padding, count: g.width)
        }
    }
}

/// `output[f, oh, ow] = (Aᵀ M A)` of every tile, plus the bias; the overhang of odd sizes is dropped.
func winogradOutputTransform(
    transformed m: UnsafePointer<Float>, geometry w: WinogradGeometry, outputChannels f: Int,
    bias: UnsafePointer<Float>, output: UnsafeMutablePointer<Float>
) {
    let (oh, ow) = (w.convolution.outputHeight, w.convolution.outputWidth)
    let (tiles, tileColumns) = (w.tiles, w.tileColumns)
    let stride = f * tiles
    for channel in 0..<f {
        let source = m + channel * tiles
        let plane = output + channel * oh * ow
        let b = SIMD4<Float>(repeating: bias[channel])
        for tileRow in 0..<w.tileRows {
            for group in 0..<w.tileGroups {
                let count = min(4, tileColumns - 4 * group)
                let from = source + tileRow * tileColumns + 4 * group
                // Aᵀ M one column j at a time (rows m0 + m1 + m2 and m1 - m2 - m3).
                @inline(__always) func column(_ j: Int) -> (SIMD4<Float>, SIMD4<Float>) {
                    let m0 = load4(from + j * stride, count: count)
                    let m1 = load4(from + (4 + j) * stride, count: count)
                    let m2 = load4(from + (8 + j) * stride, count: count)
                    let m3 = load4(from + (12 + j) * stride, count: count)
                    return (m0 + m1 + m2, m1 - m2 - m3)
                }
                let (c0, c1, c2, c3) = (column(0), column(1), column(2), column(3))
                let (y, x) = (2 * tileRow, 8 * group)
                // Then (Aᵀ M) A across the columns, two outputs a tile per row.
                @inline(__always) func write(_ y: Int, _ a: SIMD4<Float>, _ b0: SIMD4<Float>, _ c: SIMD4<Float>, _ d: SIMD4<Float>) {
                    guard y < oh else { return }
                    let run = interleave(a + b0 + c + b, b0 - c - d + b)
                    let p = plane + y * ow + x
                    if x + 8 <= ow {
                        UnsafeMutableRawPointer(p).storeBytes(of: run, as: SIMD8<Float>.self)
                    } else {
                        for lane in 0..<(ow - x) { p[lane] = run[lane] }
                    }
                }
                write(y, c0.0, c1.0, c2.0, c3.0)
                write(y + 1, c0.1, c1.1, c2.1, c3.1)
            }
        }
    }
}

/// `dM = A dY Aᵀ` of every tile of the output gradient [f, oh, ow] (outside the output: zero).
/// `padded` holds one output plane at a time, widened to whole tile groups.
func winogradOutputGradientTransform(
    outputGradient dy: UnsafePointer<Float>, geometry w: WinogradGeometry, outputChannels f: Int,
    padded: UnsafeMutablePointer<Float>, transformed: UnsafeMutablePointer<Float>
) {
    let (oh, ow) = (w.convolution.outputHeight, w.convolution.outputWidth)
    let (tiles, tileColumns) = (w.tiles, w.tileColumns)
    let (rows, width) = (2 * w.tileRows, 8 * w.tileGroups)
    let stride = f * tiles
    for channel in 0..<f {
        let plane = dy + channel * oh * ow
        padded.update(repeating: 0, count: rows * width)
        for y in 0..<oh { (padded + y * width).update(from: plane + y * ow, count: ow) }
        let out = transformed + channel * tiles
        for tileRow in 0..<w.tileRows {
            for group in 0..<w.tileGroups {
                let count = min(4, tileColumns - 4 * group)
                let target = out + tileRow * tileColumns + 4 * group
                let top = load8(padded + 2 * tileRow * width + 8 * group)
                let bottom = load8(padded + (2 * tileRow + 1) * width + 8 * group)
                let (a0, a1, b0, b1) = (top.evenHalf, top.oddHalf, bottom.evenHalf, bottom.oddHalf)
                // A dY on rows (a, a + b, a - b, -b), then (A dY) Aᵀ on columns.
                @inline(__always) func store(_ i: Int, _ r0: SIMD4<Float>, _ r1: SIMD4<Float>) {
                    store4(r0, target + (i * 4) * stride, count: count)
                    store4(r0 + r1, target + (i * 4 + 1) * stride, count: count)
                    store4(r0 - r1, target + (i * 4 + 2) * stride, count: count)
                    store4(-r1, target + (i * 4 + 3) * stride, count: count)
                }
                store(0, a0, a1)
                store(1, a0 + b0, a1 + b1)
                store(2, a0 - b0, a1 - b1)
                store(3, -b0, -b1)
            }
        }
    }
}

/// Scratch floats one image's Winograd forward or backward needs (V, M and a padded plane).
func winogradScratchSize(_ w: WinogradGeometry, outputChannels f: Int) -> Int {
    w.inputTransformSize + w.outputTransformSize(outputChannels: f) + w.paddedPlaneSize
}

/// `output = conv(image) + bias` for one image; `transformedWeight` is `winogradFilterTransform`'s U.
func winogradConvolutionForward(
    image: UnsafePointer<Float>, geometry w: WinogradGeometry, outputChannels f: Int,
    transformedWeight u: UnsafePointer<Float>, bias: UnsafePointer<Float>, scratch: UnsafeMutablePointer<Float>,
    output: UnsafeMutablePointer<Float>
) {
    let (c, tiles) = (w.convolution.channels, w.tiles)
    let v = scratch
    let m = v + w.inputTransformSize
    winogradInputTransform(image: image, geometry: w, padded: m + w.outputTransformSize(outputChannels: f), transformed: v)
    for xi in 0..<16 {
        gemm(
            transposeA: false, transposeB: false, m: f, n: tiles, k: c, a: u + xi * f * c, b: v + xi * c * tiles,
            c: m + xi * f * tiles)
    }
    winogradOutputTransform(transformed: m, geometry: w, outputChannels: f, bias: bias, output: output)
}

/// Backward of one image: adds to `transformedWeightGradient` (dU, in the transform domain: the
/// caller sums it over images and applies `winogradFilterGradient` once) and the bias gradient and,
/// when `inputGradient` is given, writes dImage.
func winogradConvolutionBackward(
    image: UnsafePointer<Float>, geometry w: WinogradGeometry, outputChannels f: Int,
    transformedWeight u: UnsafePointer<Float>, outputGradient dy: UnsafePointer<Float>,
    scratch: UnsafeMutablePointer<Float>, transformedWeightGradient du: UnsafeMutablePointer<Float>,
    biasGradient: UnsafeMutablePointer<Float>, inputGradient: UnsafeMutablePointer<Float>?
) {
    let (c, tiles) = (w.convolution.channels, w.tiles)
    let pixels = w.convolution.outputPixels
    let v = scratch
    let dm = v + w.inputTransformSize
    let padded = dm + w.outputTransformSize(outputChannels: f)
    winogradInputTransform(image: image, geometry: w, padded: padded, transformed: v)
    winogradOutputGradientTransform(
        outputGradient: dy, geometry: w, outputChannels: f, padded: padded, transformed: dm)
    for channel in 0..<f { biasGradient[channel] += sum(dy + channel * pixels, count: pixels) }
    for xi in 0..<16 {
        gemm(
            transposeA: false, transposeB: true, m: f, n: c, k: tiles, a: dm + xi * f * tiles, b: v + xi * c * tiles,
            beta: 1, c: du + xi * f * c)
    }
    guard let inputGradient else { return }
    // dV overwrites V, which the weight gradient no longer needs.
    for xi in 0..<16 {
        gemm(
            transposeA: true, transposeB: false, m: c, n: tiles, k: f, a: u + xi * f * c, b: dm + xi * f * tiles,
            c: v + xi * c * tiles)
    }
    winogradInputGradient(transformedGradient: v, geometry: w, padded: padded, inputGradient: inputGradient)
}
