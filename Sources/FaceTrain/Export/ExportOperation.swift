import FaceTrainEngine

/// The operations an export plan is made of (ExportPlan orders them), the data a layer's lowering
/// reads, and `ExportFormTable`, what each operation becomes in both formats. Format-free: what an
/// operation becomes in a format is that format's table, Export/ONNXLowering.swift or
/// Export/CoreMLLowering.swift, each read only by its own exporter.

/// One operation of an exported model, before either format names it.
enum ExportOperation: Sendable {
    /// The input's crop (`InputSpecification.crop`) before the first layer: `border` pixels off every
    /// edge of the `height` x `width` input.
    case centreCrop(border: Int, height: Int, width: Int)
    /// Inserted before the first linear layer: the feature map as one vector, in C, H, W order.
    case flatten
    /// An engine layer that inference does not pass through, with the tensors it is lowered from.
    case layer(any LayerKind, LoweringInput)
    /// Appended to the logits.
    case softmax

    /// The operations exports add around the layers, one example of each by its name in
    /// `ExportFormTable` (`LayerSpecification.everyKind` is that for the layers).
    static let graphExamples: [String: ExportOperation] = [
        "crop": .centreCrop(border: 1, height: 4, width: 4), "flatten": .flatten, "softmax": .softmax,
    ]
}

/// The data and tensors a layer's lowering works from.
struct LoweringInput: Sendable {
    /// The layer's tensors by parameter name, checked against `parameterShapes` and finite; a linear
    /// layer's weights already carry the scale of the l2Normalize before it.
    var parameters: [String: [Float]]
    /// The data as the exported graph holds it, batch left out: [C, H, W] until the first linear
    /// layer's flatten (a pooled vector is [C, 1, 1]), [F] after it.
    var graphShape: [Int]
    var naming: ExportNaming
}

/// What each layer kind becomes in the exports, read from the two format tables: the table
/// Tests/Scripts/check_exports.py learns the allowed ONNX operators and Core ML layers from.
public enum ExportFormTable {
    /// One exported operation: its ONNX operator and Core ML layer (and activation).
    public struct Entry: Codable, Sendable, Equatable {
        public var onnx: String
        /// Empty for ONNX-only operations (the pixel normalisation, which Core ML's image scaler does).
        public var coreML: String
        public var coreMLActivation: String?

        init(onnx: String, coreML: CoreMLLayer?) {
            self.onnx = onnx
            self.coreML = coreML?.name ?? ""
            self.coreMLActivation = coreML?.activation
        }
    }

    /// By layer kind ("conv2d"; empty for kinds exports leave out, such as dropout) and, for the
    /// operations exports add around the layers, by "crop", "flatten", "softmax" and "preprocessing".
    public static var entries: [String: [Entry]] {
        var table: [String: [Entry]] = [:]
        for layer in LayerSpecification.everyKind {
            let kind = layer.layerKind
            table[layer.kind.rawValue] =
                kind.isIdentityAtInference
                ? [] : [Entry(onnx: kind.onnxLowering.onnxOperator, coreML: kind.coreMLLowering.coreMLLayer)]
        }
        for (name, operation) in ExportOperation.graphExamples {
            table[name] = [Entry(onnx: operation.onnxNode.operatorName, coreML: operation.coreMLLayer)]
        }
        let preprocessing = ONNXNode.preprocessing
        table["preprocessing"] = [preprocessing.scale, preprocessing.bias].map {
            Entry(onnx: $0.operatorName, coreML: nil)
        }
        return table
    }
}
