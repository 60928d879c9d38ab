import FaceTrainEngine
import Foundation

/// The random square crops a face detector trains on, cut from whole photos: scale, position, flip,
/// blur, colour, brightness and greyscale, with every face's box and landmarks carried through the
/// same geometry. Not the decoding of photos (Images), not which faces are too small to learn or
/// the loss (DetectionAssignment, DetectionLoss), and not the letterbox of inference (DetectorInput).
///
/// A crop's side is a share `u` of the photo's shorter side; `u` above 1 takes grey around the
/// photo. Resized to `outputSize`, faces appear at `outputSize / (u * shorter side)` times their
/// size in the photo, so the list of shares decides which face sizes the detector sees most.
package struct DetectionAugmentation: Codable, Sendable, Equatable {
    /// Side of the square training input, in pixels (a multiple of 32: the coarsest stride).
    package var outputSize = 320
    /// Crop sides as shares of the photo's shorter side, drawn uniformly.
    package var cropShares: [Double] = [0.3, 0.45, 0.6, 0.8, 1.0, 1.2]
    package var horizontalFlip = true
    /// Largest brightness shift, in 8-bit levels.
    package var brightness: Double = 32
    /// Largest contrast change (0.5 = a factor in 0.5...1.5).
    package var contrast: Double = 0.5
    /// Largest saturation change (0.5 = a factor in 0.5...1.5 of the distance from grey).
    package var saturation: Double = 0.5
    /// Share of crops turned to luma: grey photos and studio sets have no colour to lean on.
    package var greyscaleShare: Double = 0.15
    /// Share of crops blurred with a Gaussian of sigma in `blurSigma`: phone crops are often soft.
    package var blurShare: Double = 0.2
    package var blurSigma: ClosedRange<Double> = 0.5...2.0
    /// Share of learnt faces partly covered by a patch (DetectionResampling.occlude): hands, cups,
    /// hair and other heads hide parts of faces in photos, and a detector that saw only whole faces
    /// scores them low.
    package var occlusionShare: Double = 0
    /// Faces lower than this (crop pixels) are never covered: a patch over a few pixels hides the
    /// whole face rather than a part of it.
    package static let occlusionMinimumHeight = 16.0
    package init() {}

    private enum CodingKeys: String, CodingKey {
        case outputSize, cropShares, horizontalFlip, brightness, contrast, saturation, greyscaleShare, blurShare
        case blurSigma, occlusionShare
    }

    /// Recipes written before a field existed read as the value they were trained with.
    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        outputSize = try container.decode(Int.self, forKey: .outputSize)
        cropShares = try container.decode([Double].self, forKey: .cropShares)
        horizontalFlip = try container.decode(Bool.self, forKey: .horizontalFlip)
        brightness = try container.decode(Double.self, forKey: .brightness)
        contrast = try container.decode(Double.self, forKey: .contrast)
        saturation = try container.decode(Double.self, forKey: .saturation)
        greyscaleShare = try container.decode(Double.self, forKey: .greyscaleShare)
        blurShare = try container.decode(Double.self, forKey: .blurShare)
        blurSigma = try container.decode(ClosedRange<Double>.self, forKey: .blurSigma)
        occlusionShare = try container.decodeIfPresent(Double.self, forKey: .occlusionShare) ?? 0
    }

    /// No randomness beyond the crop itself: whole photo (`u` = 1), no flip, no colour change.
    package static let none: DetectionAugmentation = {
        var settings = DetectionAugmentation()
        settings.cropShares = [1]
        settings.horizontalFlip = false
        settings.brightness = 0
        settings.contrast = 0
        settings.saturation = 0
        settings.greyscaleShare = 0
        settings.blurShare = 0
        return settings
    }()
}

/// What one augmented crop holds: its faces in its own pixels and where it came from.
package struct AugmentedCrop: Sendable, Equatable {
    /// Faces whose centre lies inside the crop, clipped to it, in the crop's pixels (after the flip).
    package var faces: [LabelledFace]
    /// Crop pixel = photo pixel x scale + offset, before the flip.
    package var placement: LetterboxTransform
    package var isFlipped: Bool
}

extension DetectionAugmentation {
    /// Writes one augmented crop of `photo` as normalised CHW floats (`pixel * input.scale +
    /// input.bias[c]`, 3 channels, `outputSize` squared) at `output`, and returns its faces.
    /// `random` makes every choice, so a seed gives the same crop.
    package func writeCrop<R: RandomNumberGenerator>(
        of photo: Image, faces: [LabelledFace], input: InputSpecification, random: inout R,
        to output: UnsafeMutablePointer<Float>
    ) -> AugmentedCrop {
        precondition(input.channels == 3, "the detector reads RGB input")
        let shorter = Double(min(photo.width, photo.height))
        let share = cropShares[Int.random(in: 0..<cropShares.count, using: &random)]
        let side = max(1, share * shorter)
        // Where the crop fits, anywhere inside; where it is larger, the photo anywhere inside it.
        func origin(_ extent: Int) -> Double {
            let room = Double(extent) - side
            return room >= 0 ? Double.random(in: 0...room, using: &random) : Double.random(in: room...0, using: &random)
        }
        let originX = origin(photo.width)
        let originY = origin(photo.height)
        let flip = horizontalFlip && Bool.random(using: &random)
        let blur = blurShare > 0 && Double.random(in: 0..<1, using: &random) < blurShare
        let sigma = blur ? Double.random(in: blurSigma, using: &random) : 0
        let grey = greyscaleShare > 0 && Double.random(in: 0..<1, using: &random) < greyscaleShare
        let brightnessShift = Float(Double.random(in: -1...1, using: &random) * brightness)
        let contrastFactor = Float(1 + Double.random(in: -1...1, using: &random) * contrast)
        let saturationFactor = grey ? 0 : Float(1 + Double.random(in: -1...1, using: &random) * saturation)

        let size = outputSize
        let scale = Double(size) / side
        DetectionResampling.crop(
            photo, originX: originX, originY: originY, scale: scale, flip: flip, size: size, to: output)

        let placement = LetterboxTransform(scale: scale, offsetX: -originX * scale, offsetY: -originY * scale)
        let extent = Double(size)
        var kept: [LabelledFace] = []
        for face in faces {
            let box = placement.toInput(face.box)
            guard box.centreX >= 0, box.centreX < extent, box.centreY >= 0, box.centreY < extent else { continue }
            var cropped = LabelledFace(
                box: DetectionBox(
                    left: max(0, box.x), top: max(0, box.y), right: min(extent, box.right),
                    bottom: min(extent, box.bottom)),
                landmarks: face.landmarks?.map { placement.toInput($0) }, ignored: face.ignored)
            if flip { cropped = cropped.flippedHorizontally(imageWidth: extent) }
            kept.append(cropped)
        }
        // Drawn only when asked for, so recipes without occlusion draw the same random numbers as before.
        if occlusionShare > 0 {
            DetectionResampling.occlude(
                output, size: size, faces: kept, share: occlusionShare, minimumHeight: Self.occlusionMinimumHeight,
                random: &random)
        }
        if sigma > 0 { DetectionResampling.gaussianBlur(output, planes: 3, size: size, sigma: sigma) }
        DetectionResampling.adjustColour(
            output, size: size, brightness: brightnessShift, contrast: contrastFactor, saturation: saturationFactor,
            input: input)
        return AugmentedCrop(faces: kept, placement: placement, isFlipped: flip)
    }
}

/// Pixel kernels of detection input: bilinear crop with grey outside the photo, separable
/// Gaussian blur, colour jitter with normalisation. Kept apart from the random choices above.
enum DetectionResampling {
    /// Mid-grey, the value outside the photo: it normalises to about 0.
    static let outsideValue: Float = 127.5

    /// Output pixel (x, y) reads photo point ((x + 0.5) / scale + origin - 0.5) bilinearly, into
    /// 3 planes of 0...255 values; `flip` mirrors the output horizontally.
    static func crop(
        _ photo: Image, originX: Double, originY: Double, scale: Double, flip: Bool, size: Int,
        to output: UnsafeMutablePointer<Float>
    ) {
        let plane = size * size
        let channels = photo.channels
        let (width, height) = (photo.width, photo.height)
        // Column weights once per crop: the same for every row.
        var columnIndex = [Int](repeating: -1, count: size)
        var columnWeight = [Float](repeating: 0, count: size)
        for x in 0..<size {
            let outputX = flip ? size - 1 - x : x
            let sourceX = (Double(outputX) + 0.5) / scale + originX - 0.5
            let floorX = sourceX.rounded(.down)
            columnIndex[x] = Int(floorX)
            columnWeight[x] = Float(sourceX - floorX)
        }
        photo.pixels.withUnsafeBufferPointer { pixels in
            func sample(_ x: Int, _ y: Int, _ channel: Int) -> Float {
                guard x >= 0, x < width, y >= 0, y < height else { return outsideValue }
                return Float(pixels[(y * width + x) * channels + min(channel, channels - 1)])
            }
            for y in 0..<size {
                let sourceY = (Double(y) + 0.5) / scale + originY - 0.5
                let floorY = sourceY.rounded(.down)
                let (y0, fy) = (Int(floorY), Float(sourceY - floorY))
                for x in 0..<size {
                    let (x0, fx) = (columnIndex[x], columnWeight[x])
                    for channel in 0..<3 {
                        let top = sample(x0, y0, channel) * (1 - fx) + sample(x0 + 1, y0, channel) * fx
                        let bottom = sample(x0, y0 + 1, channel) * (1 - fx) + sample(x0 + 1, y0 + 1, channel) * fx
                        output[channel * plane + y * size + x] = top * (1 - fy) + bottom * fy
                    }
                }
            }
        }
    }

    /// Blurs each of `planes` square planes in place with a Gaussian of `sigma` pixels (radius
    /// 3 sigma, edges clamped).
    static func gaussianBlur(_ values: UnsafeMutablePointer<Float>, planes: Int, size: Int, sigma: Double) {
        let radius = max(1, Int((3 * sigma).rounded(.up)))
        var weights = (-radius...radius).map { Float(exp(-Double($0 * $0) / (2 * sigma * sigma))) }
        let total = weights.reduce(0, +)
        weights = weights.map { $0 / total }
        var line = [Float](repeating: 0, count: size)
        for planeIndex in 0..<planes {
            let plane = values + planeIndex * size * size
            // Rows, then columns.
            for pass in 0..<2 {
                for lineIndex in 0..<size {
                    let (start, step) = pass == 0 ? (lineIndex * size, 1) : (lineIndex, size)
                    for index in 0..<size {
                        var sum: Float = 0
                        for offset in -radius...radius {
                            let source = min(max(index + offset, 0), size - 1)
                            sum += weights[offset + radius] * plane[start + source * step]
                        }
                        line[index] = sum
                    }
                    for index in 0..<size { plane[start + index * step] = line[index] }
                }
            }
        }
    }

    /// Saturation (distance from the pixel's luma), contrast (around mid-grey) and brightness,
    /// clamped to 0...255, then normalised as the network's input says.
    static func adjustColour(
        _ values: UnsafeMutablePointer<Float>, size: Int, brightness: Float, contrast: Float, saturation: Float,
        input: InputSpecification
    ) {
        let plane = size * size
        let (red, green, blue) = (values, values + plane, values + 2 * plane)
        let (scale, bias) = (input.scale, input.bias)
        func adjusted(_ value: Float, luma: Float, channel: Int) -> Float {
            let saturated = luma + (value - luma) * saturation
            return min(max((saturated - 127.5) * contrast + 127.5 + brightness, 0), 255) * scale + bias[channel]
        }
        for index in 0..<plane {
            let luma = 0.299 * red[index] + 0.587 * green[index] + 0.114 * blue[index]
            red[index] = adjusted(red[index], luma: luma, channel: 0)
            green[index] = adjusted(green[index], luma: luma, channel: 1)
            blue[index] = adjusted(blue[index], luma: luma, channel: 2)
        }
    }
}

extension DetectionResampling {
    /// Covers a random part of each learnt face in `faces` (crop pixels), with probability `share`
    /// each, by a rectangle of 0.25-0.6 of the face's width and height: half of them a flat colour,
    /// half a piece of the crop moved from elsewhere (a hand, a cup, another head). The face keeps
    /// its box and landmarks: an occluded face is still a face, and WIDER is full of them.
    static func occlude<R: RandomNumberGenerator>(
        _ values: UnsafeMutablePointer<Float>, size: Int, faces: [LabelledFace], share: Double,
        minimumHeight: Double, random: inout R
    ) {
        let plane = size * size
        for face in faces where !face.ignored && face.box.height >= minimumHeight {
            guard Double.random(in: 0..<1, using: &random) < share else { continue }
            let width = max(2, Int(face.box.width * Double.random(in: 0.25...0.6, using: &random)))
            let height = max(2, Int(face.box.height * Double.random(in: 0.25...0.6, using: &random)))
            let left = Int(face.box.x + Double.random(in: 0...1, using: &random) * (face.box.width - Double(width)))
            let top = Int(face.box.y + Double.random(in: 0...1, using: &random) * (face.box.height - Double(height)))
            let copy = Bool.random(using: &random)
            let sourceX = Int.random(in: 0...max(0, size - width), using: &random)
            let sourceY = Int.random(in: 0...max(0, size - height), using: &random)
            let colour = (0..<3).map { _ in Float.random(in: 0...255, using: &random) }
            for y in max(0, top)..<min(size, top + height) {
                for x in max(0, left)..<min(size, left + width) {
                    let from = min(size - 1, sourceY + y - top) * size + min(size - 1, sourceX + x - left)
                    for channel in 0..<3 {
                        values[channel * plane + y * size + x] = copy ? values[channel * plane + from] : colour[channel]
                    }
                }
            }
        }
    }
}
