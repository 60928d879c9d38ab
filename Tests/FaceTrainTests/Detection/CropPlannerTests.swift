import Foundation
import Testing

@testable import FaceTrain

/// Which faces of a photo become crops, and every refusal, from hand-made detections.
@Suite("Crop planning")
struct CropPlannerTests {
    static let planner = CropPlanner(template: .celebaMean96, side: 96, threshold: 0.5)

    /// A face whose landmarks are the 96-px template scaled by `scale` and moved by (x, y): its crop
    /// is the photo square from (x, y), 96 x `scale` px wide, unturned.
    static func face(x: Double, y: Double, scale: Double = 1, score: Double = 0.9) -> Detection {
        let points = AlignmentTemplate.celebaMean96.points.map { FacePoint(x: x + $0.x * scale, y: y + $0.y * scale) }
        return Detection(
            box: DetectionBox(x: x + 20 * scale, y: y + 15 * scale, width: 56 * scale, height: 64 * scale),
            score: score,
            landmarks: points)
    }

    @Test func noDetectionOrNoneAboveTheThresholdIsNoFace() {
        #expect(Self.planner.plan([], photoWidth: 300, photoHeight: 300).refusal == .noFace)
        let faint = Self.face(x: 10, y: 10, score: 0.49)
        #expect(Self.planner.plan([faint], photoWidth: 300, photoHeight: 300).refusal == .noFace)
    }

    @Test func aClearFaceGivesOneCropOntoTheTemplate() throws {
        let plan = Self.planner.plan([Self.face(x: 100, y: 50, scale: 2)], photoWidth: 400, photoHeight: 300)
        #expect(plan.refusal == nil)
        let crop = try #require(plan.crops.first)
        #expect(plan.crops.count == 1)
        // Photo to crop: halve, then move (100, 50) to the corner.
        #expect(abs(crop.transform.a - 0.5) < 1e-12 && abs(crop.transform.b) < 1e-12)
        #expect(abs(crop.transform.translationX + 50) < 1e-9 && abs(crop.transform.translationY + 25) < 1e-9)
        #expect(crop.outsideFraction == 0)
    }

    @Test func theLargestFaceIsTakenAndASmallOneBesideItIgnored() throws {
        let large = Self.face(x: 10, y: 10, scale: 2, score: 0.6)
        let small = Self.face(x: 250, y: 10, scale: 1.2, score: 0.99)  // area 0.36 of the large one's
        let plan = Self.planner.plan([small, large], photoWidth: 400, photoHeight: 300)
        #expect(plan.crops.map(\.detection) == [large])
    }

    @Test func aSecondFaceOfComparableSizeRefusesThePhotoUnlessEveryFaceIsWanted() throws {
        let first = Self.face(x: 10, y: 10, scale: 2)
        let second = Self.face(x: 220, y: 10, scale: 2 * 0.8.squareRoot())  // area 0.8 of the first's
        let plan = Self.planner.plan([second, first], photoWidth: 420, photoHeight: 300)
        guard case .secondFace(let ratio) = plan.refusal else {
            Issue.record("expected a second-face refusal, got \(String(describing: plan.refusal))")
            return
        }
        #expect(abs(ratio - 0.8) < 1e-9)
        var every = Self.planner
        every.everyFace = true
        let all = every.plan([second, first], photoWidth: 420, photoHeight: 300)
        #expect(all.crops.map(\.detection) == [first, second])
        #expect(all.refusals.isEmpty)
    }

    /// A smaller box centred on the same face (NMS keeps boxes of different extent) is that face
    /// again: no second-face refusal, and `--all` cuts the face once.
    @Test func aSecondBoxOnTheSameFaceIsNotASecondFace() throws {
        let face = Self.face(x: 40, y: 40, scale: 2)
        let inner = Self.face(x: 60, y: 60, scale: 1.6)  // area 0.64 of the face's, centre inside it
        let plan = Self.planner.plan([inner, face], photoWidth: 300, photoHeight: 300)
        #expect(plan.refusal == nil)
        #expect(plan.crops.map(\.detection) == [face])
        var every = Self.planner
        every.everyFace = true
        #expect(every.plan([inner, face], photoWidth: 300, photoHeight: 300).crops.map(\.detection) == [face])
    }

    @Test func aFaceBelowTheMinimumHeightIsTooSmall() {
        // Box height 64 x 0.3 = 19.2 px.
        let plan = Self.planner.plan([Self.face(x: 10, y: 10, scale: 0.3)], photoWidth: 300, photoHeight: 300)
        #expect(plan.refusal == .tooSmall(height: 64 * 0.3))
        var lenient = Self.planner
        lenient.minimumFaceHeight = 16
        #expect(lenient.plan([Self.face(x: 10, y: 10, scale: 0.3)], photoWidth: 300, photoHeight: 300).refusal == nil)
    }

    @Test func everyFaceKeepsTheGoodOnesAndListsTheRest() {
        var every = Self.planner
        every.everyFace = true
        let good = Self.face(x: 10, y: 10, scale: 2)
        let tiny = Self.face(x: 250, y: 10, scale: 0.3)
        let plan = every.plan([tiny, good], photoWidth: 400, photoHeight: 300)
        #expect(plan.crops.map(\.detection) == [good])
        #expect(plan.refusals == [.tooSmall(height: 64 * 0.3)])
        #expect(plan.refusal == nil)
    }

    @Test func landmarksAtOnePointAreRefused() {
        var face = Self.face(x: 10, y: 10, scale: 2)
        face.landmarks = Array(repeating: FacePoint(x: 60, y: 60), count: 5)
        #expect(Self.planner.plan([face], photoWidth: 300, photoHeight: 300).refusal == .degenerateLandmarks)
    }

    /// The crop is the 96-px square at the face's offset, so the share off the photo is known exactly.
    @Test func aCropMostlyOffThePhotoIsRefused() throws {
        let corner = Self.planner.plan([Self.face(x: -48, y: -48)], photoWidth: 300, photoHeight: 300)
        #expect(corner.refusal == .mostlyOutside(fraction: 0.75))
        let halfOff = Self.planner.plan([Self.face(x: -48, y: 100)], photoWidth: 300, photoHeight: 300)
        #expect(halfOff.refusal == .mostlyOutside(fraction: 0.5))
        let edge = Self.planner.plan([Self.face(x: -20, y: 100)], photoWidth: 300, photoHeight: 300)
        let crop = try #require(edge.crops.first)
        #expect(abs(crop.outsideFraction - 20.0 / 96) < 1e-12)
    }
}
