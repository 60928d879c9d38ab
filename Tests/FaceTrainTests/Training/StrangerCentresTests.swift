import FaceTrainEngine
import Foundation
import Testing

@testable import FaceTrain

/// Class 2's several prototypes: the layers that merge them compute the maximum exactly, and the
/// clustering finds separated groups.
@Suite("stranger centres")
struct StrangerCentresTests {
    /// Runs the merge layers as the exports do: y = W·x + b, ReLU.
    static func apply(_ layers: [(LayerSpecification, [NamedTensor])], to input: [Float]) -> [Float] {
        var vector = input
        for (layer, tensors) in layers {
            switch layer {
            case .linear(let inputs, let outputs):
                #expect(inputs == vector.count)
                let weight = tensors.first { $0.name == "weight" }!.tensor.scalars
                let bias = tensors.first { $0.name == "bias" }!.tensor.scalars
                vector = (0..<outputs).map { row in
                    (0..<inputs).reduce(bias[row]) { $0 + weight[row * inputs + $1] * vector[$1] }
                }
            case .relu: vector = vector.map { max($0, 0) }
            default: Issue.record("unexpected layer \(layer)")
            }
        }
        return vector
    }

    @Test(arguments: [1, 2, 3, 4, 5, 7, 8])
    func mergeTakesTheLargestOfClassTwosRows(centres: Int) {
        var generator = SplitMix64(seed: UInt64(centres))
        for (classes, strangers) in [(3, 1), (7, 1), (9, 1), (5, 4)] {
            let layers = StrangerCentres.mergeLayers(classes: classes, strangers: strangers, centres: centres)
            #expect(layers.count == 3 * Int(ceil(log2(Double(centres)))))
            for _ in 0..<20 {
                // Logits of a scaled cosine: within ±16.
                let logits = (0..<(classes + centres - 1)).map { _ in Float(generator.next() % 3200) / 100 - 16 }
                let merged = Self.apply(layers, to: logits)
                var expected = Array(logits.prefix(classes))
                expected[strangers] = ([logits[strangers]] + logits.dropFirst(classes)).max()!
                #expect(merged.count == classes)
                for (got, want) in zip(merged, expected) { #expect(abs(got - want) < 1e-4, "\(merged) vs \(expected)") }
            }
        }
    }

    @Test func clusteringFindsSeparatedGroups() {
        var generator = SplitMix64(seed: 5)
        let directions: [[Float]] = [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]]
        var points: [[Float]] = []
        for direction in directions {
            for _ in 0..<6 { points.append(direction.map { $0 + Float(generator.next() % 100) / 1000 }) }
        }
        let assignment = StrangerCentres.sphericalKMeans(points.map(StrangerCentres.unit), clusters: 3, seed: 1)
        for group in 0..<3 {
            let labels = Set(assignment[(group * 6)..<(group * 6 + 6)])
            #expect(labels.count == 1, "group \(group): \(assignment)")
        }
        #expect(Set(assignment).count == 3)
        #expect(StrangerCentres.count(corrected: 0) == 1 && StrangerCentres.count(corrected: 1) == 2)
        #expect(StrangerCentres.count(corrected: 8) == 3 && StrangerCentres.count(corrected: 9) == 4)
        #expect(StrangerCentres.count(corrected: 1000) == StrangerCentres.maximumCentres)
    }
}
