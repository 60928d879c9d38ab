/// A residual connection: y = x + s, where x is the layer's input and s the output of the earlier
/// layer `source`; any shape, the two equal. (darknet's "shortcut" layer.)
///
/// The network hands it `s` (`shortcut`) before each forward, and routes the gradient back to
/// `source` too: dL/dx = dL/ds = dL/dy, which the network ADDS to what reaches `source` from its
/// own consumer.
public struct ResidualAdd: ReadsEarlierOutput {
    /// Index of the layer whose output is added.
    public let source: Int
    /// The output of `source` for the current forward pass.
    var shortcut = Tensor(zeros: [0])

    public init(source: Int) {
        self.source = source
    }

    public var specification: LayerSpecification { .add(source: source) }
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

// MARK: - The kind

extension ResidualAdd {
    /// `add` in the manifest (format 2): ONNX Add and Core ML add, each with two blob inputs.
    package struct Kind: LayerKind {
        package let source: Int

        package var name: LayerKindName { .add }
        package var minimumFormatVersion: Int { 2 }
        package var shortcutSource: Int? { source }

        package func check(_ input: LayerInput) throws(LayerProblem) {
            guard (0..<input.index).contains(source) else {
                throw LayerProblem("it adds layer \(source), which is not an earlier layer")
            }
            let shortcut = input.earlierShapes[source]
            guard shortcut == input.shape, input.earlierFlattened[source] == input.isFlattened else {
                // Equal shapes across a linear layer differ in the exports: [N, C, 1, 1] against [N, F].
                let across = shortcut == input.shape ? " across a linear layer" : ""
                throw LayerProblem(
                    "it adds layer \(source)'s output of shape \(shortcut) to an input of shape "
                        + "\(input.shape)\(across)")
            }
        }

        package func outputShape(for inputShape: [Int]) -> [Int] { inputShape }
        package var summary: String { "Add the output of layer \(source)" }
        package var weightsFileAttributes: [WeightsFileAttribute] { [.integers("source", [source], scalar: true)] }
        package func makeLayer(using generator: inout SplitMix64) -> any Layer { ResidualAdd(source: source) }
    }
}
