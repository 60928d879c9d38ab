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
            ["--out", "x", "--face-check", "maybe"],
        ] {
            #expect(throws: UsageError.self) {
                _ = try Synth(arguments: try ParsedArguments(bad, specs: Synth.options))
            }
        }
        // Faces too small for the face check could never pass it: refused before anything is drawn.
        do {
            _ = try Synth(arguments: try ParsedArguments(["--out", "x", "--size", "32"], specs: Synth.options))
            Issue.record("--size 32 with the face check on was accepted")
        } catch let error as UsageError {
            #expect(
                error.message.contains("--size 48") && error.message.contains("--face-check off"), "\(error.message)")
        }
        _ = try Synth(
            arguments: try ParsedArguments(["--out", "x", "--size", "32", "--face-check", "off"], specs: Synth.options))
    }

    @Test func commandWritesDataSetAndRefusesToOverwrite() throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("synth-cli-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let out = directory.appendingPathComponent("demo").path
        let arguments = [
            "synth", "--out", out, "--users", "2", "--per-user", "2", "--negatives", "2",
            "--unknown-identities", "1", "--per-unknown", "2", "--size", "32", "--face-check", "off",
        ]
        #expect(FaceTrainCommand.run(arguments) == .success)
        let users = try Data(contentsOf: URL(fileURLWithPath: out).appendingPathComponent("users.json"))
        #expect(String(decoding: users, as: UTF8.self).contains("\"id\" : 4"))
        #expect(FaceTrainCommand.run(arguments) == .failure)
        #expect(FaceTrainCommand.run(arguments + ["--force"]) == .success)
        #expect(FaceTrainCommand.run(["synth", "--out", out, "--bogus"]) == .usage)
    }

    @Test func scenesOptionParsesAndRefusesOptionsOfTheOtherMode() throws {
        let command = try Synth(
            arguments: try ParsedArguments(
                ["--out", "x", "--scenes", "4", "--max-side", "200", "--seed", "3"], specs: Synth.options))
        guard case .scenes(let scenes) = command.output else {
            Issue.record("--scenes should select scenes")
            return
        }
        #expect(scenes.sceneCount == 4 && scenes.maximumSide == 200 && scenes.seed == 3)
        #expect(scenes.devFraction == 0.2)
        #expect(command.configuration == nil)
        for (bad, words) in [
            (["--out", "x", "--scenes", "0"], "scene count"),
            (["--out", "x", "--scenes", "2", "--max-side", "10"], "longer side"),
            (["--out", "x", "--scenes", "2", "--dev-fraction", "1.5"], "dev fraction"),
            (["--out", "x", "--scenes", "two"], "--scenes"),
            (["--out", "x", "--scenes", "2", "--users", "3"], "--users"),
            (["--out", "x", "--max-side", "320"], "--max-side"),
        ] {
            #expect(throws: UsageError.self, "\(bad)") {
                _ = try Synth(arguments: try ParsedArguments(bad, specs: Synth.options))
            }
            do {
                _ = try Synth(arguments: try ParsedArguments(bad, specs: Synth.options))
            } catch let error as UsageError {
                #expect(error.message.contains(words), "\(bad): \(error.message)")
            }
        }
    }

    @Test func scenesCommandWritesTheFolderAndRefusesToOverwrite() throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("synth-scenes-cli-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let out = URL(fileURLWithPath: directory.appendingPathComponent("scenes").path)
        let arguments = ["synth", "--scenes", "3", "--out", out.path, "--max-side", "128", "--seed", "2"]
        #expect(FaceTrainCommand.run(arguments) == .success)
        for name in ["annotations.jsonl", "splits.json", "README.md"] {
            #expect(FileManager.default.fileExists(atPath: out.appendingPathComponent(name).path), "\(name)")
        }
        let images = try FileManager.default.contentsOfDirectory(
            atPath: out.appendingPathComponent("images/0--Synthetic").path)
        #expect(images.sorted() == ["0_Synthetic_000001.jpg", "0_Synthetic_000002.jpg", "0_Synthetic_000003.jpg"])
        #expect(FaceTrainCommand.run(arguments) == .failure)
        #expect(FaceTrainCommand.run(arguments + ["--force"]) == .success)
    }
}
