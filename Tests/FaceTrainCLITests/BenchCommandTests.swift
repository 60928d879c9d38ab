import Foundation
import Testing

/// `facetrain bench`, run as a subprocess of the built binary.
@Suite struct BenchCommandTests {
    @Test func jsonHasTheDocumentedKeysAndSaneValues() throws {
        let result = try CLIRunner.run([
            "bench", "--json", "--steps", "1", "--batch-size", "2", "--inference-batch-size", "2",
            "--latency-seconds", "0",
        ])
        #expect(result.status == 0, "\(result.standardError)")
        let json = try #require(
            try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any])
        for key in ["train_images_per_second", "inference_images_per_second", "latency_batch1_ms", "peak_rss_mb"] {
            let value = try #require(json[key] as? Double, "missing \(key)")
            #expect(value > 0, "\(key) = \(value)")
        }
        #expect((json["blas_kernel"] as? String)?.isEmpty == false)
        #expect(abs((json["train_mflop_per_image"] as? Double ?? 0) - 92.04) < 0.01)
    }

    /// `--architecture` times the named network: its FLOPs are those `facetrain architectures` lists.
    @Test func timesTheNamedArchitecture() throws {
        let result = try CLIRunner.run([
            "bench", "--json", "--architecture", "mobile-face", "--width", "8", "--steps", "1", "--batch-size", "2",
            "--inference-batch-size", "2", "--latency-seconds", "0",
        ])
        #expect(result.status == 0, "\(result.standardError)")
        let json = try #require(
            try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any])
        #expect(json["architecture"] as? String == "mobile-face")
        let listing = try CLIRunner.run(["architectures", "--json", "--width", "8"])
        let entries = try #require(
            try JSONSerialization.jsonObject(with: Data(listing.standardOutput.utf8)) as? [[String: Any]])
        let mobile = try #require(entries.first { $0["name"] as? String == "mobile-face" })
        #expect(json["train_mflop_per_image"] as? Double == mobile["training_mflop_per_image"] as? Double)
        #expect((json["train_images_per_second"] as? Double ?? 0) > 0)
        #expect(json["width"] as? Int == 8 && json["input_size"] as? Int == 64)
    }

    /// `--input-size` times the network at that input, as the builtin base runs (80 px).
    @Test func timesTheArchitectureAtTheGivenInputSize() throws {
        let result = try CLIRunner.run([
            "bench", "--json", "--architecture", "ref-deep-gdc", "--width", "4", "--input-size", "80", "--steps", "1",
            "--batch-size", "2", "--inference-batch-size", "2", "--latency-seconds", "0",
        ])
        #expect(result.status == 0, "\(result.standardError)")
        let json = try #require(
            try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any])
        #expect(json["input_size"] as? Int == 80 && json["architecture"] as? String == "ref-deep-gdc")
        let listing = try CLIRunner.run(["architectures", "--json", "--width", "4", "--input-size", "80"])
        let entries = try #require(
            try JSONSerialization.jsonObject(with: Data(listing.standardOutput.utf8)) as? [[String: Any]])
        let deep = try #require(entries.first { $0["name"] as? String == "ref-deep-gdc" })
        #expect(json["train_mflop_per_image"] as? Double == deep["training_mflop_per_image"] as? Double)
        let odd = try CLIRunner.run(["bench", "--input-size", "70"])
        #expect(odd.status == 64 && odd.standardError.contains("--input-size must be a multiple of 8"))
    }

    @Test func badValuesAreUsageErrors() throws {
        let zero = try CLIRunner.run(["bench", "--steps", "0"])
        #expect(zero.status == 64)
        #expect(zero.standardError.contains("at least 1"))
        // Batch normalisation cannot train on one crop: a usage error, not a crash in the layer.
        let single = try CLIRunner.run(["bench", "--batch-size", "1"])
        #expect(single.status == 64)
        #expect(
            single.standardError.contains("--batch-size must be in 2...4096 (batch normalisation needs two crops)")
                && !single.standardError.contains("Fatal error"))
        let text = try CLIRunner.run(["bench", "--batch-size", "many"])
        #expect(text.status == 64)
        #expect(text.standardError.contains("--batch-size"))
    }
}
