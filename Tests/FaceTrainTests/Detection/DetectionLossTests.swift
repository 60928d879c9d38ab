import Foundation
import Testing

@testable import FaceTrain
@testable import FaceTrainEngine

/// The detection loss: its value on a hand-worked cell, its gradients against central finite
/// differences in Double, batching and reproducibility, and its speed at training size.
@Suite("Detection loss")
struct DetectionLossTests {
    static func face(
        _ x: Double, _ y: Double, _ width: Double, _ height: Double, landmarks: Bool = false, ignored: Bool = false
    ) -> LabelledFace {
        let points = [(0.3, 0.4), (0.7, 0.4), (0.5, 0.6), (0.35, 0.8), (0.65, 0.8)].map {
            FacePoint(x: x + $0.0 * width, y: y + $0.1 * height)
        }
        return LabelledFace(
            box: DetectionBox(x: x, y: y, width: width, height: height), landmarks: landmarks ? points : nil,
            ignored: ignored)
    }

    static func randomHeads(batch: Int, height: Int, width: Int, seed: UInt64) -> [Tensor] {
        var generator = SplitMix64(seed: seed)
        return DetectionHeads.levels(inputHeight: height, inputWidth: width).map { level in
            Tensor(randomNormal: [batch, 15, level.rows, level.columns], standardDeviation: 0.7, using: &generator)
        }
    }

    /// One positive cell worked out by hand. The 32 px face at (16, 16) in a 64 px input has exactly
    /// the 4 inner stride-8 cells as positives (DetectionAssignmentTests). All heads are 0 except
    /// cell 27 (centre (28, 28)), whose distances decode [20, 20, 40, 40] (logits log(8/8), log 1,
    /// log(12/8), log(12/8)) and whose landmark offsets are 0. Its IoU with the face is 400/1024,
    /// the score target. Every other cell has logit 0 (p = 1/2).
    @Test func valuesMatchAHandWorkedCase() {
        let face = Self.face(16, 16, 32, 32, landmarks: true)
        var heads = DetectionHeads.levels(inputHeight: 64, inputWidth: 64).map {
            Tensor(zeros: [1, 15, $0.rows, $0.columns])
        }
        // Cells 28, 35 and 36 (centres (36, 28), (28, 36), (36, 36)) decode the face itself.
        let distances: [(cell: Int, pixels: [Double])] = [
            (27, [8, 8, 12, 12]), (28, [20, 12, 12, 20]), (35, [12, 20, 20, 12]), (36, [20, 20, 12, 12]),
        ]
        for (cell, pixels) in distances {
            for side in 0..<4 { heads[0].scalars[(1 + side) * 64 + cell] = Float(log(pixels[side] / 8)) }
        }
        let result = DetectionLoss().evaluate(heads: heads, faces: [[face]])
        #expect(result.positiveCount == 4)
        let iou = 400.0 / 1024
        // QFL at p = 1/2: |y - 1/2|^2 (log 2) per cell; 80 negatives (y = 0) and positives y = iou or ~1.
        let bce = log(2.0)
        let score = (80 * 0.25 * bce + pow(0.5 - iou, 2) * bce + 3 * 0.25 * bce) / 4
        // DIoU of cell 27: 1 - iou + centre distance (30 - 32)^2 x 2 over the enclosing diagonal 32^2 x 2.
        let box = 2 * (1 - iou + 8.0 / 2048) / 4
        // Landmarks: offsets 0 against targets (p - c) / 8 for each positive cell, smooth-L1 summed.
        var landmarks = 0.0
        for (cell, _) in distances {
            let centre = DetectionHeads.levels(inputHeight: 64, inputWidth: 64)[0].centre(ofCell: cell)
            for point in face.landmarks! {
                for offset in [(point.x - centre.x) / 8, (point.y - centre.y) / 8] {
                    landmarks += abs(offset) < 1.0 / 9 ? 0.5 * offset * offset * 9 : abs(offset) - 0.5 / 9
                }
            }
        }
        landmarks *= 0.1 / 4
        #expect(abs(result.score - score) < 1e-5, "score \(result.score) vs \(score)")
        #expect(abs(result.box - box) < 1e-5, "box \(result.box) vs \(box)")
        #expect(abs(result.landmarks - landmarks) < 1e-6, "landmarks \(result.landmarks) vs \(landmarks)")
        #expect(abs(result.total - (score + box + landmarks)) < 1e-5)
    }

    /// Batch of 3 at 64 x 96: image 0 with a face with landmarks, one without and an invalid one;
    /// image 1 with no face; image 2 with a face and a 6 px face (an ignore region). Each gradient
    /// element against (L(v + h) - L(v - h)) / (2h), h = 1e-3 on the Float value, L in Double: the
    /// score channel against the total, distance channels against the box term (the score's target
    /// IoU is a constant for the gradient), landmark channels against the landmark term.
    @Test func gradientsMatchFiniteDifferences() {
        let faces: [[LabelledFace]] = [
            [
                Self.face(10, 8, 30, 34, landmarks: true), Self.face(50, 20, 20, 22),
                Self.face(70, 40, 20, 18, ignored: true),
            ],
            [],
            [Self.face(30, 10, 44, 48, landmarks: true), Self.face(4, 50, 8, 6)],
        ]
        let heads = Self.randomHeads(batch: 3, height: 64, width: 96, seed: 11)
        let loss = DetectionLoss()
        let result = loss.evaluate(heads: heads, faces: faces)
        #expect(result.positiveCount > 0 && result.box > 0 && result.landmarks > 0)
        var worst: [String: Double] = [:]
        for level in heads.indices {
            let shape = heads[level].shape
            let plane = shape[2] * shape[3]
            var numeric: [String: [Double]] = [:]
            var analytic: [String: [Double]] = [:]
            for index in heads[level].scalars.indices {
                let channel = (index / plane) % 15
                let term = channel == 0 ? "score" : channel < 5 ? "box" : "landmarks"
                func value(_ delta: Float) -> (Double, Float) {
                    var probe = heads
                    probe[level].scalars[index] += delta
                    let evaluated = loss.evaluate(heads: probe, faces: faces)
                    let part =
                        term == "score" ? evaluated.total : term == "box" ? evaluated.box : evaluated.landmarks
                    return (part, probe[level].scalars[index])
                }
                let (plus, high) = value(1e-3)
                let (minus, low) = value(-1e-3)
                numeric[term, default: []].append((plus - minus) / Double(high - low))
                analytic[term, default: []].append(Double(result.gradients[level].scalars[index]))
            }
            for term in numeric.keys {
                let difference = zip(numeric[term]!, analytic[term]!).map { ($0 - $1) * ($0 - $1) }.reduce(0, +)
                let scale = max(
                    numeric[term]!.map { $0 * $0 }.reduce(0, +), analytic[term]!.map { $0 * $0 }.reduce(0, +), 1e-12)
                worst[term] = max(worst[term] ?? 0, (difference / scale).squareRoot())
            }
        }
        print("detection loss gradients, relative error against finite differences: \(worst)")
        for (term, error) in worst { #expect(error < 2e-3, "\(term): relative error \(error)") }
        // The face-free image and the ignored cells have no gradient beyond the score's.
        #expect(worst.count == 3)
    }

    /// Ignored cells get no gradient at all, and an image without faces only pushes scores down.
    @Test func ignoredCellsAndFacelessImagesGetOnlyWhatTheyShould() {
        let faces: [[LabelledFace]] = [[Self.face(0, 0, 17, 17, ignored: true)], []]
        let heads = Self.randomHeads(batch: 2, height: 64, width: 64, seed: 3)
        let result = DetectionLoss().evaluate(heads: heads, faces: faces)
        #expect(result.positiveCount == 0 && result.box == 0 && result.landmarks == 0)
        let stride8 = result.gradients[0].scalars
        for cell in [0, 1, 8, 9] {
            #expect((0..<15).allSatisfy { stride8[$0 * 64 + cell] == 0 })
        }
        // Elsewhere only channel 0 moves, always upwards for the loss (scores pushed to 0).
        for image in 0..<2 {
            for cell in 0..<64 where !(image == 0 && [0, 1, 8, 9].contains(cell)) {
                #expect(stride8[image * 15 * 64 + cell] > 0)
                #expect((1..<15).allSatisfy { stride8[(image * 15 + $0) * 64 + cell] == 0 })
            }
        }
    }

    /// The batch is the sum of its images, each normalised by the batch's positives; twice the same
    /// batch gives bitwise the same result.
    @Test func batchEqualsItsImagesAndIsReproducible() {
        var generator = SplitMix64(seed: 5)
        let faces: [[LabelledFace]] = (0..<6).map { image in
            (0..<(image % 3 + 1)).map { _ in
                let size = 12 + 40 * Double(generator.next() % 1000) / 1000
                let x = Double(generator.next() % 1000) / 1000 * (128 - size)
                let y = Double(generator.next() % 1000) / 1000 * (96 - size)
                return Self.face(x, y, size, size * 1.2 > 96 - y ? 96 - y : size * 1.2, landmarks: image % 2 == 0)
            }
        }
        let heads = Self.randomHeads(batch: 6, height: 96, width: 128, seed: 9)
        let loss = DetectionLoss()
        let batch = loss.evaluate(heads: heads, faces: faces)
        let again = loss.evaluate(heads: heads, faces: faces)
        #expect(batch.total == again.total && batch.gradients == again.gradients)
        var sum = 0.0
        var positives = 0
        for image in 0..<6 {
            let single = heads.map { head -> Tensor in
                let count = head.count / 6
                return Tensor(
                    shape: [1] + head.shape.dropFirst(),
                    scalars: Array(head.scalars[(image * count)..<((image + 1) * count)]))
            }
            let alone = loss.evaluate(heads: single, faces: [faces[image]])
            sum += alone.total * Double(max(1, alone.positiveCount))
            positives += alone.positiveCount
        }
        #expect(positives == batch.positiveCount)
        #expect(abs(sum / Double(positives) - batch.total) < 1e-9 * max(1, batch.total))
    }

    /// Training size: 32 images of 320 x 320 (2,100 cells each) with 8 faces each of 10-160 px give a
    /// finite loss with more positive cells than faces. (Its speed shows in `detector train`'s img/s.)
    @Test func aTrainingSizeBatchHasAFiniteLossAndPositives() {
        var generator = SplitMix64(seed: 1)
        let faces: [[LabelledFace]] = (0..<32).map { _ in
            (0..<8).map { _ in
                let size = 10 + 150 * Double(generator.next() % 1000) / 1000
                let x = Double(generator.next() % 1000) / 1000 * (320 - size)
                let y = Double(generator.next() % 1000) / 1000 * (320 - size)
                return Self.face(x, y, size, size, landmarks: true)
            }
        }
        let heads = Self.randomHeads(batch: 32, height: 320, width: 320, seed: 2)
        let loss = DetectionLoss()
        let result = loss.evaluate(heads: heads, faces: faces)
        #expect(result.total.isFinite && result.positiveCount > 256)
    }
}
