import Foundation

/// Paints crops that are not faces: what a face detector fires on by mistake, plus plain scenery.
///
/// Several kinds are deliberately near misses (skin-coloured blobs, a torso without a head, round blobs on a
/// room background), so "not a face" cannot be learnt from colour or background alone.
enum NonFaceRenderer {
    enum Kind: CaseIterable, Sendable { case gradient, texture, stripes, blobs, scenery, torso, skin, strokes, dark }

    /// `size`×`size` RGB bytes, row-major, of one random non-face, and the JPEG quality of its camera.
    static func render(size: Int, random: inout SynthesisRandom) -> (rgb: [UInt8], jpegQuality: Int) {
        let canvasSize = size * FaceRenderer.supersampling
        let half = Float(canvasSize) / 2
        var canvas = Canvas(
            width: canvasSize, height: canvasSize,
            view: ViewTransform(scale: half, angle: 0, originX: half, originY: half))
        switch random.element(of: Kind.allCases) {
        case .gradient: paintGradient(&canvas, using: &random)
        case .texture: Background.paintTexture(&canvas, contrast: random.uniform(0.3...1), using: &random)
        case .stripes: paintPattern(&canvas, using: &random)
        case .blobs: paintBlobs(&canvas, using: &random)
        case .scenery: Background.paint(&canvas, using: &random)
        case .torso: paintTorso(&canvas, using: &random)
        case .skin: paintSkin(&canvas, using: &random)
        case .strokes: paintStrokes(&canvas, using: &random)
        case .dark: paintDark(&canvas, using: &random)
        }
        var camera = Camera(using: &random)
        if random.chance(0.15) { camera.blur = 1 }
        return (camera.develop(canvas, size: size, factor: FaceRenderer.supersampling), camera.jpegQuality)
    }

    /// Two or three colour stops along a random direction.
    private static func paintGradient(_ canvas: inout Canvas, using random: inout SynthesisRandom) {
        let stops = (0..<random.integer(2...3)).map { _ in
            Color.random(saturation: 0...0.9, value: 0.05...1, using: &random)
        }
        let angle = random.uniform(0...(2 * Float.pi))
        let radial = random.chance(0.3)
        let size = Float(canvas.width)
        canvas.shade(block: FaceRenderer.supersampling) { column, row, _ in
            let u = (Float(column) + 0.5) / size - 0.5
            let v = (Float(row) + 0.5) / size - 0.5
            var position = radial ? (u * u + v * v).squareRoot() * 1.4 : u * cosf(angle) + v * sinf(angle) + 0.5
            position = min(0.999, max(0, position)) * Float(stops.count - 1)
            let index = Int(position)
            return stops[index].mixed(with: stops[min(index + 1, stops.count - 1)], position - Float(index))
        }
    }

    /// Stripes, or two crossed stripe sets (checks, plaid, tiles, grilles).
    private static func paintPattern(_ canvas: inout Canvas, using random: inout SynthesisRandom) {
        Background.paintStripes(&canvas, contrast: random.uniform(0.3...0.9), using: &random)
        if random.chance(0.5) {
            let copy = canvas
            Background.paintStripes(&canvas, contrast: random.uniform(0.3...0.9), using: &random)
            let weight = random.uniform(0.3...0.7)
            canvas.shade { column, row, color in
                let offset = (row * copy.width + column) * 3
                return color.mixed(
                    with: Color(copy.pixels[offset], copy.pixels[offset + 1], copy.pixels[offset + 2]),
                    weight)
            }
        }
    }

    /// Random ellipses, some of them skin-toned and face-sized.
    private static func paintBlobs(_ canvas: inout Canvas, using random: inout SynthesisRandom) {
        Background.paint(&canvas, using: &random)
        for _ in 0..<random.integer(2...12) {
            let color =
                random.chance(0.3)
                ? FaceIdentity.skinTone(random.unit()).jittered(0.1, using: &random)
                : Color.random(saturation: 0...1, value: 0.05...1, using: &random)
            let center = Point(random.uniform(-1...1), random.uniform(-1...1))
            canvas.fill(
                .ellipse(
                    center: center, radiusX: random.uniform(0.05...0.7), radiusY: random.uniform(0.05...0.7),
                    angle: random.uniform(0...Float.pi)), color, opacity: random.uniform(0.6...1),
                softness: random.chance(0.5) ? 0 : random.uniform(0.01...0.2))
        }
    }

    /// Shoulders and a neck with no head: the detector box slid down onto the body.
    private static func paintTorso(_ canvas: inout Canvas, using random: inout SynthesisRandom) {
        Background.paint(&canvas, using: &random)
        let skin = FaceIdentity.skinTone(random.unit()).jittered(0.06, using: &random)
        let top = random.uniform(-0.6...0.3)
        let x = random.symmetric(0.4)
        let neckHalfWidth = random.uniform(0.15...0.3)
        canvas.fill(
            .rectangle(Rect(minX: x - neckHalfWidth, minY: -2, maxX: x + neckHalfWidth, maxY: top + 0.5)),
            skin * 0.9)
        let clothing = Color.random(saturation: 0...0.8, value: 0.08...0.9, using: &random)
        canvas.fill(
            .ellipse(
                center: Point(x, top + 1.0), radiusX: random.uniform(1.0...1.6), radiusY: 0.7,
                angle: random.symmetric(0.2)), clothing, grain: 0.05, grainSeed: random.next())
        if random.chance(0.5) {
            canvas.fill(
                .stroke(
                    points: [Point(x - 0.3, top + 0.35), Point(x, top + 0.7), Point(x + 0.3, top + 0.35)],
                    startWidth: 0.06, endWidth: 0.06), clothing * 0.6)
        }
    }

    /// A featureless, shaded skin-coloured shape: a hand, an arm, a cheek too close to the camera.
    private static func paintSkin(_ canvas: inout Canvas, using random: inout SynthesisRandom) {
        Background.paint(&canvas, using: &random)
        let skin = FaceIdentity.skinTone(random.unit()).jittered(0.08, using: &random)
        let center = Point(random.symmetric(0.5), random.symmetric(0.5))
        let radiusX = random.uniform(0.3...1.0)
        let radiusY = random.uniform(0.3...1.0)
        let angle = random.uniform(0...Float.pi)
        canvas.fill(.ellipse(center: center, radiusX: radiusX, radiusY: radiusY, angle: angle), skin)
        if random.chance(0.5) {
            for finger in 0..<4 {
                let base = center + Point(Float(finger) * 0.14 - 0.2, -radiusY * 0.6)
                canvas.fill(
                    .stroke(
                        points: [base, base + Point(random.symmetric(0.1), -random.uniform(0.3...0.6))],
                        startWidth: 0.12, endWidth: 0.1), skin)
            }
        }
        canvas.fill(
            .ellipse(
                center: center + Point(random.symmetric(0.3), random.symmetric(0.3)), radiusX: radiusX * 0.8,
                radiusY: radiusY * 0.8, angle: angle), skin * 0.7, opacity: random.uniform(0.1...0.4),
            softness: 0.3)
    }

    /// Lines and curves: cables, branches, handwriting, edges of furniture.
    private static func paintStrokes(_ canvas: inout Canvas, using random: inout SynthesisRandom) {
        Background.paint(&canvas, using: &random)
        for _ in 0..<random.integer(3...25) {
            var point = Point(random.uniform(-1.1...1.1), random.uniform(-1.1...1.1))
            var points = [point]
            var heading = random.uniform(0...(2 * Float.pi))
            let step = random.uniform(0.05...0.4)
            for _ in 0..<random.integer(1...6) {
                heading += random.symmetric(1.2)
                point = point + Point(cosf(heading), sinf(heading)) * step
                points.append(point)
            }
            let width = random.uniform(0.01...0.12)
            canvas.fill(
                .stroke(points: points, startWidth: width, endWidth: width * random.uniform(0.3...1.5)),
                Color.random(saturation: 0...0.9, value: 0...1, using: &random), opacity: random.uniform(0.5...1))
        }
    }

    /// Under- or over-exposed frames with faint structure, as when the detector fires on a dark room or a lamp.
    private static func paintDark(_ canvas: inout Canvas, using random: inout SynthesisRandom) {
        Background.paintTexture(&canvas, contrast: random.uniform(0.2...0.6), using: &random)
        let level = random.chance(0.7) ? random.uniform(0.05...0.25) : random.uniform(1.6...2.4)
        canvas.shade { _, _, color in color * level }
    }
}
