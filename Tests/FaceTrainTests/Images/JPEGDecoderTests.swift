import CTurboJPEG
import Foundation
import Testing

@testable import FaceTrain

@Suite("JPEG decoding")
struct JPEGDecoderTests {
    /// 48 x 32, so every quarter turn changes the shape; RGB 4:4:4 at quality 100 keeps 8 x 8 blocks exact.
    let source = Fixtures.blockPattern(width: 48, height: 32, channels: 3)

    @Test func baselineColourMatchesTheEncodedPixels() throws {
        let image = try ImageDecoder.decode(data: Fixtures.jpeg(source), name: "colour.jpg")
        #expect(image.width == 48 && image.height == 32 && image.channels == 3)
        #expect(maximumDifference(image, source) <= 3)
    }

    @Test func progressiveColourMatchesTheEncodedPixels() throws {
        let data = Fixtures.jpeg(source, flags: TJFLAG_PROGRESSIVE)
        #expect(data.contains(0xC2), "expected a progressive SOF2 marker")
        let image = try ImageDecoder.decode(data: data, name: "progressive.jpg")
        #expect(image.width == 48 && image.height == 32 && image.channels == 3)
        #expect(maximumDifference(image, source) <= 3)
    }

    @Test func greyJPEGDecodesToOneChannel() throws {
        let grey = Fixtures.blockPattern(width: 40, height: 24, channels: 1)
        let image = try ImageDecoder.decode(data: Fixtures.jpeg(grey), name: "grey.jpg")
        #expect(image.channels == 1)
        #expect(maximumDifference(image, grey) <= 3)
    }

    @Test func subsampledLowQualityJPEGStaysCloseToTheSource() throws {
        let data = Fixtures.jpeg(
            pixels: source.pixels, width: 48, height: 32, pixelFormat: TJPF_RGB,
            subsampling: TJSAMP_420, quality: 75)
        let image = try ImageDecoder.decode(data: data, name: "phone.jpg")
        let meanError =
            zip(image.pixels, source.pixels).map { abs(Int($0) - Int($1)) }.reduce(0, +)
            / source.pixels.count
        #expect(meanError < 12)
    }

    // MARK: - EXIF orientation

    /// Turns by a quarter clockwise; the only primitive besides `mirrored` used to build expectations.
    static func rotatedClockwise(_ image: Image) -> Image {
        var pixels: [UInt8] = []
        // Output row y is source column y read from the bottom row up.
        for y in 0..<image.width {
            for x in 0..<image.height {
                for c in 0..<image.channels { pixels.append(image[x: y, y: image.height - 1 - x, channel: c]) }
            }
        }
        return Image(width: image.height, height: image.width, channels: image.channels, pixels: pixels)
    }

    static func mirrored(_ image: Image) -> Image {
        var pixels: [UInt8] = []
        for y in 0..<image.height {
            for x in 0..<image.width {
                for c in 0..<image.channels { pixels.append(image[x: image.width - 1 - x, y: y, channel: c]) }
            }
        }
        return Image(width: image.width, height: image.height, channels: image.channels, pixels: pixels)
    }

    /// The displayed image for each EXIF value, composed as the EXIF 2.32 table words it
    /// ("mirror horizontal and rotate 270 CW" for 5, and so on).
    static func displayed(_ stored: Image, orientation: Int) -> Image {
        let cw = rotatedClockwise
        switch orientation {
        case 1: return stored
        case 2: return mirrored(stored)
        case 3: return cw(cw(stored))
        case 4: return cw(cw(mirrored(stored)))
        case 5: return cw(cw(cw(mirrored(stored))))
        case 6: return cw(stored)
        case 7: return cw(mirrored(stored))
        case 8: return cw(cw(cw(stored)))
        default: preconditionFailure()
        }
    }

    @Test("EXIF orientation", arguments: 1...8, [true, false])
    func exifOrientation(orientation: Int, bigEndian: Bool) throws {
        let plain = Fixtures.jpeg(source)
        let tagged = Fixtures.inserting(
            segment: Fixtures.exifSegment(orientation: orientation, bigEndian: bigEndian),
            into: plain)
        let stored = try ImageDecoder.decode(data: plain, name: "stored.jpg")
        let image = try ImageDecoder.decode(data: tagged, name: "tagged.jpg")

        let swaps = orientation >= 5
        #expect(image.width == (swaps ? 32 : 48) && image.height == (swaps ? 48 : 32))
        #expect(image == Self.displayed(stored, orientation: orientation))
        #expect(maximumDifference(image, Self.displayed(source, orientation: orientation)) <= 3)

        // Where the stored top-left block ends up on screen, as in the usual EXIF orientation charts.
        let corner: (x: Int, y: Int) =
            switch orientation {
            case 1, 5: (0, 0)
            case 2, 6: (image.width - 1, 0)
            case 3, 7: (image.width - 1, image.height - 1)
            default: (0, image.height - 1)
            }
        for c in 0..<3 {
            #expect(abs(Int(image[x: corner.x, y: corner.y, channel: c]) - Int(source[x: 0, y: 0, channel: c])) <= 3)
        }
    }

    @Test func orientationSixTurnsAPortraitPhoneShotUpright() throws {
        // A phone held upright stores the scene sideways: the sky (top of the scene) is on the stored left side.
        var pixels = [UInt8](repeating: 0, count: 64 * 32)
        for y in 0..<32 { for x in 0..<16 { pixels[y * 64 + x] = 255 } }  // bright "sky" on the left
        let stored = Image(width: 64, height: 32, channels: 1, pixels: pixels)
        let data = Fixtures.inserting(
            segment: Fixtures.exifSegment(orientation: 6, bigEndian: true),
            into: Fixtures.jpeg(stored))
        let image = try ImageDecoder.decode(data: data, name: "portrait.jpg")
        #expect(image.width == 32 && image.height == 64)
        #expect(image[x: 16, y: 2, channel: 0] > 240, "the sky should be at the top")
        #expect(image[x: 16, y: 61, channel: 0] < 15)
    }

    @Test func outOfRangeOrientationAndForeignAPP1SegmentsAreIgnored() throws {
        let plain = Fixtures.jpeg(source)
        let stored = try ImageDecoder.decode(data: plain, name: "stored.jpg")
        let xmpPayload = Array("http://ns.adobe.com/xap/1.0/\0<x:xmpmeta/>".utf8)
        let xmp: [UInt8] = [0xFF, 0xE1, 0, UInt8(xmpPayload.count + 2)] + xmpPayload
        for segment in [
            Fixtures.exifSegment(orientation: 9, bigEndian: false),
            Fixtures.exifSegment(orientation: 0, bigEndian: true), xmp,
        ] {
            let image = try ImageDecoder.decode(data: Fixtures.inserting(segment: segment, into: plain), name: "x.jpg")
            #expect(image == stored)
        }
        // The Exif segment after an XMP segment is still found.
        let both = Fixtures.inserting(
            segment: xmp + Fixtures.exifSegment(orientation: 3, bigEndian: false), into: plain)
        #expect(try ImageDecoder.decode(data: both, name: "both.jpg") == Self.displayed(stored, orientation: 3))
    }
}
