import FaceTrainEngine

/// How each layer kind is written in both export formats: the ONNX operator with its attributes and
/// initializers, and the Core ML layer with its protobuf fields. The one table that maps the
/// engine's layer kinds to exports (the engine knows nothing of formats); ExportPlan orders the
/// operations, CoreMLExporter and ONNXExporter encode them. Not the file formats themselves
/// (ProtobufWriter, the exporters) and not the graph's own operations (ExportOperation.graphForms).

/// A layer kind's export: its form and its lowering from checked tensors.
protocol ExportLowering: LayerKind {
    /// The ONNX operator and Core ML layer the lowering writes; nil for a layer that inference
    /// passes through (dropout), which exports leave out.
    var exportForm: ExportForm? { get }
    /// The layer in both export formats, from its checked tensors (never called when `exportForm`
    /// is nil).
    func lowered(_ input: LoweringInput) -> ExportOperation
}

extension LayerSpecification {
    /// This layer's export. Every kind has one: `ExportFormTableTests` lowers each of
    /// `LayerSpecification.everyKind`, so a kind added without its lowering fails there first.
    var exportLowering: any ExportLowering {
        guard let lowering = layerKind as? any ExportLowering else {
            preconditionFailure("layer kind \(kind.rawValue) has no export lowering in Export/LayerLowering.swift")
        }
        return lowering
    }
}

extension BatchNorm2D.Kind: ExportLowering {
    var exportForm: ExportForm? {
        ExportForm(onnxOperator: "BatchNormalization", coreMLLayer: "batchnorm", coreMLField: 160)
    }

    /// ONNX initializers take the names of `ExportNaming.batchNormTensorSuffixes`.
    func lowered(_ input: LoweringInput) -> ExportOperation {
        let values = parameterShapes.map { input.parameters[$0.name, default: []] }
        let (channels, epsilon) = (channels, epsilon)
        return ExportOperation(
            form: exportForm!, onnxAttributes: [.float("epsilon", epsilon)],
            tensors: zip(input.naming.batchNormTensorSuffixes, values).map {
                ExportTensor(suffix: $0.0, dimensions: [channels], values: $0.1)
            }
        ) { norm in
            norm.writeUnsigned(1, UInt64(channels))
            norm.writeFloat(10, epsilon)
            // gamma, beta, mean, variance
            for (field, tensor) in zip([15, 16, 17, 18], values) {
                norm.writeMessage(field) { $0.writePackedFloats(1, tensor) }
            }
        }
    }
}

extension Conv2D.Kind: ExportLowering {
    var exportForm: ExportForm? { ExportForm(onnxOperator: "Conv", coreMLLayer: "convolution", coreMLField: 100) }

    func lowered(_ input: LoweringInput) -> ExportOperation {
        let (weight, bias) = (input.parameters["weight", default: []], input.parameters["bias", default: []])
        let (kernelSize, stride, padding, groups) = (kernelSize, stride, padding, groups)
        let (outputChannels, kernelChannels) = (outputChannels, inputChannels / groups)
        return ExportOperation(
            form: exportForm!,
            onnxAttributes: [
                .ints("kernel_shape", [kernelSize, kernelSize]),
                .ints("pads", [padding, padding, padding, padding]), .ints("strides", [stride, stride]),
            ]
                // `group` defaults to 1; left out then, so ungrouped models keep their bytes.
                + (groups == 1 ? [] : [.int("group", groups)]),
            tensors: zip(parameterShapes, [weight, bias]).map {
                ExportTensor(suffix: $0.0.name, dimensions: $0.0.shape, values: $0.1)
            }
        ) { conv in
            conv.writeUnsigned(1, UInt64(outputChannels))
            // kernelChannels: the input channels each group sees.
            conv.writeUnsigned(2, UInt64(kernelChannels))
            conv.writeUnsigned(10, UInt64(groups))
            conv.writePackedUnsigned(20, [UInt64(kernelSize), UInt64(kernelSize)])
            conv.writePackedUnsigned(30, [UInt64(stride), UInt64(stride)])
            conv.writePackedUnsigned(40, [1, 1])
            if stride == 1 && 2 * padding == kernelSize - 1 {
                conv.writeMessage(51) { _ in }
            } else {
                conv.writeMessage(50) { ExportOperation.writeValidPadding(padding, to: &$0) }
            }
            conv.writeBool(70, true)
            conv.writeMessage(90) { $0.writePackedFloats(1, weight) }
            conv.writeMessage(91) { $0.writePackedFloats(1, bias) }
        }
    }
}

extension Dropout.Kind: ExportLowering {
    var exportForm: ExportForm? { nil }

    func lowered(_ input: LoweringInput) -> ExportOperation {
        preconditionFailure("exports leave dropout out (no exportForm)")
    }
}

extension GlobalAveragePool.Kind: ExportLowering {
    var exportForm: ExportForm? {
        ExportForm(onnxOperator: "GlobalAveragePool", coreMLLayer: "pooling", coreMLField: 120)
    }

    /// Kernel and stride are ignored with globalPooling; zeros are what coremltools writes.
    func lowered(_ input: LoweringInput) -> ExportOperation {
        ExportOperation(form: exportForm!) { pool in
            pool.writeUnsigned(1, 1)  // PoolingType AVERAGE
            pool.writePackedUnsigned(10, [0, 0])
            pool.writePackedUnsigned(20, [0, 0])
            pool.writeMessage(30) { ExportOperation.writeValidPadding(0, to: &$0) }
            pool.writeBool(50, true)
            pool.writeBool(60, true)
        }
    }
}

extension L2Normalize.Kind: ExportLowering {
    var exportForm: ExportForm? {
        ExportForm(onnxOperator: "LpNormalization", coreMLLayer: "l2normalize", coreMLField: 170)
    }

    /// Core ML: y = x / sqrt(Σx² + ε) over C×H×W; ε must be non-zero (0 reads as unset).
    func lowered(_ input: LoweringInput) -> ExportOperation {
        ExportOperation(form: exportForm!, onnxAttributes: [.int("axis", 1), .int("p", 2)], pendingScale: scale) {
            $0.writeFloat(1, 1e-12)
        }
    }
}

extension Linear.Kind: ExportLowering {
    var exportForm: ExportForm? { ExportForm(onnxOperator: "Gemm", coreMLLayer: "innerProduct", coreMLField: 140) }

    /// W·s: the length of a pending normalisation, which the exported one leaves at 1.
    func lowered(_ input: LoweringInput) -> ExportOperation {
        let saved = input.parameters["weight", default: []]
        let weight = input.pendingScale.map { scale in saved.map { $0 * scale } } ?? saved
        let bias = input.parameters["bias", default: []]
        let (inputFeatures, outputFeatures) = (inputFeatures, outputFeatures)
        return ExportOperation(
            form: exportForm!, onnxAttributes: [.float("alpha", 1), .float("beta", 1), .int("transB", 1)],
            tensors: [
                ExportTensor(suffix: "weight", dimensions: [outputFeatures, inputFeatures], values: weight),
                ExportTensor(suffix: "bias", dimensions: [outputFeatures], values: bias),
            ]
        ) { product in
            product.writeUnsigned(1, UInt64(inputFeatures))
            product.writeUnsigned(2, UInt64(outputFeatures))
            product.writeBool(10, true)
            product.writeMessage(20) { $0.writePackedFloats(1, weight) }
            product.writeMessage(21) { $0.writePackedFloats(1, bias) }
        }
    }
}

extension MaxPool2D.Kind: ExportLowering {
    var exportForm: ExportForm? { ExportForm(onnxOperator: "MaxPool", coreMLLayer: "pooling", coreMLField: 120) }

    func lowered(_ input: LoweringInput) -> ExportOperation {
        let (size, stride) = (size, stride)
        return ExportOperation(
            form: exportForm!,
            onnxAttributes: [.ints("kernel_shape", [size, size]), .ints("strides", [stride, stride])]
        ) { pool in
            pool.writeUnsigned(1, 0)  // PoolingType MAX
            pool.writePackedUnsigned(10, [UInt64(size), UInt64(size)])
            pool.writePackedUnsigned(20, [UInt64(stride), UInt64(stride)])
            pool.writeMessage(30) { ExportOperation.writeValidPadding(0, to: &$0) }
            pool.writeBool(50, true)
        }
    }
}

extension PReLU.Kind: ExportLowering {
    var exportForm: ExportForm? {
        ExportForm(onnxOperator: "PRelu", coreMLLayer: "activation", coreMLField: 130, coreMLActivation: "PReLU")
    }

    /// ONNX broadcasts the slopes against [N, C, H, W] as [C, 1, 1], against [N, F] as [F].
    func lowered(_ input: LoweringInput) -> ExportOperation {
        let slopes = input.parameters["weight", default: []]
        let dimensions = input.graphShape.count == 3 ? [channels, 1, 1] : [channels]
        return ExportOperation(
            form: exportForm!, tensors: [ExportTensor(suffix: "weight", dimensions: dimensions, values: slopes)]
        ) { activation in
            // ActivationParams.PReLU (25) { alpha (1): WeightParams }, one slope per channel (axis -3).
            activation.writeMessage(25) { prelu in prelu.writeMessage(1) { $0.writePackedFloats(1, slopes) } }
        }
    }
}

extension ReLU.Kind: ExportLowering {
    var exportForm: ExportForm? {
        ExportForm(onnxOperator: "Relu", coreMLLayer: "activation", coreMLField: 130, coreMLActivation: "ReLU")
    }

    func lowered(_ input: LoweringInput) -> ExportOperation {
        ExportOperation(form: exportForm!, pendingScale: input.pendingScale) { $0.writeMessage(10) { _ in } }
    }
}

extension ResidualAdd.Kind: ExportLowering {
    var exportForm: ExportForm? { ExportForm(onnxOperator: "Add", coreMLLayer: "add", coreMLField: 230) }

    /// AddLayerParams: the sum of the inputs (its alpha is only added to a single input).
    func lowered(_ input: LoweringInput) -> ExportOperation { ExportOperation(form: exportForm!) }
}

extension Route.Kind: ExportLowering {
    var exportForm: ExportForm? {
        ExportForm(onnxOperator: "Identity", coreMLLayer: "activation", coreMLField: 130, coreMLActivation: "linear")
    }

    /// The plan gives it the source's blob as its only input; Core ML has no identity layer, so
    /// y = 1·x + 0.
    func lowered(_ input: LoweringInput) -> ExportOperation {
        ExportOperation(form: exportForm!) { activation in
            // ActivationParams.linear (5) { alpha (1), beta (2) }; beta 0 is the default, left out.
            activation.writeMessage(5) { $0.writeFloat(1, 1) }
        }
    }
}

extension Upsample.Kind: ExportLowering {
    var exportForm: ExportForm? { ExportForm(onnxOperator: "Resize", coreMLLayer: "upsample", coreMLField: 210) }

    /// ONNX Resize (opset 13) reads X, an empty roi and the scales [1, 1, f, f] (initializers);
    /// nearest with asymmetric coordinates and floor picks input (y / f, x / f), as the engine does.
    func lowered(_ input: LoweringInput) -> ExportOperation {
        let factor = factor
        return ExportOperation(
            form: exportForm!,
            onnxAttributes: [
                .string("coordinate_transformation_mode", "asymmetric"), .string("mode", "nearest"),
                .string("nearest_mode", "floor"),
            ],
            tensors: [
                ExportTensor(suffix: "roi", dimensions: [0], values: []),
                ExportTensor(suffix: "scales", dimensions: [4], values: [1, 1, Float(factor), Float(factor)]),
            ]
        ) { upsample in
            // UpsampleLayerParams: scalingFactor (1) [H, W]; mode (5) NN is 0, the default, left out.
            upsample.writePackedUnsigned(1, [UInt64(factor), UInt64(factor)])
        }
    }
}
