/// What a model is, independent of the code that trains or runs it: its input, its layers in
/// order and its class labels. Bundles store it in the manifest; exporters read it.

/// How pixels become network input: `input[c] = pixel[c] * scale + bias[c]`, pixels in 0...255.
///
/// One scale for all channels, because that is what Core ML's image preprocessing can express
/// (`channelScale` plus per-channel biases); ONNX gets the same arithmetic as Mul + Add.
public struct InputSpecification: Codable, Sendable, Equatable {
    public var width: Int
    public var height: Int
    /// 3 for RGB, 1 for grey.
    public var channels: Int
    /// "RGB" or "GRAY".
    public var colorSpace: String
    public var scale: Float
    public var bias: [Float]

    public init(width: Int, height: Int, channels: Int, scale: Float = 1 / 127.5, bias: [Float]? = nil) {
        self.width = width
        self.height = height
        self.channels = channels
        self.colorSpace = channels == 1 ? "GRAY" : "RGB"
        self.scale = scale
        self.bias = bias ?? [Float](repeating: -1, count: channels)
    }
}

/// One layer of a network, as the manifest lists it and the exporters translate it.
///
/// Parameters per kind, in this order and with these names (shapes in brackets):
/// - conv2D: `weight` [out, in, k, k], `bias` [out]
/// - batchNorm2D: `weight` (gamma) [c], `bias` (beta) [c], `running_mean` [c], `running_var` [c]
/// - linear (fully connected): `weight` [out, in], `bias` [out]
/// - the others have none.
public enum LayerSpecification: Codable, Sendable, Equatable {
    case conv2D(inputChannels: Int, outputChannels: Int, kernelSize: Int, stride: Int, padding: Int)
    case batchNorm2D(channels: Int, epsilon: Float, momentum: Float)
    case relu
    case maxPool2D(size: Int, stride: Int)
    case globalAveragePool
    /// Each embedding scaled to length `scale` (see `L2Normalize`).
    case l2Normalize(scale: Float)
    case linear(inputFeatures: Int, outputFeatures: Int)
    case dropout(rate: Float)

    /// Short lowercase kind used in parameter names ("0.conv2d.weight") and HDF5 group names.
    public var kind: String {
        switch self {
        case .conv2D: "conv2d"
        case .batchNorm2D: "batchnorm2d"
        case .relu: "relu"
        case .maxPool2D: "maxpool2d"
        case .globalAveragePool: "globalavgpool"
        case .l2Normalize: "l2normalize"
        case .linear: "linear"
        case .dropout: "dropout"
        }
    }

    /// Names and shapes of the layer's saved tensors, in file order.
    public var parameterShapes: [(name: String, shape: [Int])] {
        switch self {
        case .conv2D(let inputChannels, let outputChannels, let kernelSize, _, _):
            [("weight", [outputChannels, inputChannels, kernelSize, kernelSize]), ("bias", [outputChannels])]
        case .batchNorm2D(let channels, _, _):
            [("weight", [channels]), ("bias", [channels]), ("running_mean", [channels]), ("running_var", [channels])]
        case .linear(let inputFeatures, let outputFeatures):
            [("weight", [outputFeatures, inputFeatures]), ("bias", [outputFeatures])]
        case .relu, .maxPool2D, .globalAveragePool, .l2Normalize, .dropout:
            []
        }
    }
}

/// A named parameter tensor of one layer, such as `weight` of layer `3.conv2d`.
public struct NamedTensor: Sendable, Equatable {
    public var name: String
    public var tensor: Tensor
    public init(name: String, tensor: Tensor) {
        self.name = name
        self.tensor = tensor
    }
}

/// The saved tensors of one layer; `name` is "<index>.<kind>", e.g. "0.conv2d".
public struct LayerWeights: Sendable, Equatable {
    public var name: String
    public var tensors: [NamedTensor]
    public init(name: String, tensors: [NamedTensor]) {
        self.name = name
        self.tensors = tensors
    }
}

/// Architecture plus class labels: everything but the numbers.
public struct ModelDefinition: Codable, Sendable, Equatable {
    public var input: InputSpecification
    public var layers: [LayerSpecification]
    /// Output order of the classifier; "1" and "2" first, then user ids as strings.
    public var classLabels: [String]

    public init(input: InputSpecification, layers: [LayerSpecification], classLabels: [String]) {
        self.input = input
        self.layers = layers
        self.classLabels = classLabels
    }

    /// Layer names as used in weight files: "<index>.<kind>".
    public var layerNames: [String] { layers.enumerated().map { "\($0.offset).\($0.element.kind)" } }
}

/// A trained model: its definition and one `LayerWeights` per layer (empty for layers without
/// parameters), in layer order. What bundles save and exporters translate.
public struct TrainedModel: Sendable, Equatable {
    public var definition: ModelDefinition
    public var weights: [LayerWeights]
    public init(definition: ModelDefinition, weights: [LayerWeights]) {
        self.definition = definition
        self.weights = weights
    }
}
