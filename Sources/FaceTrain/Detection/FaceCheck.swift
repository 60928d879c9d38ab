import FaceTrainEngine
import Foundation

/// The face check every image of a person (or of class 2) passes before facetrain trains on it or the
/// server stores it: exactly one clear face, large, sharp and bright enough for the recogniser.
/// A crop that passes is kept as it is; a photo whose face fills little of it is cut to an aligned
/// crop of that face. Measures and decides on one image at a time.
///
/// Not here: which classes are checked and what a refusal does to a run (DataFolderScanner, the
/// server's upload), the detector network (FaceDetector), and the cut itself (FaceAlignment).
/// The thresholds' figures and how they were chosen: docs/detector.md, "The face check".

/// What the check measured on one image, in the image's own pixels.
package struct FaceCheckMeasures: Sendable, Equatable, Codable {
    /// The best detection's score (0 when the detector found nothing above its floor).
    package var score: Double
    /// Faces scoring at least the face threshold.
    package var faces: Int
    /// The second-largest face's box area over the largest's (0 with one face).
    package var secondAreaRatio: Double
    /// The largest face's box height in pixels of the image.
    package var faceHeight: Double
    /// The largest face's box height over the image's height: near 1 for a crop, small in a photo.
    package var faceShare: Double
    /// Variance of the Laplacian over the variance of the pixels, on the aligned grey face.
    package var sharpness: Double
    /// Mean grey level (0-255) of the aligned face's inner part (eyes to mouth).
    package var brightness: Double

    package static let none = FaceCheckMeasures(
        score: 0, faces: 0, secondAreaRatio: 0, faceHeight: 0, faceShare: 0, sharpness: 0, brightness: 0)
}

/// The check's thresholds; `standard` holds the measured ones.
package struct FaceCheckThresholds: Sendable, Equatable {
    /// A detection scoring at least this is a face.
    package var faceScore: Double
    /// A second face with at least this share of the largest one's box area is refused.
    package var secondAreaRatio: Double
    /// Smallest face box height in the image's pixels.
    package var minimumFaceHeight: Double
    /// Smallest mean grey level of the inner face.
    package var minimumBrightness: Double
    /// Smallest sharpness (see FaceCheckMeasures.sharpness).
    package var minimumSharpness: Double
    /// A face at least this high a share of the image's height is a crop and is kept as it is;
    /// a smaller one is in a photo and gets cut out.
    package var cropShare: Double

    package static let standard = FaceCheckThresholds(
        faceScore: 0.45, secondAreaRatio: 0.5, minimumFaceHeight: 24, minimumBrightness: 20, minimumSharpness: 0.05,
        cropShare: 0.4)

    /// Whether a face this high fills an image this high: a crop, used as it is, not a photo to
    /// cut the face out of.
    package func isCrop(faceHeight: Double, imageHeight: Int) -> Bool {
        faceHeight / Double(max(1, imageHeight)) >= cropShare
    }

    /// The faces among `detections` that count at this face score, largest first (CropPlanner's rule).
    package func clearFaces(_ detections: [Detection]) -> [Detection] {
        CropPlanner.clearFaces(detections, threshold: faceScore)
    }

    /// Whether the largest clear face of `detections` fills an image `imageHeight` high (a crop).
    package func isCrop(_ detections: [Detection], imageHeight: Int) -> Bool {
        clearFaces(detections).first.map { isCrop(faceHeight: $0.box.height, imageHeight: imageHeight) } ?? false
    }

    /// The crop planner with these thresholds' face score, minimum height and second-face ratio,
    /// cutting `side`-pixel crops onto `template`: the check's and recognition's one set of rules.
    package func planner(template: AlignmentTemplate, side: Int) -> CropPlanner {
        var planner = CropPlanner(template: template, side: side, threshold: faceScore)
        planner.minimumFaceHeight = minimumFaceHeight
        planner.comparableAreaRatio = secondAreaRatio
        return planner
    }
}

/// The check's verdict on one image.
package struct FaceCheckResult: Sendable {
    package var measures: FaceCheckMeasures
    package var refusal: CropRefusal?
    /// The largest face, in the image's pixels; nil without a face.
    package var face: Detection?
    /// For a photo that passes: the aligned crop of its face. Nil for a crop (kept as it is) and
    /// for a refused image.
    package var alignedCrop: Image?
    /// Whether the first look at the image shrunk (see `FaceCheck.glanceSide`) decided.
    package var glanced = false

    package var accepted: Bool { refusal == nil }
}

package struct FaceCheck: Sendable {
    package var thresholds: FaceCheckThresholds
    /// Template and side of the crops cut out of photos.
    package var template: AlignmentTemplate = .celebaMean96
    package var cropSide = 128
    package private(set) var detector: FaceDetector

    /// Side of the aligned grey face that sharpness and brightness are measured on: small enough
    /// that a face of the minimum height is not enlarged much (which would read as blur).
    static let measureSide = 48
    /// Padding added on every side, as a share of the image's side: a tight crop's face touches the
    /// border, where the detector learnt no faces.
    static let padding = 0.25
    /// Detections below this score are not looked at.
    static let scoreFloor = 0.05
    /// Padded side of the first look at an image larger than a third less (160 px): a face that
    /// fills a crop is found there as surely as at full size, for a sixth of the network's cost on
    /// a 400-px crop.
    static let glanceSide = 240

    package init(detector: FaceDetector, thresholds: FaceCheckThresholds = .standard) {
        self.detector = detector
        self.thresholds = thresholds
    }

    /// Measures `image` (any size, 1 or 3 channels) and decides. Which face counts and the
    /// face-count and size rules are CropPlanner's, the same as `facetrain crop`'s.
    package mutating func examine(_ image: Image) -> FaceCheckResult {
        let look = Self.look(at: image, by: &detector, thresholds: thresholds)
        var result = decide(image, detections: look.detections)
        result.glanced = look.glanced
        return result
    }

    /// What the check (and recognition) looks at: `detector`'s faces of `image`, from the score
    /// floor up, in the image's pixels, and whether the first look decided. Cheapest look first:
    /// - an image up to 160 px: padded with grey (a tight crop's face touches its border), once;
    /// - larger, first padded and shrunk to `glanceSide`: a clear face filling the image (a crop) decides;
    /// - then as it is, unpadded, up to `photoSide` (the detector's 640 px unless given, the scale
    ///   its AP is measured at; padding would shrink a photo's small faces by a third): any clear
    ///   face decides;
    /// - last, padded at full size: a large tight crop the first look missed, or no face at all.
    /// `glance: false` skips the small look, for callers that are mostly given photos (recognition).
    package static func look(
        at image: Image, by detector: inout FaceDetector, thresholds: FaceCheckThresholds, photoSide: Int? = nil,
        glance: Bool = true
    ) -> (detections: [Detection], glanced: Bool) {
        if Double(max(image.width, image.height)) * (1 + 2 * padding) > Double(glanceSide) {
            if glance {
                let small = detector.detect(in: image, padding: padding, scoreFloor: scoreFloor, side: glanceSide)
                if thresholds.isCrop(small, imageHeight: image.height) { return (small, true) }
            }
            let plain = detector.detect(in: image, scoreFloor: scoreFloor, side: photoSide)
            if !thresholds.clearFaces(plain).isEmpty { return (plain, false) }
        }
        return (detector.detect(in: image, padding: padding, scoreFloor: scoreFloor), false)
    }

    /// The verdict on `image` given its detections (in its pixels): the rules without the network.
    package func decide(_ image: Image, detections: [Detection]) -> FaceCheckResult {
        var planner = thresholds.planner(template: template, side: cropSide)
        let limit = planner.maximumOutsideFraction
        // A crop's face fills it, so its aligned frame may reach past the edges: judged below, for
        // photos only.
        planner.maximumOutsideFraction = 1
        let faces = planner.clearFaces(detections)
        var measures = FaceCheckMeasures.none
        measures.score = detections.map(\.score).max() ?? 0
        measures.faces = faces.count
        guard let face = faces.first else {
            return FaceCheckResult(measures: measures, refusal: .noFace, face: nil, alignedCrop: nil)
        }
        measures.secondAreaRatio = faces.count > 1 && face.box.area > 0 ? faces[1].box.area / face.box.area : 0
        measures.faceHeight = face.box.height
        measures.faceShare = face.box.height / Double(image.height)
        (measures.sharpness, measures.brightness) = Self.appearance(of: face, in: image, template: template)
        var result = FaceCheckResult(measures: measures, refusal: nil, face: face, alignedCrop: nil)
        let plan = planner.plan(detections, photoWidth: image.width, photoHeight: image.height)
        guard let planned = plan.crops.first else {
            result.refusal = plan.refusal
            return result
        }
        if measures.brightness < thresholds.minimumBrightness {
            result.refusal = .tooDark(brightness: measures.brightness)
        } else if measures.sharpness < thresholds.minimumSharpness {
            result.refusal = .tooBlurry(sharpness: measures.sharpness)
        } else if !thresholds.isCrop(faceHeight: face.box.height, imageHeight: image.height) {
            if planned.outsideFraction > limit {
                result.refusal = .mostlyOutside(fraction: planned.outsideFraction)
            } else {
                result.alignedCrop = FaceAlignment.warp(image, transform: planned.transform, side: cropSide)?.image
            }
        }
        return result
    }

    /// `body(check, index)` for every index in 0..<count, the indices shared among the cores, each
    /// core with its own copy of the check (a copy has its own network buffers); results in order.
    package func map<Result>(_ count: Int, _ body: (inout FaceCheck, Int) -> Result) -> [Result] {
        let ranges = Parallel.ranges(count, parts: Parallel.workerCount)
        let parts = Parallel.map(ranges.count) { part in
            var check = self
            return ranges[part].map { body(&check, $0) }
        }
        return Array(parts.joined())
    }

    /// Sharpness and brightness of `face` (see FaceCheckMeasures), on its aligned grey crop of
    /// `measureSide` pixels. A face whose landmarks coincide measures 0 on both.
    static func appearance(of face: Detection, in image: Image, template: AlignmentTemplate) -> (Double, Double) {
        let side = measureSide
        guard let transform = FaceAlignment.transform(landmarks: face.landmarks, template: template, side: side),
            let crop = FaceAlignment.warp(image, transform: transform, side: side)
        else { return (0, 0) }
        // Grey after the cut: only the 48 x 48 crop is converted, never a whole photo.
        let pixels = crop.image.converted(channels: 1).pixels.map(Double.init)
        // The inner face: from a little above the eyes to a little below the mouth, between the
        // outer eye corners; hair and background would otherwise set both measures.
        let points = template.points(side: side)
        let left = max(1, Int(points[0].x - 0.1 * Double(side)))
        let right = min(side - 2, Int(points[1].x + 0.1 * Double(side)))
        let top = max(1, Int(min(points[0].y, points[1].y) - 0.1 * Double(side)))
        let bottom = min(side - 2, Int(max(points[3].y, points[4].y) + 0.05 * Double(side)))
        var values: [Double] = []
        var laplacians: [Double] = []
        for row in top...bottom {
            for column in left...right {
                let centre = pixels[row * side + column]
                values.append(centre)
                laplacians.append(
                    pixels[(row - 1) * side + column] + pixels[(row + 1) * side + column]
                        + pixels[row * side + column - 1] + pixels[row * side + column + 1] - 4 * centre)
            }
        }
        let brightness = values.reduce(0, +) / Double(values.count)
        let variance = Self.variance(values)
        // A flat patch has no detail at all: sharpness 0, not 0/0.
        let sharpness = variance > 1e-6 ? Self.variance(laplacians) / variance : 0
        return (sharpness, brightness)
    }

    private static func variance(_ values: [Double]) -> Double {
        let mean = values.reduce(0, +) / Double(values.count)
        return values.reduce(0) { $0 + ($1 - mean) * ($1 - mean) } / Double(values.count)
    }
}
