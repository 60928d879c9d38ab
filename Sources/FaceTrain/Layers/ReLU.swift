/// Rectified linear unit, y = max(0, x); any shape.
public struct ReLU: Layer {
    private var output = Tensor(zeros: [0])

    public init() {}

    public var specification: LayerSpecification { .relu }
    public func outputShape(for inputShape: [Int]) -> [Int] { inputShape }
    public mutating func releaseCaches() { output = Tensor(zeros: [0]) }

    public mutating func forward(_ input: Tensor, mode: Mode) -> Tensor {
        let result = Tensor(shape: input.shape, scalars: input.scalars.map { max(0, $0) })
        if mode == .training { output = result }
        return result
    }

    /// dx = dy where the output is positive, else 0 (the subgradient at 0 is taken as 0).
    public mutating func backward(_ outputGradient: Tensor) -> Tensor {
        var gradient = outputGradient
        for index in 0..<gradient.count where output.scalars[index] <= 0 { gradient.scalars[index] = 0 }
        return gradient
    }
}
