import FaceTrainEngine
import Foundation

/// Turns the three head tensors of one image into detections in the photo's pixels: score floor,
/// top-k by score, greedy NMS, then the letterbox undone.
///
/// Not here: the head layout (DetectionHeads), writing or scoring detections (DetectionPredictions,
/// DetectionAveragePrecision). Settings follow YuNet's and SCRFD's test configuration (design §3.4).
package struct DetectionDecoder: Sendable {
    /// Cells scoring below this are dropped: 0.02 for evaluation (AP needs the tail), the operating
    /// threshold in a product.
    package var scoreFloor: Double = 0.02
    /// How many of the best cells go into NMS.
    package var candidateLimit = 5_000
    /// A box is suppressed when its IoU with a kept, better-scoring box exceeds this.
    package var suppressionThreshold = 0.45
    /// How many detections NMS keeps at most.
    package var keepLimit = 750

    package init(
        scoreFloor: Double = 0.02, candidateLimit: Int = 5_000, suppressionThreshold: Double = 0.45,
        keepLimit: Int = 750
    ) {
        self.scoreFloor = scoreFloor
        self.candidateLimit = candidateLimit
        self.suppressionThreshold = suppressionThreshold
        self.keepLimit = keepLimit
    }

    /// The detections of image `image` of the batch, best first, in the photo's pixels.
    package func decode(heads: [Tensor], image: Int, letterbox: LetterboxTransform = .identity) -> [Detection] {
        let levels = DetectionHeads.levels(of: heads)
        precondition(
            image >= 0 && image < heads[0].shape[0], "image \(image) is not in a batch of \(heads[0].shape[0])")
        var candidates: [Detection] = []
        for (head, level) in zip(heads, levels) {
            let plane = level.cellCount
            let base = image * DetectionHeads.channelCount * plane
            head.scalars.withUnsafeBufferPointer { values in
                for cell in 0..<plane {
                    let logit = Double(values[base + DetectionHeads.scoreChannel * plane + cell])
                    let score = 1 / (1 + exp(-logit))
                    guard score >= scoreFloor else { continue }
                    let centre = level.centre(ofCell: cell)
                    let distances = (0..<4).map {
                        Double(values[base + (DetectionHeads.firstDistanceChannel + $0) * plane + cell])
                    }
                    let landmarks = (0..<FaceLandmarks.count).map { point in
                        let channel = DetectionHeads.firstLandmarkChannel + 2 * point
                        return DetectionHeads.landmark(
                            centre: centre, u: Double(values[base + channel * plane + cell]),
                            v: Double(values[base + (channel + 1) * plane + cell]), stride: level.stride)
                    }
                    candidates.append(
                        Detection(
                            box: DetectionHeads.box(centre: centre, distances: distances, stride: level.stride),
                            score: score, landmarks: landmarks))
                }
            }
        }
        let kept = Self.suppress(
            Self.best(candidates, limit: candidateLimit), threshold: suppressionThreshold, keepLimit: keepLimit)
        return kept.map { detection in
            Detection(
                box: letterbox.toPhoto(detection.box), score: detection.score,
                landmarks: detection.landmarks.map { letterbox.toPhoto($0) })
        }
    }

    /// The `limit` best-scoring detections, best first; equal scores keep their order (level, then
    /// cell), so the result never depends on the sort's internals.
    package static func best(_ detections: [Detection], limit: Int) -> [Detection] {
        let order = detections.indices.sorted { first, second in
            detections[first].score != detections[second].score
                ? detections[first].score > detections[second].score : first < second
        }
        return order.prefix(limit).map { detections[$0] }
    }

    /// Greedy non-maximum suppression over detections sorted best first: each is kept unless its
    /// IoU with an already kept one exceeds `threshold`; stops after `keepLimit` kept.
    package static func suppress(_ sorted: [Detection], threshold: Double, keepLimit: Int) -> [Detection] {
        var kept: [Detection] = []
        for candidate in sorted {
            if kept.count >= keepLimit { break }
            if kept.allSatisfy({ $0.box.intersectionOverUnion(candidate.box) <= threshold }) {
                kept.append(candidate)
            }
        }
        return kept
    }
}
