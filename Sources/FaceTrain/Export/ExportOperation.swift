import FaceTrainEngine

/// The vocabulary layer kinds are lowered into (`ExportLowering.lowered`, Export/LayerLowering.swift): one operation that
/// both encoders write, each in its own format, in the plan's order.

/// What an operation is called in each format: the ONNX operator and the Core ML
/// `NeuralNetworkLayer` field (with the activation inside it, for activations).
struct ExportForm: Sendable, Equatable {
    /// ONNX `NodeProto.op_type`, e.g. "Conv".
    var onnxOperator: String
    /// Name of the `NeuralNetworkLayer.layer` oneof case, e.g. "convolution".
    var coreMLLayer: String
    /// Its field number in `NeuralNetworkLayer` (NeuralNetwork.proto).
    var coreMLField: Int
    /// For Core ML "activation" layers, the `ActivationParams` case ("ReLU", "PReLU").
    var coreMLActivation: String?

    init(onnxOperator: String, coreMLLayer: String, coreMLField: Int, coreMLActivation: String? = nil) {
        self.onnxOperator = onnxOperator
        self.coreMLLayer = coreMLLayer
        self.coreMLField = coreMLField
        self.coreMLActivation = coreMLActivation
    }
}

/// The data and tensors a lowering works from.
struct LoweringInput {
    /// The layer's tensors by parameter name, checked against `parameterShapes` and finite.
    var parameters: [String: [Float]]
    /// The data as the exported graph holds it, batch left out: [C, H, W] until the first linear
    /// layer's flatten (a pooled vector is [C, 1, 1]), [F] after it.
    var graphShape: [Int]
    /// The length an earlier `l2Normalize` left for the next linear layer to fold in.
    var pendingScale: Float?
    var naming: ExportNaming
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

/// One tensor of an exported layer: an ONNX initializer "<layer>.<suffix>", a Core ML weight.
struct ExportTensor: Sendable {
    var suffix: String
    /// Its ONNX shape.
    var dimensions: [Int]
    var values: [Float]
    /// An ONNX int64 tensor instead (Slice's starts, ends and axes); `values` is then empty.
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

/// One exported layer in both formats.
struct ExportOperation: Sendable {
    var form: ExportForm
    var onnxAttributes: [ONNXAttribute]
    /// ONNX initializers, in parameter order (the node's inputs after the data).
    var tensors: [ExportTensor]
    /// Writes the fields of the Core ML layer's parameter message (inside field `form.coreMLField`).
    var writeCoreMLParameters: @Sendable (inout ProtobufWriter) -> Void
    /// The normalisation length still to fold into a later linear layer after this one.
    var pendingScale: Float?

    init(
        form: ExportForm, onnxAttributes: [ONNXAttribute] = [], tensors: [ExportTensor] = [],
        pendingScale: Float? = nil, writeCoreMLParameters: @escaping @Sendable (inout ProtobufWriter) -> Void = { _ in }
    ) {
        self.form = form
        self.onnxAttributes = onnxAttributes
        self.tensors = tensors
        self.pendingScale = pendingScale
        self.writeCoreMLParameters = writeCoreMLParameters
    }

    /// The flatten exports insert before the first linear layer: mode CHANNEL_FIRST (0) flattens in
    /// C, H, W order, like ONNX Flatten and the trainer.
    static let flatten = ExportOperation(
        form: ExportForm(onnxOperator: "Flatten", coreMLLayer: "flatten", coreMLField: 301),
        onnxAttributes: [.int("axis", 1)])

    /// The softmax exports append to the logits.
    static let softmax = ExportOperation(
        form: ExportForm(onnxOperator: "Softmax", coreMLLayer: "softmax", coreMLField: 175),
        onnxAttributes: [.int("axis", 1)])

    /// The input's crop (`InputSpecification.crop`), before the first layer: ONNX Slice of H and W,
    /// Core ML's crop layer (in the first specification) with the same border on every edge.
    static func centreCrop(border: Int, height: Int, width: Int) -> ExportOperation {
        let edge = Int64(border)
        return ExportOperation(
            form: cropForm,
            tensors: [
                ExportTensor(suffix: "starts", integers: [edge, edge]),
                ExportTensor(suffix: "ends", integers: [Int64(height) - edge, Int64(width) - edge]),
                ExportTensor(suffix: "axes", integers: [2, 3]),
            ],
            // CropLayerParams.cropAmounts has the layout of ValidPadding's paddingAmounts.
            writeCoreMLParameters: { writeValidPadding(border, to: &$0) })
    }

    static let cropForm = ExportForm(onnxOperator: "Slice", coreMLLayer: "crop", coreMLField: 190)

    /// The operations exports add around the layers: the input's crop, the flatten, the softmax,
    /// and ONNX's normalisation of the pixels (Mul + Add; Core ML's image scaler is no layer).
    static let graphForms: [String: [ExportForm]] = [
        "crop": [cropForm], "flatten": [flatten.form], "softmax": [softmax.form],
        "preprocessing": [
            ExportForm(onnxOperator: "Mul", coreMLLayer: "", coreMLField: 0),
            ExportForm(onnxOperator: "Add", coreMLLayer: "", coreMLField: 0),
        ],
    ]

    /// `ValidPadding { paddingAmounts { borderAmounts [H, W] } }` with the same amount on every edge.
    static func writeValidPadding(_ padding: Int, to writer: inout ProtobufWriter) {
        writer.writeMessage(1) { amounts in
            for _ in 0..<2 {
                amounts.writeMessage(10) { edges in
                    edges.writeUnsigned(1, UInt64(padding))
                    edges.writeUnsigned(2, UInt64(padding))
                }
            }
        }
    }
}

/// What each layer kind becomes in the exports, read from the kinds themselves: the table
/// Tests/Scripts/check_exports.py learns the allowed ONNX operators and Core ML layers from.
public enum ExportFormTable {
    /// One exported operation: its ONNX operator and Core ML layer (and activation).
    public struct Entry: Codable, Sendable, Equatable {
        public var onnx: String
        /// Empty for ONNX-only operations (the pixel normalisation, which Core ML's image scaler does).
        public var coreML: String
        public var coreMLActivation: String?
    }

    /// By layer kind ("conv2d"; empty for kinds exports leave out, such as dropout) and, for the
    /// operations exports add around the layers, by "flatten", "softmax" and "preprocessing".
    public static var entries: [String: [Entry]] {
        var table: [String: [Entry]] = [:]
        func entry(_ form: ExportForm) -> Entry {
            Entry(onnx: form.onnxOperator, coreML: form.coreMLLayer, coreMLActivation: form.coreMLActivation)
        }
        for layer in LayerSpecification.everyKind {
            table[layer.kind.rawValue] = layer.exportLowering.exportForm.map { [entry($0)] } ?? []
        }
        for (name, forms) in ExportOperation.graphForms { table[name] = forms.map(entry) }
        return table
    }
}
