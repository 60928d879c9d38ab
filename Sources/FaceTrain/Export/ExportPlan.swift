/// Names that appear inside exported files. The defaults are the product's; the parameters exist
/// so that the same encoders can reproduce other files (the format reference) byte for byte.
public struct ExportNaming: Sendable, Equatable {
    /// Name of the image input (Core ML feature, ONNX graph input).
    public var inputName: String
    /// Core ML string output holding the winning label (`predictedFeatureName`).
    public var predictedLabelName: String
    /// Softmax output: Core ML dictionary output and `labelProbabilityLayerName`, ONNX graph output.
    public var probabilitiesName: String
    /// Exported layer names in execution order (dropout left out, flatten and softmax included);
    /// nil derives them: "<index>.<kind>" as in weight files, then "flatten" and "softmax".
    public var layerNames: [String]?
    /// Output blob of every exported layer but the softmax, in the same order; nil gives "<layer>_out".
    public var blobNames: [String]?
    /// Names of the four batch-norm tensors in ONNX initializers ("<layer>.<suffix>"), in
    /// parameter order (gamma, beta, running mean, running variance).
    public var batchNormTensorSuffixes: [String]

    /// Product names, with `classLabel` and `classProbability` as the app expects them.
    public init(
        inputName: String = "image",
        predictedLabelName: String = "classLabel",
        probabilitiesName: String = "classProbability",
        layerNames: [String]? = nil,
        blobNames: [String]? = nil,
        batchNormTensorSuffixes: [String] = ["weight", "bias", "running_mean", "running_var"]
    ) {
        self.inputName = inputName
        self.predictedLabelName = predictedLabelName
        self.probabilitiesName = probabilitiesName
        self.layerNames = layerNames
        self.blobNames = blobNames
        self.batchNormTensorSuffixes = batchNormTensorSuffixes
    }

    /// The names the product uses.
    public static let product = ExportNaming()
}

/// A trained model checked and translated into the operations both export formats share:
/// dropout removed, a flatten inserted before the first linear layer, softmax appended,
/// every layer and blob named and every tensor shape checked against the data flowing in.
/// A residual add reads two blobs: the previous step's output and the earlier layer's.
struct ExportPlan {
    enum Operation {
        case convolution(
            inputChannels: Int, outputChannels: Int, kernelSize: Int, stride: Int, padding: Int, groups: Int,
            weight: [Float], bias: [Float])
        case batchNorm(channels: Int, epsilon: Float, gamma: [Float], beta: [Float], mean: [Float], variance: [Float])
        case relu
        /// Unit length along the channels (the scale is folded into the next inner product).
        case l2Normalize
        case maxPool(size: Int, stride: Int)
        case globalAveragePool
        case flatten
        case innerProduct(inputFeatures: Int, outputFeatures: Int, weight: [Float], bias: [Float])
        case softmax
        /// Elementwise sum of the two inputs.
        case add
        /// x where x > 0, else slope[c]·x; `spatial` when the data is [C, H, W] rather than [features].
        case prelu(channels: Int, spatial: Bool, slopes: [Float])
    }

    /// One exported layer: a name, its input blobs (two for an add), one output blob.
    struct Step {
        var name: String
        var inputs: [String]
        var output: String
        var operation: Operation
        /// ONNX initializer names of the layer's tensors, in parameter order.
        var tensorNames: [String]
    }

    /// The shape of the data between layers, batch left out.
    private enum DataShape: Equatable {
        case spatial(channels: Int, height: Int, width: Int)
        case flat(features: Int)
    }

    let input: InputSpecification
    let classLabels: [String]
    let naming: ExportNaming
    let steps: [Step]

    init(model: TrainedModel, naming: ExportNaming) throws(ExportError) {
        let definition = model.definition
        try Self.validate(input: definition.input)
        try Self.validate(labels: definition.classLabels)
        guard model.weights.count == definition.layers.count else {
            throw .weightCountMismatch(layers: definition.layers.count, weights: model.weights.count)
        }

        // `shortcut`: the pending step whose output an add reads besides the previous one's (-1: the input).
        var pending: [(name: String, operation: Operation, tensorSuffixes: [String], shortcut: Int?)] = []
        // Per layer: the pending step that produces its output (-1: the input), and that output's shape.
        var producers: [Int] = []
        var shapes: [DataShape] = []
        var shape = DataShape.spatial(
            channels: definition.input.channels, height: definition.input.height, width: definition.input.width)
        var lastLayer: String?
        var pendingScale: Float?  // of an l2Normalize, waiting for the inner product to absorb it
        for (index, layer) in definition.layers.enumerated() {
            let name = definition.layerNames[index]
            let parameters = try Self.parameters(of: layer, named: name, index: index, weights: model.weights[index])
            if case .dropout = layer {
                producers.append(pending.count - 1)
                shapes.append(shape)
                continue
            }
            if case .linear = layer, case .spatial(let channels, let height, let width) = shape {
                pending.append(("flatten", .flatten, [], nil))
                shape = .flat(features: channels * height * width)
            }
            var shortcut: Int?
            if case .add(let source) = layer {
                guard (0..<index).contains(source) else {
                    throw .invalidLayer(layer: name, reason: "it adds layer \(source), which is not an earlier layer")
                }
                guard shapes[source] == shape else {
                    throw .invalidLayer(
                        layer: name, reason: "it adds layer \(source)'s output, whose shape differs from its input's")
                }
                shortcut = producers[source]
            }
            var operation = try Self.operation(for: layer, named: name, parameters: parameters, shape: &shape)
            if case .l2Normalize(let scale) = layer {
                guard pendingScale == nil else {
                    throw .invalidLayer(layer: name, reason: "two normalisations in a row")
                }
                pendingScale = scale
            } else if case .innerProduct(let inputs, let outputs, let weight, let bias) = operation,
                let scale = pendingScale
            {
                operation = .innerProduct(
                    inputFeatures: inputs, outputFeatures: outputs, weight: weight.map { $0 * scale }, bias: bias)
                pendingScale = nil
            } else if pendingScale != nil, !(layer == .relu) {
                throw .invalidLayer(layer: name, reason: "an l2Normalize must be followed by a linear layer")
            }
            let suffixes: [String]
            if case .batchNorm2D = layer {
                suffixes = naming.batchNormTensorSuffixes
            } else {
                suffixes = layer.parameterShapes.map(\.name)
            }
            pending.append((name, operation, suffixes, shortcut))
            producers.append(pending.count - 1)
            shapes.append(shape)
            lastLayer = name
        }
        guard case .innerProduct(_, let networkOutputs, _, _)? = pending.last?.operation else {
            throw .mustEndWithLinear(lastLayer: lastLayer)
        }
        guard networkOutputs == definition.classLabels.count else {
            throw .labelCountMismatch(labels: definition.classLabels.count, outputs: networkOutputs)
        }
        pending.append(("softmax", .softmax, [], nil))

        let layerNames = naming.layerNames ?? pending.map(\.name)
        let blobNames = naming.blobNames ?? layerNames.dropLast().map { "\($0)_out" }
        try Self.validate(naming: naming, layerNames: layerNames, blobNames: blobNames, layerCount: pending.count)
        guard naming.batchNormTensorSuffixes.count == 4, Set(naming.batchNormTensorSuffixes).count == 4 else {
            throw .invalidNaming(reason: "batchNormTensorSuffixes needs four different names")
        }

        let outputs = blobNames + [naming.probabilitiesName]
        var steps: [Step] = []
        for (index, layer) in pending.enumerated() {
            let name = layerNames[index]
            let previous = index == 0 ? naming.inputName : outputs[index - 1]
            let shortcut = layer.shortcut.map { $0 < 0 ? naming.inputName : outputs[$0] }
            steps.append(
                Step(
                    name: name,
                    inputs: [previous] + (shortcut.map { [$0] } ?? []),
                    output: outputs[index],
                    operation: layer.operation,
                    tensorNames: layer.tensorSuffixes.map { "\(name).\($0)" }))
        }
        self.input = definition.input
        self.classLabels = definition.classLabels
        self.naming = naming
        self.steps = steps
    }

    /// Number of classes, the width of the softmax.
    var classCount: Int { classLabels.count }

    /// "RGB" or "GRAY", as in `InputSpecification.colorSpace`.
    var colorSpaceName: String { input.channels == 1 ? "GRAY" : "RGB" }

    // MARK: - Checks

    private static func validate(input: InputSpecification) throws(ExportError) {
        guard input.width > 0, input.height > 0 else {
            throw .invalidInput(reason: "size \(input.width)x\(input.height) is not positive")
        }
        switch (input.channels, input.colorSpace) {
        case (3, "RGB"), (1, "GRAY"): break
        default:
            throw .invalidInput(reason: "\(input.channels) channels with colour space '\(input.colorSpace)'")
        }
        guard input.bias.count == input.channels else {
            throw .invalidInput(reason: "\(input.bias.count) biases for \(input.channels) channels")
        }
        // Core ML reads a channelScale of 0 as "unset", i.e. 1, so a zero scale would export a different model.
        guard input.scale.isFinite, input.scale != 0, input.bias.allSatisfy(\.isFinite) else {
            throw .invalidInput(reason: "scale \(input.scale) and biases \(input.bias) must be finite, scale non-zero")
        }
    }

    private static func validate(labels: [String]) throws(ExportError) {
        guard !labels.isEmpty else { throw .invalidLabels(reason: "there are none") }
        if let empty = labels.firstIndex(of: "") {
            throw .invalidLabels(reason: "label \(empty) is empty")
        }
        var seen = Set<String>()
        for label in labels where !seen.insert(label).inserted {
            throw .invalidLabels(reason: "'\(label)' appears twice; each class needs its own label")
        }
    }

    private static func validate(
        naming: ExportNaming, layerNames: [String], blobNames: [String], layerCount: Int
    ) throws(ExportError) {
        guard layerNames.count == layerCount else {
            throw .invalidNaming(reason: "\(layerNames.count) layer names for \(layerCount) exported layers")
        }
        guard blobNames.count == layerCount - 1 else {
            throw .invalidNaming(reason: "\(blobNames.count) blob names for \(layerCount - 1) intermediate outputs")
        }
        if let duplicate = firstDuplicate(layerNames) {
            throw .invalidNaming(reason: "layer name '\(duplicate)' is used twice")
        }
        let blobs = [naming.inputName] + blobNames + [naming.probabilitiesName]
        if let duplicate = firstDuplicate(blobs + [naming.predictedLabelName]) {
            throw .invalidNaming(reason: "blob or feature name '\(duplicate)' is used twice")
        }
        if (layerNames + blobs + [naming.predictedLabelName]).contains("") {
            throw .invalidNaming(reason: "a name is empty")
        }
    }

    private static func firstDuplicate(_ names: [String]) -> String? {
        var seen = Set<String>()
        return names.first { !seen.insert($0).inserted }
    }

    /// The layer's tensors by name, after checking names, shapes and values against the definition.
    private static func parameters(
        of layer: LayerSpecification, named name: String, index: Int, weights: LayerWeights
    ) throws(ExportError) -> [String: [Float]] {
        guard weights.name == name else {
            throw .weightNameMismatch(layerIndex: index, expected: name, actual: weights.name)
        }
        let expected = layer.parameterShapes
        for tensor in weights.tensors where !expected.contains(where: { $0.name == tensor.name }) {
            throw .unexpectedParameter(layer: name, parameter: tensor.name)
        }
        var parameters: [String: [Float]] = [:]
        for (parameter, shape) in expected {
            guard let tensor = weights.tensors.first(where: { $0.name == parameter })?.tensor else {
                throw .missingParameter(layer: name, parameter: parameter)
            }
            guard tensor.shape == shape, tensor.scalars.count == shape.reduce(1, *) else {
                throw .parameterShapeMismatch(layer: name, parameter: parameter, expected: shape, actual: tensor.shape)
            }
            guard allFinite(tensor.scalars) else {
                throw .nonFiniteParameter(layer: name, parameter: parameter)
            }
            parameters[parameter] = tensor.scalars
        }
        return parameters
    }

    /// Whether no value is NaN or infinite; a plain loop over the buffer, quick even in debug builds.
    private static func allFinite(_ values: [Float]) -> Bool {
        values.withUnsafeBufferPointer { buffer in
            var index = 0
            while index < buffer.count {
                guard buffer[index].isFinite else { return false }
                index += 1
            }
            return true
        }
    }

    /// The operation for one layer, with the data shape advanced past it.
    private static func operation(
        for layer: LayerSpecification, named name: String, parameters: [String: [Float]], shape: inout DataShape
    ) throws(ExportError) -> Operation {
        switch (layer, shape) {
        case (
            .conv2D(let inputChannels, let outputChannels, let kernelSize, let stride, let padding, let groups),
            .spatial(let channels, let height, let width)
        ):
            guard inputChannels == channels else {
                throw .invalidLayer(layer: name, reason: "it expects \(inputChannels) channels but gets \(channels)")
            }
            guard groups >= 1, inputChannels % groups == 0, outputChannels % groups == 0 else {
                throw .invalidLayer(
                    layer: name,
                    reason: "\(groups) groups do not divide \(inputChannels) -> \(outputChannels) channels")
            }
            guard kernelSize > 0, stride > 0, padding >= 0, padding < kernelSize else {
                throw .invalidLayer(
                    layer: name,
                    reason: "kernel \(kernelSize), stride \(stride), padding \(padding) is not a valid window")
            }
            guard height + 2 * padding >= kernelSize, width + 2 * padding >= kernelSize else {
                throw .invalidLayer(
                    layer: name,
                    reason: "its \(kernelSize)x\(kernelSize) kernel is larger than the \(height)x\(width) input")
            }
            let outHeight = (height + 2 * padding - kernelSize) / stride + 1
            let outWidth = (width + 2 * padding - kernelSize) / stride + 1
            shape = .spatial(channels: outputChannels, height: outHeight, width: outWidth)
            return .convolution(
                inputChannels: inputChannels, outputChannels: outputChannels, kernelSize: kernelSize, stride: stride,
                padding: padding, groups: groups, weight: parameters["weight", default: []],
                bias: parameters["bias", default: []])
        case (.batchNorm2D(let channels, let epsilon, _), .spatial(let incoming, _, _)):
            guard channels == incoming else {
                throw .invalidLayer(layer: name, reason: "it normalises \(channels) channels but gets \(incoming)")
            }
            // Core ML reads an epsilon of 0 as "unset" (1e-5), and 0 divides by zero on dead channels anyway.
            guard epsilon > 0, epsilon.isFinite else {
                throw .invalidLayer(layer: name, reason: "epsilon \(epsilon) must be positive")
            }
            return .batchNorm(
                channels: channels, epsilon: epsilon, gamma: parameters["weight", default: []],
                beta: parameters["bias", default: []], mean: parameters["running_mean", default: []],
                variance: parameters["running_var", default: []])
        case (.relu, _):
            return .relu
        case (.add, _):
            return .add
        case (.prelu(let channels), .spatial(let incoming, _, _)), (.prelu(let channels), .flat(let incoming)):
            guard channels == incoming else {
                throw .invalidLayer(layer: name, reason: "it has \(channels) slopes but gets \(incoming) channels")
            }
            if case .spatial = shape {
                return .prelu(channels: channels, spatial: true, slopes: parameters["weight", default: []])
            }
            return .prelu(channels: channels, spatial: false, slopes: parameters["weight", default: []])
        case (.l2Normalize, _):
            return .l2Normalize
        case (.maxPool2D(let size, let stride), .spatial(let channels, let height, let width)):
            guard size > 0, stride > 0, size <= height, size <= width else {
                throw .invalidLayer(
                    layer: name, reason: "a \(size)x\(size) window does not fit the \(height)x\(width) input")
            }
            shape = .spatial(
                channels: channels, height: (height - size) / stride + 1, width: (width - size) / stride + 1)
            return .maxPool(size: size, stride: stride)
        case (.globalAveragePool, .spatial(let channels, _, _)):
            shape = .spatial(channels: channels, height: 1, width: 1)
            return .globalAveragePool
        case (.linear(let inputFeatures, let outputFeatures), .flat(let features)):
            guard inputFeatures == features else {
                throw .invalidLayer(layer: name, reason: "it expects \(inputFeatures) features but gets \(features)")
            }
            shape = .flat(features: outputFeatures)
            return .innerProduct(
                inputFeatures: inputFeatures, outputFeatures: outputFeatures,
                weight: parameters["weight", default: []], bias: parameters["bias", default: []])
        case (.conv2D, .flat), (.batchNorm2D, .flat), (.maxPool2D, .flat), (.globalAveragePool, .flat):
            throw .invalidLayer(layer: name, reason: "it needs an image-shaped input but follows a linear layer")
        case (.linear, .spatial), (.dropout, _):
            // The caller flattens before linear layers and skips dropout.
            throw .invalidLayer(layer: name, reason: "internal ordering error")
        }
    }
}
