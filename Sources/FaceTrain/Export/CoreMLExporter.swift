import FaceTrainEngine
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
/// residual `add` layers with two inputs, a `crop` layer for the input's crop, all in the first
/// specification), an image input whose normalisation is the image scaler, and `classLabel` / `classProbability` outputs for Vision.
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
        writer.writeMessage(step.operation.coreMLLayer.field) { step.operation.writeCoreMLParameters(to: &$0) }
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
        /// DictionaryFeatureType.stringKeyType.
        static let stringKeyType = 2
        /// NeuralNetworkPreprocessing.scaler.
        static let scaler = 10
    }

    private enum ColorSpace {
        static let grayscale: Int64 = 10
        static let rgb: Int64 = 20
    }
}
