import FaceTrainEngine

/// Why a trained model cannot be exported; the text names the layer or field, the reason and a fix.
public enum ExportError: Error, CustomStringConvertible, Equatable {
    case invalidInput(reason: String)
    case weightCountMismatch(layers: Int, weights: Int)
    case weightNameMismatch(layerIndex: Int, expected: String, actual: String)
    case missingParameter(layer: String, parameter: String)
    case unexpectedParameter(layer: String, parameter: String)
    case parameterShapeMismatch(layer: String, parameter: String, expected: [Int], actual: [Int])
    case nonFiniteParameter(layer: String, parameter: String)
    case invalidLayer(layer: String, reason: String)
    case mustEndWithLinear(lastLayer: String?)
    case labelCountMismatch(labels: Int, outputs: Int)
    case invalidLabels(reason: String)
    case invalidNaming(reason: String)
    case invalidOutputs(reason: String)

    public var description: String {
        switch self {
        case .invalidInput(let reason):
            return "export: the model's input specification is invalid: \(reason). "
                + "HINT: the input must be 1 (GRAY) or 3 (RGB) channels with one bias per channel."
        case .weightCountMismatch(let layers, let weights):
            return "export: the model has \(layers) layers but \(weights) weight entries. "
                + "HINT: a trained model needs one LayerWeights per layer (empty for layers without parameters)."
        case .weightNameMismatch(let index, let expected, let actual):
            return "export: the weights of layer \(index) are named '\(actual)', expected '\(expected)'. "
                + "HINT: the weights are out of order or belong to another architecture."
        case .missingParameter(let layer, let parameter):
            return "export: layer '\(layer)' has no tensor '\(parameter)'. "
                + "HINT: the weights do not match the model definition; re-save the bundle."
        case .unexpectedParameter(let layer, let parameter):
            return "export: layer '\(layer)' has an unknown tensor '\(parameter)'. "
                + "HINT: the weights do not match the model definition; re-save the bundle."
        case .parameterShapeMismatch(let layer, let parameter, let expected, let actual):
            return "export: tensor '\(layer).\(parameter)' has shape \(actual), the definition says \(expected). "
                + "HINT: the weights belong to another architecture or class count."
        case .nonFiniteParameter(let layer, let parameter):
            return "export: tensor '\(layer).\(parameter)' contains NaN or infinity. "
                + "HINT: training diverged; retrain with a lower learning rate instead of exporting this model."
        case .invalidLayer(let layer, let reason):
            return "export: layer '\(layer)' cannot be exported: \(reason)."
        case .mustEndWithLinear(let lastLayer):
            return "export: the network must end with a linear layer (the exporters append softmax), "
                + "but its last layer is \(lastLayer.map { "'\($0)'" } ?? "missing")."
        case .labelCountMismatch(let labels, let outputs):
            return "export: the model has \(labels) class labels but its last layer has \(outputs) outputs. "
                + "HINT: the label list and the final linear layer must have the same length, in output order."
        case .invalidLabels(let reason):
            return "export: the class labels are invalid: \(reason)."
        case .invalidNaming(let reason):
            return "export: the export names are invalid: \(reason)."
        case .invalidOutputs(let reason):
            return "export: the model's output layers are invalid: \(reason). "
                + "HINT: the exports write a classifier with one output, the last layer's; leave `outputs` out."
        }
    }
}

extension ExportError {
    /// The export form of a definition problem (`ModelDefinition.validate`), layers named as in
    /// weight files ("0.conv2d").
    init(_ problem: ModelDefinitionError) {
        switch problem {
        case .invalidInput(let reason): self = .invalidInput(reason: reason)
        case .invalidLayer(let index, let kind, let reason):
            self = .invalidLayer(layer: "\(index).\(kind.rawValue)", reason: reason)
        case .invalidLabels(let reason): self = .invalidLabels(reason: reason)
        case .mustEndWithLinear(let lastLayer): self = .mustEndWithLinear(lastLayer: lastLayer)
        case .labelCountMismatch(let labels, let outputs): self = .labelCountMismatch(labels: labels, outputs: outputs)
        case .invalidOutputs(let reason): self = .invalidOutputs(reason: reason)
        }
    }
}
