import Foundation

/// Face alignment from the detector's 5 landmarks: the least-squares similarity (scale, rotation,
/// translation; no reflection) that takes them onto a template, the named templates, and the warp
/// that cuts the aligned square crop out of the photo with bilinear sampling.
///
/// Not here: finding the landmarks (FaceDetector) and deciding which faces of a photo to crop or
/// refuse (CropPlanner). Points use the detector's continuous pixels: (0, 0) is the top-left corner
/// of the top-left pixel, so pixel (column i, row j) has its centre at (i + 0.5, j + 0.5).

/// A similarity of the plane: (x, y) -> (a x - b y + translationX, b x + a y + translationY), that is
/// scale s = sqrt(a^2 + b^2) times the rotation by atan2(b, a), then the translation. As a complex
/// number z -> (a + i b) z + t; it never mirrors.
package struct SimilarityTransform: Sendable, Equatable {
    package var a: Double
    package var b: Double
    package var translationX: Double
    package var translationY: Double

    package init(a: Double, b: Double, translationX: Double, translationY: Double) {
        self.a = a
        self.b = b
        self.translationX = translationX
        self.translationY = translationY
    }

    /// Scale `scale`, rotation `rotation` radians (positive turns x towards y, clockwise on screen),
    /// then the translation.
    package init(scale: Double, rotation: Double, translationX: Double, translationY: Double) {
        self.init(
            a: scale * cos(rotation), b: scale * sin(rotation), translationX: translationX, translationY: translationY)
    }

    package var scale: Double { (a * a + b * b).squareRoot() }
    package var rotation: Double { atan2(b, a) }

    package func apply(_ point: FacePoint) -> FacePoint {
        FacePoint(x: a * point.x - b * point.y + translationX, y: b * point.x + a * point.y + translationY)
    }

    /// The transform that undoes this one; nil for scale 0, which has none.
    package func inverted() -> SimilarityTransform? {
        let scaleSquared = a * a + b * b
        guard scaleSquared > 0, scaleSquared.isFinite else { return nil }
        // z = (w - t) / (a + i b) = (w - t) (a - i b) / s^2.
        let inverseA = a / scaleSquared
        let inverseB = -b / scaleSquared
        return SimilarityTransform(
            a: inverseA, b: inverseB, translationX: -(inverseA * translationX - inverseB * translationY),
            translationY: -(inverseB * translationX + inverseA * translationY))
    }

    /// Sum of squared distances between the transformed `source` points and `target`.
    package func squaredResidual(from source: [FacePoint], to target: [FacePoint]) -> Double {
        zip(source, target).reduce(0) { sum, pair in
            let moved = apply(pair.0)
            return sum + (moved.x - pair.1.x) * (moved.x - pair.1.x) + (moved.y - pair.1.y) * (moved.y - pair.1.y)
        }
    }

    /// The similarity minimising the sum of squared distances from the moved `source` points to
    /// `target` (Umeyama 1991 restricted to 2-D rotations). Nil when there is no unique answer: fewer
    /// than 2 points, a non-finite coordinate, or source points that all coincide.
    ///
    /// Centred, p = source - its mean and q = target - its mean; in complex numbers the best
    /// a + i b = sum(conj(p) q) / sum(|p|^2), i.e. a = sum(p . q) / sum(|p|^2) and
    /// b = sum(p x q) / sum(|p|^2). This equals Umeyama's c R, since the best rotation of a 2-D
    /// point set turns by the angle of sum(conj(p) q) and its scale is |sum(conj(p) q)| / sum(|p|^2).
    /// The translation then takes the source mean onto the target mean.
    package static func leastSquares(from source: [FacePoint], to target: [FacePoint]) -> SimilarityTransform? {
        precondition(source.count == target.count, "\(source.count) source points against \(target.count) targets")
        guard source.count >= 2,
            (source + target).allSatisfy({ $0.x.isFinite && $0.y.isFinite })
        else { return nil }
        let count = Double(source.count)
        let sourceMeanX = source.reduce(0) { $0 + $1.x } / count
        let sourceMeanY = source.reduce(0) { $0 + $1.y } / count
        let targetMeanX = target.reduce(0) { $0 + $1.x } / count
        let targetMeanY = target.reduce(0) { $0 + $1.y } / count
        var spread = 0.0
        var dot = 0.0
        var cross = 0.0
        for (from, to) in zip(source, target) {
            let px = from.x - sourceMeanX
            let py = from.y - sourceMeanY
            let qx = to.x - targetMeanX
            let qy = to.y - targetMeanY
            spread += px * px + py * py
            dot += px * qx + py * qy
            cross += px * qy - py * qx
        }
        // Points closer together than a thousandth of a pixel give no usable scale or angle.
        guard spread > 1e-6 * count else { return nil }
        let a = dot / spread
        let b = cross / spread
        return SimilarityTransform(
            a: a, b: b, translationX: targetMeanX - (a * sourceMeanX - b * sourceMeanY),
            translationY: targetMeanY - (b * sourceMeanX + a * sourceMeanY))
    }
}

/// Where the 5 landmarks go in an aligned crop: points in FaceLandmarks' order for a square crop
/// `side` pixels wide; a template scales to any other side.
package struct AlignmentTemplate: Sendable, Equatable {
    /// The name `facetrain crop --template` takes.
    package let name: String
    package let side: Double
    package let points: [FacePoint]

    package init(name: String, side: Double, points: [FacePoint]) {
        precondition(points.count == FaceLandmarks.count, "a template has five points, got \(points.count)")
        self.name = name
        self.side = side
        self.points = points
    }

    private init(name: String, side: Double, _ coordinates: [(Double, Double)]) {
        self.init(name: name, side: side, points: coordinates.map { FacePoint(x: $0.0, y: $0.1) })
    }

    /// The mean YuNet landmarks of CelebA's faces in a 96-px crop: the geometry of the builtin
    /// base's 96-px training crops (docs/design/detector.md section 5, option b).
    package static let celebaMean96 = AlignmentTemplate(
        name: "celeba96", side: 96, [(33.5, 32.8), (64.2, 32.5), (48.9, 51.0), (35.6, 63.6), (63.0, 63.3)])

    /// InsightFace's ArcFace template in 112 px (option c): eyes lower, at 0.46 of the side.
    package static let arcFace112 = AlignmentTemplate(
        name: "arcface112", side: 112,
        [
            (38.2946, 51.6963), (73.5318, 51.5014), (56.0252, 71.7366), (41.5493, 92.3655), (70.7299, 92.2041),
        ])

    package static let all = [celebaMean96, arcFace112]

    package static func named(_ name: String) -> AlignmentTemplate? { all.first { $0.name == name } }

    /// The points for a crop `outputSide` pixels wide: scaled about the corner (0, 0), which is the
    /// same corner at every size in continuous pixels.
    package func points(side outputSide: Int) -> [FacePoint] {
        let factor = Double(outputSide) / side
        return points.map { FacePoint(x: $0.x * factor, y: $0.y * factor) }
    }
}

/// A square crop cut out of a photo along a similarity.
package struct AlignedCrop: Sendable, Equatable {
    package var image: Image
    /// Photo pixels to crop pixels.
    package var transform: SimilarityTransform
    /// Crop pixels whose centre falls outside the photo and so repeat its border.
    package var outsidePixelCount: Int

    package var outsideFraction: Double { Double(outsidePixelCount) / Double(image.width * image.height) }
}

package enum FaceAlignment {
    /// The photo-to-crop similarity that puts `landmarks` on `template` in a crop `side` px wide;
    /// nil when the landmarks coincide (see `SimilarityTransform.leastSquares`).
    package static func transform(landmarks: [FacePoint], template: AlignmentTemplate, side: Int)
        -> SimilarityTransform?
    {
        SimilarityTransform.leastSquares(from: landmarks, to: template.points(side: side))
    }

    /// How many pixels of a `side` x `side` crop along `transform` take their centre from outside a
    /// photo `photoWidth` x `photoHeight`. Counted without the pixels, so a face can be refused
    /// before it is cut; `warp` counts by this same rule.
    package static func outsidePixelCount(
        photoWidth: Int, photoHeight: Int, transform: SimilarityTransform, side: Int
    ) -> Int {
        guard let inverse = transform.inverted() else { return side * side }
        var outside = 0
        for row in 0..<side {
            for column in 0..<side {
                let source = inverse.apply(FacePoint(x: Double(column) + 0.5, y: Double(row) + 0.5))
                if !covers(source, width: photoWidth, height: photoHeight) { outside += 1 }
            }
        }
        return outside
    }

    /// Whether a point lies on the photo (its borders included).
    private static func covers(_ point: FacePoint, width: Int, height: Int) -> Bool {
        point.x >= 0 && point.x <= Double(width) && point.y >= 0 && point.y <= Double(height)
    }

    /// The `side` x `side` crop whose pixel centres map to the photo through the inverse of
    /// `transform` (photo to crop), sampled bilinearly between the four nearest photo pixels; the
    /// crop keeps the photo's channels. Nil for a transform of scale 0.
    ///
    /// Outside the photo the border pixel is repeated: a rotated face near an edge then gets a
    /// smooth smear, not a black wedge whose hard edge the recogniser never saw in training; the
    /// caller learns how much was made up from `outsidePixelCount` and may refuse the crop.
    package static func warp(_ photo: Image, transform: SimilarityTransform, side: Int) -> AlignedCrop? {
        precondition(side > 0, "a crop side must be positive, got \(side)")
        guard let inverse = transform.inverted() else { return nil }
        let channels = photo.channels
        let (width, height) = (photo.width, photo.height)
        let lastColumn = Double(width - 1)
        let lastRow = Double(height - 1)
        var outside = 0
        var output = [UInt8](repeating: 0, count: side * side * channels)
        // The bilinear sum over raw pointers: the same arithmetic in the same order as sampling
        // through the arrays (the same bytes), without a bounds check per sample.
        photo.pixels.withUnsafeBufferPointer { pixels in
            output.withUnsafeMutableBufferPointer { crop in
                let source = pixels.baseAddress!
                var target = crop.baseAddress!
                for row in 0..<side {
                    let centreY = Double(row) + 0.5
                    for column in 0..<side {
                        let point = inverse.apply(FacePoint(x: Double(column) + 0.5, y: centreY))
                        if !covers(point, width: width, height: height) { outside += 1 }
                        // To pixel-centre coordinates (pixel i at i), clamped: the border repeats.
                        let x = min(max(point.x - 0.5, 0), lastColumn)
                        let y = min(max(point.y - 0.5, 0), lastRow)
                        let left = Int(x.rounded(.down))
                        let top = Int(y.rounded(.down))
                        let right = min(left + 1, width - 1)
                        let bottom = min(top + 1, height - 1)
                        let fractionX = x - Double(left)
                        let fractionY = y - Double(top)
                        let (topLeft, topRight) = (
                            source + (top * width + left) * channels, source + (top * width + right) * channels
                        )
                        let (bottomLeft, bottomRight) = (
                            source + (bottom * width + left) * channels, source + (bottom * width + right) * channels
                        )
                        for channel in 0..<channels {
                            let upper =
                                Double(topLeft[channel]) * (1 - fractionX) + Double(topRight[channel]) * fractionX
                            let lower =
                                Double(bottomLeft[channel]) * (1 - fractionX) + Double(bottomRight[channel]) * fractionX
                            let value = upper * (1 - fractionY) + lower * fractionY
                            target[channel] = UInt8(min(max(value + 0.5, 0), 255))
                        }
                        target += channels
                    }
                }
            }
        }
        return AlignedCrop(
            image: Image(width: side, height: side, channels: channels, pixels: output), transform: transform,
            outsidePixelCount: outside)
    }
}
