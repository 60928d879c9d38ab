import Foundation
import Testing

@Suite("Command line")
struct CommandLineTests {
    @Test func versionNamesTheBLASKernel() throws {
        let output = try CLIRunner.run(["--version"])
        #expect(output.status == 0)
        #expect(output.standardOutput.contains("facetrain "))
        #expect(output.standardOutput.contains("OpenBLAS"))
        #expect(!output.standardOutput.contains("unknown kernel"))
    }

    @Test func kernelSelectionPicksTheFastestCorrectKernelAndHonoursTheUser() throws {
        let flags = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let chosen = try CLIRunner.run(
            ["--version"], environment: ["OPENBLAS_CORETYPE": "", "FACETRAIN_BLAS_REEXEC": ""])
        if flags.contains("avx512f") && flags.contains("avx512bw") {
            #expect(chosen.standardOutput.contains("SkylakeX kernel"))
        } else if flags.contains(" avx2") && flags.contains(" fma") {
            #expect(chosen.standardOutput.contains("Haswell kernel") || chosen.standardOutput.contains("Zen kernel"))
        }
        let forced = try CLIRunner.run(["--version"], environment: ["OPENBLAS_CORETYPE": "Prescott"])
        #expect(forced.standardOutput.contains("Prescott kernel"))
    }

    @Test func unknownOptionIsAUsageError() throws {
        let output = try CLIRunner.run(["data", "check", "--data", "x", "--bogus"])
        #expect(output.status == 64)
        #expect(output.standardError.contains("Unknown option '--bogus'"))
        #expect(output.standardError.contains("Usage: facetrain data check"))
    }

    /// Values far outside anything sensible fail at once, naming the option, instead of as a huge
    /// allocation, an endless run or a confusing error after training.
    @Test(arguments: [
        (["--input-size", "100000"], "--input-size"), (["--width", "10000"], "--width"),
        (["--width", "9223372036854775807"], "--width"), (["--epochs", "1000000000000"], "--epochs"),
        (["--batch-size", "100000"], "--batch-size"), (["--learning-rate", "inf"], "--learning-rate"),
        (["--target-far", "nan"], "--target-far"), (["--target-far", "2"], "--target-far"),
        (["--margin", "inf"], "--margin"), (["--min-images", "0"], "--min-images"), (["--out", ""], "--out"),
        (["--out="], "--out"),
    ])
    func outOfRangeFitOptionsAreUsageErrors(options: [String], option: String) throws {
        let output = try CLIRunner.run(["fit", "--data", "/nonexistent"] + options)
        #expect(output.status == 64, "\(output.standardError)")
        #expect(output.standardError.contains(option))
        #expect(!output.standardError.contains("Fatal error"))
    }

    @Test func evalRefusesATargetThatIsNotAShare() throws {
        let output = try CLIRunner.run(["eval", "--model", "1", "--target-far", "nan"])
        #expect(output.status == 64)
        #expect(output.standardError.contains("--target-far must be a share in 0...1"))
    }

    @Test func helpListsSubcommands() throws {
        let output = try CLIRunner.run(["--help"])
        #expect(output.status == 0)
        #expect(output.standardOutput.contains("data check"))
        let help = try CLIRunner.run(["help", "data", "check"])
        #expect(help.status == 0 && help.standardOutput.contains("--min-images <n>"))
    }

    @Test func dataCheckReportsProblemsWithExitStatusOne() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("facetrain-cli-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        try FileManager.default.createDirectory(
            at: root.appendingPathComponent("alice"), withIntermediateDirectories: true)
        let output = try CLIRunner.run(["data", "check", "--data", root.path, "--json"])
        #expect(output.status == 1)
        let report = try #require(
            try JSONSerialization.jsonObject(with: Data(output.standardOutput.utf8)) as? [String: Any])
        let kinds = (report["problems"] as? [[String: Any]] ?? []).compactMap { $0["kind"] as? String }.sorted()
        #expect(kinds == ["folder_not_an_id", "missing_negative_class", "missing_negative_class", "no_users"])
    }

    /// A class folder the user may not list is named as a permission problem, not reported as a
    /// user without images. As root (CI) the check runs as "nobody" through setpriv.
    @Test(.enabled(if: getuid() != 0 || FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")))
    func unlistableFolderIsAPermissionProblem() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("facetrain-perm-\(UUID().uuidString)")
        defer {
            chmod(root.appendingPathComponent("3").path, 0o755)
            try? FileManager.default.removeItem(at: root)
        }
        for name in ["1", "2", "3"] {
            try FileManager.default.createDirectory(
                at: root.appendingPathComponent(name), withIntermediateDirectories: true)
        }
        #expect(chmod(root.path, 0o755) == 0 && chmod(root.appendingPathComponent("3").path, 0) == 0)
        let arguments = ["data", "check", "--data", root.path, "--json"]
        let output =
            getuid() == 0
            ? try CLIRunner.runProgram(
                "/usr/bin/setpriv",
                ["--reuid=65534", "--regid=65534", "--clear-groups", CLIRunner.binary.path] + arguments)
            : try CLIRunner.run(arguments)
        #expect(output.status == 1, "\(output.standardError)")
        let report = try #require(
            try JSONSerialization.jsonObject(with: Data(output.standardOutput.utf8)) as? [String: Any])
        let problems = report["problems"] as? [[String: Any]] ?? []
        let unreadable = problems.first { $0["kind"] as? String == "unreadable_folder" }
        #expect((unreadable?["message"] as? String)?.contains("Permission denied") == true, "\(problems)")
        #expect(!problems.contains { $0["kind"] as? String == "empty_user" })
    }

    /// A file name with an escape sequence is printed visibly, never sent to the terminal raw.
    @Test func escapeSequencesInFileNamesAreShownNotSent() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("facetrain-esc-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        try FileManager.default.createDirectory(
            at: root.appendingPathComponent("3"), withIntermediateDirectories: true)
        try Data("not an image".utf8).write(to: root.appendingPathComponent("3/\u{1B}[2Jclear.jpg"))
        try Data("not an image".utf8).write(to: root.appendingPathComponent("3/b\u{202E}gpj.jpg"))
        let output = try CLIRunner.run(["data", "check", "--data", root.path])
        #expect(output.status == 1)
        let text = output.standardOutput + output.standardError
        #expect(text.contains("\\u{1B}[2Jclear.jpg"), "\(text)")
        #expect(!text.unicodeScalars.contains("\u{1B}") && !text.unicodeScalars.contains("\u{202E}"))
        #expect(text.contains("b\\u{202E}gpj.jpg"))
    }
}
