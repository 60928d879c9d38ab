import CBLAS

/// Row-major single-precision matrix product, in `cblas_sgemm` argument order:
/// `C[m×n] = alpha · op(A)[m×k] · op(B)[k×n] + beta · C`.
///
/// The leading dimensions follow from the shapes (A is m×k or, transposed, k×m; and so on), so
/// callers only pass what differs between calls.
@inline(__always)
package func gemm(
    transposeA: Bool, transposeB: Bool, m: Int, n: Int, k: Int,
    alpha: Float = 1, a: UnsafePointer<Float>, b: UnsafePointer<Float>,
    beta: Float = 0, c: UnsafeMutablePointer<Float>
) {
    // The threading policy (Parallel.swift) before the first product, whichever code path runs first:
    // a fit whose embeddings are all cached builds no convolution, and two BLAS threads spinning
    // under the engine's own workers made its calibration several times slower.
    _ = Parallel.configureOnce
    cblas_sgemm(
        CblasRowMajor, transposeA ? CblasTrans : CblasNoTrans, transposeB ? CblasTrans : CblasNoTrans,
        Int32(m), Int32(n), Int32(k), alpha,
        a, Int32(transposeA ? m : k), b, Int32(transposeB ? k : n), beta, c, Int32(n))
}
