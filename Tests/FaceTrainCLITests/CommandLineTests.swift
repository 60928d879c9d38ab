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

    /// `FACETRAIN_VECTOR_KERNELS`: a lower set is taken and named by `blas`; a name that is no set,
    /// or a set above the CPU's, is refused at start-up before any work, naming the sets it runs.
    @Test func engineKernelSetsAreNamedAndBadChoicesRefused() throws {
        let portable = try CLIRunner.run(["blas"], environment: ["FACETRAIN_VECTOR_KERNELS": "portable"])
        #expect(portable.status == 0, "\(portable.standardError)")
        #expect(
            portable.standardOutput.contains(
                "Engine kernels: portable, chosen by FACETRAIN_VECTOR_KERNELS in the environment"),
            "\(portable.standardOutput)")
        let chosen = try CLIRunner.run(["blas"], environment: ["FACETRAIN_VECTOR_KERNELS": ""])
        #expect(chosen.standardOutput.contains(", chosen by the best this CPU runs"), "\(chosen.standardOutput)")

        let misspelt = try CLIRunner.run(["--version"], environment: ["FACETRAIN_VECTOR_KERNELS": "avx-2"])
        #expect(misspelt.status == 1)
        #expect(misspelt.standardError.contains("FACETRAIN_VECTOR_KERNELS=avx-2 is not a kernel set"))
        #expect(misspelt.standardError.contains("portable"), "names the sets it runs: \(misspelt.standardError)")
        #expect(misspelt.standardOutput.isEmpty)

        let flags = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        if !flags.contains("avx512f") {
            let above = try CLIRunner.run(["--version"], environment: ["FACETRAIN_VECTOR_KERNELS": "avx512"])
            #expect(above.status == 1)
            #expect(above.standardError.contains("this CPU cannot run it"), "\(above.standardError)")
        }
    }

    /// The environment of a facetrain that chooses its own kernel (`make test` sets the product's).
    static let choosing = ["OPENBLAS_CORETYPE": "", "FACETRAIN_BLAS_REEXEC": ""]
    /// A CPU with AVX2 but no AVX-512 (Zen 3), as far as facetrain's choice is concerned.
    static let avx2Flags = "fpu sse sse2 pni ssse3 fma cx16 sse4_1 sse4_2 popcnt avx f16c avx2 bmi1 bmi2"

    @Test func kernelSelectionPicksTheFastestCorrectKernelAndHonoursTheUser() throws {
        let flags = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let chosen = try CLIRunner.run(["--version"], environment: Self.choosing)
        if flags.contains("avx512f") && flags.contains("avx512bw") {
            // Cooperlake (where OpenBLAS picks it on a BF16 CPU) runs SkylakeX's float kernels.
            #expect(
                chosen.standardOutput.contains("SkylakeX kernel") || chosen.standardOutput.contains("Cooperlake kernel")
            )
        } else if flags.contains(" avx2") && flags.contains(" fma") {
            #expect(chosen.standardOutput.contains("Haswell kernel"))
        }
        let forced = try CLIRunner.run(["--version"], environment: ["OPENBLAS_CORETYPE": "Prescott"])
        #expect(forced.standardOutput.contains("Prescott kernel"))
    }

    /// A CPU OpenBLAS does not know (a new Xeon): OpenBLAS runs Prescott, and facetrain re-executes
    /// itself with the best kernel the CPU's flags allow, which then passes its GEMM self-check.
    @Test func aCPUOpenBLASDoesNotKnowGetsItsBestKernelAfterTheSelfCheck() throws {
        let unknownCPU = Self.choosing.merging([
            "FACETRAIN_TEST_COMMANDS": "1", "FACETRAIN_TEST_UNKNOWN_CPU": "1", "OPENBLAS_CORETYPE": "Prescott",
        ]) { $1 }
        let output = try CLIRunner.run(
            ["blas"], environment: unknownCPU.merging(["FACETRAIN_TEST_CPU_FLAGS": Self.avx2Flags]) { $1 })
        #expect(output.status == 0, "\(output.standardError)")
        #expect(output.standardOutput.contains("(Haswell kernel"), "\(output.standardOutput)")
        #expect(output.standardOutput.contains("Kernel chosen by: facetrain (Haswell)"))
        #expect(output.standardOutput.contains("SkylakeX    needs avx512"))
        #expect(output.standardError.isEmpty, "the self-check passes: \(output.standardError)")

        // A kernel that fails the self-check is dropped for OpenBLAS's own choice, with a warning.
        let failing = try CLIRunner.run(
            ["blas"], environment: unknownCPU.merging(["FACETRAIN_TEST_BLAS_SELF_CHECK": "fail"]) { $1 })
        #expect(failing.status == 0)
        #expect(failing.standardError.contains("failed its self-check; using OpenBLAS's default"))
        #expect(
            failing.standardOutput.contains("Kernel chosen by: OpenBLAS (facetrain's choice failed its self-check)"))
        #expect(!failing.standardOutput.contains("Kernel chosen by: facetrain ("))
    }

    /// Where OpenBLAS picked an AVX-512 kernel for a CPU with AVX2 only, facetrain corrects it.
    @Test func anAVX2CPUGetsHaswell() throws {
        let output = try CLIRunner.run(
            ["--version"],
            environment: Self.choosing.merging([
                "FACETRAIN_TEST_COMMANDS": "1", "FACETRAIN_TEST_CPU_FLAGS": Self.avx2Flags,
            ]) { $1 })
        #expect(output.standardOutput.contains("(Haswell kernel"), "\(output.standardOutput)")
    }

    /// `OPENBLAS_CORETYPE=SkylakeX` on an AVX2-only CPU would die with SIGILL in OpenBLAS: facetrain
    /// refuses before any GEMM, naming the variable and what the CPU can run.
    @Test func aUsersKernelTheCPUCannotRunIsRefusedNotCrashed() throws {
        let avx2CPU = Self.choosing.merging([
            "FACETRAIN_TEST_COMMANDS": "1", "FACETRAIN_TEST_CPU_FLAGS": Self.avx2Flags,
        ]) { $1 }
        let output = try CLIRunner.run(
            ["fit", "--data", "/nonexistent"], environment: avx2CPU.merging(["OPENBLAS_CORETYPE": "SkylakeX"]) { $1 })
        #expect(output.status == 1)
        #expect(output.standardError.contains("Error: OPENBLAS_CORETYPE=SkylakeX needs CPU instructions"))
        #expect(output.standardError.contains("avx512f"))
        #expect(output.standardError.contains("set it to a kernel this CPU runs: Prescott, Haswell, Zen"))
        #expect(output.standardOutput.isEmpty && !output.standardError.contains("Fatal"))

        let check = try CLIRunner.run(["blas", "--check", "SkylakeX"], environment: avx2CPU)
        #expect(check.status == 1)
        #expect(
            check.standardError.contains("SkylakeX: this CPU lacks avx512bw, avx512cd, avx512dq, avx512f, avx512vl"))
        let runnable = try CLIRunner.run(["blas", "--check", "haswell"], environment: avx2CPU)
        #expect(runnable.status == 0 && runnable.standardOutput.contains("can run it"))
        let unknown = try CLIRunner.run(["blas", "--check", "SapphireRapids"])
        #expect(unknown.status == 1 && unknown.standardError.contains("not an x86-64 core type OpenBLAS knows"))
    }

    @Test func blasNamesTheCPUTheKernelAndTheMatrix() throws {
        let output = try CLIRunner.run(["blas"])
        #expect(output.status == 0)
        let lines = output.standardOutput.split(separator: "\n").map(String.init)
        #expect(lines.first?.hasPrefix("CPU: ") == true)
        #expect(lines.contains { $0.hasPrefix("BLAS: OpenBLAS 0.3") && $0.contains(" kernel") })
        for core in ["Prescott", "Haswell", "SkylakeX", "Cooperlake"] {
            #expect(lines.contains { $0.hasPrefix("  \(core)") }, "\(core)")
        }
        let running = try CLIRunner.run(["blas", "--running"], environment: ["OPENBLAS_CORETYPE": "Haswell"])
        #expect(running.standardOutput == "Haswell\n")
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
