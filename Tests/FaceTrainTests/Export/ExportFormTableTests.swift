import Foundation
import Testing

@testable import FaceTrain
@testable import FaceTrainEngine

/// Tests/Scripts/check_exports.py learns the layer kinds from facetrain's table (`ExportFormTable`,
/// handed over in its cases file): the table must cover every kind, agree with what the encoders
/// write, and name only Core ML layers the script can evaluate.
struct ExportFormTableTests {
    /// Every kind that inference does not pass through has its lowering in both format tables,
    /// Export/ONNXLowering.swift and Export/CoreMLLowering.swift (the engine's layers know no formats),
    /// and every kind that it passes through is left out of both.
    @Test func everyKindIsInBothFormatTables() throws {
        for layer in LayerSpecification.everyKind {
            let exported = !layer.layerKind.isIdentityAtInference
            #expect(
                (layer.layerKind is any ONNXLowering) == exported,
                "\(layer.kind): exported \(exported), ONNXLowering in Export/ONNXLowering.swift")
            #expect(
                (layer.layerKind is any CoreMLLowering) == exported,
                "\(layer.kind): exported \(exported), CoreMLLowering in Export/CoreMLLowering.swift")
        }
        try #require(
            LayerSpecification.everyKind.allSatisfy {
                $0.layerKind.isIdentityAtInference
                    || ($0.layerKind is any ONNXLowering && $0.layerKind is any CoreMLLowering)
            })
        let table = ExportFormTable.entries
        for layer in LayerSpecification.everyKind {
            let entries = table[layer.kind.rawValue]
            #expect(entries != nil, "\(layer.kind) is missing from the table")
            #expect((entries ?? []).isEmpty == layer.layerKind.isIdentityAtInference, "\(layer.kind)")
        }
        #expect(Set(LayerSpecification.everyKind.map(\.kind)).count == LayerSpecification.everyKind.count)
    }

    /// The encoders write the operators the table names, for a model holding every exported kind and
    /// an input crop.
    @Test func encodersWriteWhatTheTableSays() throws {
        let labels = ["1", "2", "3"]
        let definition = ModelDefinition(
            input: InputSpecification(width: 10, height: 10, channels: 3, crop: 1),
            layers: [
                .conv2D(inputChannels: 3, outputChannels: 4, kernelSize: 3, stride: 1, padding: 1),
                .batchNorm2D(channels: 4, epsilon: 1e-5, momentum: 0.1), .relu, .add(source: 0), .prelu(channels: 4),
                .dropout(rate: 0.1), .maxPool2D(size: 2, stride: 2), .globalAveragePool, .l2Normalize(scale: 4),
                .linear(inputFeatures: 4, outputFeatures: 3),
            ],
            classLabels: labels)
        let plan = try ExportPlan(model: TrainedModel.seeded(definition, seed: 3), naming: .product)
        let table = ExportFormTable.entries
        let expected =
            [
                table["crop"], table["conv2d"], table["batchnorm2d"], table["relu"], table["add"], table["prelu"],
                table["maxpool2d"],
                table["globalavgpool"], table["l2normalize"], table["flatten"], table["linear"], table["softmax"],
            ]
            .compactMap { $0?.first?.onnx }
        #expect(plan.steps.map(\.operation.onnxNode.operatorName) == expected)
        #expect(
            plan.steps.map(\.operation.coreMLLayer.name)
                == [
                    "crop", "convolution", "batchnorm", "activation", "add", "activation", "pooling", "pooling",
                    "l2normalize",
                    "flatten", "innerProduct", "softmax",
                ])
    }

    @Test func thePythonCheckerEvaluatesEveryCoreMLForm() throws {
        let script = try String(contentsOf: ExportTestSupport.checkScript, encoding: .utf8)
        let layers = Self.keys(of: "COREML_LAYERS", in: script)
        let activations = Self.keys(of: "COREML_ACTIVATIONS", in: script)
        #expect(layers.contains("convolution") && activations.contains("ReLU"), "the tables were not found")
        for entry in ExportFormTable.entries.values.joined() where !entry.coreML.isEmpty {
            #expect(layers.contains(entry.coreML), "check_exports.py cannot evaluate Core ML \(entry.coreML)")
            if let activation = entry.coreMLActivation {
                #expect(activations.contains(activation), "check_exports.py cannot evaluate \(activation)")
            }
        }
    }

    /// The quoted keys of the dictionary literal `name = { … }` at the top level of the script.
    static func keys(of name: String, in script: String) -> Set<String> {
        guard let start = script.range(of: "\n\(name) = {\n"),
            let end = script[start.upperBound...].range(of: "\n}")
        else { return [] }
        var keys = Set<String>()
        for line in script[start.upperBound..<end.lowerBound].split(separator: "\n") {
            let parts = line.split(separator: "\"")
            if parts.count >= 2, line.trimmingCharacters(in: .whitespaces).hasPrefix("\"") {
                keys.insert(String(parts[1]))
            }
        }
        return keys
    }
}
