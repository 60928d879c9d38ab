import Foundation

// The backgrounds synthetic crops are drawn on (gradients, noise, stripes) and the colour model
// they use. Not the faces or the non-face scenes (FaceRenderer, NonFaceRenderer).

extension Color {
    /// A colour from hue (turns, [0, 1)), saturation and value.
    init(hue: Float, saturation: Float, value: Float) {
        let h = (hue - floorf(hue)) * 6
        let sector = Int(h) % 6
        let f = h - floorf(h)
        let p = value * (1 - saturation)
        let q = value * (1 - saturation * f)
        let t = value * (1 - saturation * (1 - f))
        switch sector {
        case 0: self.init(value, t, p)
        case 1: self.init(q, value, p)
        case 2: self.init(p, value, t)
        case 3: self.init(p, q, value)
        case 4: self.init(t, p, value)
        default: self.init(value, p, q)
        }
    }

    /// A random colour; `saturation` and `value` bound how vivid and how bright it may be.
    static func random(saturation: ClosedRange<Float>, value: ClosedRange<Float>, using random: inout SynthesisRandom)
        -> Color
    {
        Color(hue: random.unit(), saturation: random.uniform(saturation), value: random.uniform(value))
    }
}

/// Scenery behind a face, also used on its own as "background" non-faces so that the background never tells
/// the classes apart. Paints in image coordinates: the canvas view must map [-1, 1]² onto the whole canvas.
enum Background {
    enum Kind: CaseIterable { case wall, texture, blinds, room, bokeh }

    /// Paints a random scene over the whole canvas.
    static func paint(_ canvas: inout Canvas, using random: inout SynthesisRandom) {
        switch random.element(of: Kind.allCases) {
        case .wall: paintWall(&canvas, using: &random)
        case .texture: paintTexture(&canvas, contrast: random.uniform(0.15...0.5), using: &random)
        case .blinds: paintStripes(&canvas, contrast: random.uniform(0.08...0.3), using: &random)
        case .room: paintRoom(&canvas, using: &random)
        case .bokeh: paintBokeh(&canvas, using: &random)
        }
    }

    /// A plain wall with a soft gradient and faint plaster texture.
    static func paintWall(_ canvas: inout Canvas, using random: inout SynthesisRandom) {
        let first = Color.random(saturation: 0...0.4, value: 0.25...0.95, using: &random)
        let second = first.jittered(0.25, using: &random)
        let angle = random.uniform(0...(2 * Float.pi))
        let direction = Point(cosf(angle), sinf(angle))
        let noise = FractalNoise(baseCells: 3, octaves: 3, persistence: 0.5, using: &random)
        let grain = random.uniform(0...0.08)
        let size = Float(canvas.width)
        canvas.shade(block: FaceRenderer.supersampling) { column, row, _ in
            let u = (Float(column) + 0.5) / size
            let v = (Float(row) + 0.5) / size
            let along = ((u - 0.5) * direction.x + (v - 0.5) * direction.y) + 0.5
            return first.mixed(with: second, along) * (1 + grain * (noise.value(u, v) - 0.5) * 2)
        }
    }

    /// Two colours mixed by fractal noise: foliage, curtains, plaster, stone, clouds.
    static func paintTexture(_ canvas: inout Canvas, contrast: Float, using random: inout SynthesisRandom) {
        let first = Color.random(saturation: 0...0.7, value: 0.1...0.95, using: &random)
        let second = first.mixed(with: Color.random(saturation: 0...0.8, value: 0.1...1, using: &random), contrast * 2)
        let noise = FractalNoise(
            baseCells: random.integer(2...6), octaves: random.integer(2...4),
            persistence: random.uniform(0.4...0.75), using: &random)
        let sharpness = random.uniform(1...4)
        let size = Float(canvas.width)
        canvas.shade(block: FaceRenderer.supersampling) { column, row, _ in
            let value = noise.value((Float(column) + 0.5) / size, (Float(row) + 0.5) / size)
            let mix = min(1, max(0, (value - 0.5) * sharpness + 0.5))
            return first.mixed(with: second, mix)
        }
    }

    /// Soft parallel bands: blinds, shelves, panelling, fabric.
    static func paintStripes(_ canvas: inout Canvas, contrast: Float, using random: inout SynthesisRandom) {
        let base = Color.random(saturation: 0...0.5, value: 0.2...0.95, using: &random)
        let other = base.mixed(with: Color.random(saturation: 0...0.9, value: 0...1, using: &random), contrast * 2)
        let angle =
            random.chance(0.6)
            ? random.element(of: [0, Float.pi / 2]) + random.symmetric(0.15)
            : random.uniform(0...Float.pi)
        let frequency = random.uniform(2...14) * 2 * Float.pi
        let hardness = random.uniform(1...8)
        let phase = random.uniform(0...(2 * Float.pi))
        let size = Float(canvas.width)
        canvas.shade(block: FaceRenderer.supersampling) { column, row, _ in
            let u = (Float(column) + 0.5) / size
            let v = (Float(row) + 0.5) / size
            let wave = sinf((u * cosf(angle) + v * sinf(angle)) * frequency + phase)
            let mix = min(1, max(0, wave * hardness * 0.5 + 0.5))
            return base.mixed(with: other, mix)
        }
    }

    /// A wall with blurred rectangles: windows, doors, shelves, monitors, posters.
    static func paintRoom(_ canvas: inout Canvas, using random: inout SynthesisRandom) {
        paintWall(&canvas, using: &random)
        for _ in 0..<random.integer(1...5) {
            let minX = random.uniform(-1.2...0.8)
            let minY = random.uniform(-1.2...0.8)
            let rect = Rect(
                minX: minX, minY: minY, maxX: minX + random.uniform(0.15...1.2),
                maxY: minY + random.uniform(0.15...1.2))
            let color =
                random.chance(0.25)
                ? Color(0.95, 0.95, 0.92).jittered(0.05, using: &random)
                : Color.random(saturation: 0...0.6, value: 0.05...0.9, using: &random)
            canvas.fill(.rectangle(rect), color, opacity: random.uniform(0.5...1), softness: random.uniform(0...0.08))
        }
    }

    /// Out-of-focus lights and objects: soft discs of many colours over a dark or mid gradient.
    static func paintBokeh(_ canvas: inout Canvas, using random: inout SynthesisRandom) {
        paintWall(&canvas, using: &random)
        for _ in 0..<random.integer(4...14) {
            let radius = random.uniform(0.05...0.35)
            let center = Point(random.uniform(-1.1...1.1), random.uniform(-1.1...1.1))
            let color = Color.random(saturation: 0...0.8, value: 0.3...1, using: &random)
            canvas.fill(
                .ellipse(center: center, radiusX: radius, radiusY: radius, angle: 0), color,
                opacity: random.uniform(0.2...0.7), softness: random.uniform(0.02...0.15))
        }
    }
}
