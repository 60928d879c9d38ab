import CBLAS
import Foundation

/// Which OpenBLAS kernel runs, and choosing the right one before the library loads.
///
/// Debian's OpenBLAS 0.3.21 does not know recent Xeons and falls back to its SSE3 `Prescott`
/// kernels, 3.6x slower than `SkylakeX` here. It picks the kernel in a library constructor, so
/// `OPENBLAS_CORETYPE` must be in the environment when the process starts: `selectKernel`
/// re-executes the program with it set.
public enum BLASRuntime {
    /// Set on the re-executed process so it never re-executes twice.
    static let reexecMarker = "FACETRAIN_BLAS_REEXEC"

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
    public static func bestCoreType(cpuFlags: Set<String>) -> String? {
        let avx512: Set<String> = ["avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd"]
        if avx512.isSubset(of: cpuFlags) { return "SkylakeX" }
        if cpuFlags.contains("avx2") && cpuFlags.contains("fma") { return "Haswell" }
        return nil
    }

    /// The CPU flags from /proc/cpuinfo (empty where it cannot be read).
    public static func cpuFlags() -> Set<String> {
        guard let text = try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8),
            let line = text.split(separator: "\n").first(where: { $0.hasPrefix("flags") }),
            let colon = line.firstIndex(of: ":")
        else { return [] }
        return Set(line[line.index(after: colon)...].split(separator: " ").map(String.init))
    }

    /// Whether the process should re-execute itself with a better kernel, and with which.
    ///
    /// Never when the user set `OPENBLAS_CORETYPE` (their choice wins), when this process is
    /// already the re-executed one, or when OpenBLAS already runs the best kernel.
    public static func coreTypeToSelect(environment: [String: String]) -> String? {
        if environment["OPENBLAS_CORETYPE", default: ""] != "" || environment[reexecMarker, default: ""] != "" {
            return nil
        }
        guard let best = bestCoreType(cpuFlags: cpuFlags()) else { return nil }
        return kernel.lowercased() == best.lowercased() ? nil : best
    }

    /// Re-executes the current program with `OPENBLAS_CORETYPE` set when that gives a faster
    /// correct kernel; returns only when no re-exec is needed or it failed.
    ///
    /// In the re-executed process, a GEMM self-check confirms the choice; if it fails, the
    /// program runs once more with OpenBLAS's own choice and a warning.
    public static func selectKernel() {
        let environment = ProcessInfo.processInfo.environment
        if let coreType = coreTypeToSelect(environment: environment) {
            setenv("OPENBLAS_CORETYPE", coreType, 1)
            setenv(reexecMarker, coreType, 1)
            reexecute()
            unsetenv("OPENBLAS_CORETYPE")  // execv failed: carry on with the kernel we have
            return
        }
        if let chosen = environment[reexecMarker], !chosen.isEmpty, chosen != "rejected", selfCheck() > 1e-4 {
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
