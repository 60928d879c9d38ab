/// An 8-bit image in memory: `height` rows of `width` pixels, each pixel `channels` bytes.
///
/// Layout: row-major and interleaved, so the sample of channel `c` at column `x`, row `y` is
/// `pixels[(y * width + x) * channels + c]`. One channel is grey; three are R, G, B in that order.
public struct Image: Sendable, Equatable {
    /// Number of pixels per row.
    public let width: Int
    /// Number of rows.
    public let height: Int
    /// Samples per pixel: 1 (grey) or 3 (RGB).
    public let channels: Int
    /// `width * height * channels` samples, row-major and interleaved.
    public let pixels: [UInt8]

    /// An image over existing samples; `pixels.count` must equal `width * height * channels`.
    public init(width: Int, height: Int, channels: Int, pixels: [UInt8]) {
        precondition(width > 0 && height > 0, "image size \(width) x \(height) is not positive")
        precondition(channels == 1 || channels == 3, "an image has 1 or 3 channels, not \(channels)")
        precondition(
            pixels.count == width * height * channels,
            "\(width) x \(height) x \(channels) image needs \(width * height * channels) samples, got \(pixels.count)")
        self.width = width
        self.height = height
        self.channels = channels
        self.pixels = pixels
    }

    /// The sample of `channel` at column `x`, row `y`.
    public subscript(x x: Int, y y: Int, channel channel: Int) -> UInt8 {
        pixels[(y * width + x) * channels + channel]
    }
}

extension Image: CustomStringConvertible {
    /// Size and kind, for example "92 x 112 grey".
    public var description: String {
        "\(width) x \(height) \(channels == 1 ? "grey" : "RGB")"
    }
}
