import FaceTrainEngine
import Foundation

/// Options of the ONNX encoder; the defaults are the product's.
public struct ONNXExportOptions: Sendable, Equatable {
    public var naming: ExportNaming
    /// `GraphProto.name`.
    public var graphName: String
    /// `ModelProto.producer_name` / `producer_version`.
    public var producerName: String
    public var producerVersion: String

    /// Options with product names.
    public init(
        naming: ExportNaming = .product,
        graphName: String = "FaceClassifier",
        producerName: String = "facetrain",
        producerVersion: String = FaceTrainVersion.string
    ) {
        self.naming = naming
        self.graphName = graphName
        self.producerName = producerName
        self.producerVersion = producerVersion
    }

    /// The options the product uses.
    public static let product = ONNXExportOptions()
}

/// Writes a trained model as ONNX (opset 13, IR version 7): one float32 NCHW input of raw 0...255
/// pixels (RGB order, batch dimension "N"), the normalisation as Mul + Add in the graph, the
/// input's crop as Slice (int64 starts, ends and axes), the layers as Conv (with `group` when grouped) / BatchNormalization / Relu / MaxPool /
/// GlobalAveragePool / Flatten / Gemm / Add (residual, two blob inputs) / PRelu / Identity (route) /
/// Resize (nearest upsampling), and
/// Softmax probabilities [N, classes] as the output. The labels are in `metadata_props["class_labels"]`.
/// A detector (`encodeDetector`) has no softmax: its heads are the outputs, and its input any size.
///
/// Field numbers follow `onnx.proto` (proto2: fields that are set are written even when zero), as
/// from github.com/onnx/onnx (`onnx/onnx.proto`, IR version 7; operators as in its Operators.md
/// at opset 13).
public enum ONNXExporter {
    /// File name of the export inside a bundle.
    public static let fileName = "model.onnx"
    /// The IR version and opset written: the pair onnx 1.8 introduced, loadable by old runtimes too.
    public static let irVersion = 7
    public static let opsetVersion = 13

    /// Keys of the fixed `metadata_props` entries.
    public enum MetadataKey {
        public static let classLabels = "class_labels"
        public static let inputLayout = "input_layout"
        public static let imageSize = "image_size"
        public static let author = "author"
        public static let license = "license"
    }

    /// Node, blob and initializer names of the normalisation in front of the network.
    private enum Preprocessing {
        static let scaleTensor = "pre.scale"
        static let biasTensor = "pre.bias"
        static let mulNode = "pre_mul"
        static let scaled = "pre_scaled"
        static let addNode = "pre_add"
        static let output = "pre_out"
    }

    /// The serialized `onnx.ModelProto` of `model`.
    public static func encode(
        _ model: TrainedModel, metadata: ExportMetadata, options: ONNXExportOptions = .product
    ) throws(ExportError) -> Data {
        try encode(ExportPlan(model: model, naming: options.naming), metadata: metadata, options: options)
    }

    /// The serialized `onnx.ModelProto` of a detector: input [N, C, H, W] of any height and width
    /// (multiples of the coarsest stride), one output per head named by `heads` (finest first),
    /// [N, channels, H / stride, W / stride], the network's raw values (no softmax, no decoding).
    package static func encodeDetector(
        _ model: TrainedModel, heads: [String], metadata: ExportMetadata, options: ONNXExportOptions = .product
    ) throws(ExportError) -> Data {
        try encode(ExportPlan(model: model, naming: options.naming, heads: heads), metadata: metadata, options: options)
    }

    private static func encode(
        _ plan: ExportPlan, metadata: ExportMetadata, options: ONNXExportOptions
    ) throws(ExportError) -> Data {
        let nodes = plan.steps.map(\.operation.onnxNode)
        let reserved: Set<String> = [
            Preprocessing.scaleTensor, Preprocessing.biasTensor, Preprocessing.mulNode, Preprocessing.scaled,
            Preprocessing.addNode, Preprocessing.output,
        ]
        for (step, node) in zip(plan.steps, nodes) {
            for name in [step.name, step.output] + tensorNames(step, node) where reserved.contains(name) {
                throw .invalidNaming(reason: "'\(name)' is reserved for the ONNX preprocessing nodes")
            }
        }

        var writer = ProtobufWriter()
        writer.writeSigned(1, Int64(irVersion), always: true)
        writer.writeString(2, options.producerName, always: true)
        writer.writeString(3, options.producerVersion, always: true)
        writer.writeSigned(5, Int64(metadata.version), always: true)
        writer.writeString(6, metadata.shortDescription)
        writer.writeMessage(7) { writeGraph(plan, nodes, name: options.graphName, to: &$0) }
        writer.writeMessage(8) { opset in
            opset.writeString(1, "", always: true)
            opset.writeSigned(2, Int64(opsetVersion), always: true)
        }
        for (key, value) in metadataProperties(plan, metadata) {
            writer.writeMessage(14) { entry in
                entry.writeString(1, key, always: true)
                entry.writeString(2, value, always: true)
            }
        }
        return Data(writer.bytes)
    }

    /// `metadata_props` in file order: labels and input layout first, then the free-form entries.
    private static func metadataProperties(_ plan: ExportPlan, _ metadata: ExportMetadata) -> [(String, String)] {
        var properties =
            plan.isDetector
            ? [(MetadataKey.inputLayout, "NCHW \(plan.colorSpaceName), raw 0..255 floats; scaling is inside the graph")]
            : [
                (MetadataKey.classLabels, jsonArray(plan.classLabels)),
                (
                    MetadataKey.inputLayout,
                    "NCHW \(plan.colorSpaceName), raw 0..255 floats; scaling is inside the graph"
                ),
                (MetadataKey.imageSize, "\(plan.input.width)x\(plan.input.height)"),
            ]
        if !metadata.author.isEmpty { properties.append((MetadataKey.author, metadata.author)) }
        if !metadata.license.isEmpty { properties.append((MetadataKey.license, metadata.license)) }
        properties += metadata.userDefinedEntries.map { ($0.key, $0.value) }
        return properties
    }

    // MARK: - Graph

    /// `nodes`: the ONNX node of each of the plan's steps.
    private static func writeGraph(
        _ plan: ExportPlan, _ nodes: [ONNXNode], name: String, to graph: inout ProtobufWriter
    ) {
        let input = plan.naming.inputName
        writeNode(
            ONNXNode.preprocessing.scale, inputs: [input, Preprocessing.scaleTensor], output: Preprocessing.scaled,
            name: Preprocessing.mulNode, to: &graph)
        writeNode(
            ONNXNode.preprocessing.bias, inputs: [Preprocessing.scaled, Preprocessing.biasTensor],
            output: Preprocessing.output, name: Preprocessing.addNode, to: &graph)
        for (step, node) in zip(plan.steps, nodes) {
            let blobs = step.inputs.map { $0 == input ? Preprocessing.output : $0 }
            writeNode(node, inputs: blobs + tensorNames(step, node), output: step.output, name: step.name, to: &graph)
        }
        graph.writeString(2, name, always: true)

        let channels = plan.input.channels
        writeInitializer(Preprocessing.scaleTensor, dims: [1, 1, 1, 1], values: [plan.input.scale], to: &graph)
        writeInitializer(Preprocessing.biasTensor, dims: [1, channels, 1, 1], values: plan.input.bias, to: &graph)
        for (step, node) in zip(plan.steps, nodes) {
            for (tensorName, tensor) in zip(tensorNames(step, node), node.tensors) {
                if let integers = tensor.integers {
                    writeInitializer(tensorName, integers: integers, to: &graph)
                } else {
                    writeInitializer(tensorName, dims: tensor.dimensions, values: tensor.values, to: &graph)
                }
            }
        }

        let batch = Dimension.symbolic("N")
        // A detector takes photos of any size (multiples of its coarsest stride).
        let (height, width): (Dimension, Dimension) =
            plan.isDetector ? (.symbolic("H"), .symbolic("W")) : (.fixed(plan.input.height), .fixed(plan.input.width))
        writeValueInfo(11, name: input, dims: [batch, .fixed(channels), height, width], to: &graph)
        for output in plan.outputs {
            let dims: [Dimension] =
                plan.isDetector
                ? [batch, .fixed(output.channels), .unknown, .unknown] : [batch, .fixed(output.channels)]
            writeValueInfo(12, name: output.name, dims: dims, to: &graph)
        }
    }

    /// The initializer names of a step's node: "<layer>.<suffix>", in the node's order.
    private static func tensorNames(_ step: ExportPlan.Step, _ node: ONNXNode) -> [String] {
        node.tensors.map { "\(step.name).\($0.suffix)" }
    }

    // MARK: - Messages

    private enum Dimension {
        case fixed(Int)
        case symbolic(String)
        /// Known only when the graph runs (a detector head's height and width).
        case unknown
    }

    /// `inputs`: the data blobs, then the initializers.
    private static func writeNode(
        _ node: ONNXNode, inputs: [String], output: String, name: String, to graph: inout ProtobufWriter
    ) {
        graph.writeMessage(1) { message in
            for input in inputs { message.writeString(1, input, always: true) }
            message.writeString(2, output, always: true)
            message.writeString(3, name, always: true)
            message.writeString(4, node.operatorName, always: true)
            // onnx.helper sorts attributes by name; so do we, for byte-identical files.
            for attribute in node.attributes.sorted(by: { $0.name < $1.name }) {
                message.writeMessage(5) { writeAttribute(attribute, to: &$0) }
            }
        }
    }

    private static func writeAttribute(_ attribute: ONNXAttribute, to writer: inout ProtobufWriter) {
        writer.writeString(1, attribute.name, always: true)
        switch attribute {
        case .float(_, let value):
            writer.writeFloat(2, value, always: true)
            writer.writeSigned(20, AttributeType.float, always: true)
        case .int(_, let value):
            writer.writeSigned(3, Int64(value), always: true)
            writer.writeSigned(20, AttributeType.int, always: true)
        case .ints(_, let values):
            // AttributeProto.ints is not packed in proto2: one key per element.
            for value in values { writer.writeSigned(8, Int64(value), always: true) }
            writer.writeSigned(20, AttributeType.ints, always: true)
        case .string(_, let value):
            writer.writeString(4, value, always: true)
            writer.writeSigned(20, AttributeType.string, always: true)
        }
    }

    private static func writeInitializer(
        _ name: String, dims: [Int], values: [Float], to graph: inout ProtobufWriter
    ) {
        graph.writeMessage(5) { tensor in
            for dim in dims { tensor.writeSigned(1, Int64(dim), always: true) }
            tensor.writeSigned(2, DataType.float, always: true)
            tensor.writeString(8, name, always: true)
            tensor.writeFloatBytes(9, values, always: true)
        }
    }

    /// A one-dimensional int64 initializer, as raw little-endian bytes.
    private static func writeInitializer(_ name: String, integers: [Int64], to graph: inout ProtobufWriter) {
        graph.writeMessage(5) { tensor in
            tensor.writeSigned(1, Int64(integers.count), always: true)
            tensor.writeSigned(2, DataType.int64, always: true)
            tensor.writeString(8, name, always: true)
            tensor.writeBytes(
                9, integers.flatMap { value in (0..<8).map { UInt8(truncatingIfNeeded: value >> ($0 * 8)) } },
                always: true)
        }
    }

    private static func writeValueInfo(
        _ field: Int, name: String, dims: [Dimension], to graph: inout ProtobufWriter
    ) {
        graph.writeMessage(field) { info in
            info.writeString(1, name, always: true)
            info.writeMessage(2) { type in
                type.writeMessage(1) { tensorType in
                    tensorType.writeSigned(1, DataType.float, always: true)
                    tensorType.writeMessage(2) { shape in
                        for dim in dims {
                            shape.writeMessage(1) { dimension in
                                switch dim {
                                case .fixed(let value): dimension.writeSigned(1, Int64(value), always: true)
                                case .symbolic(let parameter): dimension.writeString(2, parameter, always: true)
                                case .unknown: break
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    private enum AttributeType {
        static let float: Int64 = 1
        static let int: Int64 = 2
        static let string: Int64 = 3
        static let ints: Int64 = 7
    }

    private enum DataType {
        static let float: Int64 = 1
        static let int64: Int64 = 7
    }

    /// A JSON array of strings in the layout of Python's `json.dumps` (", " between items), kept
    /// UTF-8 rather than \u-escaped.
    static func jsonArray(_ strings: [String]) -> String {
        "[" + strings.map(jsonString).joined(separator: ", ") + "]"
    }

    private static func jsonString(_ string: String) -> String {
        var result = "\""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case "\u{08}": result += "\\b"
            case "\u{0C}": result += "\\f"
            case let control where control.value < 0x20:
                let hex = String(control.value, radix: 16)
                result += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }
}
