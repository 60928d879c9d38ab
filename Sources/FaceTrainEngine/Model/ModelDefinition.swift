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
    /// Pixels cut from every edge of the `width` x `height` image before the first layer, which
    /// sees the centre (`networkWidth` x `networkHeight`). An extractor pretrained on random resized
    /// crops knows faces at the mean scale of those crops, larger than in a whole crop; 0: none.
    public var crop: Int

    public init(width: Int, height: Int, channels: Int, scale: Float = 1 / 127.5, bias: [Float]? = nil, crop: Int = 0) {
        self.width = width
        self.height = height
        self.channels = channels
        self.colorSpace = channels == 1 ? "GRAY" : "RGB"
        self.scale = scale
        self.bias = bias ?? [Float](repeating: -1, count: channels)
        self.crop = crop
    }

    /// The size the first layer sees.
    public var networkWidth: Int { width - 2 * crop }
    public var networkHeight: Int { height - 2 * crop }

    /// This input with `border` pixels around a centre of the same size as before.
    public func cropping(_ border: Int) -> InputSpecification {
        var input = self
        input.width = networkWidth + 2 * border
        input.height = networkHeight + 2 * border
        input.crop = border
        return input
    }

    enum CodingKeys: String, CodingKey {
        case width, height, channels, colorSpace, scale, bias, crop
    }

    public init(from decoder: Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        width = try container.decode(Int.self, forKey: .width)
        height = try container.decode(Int.self, forKey: .height)
        channels = try container.decode(Int.self, forKey: .channels)
        colorSpace = try container.decode(String.self, forKey: .colorSpace)
        scale = try container.decode(Float.self, forKey: .scale)
        bias = try container.decode([Float].self, forKey: .bias)
        crop = try container.decodeIfPresent(Int.self, forKey: .crop) ?? 0
    }

    /// Without a crop the encoding is the one written before crops existed, byte for byte.
    public func encode(to encoder: Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(width, forKey: .width)
        try container.encode(height, forKey: .height)
        try container.encode(channels, forKey: .channels)
        try container.encode(colorSpace, forKey: .colorSpace)
        try container.encode(scale, forKey: .scale)
        try container.encode(bias, forKey: .bias)
        if crop != 0 { try container.encode(crop, forKey: .crop) }
    }
}

/// One layer of a network, as the manifest lists it and the exporters translate it.
///
/// Each case's kind is defined once, beside its layer (`Conv2D.Kind`, … through `layerKind`):
/// parameter names and shapes, checks, shape inference, FLOPs, weights.h5 attributes, the
/// manifest summary and the lowering to Core ML and ONNX.
///
/// The network is a list, and a layer reads the output of the layer before it; `add` also reads
/// the output of an earlier layer, named by its index in the list (the same index that names its
/// weights, "3.conv2d"), which makes residual blocks; `route` reads an earlier layer's output
/// instead of its input, which makes branches (a detector's feature pyramid and heads).
public enum LayerSpecification: Codable, Sendable, Equatable {
    /// `groups` splits the channels into that many independent convolutions (ONNX `group`, Core ML
    /// `nGroups`); groups == inputChannels is a depthwise convolution.
    case conv2D(inputChannels: Int, outputChannels: Int, kernelSize: Int, stride: Int, padding: Int, groups: Int = 1)
    case batchNorm2D(channels: Int, epsilon: Float, momentum: Float)
    case relu
    case maxPool2D(size: Int, stride: Int)
    case globalAveragePool
    /// Each embedding scaled to length `scale` (see `L2Normalize`).
    case l2Normalize(scale: Float)
    case linear(inputFeatures: Int, outputFeatures: Int)
    case dropout(rate: Float)
    /// Its input plus the output of layer `source` (an earlier index), of the same shape.
    case add(source: Int)
    /// Parametric ReLU: y = x for x > 0, else slope[c]·x, one learnt slope per channel.
    case prelu(channels: Int)
    /// The output of layer `source` (an earlier index), passed on unchanged; its input is ignored.
    case route(source: Int)
    /// Nearest-neighbour upsampling of a feature map by `factor` (2) in height and width.
    case upsample(factor: Int)

    /// The definition of this layer's kind: shapes, checks, FLOPs, files and exports (see `LayerKind`).
    /// The one switch over the cases besides their coding below; a new kind adds a case here.
    package var layerKind: any LayerKind {
        switch self {
        case .conv2D(let inputChannels, let outputChannels, let kernelSize, let stride, let padding, let groups):
            Conv2D.Kind(
                inputChannels: inputChannels, outputChannels: outputChannels, kernelSize: kernelSize, stride: stride,
                padding: padding, groups: groups)
        case .batchNorm2D(let channels, let epsilon, let momentum):
            BatchNorm2D.Kind(channels: channels, epsilon: epsilon, momentum: momentum)
        case .relu: ReLU.Kind()
        case .maxPool2D(let size, let stride): MaxPool2D.Kind(size: size, stride: stride)
        case .globalAveragePool: GlobalAveragePool.Kind()
        case .l2Normalize(let scale): L2Normalize.Kind(scale: scale)
        case .linear(let inputFeatures, let outputFeatures):
            Linear.Kind(inputFeatures: inputFeatures, outputFeatures: outputFeatures)
        case .dropout(let rate): Dropout.Kind(rate: rate)
        case .add(let source): ResidualAdd.Kind(source: source)
        case .prelu(let channels): PReLU.Kind(channels: channels)
        case .route(let source): Route.Kind(source: source)
        case .upsample(let factor): Upsample.Kind(factor: factor)
        }
    }

    /// One layer of every kind, for tables over the kinds (the export checker's).
    package static let everyKind: [LayerSpecification] = [
        .conv2D(inputChannels: 1, outputChannels: 1, kernelSize: 1, stride: 1, padding: 0),
        .batchNorm2D(channels: 1, epsilon: 1e-5, momentum: 0.1), .relu, .maxPool2D(size: 2, stride: 2),
        .globalAveragePool, .l2Normalize(scale: 1), .linear(inputFeatures: 1, outputFeatures: 1), .dropout(rate: 0),
        .add(source: 0), .prelu(channels: 1), .route(source: 0), .upsample(factor: 2),
    ]

    /// Which kind of layer this is; `kind.rawValue` is the name in parameter keys ("0.conv2d.weight")
    /// and HDF5 group names.
    public var kind: LayerKindName { layerKind.name }

    /// Names and shapes of the layer's saved tensors, in file order.
    public var parameterShapes: [(name: String, shape: [Int])] { layerKind.parameterShapes }

    /// The earlier layer whose output this one reads besides its input (`add`) or instead of it
    /// (`route`), if any.
    public var shortcutSource: Int? { layerKind.shortcutSource }

    /// The oldest manifest format that can describe this layer: 2 for grouped convolutions,
    /// residual adds and PReLU, which facetrain before format 2 does not know; 3 for routes and
    /// upsampling.
    var minimumFormatVersion: Int { layerKind.minimumFormatVersion }

    // MARK: - Coding

    // The manifest's JSON: one key per kind holding the labelled values, as Swift's synthesised
    // coding writes it, except that `groups` is left out when it is 1, so manifests written before
    // grouped convolutions existed decode (as groups 1) and re-encode to the same bytes.
    private enum Stored: Codable {
        case conv2D(inputChannels: Int, outputChannels: Int, kernelSize: Int, stride: Int, padding: Int, groups: Int?)
        case batchNorm2D(channels: Int, epsilon: Float, momentum: Float)
        case relu
        case maxPool2D(size: Int, stride: Int)
        case globalAveragePool
        case l2Normalize(scale: Float)
        case linear(inputFeatures: Int, outputFeatures: Int)
        case dropout(rate: Float)
        case add(source: Int)
        case prelu(channels: Int)
        case route(source: Int)
        case upsample(factor: Int)
    }

    public init(from decoder: any Decoder) throws {
        switch try Stored(from: decoder) {
        case .conv2D(let inputChannels, let outputChannels, let kernelSize, let stride, let padding, let groups):
            self = .conv2D(
                inputChannels: inputChannels, outputChannels: outputChannels, kernelSize: kernelSize, stride: stride,
                padding: padding, groups: groups ?? 1)
        case .batchNorm2D(let channels, let epsilon, let momentum):
            self = .batchNorm2D(channels: channels, epsilon: epsilon, momentum: momentum)
        case .relu: self = .relu
        case .maxPool2D(let size, let stride): self = .maxPool2D(size: size, stride: stride)
        case .globalAveragePool: self = .globalAveragePool
        case .l2Normalize(let scale): self = .l2Normalize(scale: scale)
        case .linear(let inputFeatures, let outputFeatures):
            self = .linear(inputFeatures: inputFeatures, outputFeatures: outputFeatures)
        case .dropout(let rate): self = .dropout(rate: rate)
        case .add(let source): self = .add(source: source)
        case .prelu(let channels): self = .prelu(channels: channels)
        case .route(let source): self = .route(source: source)
        case .upsample(let factor): self = .upsample(factor: factor)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        let stored: Stored =
            switch self {
            case .conv2D(let inputChannels, let outputChannels, let kernelSize, let stride, let padding, let groups):
                .conv2D(
                    inputChannels: inputChannels, outputChannels: outputChannels, kernelSize: kernelSize,
                    stride: stride, padding: padding, groups: groups == 1 ? nil : groups)
            case .batchNorm2D(let channels, let epsilon, let momentum):
                .batchNorm2D(channels: channels, epsilon: epsilon, momentum: momentum)
            case .relu: .relu
            case .maxPool2D(let size, let stride): .maxPool2D(size: size, stride: stride)
            case .globalAveragePool: .globalAveragePool
            case .l2Normalize(let scale): .l2Normalize(scale: scale)
            case .linear(let inputFeatures, let outputFeatures):
                .linear(inputFeatures: inputFeatures, outputFeatures: outputFeatures)
            case .dropout(let rate): .dropout(rate: rate)
            case .add(let source): .add(source: source)
            case .prelu(let channels): .prelu(channels: channels)
            case .route(let source): .route(source: source)
            case .upsample(let factor): .upsample(factor: factor)
            }
        try stored.encode(to: encoder)
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
    /// Indices of the layers whose outputs the network returns (`Network.forwardOutputs`), in
    /// that order; nil: the last layer's alone. Left out of the JSON when nil, so every definition
    /// written before it existed re-encodes to the same bytes.
    public var outputs: [Int]?

    public init(
        input: InputSpecification, layers: [LayerSpecification], classLabels: [String], outputs: [Int]? = nil
    ) {
        self.input = input
        self.layers = layers
        self.classLabels = classLabels
        self.outputs = outputs
    }

    /// The layers whose outputs the network returns: `outputs`, or the last layer.
    public var outputLayers: [Int] { outputs ?? (layers.isEmpty ? [] : [layers.count - 1]) }

    /// Layer names as used in weight files: "<index>.<kind>".
    public var layerNames: [String] { layers.enumerated().map { "\($0.offset).\($0.element.kind.rawValue)" } }
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
