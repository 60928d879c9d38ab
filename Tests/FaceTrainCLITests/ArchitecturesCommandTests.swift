import FaceTrain
import FaceTrainEngine
import Foundation
import Testing

/// `facetrain architectures`, `--architecture` of fit, pretrain and bench, run through the built binary.
@Suite struct ArchitecturesCommandTests {
    static func listing(_ extra: [String] = []) throws -> [[String: Any]] {
        let result = try CLIRunner.run(["architectures", "--json"] + extra)
        try #require(result.status == 0, "\(result.standardError)")
        return try #require(
            try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [[String: Any]])
    }

    @Test func jsonListsEveryArchitectureWithSizesFromItsDefinition() throws {
        let entries = try Self.listing()
        #expect(
            entries.map { $0["name"] as? String } == [
                "ref-small", "ref-small-gdc", "ref-deep-gdc", "ref-deeper-gdc", "mobile-face",
            ])
        for entry in entries {
            let name = try #require(entry["name"] as? String)
            #expect(entry["input_size"] as? Int == 64 && entry["width"] as? Int == 32 && entry["classes"] as? Int == 42)
            // Parameters as the engine counts them in a network built from the definition.
            let definition = try ModelDefinition.architecture(named: name).classifier(
                classLabels: (0..<42).map(String.init), inputSize: 64, width: 32)
            #expect(
                entry["parameters"] as? Int == (try Network(definition: definition, seed: 1)).trainableParameterCount)
            #expect(entry["embedding_features"] as? Int == 256)
            #expect((entry["summary"] as? String)?.isEmpty == false)
        }
        // ref-small at width 16 is the network the benchmark documents: 31.86 MFLOP forward, 92.04 to train.
        let narrow = try Self.listing(["--width", "16"])
        #expect(abs((narrow[0]["forward_mflop_per_image"] as? Double ?? 0) - 31.86) < 0.01)
        #expect(abs((narrow[0]["training_mflop_per_image"] as? Double ?? 0) - 92.04) < 0.01)
        #expect(narrow[0]["parameters"] as? Int == 103_338 + 2 * 128)
        // The issue's budget: mobile-face at most 3x ref-small's FLOPs at the base's width.
        let reference = try #require(entries[0]["forward_mflop_per_image"] as? Double)
        let mobile = try #require(entries[4]["forward_mflop_per_image"] as? Double)
        #expect(mobile <= 3 * reference && mobile > 0.25 * reference, "\(mobile) vs \(reference)")
        // The global depthwise embedding adds 2 · 256 · 64 multiply-adds' worth: 0.03 MFLOP.
        let globalDepthwise = try #require(entries[1]["forward_mflop_per_image"] as? Double)
        #expect(abs(globalDepthwise - reference - 2 * 256 * 64 / 1e6) < 0.001, "\(globalDepthwise) vs \(reference)")
        // ref-deep-gdc's three extra convolutions cost the same at every resolution: 9 · 64² · 32²
        // multiply-adds (64 channels at 32x32, 128 at 16x16, 256 at 8x8), each x 2.
        let deep = try #require(entries[2]["forward_mflop_per_image"] as? Double)
        #expect(
            abs(deep - globalDepthwise - 3 * 2 * 9 * 64 * 64 * 32 * 32 / 1e6) < 0.001, "\(deep) vs \(globalDepthwise)")
        // ref-deeper-gdc adds two more of the same cost, at 16x16 and at 8x8.
        let deeper = try #require(entries[3]["forward_mflop_per_image"] as? Double)
        #expect(abs(deeper - deep - 2 * 2 * 9 * 64 * 64 * 32 * 32 / 1e6) < 0.001, "\(deeper) vs \(deep)")
    }

    @Test func textIsATableWithTheSameNumbers() throws {
        let result = try CLIRunner.run(["architectures"])
        #expect(result.status == 0, "\(result.standardError)")
        let lines = result.standardOutput.split(separator: "\n").map(String.init)
        #expect(lines.first?.hasPrefix("NAME") == true && lines.first?.contains("MFLOP/IMAGE") == true)
        for entry in try Self.listing() {
            let name = entry["name"] as! String
            let row = try #require(lines.first { $0.hasPrefix(name + " ") }, "no row for \(name)")
            #expect(row.contains(" \(entry["parameters"] as! Int) "))
            #expect(row.contains(String(format: "%.1f", entry["forward_mflop_per_image"] as! Double)))
            #expect(lines.contains { $0.hasPrefix("\(name): ") })
        }
    }

    @Test func unknownNamesAreUsageErrorsNamingTheKnownOnes() throws {
        // Refused while the arguments are read: nothing needs to exist.
        let (data, out) = ("/nonexistent/facetrain-data", "/nonexistent/facetrain-out")
        for command in [
            ["bench", "--architecture", "resnet-1000"],
            ["fit", "--data", data, "--out", out, "--base", "none", "--architecture", "resnet-1000"],
            ["pretrain", "--data", data, "--out", out, "--architecture", "resnet-1000"],
        ] {
            let result = try CLIRunner.run(command)
            #expect(result.status == 64, "\(command[0]): \(result.standardError)")
            #expect(
                result.standardError.contains(
                    "architecture 'resnet-1000' is not known; known: ref-small, ref-small-gdc, ref-deep-gdc, ref-deeper-gdc, mobile-face"
                ),
                "\(command[0]): \(result.standardError)")
        }
        let bad = try CLIRunner.run(["architectures", "--width", "0"])
        #expect(bad.status == 64 && bad.standardError.contains("--width"))
    }
}
