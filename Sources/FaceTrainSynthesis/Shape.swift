import Foundation

/// A point or vector in face space: x to the right, y downwards, the face crop spanning about [-1, 1].
struct Point: Sendable {
    var x: Float
    var y: Float

    init(_ x: Float, _ y: Float) {
        self.x = x
        self.y = y
    }

    static func + (left: Point, right: Point) -> Point { Point(left.x + right.x, left.y + right.y) }
    static func - (left: Point, right: Point) -> Point { Point(left.x - right.x, left.y - right.y) }
    static func * (point: Point, factor: Float) -> Point { Point(point.x * factor, point.y * factor) }
}

/// An axis-aligned rectangle in face space.
struct Rect: Sendable {
    var minX: Float
    var minY: Float
    var maxX: Float
    var maxY: Float

    /// Covers any crop; used for shapes without finite bounds such as half-planes.
    static let everything = Rect(minX: -1e6, minY: -1e6, maxX: 1e6, maxY: 1e6)

    func intersection(_ other: Rect) -> Rect {
        Rect(
            minX: max(minX, other.minX), minY: max(minY, other.minY),
            maxX: min(maxX, other.maxX), maxY: min(maxY, other.maxY))
    }

    func union(_ other: Rect) -> Rect {
        Rect(
            minX: min(minX, other.minX), minY: min(minY, other.minY),
            maxX: max(maxX, other.maxX), maxY: max(maxY, other.maxY))
    }
}

/// A horizontal curve y = base + bend · ((x − centerX) / halfWidth)², the building block of lips and hairlines.
struct Curve: Sendable {
    var centerX: Float
    var halfWidth: Float
    var base: Float
    var bend: Float

    func y(at x: Float) -> Float {
        let t = (x - centerX) / halfWidth
        return base + bend * t * t
    }
}

/// A 2-D region described by an approximate signed distance (negative inside, in face units).
///
/// Coverage of a pixel comes from the distance at its centre, which anti-aliases edges; the distances of the
/// non-circular cases are first-order approximations, exact enough within a pixel or two of the edge.
indirect enum Shape: Sendable {
    /// An ellipse rotated by the angle whose cosine and sine are given; build it with `ellipse(…angle:)`.
    case orientedEllipse(center: Point, radiusX: Float, radiusY: Float, cosine: Float, sine: Float)
    /// An ellipse whose lower half narrows towards the chin (`taper` 0 = plain ellipse).
    case faceOutline(center: Point, radiusX: Float, radiusY: Float, taper: Float)
    /// The outline of an ellipse, `thickness` wide.
    case ring(center: Point, radiusX: Float, radiusY: Float, thickness: Float)
    /// A round-capped polyline whose width goes linearly from `startWidth` to `endWidth`.
    case stroke(points: [Point], startWidth: Float, endWidth: Float)
    /// The region between two curves (`top` above `bottom`) for x in `minX...maxX`.
    case band(minX: Float, maxX: Float, top: Curve, bottom: Curve)
    /// Everything below a curve (larger y).
    case below(Curve)
    /// Everything above a curve (smaller y).
    case above(Curve)
    /// An axis-aligned rectangle.
    case rectangle(Rect)
    case intersection(Shape, Shape)
    case union(Shape, Shape)
    /// The first shape with the second cut out.
    case subtraction(Shape, Shape)

    /// An ellipse rotated by `angle` radians (clockwise on screen, since y points down).
    static func ellipse(center: Point, radiusX: Float, radiusY: Float, angle: Float) -> Shape {
        .orientedEllipse(center: center, radiusX: radiusX, radiusY: radiusY, cosine: cosf(angle), sine: sinf(angle))
    }

    /// Approximate signed distance from `point` to the region's edge: negative inside.
    func distance(_ point: Point) -> Float {
        switch self {
        case .orientedEllipse(let center, let radiusX, let radiusY, let cosine, let sine):
            let offset = point - center
            let local = Point(cosine * offset.x + sine * offset.y, -sine * offset.x + cosine * offset.y)
            return Self.ellipseDistance(local, radiusX, radiusY)
        case .faceOutline(let center, let radiusX, let radiusY, let taper):
            let offset = point - center
            let lower = max(0, offset.y / radiusY)
            let width = radiusX * max(0.2, 1 - taper * lower * lower)
            return Self.ellipseDistance(offset, width, radiusY)
        case .ring(let center, let radiusX, let radiusY, let thickness):
            return abs(Self.ellipseDistance(point - center, radiusX, radiusY)) - thickness / 2
        case .stroke(let points, let startWidth, let endWidth):
            return Self.strokeDistance(point, points, startWidth, endWidth)
        case .band(let minX, let maxX, let top, let bottom):
            let horizontal = max(minX - point.x, point.x - maxX)
            let vertical = max(top.y(at: point.x) - point.y, point.y - bottom.y(at: point.x))
            return max(horizontal, vertical)
        case .below(let curve):
            return curve.y(at: point.x) - point.y
        case .above(let curve):
            return point.y - curve.y(at: point.x)
        case .rectangle(let rect):
            return max(max(rect.minX - point.x, point.x - rect.maxX), max(rect.minY - point.y, point.y - rect.maxY))
        case .intersection(let first, let second):
            return max(first.distance(point), second.distance(point))
        case .union(let first, let second):
            return min(first.distance(point), second.distance(point))
        case .subtraction(let first, let second):
            return max(first.distance(point), -second.distance(point))
        }
    }

    /// A face-space rectangle outside which the shape covers nothing.
    var bounds: Rect {
        switch self {
        case .orientedEllipse(let center, let radiusX, let radiusY, let cosine, let sine):
            let halfWidth = (radiusX * radiusX * cosine * cosine + radiusY * radiusY * sine * sine).squareRoot()
            let halfHeight = (radiusX * radiusX * sine * sine + radiusY * radiusY * cosine * cosine).squareRoot()
            return Rect(
                minX: center.x - halfWidth, minY: center.y - halfHeight,
                maxX: center.x + halfWidth, maxY: center.y + halfHeight)
        case .faceOutline(let center, let radiusX, let radiusY, _):
            return Rect(
                minX: center.x - radiusX, minY: center.y - radiusY,
                maxX: center.x + radiusX, maxY: center.y + radiusY)
        case .ring(let center, let radiusX, let radiusY, let thickness):
            return Rect(
                minX: center.x - radiusX - thickness, minY: center.y - radiusY - thickness,
                maxX: center.x + radiusX + thickness, maxY: center.y + radiusY + thickness)
        case .stroke(let points, let startWidth, let endWidth):
            let pad = max(startWidth, endWidth) / 2
            var rect = Rect(minX: .infinity, minY: .infinity, maxX: -.infinity, maxY: -.infinity)
            for point in points {
                rect = rect.union(
                    Rect(minX: point.x - pad, minY: point.y - pad, maxX: point.x + pad, maxY: point.y + pad))
            }
            return rect
        case .band(let minX, let maxX, let top, let bottom):
            let ys = [
                top.y(at: minX), top.y(at: maxX), top.y(at: top.centerX),
                bottom.y(at: minX), bottom.y(at: maxX), bottom.y(at: bottom.centerX),
            ]
            return Rect(minX: minX, minY: ys.min() ?? 0, maxX: maxX, maxY: ys.max() ?? 0)
        case .below, .above:
            return .everything
        case .rectangle(let rect):
            return rect
        case .intersection(let first, let second):
            return first.bounds.intersection(second.bounds)
        case .union(let first, let second):
            return first.bounds.union(second.bounds)
        case .subtraction(let first, _):
            return first.bounds
        }
    }

    /// First-order distance to an axis-aligned ellipse: (k − 1) / |∇k| with k the normalised radius.
    private static func ellipseDistance(_ offset: Point, _ radiusX: Float, _ radiusY: Float) -> Float {
        let u = offset.x / radiusX
        let v = offset.y / radiusY
        let k = (u * u + v * v).squareRoot()
        let gradientX = u / radiusX
        let gradientY = v / radiusY
        let gradient = (gradientX * gradientX + gradientY * gradientY).squareRoot()
        if k < 1e-4 || gradient < 1e-6 { return -min(radiusX, radiusY) }
        return (k - 1) * k / gradient
    }

    private static func strokeDistance(_ point: Point, _ points: [Point], _ startWidth: Float, _ endWidth: Float)
        -> Float
    {
        guard points.count > 1 else {
            guard let only = points.first else { return .infinity }
            let offset = point - only
            return (offset.x * offset.x + offset.y * offset.y).squareRoot() - startWidth / 2
        }
        var best = Float.infinity
        let segments = Float(points.count - 1)
        for index in 0..<(points.count - 1) {
            let start = points[index]
            let end = points[index + 1]
            let direction = end - start
            let lengthSquared = max(direction.x * direction.x + direction.y * direction.y, 1e-12)
            let offset = point - start
            let t = min(1, max(0, (offset.x * direction.x + offset.y * direction.y) / lengthSquared))
            let nearest = offset - direction * t
            let along = (Float(index) + t) / segments
            let halfWidth = (startWidth + (endWidth - startWidth) * along) / 2
            best = min(best, (nearest.x * nearest.x + nearest.y * nearest.y).squareRoot() - halfWidth)
        }
        return best
    }
}
