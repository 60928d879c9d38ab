import FaceTrainEngine
import Foundation

/// Who is in a photo or a crop: every clear face the detector finds, cut out as the face check
/// cuts a photo (aligned onto the template), or the image itself when one face fills it (a crop,
/// as the app classifies a Vision crop), then classified by a bundle's model with the bundle's
/// decision rule. Not the face check's refusals (FaceCheck) and not HTTP (FaceTrainServer).
package struct FaceRecognizer {
    package var predictor: FacePredictor
    package var thresholds: FaceCheckThresholds
    package var template: AlignmentTemplate = .celebaMean96
    package var cropSide = 128
    /// Longer side a photo is looked at (unpadded; see FaceCheck.look): 427 px, a third less than the
    /// face check's 640, took `POST /v1/recognize` from 55-61 to 50 ms p50 (4 clients, 2 cores, with
    /// the small first look) and finds the faces of at least 40 px about as well (`detect` on dev:
    /// AP easy+medium 0.911 vs 0.918), but fewer of 20-40 px (AP all 0.724 vs 0.798;
    /// docs/results/performance.md).
    package var photoSide = 427
    /// Package-visible so that a server can keep the copy, with its buffers, for the next photo.
    package private(set) var detector: FaceDetector

    package init(detector: FaceDetector, predictor: FacePredictor, thresholds: FaceCheckThresholds = .standard) {
        self.detector = detector
        self.predictor = predictor
        self.thresholds = thresholds
    }

    /// The faces of `image`, largest first, each with what the model says of it. Faces too small
    /// to recognise (under the check's minimum height) are left out; none found gives [].
    package mutating func recognize(_ image: Image) throws -> [RecognizedFace] {
        // No small first look: recognition is mostly given photos, where it is wasted (a 640 x 480
        // photo of 3 faces, 4 clients: p50 50.5 -> 45.4 ms without it).
        let detections = FaceCheck.look(
            at: image, by: &detector, thresholds: thresholds, photoSide: photoSide, glance: false
        ).detections
        var planner = thresholds.planner(template: template, side: cropSide)
        planner.everyFace = true
        // A face at the photo's edge is still someone: its crop repeats the edge, and it is answered.
        planner.maximumOutsideFraction = 1
        let crops = planner.plan(detections, photoWidth: image.width, photoHeight: image.height).crops
        guard !crops.isEmpty else { return [] }
        let wholeImage =
            crops.count == 1 && thresholds.isCrop(faceHeight: crops[0].detection.box.height, imageHeight: image.height)
        // The planner made each transform, so each has an inverse and the warp gives a crop.
        let faces =
            wholeImage
            ? [image] : crops.map { FaceAlignment.warp(image, transform: $0.transform, side: cropSide)!.image }
        let classifications = try predictor.classify(
            images: faces, names: faces.indices.map { "face \($0 + 1)" })
        return zip(crops, zip(faces, classifications)).map { crop, face in
            RecognizedFace(detection: crop.detection, crop: face.0, isWholeImage: wholeImage, classification: face.1)
        }
    }
}

/// One face of a recognised image.
package struct RecognizedFace: Sendable {
    /// Box, landmarks and detector score, in the image's pixels.
    package var detection: Detection
    /// What was classified: the aligned crop, or the whole image when it is a crop.
    package var crop: Image
    package var isWholeImage: Bool
    package var classification: ImageClassification
}

/// A recognised face as `facetrain recognize --json` and `POST /v1/recognize` answer it.
package struct RecognizedFaceRecord: Codable, Sendable, Equatable {
    package struct Candidate: Codable, Sendable, Equatable {
        package var label: String
        package var name: String
        package var probability: Double
    }
    /// [x, y, width, height] in the image's pixels.
    package var box: [Double]
    package var score: Double
    /// The 5 points (eyes, nose, mouth corners) as [x, y].
    package var landmarks: [[Double]]
    /// True when the image was one face filling it and was classified as it is.
    package var wholeImage: Bool
    /// The most probable class and its probability.
    package var label: String
    package var name: String
    package var probability: Double
    /// Whether the app would accept this face as `label` (a user at or above the threshold).
    package var accepted: Bool
    /// What the app acts on: the user, or "2" (unknown person) or "1" (not a face).
    package var decision: String
    package var threshold: Double
    package var top: [Candidate]

    private enum CodingKeys: String, CodingKey {
        case box, score, landmarks, label, name, probability, accepted, decision, threshold, top
        case wholeImage = "whole_image"
    }

    package init(_ face: RecognizedFace, top count: Int) {
        let box = face.detection.box
        self.box = [box.x, box.y, box.width, box.height]
        score = face.detection.score
        landmarks = face.detection.landmarks.map { [$0.x, $0.y] }
        wholeImage = face.isWholeImage
        let classification = face.classification
        label = classification.top.label.description
        name = classification.top.name
        probability = Double(classification.top.probability)
        accepted = classification.accepted
        decision = classification.decidedLabel.description
        threshold = classification.threshold
        top = classification.ranking.prefix(count).map {
            Candidate(label: $0.label.description, name: $0.name, probability: Double($0.probability))
        }
    }
}
