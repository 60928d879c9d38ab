import Foundation
import Testing

/// `facetrain bench`, run as a subprocess of the built binary.
@Suite struct BenchCommandTests {
    /// Runs the facetrain binary of this build configuration; returns (status, stdout, stderr).
    static func run(_ arguments: [String]) throws -> (status: Int32, output: String, error: String) {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let candidates = ["debug", "release"].map { root.appendingPathComponent(".build/\($0)/facetrain") }
        let binary = try #require(candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) })
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
        let (output, error) = (Pipe(), Pipe())
        process.standardOutput = output
        process.standardError = error
        try process.run()
        let outputData = output.fileHandleForReading.readDataToEndOfFile()
        let errorData = error.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (
            process.terminationStatus, String(decoding: outputData, as: UTF8.self),
            String(decoding: errorData, as: UTF8.self)
        )
    }

    @Test func jsonHasTheDocumentedKeysAndSaneValues() throws {
        let result = try Self.run([
            "bench", "--json", "--steps", "1", "--batch-size", "2", "--inference-batch-size", "2",
            "--latency-seconds", "0",
        ])
        #expect(result.status == 0, "\(result.error)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any])
        for key in ["train_images_per_second", "inference_images_per_second", "latency_batch1_ms", "peak_rss_mb"] {
            let value = try #require(json[key] as? Double, "missing \(key)")
            #expect(value > 0, "\(key) = \(value)")
        }
        #expect((json["blas_kernel"] as? String)?.isEmpty == false)
        #expect(abs((json["train_mflop_per_image"] as? Double ?? 0) - 92.04) < 0.01)
    }

    @Test func badValuesAreUsageErrors() throws {
        let zero = try Self.run(["bench", "--steps", "0"])
        #expect(zero.status == 64)
        #expect(zero.error.contains("at least 1"))
        let text = try Self.run(["bench", "--batch-size", "many"])
        #expect(text.status == 64)
        #expect(text.error.contains("--batch-size"))
    }
}
