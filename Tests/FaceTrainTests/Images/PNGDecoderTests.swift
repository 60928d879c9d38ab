import Foundation
import Testing

@testable import FaceTrain

@Suite("PNG decoding")
struct PNGDecoderTests {
    @Test func eightBitRGBAndGreyRoundTripExactly() throws {
        let colour = Fixtures.blockPattern(width: 40, height: 30, channels: 3)
        let grey = Fixtures.blockPattern(width: 30, height: 40, channels: 1)
        #expect(try ImageDecoder.decode(data: Fixtures.png(colour), name: "colour.png") == colour)
        #expect(try ImageDecoder.decode(data: Fixtures.png(grey), name: "grey.png") == grey)
    }

    @Test func sixteenBitSamplesAreScaledTo8BitsWithoutGammaChange() throws {
        // Big-endian 16-bit grey; the expected 8-bit value is round(v * 255 / 65535) = round(v / 257).
        let values: [Int] = [0, 65535, 128 * 257, 100 * 257, 0x1234, 0xFEDC, 257, 200 * 257 + 100]
        let (width, height) = (24, 24)
        let rows = (0..<height).map { y in
            (0..<width).flatMap { x -> [UInt8] in
                let v = values[(x + y) % values.count]
                return [UInt8(v >> 8), UInt8(v & 0xFF)]
            }
        }
        let data = Fixtures.png(width: width, height: height, bitDepth: 16, colorType: .grey, rows: rows)
        let image = try ImageDecoder.decode(data: data, name: "deep.png")
        #expect(image.channels == 1 && image.width == 24 && image.height == 24)
        for y in 0..<height {
            for x in 0..<width {
                let expected = (Double(values[(x + y) % values.count]) / 257).rounded()
                #expect(Double(image[x: x, y: y, channel: 0]) == expected, "at (\(x), \(y))")
            }
        }
    }

    @Test func sixteenBitRGBA() throws {
        // Opaque pixels keep their colour, half-transparent ones are composited on black.
        let (width, height) = (24, 24)
        let rows = (0..<height).map { y in
            (0..<width).flatMap { x -> [UInt8] in
                let alpha: [UInt8] = x < 12 ? [0xFF, 0xFF] : [0x80, 0x80]  // 0x8080 = 128 * 257
                return [0xC8, 0xC8, 0x64, 0x64, 0x00, 0x00] + alpha  // R 200, G 100, B 0 (times 257)
            }
        }
        let data = Fixtures.png(width: width, height: height, bitDepth: 16, colorType: .rgba, rows: rows)
        let image = try ImageDecoder.decode(data: data, name: "deep-rgba.png")
        #expect(image.channels == 3)
        #expect(
            [image[x: 0, y: 5, channel: 0], image[x: 0, y: 5, channel: 1], image[x: 0, y: 5, channel: 2]]
                == [200, 100, 0])
        // 200 * 128 / 255 = 100.4 and 100 * 128 / 255 = 50.2
        #expect([image[x: 20, y: 5, channel: 0], image[x: 20, y: 5, channel: 1]] == [100, 50])
    }

    @Test func paletteImagesOfEveryBitDepthExpandToRGB() throws {
        let palette: [(UInt8, UInt8, UInt8)] = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (250, 250, 10)]
        for bitDepth: Int32 in [1, 2, 4, 8] {
            let entries = min(palette.count, 1 << Int(bitDepth))
            let (width, height) = (32, 24)
            let index = { (x: Int, y: Int) in (x / 4 + y) % entries }
            let rows = (0..<height).map { y in
                Self.pack((0..<width).map { index($0, y) }, bitDepth: Int(bitDepth))
            }
            let data = Fixtures.png(
                width: width, height: height, bitDepth: bitDepth, colorType: .palette, rows: rows,
                palette: Array(palette.prefix(entries)))
            let image = try ImageDecoder.decode(data: data, name: "palette\(bitDepth).png")
            #expect(image.channels == 3 && image.width == width && image.height == height)
            for y in 0..<height {
                for x in 0..<width {
                    let colour = palette[index(x, y)]
                    let decoded = (
                        image[x: x, y: y, channel: 0], image[x: x, y: y, channel: 1],
                        image[x: x, y: y, channel: 2]
                    )
                    #expect(decoded == colour, "bit depth \(bitDepth) at (\(x), \(y))")
                }
            }
        }
    }

    @Test func lowBitDepthGreyIsScaledToTheFullRange() throws {
        for bitDepth in [1, 2, 4] {
            let levels = 1 << bitDepth
            let rows = (0..<24).map { y in Self.pack((0..<24).map { ($0 + y) % levels }, bitDepth: bitDepth) }
            let data = Fixtures.png(width: 24, height: 24, bitDepth: Int32(bitDepth), colorType: .grey, rows: rows)
            let image = try ImageDecoder.decode(data: data, name: "grey\(bitDepth).png")
            #expect(image.channels == 1)
            for y in 0..<24 {
                for x in 0..<24 {
                    let expected = ((x + y) % levels) * 255 / (levels - 1)  // exact: 255 is divisible by 1, 3, 15
                    #expect(Int(image[x: x, y: y, channel: 0]) == expected, "\(bitDepth)-bit at (\(x), \(y))")
                }
            }
        }
    }

    @Test func greyAlphaIsCompositedOnBlack() throws {
        // Left half opaque, right half fully transparent, one column half transparent.
        let rows = (0..<24).map { _ in
            (0..<24).flatMap { x -> [UInt8] in [180, x < 12 ? 255 : (x == 12 ? 128 : 0)] }
        }
        let data = Fixtures.png(width: 24, height: 24, bitDepth: 8, colorType: .greyAlpha, rows: rows)
        let image = try ImageDecoder.decode(data: data, name: "grey-alpha.png")
        #expect(image.channels == 1)
        #expect(image[x: 3, y: 3, channel: 0] == 180)
        #expect(image[x: 12, y: 3, channel: 0] == 90)  // 180 * 128 / 255 = 90.35
        #expect(image[x: 20, y: 3, channel: 0] == 0)
    }

    @Test func rgbaIsCompositedOnBlack() throws {
        let rows = (0..<24).map { y in
            (0..<24).flatMap { x -> [UInt8] in [10, 120, 250, y < 12 ? 255 : 51] }
        }
        let data = Fixtures.png(width: 24, height: 24, bitDepth: 8, colorType: .rgba, rows: rows)
        let image = try ImageDecoder.decode(data: data, name: "rgba.png")
        #expect(image.channels == 3)
        #expect(
            [image[x: 5, y: 5, channel: 0], image[x: 5, y: 5, channel: 1], image[x: 5, y: 5, channel: 2]]
                == [10, 120, 250])
        // 51 / 255 = 0.2 exactly: 2, 24, 50.
        #expect(
            [image[x: 5, y: 20, channel: 0], image[x: 5, y: 20, channel: 1], image[x: 5, y: 20, channel: 2]]
                == [2, 24, 50])
    }

    @Test func paletteTransparencyIsCompositedOnBlack() throws {
        let rows = (0..<24).map { _ in (0..<24).map { UInt8($0 % 2) } }
        let data = Fixtures.png(
            width: 24, height: 24, bitDepth: 8, colorType: .palette, rows: rows,
            palette: [(200, 100, 50), (255, 255, 255)], transparency: [255, 0])
        let image = try ImageDecoder.decode(data: data, name: "palette-trns.png")
        #expect(
            [image[x: 0, y: 0, channel: 0], image[x: 0, y: 0, channel: 1], image[x: 0, y: 0, channel: 2]]
                == [200, 100, 50])
        #expect(
            [image[x: 1, y: 0, channel: 0], image[x: 1, y: 0, channel: 1], image[x: 1, y: 0, channel: 2]]
                == [0, 0, 0])
    }

    @Test func interlacedPNGDecodesLikeTheProgressiveOne() throws {
        let colour = Fixtures.blockPattern(width: 37, height: 29, channels: 3)
        let rows = (0..<29).map { Array(colour.pixels[($0 * 37 * 3)..<(($0 + 1) * 37 * 3)]) }
        let data = Fixtures.png(width: 37, height: 29, bitDepth: 8, colorType: .rgb, rows: rows, interlaced: true)
        #expect(try ImageDecoder.decode(data: data, name: "adam7.png") == colour)
    }

    /// Packs sample values into PNG row bytes, most significant bits first.
    static func pack(_ values: [Int], bitDepth: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: (values.count * bitDepth + 7) / 8)
        for (i, value) in values.enumerated() {
            let bit = i * bitDepth
            bytes[bit / 8] |= UInt8(value << (8 - bitDepth - bit % 8))
        }
        return bytes
    }
}
