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
        #expect(kinds == ["folder_not_an_id", "missing_negative_class", "missing_negative_class"])
    }
}
