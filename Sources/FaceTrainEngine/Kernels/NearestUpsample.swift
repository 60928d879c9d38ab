/// Nearest-neighbour upsampling by 2 of NCHW planes and its backward; the arithmetic only (the
/// layer is Layers/Upsample.swift). Not an interpolating resize.
///
/// Legend: planes = N·C, h, w = input height and width; output [planes, 2h, 2w], where output
/// (y, x) is input (y / 2, x / 2) (ONNX Resize nearest, asymmetric, floor).

/// Writes each input value into a 2×2 block of `output` (planes × 2h × 2w values).
func nearestUpsample2x(
    _ input: UnsafePointer<Float>, planes: Int, height h: Int, width w: Int,
    output: UnsafeMutablePointer<Float>
) {
    Parallel.forEach(planes) { plane in
        let x = input + plane * h * w
        let y = output + plane * 4 * h * w
        for row in 0..<h {
            let top = y + 2 * row * 2 * w
            for column in 0..<w {
                let value = x[row * w + column]
                top[2 * column] = value
                top[2 * column + 1] = value
            }
            (top + 2 * w).update(from: top, count: 2 * w)
        }
    }
}

/// dInput: the sum of each 2×2 block of `outputGradient` (planes × 2h × 2w values), written to
/// `inputGradient` (planes × h × w values).
func nearestUpsample2xBackward(
    _ outputGradient: UnsafePointer<Float>, planes: Int, height h: Int, width w: Int,
    inputGradient: UnsafeMutablePointer<Float>
) {
    Parallel.forEach(planes) { plane in
        let dy = outputGradient + plane * 4 * h * w
        let dx = inputGradient + plane * h * w
        for row in 0..<h {
            let (top, bottom) = (dy + 2 * row * 2 * w, dy + (2 * row + 1) * 2 * w)
            for column in 0..<w {
                dx[row * w + column] =
                    (top[2 * column] + top[2 * column + 1]) + (bottom[2 * column] + bottom[2 * column + 1])
            }
        }
    }
}
