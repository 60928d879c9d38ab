/// The centre of NCHW images: `border` rows and columns cut from every edge of each plane.
///
/// Legend: n, c, h, w = images, channels, height, width of the input; b = border. Output
/// [n, c, h - 2b, w - 2b]; row y of an output plane is row y + b of the input from column b on.
func centreCrop(_ images: Tensor, border b: Int) -> Tensor {
    precondition(images.shape.count == 4, "centreCrop takes [N, C, H, W], got \(images.shape)")
    let (n, c, h, w) = (images.shape[0], images.shape[1], images.shape[2], images.shape[3])
    let (oh, ow) = (h - 2 * b, w - 2 * b)
    precondition(b >= 0 && oh > 0 && ow > 0, "a border of \(b) leaves nothing of \(h)x\(w)")
    var output = Tensor(zeros: [n, c, oh, ow])
    images.scalars.withUnsafeBufferPointer { x in
        output.scalars.withUnsafeMutableBufferPointer { y in
            for plane in 0..<(n * c) {
                for row in 0..<oh {
                    let source = x.baseAddress! + plane * h * w + (row + b) * w + b
                    (y.baseAddress! + (plane * oh + row) * ow).update(from: source, count: ow)
                }
            }
        }
    }
    return output
}
