import FaceTrain
import FaceTrainEngine
import Foundation

/// Small models, exports and metrics for bundle tests, shared by both test targets.
public enum BundleFixture {
    /// A ref-small model at width 4 on 16x16 input with seeded random weights.
    public static func model(users: [Int] = [17, 23], seed: UInt64 = 1) -> TrainedModel {
        let definition = ModelDefinition.referenceSmall(
            classLabels: ["1", "2"] + users.map(String.init), inputSize: 16, width: 4)
        // He-initialised by the engine: deterministic for the seed, and loadable by every consumer.
        return try! Network(definition: definition, seed: seed).trainedModel
    }

    public static func users(_ ids: [Int]) -> [Manifest.UserEntry] {
        ids.map { Manifest.UserEntry(id: $0, name: "User \($0)", position: "Engineer") }
    }

    /// metrics.json as eval writes it.
    public static func metrics(
        userAccuracy: Double = 0.95, unknownFAR: Double = 0.02, nonfaceFAR: Double = 0.01,
        recalls: [String: Double] = [:]
    ) -> Data {
        let perUser = recalls.sorted { $0.key < $1.key }.map {
            "\"\($0.key)\": {\"precision\": 0.9, \"recall\": \($0.value), \"support\": 10}"
        }.joined(separator: ", ")
        let text = """
            {"user_accuracy": \(userAccuracy), "macro_user_recall": 0.9, "macro_user_precision": 0.9,
             "unknown_far": \(unknownFAR), "nonface_far": \(nonfaceFAR), "user_rejected": 0.05,
             "overall_accuracy": 0.93, "per_user": {\(perUser)}, "threshold": {"accept": 0.6, "method": "far"},
             "confusion": [[1, 0], [0, 1]]}
            """
        return Data(text.utf8)
    }

    // MARK: Minimal protobuf, enough for the parts of exports verification reads

    public static func varint(_ value: UInt64) -> [UInt8] {
        var value = value
        var bytes: [UInt8] = []
        repeat {
            var byte = UInt8(value & 0x7f)
            value >>= 7
            if value != 0 { byte |= 0x80 }
            bytes.append(byte)
        } while value != 0
        return bytes
    }

    public static func field(_ number: UInt64, _ payload: [UInt8]) -> [UInt8] {
        varint(number << 3 | 2) + varint(UInt64(payload.count)) + payload
    }

    public static func field(_ number: UInt64, _ text: String) -> [UInt8] { field(number, Array(text.utf8)) }

    /// A Core ML classifier skeleton: spec version, metadata, string class labels.
    public static func coreML(labels: [String], manifestSHA256: String?) -> Data {
        var metadata = field(2, "1.0.0")
        if let manifestSHA256 { metadata += field(100, field(1, "manifestSHA256") + field(2, manifestSHA256)) }
        let description = field(100, metadata)
        let classifier = field(100, labels.flatMap { field(1, $0) }) + field(200, "probs")
        return Data(varint(1 << 3) + varint(1) + field(2, description) + field(403, classifier))
    }

    /// An ONNX model skeleton with the `class_labels` metadata.
    public static func onnx(labels: [String]) -> Data {
        let json = "[" + labels.map { "\"\($0)\"" }.joined(separator: ",") + "]"
        return Data(
            varint(1 << 3) + varint(7) + field(2, "facetrain") + field(14, field(1, "class_labels") + field(2, json)))
    }

    /// Writes and publishes a complete bundle (weights, metrics, both exports); returns its URL.
    @discardableResult
    public static func publish(
        in models: URL, users ids: [Int] = [17, 23], seed: UInt64 = 1, metrics: Data? = BundleFixture.metrics(),
        exportLabels: [String]? = nil, parentVersion: Int? = nil
    ) throws -> URL {
        let staging = try BundleStaging(modelsDirectory: models)
        let model = model(users: ids, seed: seed)
        try staging.writeWeights(model)
        let summary = try metrics.map { try MetricsDocument.decode($0) }
        if let metrics { try staging.write(metrics, named: "metrics.json") }
        let manifest = Manifest(
            version: staging.version, definition: model.definition, users: users(ids),
            training: ["epochs": 30, "learningRate": 0.01, "augment": true, "optimizer": "sgd"], seed: seed,
            dataFingerprint: "sha256:feed", gitCommit: "abc1234", metrics: summary, acceptThreshold: 0.6,
            parentVersion: parentVersion)
        let labels = exportLabels ?? model.definition.classLabels
        try staging.write(
            coreML(labels: labels, manifestSHA256: try manifest.contentSHA256), named: "FaceClassifier.mlmodel")
        try staging.write(onnx(labels: labels), named: "model.onnx")
        return try staging.publishVersion(manifest: manifest)
    }

    /// A fresh empty directory under the system temporary directory.
    public static func temporaryDirectory() -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("facetrain-bundle-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// Flips one byte of a (read-only) file in place.
    public static func flipByte(in url: URL, at offset: Int) throws {
        chmod(url.path, 0o644)
        var data = try Data(contentsOf: url)
        let index = offset >= 0 ? offset : data.count + offset
        data[index] ^= 0x01
        try data.write(to: url)
    }

    /// Runs a program and returns its exit status and standard output.
    public static func run(_ executable: String, _ arguments: [String], in directory: URL? = nil) throws -> (
        status: Int32, output: String
    ) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let directory { process.currentDirectoryURL = directory }
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}
