import Foundation
import Testing

@testable import FaceTrain

/// ATSS on hand-worked cases: candidates, the mean + std threshold, conflicts, ignore regions.
@Suite("Detection assignment (ATSS)")
struct DetectionAssignmentTests {
    /// 64 x 64 input: 8 x 8 cells at stride 8 (flat 0-63), 4 x 4 at 16 (64-79), 2 x 2 at 32 (80-83).
    let levels = DetectionHeads.levels(inputHeight: 64, inputWidth: 64)

    static func face(_ x: Double, _ y: Double, _ width: Double, _ height: Double, ignored: Bool = false) -> LabelledFace
    {
        LabelledFace(box: DetectionBox(x: x, y: y, width: width, height: height), ignored: ignored)
    }

    static func positives(_ result: DetectionAssignment.Result, of face: Int) -> [Int] {
        result.face.indices.filter { result.face[$0] == face }
    }

    /// Centre (32, 32) sits on the corner of four stride-8 cells; the 9 nearest are those four
    /// (distance sqrt 32) and then the first five, row-major, of the eight at sqrt 160.
    @Test func nearestCellsAreTakenByDistanceThenRowMajor() {
        let box = DetectionBox(x: 16, y: 16, width: 32, height: 32)
        #expect(DetectionAssignment().nearestCells(to: box, level: levels[0]) == [27, 28, 35, 36, 19, 20, 26, 29, 34])
        // Stride 32 has only 4 cells: all of them.
        #expect(DetectionAssignment().nearestCells(to: box, level: levels[2]).sorted() == [0, 1, 2, 3])
    }

    /// The 32 px face at (16, 16). Candidate IoUs with the virtual anchors (side 4s):
    /// stride 8: 4 x 784/1264 and 5 x 560/1488; stride 16: 4 x 1024/4096 and 5 x 768/4352;
    /// stride 32: 4 x 1024/16384. Mean + std (n - 1) = 0.484: only the 4 inner stride-8 cells pass,
    /// and their centres (28, 36) lie inside the box.
    @Test func thresholdIsMeanPlusStandardDeviationOverAllLevels() {
        let ious =
            [Double](repeating: 784.0 / 1264, count: 4) + [Double](repeating: 560.0 / 1488, count: 5)
            + [Double](repeating: 1024.0 / 4096, count: 4) + [Double](repeating: 768.0 / 4352, count: 5)
            + [Double](repeating: 1024.0 / 16384, count: 4)
        let mean = ious.reduce(0, +) / 22
        let std = (ious.map { ($0 - mean) * ($0 - mean) }.reduce(0, +) / 21).squareRoot()
        #expect(abs(DetectionAssignment.meanPlusStandardDeviation(ious) - (mean + std)) < 1e-12)
        #expect(abs(mean + std - 0.4843) < 1e-3)
        let result = DetectionAssignment().assign(faces: [Self.face(16, 16, 32, 32)], levels: levels)
        #expect(Self.positives(result, of: 0) == [27, 28, 35, 36])
        #expect(result.positiveCount == 4)
        #expect(!result.ignored.contains(true))
    }

    /// A large face centred in the image prefers stride 16 or 32 cells, never cells outside its box.
    @Test func positivesLieInsideTheirFace() {
        let faces = [Self.face(2, 3, 60, 58), Self.face(40, 44, 12, 14)]
        let result = DetectionAssignment().assign(faces: faces, levels: levels)
        var offset = 0
        for level in levels {
            for cell in 0..<level.cellCount {
                if let owner = result.face[offset + cell] {
                    let centre = level.centre(ofCell: cell)
                    #expect(faces[owner].box.containsStrictly(x: centre.x, y: centre.y))
                }
            }
            offset += level.cellCount
        }
        #expect(!Self.positives(result, of: 0).isEmpty && !Self.positives(result, of: 1).isEmpty)
    }

    /// A 40 px face and a 12 px face both claim stride-8 cell (3, 3) = 27 on their own; together, the
    /// smaller face takes it whatever the faces' order, and the larger keeps its other cells.
    @Test func aCellClaimedTwiceGoesToTheSmallerFace() {
        let large = Self.face(12, 12, 40, 40)
        let small = Self.face(22, 22, 12, 12)
        let assignment = DetectionAssignment()
        let largeAlone = Set(Self.positives(assignment.assign(faces: [large], levels: levels), of: 0))
        let smallAlone = Set(Self.positives(assignment.assign(faces: [small], levels: levels), of: 0))
        let shared = largeAlone.intersection(smallAlone)
        #expect(shared == [27], "large \(largeAlone.sorted()), small \(smallAlone.sorted())")
        for (faces, smallIndex) in [([large, small], 1), ([small, large], 0)] {
            let result = assignment.assign(faces: faces, levels: levels)
            #expect(Set(Self.positives(result, of: smallIndex)) == smallAlone)
            #expect(Set(Self.positives(result, of: 1 - smallIndex)) == largeAlone.subtracting(shared))
        }
    }

    /// Invalid faces and faces under 8 px mark ignore regions (cells whose centre is inside) and get no
    /// positives; a positive of a learnt face inside an ignore region stays a positive.
    @Test func ignoreRegionsCoverCellCentresInsideDontCareFaces() {
        let invalid = Self.face(0, 0, 17, 17, ignored: true)  // stride-8 centres 4, 12 inside: cells 0, 1, 8, 9
        let tiny = Self.face(42, 2, 20, 7)  // 7 px high: centres x 44, 52, 60 and y 4: cells 5, 6, 7
        let learnt = Self.face(16, 16, 32, 32)  // positives 27, 28, 35, 36
        let blanket = Self.face(26, 26, 12, 12, ignored: true)  // stride-8 centres 28 and 36 only
        let result = DetectionAssignment().assign(faces: [invalid, tiny, learnt, blanket], levels: levels)
        #expect(Self.positives(result, of: 2) == [27, 28, 35, 36])
        #expect(Self.positives(result, of: 0).isEmpty && Self.positives(result, of: 1).isEmpty)
        #expect(Self.positives(result, of: 3).isEmpty)
        // Coarser centres inside: stride 16 (8, 8) and stride 32 (16, 16) in the invalid face (flat 64
        // and 80), stride 16 (56, 8) in the tiny one (flat 67).
        let ignoredCells = result.ignored.indices.filter { result.ignored[$0] }
        #expect(ignoredCells == [0, 1, 5, 6, 7, 8, 9, 64, 67, 80])
        #expect(DetectionAssignment(minimumFaceHeight: 6).assign(faces: [tiny], levels: levels).positiveCount > 0)
    }

    @Test func anImageWithoutFacesHasNoPositivesAndNothingIgnored() {
        let result = DetectionAssignment().assign(faces: [], levels: levels)
        #expect(result.face.count == 84 && result.positiveCount == 0 && !result.ignored.contains(true))
    }

    /// WIDER has boxes of negative width (faces_in_photos keeps 2): never learnt, and they cover no cell.
    @Test func degenerateBoxesAreNeitherLearntNorIgnoreRegions() {
        let degenerate = Self.face(30, 20, -1.25, 14.4)
        #expect(!DetectionAssignment().isLearnt(degenerate))
        let result = DetectionAssignment().assign(faces: [degenerate], levels: levels)
        #expect(result.positiveCount == 0 && !result.ignored.contains(true))
    }
}
