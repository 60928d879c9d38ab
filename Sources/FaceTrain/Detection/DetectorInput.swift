import FaceTrainEngine

/// A photo of any size made into the detector's input: shrunk so its longer side is at most
/// `maximumSide` (never enlarged: the detector learnt faces at the photos' own scale), padded right
/// and bottom with mid-grey to multiples of the network's coarsest stride, normalised. Not the
/// decoding of the photo (Images) and not the decoding of the heads (DetectionDecoder).
package struct DetectorInput: Sendable {
    /// The network input [1, 3, height, width].
    package let tensor: Tensor
    /// Input pixel = photo pixel x scale (the padding lies right and below, outside the photo).
    package let placement: LetterboxTransform
    /// The photo's own size.
    package let photoWidth: Int
    package let photoHeight: Int

    /// `stride` is the network's coarsest stride (32 for the detectors facetrain builds).
    package init(photo: Image, maximumSide: Int, stride: Int, input: InputSpecification) {
        precondition(maximumSide >= stride && stride > 0, "maximum side \(maximumSide) below stride \(stride)")
        let longer = max(photo.width, photo.height)
        let scale = longer > maximumSide ? Double(maximumSide) / Double(longer) : 1
        let width = max(1, Int((Double(photo.width) * scale).rounded()))
        let height = max(1, Int((Double(photo.height) * scale).rounded()))
        let resized = photo.resized(width: width, height: height)
        let paddedWidth = (width + stride - 1) / stride * stride
        let paddedHeight = (height + stride - 1) / stride * stride
        let plane = paddedWidth * paddedHeight
        var scalars = [Float](repeating: 0, count: 3 * plane)
        resized.pixels.withUnsafeBufferPointer { pixels in
            scalars.withUnsafeMutableBufferPointer { target in
                for channel in 0..<3 {
                    let (gain, bias) = (input.scale, input.bias[channel])
                    let destination = target.baseAddress! + channel * plane
                    destination.update(repeating: DetectionResampling.outsideValue * gain + bias, count: plane)
                    // A grey photo feeds all three channels.
                    let source = min(channel, resized.channels - 1)
                    for y in 0..<height {
                        for x in 0..<width {
                            let value = Float(pixels[(y * width + x) * resized.channels + source])
                            destination[y * paddedWidth + x] = value * gain + bias
                        }
                    }
                }
            }
        }
        tensor = Tensor(shape: [1, 3, paddedHeight, paddedWidth], scalars: scalars)
        // The scale applied per axis differs from `scale` by rounding; their mean keeps boxes within
        // half a pixel.
        placement = LetterboxTransform(
            scale: (Double(width) / Double(photo.width) + Double(height) / Double(photo.height)) / 2)
        photoWidth = photo.width
        photoHeight = photo.height
    }
}
