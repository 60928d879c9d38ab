import FaceTrainEngine

/// The ONNX table: what each operation of an export plan becomes in ONNX, the operator of its node,
/// the attributes and the initializer tensors, for each engine layer kind (an `ONNXLowering`
/// conformance per kind, below) and for the operations exports add around the layers. Only
/// ONNXExporter reads it; the Core ML table is Export/CoreMLLowering.swift. Not the order of the
/// operations or which layers are left out (ExportPlan), and not the file format (ONNXExporter).

/// A layer kind's ONNX node. A kind that inference passes through (dropout) has none: exports
/// leave it out. `ExportFormTableTests` checks that every other kind of `everyKind` has one.
protocol ONNXLowering: LayerKind {
    /// `NodeProto.op_type`, e.g. "Conv".
    var onnxOperator: String { get }
    /// The node's attributes; none unless the kind says. The encoder sorts them by name.
    var onnxAttributes: [ONNXAttribute] { get }
    /// The initializers the node reads after its data, from the layer's checked tensors; none unless
    /// the kind says. Each is named "<layer>.<suffix>".
    func onnxTensors(_ input: LoweringInput) -> [ONNXTensor]
}

extension ONNXLowering {
    var onnxAttributes: [ONNXAttribute] { [] }
    func onnxTensors(_ input: LoweringInput) -> [ONNXTensor] { [] }

    /// The layer's tensors as the weights file holds them, in parameter order.
    fileprivate func savedTensors(_ input: LoweringInput) -> [ONNXTensor] {
        parameterShapes.map {
            ONNXTensor(suffix: $0.name, dimensions: $0.shape, values: input.parameters[$0.name] ?? [])
        }
    }
}

extension LayerKind {
    /// This kind's ONNX lowering; the plan asks only for kinds that inference does not pass through.
    var onnxLowering: any ONNXLowering {
        guard let lowering = self as? any ONNXLowering else {
            preconditionFailure("layer kind \(name.rawValue) has no ONNX lowering in Export/ONNXLowering.swift")
        }
        return lowering
    }
}

/// One ONNX node, without its blobs (the plan names those).
struct ONNXNode: Sendable {
    var operatorName: String
    var attributes: [ONNXAttribute]
    /// Initializers, read after the data inputs in this order.
    var tensors: [ONNXTensor]

    init(_ operatorName: String, attributes: [ONNXAttribute] = [], tensors: [ONNXTensor] = []) {
        self.operatorName = operatorName
        self.attributes = attributes
        self.tensors = tensors
    }

    /// The normalisation of the pixels in front of the network, x * scale + bias (Core ML's image
    /// scaler needs no layer for it); ONNXExporter writes their blobs and tensors.
    static let preprocessing = (scale: ONNXNode("Mul"), bias: ONNXNode("Add"))
}

/// One ONNX node attribute.
enum ONNXAttribute: Sendable, Equatable {
    case float(String, Float)
    case int(String, Int)
    case ints(String, [Int])
    case string(String, String)

    var name: String {
        switch self {
        case .float(let name, _), .int(let name, _), .ints(let name, _), .string(let name, _): name
        }
    }
}

/// One ONNX initializer of a node, "<layer>.<suffix>".
struct ONNXTensor: Sendable {
    var suffix: String
    var dimensions: [Int]
    var values: [Float]
    /// An int64 tensor instead (Slice's starts, ends and axes); `values` is then empty.
    var integers: [Int64]?

    init(suffix: String, dimensions: [Int], values: [Float]) {
        self.suffix = suffix
        self.dimensions = dimensions
        self.values = values
    }

    init(suffix: String, integers: [Int64]) {
        self.suffix = suffix
        self.dimensions = [integers.count]
        self.values = []
        self.integers = integers
    }
}

extension ExportOperation {
    /// This operation's node.
    var onnxNode: ONNXNode {
        switch self {
        case .centreCrop(let border, let height, let width):
            let edge = Int64(border)
            return ONNXNode(
                "Slice",
                tensors: [
                    ONNXTensor(suffix: "starts", integers: [edge, edge]),
                    ONNXTensor(suffix: "ends", integers: [Int64(height) - edge, Int64(width) - edge]),
                    ONNXTensor(suffix: "axes", integers: [2, 3]),
                ])
        case .flatten:
            return ONNXNode("Flatten", attributes: [.int("axis", 1)])
        case .layer(let kind, let input):
            let lowering = kind.onnxLowering
            return ONNXNode(
                lowering.onnxOperator, attributes: lowering.onnxAttributes, tensors: lowering.onnxTensors(input))
        case .softmax:
            return ONNXNode("Softmax", attributes: [.int("axis", 1)])
        }
    }
}

// MARK: - The layer kinds, alphabetically

extension BatchNorm2D.Kind: ONNXLowering {
    var onnxOperator: String { "BatchNormalization" }
    var onnxAttributes: [ONNXAttribute] { [.float("epsilon", epsilon)] }

    /// Named by `ExportNaming.batchNormTensorSuffixes`.
    func onnxTensors(_ input: LoweringInput) -> [ONNXTensor] {
        zip(input.naming.batchNormTensorSuffixes, parameterShapes).map { suffix, parameter in
            ONNXTensor(suffix: suffix, dimensions: [channels], values: input.parameters[parameter.name] ?? [])
        }
    }
}

extension Conv2D.Kind: ONNXLowering {
    var onnxOperator: String { "Conv" }

    var onnxAttributes: [ONNXAttribute] {
        [
            .ints("kernel_shape", [kernelSize, kernelSize]), .ints("pads", [padding, padding, padding, padding]),
            .ints("strides", [stride, stride]),
        ]
            // `group` defaults to 1; left out then, so ungrouped models keep their bytes.
            + (groups == 1 ? [] : [.int("group", groups)])
    }

    func onnxTensors(_ input: LoweringInput) -> [ONNXTensor] { savedTensors(input) }
}

extension GlobalAveragePool.Kind: ONNXLowering {
    var onnxOperator: String { "GlobalAveragePool" }
}

extension L2Normalize.Kind: ONNXLowering {
    /// To unit length; the plan folds the scale into the next linear layer.
    var onnxOperator: String { "LpNormalization" }
    var onnxAttributes: [ONNXAttribute] { [.int("axis", 1), .int("p", 2)] }
}

extension Linear.Kind: ONNXLowering {
    var onnxOperator: String { "Gemm" }
    var onnxAttributes: [ONNXAttribute] { [.float("alpha", 1), .float("beta", 1), .int("transB", 1)] }

    func onnxTensors(_ input: LoweringInput) -> [ONNXTensor] { savedTensors(input) }
}

extension MaxPool2D.Kind: ONNXLowering {
    var onnxOperator: String { "MaxPool" }
    var onnxAttributes: [ONNXAttribute] { [.ints("kernel_shape", [size, size]), .ints("strides", [stride, stride])] }
}

extension PReLU.Kind: ONNXLowering {
    var onnxOperator: String { "PRelu" }

    /// ONNX broadcasts the slopes against [N, C, H, W] as [C, 1, 1], against [N, F] as [F].
    func onnxTensors(_ input: LoweringInput) -> [ONNXTensor] {
        let dimensions = input.graphShape.count == 3 ? [channels, 1, 1] : [channels]
        return [ONNXTensor(suffix: "weight", dimensions: dimensions, values: input.parameters["weight"] ?? [])]
    }
}

extension ReLU.Kind: ONNXLowering {
    var onnxOperator: String { "Relu" }
}

extension ResidualAdd.Kind: ONNXLowering {
    /// Of its two blob inputs: the previous step's output and the earlier layer's.
    var onnxOperator: String { "Add" }
}

extension Route.Kind: ONNXLowering {
    /// Its one input is the earlier layer's blob (the plan gives it no other).
    var onnxOperator: String { "Identity" }
}

extension Upsample.Kind: ONNXLowering {
    /// Resize (opset 13) reads X, an empty roi and the scales [1, 1, f, f]; nearest with asymmetric
    /// coordinates and floor picks input (y / f, x / f), as the engine does.
    var onnxOperator: String { "Resize" }

    var onnxAttributes: [ONNXAttribute] {
        [
            .string("coordinate_transformation_mode", "asymmetric"), .string("mode", "nearest"),
            .string("nearest_mode", "floor"),
        ]
    }

    func onnxTensors(_ input: LoweringInput) -> [ONNXTensor] {
        [
            ONNXTensor(suffix: "roi", dimensions: [0], values: []),
            ONNXTensor(suffix: "scales", dimensions: [4], values: [1, 1, Float(factor), Float(factor)]),
        ]
    }
}
