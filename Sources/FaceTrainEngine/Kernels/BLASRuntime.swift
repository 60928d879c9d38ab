import CBLAS
import Foundation

/// Which OpenBLAS kernel runs, and choosing the right one before the library loads.
///
/// Debian's OpenBLAS 0.3.21 does not know recent Xeons and falls back to its SSE3 `Prescott`
/// kernels, 3.6x slower than `SkylakeX` there. It picks the kernel in a library constructor, so
/// `OPENBLAS_CORETYPE` must be in the environment when the process starts: `selectKernel`
/// re-executes the program with it set. This file decides and checks; it runs no GEMM of the
/// engine's (that is Kernels/GEMM.swift's work).
public enum BLASRuntime {
    /// Set on the re-executed process so it never re-executes twice.
    static let reexecMarker = "FACETRAIN_BLAS_REEXEC"

    /// The x86-64 core types OpenBLAS 0.3.21 can be told to use, with the CPU flags (as
    /// /proc/cpuinfo names them) that their kernels execute. A core type whose flags the CPU
    /// lacks dies with SIGILL at its first GEMM: OpenBLAS does not check (its `force_coretype`
    /// only matches the name), so facetrain does.
    public static let coreTypeRequirements: [String: Set<String>] = {
        let sse3: Set<String> = ["pni"]
        let avx2: Set<String> = ["avx", "avx2", "fma"]
        let avx512 = avx2.union(["avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"])
        let fma4: Set<String> = ["avx", "fma", "fma4"]
        return [
            "Katmai": [], "Coppermine": [], "Northwood": [], "Banias": [], "Athlon": [], "Opteron": [],
            "Prescott": sse3, "Opteron_SSE3": sse3, "Nano": sse3.union(["ssse3"]),
            "Atom": sse3.union(["ssse3"]), "Core2": sse3.union(["ssse3"]),
            "Penryn": sse3.union(["ssse3", "sse4_1"]), "Dunnington": sse3.union(["ssse3", "sse4_1"]),
            "Nehalem": sse3.union(["ssse3", "sse4_1", "sse4_2"]),
            "Barcelona": sse3.union(["sse4a"]), "Bobcat": sse3.union(["ssse3", "sse4a"]),
            "Sandybridge": sse3.union(["avx"]), "Bulldozer": ["avx", "fma4"],
            "Piledriver": fma4, "Steamroller": fma4, "Excavator": fma4,
            "Haswell": avx2, "Zen": avx2, "SkylakeX": avx512, "Cooperlake": avx512.union(["avx512_bf16"]),
        ]
    }()

    /// The core types `make test`'s kernel matrix tries, slowest first: the SSE3 fallback that
    /// OpenBLAS uses for CPUs it does not know, the AVX2 and AVX-512 kernels facetrain chooses,
    /// and the newest this OpenBLAS offers.
    public static let matrixCoreTypes = ["Prescott", "Haswell", "SkylakeX", "Cooperlake"]

    /// The kernel OpenBLAS chose, such as "SkylakeX" or "Prescott".
    public static var kernel: String {
        guard let name = openblas_get_corename() else { return "unknown" }
        return String(cString: name)
    }

    /// OpenBLAS's build configuration line, which names the library version.
    public static var configuration: String {
        guard let config = openblas_get_config() else { return "unknown" }
        return String(cString: config).trimmingCharacters(in: .whitespaces)
    }

    /// "OpenBLAS 0.3.21 (SkylakeX kernel, 2 threads)" — for `--version`, bench output and manifests.
    public static var summary: String {
        // The engine's threading policy first, so the count printed is the one GEMMs will run with.
        _ = Parallel.configureOnce
        let version = configuration.split(separator: " ").prefix(2).joined(separator: " ")
        return "\(version) (\(kernel) kernel, \(threadCount) thread\(threadCount == 1 ? "" : "s"))"
    }

    /// Threads OpenBLAS uses for one GEMM.
    public static var threadCount: Int { Int(openblas_get_num_threads()) }

    /// Sets the number of OpenBLAS threads.
    public static func setThreadCount(_ count: Int) { openblas_set_num_threads(Int32(count)) }

    /// The fastest OpenBLAS core type that is correct on this CPU, from the kernel's flags.
    ///
    /// AVX-512 F/BW/DQ/VL/CD -> SkylakeX; AVX2 + FMA -> Haswell; otherwise nil (let OpenBLAS decide).
    /// Cooperlake's single-precision kernels are SkylakeX's, so it is accepted where OpenBLAS
    /// picked it itself (see `coreTypeToSelect`) but never chosen over SkylakeX.
    public static func bestCoreType(cpuFlags: Set<String>) -> String? {
        if let avx512 = coreTypeRequirements["SkylakeX"], avx512.isSubset(of: cpuFlags) { return "SkylakeX" }
        if let avx2 = coreTypeRequirements["Haswell"], avx2.isSubset(of: cpuFlags) { return "Haswell" }
        return nil
    }

    /// The name OpenBLAS spells `name` with (it compares core types case-insensitively), or nil
    /// for a name it does not know (OpenBLAS then ignores the variable and detects the CPU).
    public static func knownCoreType(_ name: String) -> String? {
        coreTypeRequirements.keys.first { $0.caseInsensitiveCompare(name) == .orderedSame }
    }

    /// The flags `coreType` needs that `cpuFlags` lacks, sorted; empty when it can run (or when
    /// OpenBLAS does not know the name, which it ignores).
    public static func missingFlags(coreType: String, cpuFlags: Set<String>) -> [String] {
        guard let known = knownCoreType(coreType), let needed = coreTypeRequirements[known] else { return [] }
        return needed.subtracting(cpuFlags).sorted()
    }

    /// The core types of `matrixCoreTypes` this CPU can execute.
    public static func runnableMatrixCoreTypes(cpuFlags: Set<String>) -> [String] {
        matrixCoreTypes.filter { missingFlags(coreType: $0, cpuFlags: cpuFlags).isEmpty }
    }

    /// The CPU flags from /proc/cpuinfo (empty where it cannot be read).
    public static func cpuFlags() -> Set<String> {
        Set(cpuInfoField("flags").split(separator: " ").map(String.init))
    }

    /// The CPU's model name from /proc/cpuinfo, such as "AMD EPYC" ("unknown CPU" where unreadable).
    public static func cpuModel() -> String {
        let name = cpuInfoField("model name").trimmingCharacters(in: .whitespaces)
        return name.isEmpty ? "unknown CPU" : name
    }

    /// The value of the first /proc/cpuinfo line whose key is `field` ("" where there is none).
    private static func cpuInfoField(_ field: String) -> String {
        guard let text = try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8) else { return "" }
        for line in text.split(separator: "\n") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            if line[..<colon].trimmingCharacters(in: .whitespaces) == field {
                return String(line[line.index(after: colon)...])
            }
        }
        return ""
    }

    /// Why a user's `OPENBLAS_CORETYPE` cannot run on this CPU, or nil when it can (or is unset,
    /// or is a name OpenBLAS ignores).
    public static func unrunnableCoreTypeMessage(environment: [String: String], cpuFlags: Set<String>) -> String? {
        let requested = environment["OPENBLAS_CORETYPE", default: ""]
        let missing = missingFlags(coreType: requested, cpuFlags: cpuFlags)
        guard !requested.isEmpty, !missing.isEmpty else { return nil }
        let runnable = coreTypeRequirements.keys.filter { missingFlags(coreType: $0, cpuFlags: cpuFlags).isEmpty }
        let offered = matrixCoreTypes.filter(runnable.contains) + ["Zen"].filter(runnable.contains)
        return "Error: OPENBLAS_CORETYPE=\(requested) needs CPU instructions this CPU (\(cpuModel())) lacks: "
            + "\(missing.joined(separator: ", ")). OpenBLAS does not check, and would stop with an illegal "
            + "instruction.\nHINT: unset OPENBLAS_CORETYPE to let facetrain choose, or set it to a kernel this "
            + "CPU runs: \(offered.joined(separator: ", "))."
    }

    /// Whether the process should re-execute itself with a better kernel, and with which.
    ///
    /// Never when the user set `OPENBLAS_CORETYPE` (their choice wins), when this process is
    /// already the re-executed one, or when OpenBLAS already runs the best kernel (or Cooperlake,
    /// whose single-precision kernels are SkylakeX's, on a CPU that runs it). `runningKernel` is
    /// what OpenBLAS picked on its own: "Prescott" on a CPU it does not know.
    public static func coreTypeToSelect(
        environment: [String: String], cpuFlags: Set<String>, runningKernel: String
    ) -> String? {
        if environment["OPENBLAS_CORETYPE", default: ""] != "" || environment[reexecMarker, default: ""] != "" {
            return nil
        }
        guard let best = bestCoreType(cpuFlags: cpuFlags) else { return nil }
        let running = runningKernel.lowercased()
        if running == best.lowercased() { return nil }
        if best == "SkylakeX", running == "cooperlake",
            missingFlags(coreType: "Cooperlake", cpuFlags: cpuFlags).isEmpty
        {
            return nil
        }
        return best
    }

    /// What `selectKernel` found wrong, for the caller to print before exiting.
    public struct KernelRefusal: Error {
        public let message: String
    }

    /// Re-executes the current program with `OPENBLAS_CORETYPE` set when that gives a faster
    /// correct kernel; returns only when no re-exec is needed or it failed. Throws, before any
    /// GEMM runs, when the user's `OPENBLAS_CORETYPE` names a kernel this CPU cannot execute.
    ///
    /// In the re-executed process, a GEMM self-check confirms the choice; if it fails, the
    /// program runs once more with OpenBLAS's own choice and a warning. The arguments exist for
    /// tests that simulate another CPU: its flags, a kernel OpenBLAS picked for a CPU it does not
    /// know (`OPENBLAS_CORETYPE` then counts as OpenBLAS's choice, not the user's), and a failing
    /// self-check.
    public static func selectKernel(
        cpuFlags flags: Set<String>? = nil, openBLASDoesNotKnowThisCPU: Bool = false,
        selfCheckFails: Bool = false
    ) throws(KernelRefusal) {
        var environment = ProcessInfo.processInfo.environment
        let flags = flags ?? cpuFlags()
        if openBLASDoesNotKnowThisCPU, environment[reexecMarker, default: ""].isEmpty {
            environment["OPENBLAS_CORETYPE"] = nil
        }
        if let message = unrunnableCoreTypeMessage(environment: environment, cpuFlags: flags) {
            throw KernelRefusal(message: message)
        }
        if let coreType = coreTypeToSelect(environment: environment, cpuFlags: flags, runningKernel: kernel) {
            setenv("OPENBLAS_CORETYPE", coreType, 1)
            setenv(reexecMarker, coreType, 1)
            reexecute()
            unsetenv("OPENBLAS_CORETYPE")  // execv failed: carry on with the kernel we have
            return
        }
        if let chosen = environment[reexecMarker], !chosen.isEmpty, chosen != "rejected",
            selfCheckFails || selfCheck() > 1e-4
        {
            FileHandle.standardError.write(
                Data("warning: OpenBLAS kernel \(chosen) failed its self-check; using OpenBLAS's default\n".utf8))
            unsetenv("OPENBLAS_CORETYPE")
            setenv(reexecMarker, "rejected", 1)
            reexecute()
        }
    }

    private static func reexecute() {
        var cArguments = CommandLine.arguments.map { strdup($0) }
        cArguments.append(nil)
        execv("/proc/self/exe", &cArguments)
    }

    /// Multiplies two small random matrices with `cblas_sgemm` and compares with a naive loop;
    /// returns the largest relative error. A broken kernel shows errors far above 1e-5.
    public static func selfCheck() -> Float {
        let m = 37
        let n = 29
        let k = 53
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next() -> Float {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Float(Int64(bitPattern: state >> 11) % 2000) / 1000 - 1
        }
        let a = (0..<(m * k)).map { _ in next() }
        let b = (0..<(k * n)).map { _ in next() }
        var c = [Float](repeating: 0, count: m * n)
        cblas_sgemm(
            CblasRowMajor, CblasNoTrans, CblasNoTrans, Int32(m), Int32(n), Int32(k), 1, a, Int32(k), b, Int32(n), 0, &c,
            Int32(n))
        var worst: Float = 0
        for i in 0..<m {
            for j in 0..<n {
                var reference: Double = 0
                for p in 0..<k { reference += Double(a[i * k + p]) * Double(b[p * n + j]) }
                let error = abs(Double(c[i * n + j]) - reference) / max(1, abs(reference))
                worst = max(worst, Float(error))
            }
        }
        return worst
    }
}
