/// im2col and its adjoint col2im for one NCHW image.
///
/// Legend: c, h, w = input channels, height, width; k = kernel size; s = stride; p = padding;
/// oh, ow = output height and width. The column matrix is [c·k·k, oh·ow], row (ci, ky, kx),
/// so a convolution is `output[f, oh·ow] = weight[f, c·k·k] · columns` with `[F, C, K, K]` weights.
/// Credit: the layout of Caffe's and darknet's im2col_cpu.

/// Sizes of one convolution over one image.
struct ConvolutionGeometry: Sendable, Equatable {
    package var channels: Int
    var height: Int
    var width: Int
    var kernelSize: Int
    var stride: Int
    var padding: Int

    var outputHeight: Int { (height + 2 * padding - kernelSize) / stride + 1 }
    var outputWidth: Int { (width + 2 * padding - kernelSize) / stride + 1 }
    /// Rows of the column matrix: c·k·k.
    var patchSize: Int { channels * kernelSize * kernelSize }
    /// Columns of the column matrix: oh·ow.
    var outputPixels: Int { outputHeight * outputWidth }
    var inputPixels: Int { height * width }
    /// A 1×1, stride-1, unpadded kernel reads the image itself as its column matrix.
    var isPointwise: Bool { kernelSize == 1 && stride == 1 && padding == 0 }
    /// Stride 1 and "same" padding (2p = k - 1): output and input planes have one shape, so each
    /// column row is the whole plane shifted by one offset (the fast path below).
    var isSameStrideOne: Bool { stride == 1 && 2 * padding == kernelSize - 1 }
}

/// For a same-padded stride-1 tap (ky, kx): the flat shift of the plane and the valid range of
/// flat output indices; columns whose shifted x falls off the row wrap around and are fixed apart.
@inline(__always)
private func sameTap(_ g: ConvolutionGeometry, _ ky: Int, _ kx: Int) -> (offset: Int, start: Int, end: Int) {
    let n = g.height * g.width
    let offset = (ky - g.padding) * g.width + (kx - g.padding)
    // Clamped to the plane: on planes smaller than the kernel a tap can shift past all of it.
    let start = min(n, max(0, -offset))
    return (offset, start, max(start, min(n, n - offset)))
}

/// Zeroes, in every row of a [h, w] plane, the columns a horizontal shift of `dx` wrapped around.
@inline(__always)
private func zeroWrappedColumns(_ plane: UnsafeMutablePointer<Float>, height: Int, width: Int, dx: Int) {
    guard dx != 0 else { return }
    let columns = dx < 0 ? 0..<min(width, -dx) : max(0, width - dx)..<width
    for y in 0..<height {
        for x in columns { plane[y * width + x] = 0 }
    }
}

/// Unfolds one image [c, h, w] into `columns` [c·k·k, oh·ow]; padding reads as zero.
func im2col(_ image: UnsafePointer<Float>, _ g: ConvolutionGeometry, _ columns: UnsafeMutablePointer<Float>) {
    if g.isSameStrideOne {
        // One long copy per row instead of one short copy per output row.
        let n = g.height * g.width
        var row = columns
        for ci in 0..<g.channels {
            let plane = image + ci * n
            for ky in 0..<g.kernelSize {
                for kx in 0..<g.kernelSize {
                    let (offset, start, end) = sameTap(g, ky, kx)
                    row.update(repeating: 0, count: start)
                    (row + start).update(from: plane + start + offset, count: max(0, end - start))
                    (row + max(start, end)).update(repeating: 0, count: n - max(start, end))
                    zeroWrappedColumns(row, height: g.height, width: g.width, dx: kx - g.padding)
                    row += n
                }
            }
        }
        return
    }
    let (k, s, p, h, w) = (g.kernelSize, g.stride, g.padding, g.height, g.width)
    let (oh, ow) = (g.outputHeight, g.outputWidth)
    var row = columns
    for ci in 0..<g.channels {
        let plane = image + ci * h * w
        for ky in 0..<k {
            for kx in 0..<k {
                // Output columns whose input x = ox·s - p + kx falls inside [0, w).
                let first = min(ow, max(0, (p - kx + s - 1) / s))
                let last = min(ow, max(first, (w + p - kx + s - 1) / s))
                for oy in 0..<oh {
                    let y = oy * s - p + ky
                    let out = row + oy * ow
                    if y < 0 || y >= h {
                        out.update(repeating: 0, count: ow)
                        continue
                    }
                    for ox in 0..<first { out[ox] = 0 }
                    let source = plane + y * w - p + kx
                    if s == 1 {
                        (out + first).update(from: source + first, count: last - first)
                    } else {
                        for ox in first..<last { out[ox] = source[ox * s] }
                    }
                    for ox in last..<ow { out[ox] = 0 }
                }
                row += oh * ow
            }
        }
    }
}

/// The adjoint of `im2col`: adds each column entry back onto the pixel it was read from.
/// Overwrites `image` (it does not accumulate into existing contents). For same-padded stride-1
/// geometries it also zeroes the wrapped-around entries of `columns` (scratch for the caller).
func col2im(_ columns: UnsafeMutablePointer<Float>, _ g: ConvolutionGeometry, _ image: UnsafeMutablePointer<Float>) {
    let (k, s, p, h, w) = (g.kernelSize, g.stride, g.padding, g.height, g.width)
    let (oh, ow) = (g.outputHeight, g.outputWidth)
    image.update(repeating: 0, count: g.channels * h * w)
    if g.isSameStrideOne {
        // Entries that read padding are dropped by zeroing them, then each row adds in one pass.
        let n = h * w
        var row = columns
        for ci in 0..<g.channels {
            let plane = image + ci * n
            for ky in 0..<k {
                for kx in 0..<k {
                    let (offset, start, end) = sameTap(g, ky, kx)
                    zeroWrappedColumns(row, height: h, width: w, dx: kx - p)
                    let target = plane + offset
                    for index in start..<max(start, end) { target[index] += row[index] }
                    row += n
                }
            }
        }
        return
    }
    var row = columns
    for ci in 0..<g.channels {
        let plane = image + ci * h * w
        for ky in 0..<k {
            for kx in 0..<k {
                let first = min(ow, max(0, (p - kx + s - 1) / s))
                let last = min(ow, max(first, (w + p - kx + s - 1) / s))
                for oy in 0..<oh {
                    let y = oy * s - p + ky
                    if y < 0 || y >= h { continue }
                    let source = row + oy * ow
                    let target = plane + y * w - p + kx
                    if s == 1 {
                        for ox in first..<last { target[ox] += source[ox] }
                    } else {
                        for ox in first..<last { target[ox * s] += source[ox] }
                    }
                }
                row += oh * ow
            }
        }
    }
}
