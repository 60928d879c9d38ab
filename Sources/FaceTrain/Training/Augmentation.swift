import FaceTrainEngine
import Foundation

/// Random changes applied to each training crop, so ~25 crops per person teach more than 25 views.
///
/// One affine resampling does the random resized crop, the rotation and the flip together (one
/// bilinear read per output value), then brightness and contrast are jittered.
public struct AugmentationSettings: Codable, Sendable, Equatable {
    /// Share of the crop's area kept by the random resized crop.
    public var minimumArea: Double = 0.70
    /// Largest change of aspect ratio (1.15 = up to 15 % wider or taller).
    public var maximumAspectChange: Double = 1.15
    public var maximumRotationDegrees: Double = 10
    public var horizontalFlip: Bool = true
    /// Largest brightness shift as a share of full scale.
    public var brightness: Double = 0.15
    /// Largest contrast change (0.25 = factor in 0.75...1.25).
    public var contrast: Double = 0.25
    /// When set, the crop's centre stays within this share of the side from the image centre
    /// (pretraining crops have the face in the centre); otherwise it may lie anywhere the crop fits.
    public var maximumCenterShift: Double?
    /// Share of crops turned grey (luma in every channel), so the extractor does not lean on
    /// colour that grey and studio photos lack. Nil (none) draws no random number for it: the
    /// recipes recorded before it existed give the same crops.
    public var greyscaleShare: Double?

    public init() {}

    /// Pretraining on corpora of centred face crops: from 55 % of the side (the face alone) to the
    /// whole crop, so the extractor meets the tight and the loose framings that users' crops have.
    public static let pretraining: AugmentationSettings = {
        var settings = AugmentationSettings()
        settings.minimumArea = 0.30
        settings.maximumAspectChange = 1.10
        settings.brightness = 0.10
        settings.maximumCenterShift = 0.05
        return settings
    }()

    /// No augmentation at all (evaluation, and tests).
    public static let none: AugmentationSettings = {
        var settings = AugmentationSettings()
        settings.minimumArea = 1
        settings.maximumAspectChange = 1
        settings.maximumRotationDegrees = 0
        settings.horizontalFlip = false
        settings.brightness = 0
        settings.contrast = 0
        return settings
    }()
}

/// Turns 8-bit crops into normalised network input, with or without augmentation.
public enum ImageTensor {
    /// Writes the crop as normalised CHW floats (`pixel * scale + bias[c]`) at `output`.
    public static func write(_ image: Image, input: InputSpecification, to output: UnsafeMutablePointer<Float>) {
        let plane = input.width * input.height
        image.pixels.withUnsafeBufferPointer { pixels in
            for channel in 0..<input.channels {
                let scale = input.scale
                let bias = input.bias[channel]
                let destination = output + channel * plane
                for index in 0..<plane {
                    destination[index] = Float(pixels[index * image.channels + channel]) * scale + bias
                }
            }
        }
    }

    /// Writes an augmented version of the crop; `random` decides every random choice.
    public static func writeAugmented<R: RandomNumberGenerator>(
        _ image: Image, input: InputSpecification, settings: AugmentationSettings, random: inout R,
        to output: UnsafeMutablePointer<Float>
    ) {
        let width = Double(input.width)
        let height = Double(input.height)
        let area = Double.random(in: min(settings.minimumArea, 1)...1, using: &random)
        let logAspect = log(max(settings.maximumAspectChange, 1))
        let aspect = exp(Double.random(in: -logAspect...logAspect, using: &random))
        let cropWidth = min(1, (area * aspect).squareRoot()) * Double(image.width)
        let cropHeight = min(1, (area / aspect).squareRoot()) * Double(image.height)
        var xRange = (cropWidth / 2)...(Double(image.width) - cropWidth / 2)
        var yRange = (cropHeight / 2)...(Double(image.height) - cropHeight / 2)
        if let shift = settings.maximumCenterShift {
            let (middleX, middleY) = (Double(image.width) / 2, Double(image.height) / 2)
            let (dx, dy) = (shift * Double(image.width), shift * Double(image.height))
            xRange = max(xRange.lowerBound, middleX - dx)...max(min(xRange.upperBound, middleX + dx), xRange.lowerBound)
            yRange = max(yRange.lowerBound, middleY - dy)...max(min(yRange.upperBound, middleY + dy), yRange.lowerBound)
        }
        let centerX = Double.random(in: xRange, using: &random)
        let centerY = Double.random(in: yRange, using: &random)
        let angle = Double.random(in: -1...1, using: &random) * settings.maximumRotationDegrees * .pi / 180
        let flip = settings.horizontalFlip && Bool.random(using: &random)
        let contrast = Float(1 + Double.random(in: -1...1, using: &random) * settings.contrast)
        let brightness = Float(Double.random(in: -1...1, using: &random) * settings.brightness * 255)
        let grey: Bool
        if let share = settings.greyscaleShare, share > 0, input.channels == 3 {
            grey = Double.random(in: 0..<1, using: &random) < share
        } else {
            grey = false
        }

        // Output pixel (x, y) -> offset from the crop centre (flipped, scaled), rotated, moved to the
        // crop centre: an affine map source = A * (x, y) + origin, in source pixel coordinates.
        let cosine = cos(angle)
        let sine = sin(angle)
        let a = cropWidth * (flip ? -1 : 1) / width
        let a0 = (0.5 / width - 0.5) * cropWidth * (flip ? -1 : 1)
        let b = cropHeight / height
        let b0 = (0.5 / height - 0.5) * cropHeight
        let xx = cosine * a
        let xy = -sine * b
        let originX = cosine * a0 - sine * b0 + centerX - 0.5
        let yx = sine * a
        let yy = cosine * b
        let originY = sine * a0 + cosine * b0 + centerY - 0.5

        let plane = input.width * input.height
        let channels = image.channels
        let rowStride = image.width * channels
        let maxX = Float(image.width - 1)
        let maxY = Float(image.height - 1)
        image.pixels.withUnsafeBufferPointer { pixels in
            for y in 0..<input.height {
                for x in 0..<input.width {
                    let sourceX = min(max(Float(originX + xx * Double(x) + xy * Double(y)), 0), maxX)
                    let sourceY = min(max(Float(originY + yx * Double(x) + yy * Double(y)), 0), maxY)
                    let x0 = Int(sourceX)
                    let y0 = Int(sourceY)
                    let x1 = min(x0 + 1, image.width - 1)
                    let y1 = min(y0 + 1, image.height - 1)
                    let fx = sourceX - Float(x0)
                    let fy = sourceY - Float(y0)
                    let row0 = y0 * rowStride
                    let row1 = y1 * rowStride
                    func sample(_ channel: Int) -> Float {
                        let top =
                            Float(pixels[row0 + x0 * channels + channel]) * (1 - fx) + Float(
                                pixels[row0 + x1 * channels + channel]) * fx
                        let bottom =
                            Float(pixels[row1 + x0 * channels + channel]) * (1 - fx) + Float(
                                pixels[row1 + x1 * channels + channel]) * fx
                        return min(max((top * (1 - fy) + bottom * fy - 128) * contrast + 128 + brightness, 0), 255)
                    }
                    let pixel = y * input.width + x
                    if grey {
                        // Rec. 601 luma in all three channels.
                        let luma = 0.299 * sample(0) + 0.587 * sample(1) + 0.114 * sample(2)
                        for channel in 0..<3 {
                            output[channel * plane + pixel] = luma * input.scale + input.bias[channel]
                        }
                    } else {
                        for channel in 0..<input.channels {
                            output[channel * plane + pixel] = sample(channel) * input.scale + input.bias[channel]
                        }
                    }
                }
            }
        }
    }
}
