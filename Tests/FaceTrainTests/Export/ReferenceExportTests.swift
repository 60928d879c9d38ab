import Foundation
import Testing

@testable import FaceTrain
@testable import FaceTrainEngine

/// The encoders reproduce the format reference (../shared/docs/formats-ref, made by coremltools' builder
/// and onnx.helper) byte for byte, through the same code path the product uses: only names,
/// descriptions and metadata differ, and those are parameters.
@Suite(.enabled(if: ExportTestSupport.isCI || ExportTestSupport.exists(ExportTestSupport.formatsReference)))
struct ReferenceExportTests {
    /// `det(n, salt)` of gen_reference.py: ((i*37 + salt*11) % 23 - 11) / 20, rounded once to float32.
    static func det(_ count: Int, _ salt: Int) -> [Float] {
        (0..<count).map { Float(Double((($0 * 37 + salt * 11) % 23) - 11) / 20.0) }
    }

    /// gen_reference.py's network and weights as a `TrainedModel`.
    static func tinyModel() -> TrainedModel {
        let definition = ModelDefinition.tinyClassifier(
            input: InputSpecification(
                width: 32, height: 32, channels: 3, scale: Float(1.0 / 127.5), bias: [-1, -1, -1]),
            outputFeatures: 3, classLabels: ["1", "2", "17"])
        // numpy adds the Python floats 1.0 and 0.6 to float32 arrays in float32 (NEP 50).
        let tensors: [[(String, [Int], [Float])]] = [
            [("weight", [4, 3, 3, 3], det(108, 1)), ("bias", [4], det(4, 2))],
            [
                ("weight", [4], det(4, 3).map { 1 + $0 }), ("bias", [4], det(4, 4)),
                ("running_mean", [4], det(4, 5)), ("running_var", [4], det(4, 6).map { Float(0.6) + abs($0) }),
            ],
            [], [], [],
            [("weight", [3, 4], det(12, 7)), ("bias", [3], det(3, 8))],
        ]
        let weights = zip(definition.layerNames, tensors).map { name, list in
            LayerWeights(
                name: name, tensors: list.map { NamedTensor(name: $0.0, tensor: Tensor(shape: $0.1, scalars: $0.2)) })
        }
        return TrainedModel(definition: definition, weights: weights)
    }

    /// The reference's names: its own layer and blob names and "probs" instead of "classProbability".
    static let referenceNaming = ExportNaming(
        inputName: "image", predictedLabelName: "classLabel", probabilitiesName: "probs",
        layerNames: ["conv1", "bn1", "relu1", "pool1", "gap", "flatten", "fc", "softmax"],
        blobNames: ["conv1_out", "bn1_out", "relu1_out", "pool1_out", "gap_out", "flat_out", "fc_out"],
        batchNormTensorSuffixes: ["gamma", "beta", "mean", "variance"])

    static func reference(_ name: String) throws -> Data {
        try Data(contentsOf: ExportTestSupport.formatsReference.appendingPathComponent(name))
    }

    /// "identical" or where the first difference is, for a readable failure.
    static func comparison(_ produced: Data, _ expected: Data) -> String {
        guard produced != expected else { return "identical" }
        let first =
            zip(produced, expected).enumerated().first { $0.element.0 != $0.element.1 }?.offset
            ?? min(produced.count, expected.count)
        return "sizes \(produced.count) vs \(expected.count), first difference at offset 0x\(String(first, radix: 16))"
    }

    @Test func coreMLEncoderReproducesTheReferenceFile() throws {
        let metadata = ExportMetadata(
            version: 1, versionString: "1.0", shortDescription: "Tiny face classifier (reference)",
            author: "reference", license: "none", facetrainVersion: nil, additionalEntries: ["labels": "1,2,17"])
        // The input description is the product default ("Face crop, RGB 32x32"); the reference has
        // no output descriptions, which the product adds.
        let options = CoreMLExportOptions(
            naming: Self.referenceNaming, probabilitiesDescription: nil, predictedLabelDescription: nil)
        let produced = try CoreMLExporter.encode(Self.tinyModel(), metadata: metadata, options: options)
        let expected = try Self.reference("tiny_classifier.mlmodel")
        #expect(Self.comparison(produced, expected) == "identical")
    }

    @Test func onnxEncoderReproducesTheReferenceFile() throws {
        let metadata = ExportMetadata(
            version: 1, shortDescription: "Tiny face classifier (reference)", facetrainVersion: nil)
        let options = ONNXExportOptions(
            naming: Self.referenceNaming, graphName: "tiny_classifier", producerName: "reference",
            producerVersion: "1.0")
        let produced = try ONNXExporter.encode(Self.tinyModel(), metadata: metadata, options: options)
        let expected = try Self.reference("tiny_classifier.onnx")
        #expect(Self.comparison(produced, expected) == "identical")
    }

    /// The test oracle itself agrees with the reference's onnxruntime and numpy numbers.
    @Test func referenceForwardPassMatchesTheReferenceOutputs() throws {
        let json = try JSONSerialization.jsonObject(with: Self.reference("expected_outputs.json")) as? [String: Any]
        let expected = try #require(json?["onnxruntime_probs"] as? [Double])
        // pixel(y, x, c) = (x*8 + y*4 + c*50) % 256, HWC.
        var pixels: [UInt8] = []
        for y in 0..<32 {
            for x in 0..<32 {
                for c in 0..<3 { pixels.append(UInt8((x * 8 + y * 4 + c * 50) % 256)) }
            }
        }
        let probabilities = ReferenceForwardPass.probabilities(Self.tinyModel(), pixels: pixels)
        #expect(probabilities.count == expected.count)
        for (value, reference) in zip(probabilities, expected) {
            #expect(abs(value - reference) < 1e-6, "forward pass \(probabilities) vs reference \(expected)")
        }
        #expect(json?["coreml_numpy_eval_classLabel"] as? String == "2")
        #expect(probabilities.firstIndex(of: probabilities.max()!) == 1)
    }
}
