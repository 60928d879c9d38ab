import Foundation

/// A linear-ish RGB colour with components in [0, 1].
struct Color: Sendable {
    var red: Float
    var green: Float
    var blue: Float

    init(_ red: Float, _ green: Float, _ blue: Float) {
        self.red = red
        self.green = green
        self.blue = blue
    }

    /// A colour from 0–255 components, as palettes are usually written.
    init(bytes red: Int, _ green: Int, _ blue: Int) {
        self.init(Float(red) / 255, Float(green) / 255, Float(blue) / 255)
    }

    static func * (color: Color, factor: Float) -> Color {
        Color(color.red * factor, color.green * factor, color.blue * factor)
    }

    /// `self` moved towards `other` by `amount` (0 = self, 1 = other).
    func mixed(with other: Color, _ amount: Float) -> Color {
        Color(
            red + (other.red - red) * amount, green + (other.green - green) * amount,
            blue + (other.blue - blue) * amount)
    }

    /// Each channel scaled by its own random factor in 1 ± `spread`: the same hue family, not the same colour.
    func jittered(_ spread: Float, using random: inout SynthesisRandom) -> Color {
        let brightness = 1 + random.symmetric(spread)
        return Color(
            red * (brightness + random.symmetric(spread / 2)),
            green * (brightness + random.symmetric(spread / 2)),
            blue * (brightness + random.symmetric(spread / 2)))
    }

    static let black = Color(0, 0, 0)
    static let white = Color(1, 1, 1)
}

/// Where face space lands on the canvas: a roll rotation, a scale and a shift, all in one similarity transform.
struct ViewTransform: Sendable {
    /// Canvas pixels per face unit.
    let scale: Float
    /// Canvas position of the face-space origin.
    let originX: Float
    let originY: Float
    // Roll (radians, clockwise on screen) kept as its cosine and sine: the per-pixel mapping needs only those.
    private let cosine: Float
    private let sine: Float

    init(scale: Float, angle: Float, originX: Float, originY: Float) {
        self.scale = scale
        self.originX = originX
        self.originY = originY
        cosine = cosf(angle)
        sine = sinf(angle)
    }

    /// The face-space point at the centre of canvas pixel (column, row).
    @inline(__always)
    func facePoint(column: Float, row: Float) -> Point {
        let dx = (column - originX) / scale
        let dy = (row - originY) / scale
        return Point(cosine * dx + sine * dy, -sine * dx + cosine * dy)
    }

    /// The canvas position of a face-space point.
    func canvasPoint(_ point: Point) -> Point {
        Point(
            originX + scale * (cosine * point.x - sine * point.y), originY + scale * (sine * point.x + cosine * point.y)
        )
    }
}

/// A supersampled float RGB image that shapes are painted onto back to front.
struct Canvas {
    let width: Int
    let height: Int
    /// Interleaved RGB, row-major.
    var pixels: [Float]
    var view: ViewTransform

    init(width: Int, height: Int, view: ViewTransform) {
        self.width = width
        self.height = height
        self.view = view
        pixels = [Float](repeating: 0, count: width * height * 3)
    }

    /// One canvas pixel expressed in face units: the width of an anti-aliased edge.
    var pixelSize: Float { 1 / view.scale }

    /// Paints `shape` with `color`.
    ///
    /// - Parameters:
    ///   - opacity: peak alpha of the paint.
    ///   - softness: extra edge blur in face units, for shadows, blush and other soft tones.
    ///   - grain: per-pixel brightness variation (hair, beards, fabric), seeded by `grainSeed`.
    mutating func fill(
        _ shape: Shape, _ color: Color, opacity: Float = 1, softness: Float = 0, grain: Float = 0,
        grainSeed: UInt64 = 0
    ) {
        let region = shape.bounds
        let edge = pixelSize + softness
        let padded = Rect(
            minX: region.minX - edge, minY: region.minY - edge,
            maxX: region.maxX + edge, maxY: region.maxY + edge)
        guard let (columns, rows) = canvasRange(of: padded) else { return }
        let view = self.view
        let width = self.width
        pixels.withUnsafeMutableBufferPointer { buffer in
            for row in rows {
                for column in columns {
                    let point = view.facePoint(column: Float(column) + 0.5, row: Float(row) + 0.5)
                    let distance = shape.distance(point)
                    if distance >= edge / 2 { continue }
                    let alpha = opacity * min(1, max(0, 0.5 - distance / edge))
                    if alpha <= 0 { continue }
                    var paint = color
                    if grain > 0 {
                        paint = paint * (1 + grain * Self.hashNoise(column, row, grainSeed))
                    }
                    let offset = (row * width + column) * 3
                    buffer[offset] += (paint.red - buffer[offset]) * alpha
                    buffer[offset + 1] += (paint.green - buffer[offset + 1]) * alpha
                    buffer[offset + 2] += (paint.blue - buffer[offset + 2]) * alpha
                }
            }
        }
    }

    /// Canvas columns and rows whose pixels may touch a face-space rectangle, or nil when none do.
    private func canvasRange(of rect: Rect) -> (Range<Int>, Range<Int>)? {
        let corners = [
            Point(rect.minX, rect.minY), Point(rect.maxX, rect.minY),
            Point(rect.minX, rect.maxY), Point(rect.maxX, rect.maxY),
        ].map { view.canvasPoint($0) }
        let xs = corners.map(\.x)
        let ys = corners.map(\.y)
        guard let minX = xs.min(), let maxX = xs.max(), let minY = ys.min(), let maxY = ys.max(),
            maxX >= 0, maxY >= 0, minX < Float(width), minY < Float(height)
        else { return nil }
        // Clamped in floating point first: huge or infinite bounds must not overflow Int.
        let firstColumn = Int(max(0, minX).rounded(.down))
        let lastColumn = Int(min(Float(width - 1), maxX).rounded(.up))
        let firstRow = Int(max(0, minY).rounded(.down))
        let lastRow = Int(min(Float(height - 1), maxY).rounded(.up))
        guard firstColumn <= lastColumn, firstRow <= lastRow else { return nil }
        return (firstColumn..<(lastColumn + 1), firstRow..<(lastRow + 1))
    }

    /// Replaces every pixel with `shader(column, row, current colour)`; for backgrounds and lighting passes.
    ///
    /// With `block` > 1 the shader runs once per `block`×`block` square (at its first pixel) and fills the
    /// square: for smooth scenery that needs no supersampling, at a fraction of the cost.
    mutating func shade(block: Int = 1, _ shader: (Int, Int, Color) -> Color) {
        let width = self.width
        let height = self.height
        let block = max(1, block)
        pixels.withUnsafeMutableBufferPointer { buffer in
            for blockRow in stride(from: 0, to: height, by: block) {
                for blockColumn in stride(from: 0, to: width, by: block) {
                    let first = (blockRow * width + blockColumn) * 3
                    let result = shader(
                        blockColumn, blockRow, Color(buffer[first], buffer[first + 1], buffer[first + 2]))
                    for row in blockRow..<min(height, blockRow + block) {
                        for column in blockColumn..<min(width, blockColumn + block) {
                            let offset = (row * width + column) * 3
                            buffer[offset] = result.red
                            buffer[offset + 1] = result.green
                            buffer[offset + 2] = result.blue
                        }
                    }
                }
            }
        }
    }

    /// A deterministic value in [-1, 1] per pixel and seed: fine-grained texture without a random stream.
    static func hashNoise(_ column: Int, _ row: Int, _ seed: UInt64) -> Float {
        let key =
            UInt64(truncatingIfNeeded: column) &* 0x9E37_79B9_7F4A_7C15
            ^ UInt64(truncatingIfNeeded: row) &* 0xC2B2_AE3D_27D4_EB4F ^ seed
        return Float(SynthesisRandom.mix(key) >> 40) * (2 / 16_777_216) - 1
    }
}

/// Smooth random field on [0, 1]²: a grid of random values with smoothstep interpolation, summed over octaves.
struct ValueNoise {
    private let cells: Int
    private let values: [Float]

    /// A single-octave field with `cells` × `cells` grid cells.
    init(cells: Int, using random: inout SynthesisRandom) {
        self.cells = max(1, cells)
        values = (0..<((self.cells + 1) * (self.cells + 1))).map { _ in random.unit() }
    }

    /// The field at (u, v) in [0, 1]², in [0, 1].
    func value(_ u: Float, _ v: Float) -> Float {
        let x = min(max(u, 0), 1) * Float(cells)
        let y = min(max(v, 0), 1) * Float(cells)
        let column = min(Int(x), cells - 1)
        let row = min(Int(y), cells - 1)
        var fx = x - Float(column)
        var fy = y - Float(row)
        fx = fx * fx * (3 - 2 * fx)
        fy = fy * fy * (3 - 2 * fy)
        let stride = cells + 1
        let top = values[row * stride + column] * (1 - fx) + values[row * stride + column + 1] * fx
        let bottom = values[(row + 1) * stride + column] * (1 - fx) + values[(row + 1) * stride + column + 1] * fx
        return top * (1 - fy) + bottom * fy
    }
}

/// Several octaves of value noise (fractal Brownian motion), normalised to [0, 1].
struct FractalNoise {
    private let octaves: [ValueNoise]
    private let persistence: Float

    init(baseCells: Int, octaves count: Int, persistence: Float, using random: inout SynthesisRandom) {
        octaves = (0..<max(1, count)).map { ValueNoise(cells: baseCells << $0, using: &random) }
        self.persistence = persistence
    }

    func value(_ u: Float, _ v: Float) -> Float {
        var total: Float = 0
        var weight: Float = 1
        var weights: Float = 0
        for octave in octaves {
            total += octave.value(u, v) * weight
            weights += weight
            weight *= persistence
        }
        return total / weights
    }
}
