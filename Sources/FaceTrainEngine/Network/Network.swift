import Foundation

/// A network built from a `ModelDefinition`: its layers in order, run forward and backward.
///
/// `layers` is exactly the definition's layer list. Internally, each Conv2D → BatchNorm2D → ReLU
/// (→ MaxPool 2×2 or global average pool) run of an ungrouped or depthwise convolution executes as
/// one fused `ConvolutionBlock`; every other layer runs on its own. A residual `add` or a `route`
/// reads the kept output of an earlier layer (so no fused block may hide that output inside it, nor
/// one of the network's outputs), and backward adds its gradient to what reaches that layer from
/// the layer after it (a route sends its input nothing); an output's own gradient joins the same
/// way. A value type: `best = network` keeps a snapshot.
///
/// Sizes come from the input of each call, so a definition that is fully convolutional runs at
/// any size `validateAnySize` accepts, with the same blocks and buffers.
///
/// Buffers are reused across steps, which is why forward, backward and the inference helpers are
/// `mutating`.
public struct Network: Sendable, CustomStringConvertible {
    public let definition: ModelDefinition
    /// One layer per `definition.layers` entry, in order.
    public private(set) var layers: [any Layer]

    private enum Stage: Sendable {
        case block(Int)
        case layer(Int)
    }

    private var stages: [Stage] = []
    private var blocks: [ConvolutionBlock] = []
    /// Output of each stage (kept for backward and for residual adds).
    private var outputs: [Buffer<Float>] = []
    /// The stage whose buffer in `outputs` holds each stage's output: itself, except at inference
    /// for a route, which then reads its source's buffer instead of copying it (`run`), its own
    /// buffer left stale. After an inference forward, read stage outputs through this; backward
    /// reads `outputs` directly, which a training forward (every holder itself) makes safe.
    private var holders: [Int] = []
    /// dLoss/dOutput of stage s lives in buffer s % 2: backward only needs a stage's gradient and
    /// its input's at a time, so two buffers serve the whole network.
    private var outputGradients = [Buffer<Float>(), Buffer<Float>()]
    private var outputShapes: [[Int]] = []
    /// For each stage, the stage whose output its residual add or route reads (nil for other stages).
    private var shortcutStages: [Int?] = []
    /// dLoss/dOutput that residual adds and routes send back to each stage they read, and the
    /// gradients given for the network's outputs, summed during backward.
    private var shortcutGradients: [Buffer<Float>] = []
    /// Whether a stage gets gradient besides its next stage's: it is read by an add or a route, or
    /// it is one of the network's outputs.
    private var receivesShortcut: [Bool] = []
    /// The stage of each of `definition.outputLayers`, in order.
    private var outputStages: [Int] = []
    private var input = Tensor(zeros: [0])
    private var hasForwardForTraining = false

    /// A freshly initialised network: He-normal conv and linear weights, zero biases, γ = 1, β = 0,
    /// all drawn from `SplitMix64(seed:)`.
    public init(definition: ModelDefinition, seed: UInt64) throws {
        self.definition = definition
        // Checked first (`ModelDefinition.checkedLayers`, the check the exporters run too), so no
        // layer is ever made from sizes that do not fit.
        let shapes = try definition.layerOutputShapes()
        var generator = SplitMix64(seed: seed)
        layers = []
        for specification in definition.layers { layers.append(specification.layerKind.makeLayer(using: &generator)) }
        plan(shapes: shapes.map { [1] + $0 })
    }

    /// A network holding saved weights (from `weights` or a bundle); throws when they do not fit
    /// the definition.
    public init(definition: ModelDefinition, weights: [LayerWeights]) throws {
        try self.init(definition: definition, seed: 0)
        try load(weights)
    }

    /// The network of a trained model.
    public init(model: TrainedModel) throws {
        try self.init(definition: model.definition, weights: model.weights)
    }

    /// Layer names as in weight files, "<index>.<kind>".
    public var layerNames: [String] { definition.layerNames }

    /// The definition and current weights, for bundles and exporters.
    public var trainedModel: TrainedModel { TrainedModel(definition: definition, weights: weights) }

    /// The saved tensors of every layer (empty for layers without parameters), in layer order.
    public var weights: [LayerWeights] {
        zip(layerNames, layers).map { name, layer in
            LayerWeights(name: name, tensors: layer.parameters.map { NamedTensor(name: $0.name, tensor: $0.value) })
        }
    }

    /// Replaces every parameter value with the saved one; checks names and shapes first.
    public mutating func load(_ weights: [LayerWeights]) throws {
        guard weights.count == layers.count else {
            throw NetworkError.weightsMismatch(
                "\(weights.count) layers of weights for a definition of \(layers.count) layers")
        }
        for (index, saved) in weights.enumerated() {
            let name = layerNames[index]
            guard saved.name == name else {
                throw NetworkError.weightsMismatch("layer \(index) is named \"\(saved.name)\", expected \"\(name)\"")
            }
            let expected = definition.layers[index].parameterShapes
            guard saved.tensors.map(\.name) == expected.map(\.name) else {
                throw NetworkError.weightsMismatch(
                    "\(name) has tensors \(saved.tensors.map(\.name)), expected \(expected.map(\.name))")
            }
            for (tensor, shape) in zip(saved.tensors, expected) where tensor.tensor.shape != shape.shape {
                throw NetworkError.weightsMismatch(
                    "\(name).\(tensor.name) has shape \(tensor.tensor.shape), expected \(shape.shape)")
            }
        }
        for index in layers.indices {
            var tensors = weights[index].tensors.makeIterator()
            layers[index].updateParameters { parameter in
                if let saved = tensors.next() { parameter.value = saved.tensor }
            }
        }
    }

    /// What a non-strict load did with each tensor, by parameter key ("0.conv2d.weight").
    public struct LoadReport: Sendable, Equatable {
        /// Tensors of the network that took saved values.
        public var taken: [String] = []
        /// Saved tensors with no parameter of the same key and shape here.
        public var skipped: [String] = []
        /// Parameters that kept their initial values (no saved tensor fits them).
        public var initialised: [String] = []
    }

    /// Takes every saved tensor whose key ("<layer>.<kind>.<name>") and shape match a parameter,
    /// leaving the others as initialised: a pretrained trunk into a network with a new head.
    @discardableResult
    public mutating func loadMatching(_ weights: [LayerWeights]) -> LoadReport {
        var saved: [String: Tensor] = [:]
        for layer in weights { for tensor in layer.tensors { saved["\(layer.name).\(tensor.name)"] = tensor.tensor } }
        var report = LoadReport()
        var used = Set<String>()
        updateParameters { key, parameter in
            if let tensor = saved[key], tensor.shape == parameter.value.shape {
                parameter.value = tensor
                report.taken.append(key)
                used.insert(key)
            } else {
                report.initialised.append(key)
            }
        }
        report.skipped = saved.keys.filter { !used.contains($0) }.sorted()
        return report
    }

    /// Applies `update` to every parameter, with its key "<layer index>.<kind>.<name>" such as
    /// "0.conv2d.weight", in layer and file order. Optimizers and loaders use this.
    public mutating func updateParameters(_ update: (_ key: String, _ parameter: inout Parameter) -> Void) {
        for index in layers.indices {
            let prefix = layerNames[index]
            layers[index].updateParameters { update("\(prefix).\($0.name)", &$0) }
        }
    }

    /// States of the dropout layers' generators, by layer name; part of a training checkpoint.
    public var generatorStates: [String: UInt64] {
        get {
            var states: [String: UInt64] = [:]
            for (name, layer) in zip(layerNames, layers) {
                if let dropout = layer as? Dropout { states[name] = dropout.generator.state }
            }
            return states
        }
        set {
            for index in layers.indices {
                guard var dropout = layers[index] as? Dropout, let state = newValue[layerNames[index]] else { continue }
                dropout.generator.state = state
                layers[index] = dropout
            }
        }
    }

    /// Sets every parameter's gradient to zero: `backward` adds to them, so trainers call this
    /// before each backward pass (and may skip it to sum the gradients of several batches).
    public mutating func zeroGradients() {
        updateParameters { _, parameter in
            parameter.gradient.scalars.withUnsafeMutableBufferPointer { $0.update(repeating: 0) }
        }
    }

    /// Number of trainable scalars.
    public var trainableParameterCount: Int {
        layers.reduce(0) { $0 + $1.parameters.filter(\.isTrainable).reduce(0) { $0 + $1.value.count } }
    }

    /// One line per layer: name, output shape (batch 1) and parameter count.
    public var description: String {
        let input = definition.input
        let shape = [input.channels, input.networkHeight, input.networkWidth]
        let crop = input.crop > 0 ? " (the centre of \(input.channels)x\(input.height)x\(input.width))" : ""
        var lines = ["Network: input \(shape.map(String.init).joined(separator: "x"))\(crop)"]
        // Built from a definition that checked, so the shapes are there.
        let shapes = (try? definition.layerOutputShapes()) ?? []
        for (name, (layer, shape)) in zip(layerNames, zip(layers, shapes)) {
            let count = layer.parameters.reduce(0) { $0 + $1.value.count }
            let shapeText = shape.map(String.init).joined(separator: "x")
            let paddedName = name.padding(toLength: 18, withPad: " ", startingAt: 0)
            let paddedShape = shapeText.padding(toLength: 12, withPad: " ", startingAt: 0)
            lines.append("  \(paddedName) \(paddedShape) \(count) parameters")
        }
        lines.append("  total trainable parameters: \(trainableParameterCount)")
        return lines.joined(separator: "\n")
    }

    // MARK: - Running

    /// When inference of a batch smaller than the workers splits each image among them:
    /// `whenAlone` (the default) while no other forward runs in the process (Parallel.runningForwards),
    /// `always` (tests of the shared path), `never`.
    package enum ImageSharing: Sendable { case whenAlone, always, never }
    package var imageSharing = ImageSharing.whenAlone

    /// Makes what inference keeps between calls (Winograd's transformed weights) before the first
    /// call, so that copies of this network share it instead of each making it again: for holders
    /// that copy a network per request or per thread. Changes no result.
    public mutating func prepareForInference() {
        for stage in stages {
            guard case .block(let blockIndex) = stage else { continue }
            let convIndex = blocks[blockIndex].convolution
            let conv = takeLayer(convIndex, as: Conv2D.self)
            blocks[blockIndex].prepareForInference(convolution: conv)
            layers[convIndex] = conv
        }
    }

    /// The network's output (logits) for `input` [N, C, H, W].
    ///
    /// `.training` uses batch statistics, updates batch-norm running statistics, applies dropout and
    /// keeps what `backward` needs; `.inference` does none of that.
    public mutating func forward(_ input: Tensor, mode: Mode) -> Tensor {
        run(input, mode: mode, stageCount: stages.count)
        return Tensor(shape: outputShapes[stages.count - 1], scalars: outputs[holders[stages.count - 1]].array)
    }

    /// The outputs of every layer of `definition.outputLayers`, in that order, for `input`
    /// [N, C, H, W] (see `forward` for the modes). `backward(outputGradients:)` takes their gradients.
    public mutating func forwardOutputs(_ input: Tensor, mode: Mode) -> [Tensor] {
        run(input, mode: mode, stageCount: stages.count)
        return outputStages.map { Tensor(shape: outputShapes[$0], scalars: outputs[holders[$0]].array) }
    }

    /// Back-propagates dLoss/dOutput (the shape of `forward`'s result) through the last training
    /// forward pass and ADDS to every parameter's gradient (see `zeroGradients`). The input
    /// gradient is not computed. Other outputs of a network with several get a zero gradient.
    public mutating func backward(_ outputGradient: Tensor) {
        backward(last: outputGradient, others: [])
    }

    /// `backward` for a network with several outputs: one dLoss/dOutput per layer of
    /// `definition.outputLayers`, in that order, each the shape `forwardOutputs` returned.
    public mutating func backward(outputGradients gradients: [Tensor]) {
        let outputLayers = definition.outputLayers
        precondition(
            gradients.count == outputStages.count,
            "\(gradients.count) output gradients for a network of \(outputStages.count) outputs")
        // The last layer is always an output (the definition check refuses dead layers).
        let lastIndex = outputLayers.firstIndex(of: definition.layers.count - 1)!
        let others = outputStages.indices.filter { $0 != lastIndex }.map {
            (stage: outputStages[$0], gradient: gradients[$0])
        }
        backward(last: gradients[lastIndex], others: others)
    }

    /// Back-propagates `last` from the last stage and each of `others` into its stage's
    /// shortcut-gradient buffer, where the loop adds it to what comes from the next stage.
    private mutating func backward(last outputGradient: Tensor, others: [(stage: Int, gradient: Tensor)]) {
        precondition(hasForwardForTraining, "Network.backward needs a forward pass in training mode first")
        let last = stages.count - 1
        precondition(
            outputGradient.shape == outputShapes[last],
            "gradient shape \(outputGradient.shape) != output \(outputShapes[last])")
        outputGradients[last % 2].assign(outputGradient.scalars)
        for stage in stages.indices where receivesShortcut[stage] {
            shortcutGradients[stage].resize(outputShapes[stage].reduce(1, *))
            shortcutGradients[stage].fill(0)
        }
        for (stage, gradient) in others {
            precondition(
                gradient.shape == outputShapes[stage],
                "gradient shape \(gradient.shape) != output \(outputShapes[stage]) of stage \(stage)")
            gradient.scalars.withUnsafeBufferPointer {
                addInPlace(shortcutGradients[stage].mutablePointer(), $0.baseAddress!, count: $0.count)
            }
        }
        let images = input
        images.scalars.withUnsafeBufferPointer { imageBuffer in
            for stageIndex in stages.indices.reversed() {
                let source = stageIndex == 0 ? imageBuffer.baseAddress! : outputs[stageIndex - 1].pointer
                let sourceShape = stageIndex == 0 ? images.shape : outputShapes[stageIndex - 1]
                var target: UnsafeMutablePointer<Float>?
                if stageIndex > 0 {
                    outputGradients[(stageIndex - 1) % 2].resize(sourceShape.reduce(1, *))
                    target = outputGradients[(stageIndex - 1) % 2].mutablePointer()
                }
                if receivesShortcut[stageIndex] {
                    // What residual adds and routes sent here (and an output's gradient) joins what
                    // came from the next stage.
                    addInPlace(
                        outputGradients[stageIndex % 2].mutablePointer(), shortcutGradients[stageIndex].pointer,
                        count: outputShapes[stageIndex].reduce(1, *))
                }
                let gradient = outputGradients[stageIndex % 2].pointer
                if let shortcut = shortcutStages[stageIndex] {
                    addInPlace(
                        shortcutGradients[shortcut].mutablePointer(), gradient,
                        count: outputShapes[stageIndex].reduce(1, *))
                }
                switch stages[stageIndex] {
                case .block(let blockIndex):
                    // Indices only: a copy of the block would share, and so force copies of, its buffers.
                    let (convIndex, normIndex) = (blocks[blockIndex].convolution, blocks[blockIndex].normalization)
                    var conv = takeLayer(convIndex, as: Conv2D.self)
                    var norm = takeLayer(normIndex, as: BatchNorm2D.self)
                    blocks[blockIndex].backward(
                        input: source, inputShape: sourceShape, output: outputs[stageIndex].pointer,
                        outputGradient: gradient, convolution: &conv, normalization: &norm, inputGradient: target)
                    layers[convIndex] = conv
                    layers[normIndex] = norm
                case .layer(let layerIndex):
                    let shape = outputShapes[stageIndex]
                    let dOutput = Tensor(
                        shape: shape, scalars: Array(UnsafeBufferPointer(start: gradient, count: shape.reduce(1, *))))
                    let dInput = layers[layerIndex].backward(dOutput)
                    layers[layerIndex].releaseCaches()
                    if let target {
                        dInput.scalars.withUnsafeBufferPointer { target.update(from: $0.baseAddress!, count: $0.count) }
                    }
                }
            }
        }
        input = Tensor(zeros: [0])
        hasForwardForTraining = false
    }

    /// Class probabilities [N, classes] for images [N, C, H, W] (inference mode, softmax of the logits).
    public mutating func probabilities(for images: Tensor) throws -> Tensor {
        try validate(images)
        var logits = forward(images, mode: .inference)
        let classes = logits.shape[1]
        for row in 0..<logits.shape[0] {
            let range = (row * classes)..<((row + 1) * classes)
            let maximum = logits.scalars[range].max() ?? 0
            var total: Float = 0
            for index in range {
                logits.scalars[index] = expf(logits.scalars[index] - maximum)
                total += logits.scalars[index]
            }
            for index in range { logits.scalars[index] /= total }
        }
        return logits
    }

    /// The face embeddings [N, features] for images [N, C, H, W], in inference mode: what the
    /// classifier compares, i.e. the input of the L2 normalisation when there is one (after the
    /// batch-norm neck); for an extractor (nothing but normalisation after the pool) its last
    /// layer's output; otherwise the output of the last global average pool.
    public mutating func embeddings(for images: Tensor) throws -> Tensor {
        try validate(images)
        guard let poolIndex = definition.layers.lastIndex(of: .globalAveragePool) else {
            throw NetworkError.noEmbedding
        }
        let normalizeIndex = definition.layers.lastIndex { $0.kind == .l2Normalize }
        // An extractor (no classifier after the pool) ends at its embedding: after the neck.
        let isExtractor = !definition.layers[poolIndex...].contains { $0.kind == .linear }
        let embeddingLayer =
            normalizeIndex.map { max($0 - 1, poolIndex) } ?? (isExtractor ? definition.layers.count - 1 : poolIndex)
        guard let stageIndex = stages.firstIndex(where: { lastLayer(of: $0) == embeddingLayer }) else {
            throw NetworkError.noEmbedding
        }
        run(images, mode: .inference, stageCount: stageIndex + 1)
        return Tensor(shape: outputShapes[stageIndex], scalars: outputs[holders[stageIndex]].array)
    }

    /// Checks that `images` is [N ≥ 1, C, H, W] as the definition's input says.
    public func validate(_ images: Tensor) throws {
        let input = definition.input
        let expected = [input.channels, input.height, input.width]
        guard images.shape.count == 4, images.shape[0] >= 1, Array(images.shape.dropFirst()) == expected else {
            throw NetworkError.inputShape(got: images.shape, expected: expected)
        }
    }

    /// Checks that `images` [N ≥ 1, C, H, W] can run at their own size: C as the definition
    /// says, and H and W (after the input's crop) multiples of `definition.totalStride` at which
    /// every layer's check passes (a fully convolutional definition: any such size; one with a
    /// linear layer on a feature map: its own size only). For inference on whole photos.
    public func validateAnySize(_ images: Tensor) throws {
        let input = definition.input
        let stride = definition.totalStride
        guard images.shape.count == 4, images.shape[0] >= 1, images.shape[1] == input.channels else {
            throw NetworkError.anySizeShape(got: images.shape, channels: input.channels, stride: stride, reason: nil)
        }
        let (height, width) = (images.shape[2] - 2 * input.crop, images.shape[3] - 2 * input.crop)
        guard height > 0, width > 0, height % stride == 0, width % stride == 0 else {
            throw NetworkError.anySizeShape(got: images.shape, channels: input.channels, stride: stride, reason: nil)
        }
        var resized = definition
        (resized.input.height, resized.input.width) = (images.shape[2], images.shape[3])
        do {
            _ = try resized.checkedLayers()
        } catch {
            // The layer and its reason, without the definition error's own hint.
            let reason =
                if case .invalidLayer(let index, let kind, let problem) = error {
                    "layer \(index) (\(kind)) \(problem)"
                } else { error.description }
            throw NetworkError.anySizeShape(got: images.shape, channels: input.channels, stride: stride, reason: reason)
        }
    }

    private mutating func run(_ whole: Tensor, mode: Mode, stageCount: Int) {
        let running = Parallel.runningForwards.add(1, ordering: .relaxed).newValue
        defer { Parallel.runningForwards.subtract(1, ordering: .relaxed) }
        let shareImages = imageSharing == .always || (imageSharing == .whenAlone && running == 1)
        precondition(
            whole.shape.count == 4 && whole.shape[0] >= 1, "Network input must be [N, C, H, W], got \(whole.shape)")
        // The input's crop happens before the first layer, as in the exports.
        let border = definition.input.crop
        let images = border > 0 ? centreCrop(whole, border: border) : whole
        var shape = images.shape
        holders = Array(stages.indices)
        images.scalars.withUnsafeBufferPointer { imageBuffer in
            for stageIndex in 0..<stageCount {
                let source = stageIndex == 0 ? imageBuffer.baseAddress! : outputs[holders[stageIndex - 1]].pointer
                switch stages[stageIndex] {
                case .block(let blockIndex):
                    let (convIndex, normIndex) = (blocks[blockIndex].convolution, blocks[blockIndex].normalization)
                    let conv = takeLayer(convIndex, as: Conv2D.self)
                    var norm = takeLayer(normIndex, as: BatchNorm2D.self)
                    let outputShape = ConvolutionBlock.outputShape(
                        convolutionOutput: conv.outputShape(for: shape), pooling: blocks[blockIndex].pooling)
                    outputs[stageIndex].resize(outputShape.reduce(1, *))
                    let target = outputs[stageIndex].mutablePointer()
                    blocks[blockIndex].forward(
                        input: source, inputShape: shape, convolution: conv, normalization: &norm, mode: mode,
                        shareImages: shareImages,
                        output: target)
                    layers[convIndex] = conv
                    layers[normIndex] = norm
                    shape = outputShape
                case .layer(let layerIndex):
                    if mode == .inference,
                        forwardWithoutCopies(layerIndex, stage: stageIndex, source: source, shape: &shape)
                    {
                        break
                    }
                    let tensor = Tensor(
                        shape: shape, scalars: Array(UnsafeBufferPointer(start: source, count: shape.reduce(1, *))))
                    if let shortcut = shortcutStages[stageIndex],
                        var reader = layers[layerIndex] as? any ReadsEarlierOutput
                    {
                        reader.shortcut = Tensor(
                            shape: outputShapes[shortcut], scalars: outputs[holders[shortcut]].array)
                        layers[layerIndex] = reader
                    }
                    let result = layers[layerIndex].forward(tensor, mode: mode)
                    outputs[stageIndex].assign(result.scalars)
                    shape = result.shape
                }
                outputShapes[stageIndex] = shape
            }
        }
        if mode == .training {
            input = images
            hasForwardForTraining = stageCount == stages.count
        } else {
            hasForwardForTraining = false
        }
    }

    /// A route, a 2x upsampling or an add at inference, straight between the stages' buffers (a
    /// route copies nothing: its stage reads its source's buffer): the general path copies the
    /// input, the earlier output and the result into tensors and back (most of the 11 % of the
    /// detector's time spent copying, its neck being made of them). Returns false for every other
    /// layer. The same arithmetic, so the same bits.
    private mutating func forwardWithoutCopies(
        _ layerIndex: Int, stage: Int, source: UnsafePointer<Float>, shape: inout [Int]
    ) -> Bool {
        let count = shape.reduce(1, *)
        switch layers[layerIndex] {
        case is Route:
            guard let earlier = shortcutStages[stage] else { return false }
            holders[stage] = holders[earlier]
            shape = outputShapes[earlier]
        case let upsample as Upsample where upsample.factor == 2 && shape.count == 4:
            outputs[stage].resize(count * 4)
            nearestUpsample2x(
                source, planes: shape[0] * shape[1], height: shape[2], width: shape[3],
                output: outputs[stage].mutablePointer())
            shape = [shape[0], shape[1], 2 * shape[2], 2 * shape[3]]
        case is ResidualAdd:
            guard let earlier = shortcutStages[stage], outputShapes[earlier] == shape else { return false }
            outputs[stage].resize(count)
            add(source, outputs[holders[earlier]].pointer, into: outputs[stage].mutablePointer(), count: count)
        default:
            return false
        }
        return true
    }

    /// Moves a layer out of `layers` (leaving a placeholder) so it can be mutated without a copy.
    private mutating func takeLayer<L: Layer>(_ index: Int, as type: L.Type) -> L {
        guard let layer = layers[index] as? L else { fatalError("layer \(index) is not a \(L.self)") }
        layers[index] = Placeholder()
        return layer
    }

    private func lastLayer(of stage: Stage) -> Int {
        switch stage {
        case .block(let index): blocks[index].lastLayer
        case .layer(let index): index
        }
    }

    // MARK: - Planning

    /// Groups fusable runs into blocks; `shapes` are the layers' output shapes for a batch of 1.
    private mutating func plan(shapes: [[Int]]) {
        let specs = definition.layers
        // Layers whose outputs an add or a route reads, and the network's outputs: a fused block
        // may end at one, never pass it.
        let read = Set(specs.compactMap(\.shortcutSource)).union(definition.outputLayers)
        var stageOfLayer: [Int: Int] = [:]
        var index = 0
        while index < specs.count {
            if case .conv2D(let inputs, let channels, _, _, _, let groups) = specs[index],
                groups == 1 || (groups == inputs && channels % inputs == 0), index + 2 < specs.count,
                case .batchNorm2D(let normChannels, _, _) = specs[index + 1], normChannels == channels,
                specs[index + 2] == .relu, !read.contains(index), !read.contains(index + 1)
            {
                var pooling = ConvolutionBlock.Pooling.none
                let convShape = shapes[index]
                if index + 3 < specs.count, !read.contains(index + 2) {
                    if specs[index + 3] == .maxPool2D(size: 2, stride: 2), convShape[2] % 2 == 0, convShape[3] % 2 == 0
                    {
                        pooling = .max2x2
                    } else if specs[index + 3] == .globalAveragePool {
                        pooling = .globalAverage
                    }
                }
                let last = index + (pooling == .none ? 2 : 3)
                stageOfLayer[last] = stages.count
                stages.append(.block(blocks.count))
                blocks.append(
                    ConvolutionBlock(convolution: index, normalization: index + 1, pooling: pooling, lastLayer: last))
                index = last + 1
            } else {
                stageOfLayer[index] = stages.count
                stages.append(.layer(index))
                index += 1
            }
        }
        shortcutStages = stages.map { stage in
            guard case .layer(let layerIndex) = stage, let source = specs[layerIndex].shortcutSource else { return nil }
            return stageOfLayer[source]
        }
        outputStages = definition.outputLayers.map { stageOfLayer[$0]! }
        receivesShortcut = stages.indices.map { stage in
            shortcutStages.contains(stage) || (outputStages.contains(stage) && stage != stages.count - 1)
        }
        shortcutGradients = stages.map { _ in Buffer<Float>() }
        outputs = stages.map { _ in Buffer<Float>() }
        outputShapes = stages.map { _ in [] }
    }
}

/// Why a network could not be built or loaded.
public enum NetworkError: Error, CustomStringConvertible, Equatable {
    case weightsMismatch(String)
    case inputShape(got: [Int], expected: [Int])
    /// `validateAnySize` refused the images; `reason` is the layer check that failed at their size.
    case anySizeShape(got: [Int], channels: Int, stride: Int, reason: String?)
    case noEmbedding

    public var description: String {
        switch self {
        case .weightsMismatch(let reason):
            "Weights do not match the model definition: \(reason).\n"
                + "HINT: the weights come from a different architecture or class list; "
                + "retrain or pick the matching bundle."
        case .inputShape(let got, let expected):
            "Input images have shape \(got), expected [N, \(expected.map(String.init).joined(separator: ", "))].\n"
                + "HINT: resize crops to the model's input size and channel count."
        case .anySizeShape(let got, let channels, let stride, let reason):
            "Input images have shape \(got), expected [N, \(channels), H, W] with H and W multiples of "
                + "\(stride) (the network's total stride)\(reason.map { ": at that size, \($0)" } ?? "").\n"
                + "HINT: pad the images right and bottom to a multiple of \(stride); a definition with a "
                + "linear layer on a feature map runs at its own input size only."
        case .noEmbedding:
            "This model has no global average pool, so it has no embedding layer.\n"
                + "HINT: use a ref-small style definition."
        }
    }
}
