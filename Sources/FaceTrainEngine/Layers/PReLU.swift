/// Parametric ReLU (He et al. 2015, arXiv:1502.01852), as in MobileFaceNet: y = x where x > 0,
/// else a[c]·x, with one learnt slope per channel. Shapes: [N, C, H, W] or [N, C]; slopes [C],
/// initialised to 0.25. Not weight-decayed (a rank-1 parameter, like batch-norm scales).
public struct PReLU: Layer {
    public let channels: Int
    /// The slopes a[c] of the negative side.
    public var weight: Parameter
    private var input = Tensor(zeros: [0])

    public init(channels: Int) {
        self.channels = channels
        weight = Parameter(name: "weight", value: Tensor(repeating: 0.25, shape: [channels]))
    }

    public var specification: LayerSpecification { .prelu(channels: channels) }
    public var parameters: [Parameter] { [weight] }
    public mutating func updateParameters(_ update: (inout Parameter) -> Void) { update(&weight) }
    public mutating func releaseCaches() { input = Tensor(zeros: [0]) }

    public mutating func forward(_ input: Tensor, mode: Mode) -> Tensor {
        precondition(
            (input.shape.count == 4 || input.shape.count == 2) && input.shape[1] == channels,
            "PReLU expects [N, \(channels), H, W] or [N, \(channels)], got \(input.shape)")
        if mode == .training { self.input = input }
        let (batch, pixels) = (input.shape[0], input.count / max(input.shape[0] * channels, 1))
        let slopes = weight.value.scalars
        return input.scalars.withUnsafeBufferPointer { x in
            Tensor(shape: input.shape) { y in
                Parallel.forEach(batch) { image in
                    for channel in 0..<channels {
                        let (offset, a) = ((image * channels + channel) * pixels, slopes[channel])
                        for index in offset..<(offset + pixels) { y[index] = x[index] > 0 ? x[index] : a * x[index] }
                    }
                }
            }
        }
    }

    /// dx = dy where x > 0, else a[c]·dy; da[c] += Σ dy·x over the x ≤ 0 of channel c.
    public mutating func backward(_ outputGradient: Tensor) -> Tensor {
        let (batch, pixels) = (input.shape[0], input.count / max(input.shape[0] * channels, 1))
        let slopes = weight.value.scalars
        var inputGradient = outputGradient
        for image in 0..<batch {
            for channel in 0..<channels {
                let offset = (image * channels + channel) * pixels
                var slopeGradient: Float = 0
                for index in offset..<(offset + pixels) where input.scalars[index] <= 0 {
                    slopeGradient += outputGradient.scalars[index] * input.scalars[index]
                    inputGradient.scalars[index] = slopes[channel] * outputGradient.scalars[index]
                }
                weight.gradient.scalars[channel] += slopeGradient
            }
        }
        return inputGradient
    }
}

// MARK: - The kind

extension PReLU {
    /// `prelu` in the manifest (format 2): ONNX PRelu, Core ML activation PReLU.
    package struct Kind: LayerKind {
        package let channels: Int

        package var name: LayerKindName { .prelu }
        package var minimumFormatVersion: Int { 2 }
        package var parameterShapes: [(name: String, shape: [Int])] { [("weight", [channels])] }

        package func check(_ input: LayerInput) throws(LayerProblem) {
            guard input.shape.count == 3 || input.shape.count == 1 else {
                throw LayerProblem("it needs a [C, H, W] or [features] input but gets \(input.shape)")
            }
            guard channels == input.shape[0] else {
                throw LayerProblem("it has \(channels) slopes but gets \(input.shape[0]) channels")
            }
        }

        package func outputShape(for inputShape: [Int]) -> [Int] { inputShape }
        package var summary: String { "PReLU \(channels) channels" }
        package var weightsFileAttributes: [WeightsFileAttribute] { [.integers("channels", [channels], scalar: true)] }
        package func makeLayer(using generator: inout SplitMix64) -> any Layer { PReLU(channels: channels) }
    }
}
