import FaceTrainEngine

// Separable resampling, one axis at a time, each axis choosing its own filter:
//   shrinking: exact box filter (area averaging). Output pixel i covers the source interval
//              [i * s, (i + 1) * s) with s = source / target, and every source pixel counts by the
//              fraction of it inside that interval, so no source pixel is skipped (no aliasing).
//   enlarging: bilinear between pixel centres (source x = (i + 0.5) * s - 0.5, clamped at the edges).
// Legend: w, h, c = source width, height, channels; tw, th = target width, height.

extension Image {
    /// This image scaled to `width` x `height`: area averaging along an axis that shrinks, bilinear along one
    /// that grows. Both sizes must be positive.
    public func resized(width targetWidth: Int, height targetHeight: Int) -> Image {
        precondition(targetWidth > 0 && targetHeight > 0, "cannot resize to \(targetWidth) x \(targetHeight)")
        if targetWidth == width && targetHeight == height { return self }
        let (w, h, c, tw, th) = (width, height, channels, targetWidth, targetHeight)
        // The vertical pass runs over whole rows and vectorises; the horizontal one does not, so it goes
        // second when the height shrinks (fewer rows left for it) and first when the height grows.
        // The first pass reads the bytes directly: no float copy of a large source image.
        let horizontal = ResamplingTable(source: w, target: tw)
        let vertical = ResamplingTable(source: h, target: th)
        let samples: [Float]
        if th <= h {
            let rows = Self.resampleRows(pixels, rowLength: w * c, table: vertical)
            samples = Self.resamplePixels(rows, rows: th, channels: c, table: horizontal)
        } else {
            let columns = Self.resamplePixels(pixels, rows: h, channels: c, table: horizontal)
            samples = Self.resampleRows(columns, rowLength: tw * c, table: vertical)
        }
        let output = [UInt8](unsafeUninitializedCapacity: samples.count) { target, count in
            samples.withUnsafeBufferPointer { source in
                for i in 0..<source.count { target[i] = UInt8(min(max(source[i] + 0.5, 0), 255)) }
            }
            count = samples.count
        }
        return Image(width: tw, height: th, channels: c, pixels: output)
    }

    /// Vertical pass: each target row is a weighted sum of whole source rows of `rowLength` samples.
    private static func resampleRows<Sample: ResamplingSample>(
        _ samples: [Sample], rowLength: Int, table: ResamplingTable
    ) -> [Float] {
        var output = [Float](repeating: 0, count: table.target * rowLength)
        samples.withUnsafeBufferPointer { source in
            output.withUnsafeMutableBufferPointer { target in
                table.weights.withUnsafeBufferPointer { weights in
                    for y in 0..<table.target {
                        let targetRow = y * rowLength
                        for t in 0..<table.taps {
                            let weight = weights[y * table.taps + t]
                            if weight == 0 { continue }
                            let sourceRow = (table.starts[y] + t) * rowLength
                            for i in 0..<rowLength {
                                target[targetRow + i] += weight * source[sourceRow + i].floatValue
                            }
                        }
                    }
                }
            }
        }
        return output
    }

    /// Horizontal pass: each target pixel of each of `rows` rows is a weighted sum of neighbouring pixels.
    private static func resamplePixels<Sample: ResamplingSample>(
        _ samples: [Sample], rows: Int, channels c: Int, table: ResamplingTable
    ) -> [Float] {
        let (sourceLength, targetLength, taps) = (table.source * c, table.target * c, table.taps)
        var output = [Float](repeating: 0, count: rows * targetLength)
        samples.withUnsafeBufferPointer { source in
            output.withUnsafeMutableBufferPointer { target in
                table.weights.withUnsafeBufferPointer { weights in
                    table.starts.withUnsafeBufferPointer { starts in
                        for y in 0..<rows {
                            for x in 0..<table.target {
                                let first = y * sourceLength + starts[x] * c
                                let out = y * targetLength + x * c
                                // Sums live in registers; grey and RGB get their own loops so they stay there.
                                switch c {
                                case 1:
                                    var sum: Float = 0
                                    for t in 0..<taps { sum += weights[x * taps + t] * source[first + t].floatValue }
                                    target[out] = sum
                                case 3:
                                    var (red, green, blue): (Float, Float, Float) = (0, 0, 0)
                                    for t in 0..<taps {
                                        let weight = weights[x * taps + t]
                                        let pixel = first + 3 * t
                                        red += weight * source[pixel].floatValue
                                        green += weight * source[pixel + 1].floatValue
                                        blue += weight * source[pixel + 2].floatValue
                                    }
                                    (target[out], target[out + 1], target[out + 2]) = (red, green, blue)
                                default:
                                    for t in 0..<taps {
                                        let weight = weights[x * taps + t]
                                        for k in 0..<c {
                                            target[out + k] += weight * source[first + t * c + k].floatValue
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        return output
    }
}

/// A sample type a resampling pass can read: the image's bytes, or the floats of a first pass.
protocol ResamplingSample {
    var floatValue: Float { get }
}

extension UInt8: ResamplingSample {
    var floatValue: Float { Float(self) }
}

extension Float: ResamplingSample {
    var floatValue: Float { self }
}

/// For each target index along one axis: the first source index and `taps` weights for consecutive sources.
///
/// Every row has the same number of taps (unused ones have weight 0), so the loops above have no branches.
struct ResamplingTable {
    let source: Int
    let target: Int
    let taps: Int
    let starts: [Int]
    let weights: [Float]

    init(source: Int, target: Int) {
        let scale = Double(source) / Double(target)
        // A box of width `scale` touches at most ceil(scale) + 1 source pixels; bilinear touches 2.
        let taps = min(source, target < source ? Int(scale.rounded(.up)) + 1 : 2)
        var starts = [Int](repeating: 0, count: target)
        var weights = [Float](repeating: 0, count: target * taps)
        for i in 0..<target {
            if target < source {
                let low = Double(i) * scale
                let high = Double(i + 1) * scale
                let first = Int(low.rounded(.down))
                let last = min(Int(high.rounded(.up)), source) - 1
                // Shift the window left at the far edge so all taps stay inside the source.
                let start = min(first, source - taps)
                for j in first...min(last, start + taps - 1) {
                    let overlap = min(Double(j + 1), high) - max(Double(j), low)
                    weights[i * taps + j - start] = Float(max(overlap, 0) / scale)
                }
                starts[i] = start
            } else {
                let x = min(max((Double(i) + 0.5) * scale - 0.5, 0), Double(source - 1))
                let left = Int(x.rounded(.down))
                let fraction = x - Double(left)
                let start = min(left, source - taps)
                weights[i * taps + left - start] = Float(1 - fraction)
                if fraction > 0 { weights[i * taps + left + 1 - start] = Float(fraction) }
                starts[i] = start
            }
        }
        self.source = source
        self.target = target
        self.taps = taps
        self.starts = starts
        self.weights = weights
    }
}

extension Image {
    /// This image mirrored left to right.
    public func mirroredHorizontally() -> Image {
        var output = pixels
        let rowLength = width * channels
        for y in 0..<height {
            for x in 0..<width {
                for channel in 0..<channels {
                    output[y * rowLength + x * channels + channel] =
                        pixels[y * rowLength + (width - 1 - x) * channels + channel]
                }
            }
        }
        return Image(width: width, height: height, channels: channels, pixels: output)
    }
}
