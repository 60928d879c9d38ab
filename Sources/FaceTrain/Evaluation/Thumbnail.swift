import Foundation

/// Small images for the HTML report, as `data:` URIs that every browser shows.
public enum Thumbnail {
    /// An uncompressed 24-bit BMP of the crop; BMP needs no library and crops are tiny.
    public static func bmpDataURI(_ image: Image) -> String {
        let rowBytes = (image.width * 3 + 3) & ~3
        let pixelBytes = rowBytes * image.height
        var data = Data()
        func append32(_ value: Int) {
            withUnsafeBytes(of: UInt32(truncatingIfNeeded: value).littleEndian) { data.append(contentsOf: $0) }
        }
        func append16(_ value: Int) {
            withUnsafeBytes(of: UInt16(truncatingIfNeeded: value).littleEndian) { data.append(contentsOf: $0) }
        }
        data.append(contentsOf: Array("BM".utf8))
        append32(54 + pixelBytes)
        append32(0)
        append32(54)
        append32(40)
        append32(image.width)
        append32(image.height)
        append16(1)
        append16(24)
        append32(0)
        append32(pixelBytes)
        append32(2835)
        append32(2835)
        append32(0)
        append32(0)
        // BMP rows run bottom-up, pixels in BGR order.
        for y in stride(from: image.height - 1, through: 0, by: -1) {
            var row = [UInt8](repeating: 0, count: rowBytes)
            for x in 0..<image.width {
                let base = (y * image.width + x) * image.channels
                let red = image.pixels[base]
                let green = image.pixels[base + min(1, image.channels - 1)]
                let blue = image.pixels[base + min(2, image.channels - 1)]
                row[x * 3] = blue
                row[x * 3 + 1] = green
                row[x * 3 + 2] = red
            }
            data.append(contentsOf: row)
        }
        return "data:image/bmp;base64," + data.base64EncodedString()
    }
}
