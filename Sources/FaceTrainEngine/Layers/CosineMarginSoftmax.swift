import Foundation

/// The pretraining head: a softmax over identities of scaled cosines, with an additive margin on
/// the true identity (CosFace, Wang et al. 2018), fused with its cross-entropy.
///
/// logits = s·(cos θ − m·onehot), cos θ = (e/‖e‖)·(w_c/‖w_c‖). Both the embedding and the class
/// rows are normalised, so only directions are learnt: what an open-set comparison of faces by
/// cosine needs. The weight [classes, features] lives here, not in a `Network`: it is thrown away
/// after pretraining and never exported.
public struct CosineMarginSoftmax: Sendable {
    public var weight: Parameter
    public let scale: Float
    public let margin: Float
    public var classes: Int { weight.value.shape[0] }
    public var features: Int { weight.value.shape[1] }

    /// Class rows drawn from N(0, 0.01²): their length does not matter, only their direction.
    public init(classes: Int, features: Int, scale: Float = 30, margin: Float = 0.35, using generator: inout SplitMix64)
    {
        weight = Parameter(
            name: "weight",
            value: Tensor(randomNormal: [classes, features], standardDeviation: 0.01, using: &generator))
        self.scale = scale
        self.margin = margin
    }

    /// What one batch gave: mean loss, share whose nearest class row is the label (without the
    /// margin), and dLoss/dEmbedding. The weight's gradient is SET.
    public struct Result: Sendable {
        public var loss: Float
        public var accuracy: Float
        public var embeddingGradient: Tensor
    }

    /// With `classWeights`, each crop's loss counts by its class's weight (a weighted mean, as
    /// PyTorch's `cross_entropy(weight:)`), so small classes are not drowned by large ones.
    public mutating func lossAndGradient(embeddings: Tensor, labels: [Int], classWeights: [Float]? = nil) -> Result {
        let (loss, accuracy, gradient) = computeLossAndGradients(
            embeddings: embeddings, labels: labels, classWeights: classWeights, throughEmbeddings: true)
        return Result(loss: loss, accuracy: accuracy, embeddingGradient: gradient!)
    }

    /// `lossAndGradient` for frozen embeddings (a head trained on an extractor's fixed output):
    /// the same loss, accuracy and weight gradient, without the product and normalisation backward
    /// that only dLoss/dEmbedding needs (a third of the head's arithmetic).
    public mutating func lossAndWeightGradient(embeddings: Tensor, labels: [Int], classWeights: [Float]? = nil)
        -> (loss: Float, accuracy: Float)
    {
        let (loss, accuracy, _) = computeLossAndGradients(
            embeddings: embeddings, labels: labels, classWeights: classWeights, throughEmbeddings: false)
        return (loss, accuracy)
    }

    private mutating func computeLossAndGradients(
        embeddings: Tensor, labels: [Int], classWeights: [Float]?, throughEmbeddings: Bool
    ) -> (loss: Float, accuracy: Float, embeddingGradient: Tensor?) {
        let batch = labels.count
        let rowWeights = labels.map { classWeights?[$0] ?? 1 }
        let totalWeight = max(rowWeights.reduce(0, +), 1e-12)
        let (n, d) = (classes, features)
        precondition(embeddings.shape == [batch, d], "embeddings \(embeddings.shape) for [\(batch), \(d)]")
        let (unitEmbeddings, embeddingNorms) = Self.normalizeRows(embeddings.scalars, rows: batch, columns: d)
        let (unitWeights, weightNorms) = Self.normalizeRows(weight.value.scalars, rows: n, columns: d)
        var cosines = [Float](repeating: 0, count: batch * n)
        var rowLoss = [Float](repeating: 0, count: batch)
        var rowCorrect = [Bool](repeating: false, count: batch)
        let ranges = Parallel.ranges(batch, parts: Parallel.chunkCount)
        // Rows of the batch are independent: each range computes its cosines, softmax and
        // dLoss/dcos in place of the cosines.
        unitEmbeddings.withUnsafeBufferPointer { e in
            unitWeights.withUnsafeBufferPointer { w in
                cosines.withUnsafeMutableBufferPointer { c in
                    rowLoss.withUnsafeMutableBufferPointer { lossOut in
                        rowCorrect.withUnsafeMutableBufferPointer { correctOut in
                            let (eBase, wBase, cBase) = (e.baseAddress!, w.baseAddress!, c.baseAddress!)
                            let (lossBase, correctBase) = (lossOut.baseAddress!, correctOut.baseAddress!)
                            Parallel.forEach(ranges.count) { part in
                                let range = ranges[part]
                                guard !range.isEmpty else { return }
                                gemm(
                                    transposeA: false, transposeB: true, m: range.count, n: n, k: d,
                                    a: eBase + range.lowerBound * d, b: wBase, c: cBase + range.lowerBound * n)
                                for row in range {
                                    let label = labels[row]
                                    let line = cBase + row * n
                                    var best = 0
                                    for index in 1..<n where line[index] > line[best] { best = index }
                                    correctBase[row] = best == label
                                    var maximum = -Float.infinity
                                    for index in 0..<n {
                                        let logit = scale * (line[index] - (index == label ? margin : 0))
                                        line[index] = logit
                                        maximum = max(maximum, logit)
                                    }
                                    var total: Float = 0
                                    for index in 0..<n {
                                        line[index] = expf(line[index] - maximum)
                                        total += line[index]
                                    }
                                    lossBase[row] = -logf(max(line[label] / total, 1e-30))
                                    // dLoss/dcos = s·(p − onehot)·wᵢ/Σw
                                    let share = rowWeights[row] / totalWeight
                                    let factor = scale * share / total
                                    for index in 0..<n { line[index] *= factor }
                                    line[label] -= scale * share
                                }
                            }
                        }
                    }
                }
            }
        }
        // dLoss/d(unit embedding) = dcos·Ŵ; dLoss/d(unit row) = dcosᵀ·Ê; then through each normalisation.
        var unitEmbeddingGradient = [Float](repeating: 0, count: throughEmbeddings ? batch * d : 0)
        var unitWeightGradient = [Float](repeating: 0, count: n * d)
        let classRanges = Parallel.ranges(n, parts: Parallel.chunkCount)
        let embeddingRanges = throughEmbeddings ? ranges : []
        cosines.withUnsafeBufferPointer { g in
            unitWeights.withUnsafeBufferPointer { w in
                unitEmbeddings.withUnsafeBufferPointer { e in
                    unitEmbeddingGradient.withUnsafeMutableBufferPointer { de in
                        unitWeightGradient.withUnsafeMutableBufferPointer { dw in
                            let (gBase, wBase, eBase) = (g.baseAddress!, w.baseAddress!, e.baseAddress!)
                            let (deBase, dwBase) = (de.baseAddress, dw.baseAddress!)
                            Parallel.forEach(embeddingRanges.count + classRanges.count) { part in
                                if part < embeddingRanges.count {
                                    let range = embeddingRanges[part]
                                    guard !range.isEmpty, let deBase else { return }
                                    gemm(
                                        transposeA: false, transposeB: false, m: range.count, n: d, k: n,
                                        a: gBase + range.lowerBound * n, b: wBase, c: deBase + range.lowerBound * d)
                                } else {
                                    // Rows c of dŴ = Σ_rows g[row, c]·ê[row]: a slice of gᵀ·Ê.
                                    let range = classRanges[part - embeddingRanges.count]
                                    guard !range.isEmpty else { return }
                                    weightGradientSlice(
                                        gradient: gBase, embeddings: eBase, batch: batch, classes: n, features: d,
                                        range: range, into: dwBase)
                                }
                            }
                        }
                    }
                }
            }
        }
        let embeddingGradient =
            throughEmbeddings
            ? Tensor(
                shape: [batch, d],
                scalars: Self.backwardNormalize(
                    unitGradient: unitEmbeddingGradient, unit: unitEmbeddings, norms: embeddingNorms, columns: d))
            : nil
        weight.gradient = Tensor(
            shape: [n, d],
            scalars: Self.backwardNormalize(
                unitGradient: unitWeightGradient, unit: unitWeights, norms: weightNorms, columns: d))
        let loss = zip(rowLoss, rowWeights).reduce(0) { $0 + $1.0 * $1.1 } / totalWeight
        let accuracy = Float(rowCorrect.filter { $0 }.count) / Float(max(batch, 1))
        return (loss, accuracy, embeddingGradient)
    }

    /// dŴ[range] = gᵀ[range, :]·Ê, with g [batch, classes] and Ê [batch, features].
    private func weightGradientSlice(
        gradient: UnsafePointer<Float>, embeddings: UnsafePointer<Float>, batch: Int, classes: Int, features: Int,
        range: Range<Int>, into output: UnsafeMutablePointer<Float>
    ) {
        // A column slice of g is not contiguous: gather it so the product is one plain GEMM.
        var slice = [Float](repeating: 0, count: batch * range.count)
        for row in 0..<batch {
            for (column, index) in range.enumerated() {
                slice[row * range.count + column] = gradient[row * classes + index]
            }
        }
        slice.withUnsafeBufferPointer { s in
            gemm(
                transposeA: true, transposeB: false, m: range.count, n: features, k: batch, a: s.baseAddress!,
                b: embeddings, c: output + range.lowerBound * features)
        }
    }

    /// Each row divided by its length (rows of zeros stay zero); also returns the lengths.
    package static func normalizeRows(_ values: [Float], rows: Int, columns: Int) -> (unit: [Float], norms: [Float]) {
        var unit = values
        var norms = [Float](repeating: 0, count: rows)
        for row in 0..<rows {
            var total: Float = 0
            for column in 0..<columns { total += values[row * columns + column] * values[row * columns + column] }
            let norm = max(total.squareRoot(), 1e-12)
            norms[row] = norm
            for column in 0..<columns { unit[row * columns + column] /= norm }
        }
        return (unit, norms)
    }

    /// Through x̂ = x/‖x‖: dx = (dx̂ − x̂·(x̂·dx̂)) / ‖x‖, row by row.
    package static func backwardNormalize(unitGradient: [Float], unit: [Float], norms: [Float], columns: Int) -> [Float]
    {
        var result = unitGradient
        for row in 0..<norms.count {
            var projection: Float = 0
            for column in 0..<columns {
                projection += unit[row * columns + column] * unitGradient[row * columns + column]
            }
            for column in 0..<columns {
                let index = row * columns + column
                result[index] = (unitGradient[index] - unit[index] * projection) / norms[row]
            }
        }
        return result
    }

    /// Cosine similarity of every embedding row with every class row, without margin: [rows, classes].
    public func cosines(_ embeddings: Tensor) -> Tensor {
        let (unitWeights, _) = Self.normalizeRows(weight.value.scalars, rows: classes, columns: features)
        return Self.cosines(embeddings, unitRows: Tensor(shape: [classes, features], scalars: unitWeights))
    }

    /// Cosines of embedding rows [rows, features] with class rows already at unit length: one GEMM.
    public static func cosines(_ embeddings: Tensor, unitRows: Tensor) -> Tensor {
        let (rows, classes, features) = (embeddings.shape[0], unitRows.shape[0], unitRows.shape[1])
        let (unitEmbeddings, _) = normalizeRows(embeddings.scalars, rows: rows, columns: features)
        let unitWeights = unitRows.scalars
        var result = Tensor(zeros: [rows, classes])
        unitEmbeddings.withUnsafeBufferPointer { e in
            unitWeights.withUnsafeBufferPointer { w in
                result.scalars.withUnsafeMutableBufferPointer { c in
                    gemm(
                        transposeA: false, transposeB: true, m: rows, n: classes, k: features, a: e.baseAddress!,
                        b: w.baseAddress!, c: c.baseAddress!)
                }
            }
        }
        return result
    }
}
