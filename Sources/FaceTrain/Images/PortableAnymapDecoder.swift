/// Binary Netpbm: PGM (P5, grey) and PPM (P6, RGB), 8-bit or 16-bit big-endian samples (maxval above 255).
///
/// Header: magic, width, height, maxval as ASCII decimals separated by whitespace, with `#` comments running
/// to the end of a line; exactly one whitespace byte then separates maxval from the samples.
enum PortableAnymapDecoder {
    static func decode(
        _ bytes: UnsafeRawBufferPointer, name: String, format: ImageFormat,
        limits: ImageDecoder.Limits
    ) throws(ImageError) -> Image {
        var reader = HeaderReader(bytes: bytes, index: 2, name: name, format: format)
        let width = try reader.number("width")
        let height = try reader.number("height")
        let maximum = try reader.number("maxval")
        guard width > 0, height > 0 else {
            throw .corrupt(file: name, format: format, message: "the header gives a size of \(width) x \(height)")
        }
        guard (1...65535).contains(maximum) else {
            throw .corrupt(file: name, format: format, message: "maxval \(maximum) is outside 1...65535")
        }
        try limits.check(width: width, height: height, file: name)
        // The single whitespace byte after maxval was consumed by `number`.
        let start = reader.index
        let channels = format == .ppm ? 3 : 1
        let sampleCount = width * height * channels
        let bytesPerSample = maximum > 255 ? 2 : 1
        let available = bytes.count - start
        guard available >= sampleCount * bytesPerSample else {
            throw .truncated(
                file: name, format: format,
                detail: "the header announces \(width) x \(height) pixels"
                    + " (\(sampleCount * bytesPerSample) bytes of samples) but only \(max(available, 0)) bytes follow")
        }

        let pixels = [UInt8](unsafeUninitializedCapacity: sampleCount) { target, count in
            let source = UnsafeRawBufferPointer(rebasing: bytes[start..<(start + sampleCount * bytesPerSample)])
            if maximum == 255 {
                _ = target.initialize(from: source)
            } else if bytesPerSample == 1 {
                // Rescale 0...maxval to 0...255, rounding; samples above maxval are out of spec and clamp to 255.
                var table = [UInt8](repeating: 255, count: 256)
                for value in 0...maximum { table[value] = UInt8((value * 255 + maximum / 2) / maximum) }
                for i in 0..<sampleCount { target[i] = table[Int(source[i])] }
            } else {
                for i in 0..<sampleCount {
                    let value = min(Int(source[2 * i]) << 8 | Int(source[2 * i + 1]), maximum)
                    target[i] = UInt8((value * 255 + maximum / 2) / maximum)
                }
            }
            count = sampleCount
        }
        return Image(width: width, height: height, channels: channels, pixels: pixels)
    }

    static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || (0x09...0x0D).contains(byte)
    }

    /// Reads the decimal fields of the header, skipping whitespace and comments.
    private struct HeaderReader {
        let bytes: UnsafeRawBufferPointer
        var index: Int
        let name: String
        let format: ImageFormat

        /// The next decimal field; afterwards `index` is just past the one whitespace byte that ends it.
        mutating func number(_ field: String) throws(ImageError) -> Int {
            while index < bytes.count {
                if bytes[index] == UInt8(ascii: "#") {
                    while index < bytes.count, bytes[index] != 0x0A, bytes[index] != 0x0D { index += 1 }
                } else if isWhitespace(bytes[index]) {
                    index += 1
                } else {
                    break
                }
            }
            guard index < bytes.count else {
                throw .truncated(file: name, format: format, detail: "the header ends before the \(field)")
            }
            var value = 0
            var digits = 0
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) {
                value = value * 10 + Int(bytes[index] - UInt8(ascii: "0"))
                digits += 1
                index += 1
                guard digits <= 9 else {
                    throw .corrupt(file: name, format: format, message: "the header's \(field) has too many digits")
                }
            }
            guard digits > 0 else {
                let found = Character(UnicodeScalar(bytes[index]))
                throw .corrupt(
                    file: name, format: format, message: "the header has \"\(found)\" where the \(field) belongs")
            }
            guard index < bytes.count else {
                throw .truncated(file: name, format: format, detail: "the header ends after the \(field)")
            }
            guard isWhitespace(bytes[index]) else {
                let found = Character(UnicodeScalar(bytes[index]))
                throw .corrupt(file: name, format: format, message: "the header's \(field) is followed by \"\(found)\"")
            }
            index += 1
            return value
        }
    }
}
