import Foundation
import Testing

@testable import FaceTrain
@testable import FaceTrainEngine

/// The builtin detector written as ONNX (`facetrain detector export`) against facetrain's own
/// network, by onnx's checker and onnxruntime (Tests/Scripts/check_detector_export.py): two input
/// sizes, every head, raw pixels in (the scaling is inside the graph).
@Suite(.enabled(if: PythonChecker.shouldRun))
struct DetectorExportTests {
    static let script = ExportTestSupport.packageRoot.appendingPathComponent("Tests/Scripts/check_detector_export.py")

    @Test func onnxruntimeGivesTheNetworksHeads() throws {
        let detector = try DetectorModel.builtin()
        let directory = try ExportTestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("detector.onnx")
        try detector.onnxExport().write(to: file)

        var network = try Network(model: detector.model)
        let input = detector.model.definition.input
        var generator = SplitMix64(seed: 17)
        var cases: [[String: Any]] = []
        for (height, width) in [(96, 160), (64, 64)] {
            let pixels = (0..<(3 * height * width)).map { _ in Float(generator.next() % 256) }
            let plane = height * width
            let scaled = pixels.indices.map { pixels[$0] * input.scale + input.bias[$0 / plane] }
            let heads = network.forwardOutputs(Tensor(shape: [1, 3, height, width], scalars: scaled), mode: .inference)
            var outputs: [String: [Float]] = [:]
            for (name, head) in zip(detector.onnxHeadNames, heads) { outputs[name] = head.scalars }
            cases.append([
                "name": "\(width)x\(height)", "height": height, "width": width, "pixels": pixels, "outputs": outputs,
            ])
        }
        let spec: [String: Any] = [
            "onnx": file.path, "heads": detector.onnxHeadNames, "channels": 15, "strides": detector.manifest.strides,
            "tolerance": 1e-4, "cases": cases,
            // How to read the heads and decode them as facetrain does, with the decoder's own settings.
            "metadata": [
                "letterbox": "\(FaceDetector.defaultMaximumSide) px", "heads": "s * exp(min(t, 6))",
                "decoding": "IoU above \(DetectionDecoder().suppressionThreshold)",
            ],
        ]
        let specFile = directory.appendingPathComponent("cases.json")
        try JSONSerialization.data(withJSONObject: spec).write(to: specFile)
        let result = try PythonChecker.run([Self.script.path, specFile.path])
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains("ok: 2 cases"), "\(result.output)")
    }

    /// A damaged head list is refused by name, not written as a broken graph.
    @Test func headNamesMustMatchTheOutputs() throws {
        let detector = try DetectorModel.builtin()
        #expect(throws: ExportError.self) {
            try ONNXExporter.encodeDetector(
                detector.model, heads: ["stride8"], metadata: ExportMetadata(version: 1))
        }
    }
}
