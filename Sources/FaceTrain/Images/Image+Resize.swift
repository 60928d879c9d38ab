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
        let horizontal = ResamplingTable(source: w, target: tw)
        let vertical = ResamplingTable(source: h, target: th)

        // Pass 1, along rows: h x w x c bytes -> h x tw x c floats.
        let rowLength = tw * c
        var intermediate = [Float](repeating: 0, count: h * rowLength)
        pixels.withUnsafeBufferPointer { source in
            intermediate.withUnsafeMutableBufferPointer { target in
                horizontal.weights.withUnsafeBufferPointer { weights in
                    horizontal.starts.withUnsafeBufferPointer { starts in
                        let taps = horizontal.taps
                        for y in 0..<h {
                            let sourceRow = y * w * c
                            let targetRow = y * rowLength
                            for x in 0..<tw {
                                let first = sourceRow + starts[x] * c
                                let weightRow = x * taps
                                for k in 0..<c {
                                    var sum: Float = 0
                                    for t in 0..<taps {
                                        sum += weights[weightRow + t] * Float(source[first + t * c + k])
                                    }
                                    target[targetRow + x * c + k] = sum
                                }
                            }
                        }
                    }
                }
            }
        }

        // Pass 2, along columns: whole rows of h x tw x c floats -> th x tw x c bytes.
        let output = [UInt8](unsafeUninitializedCapacity: th * rowLength) { target, count in
            var accumulator = [Float](repeating: 0, count: rowLength)
            intermediate.withUnsafeBufferPointer { source in
                accumulator.withUnsafeMutableBufferPointer { sum in
                    vertical.weights.withUnsafeBufferPointer { weights in
                        for y in 0..<th {
                            for i in 0..<rowLength { sum[i] = 0 }
                            for t in 0..<vertical.taps {
                                let weight = weights[y * vertical.taps + t]
                                if weight == 0 { continue }
                                let row = (vertical.starts[y] + t) * rowLength
                                for i in 0..<rowLength { sum[i] += weight * source[row + i] }
                            }
                            let targetRow = y * rowLength
                            for i in 0..<rowLength {
                                target[targetRow + i] = UInt8(min(max(sum[i] + 0.5, 0), 255))
                            }
                        }
                    }
                }
            }
            count = th * rowLength
        }
        return Image(width: tw, height: th, channels: c, pixels: output)
    }
}

/// For each target index along one axis: the first source index and `taps` weights for consecutive sources.
///
/// Every row has the same number of taps (unused ones have weight 0), so the loops above have no branches.
struct ResamplingTable {
    let taps: Int
    let starts: [Int]
    let weights: [Float]

    init(source: Int, target: Int) {
        var contributions: [[(index: Int, weight: Double)]] = []
        contributions.reserveCapacity(target)
        let scale = Double(source) / Double(target)
        for i in 0..<target {
            if target < source {
                let low = Double(i) * scale
                let high = Double(i + 1) * scale
                var row: [(index: Int, weight: Double)] = []
                for j in Int(low.rounded(.down))..<min(Int(high.rounded(.up)), source) {
                    let overlap = min(Double(j + 1), high) - max(Double(j), low)
                    if overlap > 0 { row.append((j, overlap / scale)) }
                }
                contributions.append(row)
            } else if target > source {
                let x = min(max((Double(i) + 0.5) * scale - 0.5, 0), Double(source - 1))
                let left = Int(x.rounded(.down))
                let fraction = x - Double(left)
                contributions.append(
                    left + 1 < source && fraction > 0
                        ? [(left, 1 - fraction), (left + 1, fraction)] : [(left, 1)])
            } else {
                contributions.append([(i, 1)])
            }
        }
        let taps = min(contributions.map(\.count).max() ?? 1, source)
        var starts = [Int](repeating: 0, count: target)
        var weights = [Float](repeating: 0, count: target * taps)
        for (i, row) in contributions.enumerated() {
            // Shift the window left at the far edge so all taps stay inside the source.
            let start = min(row[0].index, source - taps)
            let total = row.reduce(0) { $0 + $1.weight }
            for (index, weight) in row { weights[i * taps + index - start] = Float(weight / total) }
            starts[i] = start
        }
        self.taps = taps
        self.starts = starts
        self.weights = weights
    }
}
