import FaceTrainEngine
import Foundation

/// The detector's training loss over a batch and its gradient with respect to the three head
/// tensors: quality focal loss on the score, DIoU on the boxes, smooth-L1 on the landmarks (design
/// §4, SCRFD's recipe), all divided by the number of positive cells in the batch (at least 1).
///
/// Not a layer and never exported: the network's `backward` takes the returned gradients. Not here:
/// which cell learns which face (DetectionAssignment), the head layout (DetectionHeads).
///
/// Per cell that is not ignored, with p = sigmoid(score logit) and target y (the IoU of the cell's
/// decoded box with its face for a positive, treated as a constant; 0 otherwise):
///   QFL  = |y - p|^beta * BCE(p, y)                                  (beta 2)
/// Per positive, on the decoded box B and the face's box G:
///   DIoU = 1 - IoU(B, G) + |centre(B) - centre(G)|^2 / diagonal(smallest box around both)^2   (x 2)
/// Per positive whose face has landmarks, on each offset x = (u, v) - (p_k - c) / s:
///   smooth-L1 = 0.5 x^2 / beta if |x| < beta else |x| - 0.5 beta     (beta 1/9, summed over 10, x 0.1)
/// Everything is computed in Double per cell; images run in parallel and their sums are added in
/// image order, so a batch gives bitwise the same loss and gradients on every run.
package struct DetectionLoss: Sendable {
    package var assignment = DetectionAssignment()
    package var focalBeta = 2.0
    package var boxWeight = 2.0
    package var landmarkWeight = 0.1
    package var landmarkBeta = 1.0 / 9.0

    package init(
        assignment: DetectionAssignment = DetectionAssignment(), focalBeta: Double = 2.0, boxWeight: Double = 2.0,
        landmarkWeight: Double = 0.1, landmarkBeta: Double = 1.0 / 9.0
    ) {
        self.assignment = assignment
        self.focalBeta = focalBeta
        self.boxWeight = boxWeight
        self.landmarkWeight = landmarkWeight
        self.landmarkBeta = landmarkBeta
    }

    /// The loss of a batch: its terms (already weighted and normalised, total = their sum) and the
    /// gradient of the total with respect to each head tensor, in the heads' shapes.
    package struct Result: Sendable {
        package var total: Double
        package var score: Double
        package var box: Double
        package var landmarks: Double
        /// Positive cells in the batch (the normaliser is max(1, this)).
        package var positiveCount: Int
        /// dTotal/dHead for strides 8, 16, 32.
        package var gradients: [Tensor]
    }

    /// The loss of `heads` (`[N, 15, H/s, W/s]` for s = 8, 16, 32) against the faces of each of the N
    /// images, in input pixels.
    package func evaluate(heads: [Tensor], faces: [[LabelledFace]]) -> Result {
        let levels = DetectionHeads.levels(of: heads)
        let batch = heads[0].shape[0]
        precondition(faces.count == batch, "\(faces.count) face lists for a batch of \(batch) images")
        let assignments = Parallel.map(batch) { assignment.assign(faces: faces[$0], levels: levels) }
        let positiveCount = assignments.reduce(0) { $0 + $1.positiveCount }
        let normaliser = 1 / Double(max(1, positiveCount))
        let images = Parallel.map(batch) { image in
            self.image(
                image, heads: heads, levels: levels, faces: faces[image], assignment: assignments[image],
                normaliser: normaliser)
        }
        var gradients = heads.map { Tensor(zeros: $0.shape) }
        var score = 0.0
        var box = 0.0
        var landmarks = 0.0
        for (index, image) in images.enumerated() {
            score += image.score
            box += image.box
            landmarks += image.landmarks
            for level in levels.indices {
                let count = image.gradients[level].count
                gradients[level].scalars.replaceSubrange(
                    (index * count)..<((index + 1) * count), with: image.gradients[level])
            }
        }
        return Result(
            total: score + box + landmarks, score: score, box: box, landmarks: landmarks,
            positiveCount: positiveCount, gradients: gradients)
    }

    /// One image's weighted, normalised terms and its slice of each head's gradient.
    private struct ImageLoss {
        var score = 0.0
        var box = 0.0
        var landmarks = 0.0
        var gradients: [[Float]] = []
    }

    private func image(
        _ image: Int, heads: [Tensor], levels: [DetectionHeads.Level], faces: [LabelledFace],
        assignment: DetectionAssignment.Result, normaliser: Double
    ) -> ImageLoss {
        var result = ImageLoss()
        var offset = 0
        for (head, level) in zip(heads, levels) {
            let plane = level.cellCount
            let base = image * DetectionHeads.channelCount * plane
            var gradient = [Float](repeating: 0, count: DetectionHeads.channelCount * plane)
            head.scalars.withUnsafeBufferPointer { values in
                func value(_ channel: Int, _ cell: Int) -> Double { Double(values[base + channel * plane + cell]) }
                for cell in 0..<plane where !assignment.ignored[offset + cell] {
                    var target = 0.0
                    if let faceIndex = assignment.face[offset + cell] {
                        let face = faces[faceIndex]
                        let centre = level.centre(ofCell: cell)
                        let logits = (0..<4).map { value(DetectionHeads.firstDistanceChannel + $0, cell) }
                        let boxTerm = Self.distanceIoU(
                            centre: centre, logits: logits, stride: level.stride, face: face.box)
                        target = boxTerm.iou
                        result.box += boxWeight * normaliser * boxTerm.loss
                        for side in 0..<4 {
                            gradient[(DetectionHeads.firstDistanceChannel + side) * plane + cell] = Float(
                                boxWeight * normaliser * boxTerm.gradient[side])
                        }
                        if let points = face.landmarks {
                            for (point, landmark) in points.enumerated() {
                                let channel = DetectionHeads.firstLandmarkChannel + 2 * point
                                let targets = [
                                    (landmark.x - centre.x) / Double(level.stride),
                                    (landmark.y - centre.y) / Double(level.stride),
                                ]
                                for axis in 0..<2 {
                                    let term = Self.smoothL1(
                                        value(channel + axis, cell) - targets[axis], beta: landmarkBeta)
                                    result.landmarks += landmarkWeight * normaliser * term.loss
                                    gradient[(channel + axis) * plane + cell] = Float(
                                        landmarkWeight * normaliser * term.derivative)
                                }
                            }
                        }
                    }
                    let focal = Self.qualityFocal(
                        logit: value(DetectionHeads.scoreChannel, cell), target: target, beta: focalBeta)
                    result.score += normaliser * focal.loss
                    gradient[DetectionHeads.scoreChannel * plane + cell] = Float(normaliser * focal.derivative)
                }
            }
            result.gradients.append(gradient)
            offset += plane
        }
        return result
    }

    /// Quality focal loss |y - p|^beta BCE(p, y) of one logit and its derivative in the logit.
    static func qualityFocal(logit z: Double, target y: Double, beta: Double) -> (loss: Double, derivative: Double) {
        let p = 1 / (1 + exp(-z))
        // BCE with logits, stable for large |z|: max(z, 0) - z y + log(1 + e^-|z|).
        let crossEntropy = max(z, 0) - z * y + log1p(exp(-abs(z)))
        let gap = abs(p - y)
        let modulation = pow(gap, beta)
        // d|p - y|^beta/dz = beta |p - y|^(beta - 1) sign(p - y) p (1 - p); dBCE/dz = p - y.
        let sign: Double = p >= y ? 1 : -1
        let derivative = beta * pow(gap, beta - 1) * sign * p * (1 - p) * crossEntropy + modulation * (p - y)
        return (modulation * crossEntropy, derivative)
    }

    /// Smooth-L1 of one difference and its derivative.
    static func smoothL1(_ x: Double, beta: Double) -> (loss: Double, derivative: Double) {
        abs(x) < beta ? (0.5 * x * x / beta, x / beta) : (abs(x) - 0.5 * beta, x > 0 ? 1 : -1)
    }

    /// DIoU loss of the box a cell decodes from its distance logits (left, top, right, bottom)
    /// against the face's box; the IoU (the score's target) and the loss's derivative in each logit.
    static func distanceIoU(
        centre: FacePoint, logits: [Double], stride: Int, face: DetectionBox
    ) -> (loss: Double, iou: Double, gradient: [Double]) {
        let distances = logits.map { DetectionHeads.distance($0, stride: stride) }
        let left = centre.x - distances[0]
        let top = centre.y - distances[1]
        let right = centre.x + distances[2]
        let bottom = centre.y + distances[3]
        // Intersection; its derivative in each predicted edge is nonzero only where that edge bounds it.
        let overlapWidth = min(right, face.right) - max(left, face.x)
        let overlapHeight = min(bottom, face.bottom) - max(top, face.y)
        let overlaps = overlapWidth > 0 && overlapHeight > 0
        let intersection = overlaps ? overlapWidth * overlapHeight : 0
        let width = right - left
        let height = bottom - top
        let union = width * height + face.area - intersection
        let iou = intersection / union
        // dIoU/dIntersection and dIoU/dArea (of the predicted box).
        let byIntersection = (union + intersection) / (union * union)
        let byArea = -intersection / (union * union)
        var dIntersection = [0.0, 0.0, 0.0, 0.0]  // d/d(left, top, right, bottom)
        if overlaps {
            if left > face.x { dIntersection[0] = -overlapHeight }
            if top > face.y { dIntersection[1] = -overlapWidth }
            if right < face.right { dIntersection[2] = overlapHeight }
            if bottom < face.bottom { dIntersection[3] = overlapWidth }
        }
        let dArea = [-height, -width, height, width]
        // Centre distance over the enclosing box's squared diagonal.
        let dx = (left + right) / 2 - face.centreX
        let dy = (top + bottom) / 2 - face.centreY
        let centreDistance = dx * dx + dy * dy
        let enclosingWidth = max(right, face.right) - min(left, face.x)
        let enclosingHeight = max(bottom, face.bottom) - min(top, face.y)
        let diagonal = enclosingWidth * enclosingWidth + enclosingHeight * enclosingHeight
        let dCentreDistance = [dx, dy, dx, dy]
        let dDiagonal = [
            left < face.x ? -2 * enclosingWidth : 0, top < face.y ? -2 * enclosingHeight : 0,
            right > face.right ? 2 * enclosingWidth : 0, bottom > face.bottom ? 2 * enclosingHeight : 0,
        ]
        let loss = 1 - iou + centreDistance / diagonal
        // Each edge moves against (left, top) or with (right, bottom) its distance, and a distance
        // s e^t has derivative s e^t in t below the cap, 0 above it.
        let edgeSign = [-1.0, -1.0, 1.0, 1.0]
        let gradient = (0..<4).map { side -> Double in
            let dIoU = byIntersection * dIntersection[side] + byArea * dArea[side]
            let dEdge =
                -dIoU + dCentreDistance[side] / diagonal - centreDistance * dDiagonal[side] / (diagonal * diagonal)
            let dDistance = logits[side] < DetectionHeads.maximumLogDistance ? distances[side] : 0
            return dEdge * edgeSign[side] * dDistance
        }
        return (loss, iou, gradient)
    }
}
