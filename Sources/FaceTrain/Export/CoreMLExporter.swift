import Foundation

/// Options of the Core ML encoder; the defaults are what the app expects.
public struct CoreMLExportOptions: Sendable, Equatable {
    public var naming: ExportNaming
    /// Description of the image input; nil gives "Face crop, RGB 64x64" (colour space and size of the model).
    public var inputDescription: String?
    /// Description of the probability dictionary output; nil writes none.
    public var probabilitiesDescription: String?
    /// Description of the label output; nil writes none.
    public var predictedLabelDescription: String?

    /// Options with product names and output descriptions.
    public init(
        naming: ExportNaming = .product,
        inputDescription: String? = nil,
        probabilitiesDescription: String? = "Probability of each class label",
        predictedLabelDescription: String? = "Most likely class label"
    ) {
        self.naming = naming
        self.inputDescription = inputDescription
        self.probabilitiesDescription = probabilitiesDescription
        self.predictedLabelDescription = predictedLabelDescription
    }

    /// The options the product uses.
    public static let product = CoreMLExportOptions()
}

/// Writes a trained model as a Core ML `.mlmodel`: specification version 1 (iOS 11), a
/// `neuralNetworkClassifier` of legacy layers with float32 weights (convolutions with `nGroups`,
/// residual `add` layers with two inputs, both in the first specification), an image input whose
/// normalisation is the image scaler, and `classLabel` / `classProbability` outputs for Vision.
///
/// Field numbers and layouts follow coremltools' `Model.proto`, `NeuralNetwork.proto` and
/// `FeatureTypes.proto` (github.com/apple/coremltools, `mlmodel/format/`).
public enum CoreMLExporter {
    /// File name of the export inside a bundle.
    public static let fileName = "FaceClassifier.mlmodel"
    /// The specification version written: 1 is what iOS 11.0 loads.
    public static let specificationVersion = 1

    /// The serialized `CoreML.Specification.Model` of `model`.
    public static func encode(
        _ model: TrainedModel, metadata: ExportMetadata, options: CoreMLExportOptions = .product
    ) throws(ExportError) -> Data {
        let plan = try ExportPlan(model: model, naming: options.naming)
        var writer = ProtobufWriter()
        writer.writeSigned(Field.Model.specificationVersion, Int64(specificationVersion))
        writer.writeMessage(Field.Model.description) { writeDescription(plan, metadata, options, to: &$0) }
        writer.writeMessage(Field.Model.neuralNetworkClassifier) { writeClassifier(plan, to: &$0) }
        return Data(writer.bytes)
    }

    // MARK: - Description

    private static func writeDescription(
        _ plan: ExportPlan, _ metadata: ExportMetadata, _ options: CoreMLExportOptions, to writer: inout ProtobufWriter
    ) {
        let naming = plan.naming
        let inputDescription =
            options.inputDescription ?? "Face crop, \(plan.colorSpaceName) \(plan.input.width)x\(plan.input.height)"
        writer.writeMessage(Field.Description.input) { feature in
            feature.writeString(Field.Feature.name, naming.inputName)
            feature.writeString(Field.Feature.shortDescription, inputDescription)
            feature.writeMessage(Field.Feature.type) { type in
                type.writeMessage(Field.FeatureType.imageType) { image in
                    image.writeSigned(1, Int64(plan.input.width))
                    image.writeSigned(2, Int64(plan.input.height))
                    image.writeSigned(3, plan.input.channels == 1 ? ColorSpace.grayscale : ColorSpace.rgb)
                }
            }
        }
        writer.writeMessage(Field.Description.output) { feature in
            feature.writeString(Field.Feature.name, naming.probabilitiesName)
            feature.writeString(Field.Feature.shortDescription, options.probabilitiesDescription ?? "")
            feature.writeMessage(Field.Feature.type) { type in
                type.writeMessage(Field.FeatureType.dictionaryType) { $0.writeMessage(Field.stringKeyType) { _ in } }
            }
        }
        writer.writeMessage(Field.Description.output) { feature in
            feature.writeString(Field.Feature.name, naming.predictedLabelName)
            feature.writeString(Field.Feature.shortDescription, options.predictedLabelDescription ?? "")
            feature.writeMessage(Field.Feature.type) { $0.writeMessage(Field.FeatureType.stringType) { _ in } }
        }
        writer.writeString(Field.Description.predictedFeatureName, naming.predictedLabelName)
        writer.writeString(Field.Description.predictedProbabilitiesName, naming.probabilitiesName)
        writer.writeMessage(Field.Description.metadata) { meta in
            meta.writeString(1, metadata.shortDescription)
            meta.writeString(2, metadata.versionString)
            meta.writeString(3, metadata.author)
            meta.writeString(4, metadata.license)
            for (key, value) in metadata.userDefinedEntries {
                meta.writeMessage(100) { entry in
                    entry.writeString(1, key)
                    entry.writeString(2, value)
                }
            }
        }
    }

    // MARK: - Network

    private static func writeClassifier(_ plan: ExportPlan, to writer: inout ProtobufWriter) {
        for step in plan.steps {
            writer.writeMessage(Field.Classifier.layers) { writeLayer(step, to: &$0) }
        }
        writer.writeMessage(Field.Classifier.preprocessing) { preprocessing in
            preprocessing.writeString(1, plan.naming.inputName)
            preprocessing.writeMessage(Field.scaler) { scaler in
                scaler.writeFloat(10, plan.input.scale)
                if plan.input.channels == 3 {
                    scaler.writeFloat(20, plan.input.bias[2])
                    scaler.writeFloat(21, plan.input.bias[1])
                    scaler.writeFloat(22, plan.input.bias[0])
                } else {
                    scaler.writeFloat(30, plan.input.bias[0])
                }
            }
        }
        writer.writeMessage(Field.Classifier.stringClassLabels) { labels in
            for label in plan.classLabels { labels.writeString(1, label, always: true) }
        }
        writer.writeString(Field.Classifier.labelProbabilityLayerName, plan.naming.probabilitiesName)
    }

    private static func writeLayer(_ step: ExportPlan.Step, to writer: inout ProtobufWriter) {
        writer.writeString(1, step.name)
        for input in step.inputs { writer.writeString(2, input) }
        writer.writeString(3, step.output)
        switch step.operation {
        case .convolution(
            let inputChannels, let outputChannels, let kernelSize, let stride, let padding, let groups, let weight,
            let bias):
            writer.writeMessage(Field.Layer.convolution) { conv in
                conv.writeUnsigned(1, UInt64(outputChannels))
                // kernelChannels: the input channels each group sees.
                conv.writeUnsigned(2, UInt64(inputChannels / groups))
                conv.writeUnsigned(10, UInt64(groups))
                conv.writePackedUnsigned(20, [UInt64(kernelSize), UInt64(kernelSize)])
                conv.writePackedUnsigned(30, [UInt64(stride), UInt64(stride)])
                conv.writePackedUnsigned(40, [1, 1])
                if stride == 1 && 2 * padding == kernelSize - 1 {
                    conv.writeMessage(51) { _ in }
                } else {
                    conv.writeMessage(50) { writeValidPadding(padding, to: &$0) }
                }
                conv.writeBool(70, true)
                conv.writeMessage(90) { $0.writePackedFloats(1, weight) }
                conv.writeMessage(91) { $0.writePackedFloats(1, bias) }
            }
        case .batchNorm(let channels, let epsilon, let gamma, let beta, let mean, let variance):
            writer.writeMessage(Field.Layer.batchnorm) { norm in
                norm.writeUnsigned(1, UInt64(channels))
                norm.writeFloat(10, epsilon)
                norm.writeMessage(15) { $0.writePackedFloats(1, gamma) }
                norm.writeMessage(16) { $0.writePackedFloats(1, beta) }
                norm.writeMessage(17) { $0.writePackedFloats(1, mean) }
                norm.writeMessage(18) { $0.writePackedFloats(1, variance) }
            }
        case .relu:
            writer.writeMessage(Field.Layer.activation) { $0.writeMessage(10) { _ in } }
        case .prelu(_, _, let slopes):
            // ActivationParams.PReLU (25) { alpha (1): WeightParams }, one slope per channel (axis -3).
            writer.writeMessage(Field.Layer.activation) { activation in
                activation.writeMessage(25) { prelu in prelu.writeMessage(1) { $0.writePackedFloats(1, slopes) } }
            }
        case .l2Normalize:
            // y = x / sqrt(Σx² + ε) over C×H×W; ε must be non-zero (0 reads as unset).
            writer.writeMessage(Field.Layer.l2normalize) { $0.writeFloat(1, 1e-12) }
        case .maxPool(let size, let stride):
            writer.writeMessage(Field.Layer.pooling) { pool in
                pool.writeUnsigned(1, PoolingType.max)
                pool.writePackedUnsigned(10, [UInt64(size), UInt64(size)])
                pool.writePackedUnsigned(20, [UInt64(stride), UInt64(stride)])
                pool.writeMessage(30) { writeValidPadding(0, to: &$0) }
                pool.writeBool(50, true)
            }
        case .globalAveragePool:
            // Kernel and stride are ignored with globalPooling; zeros are what coremltools writes.
            writer.writeMessage(Field.Layer.pooling) { pool in
                pool.writeUnsigned(1, PoolingType.average)
                pool.writePackedUnsigned(10, [0, 0])
                pool.writePackedUnsigned(20, [0, 0])
                pool.writeMessage(30) { writeValidPadding(0, to: &$0) }
                pool.writeBool(50, true)
                pool.writeBool(60, true)
            }
        case .flatten:
            // mode CHANNEL_FIRST (0) flattens in C, H, W order, like ONNX Flatten and the trainer.
            writer.writeMessage(Field.Layer.flatten) { _ in }
        case .innerProduct(let inputFeatures, let outputFeatures, let weight, let bias):
            writer.writeMessage(Field.Layer.innerProduct) { product in
                product.writeUnsigned(1, UInt64(inputFeatures))
                product.writeUnsigned(2, UInt64(outputFeatures))
                product.writeBool(10, true)
                product.writeMessage(20) { $0.writePackedFloats(1, weight) }
                product.writeMessage(21) { $0.writePackedFloats(1, bias) }
            }
        case .softmax:
            writer.writeMessage(Field.Layer.softmax) { _ in }
        case .add:
            // AddLayerParams: the sum of the inputs (its alpha is only added to a single input).
            writer.writeMessage(Field.Layer.add) { _ in }
        }
    }

    /// `ValidPadding { paddingAmounts { borderAmounts [H, W] } }` with the same amount on every edge.
    private static func writeValidPadding(_ padding: Int, to writer: inout ProtobufWriter) {
        writer.writeMessage(1) { amounts in
            for _ in 0..<2 {
                amounts.writeMessage(10) { edges in
                    edges.writeUnsigned(1, UInt64(padding))
                    edges.writeUnsigned(2, UInt64(padding))
                }
            }
        }
    }

    // MARK: - Field numbers of the messages with more than a handful of fields

    private enum Field {
        enum Model {
            static let specificationVersion = 1
            static let description = 2
            static let neuralNetworkClassifier = 403
        }
        enum Description {
            static let input = 1
            static let output = 10
            static let predictedFeatureName = 11
            static let predictedProbabilitiesName = 12
            static let metadata = 100
        }
        enum Feature {
            static let name = 1
            static let shortDescription = 2
            static let type = 3
        }
        enum FeatureType {
            static let stringType = 3
            static let imageType = 4
            static let dictionaryType = 6
        }
        enum Classifier {
            static let layers = 1
            static let preprocessing = 2
            static let stringClassLabels = 100
            static let labelProbabilityLayerName = 200
        }
        enum Layer {
            static let convolution = 100
            static let pooling = 120
            static let activation = 130
            static let l2normalize = 170
            static let innerProduct = 140
            static let batchnorm = 160
            static let softmax = 175
            static let add = 230
            static let flatten = 301
        }
        /// DictionaryFeatureType.stringKeyType.
        static let stringKeyType = 2
        /// NeuralNetworkPreprocessing.scaler.
        static let scaler = 10
    }

    private enum ColorSpace {
        static let grayscale: Int64 = 10
        static let rgb: Int64 = 20
    }

    private enum PoolingType {
        static let max: UInt64 = 0
        static let average: UInt64 = 1
    }
}
