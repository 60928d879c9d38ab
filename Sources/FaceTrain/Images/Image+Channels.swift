// Converting an image between grey and RGB. Not resizing (Image+Resize.swift) and not decoding.

extension Image {
    /// This image with `channels` channels (1 or 3): grey is repeated into R, G and B; RGB becomes its
    /// Rec. 601 luma, Y = 0.299 R + 0.587 G + 0.114 B, rounded.
    public func converted(channels targetChannels: Int) -> Image {
        precondition(targetChannels == 1 || targetChannels == 3, "an image has 1 or 3 channels, not \(targetChannels)")
        if targetChannels == channels { return self }
        let count = width * height
        let output = [UInt8](unsafeUninitializedCapacity: count * targetChannels) { target, initialized in
            pixels.withUnsafeBufferPointer { source in
                if targetChannels == 3 {
                    for i in 0..<count {
                        let grey = source[i]
                        target[3 * i] = grey
                        target[3 * i + 1] = grey
                        target[3 * i + 2] = grey
                    }
                } else {
                    // The Rec. 601 weights in 16-bit fixed point; they sum to exactly 65536, so white stays 255.
                    for i in 0..<count {
                        let red = UInt32(source[3 * i])
                        let green = UInt32(source[3 * i + 1])
                        let blue = UInt32(source[3 * i + 2])
                        target[i] = UInt8((19595 * red + 38470 * green + 7471 * blue + 32768) >> 16)
                    }
                }
            }
            initialized = count * targetChannels
        }
        return Image(width: width, height: height, channels: targetChannels, pixels: output)
    }
}
