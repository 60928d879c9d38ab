import Foundation
import Testing

@testable import FaceTrain
@testable import FaceTrainBenchmark
@testable import FaceTrainEngine

/// The pretraining head (CosFace) and the relational distillation against double-precision
/// central differences of their definitions.
@Suite struct PretrainingLossTests {
    static func unit(_ row: ArraySlice<Double>) -> [Double] {
        let norm = row.reduce(0) { $0 + $1 * $1 }.squareRoot()
        return row.map { $0 / norm }
    }

    /// CosFace written out directly: weighted mean over rows of −log softmax(s·(cos − m·onehot)).
    static func cosFace(
        embeddings: [Double], weight: [Double], features: Int, labels: [Int], scale: Double, margin: Double,
        classWeights: [Double]
    ) -> Double {
        let classes = weight.count / features
        let rows = (0..<classes).map { unit(weight[($0 * features)..<(($0 + 1) * features)]) }
        var total = 0.0
        var weightSum = 0.0
        for (row, label) in labels.enumerated() {
            let e = unit(embeddings[(row * features)..<((row + 1) * features)])
            let logits = rows.enumerated().map { index, w in
                scale * (zip(e, w).reduce(0) { $0 + $1.0 * $1.1 } - (index == label ? margin : 0))
            }
            let normaliser = logits.map { exp($0) }.reduce(0, +)
            total += classWeights[label] * -log(exp(logits[label]) / normaliser)
            weightSum += classWeights[label]
        }
        return total / weightSum
    }

    @Test(arguments: [false, true])
    func cosineMarginGradientsMatchCentralDifferences(weighted: Bool) {
        let (batch, classes, features) = (5, 4, 6)
        var generator = SplitMix64(seed: 3)
        var head = CosineMarginSoftmax(classes: classes, features: features, scale: 8, margin: 0.3, using: &generator)
        head.weight.value = TestData.normal([classes, features], seed: 4, standardDeviation: 1)
        let embeddings = TestData.normal([batch, features], seed: 5, standardDeviation: 2)
        let labels = [0, 3, 1, 1, 2]
        let classWeights: [Float] = weighted ? [0.5, 2, 1, 3] : [1, 1, 1, 1]
        let result = head.lossAndGradient(embeddings: embeddings, labels: labels, classWeights: classWeights)
        let e = embeddings.scalars.map(Double.init)
        let w = head.weight.value.scalars.map(Double.init)
        let cw = classWeights.map(Double.init)
        let direct = Self.cosFace(
            embeddings: e, weight: w, features: features, labels: labels, scale: 8, margin: 0.3, classWeights: cw)
        #expect(abs(Double(result.loss) - direct) < 1e-5 * max(1, direct))
        let numericEmbedding = LossTests.centralDifferences(e) {
            Self.cosFace(
                embeddings: $0, weight: w, features: features, labels: labels, scale: 8, margin: 0.3, classWeights: cw)
        }
        for (analytic, numeric) in zip(result.embeddingGradient.scalars, numericEmbedding) {
            #expect(abs(Double(analytic) - numeric) < 1e-4, "dE \(analytic) vs \(numeric)")
        }
        let numericWeight = LossTests.centralDifferences(w) {
            Self.cosFace(
                embeddings: e, weight: $0, features: features, labels: labels, scale: 8, margin: 0.3, classWeights: cw)
        }
        for (analytic, numeric) in zip(head.weight.gradient.scalars, numericWeight) {
            #expect(abs(Double(analytic) - numeric) < 1e-4, "dW \(analytic) vs \(numeric)")
        }
    }

    /// A head on frozen embeddings skips dLoss/dEmbedding: its loss, accuracy and weight gradient
    /// must be exactly those of the full backward.
    @Test func cosineMarginWeightGradientAloneIsTheFullBackwardsWeightGradient() {
        let (batch, classes, features) = (37, 11, 24)
        var generator = SplitMix64(seed: 8)
        var full = CosineMarginSoftmax(classes: classes, features: features, scale: 16, margin: 0.2, using: &generator)
        var alone = full
        let embeddings = TestData.normal([batch, features], seed: 9, standardDeviation: 1)
        let labels = (0..<batch).map { ($0 * 7) % classes }
        let classWeights = (0..<classes).map { Float(1 + $0 % 3) }
        let result = full.lossAndGradient(embeddings: embeddings, labels: labels, classWeights: classWeights)
        let (loss, accuracy) = alone.lossAndWeightGradient(
            embeddings: embeddings, labels: labels, classWeights: classWeights)
        #expect(loss.bitPattern == result.loss.bitPattern && accuracy == result.accuracy)
        #expect(full.weight.gradient.scalars.map(\.bitPattern) == alone.weight.gradient.scalars.map(\.bitPattern))
        #expect(full.weight.gradient.scalars.contains { $0 != 0 })
    }

    @Test func cosineMarginHeadLearnsSeparableIdentities() {
        // Four identities around four directions: a few AdamW steps must classify them all.
        var generator = SplitMix64(seed: 9)
        var head = CosineMarginSoftmax(classes: 4, features: 4, scale: 16, margin: 0.2, using: &generator)
        var optimizer = AdamW(weightDecay: 0)
        var scalars: [Float] = []
        var labels: [Int] = []
        for sample in 0..<32 {
            let label = sample % 4
            for feature in 0..<4 {
                scalars.append((feature == label ? 1 : 0) + Float(generator.nextUniform() - 0.5) * 0.4)
            }
            labels.append(label)
        }
        let embeddings = Tensor(shape: [32, 4], scalars: scalars)
        var first: Float = 0
        var last = CosineMarginSoftmax.Result(loss: 0, accuracy: 0, embeddingGradient: embeddings)
        for step in 0..<200 {
            last = head.lossAndGradient(embeddings: embeddings, labels: labels)
            if step == 0 { first = last.loss }
            optimizer.beginStep()
            optimizer.update(key: "head", &head.weight, learningRate: 0.05)
        }
        #expect(last.loss < first / 4, "loss \(first) -> \(last.loss)")
        #expect(last.accuracy == 1)
    }

    /// Relational distillation written out: mean over ordered pairs of rows that have a teacher of
    /// (cos_student − cos_teacher)², times the weight.
    static func relational(_ embeddings: [Double], features: Int, teacher: [[Double]?], weight: Double) -> Double {
        let rows = teacher.count
        var total = 0.0
        var pairs = 0
        for i in 0..<rows {
            for j in 0..<rows where i != j {
                guard let a = teacher[i], let b = teacher[j] else { continue }
                let u = unit(embeddings[(i * features)..<((i + 1) * features)])
                let v = unit(embeddings[(j * features)..<((j + 1) * features)])
                let student = zip(u, v).reduce(0) { $0 + $1.0 * $1.1 }
                let target = zip(a, b).reduce(0) { $0 + $1.0 * $1.1 }
                total += (student - target) * (student - target)
                pairs += 1
            }
        }
        return weight * total / Double(max(pairs, 1))
    }

    @Test func relationalDistillationGradientMatchesCentralDifferences() {
        let (batch, features) = (5, 4)
        let embeddings = TestData.normal([batch, features], seed: 11, standardDeviation: 1.5)
        let raw = TestData.normal([batch, 3], seed: 12, standardDeviation: 1).scalars
        var teacher: [[Float]?] = (0..<batch).map { row in
            let vector = Array(raw[(row * 3)..<((row + 1) * 3)])
            let norm = vector.reduce(0) { $0 + $1 * $1 }.squareRoot()
            return vector.map { $0 / norm }
        }
        teacher[2] = nil  // a crop without a teacher descriptor takes no part
        let (loss, gradient) = TeacherDescriptors.relationalLoss(embeddings: embeddings, teacher: teacher, weight: 3)
        let t = teacher.map { $0?.map(Double.init) }
        let e = embeddings.scalars.map(Double.init)
        let direct = Self.relational(e, features: features, teacher: t, weight: 3)
        #expect(abs(Double(loss) - direct) < 1e-5 * max(1, direct))
        let numeric = LossTests.centralDifferences(e) { Self.relational($0, features: features, teacher: t, weight: 3) }
        for (analytic, expected) in zip(gradient.scalars, numeric) {
            #expect(abs(Double(analytic) - expected) < 1e-4, "\(analytic) vs \(expected)")
        }
        #expect(gradient.scalars[(2 * features)..<(3 * features)].allSatisfy { $0 == 0 })
    }

    /// Feature distillation written out: mean over rows with a teacher of weight·(1 − cos(P·e, t)).
    static func feature(
        _ embeddings: [Double], projection: [Double], features: Int, targets: Int, teacher: [[Double]?],
        weight: Double
    ) -> Double {
        var total = 0.0
        var count = 0.0
        for (row, target) in teacher.enumerated() {
            guard let target else { continue }
            let e = embeddings[(row * features)..<((row + 1) * features)]
            let y = (0..<targets).map { o in
                zip(projection[(o * features)..<((o + 1) * features)], e).reduce(0) { $0 + $1.0 * $1.1 }
            }
            let length = y.reduce(0) { $0 + $1 * $1 }.squareRoot()
            let cosine = zip(y, target).reduce(0) { $0 + $1.0 * $1.1 } / length
            total += weight * (1 - cosine)
            count += 1
        }
        return total / max(count, 1)
    }

    @Test func featureDistillationGradientsMatchCentralDifferences() {
        let (batch, features, targets) = (5, 4, 3)
        let embeddings = TestData.normal([batch, features], seed: 21, standardDeviation: 1.5)
        let projection = TestData.normal([targets, features], seed: 22, standardDeviation: 0.7)
        let raw = TestData.normal([batch, targets], seed: 23, standardDeviation: 1).scalars
        var rows: [[Float]?] = (0..<batch).map { Array(raw[($0 * targets)..<(($0 + 1) * targets)]) }
        rows[1] = nil  // a crop without a teacher descriptor takes no part
        let teacher = TeacherDescriptors.centredUnitRows(rows)
        let result = TeacherDescriptors.featureLoss(
            embeddings: embeddings, teacher: teacher, projection: projection, weight: 2)
        let t = teacher.map { $0?.map(Double.init) }
        let e = embeddings.scalars.map(Double.init)
        let p = projection.scalars.map(Double.init)
        let direct = Self.feature(e, projection: p, features: features, targets: targets, teacher: t, weight: 2)
        #expect(abs(Double(result.loss) - direct) < 1e-5 * max(1, direct))
        let numericE = LossTests.centralDifferences(e) {
            Self.feature($0, projection: p, features: features, targets: targets, teacher: t, weight: 2)
        }
        for (analytic, expected) in zip(result.embeddingGradient.scalars, numericE) {
            #expect(abs(Double(analytic) - expected) < 1e-4, "dE \(analytic) vs \(expected)")
        }
        let numericP = LossTests.centralDifferences(p) {
            Self.feature(e, projection: $0, features: features, targets: targets, teacher: t, weight: 2)
        }
        for (analytic, expected) in zip(result.projectionGradient.scalars, numericP) {
            #expect(abs(Double(analytic) - expected) < 1e-4, "dP \(analytic) vs \(expected)")
        }
        #expect(result.embeddingGradient.scalars[features..<(2 * features)].allSatisfy { $0 == 0 })
        #expect(result.projectionGradient.scalars.contains { $0 != 0 })
    }

    /// Centring uses only the rows given (the training crops) and leaves them unit length; the
    /// narrow cone of raw descriptors (all near one direction) opens up.
    @Test func teacherRowsAreCentredOnTheirOwnMeanAndUnitLength() {
        var generator = SplitMix64(seed: 3)
        let offset: [Float] = [5, 5, 5, 5]
        let rows: [[Float]?] =
            (0..<40).map { _ in
                offset.map { $0 + Float(Double(generator.next() % 1000) / 1000 - 0.5) }
            } + [nil]
        let centred = TeacherDescriptors.centredUnitRows(rows)
        #expect(centred.last! == nil)
        let present = centred.compactMap { $0 }
        for row in present { #expect(abs(row.reduce(0) { $0 + $1 * $1 } - 1) < 1e-5) }
        func meanCosine(_ vectors: [[Float]]) -> Float {
            let units = vectors.map { ModelEvaluation.unitLength($0) }
            var total: Float = 0
            for i in 0..<units.count {
                for j in 0..<units.count where j != i {
                    total += zip(units[i], units[j]).reduce(0) { $0 + $1.0 * $1.1 }
                }
            }
            return total / Float(units.count * (units.count - 1))
        }
        #expect(meanCosine(rows.compactMap { $0 }) > 0.95)
        #expect(abs(meanCosine(present)) < 0.1)
    }

    @Test func verificationOfSeparatedAndOfRandomEmbeddings() {
        // 20 identities x 4 crops: one direction per identity (plus noise) verifies almost
        // perfectly; embeddings unrelated to identity verify at chance.
        var generator = SplitMix64(seed: 5)
        var separated: [[Float]] = []
        var random: [[Float]] = []
        var identities: [Int] = []
        for identity in 0..<20 {
            for _ in 0..<4 {
                separated.append((0..<32).map { ($0 == identity ? 4 : 0) + Float(generator.nextUniform() - 0.5) })
                random.append((0..<32).map { _ in Float(generator.nextUniform() - 0.5) })
                identities.append(identity)
            }
        }
        let good = VerificationMetrics.measure(embeddings: separated, identities: identities)
        let chance = VerificationMetrics.measure(embeddings: random, identities: identities)
        #expect(good.pairAccuracy > 0.99)
        #expect(good.trueAcceptAt1e2 > 0.99)
        #expect(good.genuinePairs == 20 * 6)
        #expect(good.impostorPairs == 80 * 79 / 2 - 120)
        #expect(good.pairs == 6000)
        #expect(abs(chance.pairAccuracy - 0.5) < 0.06, "chance accuracy \(chance.pairAccuracy)")
        #expect(chance.trueAcceptAt1e3 < 0.05)
    }
}
