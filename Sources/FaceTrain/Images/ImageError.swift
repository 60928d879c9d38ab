/// Why an image file could not be turned into pixels; every case names the file.
public enum ImageError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The file could not be read at all (missing, a directory, no permission).
    case unreadable(file: String, reason: String)
    /// The file has zero bytes.
    case empty(file: String)
    /// The data stops before the image is complete.
    case truncated(file: String, format: ImageFormat, detail: String)
    /// The first bytes match no supported format, or a variant of one that is not supported.
    case notAnImage(file: String, reason: String)
    /// The image is stored in a colour space other than grey or RGB (for example CMYK).
    case unsupportedColorSpace(file: String, format: ImageFormat, colorSpace: String)
    /// The header announces more pixels than the limit; refused before any pixel memory is allocated.
    case tooLarge(file: String, width: Int, height: Int, maximumPixelCount: Int)
    /// A side is shorter than the minimum, too small to hold a usable face.
    case tooSmall(file: String, width: Int, height: Int, minimumSide: Int)
    /// The decoder rejected the data; `message` is the library's own text.
    case corrupt(file: String, format: ImageFormat, message: String)

    /// The file the error is about.
    public var file: String {
        switch self {
        case .unreadable(let file, _), .empty(let file), .truncated(let file, _, _), .notAnImage(let file, _),
            .unsupportedColorSpace(let file, _, _), .tooLarge(let file, _, _, _), .tooSmall(let file, _, _, _),
            .corrupt(let file, _, _):
            return file
        }
    }

    public var description: String {
        switch self {
        case .unreadable(let file, let reason):
            return "\(file): cannot read the file: \(reason).\nHINT: check that the path exists and is a readable file."
        case .empty(let file):
            return "\(file): the file is empty (0 bytes)."
                + "\nHINT: the copy or upload failed; copy the image again or remove it."
        case .truncated(let file, let format, let detail):
            return "\(file): the \(format.name) data is truncated (\(detail)); the image is damaged."
                + "\nHINT: copy the image again from its source, or remove it."
        case .notAnImage(let file, let reason):
            return "\(file): not an image: \(reason).\nHINT: facetrain reads JPEG, PNG, binary PGM (P5) and PPM (P6);"
                + " remove other files from the image folders."
        case .unsupportedColorSpace(let file, let format, let colorSpace):
            return "\(file): unsupported colour space \(colorSpace) in \(format.name);"
                + " facetrain reads grey and RGB images."
                + "\nHINT: convert it to RGB, for example `convert '\(file)' -colorspace sRGB out.jpg`."
        case .tooLarge(let file, let width, let height, let maximumPixelCount):
            return "\(file): \(width) x \(height) pixels (\(Self.megapixels(width * height)) megapixels) exceeds the"
                + " limit of \(Self.megapixels(maximumPixelCount)) megapixels (\(maximumPixelCount) pixels);"
                + " refused before decoding.\nHINT: face crops are small; crop or downscale the image first."
        case .tooSmall(let file, let width, let height, let minimumSide):
            return "\(file): \(width) x \(height) pixels is smaller than the minimum of \(minimumSide) pixels"
                + " on a side."
                + "\nHINT: use a larger crop of the face, or remove the image."
        case .corrupt(let file, let format, let message):
            return "\(file): corrupt \(format.name) data: \(message).\nHINT: copy the image again from its source,"
                + " or remove it."
        }
    }

    private static func megapixels(_ pixels: Int) -> String {
        let tenths = (pixels + 50_000) / 100_000
        return "\(tenths / 10).\(tenths % 10)"
    }
}
