/// Everything the engine knows about one kind of layer, beside its forward and backward: what the
/// network, the validator, the FLOP count, weights.h5 and the manifest read. How a kind is
/// exported is not here: Export/ONNXLowering.swift and Export/CoreMLLowering.swift map each kind to
/// ONNX and Core ML.
///
/// Each layer file defines its kind next to the layer (`Conv2D.Kind`, …), and
/// `LayerSpecification.layerKind` maps the manifest's cases to them. Shapes leave the batch out:
/// [C, H, W] for feature maps, [F] for feature vectors (after a global pool or a linear layer).
package protocol LayerKind: Sendable {
    /// Which kind this is; its raw value names it in parameter keys ("0.conv2d.weight") and weights.h5.
    var name: LayerKindName { get }
    /// The oldest manifest format that can describe this layer (see `Manifest.currentFormatVersion`).
    var minimumFormatVersion: Int { get }
    /// Names and shapes of the saved tensors, in file order.
    var parameterShapes: [(name: String, shape: [Int])] { get }
    /// The earlier layer whose output this one reads besides its input (a residual add) or instead
    /// of it (a route), if any.
    var shortcutSource: Int? { get }
    /// Whether the layer reads its input; false for a route, whose output is an earlier layer's.
    var readsInput: Bool { get }
    /// How many times smaller its output's height and width are than its input's (a convolution's
    /// or pool's stride; 1 for layers that keep the size).
    var spatialStride: Int { get }
    /// How many times larger its output's height and width are than its input's (an upsample's factor).
    var upsamplingFactor: Int { get }
    /// Whether the layer reads its input as one feature vector: exports flatten a feature map first.
    var flattensInput: Bool { get }
    /// What the layer does with the length an earlier `l2Normalize` left for the next linear layer.
    var normalizationScale: NormalizationScaleRule { get }

    /// Throws when the layer cannot take `input`; the reason completes "layer 3 (conv2d) …: ".
    func check(_ input: LayerInput) throws(LayerProblem)
    /// The output shape for an input shape that passed `check`.
    func outputShape(for inputShape: [Int]) -> [Int]
    /// The output shape given the earlier layers' output shapes too: what the validator and the
    /// network call. Only a route, whose output is an earlier layer's, needs more than the input.
    func outputShape(for inputShape: [Int], earlierShapes: [[Int]]) -> [Int]
    /// Multiply-adds × 2 of one image's forward pass.
    func forwardFLOPs(inputShape: [Int], outputShape: [Int]) -> Double
    /// One readable line for the manifest ("Conv2D 3->16, kernel 3x3, stride 1, padding 1").
    var summary: String { get }
    /// Attributes of the layer's weights.h5 group after its "type", in file order.
    var weightsFileAttributes: [WeightsFileAttribute] { get }
    /// A freshly initialised layer; draws from `generator` in layer order.
    func makeLayer(using generator: inout SplitMix64) -> any Layer
    /// Whether inference passes the input through unchanged (dropout): exports leave it out.
    var isIdentityAtInference: Bool { get }
}

extension LayerKind {
    package var minimumFormatVersion: Int { 1 }
    package var parameterShapes: [(name: String, shape: [Int])] { [] }
    package var shortcutSource: Int? { nil }
    package var readsInput: Bool { true }
    package var spatialStride: Int { 1 }
    package var upsamplingFactor: Int { 1 }
    package func outputShape(for inputShape: [Int], earlierShapes: [[Int]]) -> [Int] { outputShape(for: inputShape) }
    package var flattensInput: Bool { false }
    package var normalizationScale: NormalizationScaleRule { .refuses }
    package var isIdentityAtInference: Bool { false }
    package func forwardFLOPs(inputShape: [Int], outputShape: [Int]) -> Double { 0 }
    package var weightsFileAttributes: [WeightsFileAttribute] { [] }
}

/// The data flowing into a layer, as the validator sees it.
package struct LayerInput: Sendable {
    /// Position of the layer in the definition.
    var index: Int
    /// Shape of the input, batch left out.
    package var shape: [Int]
    /// Whether a linear layer came before: exports then hold the data as [N, F] rather than
    /// [N, C, 1, 1], which layers made for feature maps cannot take.
    package var isFlattened: Bool
    /// Output shape of every earlier layer, in order (for residual adds).
    var earlierShapes: [[Int]]
    /// `isFlattened` of every earlier layer's output, in order.
    var earlierFlattened: [Bool]

    /// (channels, height, width) of a feature map, or the problem for any other input.
    func featureMap() throws(LayerProblem) -> (channels: Int, height: Int, width: Int) {
        guard shape.count == 3 else {
            throw LayerProblem(
                isFlattened
                    ? "it needs an image-shaped input but follows a linear layer"
                    : "it needs an image-shaped [C, H, W] input but gets \(shape)")
        }
        return (shape[0], shape[1], shape[2])
    }
}

/// Why a layer cannot take its input: completes "layer 3 (conv2d) …: <reason>".
package struct LayerProblem: Error, Sendable, Equatable {
    var reason: String
    init(_ reason: String) { self.reason = reason }
}

/// How a layer treats the length an earlier `l2Normalize` scales to, which exports fold into the
/// weights of the next linear layer (Core ML and ONNX normalise to unit length only).
package enum NormalizationScaleRule: Sendable, Equatable {
    /// The layer cannot follow a normalisation whose scale is pending.
    case refuses
    /// The scale commutes with the layer (ReLU, dropout) and stays pending.
    case passes
    /// The layer multiplies its weights by it (linear).
    case absorbs
    /// The layer is a normalisation and leaves its own scale pending.
    case starts
}

/// One HDF5 attribute of a layer's group in weights.h5.
package enum WeightsFileAttribute: Sendable, Equatable {
    /// 32-bit integers; `scalar` writes a scalar dataspace instead of a one-element array.
    case integers(String, [Int], scalar: Bool)
    case floats(String, [Float], scalar: Bool)
}
