/// Whether a forward pass is training (batch statistics, dropout, caches for backward) or inference.
public enum Mode: Sendable { case training, inference }

/// A tensor a layer saves, and the gradient that its last `backward` computed for it.
public struct Parameter: Sendable, Equatable {
    /// "weight", "bias", "running_mean" or "running_var" (see `LayerSpecification.parameterShapes`).
    public let name: String
    /// False for batch-norm running statistics: saved and exported, never touched by optimizers.
    public let isTrainable: Bool
    public var value: Tensor
    /// Same shape as `value`; what `backward` passes have added since the last zeroing (always
    /// zeros when not trainable).
    public var gradient: Tensor

    /// A parameter with a zero gradient.
    public init(name: String, value: Tensor, isTrainable: Bool = true) {
        self.name = name
        self.isTrainable = isTrainable
        self.value = value
        self.gradient = Tensor(zeros: value.shape)
    }

    /// Whether optimizers apply weight decay: weight matrices and kernels (rank ≥ 2), not biases
    /// or batch-norm scales, whose decay only fights the normalisation.
    public var decays: Bool { isTrainable && value.shape.count >= 2 }
}

/// One step of a network.
///
/// `forward` keeps what `backward` needs; `backward` takes dLoss/dOutput, ADDS this batch's
/// gradient to every parameter's `gradient` and returns dLoss/dInput. Adding lets one parameter
/// collect gradient from several uses or batches; trainers zero the gradients before each
/// backward (`Network.zeroGradients()`).
public protocol Layer: Sendable, CustomStringConvertible {
    /// The manifest form of this layer.
    var specification: LayerSpecification { get }
    mutating func forward(_ input: Tensor, mode: Mode) -> Tensor
    mutating func backward(_ outputGradient: Tensor) -> Tensor
    /// Every saved tensor in file order (`LayerSpecification.parameterShapes`).
    var parameters: [Parameter] { get }
    /// Lets optimizers and loaders change each parameter in place, in file order.
    mutating func updateParameters(_ update: (inout Parameter) -> Void)
    /// Drops what `forward` kept for `backward`, so the next forward can reuse buffers in place.
    mutating func releaseCaches()
}

extension Layer {
    public var parameters: [Parameter] { [] }
    public mutating func updateParameters(_ update: (inout Parameter) -> Void) {}
    public mutating func releaseCaches() {}
    public var description: String { specification.kind.rawValue }

    /// Output shape for an input shape (batch first), from the layer's kind.
    public func outputShape(for inputShape: [Int]) -> [Int] {
        [inputShape[0]] + specification.layerKind.outputShape(for: Array(inputShape.dropFirst()))
    }
}

/// A layer whose saved tensors are a weight and a bias, in that order (convolution, linear).
protocol WeightAndBiasLayer: Layer {
    var weight: Parameter { get set }
    var bias: Parameter { get set }
}

extension WeightAndBiasLayer {
    public var parameters: [Parameter] { [weight, bias] }

    public mutating func updateParameters(_ update: (inout Parameter) -> Void) {
        update(&weight)
        update(&bias)
    }
}

/// A layer that reads the output of an earlier layer (`ResidualAdd`, `Route`): the network hands
/// it that output before each forward, and sends the gradient back to that layer too.
protocol ReadsEarlierOutput: Layer {
    /// The output of the earlier layer for the current forward pass.
    var shortcut: Tensor { get set }
}

/// Stands in for a layer while the network works on it directly; never runs.
struct Placeholder: Layer {
    var specification: LayerSpecification { .relu }
    mutating func forward(_ input: Tensor, mode: Mode) -> Tensor { input }
    mutating func backward(_ outputGradient: Tensor) -> Tensor { outputGradient }
}
