import FaceTrainEngine

/// The Core ML table: what each operation of an export plan becomes in Core ML, a case of the
/// `NeuralNetworkLayer.layer` oneof and the fields of its parameter message, for each engine layer
/// kind (a `CoreMLLowering` conformance per kind, below) and for the operations exports add around
/// the layers. Only CoreMLExporter reads it; the ONNX table is Export/ONNXLowering.swift. Not the
/// order of the operations or which layers are left out (ExportPlan), and not the rest of the file
/// (CoreMLExporter). Field numbers follow coremltools' `NeuralNetwork.proto`.

/// A layer kind's Core ML layer. A kind that inference passes through (dropout) has none: exports
/// leave it out. `ExportFormTableTests` checks that every other kind of `everyKind` has one.
protocol CoreMLLowering: LayerKind {
    /// The `NeuralNetworkLayer.layer` case the kind becomes.
    var coreMLLayer: CoreMLLayer { get }
    /// Writes the fields of that case's parameter message from the layer's checked tensors.
    func writeCoreMLParameters(_ input: LoweringInput, to writer: inout ProtobufWriter)
}

extension LayerKind {
    /// This kind's Core ML lowering; the plan asks only for kinds that inference does not pass through.
    var coreMLLowering: any CoreMLLowering {
        guard let lowering = self as? any CoreMLLowering else {
            preconditionFailure("layer kind \(name.rawValue) has no Core ML lowering in Export/CoreMLLowering.swift")
        }
        return lowering
    }
}

/// A case of the `NeuralNetworkLayer.layer` oneof: its name, its field number and, for an
/// "activation" layer, the `ActivationParams` case inside it.
struct CoreMLLayer: Sendable, Equatable {
    var name: String
    var field: Int
    var activation: String?

    static let convolution = CoreMLLayer(name: "convolution", field: 100)
    static let pooling = CoreMLLayer(name: "pooling", field: 120)
    static func activation(_ activation: String) -> CoreMLLayer {
        CoreMLLayer(name: "activation", field: 130, activation: activation)
    }
    static let innerProduct = CoreMLLayer(name: "innerProduct", field: 140)
    static let batchnorm = CoreMLLayer(name: "batchnorm", field: 160)
    static let l2normalize = CoreMLLayer(name: "l2normalize", field: 170)
    static let softmax = CoreMLLayer(name: "softmax", field: 175)
    static let crop = CoreMLLayer(name: "crop", field: 190)
    static let upsample = CoreMLLayer(name: "upsample", field: 210)
    static let add = CoreMLLayer(name: "add", field: 230)
    static let flatten = CoreMLLayer(name: "flatten", field: 301)
}

extension ExportOperation {
    /// This operation's layer case.
    var coreMLLayer: CoreMLLayer {
        switch self {
        case .centreCrop: .crop
        case .flatten: .flatten
        case .layer(let kind, _): kind.coreMLLowering.coreMLLayer
        case .softmax: .softmax
        }
    }

    /// Writes the fields of this operation's parameter message (inside field `coreMLLayer.field`).
    func writeCoreMLParameters(to writer: inout ProtobufWriter) {
        switch self {
        case .centreCrop(let border, _, _):
            // The crop layer of the first specification: CropLayerParams.cropAmounts has the layout of
            // ValidPadding's paddingAmounts.
            writeValidPadding(border, to: &writer)
        case .flatten:
            // None: mode CHANNEL_FIRST (0) flattens in C, H, W order, like ONNX Flatten and the trainer.
            break
        case .layer(let kind, let input):
            kind.coreMLLowering.writeCoreMLParameters(input, to: &writer)
        case .softmax:
            break
        }
    }
}

/// `ValidPadding { paddingAmounts { borderAmounts [H, W] } }` with the same amount on every edge.
private func writeValidPadding(_ padding: Int, to writer: inout ProtobufWriter) {
    writer.writeMessage(1) { amounts in
        for _ in 0..<2 {
            amounts.writeMessage(10) { edges in
                edges.writeUnsigned(1, UInt64(padding))
                edges.writeUnsigned(2, UInt64(padding))
            }
        }
    }
}

// MARK: - The layer kinds, alphabetically

extension BatchNorm2D.Kind: CoreMLLowering {
    var coreMLLayer: CoreMLLayer { .batchnorm }

    func writeCoreMLParameters(_ input: LoweringInput, to norm: inout ProtobufWriter) {
        norm.writeUnsigned(1, UInt64(channels))
        norm.writeFloat(10, epsilon)
        // gamma, beta, mean, variance
        for (field, parameter) in zip([15, 16, 17, 18], parameterShapes) {
            norm.writeMessage(field) { $0.writePackedFloats(1, input.parameters[parameter.name] ?? []) }
        }
    }
}

extension Conv2D.Kind: CoreMLLowering {
    var coreMLLayer: CoreMLLayer { .convolution }

    func writeCoreMLParameters(_ input: LoweringInput, to conv: inout ProtobufWriter) {
        conv.writeUnsigned(1, UInt64(outputChannels))
        // kernelChannels: the input channels each group sees.
        conv.writeUnsigned(2, UInt64(inputChannels / groups))
        conv.writeUnsigned(10, UInt64(groups))
        conv.writePackedUnsigned(20, [UInt64(kernelSize), UInt64(kernelSize)])
        conv.writePackedUnsigned(30, [UInt64(stride), UInt64(stride)])
        conv.writePackedUnsigned(40, [1, 1])
        if stride == 1 && 2 * padding == kernelSize - 1 {
            conv.writeMessage(51) { _ in }  // same padding
        } else {
            conv.writeMessage(50) { writeValidPadding(padding, to: &$0) }
        }
        conv.writeBool(70, true)
        conv.writeMessage(90) { $0.writePackedFloats(1, input.parameters["weight"] ?? []) }
        conv.writeMessage(91) { $0.writePackedFloats(1, input.parameters["bias"] ?? []) }
    }
}

extension GlobalAveragePool.Kind: CoreMLLowering {
    var coreMLLayer: CoreMLLayer { .pooling }

    /// Kernel and stride are ignored with globalPooling; zeros are what coremltools writes.
    func writeCoreMLParameters(_ input: LoweringInput, to pool: inout ProtobufWriter) {
        pool.writeUnsigned(1, 1)  // PoolingType AVERAGE
        pool.writePackedUnsigned(10, [0, 0])
        pool.writePackedUnsigned(20, [0, 0])
        pool.writeMessage(30) { writeValidPadding(0, to: &$0) }
        pool.writeBool(50, true)
        pool.writeBool(60, true)
    }
}

extension L2Normalize.Kind: CoreMLLowering {
    var coreMLLayer: CoreMLLayer { .l2normalize }

    /// y = x / sqrt(Σx² + ε) over C×H×W, to unit length (the plan folds the scale into the next
    /// linear layer); ε must be non-zero (0 reads as unset).
    func writeCoreMLParameters(_ input: LoweringInput, to norm: inout ProtobufWriter) {
        norm.writeFloat(1, 1e-12)
    }
}

extension Linear.Kind: CoreMLLowering {
    var coreMLLayer: CoreMLLayer { .innerProduct }

    func writeCoreMLParameters(_ input: LoweringInput, to product: inout ProtobufWriter) {
        product.writeUnsigned(1, UInt64(inputFeatures))
        product.writeUnsigned(2, UInt64(outputFeatures))
        product.writeBool(10, true)
        product.writeMessage(20) { $0.writePackedFloats(1, input.parameters["weight"] ?? []) }
        product.writeMessage(21) { $0.writePackedFloats(1, input.parameters["bias"] ?? []) }
    }
}

extension MaxPool2D.Kind: CoreMLLowering {
    var coreMLLayer: CoreMLLayer { .pooling }

    func writeCoreMLParameters(_ input: LoweringInput, to pool: inout ProtobufWriter) {
        pool.writeUnsigned(1, 0)  // PoolingType MAX
        pool.writePackedUnsigned(10, [UInt64(size), UInt64(size)])
        pool.writePackedUnsigned(20, [UInt64(stride), UInt64(stride)])
        pool.writeMessage(30) { writeValidPadding(0, to: &$0) }
        pool.writeBool(50, true)
    }
}

extension PReLU.Kind: CoreMLLowering {
    var coreMLLayer: CoreMLLayer { .activation("PReLU") }

    /// ActivationParams.PReLU (25) { alpha (1): WeightParams }, one slope per channel (axis -3).
    func writeCoreMLParameters(_ input: LoweringInput, to activation: inout ProtobufWriter) {
        activation.writeMessage(25) { prelu in
            prelu.writeMessage(1) { $0.writePackedFloats(1, input.parameters["weight"] ?? []) }
        }
    }
}

extension ReLU.Kind: CoreMLLowering {
    var coreMLLayer: CoreMLLayer { .activation("ReLU") }

    /// ActivationParams.ReLU (10), an empty message.
    func writeCoreMLParameters(_ input: LoweringInput, to activation: inout ProtobufWriter) {
        activation.writeMessage(10) { _ in }
    }
}

extension ResidualAdd.Kind: CoreMLLowering {
    var coreMLLayer: CoreMLLayer { .add }

    /// No fields: AddLayerParams sums its inputs (its alpha is only added to a single input).
    func writeCoreMLParameters(_ input: LoweringInput, to add: inout ProtobufWriter) {}
}

extension Route.Kind: CoreMLLowering {
    /// Core ML has no identity layer: y = 1 x + 0 of the earlier layer's blob.
    var coreMLLayer: CoreMLLayer { .activation("linear") }

    func writeCoreMLParameters(_ input: LoweringInput, to activation: inout ProtobufWriter) {
        // ActivationParams.linear (5) { alpha (1), beta (2) }; beta 0 is the default, left out.
        activation.writeMessage(5) { $0.writeFloat(1, 1) }
    }
}

extension Upsample.Kind: CoreMLLowering {
    var coreMLLayer: CoreMLLayer { .upsample }

    func writeCoreMLParameters(_ input: LoweringInput, to upsample: inout ProtobufWriter) {
        // UpsampleLayerParams: scalingFactor (1) [H, W]; mode (5) NN is 0, the default, left out.
        upsample.writePackedUnsigned(1, [UInt64(factor), UInt64(factor)])
    }
}
