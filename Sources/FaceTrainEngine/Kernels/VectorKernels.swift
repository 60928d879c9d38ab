import CVectorKernels
import Foundation

/// Whether the engine runs its AVX-512 kernels (the C target CVectorKernels) or its portable Swift
/// ones: the one place that decides. Not the BLAS kernel (BLASRuntime chooses OpenBLAS's).
///
/// The Swift build targets baseline x86-64 (SSE2), so a kernel written in Swift uses 4-float
/// vectors even on a CPU with 16-float ones. CVectorKernels compiles each kernel for AVX-512 with a
/// per-function target attribute; it runs when the CPU has AVX-512 F, VL and DQ, unless
/// `FACETRAIN_VECTOR_KERNELS=portable` asks for the Swift kernels (to compare, or to rule the C ones
/// out). Both give the same bits (the tests compare them), so the choice changes speed only.
package enum VectorKernels {
    package static let avx512: Bool = {
        if let choice = ProcessInfo.processInfo.environment["FACETRAIN_VECTOR_KERNELS"], choice == "portable" {
            return false
        }
        return facetrain_vector_level() >= 2
    }()

    /// What runs, for benchmarks and `facetrain bench`: "avx512" or "portable".
    package static var name: String { avx512 ? "avx512" : "portable" }
}
