import Foundation
import Testing

@testable import FaceTrain
@testable import FaceTrainEngine

/// Decoding of hand-set head values, greedy NMS in order, ties, and the letterbox mapped back.
@Suite("Detection decoding and NMS")
struct DetectionDecoderTests {
    /// Heads for a 64 x 48 input (batch `batch`) with every score logit at -10 (score 4.5e-5, below
    /// any floor) and every other channel 0.
    static func quietHeads(batch: Int = 1, height: Int = 64, width: Int = 64) -> [Tensor] {
        DetectionHeads.levels(inputHeight: height, inputWidth: width).map { level in
            var head = Tensor(zeros: [batch, 15, level.rows, level.columns])
            for image in 0..<batch {
                for cell in 0..<level.cellCount { head.scalars[(image * 15) * level.cellCount + cell] = -10 }
            }
            return head
        }
    }

    static func set(
        _ heads: inout [Tensor], level: Int, image: Int = 0, row: Int, column: Int, channel: Int, _ value: Float
    ) {
        let shape = heads[level].shape
        heads[level].scalars[((image * 15 + channel) * shape[2] + row) * shape[3] + column] = value
    }

    static func box(_ x: Double, _ y: Double, _ width: Double, _ height: Double) -> DetectionBox {
        DetectionBox(x: x, y: y, width: width, height: height)
    }

    static func near(_ a: Double, _ b: Double, _ tolerance: Double = 1e-4) -> Bool { abs(a - b) <= tolerance }

    /// Stride 16, cell (row 1, column 2): centre (40, 24). Logits: score 2; distances log 1, log 2,
    /// log 0.5, 1 (x 16 px: 16, 32, 8, 16e); landmark 0 offset (0.5, -0.25), landmark 4 (-1, 2).
    @Test func decodesAKnownCellAndUndoesTheLetterbox() throws {
        var heads = Self.quietHeads(batch: 2)
        let values: [(Int, Float)] = [
            (0, 2), (1, 0), (2, Float(log(2.0))), (3, Float(log(0.5))), (4, 1), (5, 0.5), (6, -0.25), (13, -1), (14, 2),
        ]
        for (channel, value) in values {
            Self.set(&heads, level: 1, image: 1, row: 1, column: 2, channel: channel, value)
        }
        #expect(DetectionDecoder().decode(heads: heads, image: 0).isEmpty)
        let found = DetectionDecoder().decode(heads: heads, image: 1)
        #expect(found.count == 1)
        let detection = try #require(found.first)
        #expect(Self.near(detection.score, 1 / (1 + exp(-2))))
        let e = exp(1.0)
        #expect(Self.near(detection.box.x, 24) && Self.near(detection.box.y, -8))
        #expect(Self.near(detection.box.right, 48) && Self.near(detection.box.bottom, 24 + 16 * e))
        #expect(Self.near(detection.landmarks[0].x, 48) && Self.near(detection.landmarks[0].y, 20))
        #expect(Self.near(detection.landmarks[1].x, 40) && Self.near(detection.landmarks[1].y, 24))
        #expect(Self.near(detection.landmarks[4].x, 24) && Self.near(detection.landmarks[4].y, 56))
        // Input = photo x 0.5 + (4, 6): the photo's coordinates are (input - offset) / 0.5.
        let letterbox = LetterboxTransform(scale: 0.5, offsetX: 4, offsetY: 6)
        let mapped = try #require(DetectionDecoder().decode(heads: heads, image: 1, letterbox: letterbox).first)
        #expect(Self.near(mapped.box.x, 40) && Self.near(mapped.box.y, -28))
        #expect(Self.near(mapped.box.width, 48) && Self.near(mapped.box.height, 2 * (32 + 16 * e)))
        #expect(Self.near(mapped.landmarks[0].x, 88) && Self.near(mapped.landmarks[0].y, 28))
        #expect(letterbox.toPhoto(letterbox.toInput(FacePoint(x: 3, y: 7))) == FacePoint(x: 3, y: 7))
    }

    @Test func distancesAreCappedAtEToTheSixStrides() throws {
        var heads = Self.quietHeads()
        for (channel, value) in [(0, Float(3)), (1, 10), (2, 6), (3, -2), (4, 50)] {
            Self.set(&heads, level: 2, row: 0, column: 1, channel: channel, value)
        }
        let detection = try #require(DetectionDecoder().decode(heads: heads, image: 0).first)
        // Stride 32, cell (0, 1): centre (48, 16).
        let cap = 32 * exp(6.0)
        #expect(Self.near(detection.box.x, 48 - cap, 1e-2))
        #expect(Self.near(detection.box.y, 16 - cap, 1e-2))
        #expect(Self.near(detection.box.right, 48 + 32 * exp(-2.0), 1e-3))
        #expect(Self.near(detection.box.bottom, 16 + cap, 1e-2))
    }

    /// The floor keeps scores at or above it; candidates beyond the top-k are dropped first.
    @Test func scoreFloorAndTopK() {
        var heads = Self.quietHeads()
        // Stride 8 cells far apart (no overlap after NMS): logits 0, 1, 2 -> scores 0.5, 0.73, 0.88.
        for (column, logit) in [(0, Float(0)), (3, 1), (6, 2)] {
            Self.set(&heads, level: 0, row: 0, column: column, channel: 0, logit)
            for channel in 1...4 { Self.set(&heads, level: 0, row: 0, column: column, channel: channel, -2) }
        }
        let all = DetectionDecoder(scoreFloor: 0.5).decode(heads: heads, image: 0)
        #expect(all.count == 3)
        #expect(all.map { $0.box.centreX.rounded() } == [52, 28, 4])
        #expect(DetectionDecoder(scoreFloor: 0.6).decode(heads: heads, image: 0).count == 2)
        #expect(
            DetectionDecoder(candidateLimit: 2).decode(heads: heads, image: 0).map { $0.box.centreX.rounded() } == [
                52, 28,
            ])
        #expect(DetectionDecoder(keepLimit: 1).decode(heads: heads, image: 0).map { $0.box.centreX.rounded() } == [52])
    }

    /// A (0.9) suppresses B (IoU 90/110 = 0.82); C does not overlap; D overlaps B (IoU 70/130 = 0.54)
    /// but B was suppressed, and A only at 60/140 = 0.43 <= 0.45, so D stays.
    @Test func greedySuppressionKeepsOrderAndOnlySuppressesByKeptBoxes() {
        let a = Detection(box: Self.box(0, 0, 10, 10), score: 0.9, landmarks: [])
        let b = Detection(box: Self.box(1, 0, 10, 10), score: 0.8, landmarks: [])
        let c = Detection(box: Self.box(20, 0, 10, 10), score: 0.7, landmarks: [])
        let d = Detection(box: Self.box(4, 0, 10, 10), score: 0.6, landmarks: [])
        let sorted = DetectionDecoder.best([d, b, c, a], limit: 10)
        #expect(sorted == [a, b, c, d])
        #expect(DetectionDecoder.suppress(sorted, threshold: 0.45, keepLimit: 750) == [a, c, d])
        // At a threshold under D's overlap with A, D goes too.
        #expect(DetectionDecoder.suppress(sorted, threshold: 0.4, keepLimit: 750) == [a, c])
        #expect(DetectionDecoder.suppress(sorted, threshold: 0.45, keepLimit: 2) == [a, c])
    }

    /// Voting: A (0.8) suppresses B (0.4, IoU 0.82) and takes their score-squared mean (weights 4 : 1)
    /// for box and landmarks, keeping its own score; C, apart, is its own group and stays as it was;
    /// D (IoU with A 0.43) is no member of A's group. Without voting the greedy result is unchanged.
    @Test func votingAveragesAGroupByScoreSquared() throws {
        let a = Detection(box: Self.box(0, 0, 10, 10), score: 0.8, landmarks: [FacePoint(x: 2, y: 3)])
        let b = Detection(box: Self.box(1, 0, 10, 10), score: 0.4, landmarks: [FacePoint(x: 7, y: 8)])
        let c = Detection(box: Self.box(20, 0, 10, 10), score: 0.7, landmarks: [FacePoint(x: 25, y: 5)])
        let d = Detection(box: Self.box(4, 0, 10, 10), score: 0.3, landmarks: [FacePoint(x: 9, y: 5)])
        let sorted = [a, b, c, d]
        #expect(DetectionDecoder.suppress(sorted, threshold: 0.45, keepLimit: 750) == [a, c, d])
        let voted = DetectionDecoder.suppress(sorted, threshold: 0.45, keepLimit: 750, voting: true)
        #expect(voted.count == 3)
        let first = try #require(voted.first)
        #expect(first.score == 0.8)
        #expect(Self.near(first.box.x, 0.2) && Self.near(first.box.right, 10.2))
        #expect(Self.near(first.box.y, 0) && Self.near(first.box.bottom, 10))
        #expect(Self.near(first.landmarks[0].x, 3) && Self.near(first.landmarks[0].y, 4))
        #expect(voted[1] == c && voted[2] == d)
        // Members without landmarks leave the leader's points alone.
        let bare = Detection(box: b.box, score: b.score, landmarks: [])
        let mixed = DetectionDecoder.suppress([a, bare], threshold: 0.45, keepLimit: 750, voting: true)
        #expect(mixed.count == 1 && mixed[0].landmarks == a.landmarks && Self.near(mixed[0].box.x, 0.2))
        // The decoder votes by default and can be told not to.
        #expect(DetectionDecoder().voting && !DetectionDecoder(voting: false).voting)
    }

    /// Equal scores keep their input order (level, then cell when decoding), so the first of two
    /// identical boxes survives.
    @Test func tiesKeepInputOrder() {
        let first = Detection(box: Self.box(0, 0, 10, 10), score: 0.5, landmarks: [FacePoint(x: 1, y: 1)])
        let second = Detection(box: Self.box(0, 0, 10, 10), score: 0.5, landmarks: [FacePoint(x: 2, y: 2)])
        let third = Detection(box: Self.box(50, 0, 10, 10), score: 0.5, landmarks: [])
        #expect(DetectionDecoder.best([first, second, third], limit: 3) == [first, second, third])
        #expect(DetectionDecoder.best([third, second, first], limit: 3) == [third, second, first])
        #expect(
            DetectionDecoder.suppress([first, second, third], threshold: 0.45, keepLimit: 750) == [first, third])
        // Decoding: the same box from a stride-8 and a stride-16 cell at equal scores: stride 8 wins.
        var heads = Self.quietHeads()
        // Stride 8 cell (1, 1) centre (12, 12); stride 16 cell (0, 0) centre (8, 8); boxes [4, 4, 16, 16].
        for (level, distances) in [(0, [8.0, 8, 8, 8]), (1, [4.0, 4, 12, 12])] {
            let row = level == 0 ? 1 : 0
            Self.set(&heads, level: level, row: row, column: row, channel: 0, 1)
            Self.set(&heads, level: level, row: row, column: row, channel: 5, level == 0 ? 7 : 9)
            for (side, distance) in distances.enumerated() {
                let stride = level == 0 ? 8.0 : 16.0
                Self.set(&heads, level: level, row: row, column: row, channel: 1 + side, Float(log(distance / stride)))
            }
        }
        let kept = DetectionDecoder(voting: false).decode(heads: heads, image: 0)
        #expect(kept.count == 1)
        #expect(Self.near(kept[0].landmarks[0].x, 12 + 8 * 7))
        // Voting, the two equal scores weigh alike: the mean of 68 and 8 + 16 * 9.
        let voted = DetectionDecoder().decode(heads: heads, image: 0)
        #expect(voted.count == 1 && Self.near(voted[0].landmarks[0].x, (68 + 152) / 2))
    }
}
