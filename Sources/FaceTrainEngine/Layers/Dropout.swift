/// Inverted dropout: in training each value is zeroed with probability `rate` and the rest scaled
/// by 1 / (1 - rate); inference passes values through. Any shape.
///
/// The mask comes from the layer's own `SplitMix64`, seeded by the network, whose state is part of
/// a training checkpoint (`Network.generatorStates`).
public struct Dropout: Layer {
    public let rate: Float
    public var generator: SplitMix64
    private var mask: [Float] = []

    public init(rate: Float, generator: SplitMix64) {
        self.rate = rate
        self.generator = generator
    }

    public var specification: LayerSpecification { .dropout(rate: rate) }
    public mutating func releaseCaches() { mask = [] }

    public mutating func forward(_ input: Tensor, mode: Mode) -> Tensor {
        guard mode == .training, rate > 0 else { return input }
        let keep = 1 - rate
        let scale = keep > 0 ? 1 / keep : 0
        mask = (0..<input.count).map { _ in generator.nextUniform() < keep ? scale : 0 }
        var output = input
        for index in 0..<output.count { output.scalars[index] *= mask[index] }
        return output
    }

    public mutating func backward(_ outputGradient: Tensor) -> Tensor {
        guard !mask.isEmpty else { return outputGradient }
        var gradient = outputGradient
        for index in 0..<gradient.count { gradient.scalars[index] *= mask[index] }
        return gradient
    }
}

// MARK: - The kind

extension Dropout {
    /// `dropout` in the manifest; inference passes values through, so exports leave it out.
    package struct Kind: LayerKind {
        package let rate: Float

        package var name: LayerKindName { .dropout }
        package var normalizationScale: NormalizationScaleRule { .passes }

        package func check(_ input: LayerInput) throws(LayerProblem) {
            guard (0..<1).contains(rate) else { throw LayerProblem("rate \(rate) is not in [0, 1)") }
        }

        package func outputShape(for inputShape: [Int]) -> [Int] { inputShape }
        package var summary: String { "Dropout rate \(rate)" }
        package var weightsFileAttributes: [WeightsFileAttribute] { [.floats("rate", [rate], scalar: true)] }
        package func makeLayer(using generator: inout SplitMix64) -> any Layer {
            Dropout(rate: rate, generator: generator.split())
        }
        package var isIdentityAtInference: Bool { true }
    }
}
