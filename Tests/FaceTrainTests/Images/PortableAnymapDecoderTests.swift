import Foundation
import Testing

@testable import FaceTrain

@Suite("PGM and PPM decoding")
struct PortableAnymapDecoderTests {
    @Test func eightBitPGMWithComments() throws {
        let samples = (0..<(30 * 25)).map { UInt8($0 % 251) }
        let data = Fixtures.netpbm(
            header: "P5\n# written by a scanner\n30 # width\n25\n# maxval next\n255\n",
            samples: samples)
        let image = try ImageDecoder.decode(data: data, name: "scan.pgm")
        #expect(image == Image(width: 30, height: 25, channels: 1, pixels: samples))
    }

    @Test func sixteenBitPGMIsRescaledByItsMaxval() throws {
        // maxval 1000: 0 -> 0, 1000 -> 255, 500 -> 127.5 -> 128, 4 -> 1.02 -> 1; stored big-endian.
        let values = [0, 1000, 500, 4, 999]
        let count = 24 * 24
        let samples = (0..<count).flatMap { i -> [UInt8] in
            let v = values[i % values.count]
            return [UInt8(v >> 8), UInt8(v & 0xFF)]
        }
        let image = try ImageDecoder.decode(
            data: Fixtures.netpbm(header: "P5 24 24 1000\n", samples: samples),
            name: "deep.pgm")
        let expected: [UInt8] = [0, 255, 128, 1, 255]
        #expect(image.pixels == (0..<count).map { expected[$0 % expected.count] })
    }

    @Test func fullRange16BitPGM() throws {
        let samples = (0..<(24 * 24)).flatMap { i -> [UInt8] in i % 2 == 0 ? [0xFF, 0xFF] : [0x80, 0x00] }
        let image = try ImageDecoder.decode(
            data: Fixtures.netpbm(header: "P5\n24 24\n65535\n", samples: samples),
            name: "full.pgm")
        #expect(image.pixels[0] == 255)
        #expect(image.pixels[1] == 128)  // 32768 * 255 / 65535 = 127.5019...
    }

    @Test func smallMaxvalIsStretchedTo255() throws {
        let samples = (0..<(24 * 24)).map { UInt8($0 % 16) }
        let image = try ImageDecoder.decode(
            data: Fixtures.netpbm(header: "P5\n24 24\n15\n", samples: samples),
            name: "nibbles.pgm")
        #expect(image.pixels == samples.map { $0 * 17 })
    }

    @Test func ppmIsRGB() throws {
        let colour = Fixtures.blockPattern(width: 26, height: 31, channels: 3)
        let data = Fixtures.netpbm(header: "P6\n#c\n26 31\n255\n", samples: colour.pixels)
        #expect(try ImageDecoder.decode(data: data, name: "colour.ppm") == colour)
    }

    @Test func sixteenBitPPM() throws {
        let colour = Fixtures.blockPattern(width: 24, height: 24, channels: 3)
        let samples = colour.pixels.flatMap { v -> [UInt8] in [v, v] }  // v * 257: exact 8-bit value v
        let data = Fixtures.netpbm(header: "P6 24 24 65535\n", samples: samples)
        #expect(try ImageDecoder.decode(data: data, name: "deep.ppm") == colour)
    }

    @Test func sampleBytesThatLookLikeWhitespaceAreData() throws {
        // The first sample is 0x0A ('\n'): only one whitespace byte may follow maxval.
        let samples = [UInt8](repeating: 0x0A, count: 24 * 24)
        let image = try ImageDecoder.decode(
            data: Fixtures.netpbm(header: "P5\n24 24\n255\n", samples: samples),
            name: "newlines.pgm")
        #expect(image.pixels == samples)
    }

    @Test func malformedHeadersAreCorrupt() {
        for header in [
            "P5\n24 x 24\n255\n", "P5\n24 24\n0\n", "P5\n24 24\n70000\n", "P5\n0 24\n255\n",
            "P5\n24 24\n255x", "P5\n1234567890 24\n255\n",
        ] {
            let error = expectImageError { () throws(ImageError) in
                try ImageDecoder.decode(
                    data: Fixtures.netpbm(header: header, samples: [UInt8](repeating: 0, count: 600)),
                    name: "bad.pgm")
            }
            guard case .corrupt(let file, .pgm, _) = error else {
                Issue.record("header \(header.debugDescription): \(String(describing: error))")
                continue
            }
            #expect(file == "bad.pgm")
        }
    }
}
