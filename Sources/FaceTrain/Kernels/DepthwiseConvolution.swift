/// Depthwise convolution of one NCHW image, computed directly: each output channel filters one
/// input channel, so there is no sum over channels for a GEMM to exploit (as a GEMM it would be
/// C products of [m, k·k] × [k·k, P], far too thin to pay for im2col).
///
/// Legend: c input channels, m = f / c output channels per input channel (the multiplier), output
/// channel o reads input channel o / m; k kernel, s stride, p padding; oh, ow output size.
/// Shapes: image [c, h, w]; weight [f, 1, k, k]; bias [f]; output and outputGradient [f, oh, ow].
/// Every tap (ky, kx) adds a scaled, shifted row of the input to a row of the output, so the inner
/// loops run over contiguous rows (SIMD8 for stride 1).

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

/// `output[o] = bias[o] + Σ_taps weight[o, tap] · shifted input channel o / m`.
func depthwiseConvolutionForward(
    image: UnsafePointer<Float>, geometry g: ConvolutionGeometry, multiplier m: Int,
    weight: UnsafePointer<Float>, bias: UnsafePointer<Float>, output: UnsafeMutablePointer<Float>
) {
    let (k, s, p, w) = (g.kernelSize, g.stride, g.padding, g.width)
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
