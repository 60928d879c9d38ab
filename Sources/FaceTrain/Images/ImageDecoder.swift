import Foundation

/// The image file formats facetrain reads, recognised by their first bytes, never by the file name.
public enum ImageFormat: String, Sendable, CaseIterable {
    case jpeg, png, pgm, ppm

    /// The usual upper-case name, for messages ("JPEG").
    public var name: String { rawValue.uppercased() }

    /// The format whose signature starts `bytes`, or nil when none matches.
    public init?(signature bytes: some Collection<UInt8>) {
        let head = Array(bytes.prefix(8))
        if head.starts(with: [0xFF, 0xD8, 0xFF]) {
            self = .jpeg
        } else if head.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) {
            self = .png
        } else if head.count >= 3, head[0] == UInt8(ascii: "P"), PortableAnymapDecoder.isWhitespace(head[2]),
            head[1] == UInt8(ascii: "5") || head[1] == UInt8(ascii: "6")
        {
            self = head[1] == UInt8(ascii: "5") ? .pgm : .ppm
        } else {
            return nil
        }
    }
}

/// Turns image files (JPEG, PNG, binary PGM/PPM) into 8-bit grey or RGB pixels.
///
/// The header is read first and its size checked against `Limits`, so a decompression bomb is refused
/// before any pixel memory is allocated. JPEGs are turned upright by their EXIF orientation.
public enum ImageDecoder {
    /// File extensions (lower case) of the formats decoded here.
    package static let fileExtensions: Set<String> = ["jpg", "jpeg", "png", "pgm", "ppm", "pnm"]

    /// The image files under `folder` (by extension), recursively, as paths relative to it, sorted;
    /// hidden files and folders are skipped. Nil when the folder cannot be read.
    package static func imageFiles(under folder: URL) -> [String]? {
        guard let walker = FileManager.default.enumerator(atPath: folder.path) else { return nil }
        var paths: [String] = []
        while let relativePath = walker.nextObject() as? String {
            var isDirectory: ObjCBool = false
            guard !relativePath.split(separator: "/").contains(where: { $0.hasPrefix(".") }),
                fileExtensions.contains((relativePath as NSString).pathExtension.lowercased()),
                FileManager.default.fileExists(
                    atPath: folder.appendingPathComponent(relativePath).path, isDirectory: &isDirectory),
                !isDirectory.boolValue
            else { continue }
            paths.append(relativePath)
        }
        return paths.sorted()
    }

    /// Size limits checked on the header, before decoding.
    public struct Limits: Sendable, Equatable {
        /// Largest accepted `width * height`.
        public var maximumPixelCount: Int
        /// Smallest accepted width and height.
        public var minimumSide: Int

        /// Limits with the given values; the defaults are 50 megapixels and 24 pixels.
        public init(maximumPixelCount: Int = 50_000_000, minimumSide: Int = 24) {
            self.maximumPixelCount = maximumPixelCount
            self.minimumSide = minimumSide
        }

        /// 50 megapixels at most, 24 pixels on a side at least.
        public static let standard = Limits()

        /// Throws `.tooLarge` or `.tooSmall` for a header announcing `width` x `height`.
        func check(width: Int, height: Int, file: String) throws(ImageError) {
            // Compare by division so absurd header values cannot overflow the product.
            if width > 0, height > maximumPixelCount / width {
                throw .tooLarge(file: file, width: width, height: height, maximumPixelCount: maximumPixelCount)
            }
            if width < minimumSide || height < minimumSide {
                throw .tooSmall(file: file, width: width, height: height, minimumSide: minimumSide)
            }
        }
    }

    /// Reads and decodes the image file at `url`; errors name the file's path.
    public static func decode(contentsOf url: URL, limits: Limits = .standard) throws(ImageError) -> Image {
        let data = try readFile(url)
        return try decode(data: data, name: url.path, limits: limits)
    }

    /// The bytes of an image file; devices, pipes, dangling links and huge files are refused by name.
    public static func readFile(_ url: URL) throws(ImageError) -> Data {
        // Devices and pipes never end (or block); a dangling link deserves its own words.
        var status = stat()
        if stat(url.path, &status) == 0 {
            let kind = status.st_mode & S_IFMT
            if kind != S_IFREG && kind != S_IFDIR {
                throw .unreadable(file: url.path, reason: "not a regular file (a device, pipe or socket)")
            }
            if kind == S_IFREG && status.st_size > 256 << 20 {
                throw .unreadable(file: url.path, reason: "\(status.st_size >> 20) MB, far too large for a face crop")
            }
        } else {
            switch errno {
            case ENOENT where lstat(url.path, &status) == 0:
                throw .unreadable(file: url.path, reason: "a symbolic link to a file that does not exist")
            case ELOOP: throw .unreadable(file: url.path, reason: "a loop of symbolic links")
            case EACCES:
                throw .unreadable(
                    file: url.path, reason: "permission denied (its folders need execute permission for this user)")
            default: break  // Foundation's read below names the problem
            }
        }
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw .unreadable(file: url.path, reason: Self.reason(for: url, error: error))
        }
        return data
    }

    /// Decodes an image file already in memory; `name` identifies it in errors.
    public static func decode(data: Data, name: String, limits: Limits = .standard) throws(ImageError) -> Image {
        let result = data.withUnsafeBytes { bytes -> Result<Image, ImageError> in
            do throws(ImageError) {
                return .success(try decode(bytes: bytes, name: name, limits: limits))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    static func decode(bytes: UnsafeRawBufferPointer, name: String, limits: Limits) throws(ImageError) -> Image {
        guard !bytes.isEmpty else { throw .empty(file: name) }
        guard let format = ImageFormat(signature: bytes) else {
            // The start of a JPEG or PNG signature that stops early is a cut file, not another format.
            let jpeg: [UInt8] = [0xFF, 0xD8, 0xFF]
            let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
            for (signature, format) in [(jpeg, ImageFormat.jpeg), (png, .png)]
            where bytes.count < signature.count && signature.starts(with: bytes) {
                throw .truncated(file: name, format: format, detail: "it ends after \(bytes.count) bytes")
            }
            throw .notAnImage(file: name, reason: unknownFormatReason(bytes))
        }
        switch format {
        case .jpeg: return try JPEGDecoder.decode(bytes, name: name, limits: limits)
        case .png: return try PNGDecoder.decode(bytes, name: name, limits: limits)
        case .pgm, .ppm: return try PortableAnymapDecoder.decode(bytes, name: name, format: format, limits: limits)
        }
    }

    private static func unknownFormatReason(_ bytes: UnsafeRawBufferPointer) -> String {
        if bytes.count >= 2, bytes[0] == UInt8(ascii: "P"), (UInt8(ascii: "1")...UInt8(ascii: "4")).contains(bytes[1]) {
            let kind = "P" + String(UnicodeScalar(bytes[1]))
            return "it is an ASCII or bitmap Netpbm file (\(kind)), which is not supported;"
                + " convert it to binary PGM (P5) or PPM (P6)"
        }
        let head = bytes.prefix(8).map { byte in
            let digits = String(byte, radix: 16)
            return digits.count == 1 ? "0" + digits : digits
        }
        return "its first bytes (\(head.joined(separator: " "))) match no JPEG, PNG, PGM or PPM signature"
    }

    /// Foundation's read errors are vague on Linux ("error 256"), so name the common causes from the file system.
    private static func reason(for url: URL, error: any Error) -> String {
        var isDirectory: ObjCBool = false
        if !FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) { return "no such file" }
        if isDirectory.boolValue { return "it is a directory" }
        if !FileManager.default.isReadableFile(atPath: url.path) { return "permission denied" }
        return error.localizedDescription
    }
}
