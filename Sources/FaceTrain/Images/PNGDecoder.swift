import CPNG

/// PNG through libpng's simplified API, called only from C (Sources/CPNG/shim.h) so its longjmp stays in C.
enum PNGDecoder {
    static func decode(_ bytes: UnsafeRawBufferPointer, name: String, limits: ImageDecoder.Limits) throws(ImageError)
        -> Image
    {
        var header = facetrain_png_header()
        guard facetrain_png_read_header(bytes.baseAddress, bytes.count, &header) != 0 else {
            throw failure(text(header.message), name: name)
        }
        let (width, height) = (Int(header.width), Int(header.height))
        try limits.check(width: width, height: height, file: name)

        let channels = header.hasColor != 0 ? 3 : 1
        let capacity = width * height * (channels + (header.hasAlpha != 0 ? 1 : 0))
        var message = facetrain_png_header().message
        var succeeded = false
        let pixels = [UInt8](unsafeUninitializedCapacity: capacity) { buffer, count in
            succeeded = withUnsafeMutableBytes(of: &message) { messageBytes in
                facetrain_png_decode(
                    bytes.baseAddress, bytes.count, Int32(channels), buffer.baseAddress, capacity,
                    messageBytes.baseAddress!.assumingMemoryBound(to: CChar.self)) != 0
            }
            count = succeeded ? width * height * channels : 0
        }
        guard succeeded else { throw failure(text(message), name: name) }
        return Image(width: width, height: height, channels: channels, pixels: pixels)
    }

    private static func failure(_ message: String, name: String) -> ImageError {
        // libpng's memory reader says "read beyond end of data" when the file stops early.
        if message.contains("end of data") || message.contains("Not enough image data") {
            return .truncated(file: name, format: .png, detail: "libpng: \(message)")
        }
        return .corrupt(file: name, format: .png, message: "libpng: \(message)")
    }

    /// The NUL-terminated text in a fixed C character array.
    private static func text<T>(_ tuple: T) -> String {
        withUnsafeBytes(of: tuple) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
    }
}
