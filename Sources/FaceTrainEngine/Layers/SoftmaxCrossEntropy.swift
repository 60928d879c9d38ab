import Foundation

/// Softmax followed by cross-entropy, fused: returns the loss and dLoss/dLogits in one pass.
///
/// With ε = `labelSmoothing`, C classes, class weights w (all 1 when nil) and p = softmax(z):
/// the target of sample i is qᵢ = (1 - ε)·onehot(yᵢ) + ε/C, each class term is weighted by w_c,
/// and the mean is taken over Σᵢ w_{yᵢ} — PyTorch's `cross_entropy(weight:, label_smoothing:)`:
///   loss = Σᵢ Σ_c w_c·qᵢ_c·(-log pᵢ_c) / Σᵢ w_{yᵢ}.
/// The gradient is dL/dzᵢ_j = (pᵢ_j·Σ_c w_c·qᵢ_c - w_j·qᵢ_j) / Σᵢ w_{yᵢ}: the sign of the true
/// derivative (gradient descent subtracts it); with no weights or smoothing, (p - onehot)/N.
///
/// With a `targetMargin` m, the true class's logit enters the loss as z_y − m (an additive margin as
/// in CosFace, Wang et al. 2018, arXiv:1801.09414): a crop counts as learnt only when its own class
/// wins by m, which pulls each person's embeddings together and leaves more room for strangers. The
/// gradient formula is unchanged (the shift is constant), evaluated at the shifted logits.
public struct SoftmaxCrossEntropy: Sendable, Equatable {
    public var labelSmoothing: Float
    /// One weight per class, or nil for equal weights.
    public var classWeights: [Float]?
    /// Subtracted from the true class's logit during training; 0 for plain cross-entropy.
    public var targetMargin: Float

    public init(labelSmoothing: Float = 0, classWeights: [Float]? = nil, targetMargin: Float = 0) {
        self.labelSmoothing = labelSmoothing
        self.classWeights = classWeights
        self.targetMargin = targetMargin
    }

    /// Loss over the batch and its gradient with respect to `logits` [N, C]; labels in 0..<C.
    public func lossAndGradient(logits: Tensor, labels: [Int]) -> (loss: Float, logitsGradient: Tensor) {
        let (batch, classes) = (logits.shape[0], logits.count / max(logits.shape[0], 1))
        precondition(
            labels.count == batch && labels.allSatisfy { (0..<classes).contains($0) },
            "labels must be \(batch) values in 0..<\(classes)")
        let weights = classWeights ?? [Float](repeating: 1, count: classes)
        let epsilon = Double(labelSmoothing)
        var gradient = Tensor(zeros: logits.shape)
        var totalLoss: Double = 0
        var totalWeight: Double = 0
        for sample in 0..<batch {
            var row = logits.scalars[(sample * classes)..<((sample + 1) * classes)].map(Double.init)
            row[labels[sample]] -= Double(targetMargin)
            let maximum = row.max() ?? 0
            let logSum = log(row.reduce(0) { $0 + exp($1 - maximum) }) + maximum
            var targetMass: Double = 0
            for c in 0..<classes {
                let q = (c == labels[sample] ? 1 - epsilon : 0) + epsilon / Double(classes)
                let a = Double(weights[c]) * q
                totalLoss += a * (logSum - row[c])
                targetMass += a
                gradient.scalars[sample * classes + c] = Float(-a)
            }
            for c in 0..<classes {
                gradient.scalars[sample * classes + c] += Float(exp(row[c] - logSum) * targetMass)
            }
            totalWeight += Double(weights[labels[sample]])
        }
        let normaliser = totalWeight > 0 ? totalWeight : 1
        for index in 0..<gradient.count {
            gradient.scalars[index] = Float(Double(gradient.scalars[index]) / normaliser)
        }
        return (Float(totalLoss / normaliser), gradient)
    }
}
