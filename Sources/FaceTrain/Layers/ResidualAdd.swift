/// A residual connection: y = x + s, where x is the layer's input and s the output of the earlier
/// layer `source`; any shape, the two equal. (darknet's "shortcut" layer.)
///
/// The network hands it `s` (`shortcut`) before each forward, and routes the gradient back to
/// `source` too: dL/dx = dL/ds = dL/dy, which the network ADDS to what reaches `source` from its
/// own consumer.
public struct ResidualAdd: Layer {
    /// Index of the layer whose output is added.
    public let source: Int
    /// The output of `source` for the current forward pass.
    var shortcut = Tensor(zeros: [0])

    public init(source: Int) {
        self.source = source
    }

    public var specification: LayerSpecification { .add(source: source) }
    public func outputShape(for inputShape: [Int]) -> [Int] { inputShape }
    public mutating func releaseCaches() { shortcut = Tensor(zeros: [0]) }

    public mutating func forward(_ input: Tensor, mode: Mode) -> Tensor {
        precondition(
            shortcut.shape == input.shape, "ResidualAdd of layer \(source): shapes \(input.shape) and \(shortcut.shape)"
        )
        var output = input
        output.scalars.withUnsafeMutableBufferPointer { y in
            shortcut.scalars.withUnsafeBufferPointer { s in
                addInPlace(y.baseAddress!, s.baseAddress!, count: y.count)
            }
        }
        return output
    }

    /// The gradient passes unchanged to the input (and, through the network, to `source`).
    public mutating func backward(_ outputGradient: Tensor) -> Tensor { outputGradient }
}
