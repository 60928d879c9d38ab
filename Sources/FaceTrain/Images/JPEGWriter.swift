import CTurboJPEG
import Foundation

/// A JPEG compression failure, with libjpeg-turbo's own message.
public struct JPEGWriterError: Error, CustomStringConvertible {
    public let reason: String
    public var description: String { "JPEG compression failed: \(reason)" }
}

/// Encodes 8-bit RGB pixels as baseline JPEG through libjpeg-turbo's `tjCompress2`.
public enum JPEGWriter {
    /// JPEG bytes for `width`×`height` interleaved RGB `pixels` (row-major, no padding) at `quality` 1–100,
    /// with 4:2:0 chroma subsampling as phone cameras use.
    public static func encode(rgb pixels: [UInt8], width: Int, height: Int, quality: Int) throws -> Data {
        guard width > 0, height > 0, pixels.count == width * height * 3 else {
            throw JPEGWriterError(reason: "\(pixels.count) bytes do not hold a \(width)x\(height) RGB image")
        }
        guard (1...100).contains(quality) else {
            throw JPEGWriterError(reason: "quality \(quality) is outside 1...100")
        }
        guard let handle = tjInitCompress() else {
            throw JPEGWriterError(reason: "tjInitCompress returned no handle")
        }
        defer { tjDestroy(handle) }
        var buffer: UnsafeMutablePointer<UInt8>? = nil
        var size: UInt = 0
        let status = pixels.withUnsafeBufferPointer { source in
            tjCompress2(
                handle, source.baseAddress, Int32(width), 0, Int32(height), Int32(TJPF_RGB.rawValue), &buffer,
                &size, Int32(TJSAMP_420.rawValue), Int32(quality), 0)
        }
        defer { if let buffer { tjFree(buffer) } }
        guard status == 0, let buffer else {
            throw JPEGWriterError(reason: String(cString: tjGetErrorStr2(handle)))
        }
        return Data(bytes: buffer, count: Int(size))
    }
}
