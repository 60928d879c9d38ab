/// A route (darknet's "route"): the output of the earlier layer `source`, unchanged; the layer's own
/// input is ignored. It is how a layer list branches (a head that starts again from an earlier
/// feature map); it is not a concatenation (one source only) nor an add (that is `ResidualAdd`).
///
/// The network hands it the source's output (`shortcut`) before each forward, and sends the whole
/// gradient back to `source`: dL/ds = dL/dy, which the network ADDS to what reaches `source` from
/// its own consumer; its input gets none.
public struct Route: ReadsEarlierOutput {
    /// Index of the layer whose output this one passes on.
    public let source: Int
    /// The output of `source` for the current forward pass.
    var shortcut = Tensor(zeros: [0])
    /// Shape of the ignored input, for backward's zero input gradient.
    private var inputShape: [Int] = []

    public init(source: Int) {
        self.source = source
    }

    public var specification: LayerSpecification { .route(source: source) }
    public mutating func releaseCaches() { shortcut = Tensor(zeros: [0]) }

    public mutating func forward(_ input: Tensor, mode: Mode) -> Tensor {
        precondition(!shortcut.shape.isEmpty, "Route of layer \(source): the network did not hand it the output")
        inputShape = input.shape
        return shortcut
    }

    /// Zeros for the input, which the output does not depend on (the network sends `outputGradient`
    /// to `source`).
    public mutating func backward(_ outputGradient: Tensor) -> Tensor { Tensor(zeros: inputShape) }
}

// MARK: - The kind

extension Route {
    /// `route` in the manifest (format 3): ONNX Identity and Core ML linear activation (alpha 1,
    /// beta 0), each reading the source's blob.
    package struct Kind: LayerKind {
        package let source: Int

        package var name: LayerKindName { .route }
        package var minimumFormatVersion: Int { 3 }
        package var shortcutSource: Int? { source }
        package var readsInput: Bool { false }

        package func check(_ input: LayerInput) throws(LayerProblem) {
            guard (0..<input.index).contains(source) else {
                throw LayerProblem("it routes layer \(source), which is not an earlier layer")
            }
            // After a linear layer the exports hold [N, F]; a route starts a branch of feature maps.
            guard !input.earlierFlattened[source], input.earlierShapes[source].count == 3 else {
                throw LayerProblem(
                    "it routes layer \(source)'s output of shape \(input.earlierShapes[source]), "
                        + "which is not a [C, H, W] feature map before any linear layer")
            }
        }

        /// The source's shape, which the input alone does not tell: use `outputShape(for:earlierShapes:)`.
        package func outputShape(for inputShape: [Int]) -> [Int] {
            preconditionFailure("a route's output shape is layer \(source)'s: ask with earlierShapes")
        }

        package func outputShape(for inputShape: [Int], earlierShapes: [[Int]]) -> [Int] { earlierShapes[source] }
        package var summary: String { "Route: the output of layer \(source)" }
        package var weightsFileAttributes: [WeightsFileAttribute] { [.integers("source", [source], scalar: true)] }
        package func makeLayer(using generator: inout SplitMix64) -> any Layer { Route(source: source) }
    }
}
