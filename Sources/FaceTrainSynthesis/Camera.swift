import FaceTrainEngine
import Foundation

/// What the phone camera and its pipeline do to every crop: exposure, white balance, uneven light, blur,
/// sensor noise and JPEG quality. Faces and non-faces go through the same camera, so none of these
/// properties gives the class away.
struct Camera: Sendable {
    var exposure: Float
    /// Per-channel white-balance gains.
    var whiteBalance: Color
    var contrast: Float
    /// Brightness slope across the crop (light falling off towards one side).
    var gradientX: Float
    var gradientY: Float
    /// 0 = sharp; 1 = a full 3×3 box blur at output resolution (defocus, motion, upscaled crops).
    var blur: Float
    /// Standard deviation of the additive Gaussian sensor noise, in [0, 1] units.
    var noise: Float
    var jpegQuality: Int
    var noiseSeed: UInt64

    /// Random but plausible camera settings.
    init(using random: inout SynthesisRandom) {
        exposure = random.uniform(0.62...1.28)
        whiteBalance = Color(random.uniform(0.88...1.12), random.uniform(0.94...1.06), random.uniform(0.86...1.14))
        contrast = random.uniform(0.75...1.2)
        gradientX = random.symmetric(0.3)
        gradientY = random.symmetric(0.2)
        blur = random.chance(0.35) ? random.uniform(0.3...1) : 0
        noise = random.chance(0.25) ? random.uniform(0.025...0.045) : random.uniform(0.003...0.02)
        jpegQuality = random.integer(50...95)
        noiseSeed = random.next()
    }

    /// Develops a supersampled canvas into `size`×`size` 8-bit RGB (the canvas is `factor` times larger).
    func develop(_ canvas: Canvas, size: Int, factor: Int) -> [UInt8] {
        let canvasWidth = canvas.width
        let samples = Float(factor * factor)
        var image = [Float](repeating: 0, count: size * size * 3)
        canvas.pixels.withUnsafeBufferPointer { source in
            for row in 0..<size {
                for column in 0..<size {
                    var sum: (Float, Float, Float) = (0, 0, 0)
                    for dy in 0..<factor {
                        var offset = ((row * factor + dy) * canvasWidth + column * factor) * 3
                        for _ in 0..<factor {
                            sum.0 += source[offset]
                            sum.1 += source[offset + 1]
                            sum.2 += source[offset + 2]
                            offset += 3
                        }
                    }
                    let u = (Float(column) + 0.5) / Float(size) * 2 - 1
                    let v = (Float(row) + 0.5) / Float(size) * 2 - 1
                    let light = exposure * max(0.2, 1 + gradientX * u + gradientY * v)
                    let target = (row * size + column) * 3
                    image[target] = sum.0 / samples * light * whiteBalance.red
                    image[target + 1] = sum.1 / samples * light * whiteBalance.green
                    image[target + 2] = sum.2 / samples * light * whiteBalance.blue
                }
            }
        }
        if blur > 0 { image = Self.boxBlurred(image, size: size, amount: blur) }

        var random = SynthesisRandom(seed: noiseSeed)
        var bytes = [UInt8](repeating: 0, count: image.count)
        for pixel in 0..<(size * size) {
            // Sensor noise is partly shared across channels (luminance) and partly per channel (chroma).
            let shared = random.normal() * noise * 0.7
            for channel in 0..<3 {
                let index = pixel * 3 + channel
                let value = (image[index] - 0.5) * contrast + 0.5 + shared + random.normal() * noise * 0.5
                bytes[index] = value.isNaN ? 0 : UInt8(min(255, max(0, (value * 255).rounded())))
            }
        }
        return bytes
    }

    /// `image` mixed with its 3×3 box blur by `amount`, edges clamped.
    private static func boxBlurred(_ image: [Float], size: Int, amount: Float) -> [Float] {
        var result = image
        for row in 0..<size {
            for column in 0..<size {
                for channel in 0..<3 {
                    var sum: Float = 0
                    for dy in -1...1 {
                        let y = min(size - 1, max(0, row + dy))
                        for dx in -1...1 {
                            let x = min(size - 1, max(0, column + dx))
                            sum += image[(y * size + x) * 3 + channel]
                        }
                    }
                    let index = (row * size + column) * 3 + channel
                    result[index] = image[index] + (sum / 9 - image[index]) * amount
                }
            }
        }
        return result
    }
}
