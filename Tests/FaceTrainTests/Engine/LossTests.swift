import Foundation
import Testing

@testable import FaceTrain
@testable import FaceTrainEngine

@Suite struct LossTests {
    /// The loss written out directly in double precision from its definition.
    static func directLoss(_ logits: [Double], classes: Int, labels: [Int], smoothing: Double, weights: [Double])
        -> Double
    {
        var total = 0.0
        var weightSum = 0.0
        for (row, label) in labels.enumerated() {
            let z = Array(logits[(row * classes)..<((row + 1) * classes)])
            let normaliser = z.map { exp($0) }.reduce(0, +)
            for c in 0..<classes {
                let target = (c == label ? 1 - smoothing : 0) + smoothing / Double(classes)
                total += weights[c] * target * -log(exp(z[c]) / normaliser)
            }
            weightSum += weights[label]
        }
        return total / weightSum
    }

    /// d loss / d zᵢ for every i by central differences of a double-precision loss (step 1e-5).
    static func centralDifferences(_ z: [Double], _ loss: ([Double]) -> Double) -> [Double] {
        let h = 1e-5
        return z.indices.map { index in
            var plus = z
            var minus = z
            plus[index] += h
            minus[index] -= h
            return (loss(plus) - loss(minus)) / (2 * h)
        }
    }

    @Test func byHand() {
        // Two equal logits, label 0: loss ln 2, gradient (p - onehot) = (-0.5, 0.5).
        let (loss, gradient) = SoftmaxCrossEntropy().lossAndGradient(logits: Tensor(zeros: [1, 2]), labels: [0])
        #expect(abs(loss - Float(log(2.0))) < 1e-7)
        #expect(gradient.scalars == [-0.5, 0.5])
    }

    @Test(arguments: [(0.0, false), (0.1, false), (0.0, true), (0.2, true)])
    func matchesDirectComputation(_ configuration: (Double, Bool)) {
        let (smoothing, weighted) = configuration
        let (batch, classes) = (4, 5)
        let logits = TestData.normal([batch, classes], seed: 21, standardDeviation: 3)
        let labels = [2, 0, 4, 2]
        let weights: [Float] = weighted ? [0.5, 1, 2, 1.5, 0.25] : [1, 1, 1, 1, 1]
        let loss = SoftmaxCrossEntropy(labelSmoothing: Float(smoothing), classWeights: weighted ? weights : nil)
        let (value, gradient) = loss.lossAndGradient(logits: logits, labels: labels)
        let z = logits.scalars.map(Double.init)
        let w = weights.map(Double.init)
        let direct = Self.directLoss(z, classes: classes, labels: labels, smoothing: smoothing, weights: w)
        #expect(abs(Double(value) - direct) < 1e-6 * max(1, direct))
        // Gradient against central differences of the double-precision loss (error O(h²) ≈ 1e-10).
        let numericGradient = Self.centralDifferences(z) {
            Self.directLoss($0, classes: classes, labels: labels, smoothing: smoothing, weights: w)
        }
        for (index, numeric) in numericGradient.enumerated() {
            #expect(abs(Double(gradient.scalars[index]) - numeric) < 1e-5)
        }
    }

    @Test func largeLogitsStayFinite() {
        let logits = Tensor(shape: [1, 3], scalars: [1000, -1000, 0])
        let (loss, gradient) = SoftmaxCrossEntropy(labelSmoothing: 0.1).lossAndGradient(logits: logits, labels: [1])
        #expect(loss.isFinite && loss > 1000)
        #expect(gradient.scalars.allSatisfy { $0.isFinite })
    }

    @Test func marginShiftsTheTrueLogit() {
        let (batch, classes) = (3, 4)
        let logits = TestData.normal([batch, classes], seed: 13, standardDeviation: 2)
        let labels = [3, 0, 1]
        let (value, gradient) = SoftmaxCrossEntropy(labelSmoothing: 0.1, targetMargin: 1.5).lossAndGradient(
            logits: logits, labels: labels)
        // Definition: the plain loss of the logits with 1.5 taken off each true class.
        func direct(_ z: [Double]) -> Double {
            var shifted = z
            for (row, label) in labels.enumerated() { shifted[row * classes + label] -= 1.5 }
            return Self.directLoss(shifted, classes: classes, labels: labels, smoothing: 0.1, weights: [1, 1, 1, 1])
        }
        let z = logits.scalars.map(Double.init)
        #expect(abs(Double(value) - direct(z)) < 1e-6 * max(1, direct(z)))
        #expect(
            Double(value) > Self.directLoss(z, classes: classes, labels: labels, smoothing: 0.1, weights: [1, 1, 1, 1]))
        for (index, numeric) in Self.centralDifferences(z, direct).enumerated() {
            #expect(abs(Double(gradient.scalars[index]) - numeric) < 1e-5, "logit \(index)")
        }
    }
}
