import Foundation

/// The plain values the face detector passes around: boxes, landmark points, labelled faces (what
/// training learns from), detections (what decoding produces), the letterbox that maps a photo into
/// the network's input, and the one horizontal-flip rule for landmarks.
///
/// Not here: reading annotation files (DetectionSet), decoding heads (DetectionDecoder), assignment
/// and losses (DetectionAssignment, DetectionLoss). Coordinates are continuous pixels: x to the
/// right, y down, (0, 0) the top-left corner of the top-left pixel, as in faces_in_photos.

/// An axis-aligned box as `[x, y, w, h]`: top-left corner, width and height in pixels.
package struct DetectionBox: Sendable, Equatable, Hashable {
    package var x: Double
    package var y: Double
    package var width: Double
    package var height: Double

    package init(x: Double, y: Double, width: Double, height: Double) {
        self.x = x
        self.y = y
        self.width = width
        self.height = height
    }

    /// The box with corners (left, top) and (right, bottom).
    package init(left: Double, top: Double, right: Double, bottom: Double) {
        self.init(x: left, y: top, width: right - left, height: bottom - top)
    }

    package var right: Double { x + width }
    package var bottom: Double { y + height }
    package var centreX: Double { x + width / 2 }
    package var centreY: Double { y + height / 2 }
    /// Zero for a box of negative size, as the scorer clips it.
    package var area: Double { max(width, 0) * max(height, 0) }

    /// Whether a point lies strictly inside (on the border is outside: its distance to an edge is 0).
    package func containsStrictly(x pointX: Double, y pointY: Double) -> Bool {
        pointX > x && pointX < right && pointY > y && pointY < bottom
    }

    /// Intersection over union, 0 when the union is empty (score_detection.py's `iou_matrix`).
    package func intersectionOverUnion(_ other: DetectionBox) -> Double {
        let overlapWidth = min(right, other.right) - max(x, other.x)
        let overlapHeight = min(bottom, other.bottom) - max(y, other.y)
        let intersection = max(overlapWidth, 0) * max(overlapHeight, 0)
        let union = area + other.area - intersection
        return union > 0 ? intersection / union : 0
    }
}

/// One landmark point in pixels.
package struct FacePoint: Sendable, Equatable, Hashable {
    package var x: Double
    package var y: Double

    package init(x: Double, y: Double) {
        self.x = x
        self.y = y
    }
}

/// The five landmarks in YuNet's order (faces_in_photos README): the person's right eye centre
/// (on the image's left), left eye centre, nose tip, right mouth corner, left mouth corner.
package enum FaceLandmarks {
    package static let count = 5

    /// Which point each point becomes under a horizontal flip: the eyes swap and the mouth corners
    /// swap, because the person's right side moves to the image's right.
    package static let mirrorPartner = [1, 0, 2, 4, 3]

    /// The points of a horizontally flipped image `imageWidth` wide: x mirrored, then 0<->1 and
    /// 3<->4 swapped so the order still names the person's own right and left. The one place this
    /// rule lives (augmentation and tests call it).
    package static func flippedHorizontally(_ points: [FacePoint], imageWidth: Double) -> [FacePoint] {
        precondition(points.count == count, "five landmarks expected, got \(points.count)")
        return mirrorPartner.map { source in FacePoint(x: imageWidth - points[source].x, y: points[source].y) }
    }

    /// A box mirrored the same way (kept here beside the points so both flip alike).
    package static func flippedHorizontally(_ box: DetectionBox, imageWidth: Double) -> DetectionBox {
        DetectionBox(x: imageWidth - box.right, y: box.y, width: box.width, height: box.height)
    }
}

/// A face training learns from, in the pixels of the network's input.
///
/// `ignored` faces (invalid, or too small to learn) are "don't care": cells whose centre lies in
/// them get no score loss and they are never positives. `landmarks` is nil when the face has no
/// landmarks good enough to learn from.
package struct LabelledFace: Sendable, Equatable {
    package var box: DetectionBox
    package var landmarks: [FacePoint]?
    package var ignored: Bool

    package init(box: DetectionBox, landmarks: [FacePoint]? = nil, ignored: Bool = false) {
        precondition(landmarks == nil || landmarks!.count == FaceLandmarks.count, "five landmarks expected")
        self.box = box
        self.landmarks = landmarks
        self.ignored = ignored
    }

    /// The same face in a horizontally flipped image `imageWidth` wide.
    package func flippedHorizontally(imageWidth: Double) -> LabelledFace {
        LabelledFace(
            box: FaceLandmarks.flippedHorizontally(box, imageWidth: imageWidth),
            landmarks: landmarks.map { FaceLandmarks.flippedHorizontally($0, imageWidth: imageWidth) },
            ignored: ignored)
    }
}

/// A face the detector found: box, score in [0, 1] (an IoU-quality estimate) and five landmarks.
package struct Detection: Sendable, Equatable {
    package var box: DetectionBox
    package var score: Double
    package var landmarks: [FacePoint]

    package init(box: DetectionBox, score: Double, landmarks: [FacePoint]) {
        self.box = box
        self.score = score
        self.landmarks = landmarks
    }
}

/// How a photo was placed into the network's input: input = photo x `scale` + (offsetX, offsetY).
///
/// The dev protocol resizes so the longer side fits and pads right and bottom (offset 0);
/// training crops may also shift the photo, hence the offsets.
package struct LetterboxTransform: Sendable, Equatable {
    package var scale: Double
    package var offsetX: Double
    package var offsetY: Double

    package init(scale: Double, offsetX: Double = 0, offsetY: Double = 0) {
        precondition(scale > 0 && scale.isFinite, "a letterbox scale must be positive, got \(scale)")
        self.scale = scale
        self.offsetX = offsetX
        self.offsetY = offsetY
    }

    /// The identity: the photo is the input.
    package static let identity = LetterboxTransform(scale: 1)

    /// A point of the network's input in the photo's pixels.
    package func toPhoto(_ point: FacePoint) -> FacePoint {
        FacePoint(x: (point.x - offsetX) / scale, y: (point.y - offsetY) / scale)
    }

    /// A box of the network's input in the photo's pixels.
    package func toPhoto(_ box: DetectionBox) -> DetectionBox {
        DetectionBox(
            x: (box.x - offsetX) / scale, y: (box.y - offsetY) / scale, width: box.width / scale,
            height: box.height / scale)
    }

    /// A point of the photo in the network's input.
    package func toInput(_ point: FacePoint) -> FacePoint {
        FacePoint(x: point.x * scale + offsetX, y: point.y * scale + offsetY)
    }

    /// A box of the photo in the network's input.
    package func toInput(_ box: DetectionBox) -> DetectionBox {
        DetectionBox(
            x: box.x * scale + offsetX, y: box.y * scale + offsetY, width: box.width * scale,
            height: box.height * scale)
    }
}
