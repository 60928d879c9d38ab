/// Scales each row of [N, F] to length `scale`: y = s · x / ‖x‖, the face embedding on a sphere.
///
/// Put before the classifier, it makes the logits depend on the embedding's direction only
/// (NormFace, Wang et al. 2017, arXiv:1704.06369): a stranger's face can no longer reach a high
/// probability just by producing large activations, which measurably lowers the false accept rate
/// of unseen strangers at a given user accuracy. `scale` sets how sharp the softmax can get
/// (a unit-length input would keep every probability near uniform). Exports fold `scale` into the
/// next linear layer's weights.
public struct L2Normalize: Layer {
    public let scale: Float
    private var direction = Tensor(zeros: [0])
    private var norms: [Float] = []

    public init(scale: Float) {
        self.scale = scale
    }

    public var specification: LayerSpecification { .l2Normalize(scale: scale) }
    public mutating func releaseCaches() { direction = Tensor(zeros: [0]) }

    public mutating func forward(_ input: Tensor, mode: Mode) -> Tensor {
        let (rows, features) = (input.shape[0], input.count / max(input.shape[0], 1))
        var unit = input
        var norms = [Float](repeating: 0, count: rows)
        for row in 0..<rows {
            let range = (row * features)..<((row + 1) * features)
            let norm = max(input.scalars[range].reduce(0) { $0 + $1 * $1 }.squareRoot(), 1e-6)
            norms[row] = norm
            for index in range { unit.scalars[index] /= norm }
        }
        if mode == .training {
            direction = unit
            self.norms = norms
        }
        return Tensor(shape: unit.shape, scalars: unit.scalars.map { $0 * scale })
    }

    /// dx = s · (dy − u·(u·dy)) / ‖x‖ with u = x / ‖x‖.
    public mutating func backward(_ outputGradient: Tensor) -> Tensor {
        let (rows, features) = (outputGradient.shape[0], outputGradient.count / max(outputGradient.shape[0], 1))
        var gradient = outputGradient
        for row in 0..<rows {
            let range = (row * features)..<((row + 1) * features)
            var along: Float = 0
            for index in range { along += direction.scalars[index] * outputGradient.scalars[index] }
            let factor = scale / norms[row]
            for index in range {
                gradient.scalars[index] = factor * (outputGradient.scalars[index] - direction.scalars[index] * along)
            }
        }
        return gradient
    }
}

// MARK: - The kind

extension L2Normalize {
    /// `l2Normalize` in the manifest: ONNX LpNormalization (p 2), Core ML l2normalize, both to unit
    /// length; the scale goes into the next linear layer's weights.
    package struct Kind: LayerKind {
        package let scale: Float

        package var name: LayerKindName { .l2Normalize }
        package var normalizationScale: NormalizationScaleRule { .starts }

        package func check(_ input: LayerInput) throws(LayerProblem) {
            // Per image over all features, as Core ML does; ONNX's axis 1 matches only for vectors.
            guard input.shape.count == 1 else {
                throw LayerProblem("it needs a [features] input (after a global pool) but gets \(input.shape)")
            }
            guard scale > 0, scale.isFinite else { throw LayerProblem("scale \(scale) must be positive") }
        }

        package func outputShape(for inputShape: [Int]) -> [Int] { inputShape }
        package var summary: String { "L2Normalize to length \(scale)" }
        package func makeLayer(using generator: inout SplitMix64) -> any Layer { L2Normalize(scale: scale) }
    }
}
