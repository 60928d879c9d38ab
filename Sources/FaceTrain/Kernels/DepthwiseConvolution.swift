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
                    sums.update(repeating: 0, count: plane.rows)
                    for ky in 0..<k {
                        for kx in 0..<k {
                            axpy(weight[(o * k + ky) * k + kx], padded + ky * plane.pitch + kx, sums, count: plane.rows)
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
        // Scratch: the padded input plane, its padded gradient, and dY spread to the plane's pitch.
        withUnsafeTemporaryAllocation(of: Float.self, capacity: 2 * plane.count + plane.rows) { scratch in
            let (padded, paddedGradient) = (scratch.baseAddress!, scratch.baseAddress! + plane.count)
            let spread = paddedGradient + plane.count
            for c in 0..<g.channels {
                plane.fill(padded, from: image + c * g.inputPixels, g)
                paddedGradient.update(repeating: 0, count: plane.count)
                for o in (c * m)..<((c + 1) * m) {
                    let dyPlane = dy + o * oh * ow
                    biasGradient[o] += sum(dyPlane, count: oh * ow)
                    spread.update(repeating: 0, count: plane.rows)
                    for oy in 0..<oh { (spread + oy * plane.pitch).update(from: dyPlane + oy * ow, count: ow) }
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
