import Foundation
import Testing

@testable import FaceTrain
@testable import FaceTrainEngine

/// One validator: a definition the exporters would refuse is refused when its network is built and
/// before a fit's first step, with the same reason, the layer's index and kind, and a hint.
struct DefinitionValidationTests {
    static let options = DataLoadOptions(inputWidth: 24, inputHeight: 24, channels: 3)

    /// A definition the engine used to train and the exporters refused, with the layer that is wrong.
    struct Refused: CustomStringConvertible, Sendable {
        var description: String
        var change: @Sendable (inout ModelDefinition) -> Void
        var index: Int
        var kind: LayerKindName
        var reason: String
    }

    /// ref-small at 24 px: 0 conv, 1 bn, 2 relu, 3 pool, … 15 global pool, 16 bn, 17 l2Normalize, 18 linear.
    static let refused = [
        Refused(
            description: "padding as large as the kernel",
            change: {
                $0.layers[0] = .conv2D(inputChannels: 3, outputChannels: 16, kernelSize: 3, stride: 1, padding: 3)
            },
            index: 0, kind: .conv2D,
            reason: "kernel 3, stride 1, padding 3 is not a valid window (the padding must be smaller than the kernel)"),
        Refused(
            description: "a batch norm between the normalisation and the classifier",
            change: { $0.layers.insert(.batchNorm2D(channels: 128, epsilon: 1e-5, momentum: 0.1), at: 18) },
            index: 18, kind: .batchNorm2D, reason: "an l2Normalize must be followed by a linear layer"),
        Refused(
            description: "two normalisations in a row",
            change: { $0.layers.insert(.l2Normalize(scale: 4), at: 18) },
            index: 18, kind: .l2Normalize, reason: "two normalisations in a row"),
        Refused(
            description: "a convolution on the pooled vector",
            change: {
                $0.layers[16] = .conv2D(inputChannels: 128, outputChannels: 128, kernelSize: 1, stride: 1, padding: 0)
            },
            index: 16, kind: .conv2D, reason: "it needs an image-shaped [C, H, W] input but gets [128]"),
    ]

    static func definition(_ refused: Refused?, labels: [String]) -> ModelDefinition {
        var definition = ModelDefinition.referenceSmall(classLabels: labels, inputSize: 24)
        refused?.change(&definition)
        return definition
    }

    @Test(arguments: refused)
    func refusedWhenTheNetworkIsBuiltAndByTheExporters(_ refused: Refused) throws {
        let definition = Self.definition(refused, labels: ["1", "2", "3"])
        let expected = ModelDefinitionError.invalidLayer(
            index: refused.index, kind: refused.kind, reason: refused.reason)
        #expect(throws: expected) { try Network(definition: definition, seed: 1) }
        #expect(throws: expected) { try definition.validate(as: .classifier) }
        let model = TrainedModel.seeded(definition, seed: 1)
        #expect(ExportValidationTests.exportError(model) == ExportError(expected))
        #expect(
            ExportValidationTests.exportError(model)
                == .invalidLayer(layer: "\(refused.index).\(refused.kind)", reason: refused.reason))
        let text = expected.description
        #expect(text.contains("layer \(refused.index) (\(refused.kind)): \(refused.reason)."))
        #expect(text.contains("HINT: fix layer \(refused.index)"))
    }

    /// A fit session refuses them when it is made, before it could run a step.
    @Test(arguments: refused)
    func refusedBeforeTheFirstTrainingStep(_ refused: Refused) throws {
        let folder = try TemporaryDataFolder.valid()
        let dataset = try FaceDataset.load(from: folder.root, options: Self.options)
        let labels = dataset.labels.map(String.init)
        let checkpoints = FileManager.default.temporaryDirectory.appendingPathComponent("facetrain-\(UUID())")
        defer { try? FileManager.default.removeItem(at: checkpoints) }
        do {
            _ = try FitSession(
                dataset: dataset, configuration: FitConfiguration(), checkpointDirectory: checkpoints,
                definition: Self.definition(refused, labels: labels))
            Issue.record("the fit session accepted \(refused)")
        } catch {
            guard case .invalidDefinition(let problem) = error else {
                Issue.record("expected invalidDefinition, got \(error)")
                return
            }
            #expect(problem == .invalidLayer(index: refused.index, kind: refused.kind, reason: refused.reason))
            #expect(error.description.hasPrefix("nothing was trained: Model definition: layer \(refused.index)"))
        }
        // The unchanged definition passes the same session check.
        _ = try FitSession(
            dataset: dataset, configuration: FitConfiguration(), checkpointDirectory: checkpoints,
            definition: Self.definition(nil, labels: labels))
    }

    /// A classifier whose labels do not match its outputs is refused before training too.
    @Test func classifierRulesRunBeforeTraining() throws {
        let definition = Self.definition(nil, labels: ["1", "2", "3"])
        var relabelled = definition
        relabelled.classLabels = ["1", "2"]
        #expect(throws: ModelDefinitionError.labelCountMismatch(labels: 2, outputs: 3)) {
            try relabelled.validate(as: .classifier)
        }
        var headless = definition
        headless.layers.removeLast()
        #expect(throws: ModelDefinitionError.mustEndWithLinear(lastLayer: "17.l2normalize")) {
            try headless.validate(as: .classifier)
        }
        // An extractor (a base for pretraining) ends at its normalisation.
        try headless.validate(as: .extractor)
    }

    /// Every named architecture passes as a classifier and as an extractor, at every size `fit` offers.
    @Test func namedArchitecturesValidate() throws {
        for architecture in ModelDefinition.architectures {
            for inputSize in [32, 64, 96] {
                try architecture.classifier(classLabels: ["1", "2", "3"], inputSize: inputSize, width: 8)
                    .validate(as: .classifier)
                try architecture.extractor(inputSize: inputSize, width: 8).validate(as: .extractor)
            }
        }
    }

    /// The one shape inference: what the network computes is what the definition says.
    @Test func networkShapesAreTheDefinitionsShapes() throws {
        let definition = try ModelDefinition.architecture(named: "mobile-face").classifier(
            classLabels: ["1", "2", "3"], inputSize: 32, width: 4)
        var network = try Network(definition: definition, seed: 2)
        var x = TestData.normal([2, 3, 32, 32], seed: 5)
        let shapes = try definition.layerOutputShapes()
        var layers = network.layers
        var outputs: [Tensor] = []
        for index in layers.indices {
            if case .add(let source) = definition.layers[index], var add = layers[index] as? ResidualAdd {
                add.shortcut = outputs[source]
                layers[index] = add
            }
            x = layers[index].forward(x, mode: .inference)
            outputs.append(x)
            #expect(x.shape == [2] + shapes[index], "layer \(index)")
        }
        #expect(network.forward(TestData.normal([2, 3, 32, 32], seed: 5), mode: .inference).shape == [2, 3])
    }

    /// An input crop is part of the definition: checked, versioned, and written only when it is set,
    /// so manifests from before it re-encode byte for byte.
    @Test func anInputCropIsCheckedVersionedAndOnlyWrittenWhenSet() throws {
        let plain = TestData.tinyDefinition()
        let plainJSON = try JSONText.data(plain.input, pretty: false)
        #expect(!String(decoding: plainJSON, as: UTF8.self).contains("crop"))
        #expect(try JSONDecoder().decode(InputSpecification.self, from: plainJSON) == plain.input)
        #expect(plain.minimumFormatVersion == 1)

        var cropped = plain
        cropped.input = plain.input.cropping(3)
        #expect(cropped.input.width == 14 && cropped.input.networkHeight == 8 && cropped.minimumFormatVersion == 2)
        let croppedJSON = try JSONText.data(cropped.input, pretty: false)
        #expect(String(decoding: croppedJSON, as: UTF8.self).contains("\"crop\":3"))
        #expect(try JSONDecoder().decode(InputSpecification.self, from: croppedJSON) == cropped.input)
        #expect(try cropped.layerOutputShapes() == plain.layerOutputShapes())
        cropped.classLabels = ["1", "2", "3"]  // a manifest's classes: "1", "2" and a user's id
        let manifest = Manifest(
            version: 1, definition: cropped, users: [], training: [:], seed: 1, dataFingerprint: "", gitCommit: nil)
        #expect(manifest.formatVersion == 2)

        var tooMuch = plain
        tooMuch.input.crop = 4
        #expect(throws: ModelDefinitionError.invalidInput(reason: "a crop of 4 pixels a side leaves nothing of 8x8")) {
            try tooMuch.validate(as: .classifier)
        }
    }
}
