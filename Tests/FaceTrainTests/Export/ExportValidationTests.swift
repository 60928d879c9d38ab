import Foundation
import Testing

@testable import FaceTrain
@testable import FaceTrainEngine

/// The encoders refuse models that would export wrong or unloadable files, with errors that say why.
struct ExportValidationTests {
    static let metadata = ExportMetadata(version: 1)

    /// A small valid RGB model: conv, bn, relu, pool, gap, linear to `classes` outputs.
    static func smallModel(classes: Int = 3, labels: [String]? = nil) -> TrainedModel {
        let definition = ModelDefinition.tinyClassifier(
            input: InputSpecification(width: 8, height: 8, channels: 3), outputFeatures: classes,
            classLabels: labels ?? (1...classes).map(String.init))
        return TrainedModel.seeded(definition, seed: 1)
    }

    /// The error both encoders throw for `model`; they must agree.
    static func exportError(_ model: TrainedModel, naming: ExportNaming = .product) -> ExportError? {
        var errors: [ExportError?] = []
        do {
            _ = try CoreMLExporter.encode(model, metadata: metadata, options: CoreMLExportOptions(naming: naming))
            errors.append(nil)
        } catch { errors.append(error) }
        do {
            _ = try ONNXExporter.encode(model, metadata: metadata, options: ONNXExportOptions(naming: naming))
            errors.append(nil)
        } catch { errors.append(error) }
        #expect(errors[0] == errors[1], "the Core ML and ONNX encoders disagree")
        return errors[0]
    }

    @Test func validModelExports() {
        #expect(Self.exportError(Self.smallModel()) == nil)
    }

    @Test func labelCountMustEqualSoftmaxWidth() {
        let model = Self.smallModel(classes: 3, labels: ["1", "2"])
        #expect(Self.exportError(model) == .labelCountMismatch(labels: 2, outputs: 3))
        #expect(
            Self.exportError(model)?.description.contains("2 class labels but its last layer has 3 outputs") == true)
    }

    @Test func labelsMustBeUniqueAndNonEmpty() {
        #expect(
            Self.exportError(Self.smallModel(classes: 3, labels: ["1", "2", "1"]))
                == .invalidLabels(reason: "'1' appears twice; each class needs its own label"))
        #expect(
            Self.exportError(Self.smallModel(classes: 2, labels: ["1", ""]))
                == .invalidLabels(reason: "label 1 is empty"))
    }

    @Test func weightsMustMatchTheDefinition() {
        var missing = Self.smallModel()
        missing.weights[1].tensors.removeLast()
        #expect(Self.exportError(missing) == .missingParameter(layer: "1.batchnorm2d", parameter: "running_var"))

        var reshaped = Self.smallModel()
        reshaped.weights[5].tensors[0].tensor = Tensor(zeros: [4, 3])
        #expect(
            Self.exportError(reshaped)
                == .parameterShapeMismatch(layer: "5.linear", parameter: "weight", expected: [3, 4], actual: [4, 3]))

        var extra = Self.smallModel()
        extra.weights[2].tensors.append(NamedTensor(name: "weight", tensor: Tensor(zeros: [1])))
        #expect(Self.exportError(extra) == .unexpectedParameter(layer: "2.relu", parameter: "weight"))

        var short = Self.smallModel()
        short.weights.removeLast()
        #expect(Self.exportError(short) == .weightCountMismatch(layers: 6, weights: 5))

        var renamed = Self.smallModel()
        renamed.weights.swapAt(2, 3)
        #expect(
            Self.exportError(renamed) == .weightNameMismatch(layerIndex: 2, expected: "2.relu", actual: "3.maxpool2d"))
    }

    @Test func nonFiniteWeightsAreRefused() {
        var model = Self.smallModel()
        model.weights[0].tensors[0].tensor.scalars[5] = .nan
        #expect(Self.exportError(model) == .nonFiniteParameter(layer: "0.conv2d", parameter: "weight"))
        model = Self.smallModel()
        model.weights[1].tensors[3].tensor.scalars[0] = .infinity
        #expect(Self.exportError(model) == .nonFiniteParameter(layer: "1.batchnorm2d", parameter: "running_var"))
    }

    @Test func inconsistentArchitecturesAreRefused() {
        var definition = Self.smallModel().definition
        definition.layers[0] = .conv2D(inputChannels: 1, outputChannels: 4, kernelSize: 3, stride: 1, padding: 1)
        #expect(
            Self.exportError(TrainedModel.seeded(definition, seed: 1))
                == .invalidLayer(layer: "0.conv2d", reason: "it expects 1 channels but gets 3"))

        definition = Self.smallModel().definition
        definition.layers.remove(at: 4)  // no global pool: the linear layer would get 4x4x4 features
        definition.layers[4] = .linear(inputFeatures: 4, outputFeatures: 3)
        #expect(
            Self.exportError(TrainedModel.seeded(definition, seed: 1))
                == .invalidLayer(layer: "4.linear", reason: "it expects 4 features but gets 64"))

        definition = Self.smallModel().definition
        definition.layers.append(.relu)
        #expect(Self.exportError(TrainedModel.seeded(definition, seed: 1)) == .mustEndWithLinear(lastLayer: "6.relu"))

        definition = Self.smallModel().definition
        definition.layers[1] = .batchNorm2D(channels: 4, epsilon: 0, momentum: 0.1)
        #expect(
            Self.exportError(TrainedModel.seeded(definition, seed: 1))
                == .invalidLayer(layer: "1.batchnorm2d", reason: "epsilon 0.0 must be positive"))

        definition = Self.smallModel().definition
        definition.layers.insert(.maxPool2D(size: 2, stride: 2), at: 4)
        definition.layers.insert(.maxPool2D(size: 2, stride: 2), at: 4)
        definition.layers.insert(.maxPool2D(size: 2, stride: 2), at: 4)
        #expect(
            Self.exportError(TrainedModel.seeded(definition, seed: 1))
                == .invalidLayer(layer: "6.maxpool2d", reason: "a 2x2 window does not fit the 1x1 input"))
    }

    /// Residual adds and grouped convolutions the engine would refuse are refused by the exporters too.
    @Test func invalidBranchesAreRefused() {
        var definition = Self.smallModel().definition
        definition.layers.insert(.add(source: 2), at: 3)  // after the ReLU: adds its own input's shape, fine
        #expect(Self.exportError(TrainedModel.seeded(definition, seed: 1)) == nil)
        definition.layers[3] = .add(source: 5)
        #expect(
            Self.exportError(TrainedModel.seeded(definition, seed: 1))
                == .invalidLayer(layer: "3.add", reason: "it adds layer 5, which is not an earlier layer"))
        definition = Self.smallModel().definition
        definition.layers.insert(.add(source: 2), at: 4)  // after the pool: 4x4 against the ReLU's 8x8
        #expect(
            Self.exportError(TrainedModel.seeded(definition, seed: 1))
                == .invalidLayer(
                    layer: "4.add",
                    reason: "it adds layer 2's output of shape [4, 8, 8] to an input of shape [4, 4, 4]"))

        definition = Self.smallModel().definition
        definition.layers[0] = .conv2D(
            inputChannels: 3, outputChannels: 4, kernelSize: 3, stride: 1, padding: 1, groups: 2)
        #expect(
            Self.exportError(TrainedModel.seeded(definition, seed: 1))
                == .invalidLayer(layer: "0.conv2d", reason: "2 groups do not divide 3 -> 4 channels"))
    }

    @Test func inputSpecificationMustBeExpressibleInCoreML() {
        var model = Self.smallModel()
        model.definition.input.scale = 0
        #expect(Self.exportError(model).map { "\($0)" }?.contains("scale non-zero") == true)
        model = Self.smallModel()
        model.definition.input.bias = [0]
        #expect(Self.exportError(model) == .invalidInput(reason: "1 biases for 3 channels"))
        model = Self.smallModel()
        model.definition.input.colorSpace = "BGR"
        #expect(Self.exportError(model) == .invalidInput(reason: "3 channels with colour space 'BGR'"))
    }

    @Test func namesMustBeUniqueAndComplete() {
        let model = Self.smallModel()
        let duplicateLayers = ExportNaming(layerNames: ["a", "b", "c", "d", "e", "f", "a", "g"])
        #expect(
            Self.exportError(model, naming: duplicateLayers) == .invalidNaming(reason: "layer name 'a' is used twice"))
        let tooFew = ExportNaming(layerNames: ["a", "b"])
        #expect(
            Self.exportError(model, naming: tooFew) == .invalidNaming(reason: "2 layer names for 8 exported layers"))
        let sameOutputs = ExportNaming(predictedLabelName: "result", probabilitiesName: "result")
        #expect(
            Self.exportError(model, naming: sameOutputs)
                == .invalidNaming(reason: "blob or feature name 'result' is used twice"))
        let blobIsInput = ExportNaming(blobNames: ["image", "b", "c", "d", "e", "f", "g"])
        #expect(
            Self.exportError(model, naming: blobIsInput)
                == .invalidNaming(reason: "blob or feature name 'image' is used twice"))

        let reserved = ExportNaming(blobNames: ["pre_out", "b", "c", "d", "e", "f", "g"])
        #expect(throws: ExportError.invalidNaming(reason: "'pre_out' is reserved for the ONNX preprocessing nodes")) {
            try ONNXExporter.encode(model, metadata: Self.metadata, options: ONNXExportOptions(naming: reserved))
        }
    }

    /// Dropout is left out entirely: with the same names, a model with dropout layers exports the
    /// same bytes as the model without them.
    @Test func dropoutIsOmitted() throws {
        let plain = Self.smallModel()
        var definition = plain.definition
        definition.layers.insert(.dropout(rate: 0.5), at: 5)
        definition.layers.insert(.dropout(rate: 0.2), at: 3)
        var weights = plain.weights
        weights.insert(LayerWeights(name: "", tensors: []), at: 5)
        weights.insert(LayerWeights(name: "", tensors: []), at: 3)
        for index in weights.indices { weights[index].name = definition.layerNames[index] }
        let withDropout = TrainedModel(definition: definition, weights: weights)

        let naming = ExportNaming(layerNames: ["conv", "bn", "relu", "pool", "gap", "flatten", "fc", "softmax"])
        // ONNX initializer names come from the layer names, so these agree too.
        let coreML = CoreMLExportOptions(naming: naming)
        let onnx = ONNXExportOptions(naming: naming)
        let plainCoreML = try CoreMLExporter.encode(plain, metadata: Self.metadata, options: coreML)
        #expect(try CoreMLExporter.encode(withDropout, metadata: Self.metadata, options: coreML) == plainCoreML)
        let plainONNX = try ONNXExporter.encode(plain, metadata: Self.metadata, options: onnx)
        #expect(try ONNXExporter.encode(withDropout, metadata: Self.metadata, options: onnx) == plainONNX)
        // Default names keep the definition's indices (the linear layer is 7), without the dropout layers.
        let named = try ONNXExporter.encode(withDropout, metadata: Self.metadata)
        #expect(named.range(of: Data("7.linear.weight".utf8)) != nil)
        #expect(named.range(of: Data("dropout".utf8)) == nil)
    }

    @Test func exportsAreDeterministic() throws {
        let model = Self.smallModel()
        let metadata = ExportMetadata(
            version: 2, manifestSHA256: "00", acceptThreshold: 0.5, dataFingerprint: "x",
            additionalEntries: ["z": "1", "a": "2", "m": "3"])
        #expect(
            try CoreMLExporter.encode(model, metadata: metadata) == CoreMLExporter.encode(model, metadata: metadata))
        #expect(try ONNXExporter.encode(model, metadata: metadata) == ONNXExporter.encode(model, metadata: metadata))
        #expect(
            metadata.userDefinedEntries.map(\.key)
                == ["a", "accept_threshold", "data_fingerprint", "facetrain_version", "m", "manifest_sha256", "z"])
    }

    @Test func metadataNamedFieldsWinOverAdditionalEntries() {
        let metadata = ExportMetadata(
            version: 1, facetrainVersion: "9.9", additionalEntries: ["facetrain_version": "0.0", "site": "door"])
        let entries = Dictionary(uniqueKeysWithValues: metadata.userDefinedEntries.map { ($0.key, $0.value) })
        #expect(entries == ["facetrain_version": "9.9", "site": "door"])
        #expect(metadata.versionString == "1")
    }

    /// ref-small with 200 classes (the largest class count the product targets) exports quickly
    /// and small enough to download; the sizes for 42 and 200 classes are printed.
    @Test func referenceSmallExportIsFastAndSmall() throws {
        for classes in [42, 200] {
            let model = TrainedModel.seeded(.referenceSmall(classLabels: (1...classes).map(String.init)), seed: 5)
            let clock = ContinuousClock()
            let start = clock.now
            let coreML = try CoreMLExporter.encode(model, metadata: Self.metadata)
            let onnx = try ONNXExporter.encode(model, metadata: Self.metadata)
            let elapsed = clock.now - start
            print(
                "ref-small, \(classes) classes: FaceClassifier.mlmodel \(coreML.count) B, "
                    + "model.onnx \(onnx.count) B, both in \(elapsed)"
            )
            #expect(elapsed < .seconds(1))
            #expect(coreML.count < 2_000_000)
            #expect(onnx.count < 2_000_000)
            // All parameters are stored once as float32, plus a few kilobytes of structure.
            let parameterBytes = model.weights.flatMap(\.tensors).reduce(0) { $0 + $1.tensor.count * 4 }
            #expect(coreML.count > parameterBytes && coreML.count < parameterBytes + 8_192)
            #expect(onnx.count > parameterBytes && onnx.count < parameterBytes + 8_192)
        }
    }
}
