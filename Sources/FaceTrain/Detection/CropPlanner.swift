/// Decides, for one photo, which detected faces become aligned crops and why a photo or face is
/// refused: no face, a second face of comparable size, a face too small, landmarks that coincide,
/// a crop mostly outside the photo. Works on detections and the photo's size only, so it is tested
/// with hand-made detections.
///
/// Not here: running the detector (FaceDetector), the alignment itself (FaceAlignment) and files
/// (`facetrain crop`).

/// Why a face (or, when no face gives a crop, its photo) is refused.
package enum CropRefusal: Sendable, Equatable {
    /// No detection scores at least the threshold.
    case noFace
    /// Another face has at least the given share of the largest face's box area.
    case secondFace(areaRatio: Double)
    /// The face's box is this many pixels high, below the minimum.
    case tooSmall(height: Double)
    /// The 5 landmarks coincide, so there is no scale or angle to align by.
    case degenerateLandmarks
    /// This share of the aligned crop would come from outside the photo.
    case mostlyOutside(fraction: Double)
    /// The inner face's mean grey level (0-255) is below the face check's minimum.
    case tooDark(brightness: Double)
    /// The inner face's sharpness (FaceCheckMeasures.sharpness) is below the face check's minimum.
    case tooBlurry(sharpness: Double)

    /// The reason's short name, for summaries and JSON.
    package var name: String {
        switch self {
        case .noFace: "no face"
        case .secondFace: "second face"
        case .tooSmall: "too small"
        case .degenerateLandmarks: "degenerate landmarks"
        case .mostlyOutside: "mostly outside"
        case .tooDark: "too dark"
        case .tooBlurry: "too blurry"
        }
    }

    package var description: String {
        switch self {
        case .noFace: "no face"
        case .secondFace(let ratio): "second face (\(Self.format(ratio * 100)) % of the largest face's area)"
        case .tooSmall(let height): "too small (face \(Self.format(height)) px high)"
        case .degenerateLandmarks: "degenerate landmarks (all 5 at one point)"
        case .mostlyOutside(let fraction): "mostly outside (\(Self.format(fraction * 100)) % of the crop off the photo)"
        case .tooDark(let brightness): "too dark (inner face mean grey \(Self.format(brightness)) of 255)"
        case .tooBlurry(let sharpness): "too blurry (sharpness \(String(format: "%.3f", sharpness)))"
        }
    }

    private static func format(_ value: Double) -> String { String(Int(value.rounded())) }
}

extension CropRefusal {
    /// Machine-readable name, for `--json`, data reports and the server's per-file results.
    package var kind: String {
        switch self {
        case .noFace: "no_face"
        case .secondFace: "second_face"
        case .tooSmall: "face_too_small"
        case .degenerateLandmarks: "degenerate_landmarks"
        case .mostlyOutside: "face_mostly_outside"
        case .tooDark: "face_too_dark"
        case .tooBlurry: "face_too_blurry"
        }
    }

    /// What to do about it.
    package var hint: String {
        switch self {
        case .noFace, .degenerateLandmarks:
            "use a photo or crop that shows the person's face; images that are not faces belong in class 1"
        case .secondFace: "crop the photo to the one person (`facetrain crop --all` cuts every face)"
        case .tooSmall: "use a larger photo or a closer crop"
        case .mostlyOutside: "use a photo in which the whole face is inside the frame"
        case .tooDark: "use a photo taken in better light"
        case .tooBlurry: "use a sharper photo (in focus, not shaken, not enlarged from a small one)"
        }
    }
}

/// A face to cut: the detection and the photo-to-crop similarity.
package struct PlannedCrop: Sendable, Equatable {
    package var detection: Detection
    package var transform: SimilarityTransform
    /// Share of the crop's pixels that repeat the photo's border.
    package var outsideFraction: Double
}

/// The outcome for one photo: the crops to cut, largest face first, and the faces left out with
/// their reasons. No crops means the photo is refused, for the first reason.
package struct CropPlan: Sendable, Equatable {
    package var crops: [PlannedCrop]
    package var refusals: [CropRefusal]

    /// Why the photo gives no crop; nil when it gives at least one.
    package var refusal: CropRefusal? { crops.isEmpty ? (refusals.first ?? .noFace) : nil }
}

package struct CropPlanner: Sendable {
    package var template: AlignmentTemplate
    /// Side of the square crop in pixels.
    package var side: Int
    /// Faces scoring below this are not faces.
    package var threshold: Double
    /// Faces with a box less high than this are refused (too little detail to recognise).
    package var minimumFaceHeight: Double = 24
    /// A second face with at least this share of the largest one's area makes "whose face" unclear.
    package var comparableAreaRatio: Double = 0.5
    /// A crop with more than this share taken from outside the photo is refused.
    package var maximumOutsideFraction: Double = 1.0 / 3
    /// Crop every clear face, not only the largest; a second face is then no reason to refuse.
    package var everyFace = false

    package init(template: AlignmentTemplate, side: Int, threshold: Double) {
        self.template = template
        self.side = side
        self.threshold = threshold
    }

    /// The plan for a photo `photoWidth` x `photoHeight` with these detections (in its pixels).
    package func plan(_ detections: [Detection], photoWidth: Int, photoHeight: Int) -> CropPlan {
        let faces = clearFaces(detections)
        guard let largest = faces.first else { return CropPlan(crops: [], refusals: [.noFace]) }
        if !everyFace {
            if faces.count > 1, largest.box.area > 0 {
                let ratio = faces[1].box.area / largest.box.area
                if ratio >= comparableAreaRatio {
                    return CropPlan(crops: [], refusals: [.secondFace(areaRatio: ratio)])
                }
            }
            return gather([largest], photoWidth: photoWidth, photoHeight: photoHeight)
        }
        return gather(faces, photoWidth: photoWidth, photoHeight: photoHeight)
    }

    /// The distinct faces scoring at least the threshold, largest first (ties by score, so the
    /// order does not depend on the detector's). A detection whose centre lies inside a larger
    /// face's box is a second box on that face (NMS keeps boxes of different extent), not a face.
    package func clearFaces(_ detections: [Detection]) -> [Detection] {
        Self.clearFaces(detections, threshold: threshold)
    }

    /// `clearFaces` at any face score, for callers with a score but no crop to plan.
    package static func clearFaces(_ detections: [Detection], threshold: Double) -> [Detection] {
        let ordered = detections.filter { $0.score >= threshold }.sorted {
            $0.box.area != $1.box.area ? $0.box.area > $1.box.area : $0.score > $1.score
        }
        var faces: [Detection] = []
        for candidate in ordered
        where !faces.contains(where: {
            $0.box.containsStrictly(x: candidate.box.centreX, y: candidate.box.centreY)
        }) {
            faces.append(candidate)
        }
        return faces
    }

    private func gather(_ faces: [Detection], photoWidth: Int, photoHeight: Int) -> CropPlan {
        var plan = CropPlan(crops: [], refusals: [])
        for face in faces {
            switch check(face, photoWidth: photoWidth, photoHeight: photoHeight) {
            case .success(let crop): plan.crops.append(crop)
            case .failure(let refusal): plan.refusals.append(refusal)
            }
        }
        return plan
    }

    private func check(_ face: Detection, photoWidth: Int, photoHeight: Int) -> Result<PlannedCrop, CropRefusal> {
        guard face.box.height >= minimumFaceHeight else { return .failure(.tooSmall(height: face.box.height)) }
        guard let transform = FaceAlignment.transform(landmarks: face.landmarks, template: template, side: side)
        else { return .failure(.degenerateLandmarks) }
        let outside = FaceAlignment.outsidePixelCount(
            photoWidth: photoWidth, photoHeight: photoHeight, transform: transform, side: side)
        let fraction = Double(outside) / Double(side * side)
        guard fraction <= maximumOutsideFraction else { return .failure(.mostlyOutside(fraction: fraction)) }
        return .success(PlannedCrop(detection: face, transform: transform, outsideFraction: fraction))
    }
}

extension CropRefusal: Error {}
