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
        tensor = Self.tensor(
            resized, left: 0, top: 0, canvasWidth: width, canvasHeight: height, canvasValue: 0, stride: stride,
            input: input)
        placement = LetterboxTransform(
            scale: (Double(width) / Double(photo.width) + Double(height) / Double(photo.height)) / 2)
        photoWidth = photo.width
        photoHeight = photo.height
    }

    /// `photo` as it is (already at the network's scale, 1 or 3 channels) with its top-left corner
    /// at (`left`, `top`) of a `canvasWidth` x `canvasHeight` canvas of `canvasValue` (raw 0...255),
    /// then padded like any photo: what the face check pads a crop into, built in one pass instead of
    /// a padded copy of the image and its conversion. `placement` maps the photo itself (scale 1);
    /// the caller takes the offset off.
    package init(
        photo: Image, left: Int, top: Int, canvasWidth: Int, canvasHeight: Int, canvasValue: Float, stride: Int,
        input: InputSpecification
    ) {
        precondition(photo.channels == 1 || photo.channels == 3, "\(photo.channels) channels: convert to 1 or 3 first")
        precondition(left >= 0 && top >= 0 && left + photo.width <= canvasWidth && top + photo.height <= canvasHeight)
        tensor = Self.tensor(
            photo, left: left, top: top, canvasWidth: canvasWidth, canvasHeight: canvasHeight, canvasValue: canvasValue,
            stride: stride, input: input)
        placement = LetterboxTransform(scale: 1)
        photoWidth = photo.width
        photoHeight = photo.height
    }

    /// [1, 3, H, W] with H and W the canvas's sides rounded up to `stride`: the photo's pixels
    /// (a grey one feeds all three channels), the canvas around it, mid-grey right and below it,
    /// each value normalised as `value * scale + bias` (the same expression for every value, so a
    /// pixel gets the same float wherever it lies).
    private static func tensor(
        _ photo: Image, left: Int, top: Int, canvasWidth: Int, canvasHeight: Int, canvasValue: Float, stride: Int,
        input: InputSpecification
    ) -> Tensor {
        let paddedWidth = (canvasWidth + stride - 1) / stride * stride
        let paddedHeight = (canvasHeight + stride - 1) / stride * stride
        let plane = paddedWidth * paddedHeight
        let (width, height, channels) = (photo.width, photo.height, photo.channels)
        var scalars = [Float](repeating: 0, count: 3 * plane)
        photo.pixels.withUnsafeBufferPointer { pixels in
            scalars.withUnsafeMutableBufferPointer { target in
                for channel in 0..<3 {
                    let (gain, bias) = (input.scale, input.bias[channel])
                    let (outside, canvas) = (DetectionResampling.outsideValue * gain + bias, canvasValue * gain + bias)
                    let destination = target.baseAddress! + channel * plane
                    // A grey photo feeds all three channels.
                    let source = pixels.baseAddress! + min(channel, channels - 1)
                    for y in 0..<paddedHeight {
                        let row = destination + y * paddedWidth
                        guard y < canvasHeight else {
                            row.update(repeating: outside, count: paddedWidth)
                            continue
                        }
                        row.update(repeating: canvas, count: canvasWidth)
                        (row + canvasWidth).update(repeating: outside, count: paddedWidth - canvasWidth)
                        guard y >= top && y < top + height else { continue }
                        var pixel = source + (y - top) * width * channels
                        let target = row + left
                        for x in 0..<width {
                            target[x] = Float(pixel.pointee) * gain + bias
                            pixel += channels
                        }
                    }
                }
            }
        }
        return Tensor(shape: [1, 3, paddedHeight, paddedWidth], scalars: scalars)
    }
}
