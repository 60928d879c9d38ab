import Testing

@testable import FaceTrain
@testable import FaceTrainEngine

/// The augmentation's greyscale share: grey crops carry the luma of the colour crop the same
/// random choices give, and no share leaves the random stream (so older recipes) untouched.
@Suite struct AugmentationTests {
    static let input = InputSpecification(width: 24, height: 24, channels: 3)

    /// A 32x32 RGB crop with unequal channels everywhere.
    static let image: Image = {
        var random = SplitMix64(seed: 9)
        return Image(
            width: 32, height: 32, channels: 3, pixels: (0..<(32 * 32 * 3)).map { _ in UInt8(random.next() % 256) })
    }()

    static func augmented(_ settings: AugmentationSettings, seed: UInt64) -> (output: [Float], next: UInt64) {
        var random = SplitMix64(seed: seed)
        var output = [Float](repeating: .nan, count: 3 * input.width * input.height)
        output.withUnsafeMutableBufferPointer {
            ImageTensor.writeAugmented(image, input: input, settings: settings, random: &random, to: $0.baseAddress!)
        }
        return (output, random.next())
    }

    @Test func greyCropsCarryTheLumaOfTheColourCrop() {
        var grey = AugmentationSettings.pretraining
        grey.greyscaleShare = 1
        let plane = Self.input.width * Self.input.height
        for seed: UInt64 in [1, 2, 3] {
            let colour = Self.augmented(.pretraining, seed: seed).output
            let greyed = Self.augmented(grey, seed: seed).output
            // Back to 0...255 values, channel by channel.
            func value(_ tensor: [Float], _ channel: Int, _ pixel: Int) -> Float {
                (tensor[channel * plane + pixel] - Self.input.bias[channel]) / Self.input.scale
            }
            var colourful = 0
            for pixel in 0..<plane {
                let luma =
                    0.299 * value(colour, 0, pixel) + 0.587 * value(colour, 1, pixel) + 0.114 * value(colour, 2, pixel)
                for channel in 0..<3 {
                    #expect(abs(value(greyed, channel, pixel) - luma) < 1e-3, "seed \(seed) pixel \(pixel)")
                }
                if abs(value(colour, 0, pixel) - value(colour, 1, pixel)) > 1 { colourful += 1 }
            }
            #expect(colourful > plane / 2, "the colour crop has colour")
        }
    }

    @Test func noShareDrawsNoRandomNumber() {
        var zero = AugmentationSettings.pretraining
        zero.greyscaleShare = 0
        var half = AugmentationSettings.pretraining
        half.greyscaleShare = 0.5
        let none = Self.augmented(.pretraining, seed: 4)
        #expect(Self.augmented(zero, seed: 4).output == none.output)
        #expect(Self.augmented(zero, seed: 4).next == none.next)
        // A share draws one number more.
        #expect(Self.augmented(half, seed: 4).next != none.next)
        // Some seeds give grey crops, some colour ones, at a share of one half.
        let greyCount = (1...40).filter { seed in
            let output = Self.augmented(half, seed: UInt64(seed)).output
            let plane = Self.input.width * Self.input.height
            return (0..<plane).allSatisfy {
                abs((output[$0] - Self.input.bias[0]) - (output[plane + $0] - Self.input.bias[1])) < 1e-5
            }
        }.count
        #expect((8...32).contains(greyCount), "\(greyCount) of 40 grey")
    }
}
