/// Depthwise convolution of one NCHW image, computed directly: each output channel filters one
/// input channel, so there is no sum over channels for a GEMM to exploit (as a GEMM it would be
/// C products of [m, k·k] × [k·k, P], far too thin to pay for im2col).
///
/// Legend: c input channels, m = f / c output channels per input channel (the multiplier), output
/// channel o reads input channel o / m; k kernel, s stride, p padding; oh, ow output size.
/// Shapes: image [c, h, w]; weight [f, 1, k, k]; bias [f]; output and outputGradient [f, oh, ow].
/// Stride 1 copies each input plane into a zero-padded one of pitch W' = w + 2p: every tap (ky, kx)
/// is then one flat, shifted axpy over oh·W' values (the ow valid columns of each row and W' - ow
/// spare ones), in SIMD8 without edge cases. Other strides add a scaled, strided row per tap and
/// output row.

/// Output columns `first..<last` whose input column ox·s - p + kx lies inside the row (as im2col).
@inline(__always)
private func validColumns(_ g: ConvolutionGeometry, _ kx: Int) -> (first: Int, last: Int) {
    let (s, p, ow) = (g.stride, g.padding, g.outputWidth)
    let first = min(ow, max(0, (p - kx + s - 1) / s))
    let last = min(ow, max(first, (g.width + p - kx + s - 1) / s))
    return (first, last)
}

/// `y[i] += a · x[i·stride]` for `count` values.
@inline(__always)
private func addScaled(
    _ x: UnsafePointer<Float>, stride: Int, _ a: Float, to y: UnsafeMutablePointer<Float>, count: Int
) {
    var index = 0
    if stride == 1 {
        let scale = SIMD8<Float>(repeating: a)
        let (source, target) = (UnsafeRawPointer(x), UnsafeMutableRawPointer(y))
        while index + 8 <= count {
            let sum =
                target.loadUnaligned(fromByteOffset: index * 4, as: SIMD8<Float>.self)
                + scale * source.loadUnaligned(fromByteOffset: index * 4, as: SIMD8<Float>.self)
            target.storeBytes(of: sum, toByteOffset: index * 4, as: SIMD8<Float>.self)
            index += 8
        }
    }
    while index < count {
        y[index] += a * x[index * stride]
        index += 1
    }
}

/// `y[i·stride] += a · x[i]` for `count` values (the adjoint of `addScaled`).
@inline(__always)
private func scatterScaled(
    _ x: UnsafePointer<Float>, _ a: Float, to y: UnsafeMutablePointer<Float>, stride: Int, count: Int
) {
    if stride == 1 {
        addScaled(x, stride: 1, a, to: y, count: count)
        return
    }
    for index in 0..<count { y[index * stride] += a * x[index] }
}

/// Σ x[i·stride]·y[i] over `count` values.
@inline(__always)
private func stridedDot(_ x: UnsafePointer<Float>, stride: Int, _ y: UnsafePointer<Float>, count: Int) -> Float {
    if stride == 1 { return dot(x, y, count: count) }
    var total: Float = 0
    for index in 0..<count { total += x[index * stride] * y[index] }
    return total
}

extension ConvolutionGeometry {
    /// An unpadded kernel as large as the plane (a global depthwise convolution, GDConv): one
    /// output per channel, a dot product of the plane with its filter. The padded path would
    /// compute `pitch` outputs per tap to keep one.
    var coversWholePlane: Bool { padding == 0 && kernelSize == height && kernelSize == width }
}

/// Sizes of the zero-padded planes of the stride-1 path.
private struct PaddedPlane {
    let pitch: Int
    /// Padded plane plus k - 1 zeros, so the last tap's flat shift stays inside.
    let count: Int
    /// Flat output positions computed per plane: oh rows of `pitch`.
    let rows: Int

    init(_ g: ConvolutionGeometry) {
        pitch = g.width + 2 * g.padding
        count = (g.height + 2 * g.padding) * pitch + g.kernelSize - 1
        rows = g.outputHeight * pitch
    }

    /// Copies plane [h, w] into `padded` with `p` zeros around it.
    func fill(_ padded: UnsafeMutablePointer<Float>, from plane: UnsafePointer<Float>, _ g: ConvolutionGeometry) {
        padded.update(repeating: 0, count: count)
        for y in 0..<g.height {
            (padded + (y + g.padding) * pitch + g.padding).update(from: plane + y * g.width, count: g.width)
        }
    }
}

/// `y[i] += a · x[i]` for `count` values, SIMD8.
@inline(__always)
private func axpy(_ a: Float, _ x: UnsafePointer<Float>, _ y: UnsafeMutablePointer<Float>, count: Int) {
    addScaled(x, stride: 1, a, to: y, count: count)
}

// 3x3 kernels at stride 1 (every depthwise layer of mobile-face): the nine taps are summed in
// registers, one load per tap and one store per 8 outputs, instead of nine passes over the plane.

/// The nine flat shifts of a 3x3 kernel over a plane of pitch `pitch`, in tap order.
@inline(__always)
private func shifts3x3(_ pitch: Int) -> (Int, Int, Int, Int, Int, Int, Int, Int, Int) {
    (0, 1, 2, pitch, pitch + 1, pitch + 2, 2 * pitch, 2 * pitch + 1, 2 * pitch + 2)
}

/// The flat shift of one tap, for the scalar tails (no array per call on the hot path).
@inline(__always)
private func shift3x3(_ tap: Int, _ pitch: Int) -> Int { (tap / 3) * pitch + tap % 3 }

/// A 3x3 filter's nine weights, each in all eight lanes, in tap order.
private typealias Splats3x3 = (
    SIMD8<Float>, SIMD8<Float>, SIMD8<Float>, SIMD8<Float>, SIMD8<Float>, SIMD8<Float>, SIMD8<Float>, SIMD8<Float>,
    SIMD8<Float>
)

@inline(__always)
private func splats3x3(_ w: UnsafePointer<Float>) -> Splats3x3 {
    (
        SIMD8(repeating: w[0]), SIMD8(repeating: w[1]), SIMD8(repeating: w[2]), SIMD8(repeating: w[3]),
        SIMD8(repeating: w[4]), SIMD8(repeating: w[5]), SIMD8(repeating: w[6]), SIMD8(repeating: w[7]),
        SIMD8(repeating: w[8])
    )
}

/// Σ_tap w[tap] · value(shift(tap)) for eight neighbouring outputs.
@inline(__always)
private func weightedTaps(
    _ w: Splats3x3, _ s: (Int, Int, Int, Int, Int, Int, Int, Int, Int), _ value: (Int) -> SIMD8<Float>
) -> SIMD8<Float> {
    var total = w.0 * value(s.0) + w.1 * value(s.1) + w.2 * value(s.2)
    total += w.3 * value(s.3) + w.4 * value(s.4) + w.5 * value(s.5)
    total += w.6 * value(s.6) + w.7 * value(s.7) + w.8 * value(s.8)
    return total
}

/// `sums[i] = Σ_tap weights[tap] · padded[i + shift(tap)]` for `i < count`.
@inline(__always)
private func filter3x3(
    _ padded: UnsafePointer<Float>, pitch: Int, weights w: UnsafePointer<Float>,
    into sums: UnsafeMutablePointer<Float>, count: Int
) {
    let s = shifts3x3(pitch)
    let (x, splats) = (UnsafeRawPointer(padded), splats3x3(w))
    var i = 0
    while i + 8 <= count {
        let total = weightedTaps(splats, s) { x.loadUnaligned(fromByteOffset: (i + $0) * 4, as: SIMD8<Float>.self) }
        UnsafeMutableRawPointer(sums).storeBytes(of: total, toByteOffset: i * 4, as: SIMD8<Float>.self)
        i += 8
    }
    while i < count {
        var total: Float = 0
        for tap in 0..<9 { total += w[tap] * padded[i + shift3x3(tap, pitch)] }
        sums[i] = total
        i += 1
    }
}

/// `weightGradient[tap] += Σ_i spread[i] · padded[i + shift(tap)]` for the nine taps, in one pass.
@inline(__always)
private func correlate3x3(
    _ spread: UnsafePointer<Float>, _ padded: UnsafePointer<Float>, pitch: Int, count: Int,
    into weightGradient: UnsafeMutablePointer<Float>
) {
    let s = shifts3x3(pitch)
    let (x, d) = (UnsafeRawPointer(padded), UnsafeRawPointer(spread))
    @inline(__always) func at(_ i: Int, _ shift: Int) -> SIMD8<Float> {
        x.loadUnaligned(fromByteOffset: (i + shift) * 4, as: SIMD8<Float>.self)
    }
    var (a0, a1, a2, a3, a4) = (SIMD8<Float>(), SIMD8<Float>(), SIMD8<Float>(), SIMD8<Float>(), SIMD8<Float>())
    var (a5, a6, a7, a8) = (SIMD8<Float>(), SIMD8<Float>(), SIMD8<Float>(), SIMD8<Float>())
    var i = 0
    while i + 8 <= count {
        let g = d.loadUnaligned(fromByteOffset: i * 4, as: SIMD8<Float>.self)
        a0 += g * at(i, s.0)
        a1 += g * at(i, s.1)
        a2 += g * at(i, s.2)
        a3 += g * at(i, s.3)
        a4 += g * at(i, s.4)
        a5 += g * at(i, s.5)
        a6 += g * at(i, s.6)
        a7 += g * at(i, s.7)
        a8 += g * at(i, s.8)
        i += 8
    }
    let sums = (a0.sum(), a1.sum(), a2.sum(), a3.sum(), a4.sum(), a5.sum(), a6.sum(), a7.sum(), a8.sum())
    withUnsafeBytes(of: sums) { lanes in
        for tap in 0..<9 { weightGradient[tap] += lanes.load(fromByteOffset: tap * 4, as: Float.self) }
    }
    while i < count {
        for tap in 0..<9 { weightGradient[tap] += spread[i] * padded[i + shift3x3(tap, pitch)] }
        i += 1
    }
}

/// `paddedGradient[j] += Σ_tap weights[tap] · spread[j - shift(tap)]` for `j < count`: the
/// adjoint of `filter3x3`, gathered (`spread` must be readable 2·pitch + 2 values before its start).
@inline(__always)
private func filterBack3x3(
    _ spread: UnsafePointer<Float>, pitch: Int, weights w: UnsafePointer<Float>,
    adding paddedGradient: UnsafeMutablePointer<Float>, count: Int
) {
    let s = shifts3x3(pitch)
    let (d, splats) = (UnsafeRawPointer(spread), splats3x3(w))
    let target = UnsafeMutableRawPointer(paddedGradient)
    var j = 0
    while j + 8 <= count {
        let taps = weightedTaps(splats, s) { d.loadUnaligned(fromByteOffset: (j - $0) * 4, as: SIMD8<Float>.self) }
        let total = target.loadUnaligned(fromByteOffset: j * 4, as: SIMD8<Float>.self) + taps
        target.storeBytes(of: total, toByteOffset: j * 4, as: SIMD8<Float>.self)
        j += 8
    }
    while j < count {
        for tap in 0..<9 { paddedGradient[j] += w[tap] * spread[j - shift3x3(tap, pitch)] }
        j += 1
    }
}

/// `output[o] = bias[o] + Σ_taps weight[o, tap] · shifted input channel o / m`.
func depthwiseConvolutionForward(
    image: UnsafePointer<Float>, geometry g: ConvolutionGeometry, multiplier m: Int,
    weight: UnsafePointer<Float>, bias: UnsafePointer<Float>, output: UnsafeMutablePointer<Float>
) {
    let (k, s, p, w) = (g.kernelSize, g.stride, g.padding, g.width)
    if g.coversWholePlane {
        for o in 0..<(g.channels * m) {
            output[o] = bias[o] + dot(weight + o * k * k, image + (o / m) * g.inputPixels, count: k * k)
        }
        return
    }
    if s == 1 {
        let plane = PaddedPlane(g)
        let (oh, ow) = (g.outputHeight, g.outputWidth)
        withUnsafeTemporaryAllocation(of: Float.self, capacity: plane.count + plane.rows) { scratch in
            let (padded, sums) = (scratch.baseAddress!, scratch.baseAddress! + plane.count)
            for c in 0..<g.channels {
                plane.fill(padded, from: image + c * g.inputPixels, g)
                for o in (c * m)..<((c + 1) * m) {
                    if k == 3 {
                        filter3x3(padded, pitch: plane.pitch, weights: weight + o * 9, into: sums, count: plane.rows)
                    } else {
                        sums.update(repeating: 0, count: plane.rows)
                        for ky in 0..<k {
                            for kx in 0..<k {
                                axpy(
                                    weight[(o * k + ky) * k + kx], padded + ky * plane.pitch + kx, sums,
                                    count: plane.rows)
                            }
                        }
                    }
                    let out = output + o * oh * ow
                    for oy in 0..<oh {
                        for ox in 0..<ow { out[oy * ow + ox] = bias[o] + sums[oy * plane.pitch + ox] }
                    }
                }
            }
        }
        return
    }
    let (oh, ow) = (g.outputHeight, g.outputWidth)
    for o in 0..<(g.channels * m) {
        let plane = image + (o / m) * g.inputPixels
        let out = output + o * oh * ow
        out.update(repeating: bias[o], count: oh * ow)
        for ky in 0..<k {
            for kx in 0..<k {
                let a = weight[(o * k + ky) * k + kx]
                let (first, last) = validColumns(g, kx)
                guard last > first else { continue }
                for oy in 0..<oh {
                    let y = oy * s - p + ky
                    guard y >= 0, y < g.height else { continue }
                    addScaled(
                        plane + y * w + first * s - p + kx, stride: s, a, to: out + oy * ow + first,
                        count: last - first)
                }
            }
        }
    }
}

/// Adds this image's weight and bias gradients and, when `inputGradient` is given, writes dImage
/// (overwriting it): `dWeight[o, tap] += Σ dY[o]·shifted x`, `dBias[o] += Σ dY[o]`,
/// `dImage[c] = Σ_{o of c, taps} weight[o, tap] · dY[o] shifted back`.
func depthwiseConvolutionBackward(
    image: UnsafePointer<Float>, geometry g: ConvolutionGeometry, multiplier m: Int,
    weight: UnsafePointer<Float>, outputGradient dy: UnsafePointer<Float>,
    weightGradient: UnsafeMutablePointer<Float>, biasGradient: UnsafeMutablePointer<Float>,
    inputGradient: UnsafeMutablePointer<Float>?
) {
    let (k, s, p, w) = (g.kernelSize, g.stride, g.padding, g.width)
    let (oh, ow) = (g.outputHeight, g.outputWidth)
    if g.coversWholePlane {
        let taps = k * k
        inputGradient?.update(repeating: 0, count: g.channels * g.inputPixels)
        for o in 0..<(g.channels * m) {
            let (plane, gradient) = ((o / m) * g.inputPixels, dy[o])
            biasGradient[o] += gradient
            axpy(gradient, image + plane, weightGradient + o * taps, count: taps)
            if let inputGradient { axpy(gradient, weight + o * taps, inputGradient + plane, count: taps) }
        }
        return
    }
    if s == 1 {
        let plane = PaddedPlane(g)
        // Scratch: the padded input plane, its padded gradient, and dY spread to the plane's pitch
        // (behind `margin` zeros, so the 3x3 path can read it shifted back by any tap).
        let margin = (k - 1) * (plane.pitch + 1)
        let spreadCount = margin + plane.count + 8
        withUnsafeTemporaryAllocation(of: Float.self, capacity: 2 * plane.count + spreadCount) { scratch in
            let (padded, paddedGradient) = (scratch.baseAddress!, scratch.baseAddress! + plane.count)
            let spreadBase = paddedGradient + plane.count
            let spread = spreadBase + margin
            spreadBase.update(repeating: 0, count: spreadCount)
            for c in 0..<g.channels {
                plane.fill(padded, from: image + c * g.inputPixels, g)
                paddedGradient.update(repeating: 0, count: plane.count)
                for o in (c * m)..<((c + 1) * m) {
                    let dyPlane = dy + o * oh * ow
                    biasGradient[o] += sum(dyPlane, count: oh * ow)
                    // Columns ow..<pitch of each row stay zero from the first fill.
                    for oy in 0..<oh { (spread + oy * plane.pitch).update(from: dyPlane + oy * ow, count: ow) }
                    if k == 3 {
                        correlate3x3(
                            spread, padded, pitch: plane.pitch, count: plane.rows, into: weightGradient + o * 9)
                        if inputGradient != nil {
                            filterBack3x3(
                                spread, pitch: plane.pitch, weights: weight + o * 9, adding: paddedGradient,
                                count: plane.count)
                        }
                        continue
                    }
                    for ky in 0..<k {
                        for kx in 0..<k {
                            let (tap, shift) = ((o * k + ky) * k + kx, ky * plane.pitch + kx)
                            weightGradient[tap] += dot(spread, padded + shift, count: plane.rows)
                            if inputGradient != nil {
                                axpy(weight[tap], spread, paddedGradient + shift, count: plane.rows)
                            }
                        }
                    }
                }
                guard let inputGradient else { continue }
                let dx = inputGradient + c * g.inputPixels
                for y in 0..<g.height {
                    (dx + y * w).update(from: paddedGradient + (y + p) * plane.pitch + p, count: w)
                }
            }
        }
        return
    }
    for c in 0..<g.channels {
        let plane = image + c * g.inputPixels
        let dx = inputGradient.map { $0 + c * g.inputPixels }
        dx?.update(repeating: 0, count: g.inputPixels)
        for o in (c * m)..<((c + 1) * m) {
            let dyPlane = dy + o * oh * ow
            biasGradient[o] += sum(dyPlane, count: oh * ow)
            for ky in 0..<k {
                for kx in 0..<k {
                    let tap = (o * k + ky) * k + kx
                    let (first, last) = validColumns(g, kx)
                    guard last > first else { continue }
                    var total: Float = 0
                    for oy in 0..<oh {
                        let y = oy * s - p + ky
                        guard y >= 0, y < g.height else { continue }
                        let offset = y * w + first * s - p + kx
                        let row = dyPlane + oy * ow + first
                        total += stridedDot(plane + offset, stride: s, row, count: last - first)
                        if let dx { scatterScaled(row, weight[tap], to: dx + offset, stride: s, count: last - first) }
                    }
                    weightGradient[tap] += total
                }
            }
        }
    }
}
