import CVectorKernels
import Foundation

/// Which of the engine's kernel sets runs: the C target CVectorKernels' AVX-512 or AVX2 kernels, or
/// the portable Swift ones. The one place that decides. Not the BLAS kernel (BLASRuntime chooses
/// OpenBLAS's).
///
/// The Swift build targets baseline x86-64 (SSE2), so a kernel written in Swift uses 4-float
/// vectors even on a CPU with 8- or 16-float ones. CVectorKernels compiles each kernel twice with
/// per-function target attributes: for AVX-512 (F, VL, DQ) and for AVX2 with FMA. The best set the
/// CPU has runs, unless `FACETRAIN_VECTOR_KERNELS` asks for a lower one (`portable`, `avx2`; to
/// compare, or to rule a set out; a set above the CPU's is not taken). The C sets give each other's
/// bits and the transforms the Swift kernels' (the tests compare them), so the choice changes speed only.
package enum VectorKernels {
    package enum Level: Int, Sendable, Comparable, CaseIterable {
        case portable, avx2, avx512

        package static func < (left: Level, right: Level) -> Bool { left.rawValue < right.rawValue }

        package var name: String {
            switch self {
            case .portable: "portable"
            case .avx2: "avx2"
            case .avx512: "avx512"
            }
        }
    }

    /// The best set this CPU runs.
    package static let available = Level(rawValue: Int(facetrain_vector_level())) ?? .portable

    /// The set that runs.
    package static let level: Level = min(asked ?? available, available)

    /// The set `FACETRAIN_VECTOR_KERNELS` names, if it names one.
    private static let asked: Level? = ProcessInfo.processInfo.environment[variable].flatMap { name in
        Level.allCases.first { $0.name == name }
    }
    private static let variable = "FACETRAIN_VECTOR_KERNELS"

    /// What is wrong with `FACETRAIN_VECTOR_KERNELS`, for the CLI to refuse at start-up: a name that
    /// is not a set, or a set this CPU cannot run (the engine would run another). Nil when unset or fine.
    package static var environmentProblem: String? {
        guard let value = ProcessInfo.processInfo.environment[variable], !value.isEmpty else { return nil }
        let runnable = Level.allCases.filter { $0 <= available }.map(\.name).joined(separator: ", ")
        guard let asked else {
            return "\(variable)=\(value) is not a kernel set; use one this CPU runs (\(runnable)) or unset it"
        }
        guard asked <= available else {
            return "\(variable)=\(value): this CPU cannot run it; use one it runs (\(runnable)) or unset it"
        }
        return nil
    }

    /// Who chose `level`, for `facetrain blas`.
    package static var choice: String { asked == nil ? "the best this CPU runs" : "\(variable) in the environment" }

    /// Whether a C set runs (packed Winograd weights, the direct first-layer kernel, bands).
    package static var vectorized: Bool { level != .portable }

    /// What runs, for benchmarks and `facetrain bench`: "avx512", "avx2" or "portable".
    package static var name: String { level.name }
}
