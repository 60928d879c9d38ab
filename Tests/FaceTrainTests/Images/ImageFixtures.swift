import CPNG
import CTurboJPEG
import Foundation
import Testing

@testable import FaceTrain

/// Image files built at test time with libjpeg-turbo and libpng, so no binary fixture is checked in.
enum Fixtures {
    /// A `width` x `height` pattern of 8 x 8 blocks, each a different colour, so any turn or mirror shows.
    static func blockPattern(width: Int, height: Int, channels: Int) -> Image {
        var pixels = [UInt8](repeating: 0, count: width * height * channels)
        for y in 0..<height {
            for x in 0..<width {
                let block = (y / 8) * ((width + 7) / 8) + x / 8
                for c in 0..<channels {
                    // Spread block colours over the range; channel offsets keep R, G, B different.
                    pixels[(y * width + x) * channels + c] = UInt8((block * 53 + c * 97 + 20) % 236 + 10)
                }
            }
        }
        return Image(width: width, height: height, channels: channels, pixels: pixels)
    }

    /// Seeded pseudo-random pixels, which compress badly: the scan data then dominates an encoded file.
    static func noise(width: Int, height: Int, channels: Int, seed: UInt64 = 1) -> Image {
        var state = seed
        let pixels = (0..<(width * height * channels)).map { _ -> UInt8 in
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return UInt8(truncatingIfNeeded: state >> 56)
        }
        return Image(width: width, height: height, channels: channels, pixels: pixels)
    }

    // MARK: - JPEG

    /// Compresses `pixels` with tjCompress2.
    static func jpeg(
        pixels: [UInt8], width: Int, height: Int, pixelFormat: TJPF, subsampling: TJSAMP = TJSAMP_444,
        quality: Int32 = 100, flags: Int32 = 0
    ) -> Data {
        let handle = tjInitCompress()!
        defer { tjDestroy(handle) }
        var buffer: UnsafeMutablePointer<UInt8>? = nil
        var size: UInt = 0
        let status = pixels.withUnsafeBufferPointer { source in
            tjCompress2(
                handle, source.baseAddress, Int32(width), 0, Int32(height), Int32(pixelFormat.rawValue),
                &buffer, &size, Int32(subsampling.rawValue), quality, flags)
        }
        precondition(status == 0, "tjCompress2 failed: \(String(cString: tjGetErrorStr2(handle)))")
        defer { tjFree(buffer) }
        return Data(bytes: buffer!, count: Int(size))
    }

    /// Compresses an image: grey as a one-component JPEG, RGB with 4:4:4 sampling.
    static func jpeg(_ image: Image, quality: Int32 = 100, flags: Int32 = 0) -> Data {
        image.channels == 1
            ? jpeg(
                pixels: image.pixels, width: image.width, height: image.height, pixelFormat: TJPF_GRAY,
                subsampling: TJSAMP_GRAY, quality: quality, flags: flags)
            : jpeg(
                pixels: image.pixels, width: image.width, height: image.height, pixelFormat: TJPF_RGB,
                quality: quality, flags: flags)
    }

    /// `jpeg` with a segment inserted right after SOI.
    static func inserting(segment: [UInt8], into jpeg: Data) -> Data {
        var result = Data(jpeg.prefix(2))
        result.append(contentsOf: segment)
        result.append(jpeg.dropFirst(2))
        return result
    }

    /// An APP1 Exif segment whose IFD0 holds a Make tag and then the orientation tag, in either byte order.
    static func exifSegment(orientation: Int, bigEndian: Bool) -> [UInt8] {
        func u16(_ value: Int) -> [UInt8] {
            bigEndian ? [UInt8(value >> 8), UInt8(value & 0xFF)] : [UInt8(value & 0xFF), UInt8(value >> 8)]
        }
        func u32(_ value: Int) -> [UInt8] {
            let bytes = [
                UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF),
                UInt8(value & 0xFF),
            ]
            return bigEndian ? bytes : bytes.reversed()
        }
        let make = Array("Phone\0".utf8)
        var tiff: [UInt8] = bigEndian ? [0x4D, 0x4D] : [0x49, 0x49]
        tiff += u16(42) + u32(8)
        tiff += u16(2)  // two entries
        tiff += u16(0x010F) + u16(2) + u32(make.count) + u32(8 + 2 + 2 * 12 + 4)  // Make, ASCII, stored after the IFD
        tiff += u16(0x0112) + u16(3) + u32(1) + u16(orientation) + u16(0)  // Orientation, SHORT, left-justified
        tiff += u32(0)  // no IFD1
        tiff += make
        let payload = Array("Exif\0\0".utf8) + tiff
        let length = payload.count + 2
        return [0xFF, 0xE1, UInt8(length >> 8), UInt8(length & 0xFF)] + payload
    }

    /// `jpeg` with the size in its SOF0/SOF2 header replaced.
    static func patchingFrameSize(of jpeg: Data, width: Int, height: Int) -> Data {
        var bytes = [UInt8](jpeg)
        var index = 2
        while index + 9 < bytes.count {
            let marker = bytes[index + 1]
            if marker == 0xC0 || marker == 0xC2 {
                bytes[index + 5] = UInt8(height >> 8)
                bytes[index + 6] = UInt8(height & 0xFF)
                bytes[index + 7] = UInt8(width >> 8)
                bytes[index + 8] = UInt8(width & 0xFF)
                return Data(bytes)
            }
            index += 2 + (Int(bytes[index + 2]) << 8 | Int(bytes[index + 3]))
        }
        preconditionFailure("no SOF marker")
    }

    // MARK: - PNG

    /// PNG colour types (PNG specification, table 11.1).
    enum PNGColorType: Int32 {
        case grey = 0
        case rgb = 2
        case palette = 3
        case greyAlpha = 4
        case rgba = 6
    }

    /// Encodes already-packed rows (PNG byte layout: 16-bit samples big-endian, sub-byte samples packed
    /// from the high bits) with libpng's classic writer.
    static func png(
        width: Int, height: Int, bitDepth: Int32, colorType: PNGColorType, rows: [[UInt8]],
        palette: [(UInt8, UInt8, UInt8)] = [], transparency: [UInt8] = [], interlaced: Bool = false
    )
        -> Data
    {
        final class Sink { var data = Data() }
        let sink = Sink()
        var png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nil, nil, nil)
        var info = png_create_info_struct(png)
        png_set_write_fn(
            png, Unmanaged.passUnretained(sink).toOpaque(),
            { png, bytes, count in
                let sink = Unmanaged<Sink>.fromOpaque(png_get_io_ptr(png)!).takeUnretainedValue()
                sink.data.append(bytes!, count: count)
            }, nil)
        png_set_IHDR(
            png, info, UInt32(width), UInt32(height), bitDepth, colorType.rawValue,
            interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
            PNG_FILTER_TYPE_DEFAULT)
        if !palette.isEmpty {
            var entries = palette.map { png_color(red: $0.0, green: $0.1, blue: $0.2) }
            png_set_PLTE(png, info, &entries, Int32(entries.count))
        }
        if !transparency.isEmpty {
            var alphas = transparency
            png_set_tRNS(png, info, &alphas, Int32(alphas.count), nil)
        }
        png_write_info(png, info)
        let passes = interlaced ? png_set_interlace_handling(png) : 1
        for _ in 0..<passes {
            for row in rows { row.withUnsafeBufferPointer { png_write_row(png, $0.baseAddress) } }
        }
        png_write_end(png, nil)
        png_destroy_write_struct(&png, &info)
        return sink.data
    }

    /// An 8-bit PNG of an image (grey or RGB).
    static func png(_ image: Image) -> Data {
        let rowLength = image.width * image.channels
        let rows = (0..<image.height).map { Array(image.pixels[($0 * rowLength)..<(($0 + 1) * rowLength)]) }
        return png(
            width: image.width, height: image.height, bitDepth: 8,
            colorType: image.channels == 1 ? .grey : .rgb, rows: rows)
    }

    /// `png` with the IHDR size replaced and its CRC recomputed, so libpng accepts the header.
    static func patchingHeaderSize(of png: Data, width: Int, height: Int) -> Data {
        var bytes = [UInt8](png)
        // Signature (8), length (4), "IHDR" (4), then width and height as big-endian 32-bit numbers.
        for (offset, value) in [(16, width), (20, height)] {
            for i in 0..<4 { bytes[offset + i] = UInt8((value >> (24 - 8 * i)) & 0xFF) }
        }
        let crc = crc32(bytes[12..<29])  // chunk type and 13 data bytes
        for i in 0..<4 { bytes[29 + i] = UInt8((crc >> (24 - 8 * UInt32(i))) & 0xFF) }
        return Data(bytes)
    }

    private static func crc32(_ bytes: ArraySlice<UInt8>) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return ~crc
    }

    // MARK: - Netpbm

    /// A binary PGM/PPM file: `header` text (magic, size, maxval, comments as given) then the sample bytes.
    static func netpbm(header: String, samples: [UInt8]) -> Data {
        Data(header.utf8) + Data(samples)
    }
}

/// Asserts that `body` throws an ImageError and returns it for closer checks.
func expectImageError(_ body: () throws(ImageError) -> Image, sourceLocation: SourceLocation = #_sourceLocation)
    -> ImageError?
{
    do {
        let image = try body()
        Issue.record("expected an ImageError, decoded \(image)", sourceLocation: sourceLocation)
        return nil
    } catch {
        return error
    }
}

/// Largest absolute difference between corresponding samples of two images of the same shape.
func maximumDifference(_ a: Image, _ b: Image) -> Int {
    precondition(a.width == b.width && a.height == b.height && a.channels == b.channels, "\(a) vs \(b)")
    return zip(a.pixels, b.pixels).map { abs(Int($0) - Int($1)) }.max() ?? 0
}
