import Foundation
import Testing

@testable import FaceTrain
@testable import FaceTrainEngine

@Suite("Image resizing and channel conversion")
struct ImageResizeTests {
    static func grey(_ width: Int, _ height: Int, _ values: [Int]) -> Image {
        Image(width: width, height: height, channels: 1, pixels: values.map { UInt8($0) })
    }

    @Test func shrinkingByTwoAveragesEachBlock() {
        let image = Self.grey(
            4, 4,
            [
                0, 4, 8, 12,
                16, 20, 24, 28,
                32, 36, 40, 44,
                48, 52, 56, 60,
            ])
        // (0 + 4 + 16 + 20) / 4 = 10, and so on.
        #expect(image.resized(width: 2, height: 2) == Self.grey(2, 2, [10, 18, 42, 50]))
    }

    @Test func shrinkingByAFractionWeighsPartlyCoveredPixels() {
        // 3 -> 2: output 0 covers source [0, 1.5): pixel 0 with weight 2/3, pixel 1 with 1/3.
        // v = 30x + 90y; x-part (0 * 1 + 30 * 0.5) / 1.5 = 10, y-part (0 * 1 + 90 * 0.5) / 1.5 = 30, and so on.
        let image = Self.grey(
            3, 3,
            [
                0, 30, 60,
                90, 120, 150,
                180, 210, 240,
            ])
        #expect(image.resized(width: 2, height: 2) == Self.grey(2, 2, [40, 80, 160, 200]))
    }

    @Test func enlargingIsBilinearBetweenPixelCentres() {
        // 2 -> 4: source positions -0.25, 0.25, 0.75, 1.25 clamp to 0, 0.25, 0.75, 1.
        let image = Self.grey(
            2, 2,
            [
                0, 100,
                200, 40,
            ])
        let expected = Self.grey(
            4, 4,
            [
                0, 25, 75, 100,
                50, 59, 76, 85,  // 58.75, 76.25
                150, 126, 79, 55,  // 126.25, 78.75
                200, 160, 80, 40,
            ])
        #expect(image.resized(width: 4, height: 4) == expected)
    }

    @Test func eachAxisChoosesItsOwnFilter() {
        // Width 4 -> 2 is a box average, height 2 -> 4 bilinear.
        let image = Self.grey(
            4, 2,
            [
                0, 40, 80, 120,
                200, 200, 200, 200,
            ])
        let expected = Self.grey(
            2, 4,
            [
                20, 100,
                65, 125,
                155, 175,
                200, 200,
            ])
        #expect(image.resized(width: 2, height: 4) == expected)
    }

    @Test(arguments: [(64, 64), (13, 200), (300, 20), (1, 1), (97, 61)])
    func constantImagesStayConstant(width: Int, height: Int) {
        let grey = Image(width: 97, height: 61, channels: 1, pixels: [UInt8](repeating: 173, count: 97 * 61))
        #expect(grey.resized(width: width, height: height).pixels.allSatisfy { $0 == 173 })
        let colour = Image(
            width: 97, height: 61, channels: 3,
            pixels: (0..<(97 * 61)).flatMap { _ in [UInt8(173), 5, 250] })
        let resized = colour.resized(width: width, height: height)
        #expect(resized.width == width && resized.height == height && resized.channels == 3)
        #expect(resized.pixels == (0..<(width * height)).flatMap { _ in [UInt8(173), 5, 250] })
    }

    @Test func checkerboardShrunkByANonIntegerFactorIsMidGrey() {
        let board = Image(
            width: 200, height: 200, channels: 1,
            pixels: (0..<(200 * 200)).map { ($0 % 200 + $0 / 200) % 2 == 0 ? 0 : 255 })
        let small = board.resized(width: 64, height: 64)  // factor 3.125
        // A box of 3.125 pixels sees at most one unpaired pixel per axis: |deviation| <= 127.5 / 3.125^2 = 13.1.
        // Point sampling would give 0 and 255 here.
        #expect(small.pixels.allSatisfy { abs(Double($0) - 127.5) <= 13.6 })
        let mean = Double(small.pixels.reduce(0) { $0 + Int($1) }) / Double(small.pixels.count)
        #expect(abs(mean - 127.5) < 1)
        #expect(board.resized(width: 100, height: 100).pixels.allSatisfy { $0 == 128 })  // 127.5 rounds up
    }

    @Test func shrinkingKeepsTheMeanBrightness() {
        let noise = Fixtures.noise(width: 101, height: 77, channels: 3, seed: 7)
        let small = noise.resized(width: 30, height: 23)
        for c in 0..<3 {
            func mean(_ image: Image) -> Double {
                var sum = 0
                for i in stride(from: c, to: image.pixels.count, by: 3) { sum += Int(image.pixels[i]) }
                return Double(sum) / Double(image.width * image.height)
            }
            #expect(abs(mean(small) - mean(noise)) < 1.5, "channel \(c)")
        }
    }

    @Test func channelsAreResizedIndependently() {
        let image = Image(
            width: 50, height: 40, channels: 3,
            pixels: (0..<(50 * 40)).flatMap { i in [UInt8(10), UInt8(i % 50 * 5), UInt8(250)] })
        let resized = image.resized(width: 21, height: 64)
        for i in 0..<(21 * 64) {
            #expect(resized.pixels[3 * i] == 10 && resized.pixels[3 * i + 2] == 250)
        }
        // The green ramp still runs from about 0 on the left to about 245 on the right.
        #expect(resized[x: 0, y: 5, channel: 1] < 10 && resized[x: 20, y: 5, channel: 1] > 235)
    }

    @Test func sameSizeIsUnchanged() {
        let noise = Fixtures.noise(width: 30, height: 20, channels: 3)
        #expect(noise.resized(width: 30, height: 20) == noise)
    }

    // MARK: - Channels

    @Test func greyBecomesThreeEqualChannels() {
        let grey = Self.grey(3, 1, [0, 128, 255])
        #expect(
            grey.converted(channels: 3)
                == Image(width: 3, height: 1, channels: 3, pixels: [0, 0, 0, 128, 128, 128, 255, 255, 255]))
        #expect(grey.converted(channels: 1) == grey)
    }

    @Test func rgbBecomesRec601Luma() {
        let colour = Image(
            width: 6, height: 1, channels: 3,
            pixels: [255, 0, 0, 0, 255, 0, 0, 0, 255, 255, 255, 255, 0, 0, 0, 100, 150, 200])
        // 0.299 * 255 = 76.2, 0.587 * 255 = 149.7, 0.114 * 255 = 29.1, 29.9 + 88.05 + 22.8 = 140.75
        #expect(colour.converted(channels: 1).pixels == [76, 150, 29, 255, 0, 141])
    }
}
