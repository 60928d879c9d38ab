import Foundation

/// ATSS with point priors (Zhang et al. 2020, design §4): which cells of one image learn which face,
/// and which cells learn nothing about the score because they lie on a "don't care" face.
///
/// Not here: the losses that use the assignment (DetectionLoss), the head layout (DetectionHeads).
///
/// Per face and level, the 9 cells whose centres are nearest the face's centre are candidates. Each
/// candidate stands for a virtual square anchor of side 4s centred on the cell; its IoU with the
/// face is measured, and the face's threshold is the mean + standard deviation (n - 1, as ATSS's
/// torch code) of its candidates' IoUs over all levels. Positives are the candidates with IoU >=
/// threshold whose centre lies strictly inside the face's box. A cell claimed by two faces goes to
/// the smaller face (by box area; the earlier face on a tie): a small face has few cells, and a large
/// one keeps others nearby.
package struct DetectionAssignment: Sendable {
    /// Candidates per face and level.
    package var candidatesPerLevel = 9
    /// A virtual anchor's side in strides.
    package var anchorScale = 4.0
    /// Faces lower than this (input pixels) are too small to learn and become ignore regions.
    package var minimumFaceHeight = 8.0

    package init(candidatesPerLevel: Int = 9, anchorScale: Double = 4.0, minimumFaceHeight: Double = 8.0) {
        self.candidatesPerLevel = candidatesPerLevel
        self.anchorScale = anchorScale
        self.minimumFaceHeight = minimumFaceHeight
    }

    /// The assignment of one image: for every cell of every level (levels in order, cells
    /// row-major), the face it learns (an index into the faces) or nil, and whether its score is
    /// ignored.
    package struct Result: Sendable, Equatable {
        /// The face each cell learns, nil for a negative (or ignored) cell.
        package var face: [Int?]
        /// Cells whose centre lies inside an ignored face and that are no positive: no score loss.
        package var ignored: [Bool]

        package var positiveCount: Int { face.reduce(0) { $0 + ($1 == nil ? 0 : 1) } }
    }

    /// Whether a face is learnt from, or only marks an ignore region.
    package func isLearnt(_ face: LabelledFace) -> Bool {
        !face.ignored && face.box.height >= minimumFaceHeight && face.box.width > 0
    }

    /// Assigns the cells of `levels` (one image) to `faces` (input pixels).
    package func assign(faces: [LabelledFace], levels: [DetectionHeads.Level]) -> Result {
        let offsets = levels.reduce(into: [0]) { $0.append($0.last! + $1.cellCount) }
        let totalCells = offsets.last!
        var owner = [Int?](repeating: nil, count: totalCells)
        var ownerArea = [Double](repeating: .infinity, count: totalCells)
        for (faceIndex, face) in faces.enumerated() where isLearnt(face) {
            // (flat cell, IoU of its virtual anchor with the face, cell centre)
            var candidates: [(cell: Int, iou: Double, centre: FacePoint)] = []
            for (levelIndex, level) in levels.enumerated() {
                for cell in nearestCells(to: face.box, level: level) {
                    let centre = level.centre(ofCell: cell)
                    let side = anchorScale * Double(level.stride)
                    let anchor = DetectionBox(x: centre.x - side / 2, y: centre.y - side / 2, width: side, height: side)
                    candidates.append((offsets[levelIndex] + cell, anchor.intersectionOverUnion(face.box), centre))
                }
            }
            let threshold = Self.meanPlusStandardDeviation(candidates.map(\.iou))
            let area = face.box.area
            for candidate in candidates
            where candidate.iou >= threshold && face.box.containsStrictly(x: candidate.centre.x, y: candidate.centre.y)
                && area < ownerArea[candidate.cell]
            {
                owner[candidate.cell] = faceIndex
                ownerArea[candidate.cell] = area
            }
        }
        var ignored = [Bool](repeating: false, count: totalCells)
        for face in faces where !isLearnt(face) {
            for (levelIndex, level) in levels.enumerated() {
                for cell in 0..<level.cellCount where owner[offsets[levelIndex] + cell] == nil {
                    let centre = level.centre(ofCell: cell)
                    if face.box.containsStrictly(x: centre.x, y: centre.y) {
                        ignored[offsets[levelIndex] + cell] = true
                    }
                }
            }
        }
        return Result(face: owner, ignored: ignored)
    }

    /// The `candidatesPerLevel` cells of `level` whose centres are nearest the box's centre,
    /// nearest first; equal distances in row-major order.
    package func nearestCells(to box: DetectionBox, level: DetectionHeads.Level) -> [Int] {
        var best: [(distance: Double, cell: Int)] = []
        best.reserveCapacity(candidatesPerLevel + 1)
        for cell in 0..<level.cellCount {
            let centre = level.centre(ofCell: cell)
            let dx = centre.x - box.centreX
            let dy = centre.y - box.centreY
            let distance = dx * dx + dy * dy
            if best.count == candidatesPerLevel, distance >= best[best.count - 1].distance { continue }
            // Insert after every entry at most as far, so ties keep row-major order.
            let position = best.firstIndex { $0.distance > distance } ?? best.count
            best.insert((distance, cell), at: position)
            if best.count > candidatesPerLevel { best.removeLast() }
        }
        return best.map(\.cell)
    }

    /// Mean + sample standard deviation (n - 1); the mean alone for one value.
    static func meanPlusStandardDeviation(_ values: [Double]) -> Double {
        guard !values.isEmpty else { return .infinity }
        let mean = values.reduce(0, +) / Double(values.count)
        guard values.count > 1 else { return mean }
        let variance = values.reduce(0) { $0 + ($1 - mean) * ($1 - mean) } / Double(values.count - 1)
        return mean + variance.squareRoot()
    }
}
