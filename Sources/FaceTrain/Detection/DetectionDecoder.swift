import FaceTrainEngine
import Foundation

/// Turns the three head tensors of one image into detections in the photo's pixels: score floor,
/// top-k by score, NMS (voting by default), then the letterbox undone.
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
    /// Whether a kept detection's box and landmarks become the vote of the boxes it suppresses.
    package var voting = true

    package init(
        scoreFloor: Double = 0.02, candidateLimit: Int = 5_000, suppressionThreshold: Double = 0.45,
        keepLimit: Int = 750, voting: Bool = true
    ) {
        self.scoreFloor = scoreFloor
        self.candidateLimit = candidateLimit
        self.suppressionThreshold = suppressionThreshold
        self.keepLimit = keepLimit
        self.voting = voting
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
            Self.best(candidates, limit: candidateLimit), threshold: suppressionThreshold, keepLimit: keepLimit,
            voting: voting)
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
    /// IoU with an already kept one exceeds `threshold`; stops after `keepLimit` kept. With
    /// `voting`, a kept detection keeps its score but takes the vote of its group (itself and the
    /// boxes it suppresses, each weighted by its score squared) for its box and landmarks: the
    /// neighbouring cells of one face each see it a little off, and their mean lies nearer. On the
    /// `dev` photos this moved detector v4's landmark error from 0.213 to 0.182 and its AP from
    /// 0.908 / 0.786 to 0.911 / 0.792 (docs/results/quality.md, 2026-12-07).
    package static func suppress(
        _ sorted: [Detection], threshold: Double, keepLimit: Int, voting: Bool = false
    ) -> [Detection] {
        // Each candidate is compared with the kept boxes only (as greedy NMS does), and joins the
        // group of the first kept one that suppresses it; once `keepLimit` are kept, the rest can
        // only join groups.
        var kept: [Detection] = []
        var groups: [[Int]] = []
        for (index, candidate) in sorted.enumerated() {
            if let owner = kept.firstIndex(where: { $0.box.intersectionOverUnion(candidate.box) > threshold }) {
                if voting { groups[owner].append(index) }
                continue
            }
            if kept.count >= keepLimit {
                if voting { continue } else { break }
            }
            kept.append(candidate)
            groups.append([index])
        }
        guard voting else { return kept }
        return groups.map { $0.count > 1 ? vote(of: $0.map { sorted[$0] }) : sorted[$0[0]] }
    }

    /// The first detection's score with the box and landmarks of the whole group averaged, each
    /// weighted by its score squared. Landmarks are averaged only when every member has as many.
    static func vote(of group: [Detection]) -> Detection {
        let leader = group[0]
        let weights = group.map { $0.score * $0.score }
        let total = weights.reduce(0, +)
        guard total > 0 else { return leader }
        func mean(_ value: (Detection) -> Double) -> Double {
            zip(group, weights).reduce(0) { $0 + value($1.0) * $1.1 } / total
        }
        let box = DetectionBox(
            left: mean { $0.box.x }, top: mean { $0.box.y }, right: mean { $0.box.right },
            bottom: mean { $0.box.bottom })
        let count = leader.landmarks.count
        let landmarks =
            group.allSatisfy({ $0.landmarks.count == count })
            ? (0..<count).map { point in
                FacePoint(x: mean { $0.landmarks[point].x }, y: mean { $0.landmarks[point].y })
            } : leader.landmarks
        return Detection(box: box, score: leader.score, landmarks: landmarks)
    }
}
