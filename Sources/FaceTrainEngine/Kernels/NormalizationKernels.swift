/// Fused batch-norm, ReLU and pooling kernels for one image.
///
/// Legend: c = channels, h, w = conv output height and width, P = h·w. Inputs x are the conv
/// output [c, h, w] of one image. The normalisation is folded into `scale[c]` = γ·invstd and
/// `shift[c]` = β - mean·scale, so `y = max(0, x·scale + shift)`.
/// Backward writes dX of batch norm: dx = a[c]·x + b[c] + scale[c]·dz, where dz is the gradient
/// reaching the ReLU output's pre-activation and a, b fold the batch-mean terms (see
/// `BatchNormGradientCoefficients`).

/// Per channel: mean and Σ(x - mean)² of one image (two passes over cache-resident data, so the
/// variance has no cancellation).
func channelMoments(
    _ x: UnsafePointer<Float>, channels: Int, pixels: Int,
    means: UnsafeMutablePointer<Float>, squaredDeviations: UnsafeMutablePointer<Float>
) {
    for channel in 0..<channels {
        let row = x + channel * pixels
        let mean = sum(row, count: pixels) / Float(pixels)
        means[channel] = mean
        squaredDeviations[channel] = sumOfSquaredDeviations(row, count: pixels, center: mean)
    }
}

/// `y = max(0, x·scale + shift)` for one image, full size.
func normalizeReLU(
    _ x: UnsafePointer<Float>, channels: Int, pixels: Int,
    scale: UnsafePointer<Float>, shift: UnsafePointer<Float>, output: UnsafeMutablePointer<Float>
) {
    for channel in 0..<channels {
        let (s, t) = (scale[channel], shift[channel])
        let row = x + channel * pixels
        let out = output + channel * pixels
        for index in 0..<pixels { out[index] = max(0, row[index] * s + t) }
    }
}

/// Mean over pixels of `max(0, x·scale + shift)`: one value per channel (global average pool).
func normalizeReLUAverage(
    _ x: UnsafePointer<Float>, channels: Int, pixels: Int,
    scale: UnsafePointer<Float>, shift: UnsafePointer<Float>, output: UnsafeMutablePointer<Float>
) {
    for channel in 0..<channels {
        let (s, t) = (scale[channel], shift[channel])
        let row = x + channel * pixels
        // Eight interleaved partial sums: independent adds the compiler keeps in one vector.
        var partial = SIMD8<Float>()
        var index = 0
        while index + 8 <= pixels {
            for lane in 0..<8 {
                let value = row[index + lane] * s + t
                partial[lane] += value > 0 ? value : 0
            }
            index += 8
        }
        var total = partial.sum()
        while index < pixels {
            total += max(0, row[index] * s + t)
            index += 1
        }
        output[channel] = total / Float(pixels)
    }
}

/// 2×2 stride-2 max pool of `max(0, x·scale + shift)`; h and w must be even.
///
/// `argmax` (optional) receives the winner of each window as 0…3 (row-major in the window; the
/// first of equal values wins, as in PyTorch). Written as plain selects so LLVM vectorises it.
func normalizeReLUMaxPool2x2(
    _ x: UnsafePointer<Float>, channels: Int, height: Int, width: Int,
    scale: UnsafePointer<Float>, shift: UnsafePointer<Float>,
    output: UnsafeMutablePointer<Float>, argmax: UnsafeMutablePointer<UInt8>?
) {
    let (oh, ow) = (height / 2, width / 2)
    for channel in 0..<channels {
        let (s, t) = (scale[channel], shift[channel])
        let plane = x + channel * height * width
        for oy in 0..<oh {
            let row0 = plane + 2 * oy * width
            let row1 = row0 + width
            let out = output + (channel * oh + oy) * ow
            if let argmax {
                let winners = argmax + (channel * oh + oy) * ow
                for ox in 0..<ow {
                    let a = row0[2 * ox] * s + t
                    let b = row0[2 * ox + 1] * s + t
                    let c = row1[2 * ox] * s + t
                    let d = row1[2 * ox + 1] * s + t
                    let upper = b > a ? b : a
                    let lower = d > c ? d : c
                    let upperIndex: UInt8 = b > a ? 1 : 0
                    let lowerIndex: UInt8 = d > c ? 3 : 2
                    let best = lower > upper ? lower : upper
                    winners[ox] = lower > upper ? lowerIndex : upperIndex
                    out[ox] = best > 0 ? best : 0
                }
            } else {
                for ox in 0..<ow {
                    let a = row0[2 * ox] * s + t
                    let b = row0[2 * ox + 1] * s + t
                    let c = row1[2 * ox] * s + t
                    let d = row1[2 * ox + 1] * s + t
                    let upper = b > a ? b : a
                    let lower = d > c ? d : c
                    let best = lower > upper ? lower : upper
                    out[ox] = best > 0 ? best : 0
                }
            }
        }
    }
}

/// Offset of window entry `index` (0…3) of pooled pixel (oy, ox) in a [h, w] plane.
@inline(__always)
private func windowOffset(_ oy: Int, _ ox: Int, _ index: UInt8, width: Int) -> Int {
    (2 * oy + Int(index >> 1)) * width + 2 * ox + Int(index & 1)
}

/// Batch-norm backward sums through max-pool 2×2 and ReLU for one image:
/// `sumGradient[c] = Σ dz`, `sumGradientTimesX[c] = Σ dz·(x - mean)`, where dz is the pooled gradient
/// routed to its window's winner when the pooled output is positive.
func maxPool2x2ReLUGradientSums(
    _ x: UnsafePointer<Float>, channels: Int, height: Int, width: Int,
    pooledOutput: UnsafePointer<Float>, pooledGradient: UnsafePointer<Float>, argmax: UnsafePointer<UInt8>,
    mean: UnsafePointer<Float>, sumGradient: UnsafeMutablePointer<Float>, sumGradientTimesX: UnsafeMutablePointer<Float>
) {
    let (oh, ow) = (height / 2, width / 2)
    for channel in 0..<channels {
        let mu = mean[channel]
        let plane = x + channel * height * width
        let base = channel * oh * ow
        var g: Float = 0
        var gx: Float = 0
        for oy in 0..<oh {
            for ox in 0..<ow {
                let q = base + oy * ow + ox
                guard pooledOutput[q] > 0 else { continue }
                let dz = pooledGradient[q]
                g += dz
                gx += dz * (plane[windowOffset(oy, ox, argmax[q], width: width)] - mu)
            }
        }
        sumGradient[channel] = g
        sumGradientTimesX[channel] = gx
    }
}

/// dx = a·x + b + scale·dz through max-pool 2×2 and ReLU, for one image.
func maxPool2x2ReLUNormalizeBackward(
    _ x: UnsafePointer<Float>, channels: Int, height: Int, width: Int,
    pooledOutput: UnsafePointer<Float>, pooledGradient: UnsafePointer<Float>, argmax: UnsafePointer<UInt8>,
    coefficients: BatchNormGradientCoefficients, inputGradient: UnsafeMutablePointer<Float>
) {
    let (oh, ow, pixels) = (height / 2, width / 2, height * width)
    for channel in 0..<channels {
        let (a, b, s) = (coefficients.a[channel], coefficients.b[channel], coefficients.scale[channel])
        let plane = x + channel * pixels
        let dx = inputGradient + channel * pixels
        for index in 0..<pixels { dx[index] = a * plane[index] + b }
        let base = channel * oh * ow
        for oy in 0..<oh {
            for ox in 0..<ow {
                let q = base + oy * ow + ox
                guard pooledOutput[q] > 0 else { continue }
                dx[windowOffset(oy, ox, argmax[q], width: width)] += s * pooledGradient[q]
            }
        }
    }
}

/// Batch-norm backward sums through ReLU (output kept full size) for one image.
func reluGradientSums(
    _ x: UnsafePointer<Float>, channels: Int, pixels: Int,
    output: UnsafePointer<Float>, outputGradient: UnsafePointer<Float>,
    mean: UnsafePointer<Float>, sumGradient: UnsafeMutablePointer<Float>, sumGradientTimesX: UnsafeMutablePointer<Float>
) {
    // Eight lanes per sum: a scalar loop waits on one add chain (planes of 32×32 made it a hot spot).
    let (rx, ry, rdy) = (UnsafeRawPointer(x), UnsafeRawPointer(output), UnsafeRawPointer(outputGradient))
    for channel in 0..<channels {
        let mu = mean[channel]
        let offset = channel * pixels
        var (g8, gx8) = (SIMD8<Float>(), SIMD8<Float>())
        let (zero, mu8) = (SIMD8<Float>(), SIMD8<Float>(repeating: mu))
        var index = offset
        while index + 8 <= offset + pixels {
            let passed = ry.loadUnaligned(fromByteOffset: index * 4, as: SIMD8<Float>.self) .> zero
            let dy = zero.replacing(
                with: rdy.loadUnaligned(fromByteOffset: index * 4, as: SIMD8<Float>.self), where: passed)
            g8 += dy
            gx8 += dy * (rx.loadUnaligned(fromByteOffset: index * 4, as: SIMD8<Float>.self) - mu8)
            index += 8
        }
        var (g, gx) = (g8.sum(), gx8.sum())
        while index < offset + pixels {
            if output[index] > 0 {
                g += outputGradient[index]
                gx += outputGradient[index] * (x[index] - mu)
            }
            index += 1
        }
        sumGradient[channel] = g
        sumGradientTimesX[channel] = gx
    }
}

/// dx = a·x + b + scale·dz through ReLU (output kept full size), for one image.
func reluNormalizeBackward(
    _ x: UnsafePointer<Float>, channels: Int, pixels: Int,
    output: UnsafePointer<Float>, outputGradient: UnsafePointer<Float>,
    coefficients: BatchNormGradientCoefficients, inputGradient: UnsafeMutablePointer<Float>
) {
    // Eight lanes with a mask: the compiler leaves the branchy scalar form unvectorised.
    let (rx, ry, rdy) = (UnsafeRawPointer(x), UnsafeRawPointer(output), UnsafeRawPointer(outputGradient))
    let target = UnsafeMutableRawPointer(inputGradient)
    let zero = SIMD8<Float>()
    for channel in 0..<channels {
        let (a, b, s) = (coefficients.a[channel], coefficients.b[channel], coefficients.scale[channel])
        let (a8, b8, s8) = (SIMD8<Float>(repeating: a), SIMD8<Float>(repeating: b), SIMD8<Float>(repeating: s))
        let offset = channel * pixels
        var index = offset
        while index + 8 <= offset + pixels {
            let passed = ry.loadUnaligned(fromByteOffset: index * 4, as: SIMD8<Float>.self) .> zero
            let dz = zero.replacing(
                with: s8 * rdy.loadUnaligned(fromByteOffset: index * 4, as: SIMD8<Float>.self), where: passed)
            let dx = a8 * rx.loadUnaligned(fromByteOffset: index * 4, as: SIMD8<Float>.self) + b8 + dz
            target.storeBytes(of: dx, toByteOffset: index * 4, as: SIMD8<Float>.self)
            index += 8
        }
        while index < offset + pixels {
            inputGradient[index] = a * x[index] + b + (output[index] > 0 ? s * outputGradient[index] : 0)
            index += 1
        }
    }
}

/// Batch-norm backward sums through ReLU and global average pooling for one image; the
/// gradient of the pooled value is spread evenly, dz = dPooled / P where the ReLU passed.
func reluAverageGradientSums(
    _ x: UnsafePointer<Float>, channels: Int, pixels: Int,
    scale: UnsafePointer<Float>, shift: UnsafePointer<Float>, pooledGradient: UnsafePointer<Float>,
    mean: UnsafePointer<Float>, sumGradient: UnsafeMutablePointer<Float>, sumGradientTimesX: UnsafeMutablePointer<Float>
) {
    for channel in 0..<channels {
        let (s, t, mu) = (scale[channel], shift[channel], mean[channel])
        let dz = pooledGradient[channel] / Float(pixels)
        let row = x + channel * pixels
        var count: Float = 0
        var sx: Float = 0
        for index in 0..<pixels where row[index] * s + t > 0 {
            count += 1
            sx += row[index] - mu
        }
        sumGradient[channel] = dz * count
        sumGradientTimesX[channel] = dz * sx
    }
}

/// dx = a·x + b + scale·dz through ReLU and global average pooling, for one image.
func reluAverageNormalizeBackward(
    _ x: UnsafePointer<Float>, channels: Int, pixels: Int,
    shift: UnsafePointer<Float>, pooledGradient: UnsafePointer<Float>,
    coefficients: BatchNormGradientCoefficients, inputGradient: UnsafeMutablePointer<Float>
) {
    for channel in 0..<channels {
        let (a, b, s) = (coefficients.a[channel], coefficients.b[channel], coefficients.scale[channel])
        let t = shift[channel]
        let dz = s * pooledGradient[channel] / Float(pixels)
        let offset = channel * pixels
        for index in offset..<(offset + pixels) {
            inputGradient[index] = a * x[index] + b + (x[index] * s + t > 0 ? dz : 0)
        }
    }
}

/// Per-channel constants of the batch-norm input gradient, dx = a·x + b + scale·dz.
///
/// With M values per channel, x̂ = (x - μ)·σ⁻¹, Σdz and Σdz·x̂ over the batch:
/// dx = γσ⁻¹·(dz - Σdz/M - x̂·Σ(dz·x̂)/M), so a = -γσ⁻²·Σ(dz·x̂)/M and
/// b = -γσ⁻¹·Σdz/M - a·μ. (Derivation: e.g. Ioffe & Szegedy 2015, or llm.c's layernorm_backward.)
struct BatchNormGradientCoefficients {
    var a: [Float]
    var b: [Float]
    package var scale: [Float]

    /// From the batch sums Σdz and Σdz·(x - μ).
    init(
        gamma: UnsafePointer<Float>, mean: [Float], inverseStandardDeviation: [Float],
        sumGradient: [Double], sumGradientTimesCenteredX: [Double], valuesPerChannel: Int
    ) {
        let count = mean.count
        a = [Float](repeating: 0, count: count)
        b = [Float](repeating: 0, count: count)
        scale = [Float](repeating: 0, count: count)
        let m = Double(valuesPerChannel)
        for channel in 0..<count {
            let invstd = Double(inverseStandardDeviation[channel])
            let mu = Double(mean[channel])
            let sumXHat = sumGradientTimesCenteredX[channel] * invstd
            let s = Double(gamma[channel]) * invstd
            let aValue = -s * invstd * sumXHat / m
            scale[channel] = Float(s)
            a[channel] = Float(aValue)
            b[channel] = Float(-s * sumGradient[channel] / m - aValue * mu)
        }
    }
}
