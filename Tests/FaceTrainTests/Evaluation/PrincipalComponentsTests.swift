import Testing

@testable import FaceTrain
@testable import FaceTrainEngine

@Suite("Principal components")
struct PrincipalComponentsTests {
    @Test func findsTheDirectionOfGreatestVariance() throws {
        // Points spread along (1, 1, 0) with a little spread along (1, -1, 0) and none along z.
        var data: [Float] = []
        for step in -5...5 {
            let t = Float(step)
            let s: Float = step % 2 == 0 ? 0.1 : -0.1
            data += [t + s, t - s, 0]
        }
        let result = try #require(PrincipalComponents.project(data, rows: 11, dimension: 3, components: 2))
        #expect(result.explained[0] > 0.99)
        // First coordinate is the position along (1,1)/sqrt(2), up to sign.
        let first = (0..<11).map { result.coordinates[$0 * 2] }
        let expected = (-5...5).map { Float($0) * 2 / Float(2).squareRoot() }
        let sign: Float = first[10] > 0 ? 1 : -1
        for (value, target) in zip(first, expected) { #expect(abs(value * sign - target) < 1e-3) }
    }
}
