/// The one check of a model definition: what the engine can run is what the exporters can write.
///
/// `Network` runs the layer checks when it is built, the fit and pretrain sessions run `validate`
/// before their first training step, and the exporters run it again on what they are given, so a
/// definition that could not be exported never trains for 90 epochs first.
extension ModelDefinition {
    /// What a definition is for: a classifier ends with the linear layer the exports put a softmax
    /// on; an extractor (a pretrained base) gets that head later.
    public enum Role: Sendable {
        case extractor
        case classifier
    }

    /// The data after one layer: its shape (batch left out) and whether a linear layer came before.
    package struct LayerData: Equatable {
        package var shape: [Int]
        package var isFlattened: Bool
    }

    /// Checks every layer against the data flowing in and returns the data after each one.
    package func checkedLayers() throws(ModelDefinitionError) -> [LayerData] {
        var data = LayerData(shape: [input.channels, input.networkHeight, input.networkWidth], isFlattened: false)
        var outputs: [LayerData] = []
        var pendingNormalization = false
        for (index, layer) in layers.enumerated() {
            let kind = layer.layerKind
            func fail(_ reason: String) -> ModelDefinitionError {
                .invalidLayer(index: index, kind: kind.name, reason: reason)
            }
            do {
                try kind.check(
                    LayerInput(
                        index: index, shape: data.shape, isFlattened: data.isFlattened,
                        earlierShapes: outputs.map(\.shape), earlierFlattened: outputs.map(\.isFlattened)))
            } catch {
                throw fail(error.reason)
            }
            switch (kind.normalizationScale, pendingNormalization) {
            case (.starts, true): throw fail("two normalisations in a row")
            case (.starts, false): pendingNormalization = true
            case (.refuses, true): throw fail("an l2Normalize must be followed by a linear layer")
            case (.absorbs, _): pendingNormalization = false
            case (.passes, _), (.refuses, false): break
            }
            let shape = kind.outputShape(for: data.shape, earlierShapes: outputs.map(\.shape))
            // A route's data is its source's, whatever came before it.
            let isFlattened =
                kind.readsInput
                ? data.isFlattened || kind.flattensInput : kind.shortcutSource.map { outputs[$0].isFlattened } ?? false
            data = LayerData(shape: shape, isFlattened: isFlattened)
            outputs.append(data)
        }
        try checkOutputs()
        return outputs
    }

    /// The network's outputs are layers, each listed once, and every layer's output is read: by
    /// the next layer (unless that is a route), by an add or route, or as an output. A layer that
    /// a route skips and nothing reads is a dead branch: computed, trained on nothing, exported.
    private func checkOutputs() throws(ModelDefinitionError) {
        if let outputs {
            guard !outputs.isEmpty else { throw .invalidOutputs(reason: "the list is empty") }
            if let outside = outputs.first(where: { !layers.indices.contains($0) }) {
                throw .invalidOutputs(reason: "\(outside) is not a layer index (0..<\(layers.count))")
            }
            if Set(outputs).count != outputs.count {
                throw .invalidOutputs(reason: "\(outputs) lists a layer twice")
            }
        }
        var read = Set(outputLayers)
        for (index, layer) in layers.enumerated() {
            let kind = layer.layerKind
            if kind.readsInput, index > 0 { read.insert(index - 1) }
            if let source = kind.shortcutSource { read.insert(source) }
        }
        if let dead = layers.indices.first(where: { !read.contains($0) }) {
            let skipped = layers.indices.contains(dead + 1) ? ": layer \(dead + 1) routes past it" : ""
            throw .invalidLayer(
                index: dead, kind: layers[dead].kind,
                reason: "its output is never read\(skipped), and no add, route or network output reads it "
                    + "(list it in `outputs`, route from it, or remove it)")
        }
    }

    /// How many input pixels one pixel of the smallest feature map spans: the product of the
    /// convolutions' and pools' strides along the deepest path, divided by the upsampling factors
    /// on the way (a route takes its source's). Any-size inference takes sizes that are multiples of it.
    public var totalStride: Int {
        var strides: [Int] = []
        for layer in layers {
            let kind = layer.layerKind
            let incoming = kind.readsInput ? strides.last ?? 1 : kind.shortcutSource.map { strides[$0] } ?? 1
            strides.append(max(1, incoming * kind.spatialStride / kind.upsamplingFactor))
        }
        return strides.max() ?? 1
    }

    /// The oldest manifest format that describes this definition: 2 for the layer kinds and the
    /// input crop that came after the first, 3 for routes, upsampling and a list of outputs, so an
    /// older facetrain refuses the file by version.
    public var minimumFormatVersion: Int {
        max(layers.map(\.minimumFormatVersion).max() ?? 1, input.crop > 0 ? 2 : 1, outputs == nil ? 1 : 3)
    }

    /// The output shape of every layer (batch left out), after checking them all.
    public func layerOutputShapes() throws(ModelDefinitionError) -> [[Int]] {
        try checkedLayers().map(\.shape)
    }

    /// Checks the input, every layer and, for a classifier, the labels and the final linear layer:
    /// everything the exporters need, so it can run before training starts.
    public func validate(as role: Role) throws(ModelDefinitionError) {
        try validateInput()
        if role == .classifier { try validateLabels() }
        _ = try checkedLayers()
        guard role == .classifier else { return }
        if let outputs, outputs != [layers.count - 1] {
            throw .invalidOutputs(
                reason: "a classifier returns its last layer alone, but the definition lists \(outputs)")
        }
        let last = layers.indices.last { !layers[$0].layerKind.isIdentityAtInference }
        guard let last, case .linear(_, let outputFeatures) = layers[last] else {
            throw .mustEndWithLinear(lastLayer: last.map { layerNames[$0] })
        }
        guard outputFeatures == classLabels.count else {
            throw .labelCountMismatch(labels: classLabels.count, outputs: outputFeatures)
        }
    }

    private func validateInput() throws(ModelDefinitionError) {
        guard input.width > 0, input.height > 0 else {
            throw .invalidInput(reason: "size \(input.width)x\(input.height) is not positive")
        }
        guard input.crop >= 0, input.networkWidth > 0, input.networkHeight > 0 else {
            throw .invalidInput(
                reason: "a crop of \(input.crop) pixels a side leaves nothing of \(input.width)x\(input.height)")
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

    private func validateLabels() throws(ModelDefinitionError) {
        guard !classLabels.isEmpty else { throw .invalidLabels(reason: "there are none") }
        if let empty = classLabels.firstIndex(of: "") {
            throw .invalidLabels(reason: "label \(empty) is empty")
        }
        var seen = Set<String>()
        for label in classLabels where !seen.insert(label).inserted {
            throw .invalidLabels(reason: "'\(label)' appears twice; each class needs its own label")
        }
    }
}

/// Why a model definition can be neither trained nor exported: what is wrong, where, and what to do.
public enum ModelDefinitionError: Error, CustomStringConvertible, Equatable {
    case invalidInput(reason: String)
    /// Layer `index` (of kind `kind`) cannot take the data that reaches it.
    case invalidLayer(index: Int, kind: LayerKindName, reason: String)
    case invalidLabels(reason: String)
    /// The last layer that inference runs is not linear (nil: there is none).
    case mustEndWithLinear(lastLayer: String?)
    case labelCountMismatch(labels: Int, outputs: Int)
    /// The list of output layers (`ModelDefinition.outputs`) is wrong.
    case invalidOutputs(reason: String)

    public var description: String {
        switch self {
        case .invalidInput(let reason):
            "Model definition: the input specification is invalid: \(reason).\n"
                + "HINT: the input must be 1 (GRAY) or 3 (RGB) channels with one finite bias per channel, a "
                + "non-zero scale and a crop that leaves at least one pixel."
        case .invalidLayer(let index, let kind, let reason):
            "Model definition: layer \(index) (\(kind.rawValue)): \(reason).\n"
                + "HINT: fix layer \(index) in the architecture or the manifest's layer list; facetrain checks "
                + "the whole definition before the first training step and again before each export."
        case .invalidLabels(let reason):
            "Model definition: the class labels are invalid: \(reason).\n"
                + "HINT: each class needs its own non-empty label."
        case .mustEndWithLinear(let lastLayer):
            "Model definition: a classifier must end with a linear layer (the exports append the softmax), "
                + "but its last layer is \(lastLayer.map { "'\($0)'" } ?? "missing").\n"
                + "HINT: end the layer list with a linear layer with one output per class."
        case .labelCountMismatch(let labels, let outputs):
            "Model definition: there are \(labels) class labels but the last layer has \(outputs) outputs.\n"
                + "HINT: the label list and the final linear layer must have the same length, in output order."
        case .invalidOutputs(let reason):
            "Model definition: the output layers are invalid: \(reason).\n"
                + "HINT: `outputs` lists layer indices, each once, whose outputs the network returns; leave it "
                + "out for the last layer alone."
        }
    }
}
