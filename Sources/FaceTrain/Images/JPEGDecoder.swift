import CTurboJPEG

/// JPEG through the TurboJPEG API of libjpeg-turbo: baseline and progressive, grey and colour.
enum JPEGDecoder {
    static func decode(_ bytes: UnsafeRawBufferPointer, name: String, limits: ImageDecoder.Limits) throws(ImageError)
        -> Image
    {
        guard let handle = tjInitDecompress() else {
            throw .corrupt(file: name, format: .jpeg, message: "TurboJPEG could not start: \(lastGlobalError())")
        }
        defer { tjDestroy(handle) }
        let source = bytes.baseAddress!.assumingMemoryBound(to: UInt8.self)
        let size = UInt(bytes.count)

        var width: Int32 = 0
        var height: Int32 = 0
        var subsampling: Int32 = 0
        var colorSpace: Int32 = 0
        if tjDecompressHeader3(handle, source, size, &width, &height, &subsampling, &colorSpace) != 0 {
            throw failure("libjpeg-turbo: " + message(handle), bytes: bytes, name: name)
        }
        // A stream that ends inside its tables parses as "tables only", with no frame and a size of 0 x 0.
        guard width > 0, height > 0 else {
            throw failure("the data ends before the frame header (SOF)", bytes: bytes, name: name)
        }
        let channels: Int
        let pixelFormat: TJPF
        switch colorSpace {
        case Int32(TJCS_GRAY.rawValue):
            (channels, pixelFormat) = (1, TJPF_GRAY)
        case Int32(TJCS_RGB.rawValue), Int32(TJCS_YCbCr.rawValue):
            (channels, pixelFormat) = (3, TJPF_RGB)
        case Int32(TJCS_CMYK.rawValue):
            throw .unsupportedColorSpace(file: name, format: .jpeg, colorSpace: "CMYK")
        case Int32(TJCS_YCCK.rawValue):
            throw .unsupportedColorSpace(file: name, format: .jpeg, colorSpace: "YCCK (Adobe CMYK)")
        default:
            throw .unsupportedColorSpace(file: name, format: .jpeg, colorSpace: "number \(colorSpace)")
        }
        let (w, h) = (Int(width), Int(height))
        try limits.check(width: w, height: h, file: name)

        var decodeError: ImageError?
        let pixels = [UInt8](unsafeUninitializedCapacity: w * h * channels) { buffer, count in
            let status = tjDecompress2(
                handle, source, size, buffer.baseAddress, width, 0, height,
                Int32(pixelFormat.rawValue), 0)
            if status != 0 {
                decodeError = classifyDecodeFailure(handle, bytes: bytes, name: name)
            }
            count = decodeError == nil ? w * h * channels : 0
        }
        if let decodeError { throw decodeError }
        let image = Image(width: w, height: h, channels: channels, pixels: pixels)
        guard let orientation = ExifOrientation(jpeg: bytes), orientation != .identity else { return image }
        return image.oriented(orientation)
    }

    /// Decides whether a non-zero tjDecompress2 status is fatal.
    ///
    /// libjpeg only warns about damage and hands back grey-filled rows: a truncated file decodes "fine" with
    /// a TJERR_WARNING. The one warning tolerated is garbage between markers of a stream that still ends with
    /// its EOI marker, which some cameras write and which leaves every pixel intact.
    private static func classifyDecodeFailure(_ handle: tjhandle, bytes: UnsafeRawBufferPointer, name: String)
        -> ImageError?
    {
        let text = message(handle)
        if tjGetErrorCode(handle) == Int32(TJERR_WARNING.rawValue), text.contains("extraneous bytes before marker"),
            endsWithEndOfImage(bytes)
        {
            return nil
        }
        return failure("libjpeg-turbo: " + text, bytes: bytes, name: name)
    }

    /// A truncated file makes libjpeg complain in many ways ("premature end", "missing SOS marker", ...);
    /// a stream without its final EOI marker is the reliable sign.
    private static func failure(_ text: String, bytes: UnsafeRawBufferPointer, name: String) -> ImageError {
        if text.lowercased().contains("premature end") || !endsWithEndOfImage(bytes) {
            return .truncated(file: name, format: .jpeg, detail: text)
        }
        return .corrupt(file: name, format: .jpeg, message: text)
    }

    /// Whether the data ends with the EOI marker FF D9, allowing for zero padding after it.
    private static func endsWithEndOfImage(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var end = bytes.count
        while end > 2, bytes[end - 1] == 0 { end -= 1 }
        return end >= 2 && bytes[end - 2] == 0xFF && bytes[end - 1] == 0xD9
    }

    private static func message(_ handle: tjhandle) -> String {
        String(cString: tjGetErrorStr2(handle))
    }

    private static func lastGlobalError() -> String {
        String(cString: tjGetErrorStr2(nil))
    }
}
