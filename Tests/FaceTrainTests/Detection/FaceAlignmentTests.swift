import Foundation
import Testing

@testable import FaceTrain

/// The least-squares similarity against known transforms and perturbed ones, the templates, and the
/// warp against dots drawn at known points and a crop half off the photo.
@Suite("Face alignment")
struct FaceAlignmentTests {
    static let known = SimilarityTransform(scale: 2.3, rotation: 0.4, translationX: 120, translationY: -30)

    static func near(_ a: Double, _ b: Double, _ tolerance: Double = 1e-9) -> Bool { abs(a - b) <= tolerance }

    static func near(_ a: SimilarityTransform, _ b: SimilarityTransform, _ tolerance: Double = 1e-9) -> Bool {
        near(a.a, b.a, tolerance) && near(a.b, b.b, tolerance) && near(a.translationX, b.translationX, tolerance)
            && near(a.translationY, b.translationY, tolerance)
    }

    /// A fixed sequence in [-1, 1), so the noise is the same on every run.
    static func noise(count: Int, seed: UInt64) -> [Double] {
        var state = seed
        return (0..<count).map { _ in
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Double(state >> 11) / Double(1 << 53) * 2 - 1
        }
    }

    @Test func recoversAKnownSimilarityFromTransformedTemplatePoints() throws {
        let template = AlignmentTemplate.celebaMean96.points
        let photoPoints = template.map(Self.known.apply)
        let towardsPhoto = try #require(SimilarityTransform.leastSquares(from: template, to: photoPoints))
        #expect(Self.near(towardsPhoto, Self.known))
        #expect(Self.near(towardsPhoto.scale, 2.3) && Self.near(towardsPhoto.rotation, 0.4))
        let towardsTemplate = try #require(SimilarityTransform.leastSquares(from: photoPoints, to: template))
        #expect(Self.near(towardsTemplate, try #require(Self.known.inverted())))
        for (moved, expected) in zip(photoPoints.map(towardsTemplate.apply), template) {
            #expect(Self.near(moved.x, expected.x) && Self.near(moved.y, expected.y))
        }
    }

    @Test func inverseUndoesTheTransform() throws {
        let inverse = try #require(Self.known.inverted())
        for point in AlignmentTemplate.arcFace112.points {
            let back = inverse.apply(Self.known.apply(point))
            #expect(Self.near(back.x, point.x) && Self.near(back.y, point.y))
        }
        #expect(SimilarityTransform(a: 0, b: 0, translationX: 3, translationY: 4).inverted() == nil)
    }

    /// With noise the fit is no longer exact, but every nearby similarity does worse.
    @Test func withNoiseEveryPerturbedSimilarityHasALargerResidual() throws {
        let source = AlignmentTemplate.arcFace112.points
        let shifts = Self.noise(count: 10, seed: 7)
        let target = source.enumerated().map { index, point in
            let moved = Self.known.apply(point)
            return FacePoint(x: moved.x + 3 * shifts[2 * index], y: moved.y + 3 * shifts[2 * index + 1])
        }
        let fit = try #require(SimilarityTransform.leastSquares(from: source, to: target))
        let best = fit.squaredResidual(from: source, to: target)
        #expect(best > 0)
        let steps = Self.noise(count: 400, seed: 11)
        for trial in 0..<100 {
            let size = [1e-4, 1e-2, 1][trial % 3]
            var other = fit
            other.a += steps[4 * trial] * size * 0.1
            other.b += steps[4 * trial + 1] * size * 0.1
            other.translationX += steps[4 * trial + 2] * size
            other.translationY += steps[4 * trial + 3] * size
            #expect(other.squaredResidual(from: source, to: target) > best, "trial \(trial)")
        }
    }

    /// A mirrored face cannot be matched exactly: the fit turns and scales but never reflects.
    @Test func neverReflects() throws {
        let source = AlignmentTemplate.celebaMean96.points
        // Mirrored with the labels kept: the person's right eye now on the image's right.
        let mirrored = source.map { FacePoint(x: 96 - $0.x, y: $0.y) }
        let fit = try #require(SimilarityTransform.leastSquares(from: source, to: mirrored))
        #expect(fit.squaredResidual(from: source, to: mirrored) > 1)
        #expect(fit.scale > 0)
    }

    @Test func degenerateInputGivesNilNotNaN() {
        let same = Array(repeating: FacePoint(x: 40, y: 50), count: 5)
        #expect(SimilarityTransform.leastSquares(from: same, to: AlignmentTemplate.celebaMean96.points) == nil)
        var withNaN = AlignmentTemplate.celebaMean96.points
        withNaN[2].x = .nan
        #expect(SimilarityTransform.leastSquares(from: withNaN, to: AlignmentTemplate.celebaMean96.points) == nil)
        #expect(SimilarityTransform.leastSquares(from: [same[0]], to: [same[0]]) == nil)
        // Coinciding targets are fine: everything collapses to one point, with scale 0.
        let collapse = SimilarityTransform.leastSquares(from: AlignmentTemplate.celebaMean96.points, to: same)
        #expect(collapse?.scale == 0 && collapse?.translationX == 40 && collapse?.translationY == 50)
    }

    @Test func templatesScaleAboutTheCorner() throws {
        #expect(AlignmentTemplate.named("celeba96") == .celebaMean96)
        #expect(AlignmentTemplate.named("arcface112") == .arcFace112)
        #expect(AlignmentTemplate.named("other") == nil)
        let doubled = AlignmentTemplate.celebaMean96.points(side: 192)
        #expect(doubled[0] == FacePoint(x: 67, y: 65.6))
        #expect(AlignmentTemplate.arcFace112.points(side: 112) == AlignmentTemplate.arcFace112.points)
    }

    /// A photo of `background` with a Gaussian dot (sigma in pixels) centred on each point.
    static func photoWithDots(
        width: Int, height: Int, channels: Int, dots: [FacePoint], sigma: Double, background: Double = 40
    ) -> Image {
        var pixels = [UInt8](repeating: 0, count: width * height * channels)
        for row in 0..<height {
            for column in 0..<width {
                var value = background
                for dot in dots {
                    let dx = Double(column) + 0.5 - dot.x
                    let dy = Double(row) + 0.5 - dot.y
                    value += 200 * exp(-(dx * dx + dy * dy) / (2 * sigma * sigma))
                }
                for channel in 0..<channels {
                    // Each channel a little different so a channel mix-up would show.
                    pixels[(row * width + column) * channels + channel] = UInt8(min(value - Double(channel) * 10, 255))
                }
            }
        }
        return Image(width: width, height: height, channels: channels, pixels: pixels)
    }

    /// The brightness-weighted centre of the crop's pixels within `radius` of `near`, above `background`.
    static func centroid(in image: Image, near: FacePoint, radius: Double, background: Double = 40) -> FacePoint {
        var weight = 0.0
        var sumX = 0.0
        var sumY = 0.0
        for row in 0..<image.height {
            for column in 0..<image.width {
                let x = Double(column) + 0.5
                let y = Double(row) + 0.5
                guard (x - near.x) * (x - near.x) + (y - near.y) * (y - near.y) <= radius * radius else { continue }
                let value = max(Double(image[x: column, y: row, channel: 0]) - background, 0)
                weight += value
                sumX += value * x
                sumY += value * y
            }
        }
        return FacePoint(x: sumX / weight, y: sumY / weight)
    }

    /// The test: the 5 points land on the template within a pixel.
    @Test(arguments: [(AlignmentTemplate.celebaMean96, 96, 1), (.arcFace112, 112, 3), (.celebaMean96, 160, 3)])
    func dotsLandOnTheTemplateWithinAPixel(template: AlignmentTemplate, side: Int, channels: Int) throws {
        // A face 1.6 times the crop's scale, turned 20 degrees, somewhere in a 280 x 280 photo.
        let placement = SimilarityTransform(
            scale: 1.6 * template.side / Double(side), rotation: 20 * Double.pi / 180, translationX: 70,
            translationY: 20)
        let landmarks = template.points(side: side).map(placement.apply)
        let photo = Self.photoWithDots(width: 280, height: 280, channels: channels, dots: landmarks, sigma: 3.2)
        let transform = try #require(FaceAlignment.transform(landmarks: landmarks, template: template, side: side))
        let crop = try #require(FaceAlignment.warp(photo, transform: transform, side: side))
        #expect(crop.image.width == side && crop.image.height == side && crop.image.channels == channels)
        #expect(crop.outsidePixelCount == 0)
        for expected in template.points(side: side) {
            let found = Self.centroid(in: crop.image, near: expected, radius: 7)
            let distance =
                ((found.x - expected.x) * (found.x - expected.x) + (found.y - expected.y) * (found.y - expected.y))
                .squareRoot()
            #expect(distance < 1, "dot at \(found), template point \(expected)")
        }
    }

    /// Crop = photo shifted 48 px right: its left half comes from x < 0, repeating column 0.
    @Test func halfOffThePhotoRepeatsTheBorderAndCountsIt() throws {
        let width = 200
        let height = 120
        let pixels = (0..<height).flatMap { _ in (0..<width).map { UInt8($0) } }
        let photo = Image(width: width, height: height, channels: 1, pixels: pixels)
        let shift = SimilarityTransform(a: 1, b: 0, translationX: 48, translationY: 0)
        let crop = try #require(FaceAlignment.warp(photo, transform: shift, side: 96))
        #expect(crop.outsidePixelCount == 48 * 96)
        #expect(crop.outsideFraction == 0.5)
        #expect(
            FaceAlignment.outsidePixelCount(photoWidth: width, photoHeight: height, transform: shift, side: 96) == 48
                * 96)
        for row in [0, 50, 95] {
            for column in 0..<48 { #expect(crop.image[x: column, y: row, channel: 0] == 0) }
            // An integer shift samples pixel centres exactly: crop column c is photo column c - 48.
            for column in 48..<96 { #expect(Int(crop.image[x: column, y: row, channel: 0]) == column - 48) }
        }
    }

    @Test func bilinearSamplingBetweenPixels() throws {
        // A 24-px ramp (column x 10) blown up 4 times about the corner.
        let photo = Image(width: 24, height: 24, channels: 1, pixels: (0..<576).map { UInt8(($0 % 24) * 10) })
        let zoom = SimilarityTransform(a: 4, b: 0, translationX: 0, translationY: 0)
        let crop = try #require(FaceAlignment.warp(photo, transform: zoom, side: 96))
        // Crop pixel 8 has its centre at 8.5 -> photo x 2.125 -> 1.625 between columns 1 and 2: 16.25.
        #expect(crop.image[x: 8, y: 8, channel: 0] == 16)
        // Crop pixel 10: 10.5 / 4 - 0.5 = 2.125 -> 21.25.
        #expect(crop.image[x: 10, y: 3, channel: 0] == 21)
        #expect(crop.outsidePixelCount == 0)
    }
}
