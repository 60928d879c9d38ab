import Foundation

/// Average precision at IoU 0.5 for in-training checks, by `shared/eval/score_detection.py`'s rules,
/// so that its figures agree with the script's (to its 4 printed decimals) on the same predictions.
///
/// Not here: recall at 1 FP per photo, NME and the threshold figures (the script reports them), and
/// writing predictions (DetectionPredictions).
///
/// Rules (the script's docstring): per photo, detections in descending score each go to the
/// unmatched counted face of highest IoU if it is >= 0.5 (true positive); else they are ignored if
/// their IoU with an ignore face is >= 0.5, or if they are lower than the category's minimum height;
/// else false positives. Pooled over the photos in file order, AP is VOC's all-point area under the
/// monotone precision envelope.
package enum DetectionAveragePrecision {
    /// Which faces count: easy+medium (valid, not heavily occluded, >= 40 px high) or all (valid,
    /// >= 20 px). Every other face of a photo is an ignore face for the category.
    package struct Category: Sendable, Equatable {
        package var name: String
        package var minimumHeight: Double
        package var excludesHeavyOcclusion: Bool

        package static let easyMedium = Category(name: "easy_medium", minimumHeight: 40, excludesHeavyOcclusion: true)
        package static let all = Category(name: "all", minimumHeight: 20, excludesHeavyOcclusion: false)

        package func counts(_ face: AnnotatedFace) -> Bool {
            face.invalid == 0 && !(excludesHeavyOcclusion && face.occlusion == 2) && face.box.height >= minimumHeight
        }
    }

    package static let matchingThreshold = 0.5

    /// AP of `detections` (by file; a photo without an entry has none) over `photos`; nil when no
    /// face counts.
    package static func averagePrecision(
        photos: [DetectionPhoto], detections: [String: [Detection]], category: Category
    ) -> Double? {
        var countedFaces = 0
        // (score, true positive) of every detection that is not ignored, photos in file order.
        var pooled: [(score: Double, truePositive: Bool)] = []
        for photo in photos.sorted(by: { $0.file < $1.file }) {
            let counted = photo.faces.map(category.counts)
            countedFaces += counted.filter { $0 }.count
            var taken = [Bool](repeating: false, count: photo.faces.count)
            for detection in descendingScore(detections[photo.file] ?? []) {
                let ious = photo.faces.map { $0.box.intersectionOverUnion(detection.box) }
                // The first face of highest IoU among the unmatched counted ones (numpy's argmax).
                var best: Int?
                for index in photo.faces.indices where counted[index] && !taken[index] {
                    if best == nil || ious[index] > ious[best!] { best = index }
                }
                if let best, ious[best] >= matchingThreshold {
                    taken[best] = true
                    pooled.append((detection.score, true))
                } else if photo.faces.indices.contains(where: { !counted[$0] && ious[$0] >= matchingThreshold }) {
                    continue
                } else if detection.box.height < category.minimumHeight {
                    continue
                } else {
                    pooled.append((detection.score, false))
                }
            }
        }
        guard countedFaces > 0 else { return nil }
        let ranked = pooled.indices.sorted { first, second in
            pooled[first].score != pooled[second].score ? pooled[first].score > pooled[second].score : first < second
        }
        var recalls: [Double] = [0]
        var precisions: [Double] = [0]
        var truePositives = 0
        for (rank, index) in ranked.enumerated() {
            if pooled[index].truePositive { truePositives += 1 }
            recalls.append(Double(truePositives) / Double(countedFaces))
            precisions.append(Double(truePositives) / Double(rank + 1))
        }
        recalls.append(1)
        precisions.append(0)
        // The monotone envelope, then the area where recall steps.
        for index in stride(from: precisions.count - 2, through: 0, by: -1) {
            precisions[index] = max(precisions[index], precisions[index + 1])
        }
        var area = 0.0
        for index in 0..<(recalls.count - 1) where recalls[index + 1] != recalls[index] {
            area += (recalls[index + 1] - recalls[index]) * precisions[index + 1]
        }
        return area
    }

    /// Detections by descending score; equal scores keep their order (Python's stable sort).
    private static func descendingScore(_ detections: [Detection]) -> [Detection] {
        detections.indices.sorted { first, second in
            detections[first].score != detections[second].score
                ? detections[first].score > detections[second].score : first < second
        }.map { detections[$0] }
    }
}
