import Foundation
import Testing

@testable import FaceTrainCLI

@Suite struct SynthCommandTests {
    @Test func parsesDefaultsAndOptions() throws {
        let arguments = try ParsedArguments(
            ["--out", "x", "--users", "3", "--seed=9", "--force"], specs: Synth.options)
        let configuration = try #require(try Synth(arguments: arguments).configuration)
        #expect(configuration.userCount == 3)
        #expect(configuration.imagesPerUser == 25)
        #expect(configuration.seed == 9)
        #expect(configuration.imageSize == 64)
        #expect(configuration.replaceExisting)
        #expect(configuration.outputDirectory.lastPathComponent == "x")
    }

    @Test func rejectsInvalidCountsAsUsageErrors() throws {
        for bad in [
            ["--out", "x", "--users", "0"], ["--out", "x", "--size", "4"], ["--users", "2"],
            ["--out", "x", "--negatives", "-1"], ["--out", "x", "--seed", "-3"],
        ] {
            #expect(throws: UsageError.self) {
                _ = try Synth(arguments: try ParsedArguments(bad, specs: Synth.options))
            }
        }
    }

    @Test func commandWritesDataSetAndRefusesToOverwrite() throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("synth-cli-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let out = directory.appendingPathComponent("demo").path
        let arguments = [
            "synth", "--out", out, "--users", "2", "--per-user", "2", "--negatives", "2",
            "--unknown-identities", "1", "--per-unknown", "2", "--size", "32",
        ]
        #expect(FaceTrainCommand.run(arguments) == .success)
        let users = try Data(contentsOf: URL(fileURLWithPath: out).appendingPathComponent("users.json"))
        #expect(String(decoding: users, as: UTF8.self).contains("\"id\" : 4"))
        #expect(FaceTrainCommand.run(arguments) == .failure)
        #expect(FaceTrainCommand.run(arguments + ["--force"]) == .success)
        #expect(FaceTrainCommand.run(["synth", "--out", out, "--bogus"]) == .usage)
    }
}
