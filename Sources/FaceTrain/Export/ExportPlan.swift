import FaceTrainEngine

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

/// A trained model checked and translated into the operations both export formats share (format-free:
/// each exporter asks its own table, Export/ONNXLowering.swift or Export/CoreMLLowering.swift, what
/// an operation becomes): the input's crop first when it has one, the layers that inference passes
/// through (dropout) left out, a flatten inserted before the first linear layer, softmax appended,
/// every layer and blob named and every tensor checked against the definition. A residual add reads
/// two blobs: the previous step's output and the earlier layer's; a route reads the earlier layer's alone.
struct ExportPlan {
    /// One exported layer: a name, its input blobs (two for an add; a route's is an earlier layer's),
    /// one output blob.
    struct Step {
        var name: String
        var inputs: [String]
        var output: String
        var operation: ExportOperation
    }

    let input: InputSpecification
    let classLabels: [String]
    let naming: ExportNaming
    let steps: [Step]
    /// The graph's outputs: the softmax's probabilities of a classifier, or a detector's heads,
    /// each with its channels.
    let outputs: [(name: String, channels: Int)]
    /// A detector's plan: its input any size, its outputs the heads.
    let isDetector: Bool

    /// A classifier's plan, or with `heads` (one name per output layer of the definition, finest
    /// first) a detector's: no softmax, the heads' blobs named and output as they are.
    init(model: TrainedModel, naming: ExportNaming, heads: [String]? = nil) throws(ExportError) {
        let definition = model.definition
        // The check training ran before its first step: exports refuse nothing it accepted.
        let data: [ModelDefinition.LayerData]
        do {
            if heads == nil { try definition.validate(as: .classifier) }
            data = try definition.checkedLayers()
        } catch {
            throw ExportError(error)
        }
        isDetector = heads != nil
        if let heads, heads.count != definition.outputLayers.count {
            throw .invalidNaming(reason: "\(heads.count) head names for \(definition.outputLayers.count) outputs")
        }
        guard model.weights.count == definition.layers.count else {
            throw .weightCountMismatch(layers: definition.layers.count, weights: model.weights.count)
        }

        // `shortcut`: the pending step whose output an add reads besides the previous one's, or a
        // route instead of it (`readsPrevious` false); -1: the input.
        var pending: [(name: String, operation: ExportOperation, shortcut: Int?, readsPrevious: Bool)] = []
        // Per layer: the pending step that produces its output (-1: the input).
        var producers: [Int] = []
        let input = definition.input
        if input.crop > 0 {
            pending.append(
                ("crop", .centreCrop(border: input.crop, height: input.height, width: input.width), nil, true))
        }
        var graphShape = [input.channels, input.networkHeight, input.networkWidth]
        var pendingScale: Float?  // of an l2Normalize, waiting for the next linear layer to absorb it
        for (index, layer) in definition.layers.enumerated() {
            let name = definition.layerNames[index]
            let kind = layer.layerKind
            var parameters = try Self.parameters(of: layer, named: name, index: index, weights: model.weights[index])
            if kind.isIdentityAtInference {
                producers.append(pending.count - 1)
                continue
            }
            if kind.flattensInput, graphShape.count == 3 {
                pending.append(("flatten", .flatten, nil, true))
                graphShape = [graphShape.reduce(1, *)]
            }
            // Both formats normalise to unit length only: the scale goes into the next linear layer's
            // weights (W·s), past the layers it commutes with (the definition check allows no others).
            switch kind.normalizationScale {
            case .starts: pendingScale = (kind as? L2Normalize.Kind)?.scale
            case .absorbs:
                if let scale = pendingScale { parameters["weight"] = parameters["weight"]?.map { $0 * scale } }
                pendingScale = nil
            case .passes, .refuses: break
            }
            let lowering = LoweringInput(parameters: parameters, graphShape: graphShape, naming: naming)
            pending.append((name, .layer(kind, lowering), kind.shortcutSource.map { producers[$0] }, kind.readsInput))
            producers.append(pending.count - 1)
            // Until the flatten the graph keeps [C, H, W]: a pooled vector is [C, 1, 1] there.
            let shape = data[index].shape
            graphShape = data[index].isFlattened || shape.count == 3 ? shape : shape + [1, 1]
        }
        if heads == nil { pending.append(("softmax", .softmax, nil, true)) }

        let layerNames = naming.layerNames ?? pending.map(\.name)
        guard layerNames.count == pending.count else {
            throw .invalidNaming(reason: "\(layerNames.count) layer names for \(pending.count) exported layers")
        }
        // Each step's output blob: "<layer>_out", the softmax's the probabilities, a head its name.
        var outputs: [String]
        if let heads {
            outputs = naming.blobNames ?? layerNames.map { "\($0)_out" }
            guard outputs.count == pending.count else {
                throw .invalidNaming(reason: "\(outputs.count) blob names for \(pending.count) exported layers")
            }
            for (head, layer) in zip(heads, definition.outputLayers) { outputs[producers[layer]] = head }
            self.outputs = zip(heads, definition.outputLayers).map { ($0, data[$1].shape[0]) }
        } else {
            let blobNames = naming.blobNames ?? layerNames.dropLast().map { "\($0)_out" }
            guard blobNames.count == pending.count - 1 else {
                throw .invalidNaming(
                    reason: "\(blobNames.count) blob names for \(pending.count - 1) intermediate outputs")
            }
            outputs = blobNames + [naming.probabilitiesName]
            self.outputs = [(naming.probabilitiesName, definition.classLabels.count)]
        }
        try Self.validate(naming: naming, layerNames: layerNames, outputs: outputs)
        guard naming.batchNormTensorSuffixes.count == 4, Set(naming.batchNormTensorSuffixes).count == 4 else {
            throw .invalidNaming(reason: "batchNormTensorSuffixes needs four different names")
        }

        var steps: [Step] = []
        for (index, layer) in pending.enumerated() {
            let name = layerNames[index]
            let previous = index == 0 ? naming.inputName : outputs[index - 1]
            let shortcut = layer.shortcut.map { $0 < 0 ? naming.inputName : outputs[$0] }
            steps.append(
                Step(
                    name: name,
                    inputs: (layer.readsPrevious ? [previous] : []) + (shortcut.map { [$0] } ?? []),
                    output: outputs[index],
                    operation: layer.operation))
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

    /// `outputs`: every step's output blob, the last one's included (as many as `layerNames`).
    private static func validate(naming: ExportNaming, layerNames: [String], outputs: [String]) throws(ExportError) {
        if let duplicate = firstDuplicate(layerNames) {
            throw .invalidNaming(reason: "layer name '\(duplicate)' is used twice")
        }
        let blobs = [naming.inputName] + outputs
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
}
