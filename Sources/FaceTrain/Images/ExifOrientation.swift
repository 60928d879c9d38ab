/// The eight EXIF orientations (TIFF tag 0x0112): how the stored pixels must be turned to display upright.
///
/// The names say what to do to the stored image, as phones write the tag: a portrait photo taken with the
/// phone upright is stored sideways with orientation 6, "rotate 90 degrees clockwise to display".
public enum ExifOrientation: Int, Sendable, CaseIterable {
    /// 1: stored as displayed.
    case identity = 1
    /// 2: mirror left-right.
    case flipHorizontal = 2
    /// 3: rotate 180 degrees.
    case rotate180 = 3
    /// 4: mirror top-bottom.
    case flipVertical = 4
    /// 5: mirror across the main diagonal (mirror left-right, then rotate 90 degrees counter-clockwise).
    case transpose = 5
    /// 6: rotate 90 degrees clockwise.
    case rotate90Clockwise = 6
    /// 7: mirror across the anti-diagonal (mirror left-right, then rotate 90 degrees clockwise).
    case transverse = 7
    /// 8: rotate 90 degrees counter-clockwise.
    case rotate90CounterClockwise = 8

    /// Whether displaying the image swaps its width and height.
    public var swapsSides: Bool { rawValue >= 5 }

    /// The orientation tag of a JPEG's APP1 Exif segment, or nil when there is none or it is malformed.
    ///
    /// Walks the markers up to the first scan; only IFD0 of the TIFF structure is read, in either byte order.
    init?(jpeg bytes: UnsafeRawBufferPointer) {
        var index = 2  // after SOI
        while index + 4 <= bytes.count {
            guard bytes[index] == 0xFF else { return nil }
            let marker = bytes[index + 1]
            // Fill bytes, then markers without a length field (TEM, RSTn, SOI).
            if marker == 0xFF {
                index += 1
                continue
            }
            if marker == 0x01 || (0xD0...0xD8).contains(marker) {
                index += 2
                continue
            }
            if marker == 0xDA || marker == 0xD9 { return nil }  // image data starts: metadata is over
            let length = Int(bytes[index + 2]) << 8 | Int(bytes[index + 3])
            let start = index + 4
            let end = index + 2 + length
            guard length >= 2, end <= bytes.count else { return nil }
            if marker == 0xE1, let value = Self.tiffOrientation(UnsafeRawBufferPointer(rebasing: bytes[start..<end])) {
                self.init(rawValue: value)
                return
            }
            index = end
        }
        return nil
    }

    /// Tag 0x0112 of IFD0 in an APP1 payload that starts with "Exif\0\0" and a TIFF header.
    private static func tiffOrientation(_ segment: UnsafeRawBufferPointer) -> Int? {
        let exifHeader: [UInt8] = [0x45, 0x78, 0x69, 0x66, 0, 0]
        guard segment.count >= 6 + 8, segment.prefix(6).elementsEqual(exifHeader) else { return nil }
        let tiff = UnsafeRawBufferPointer(rebasing: segment[6...])
        let bigEndian: Bool
        switch (tiff[0], tiff[1]) {
        case (0x4D, 0x4D): bigEndian = true  // "MM"
        case (0x49, 0x49): bigEndian = false  // "II"
        default: return nil
        }
        func read(_ offset: Int, _ size: Int) -> Int? {
            guard offset >= 0, offset + size <= tiff.count else { return nil }
            var value = 0
            for i in 0..<size {
                let byte = Int(tiff[offset + (bigEndian ? i : size - 1 - i)])
                value = value << 8 | byte
            }
            return value
        }
        guard read(2, 2) == 42, let ifd = read(4, 4), let entryCount = read(ifd, 2) else { return nil }
        for entry in 0..<entryCount {
            let position = ifd + 2 + entry * 12
            guard let tag = read(position, 2), let type = read(position + 2, 2) else { return nil }
            guard tag == 0x0112 else { continue }
            // SHORT is what the standard prescribes; LONG is tolerated. Either sits left-justified in the value field.
            switch type {
            case 3: return read(position + 8, 2)
            case 4: return read(position + 8, 4)
            default: return nil
            }
        }
        return nil
    }
}

extension Image {
    /// This image turned as `orientation` says, for example the stored pixels of a JPEG turned upright.
    public func oriented(_ orientation: ExifOrientation) -> Image {
        if orientation == .identity { return self }
        let (w, h, c) = (width, height, channels)
        let (outputWidth, outputHeight) = orientation.swapsSides ? (h, w) : (w, h)
        // For output pixel (x, y): source pixel = origin + x * stepX + y * stepY, in pixel units.
        let (origin, stepX, stepY): (Int, Int, Int)
        switch orientation {
        case .identity: (origin, stepX, stepY) = (0, 1, w)
        case .flipHorizontal: (origin, stepX, stepY) = (w - 1, -1, w)
        case .rotate180: (origin, stepX, stepY) = (h * w - 1, -1, -w)
        case .flipVertical: (origin, stepX, stepY) = ((h - 1) * w, 1, -w)
        case .transpose: (origin, stepX, stepY) = (0, w, 1)
        case .rotate90Clockwise: (origin, stepX, stepY) = ((h - 1) * w, -w, 1)
        case .transverse: (origin, stepX, stepY) = (h * w - 1, -w, -1)
        case .rotate90CounterClockwise: (origin, stepX, stepY) = (w - 1, w, -1)
        }
        let output = [UInt8](unsafeUninitializedCapacity: pixels.count) { target, count in
            pixels.withUnsafeBufferPointer { source in
                var t = 0
                for y in 0..<outputHeight {
                    var s = origin + y * stepY
                    for _ in 0..<outputWidth {
                        for k in 0..<c { target[t + k] = source[s * c + k] }
                        t += c
                        s += stepX
                    }
                }
            }
            count = pixels.count
        }
        return Image(width: outputWidth, height: outputHeight, channels: c, pixels: output)
    }
}
