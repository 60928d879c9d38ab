import Foundation

// How the engine asks glibc to keep freed tensor memory for the next step. Not an allocator of its
// own: tensors still come from Swift arrays.

#if os(Linux)
    /// glibc's `int mallopt(int param, int value)`: <malloc.h> is not in Swift's Glibc module.
    @_silgen_name("mallopt") private func mallopt(_ parameter: Int32, _ value: Int32) -> Int32
    /// <malloc.h>'s M_TRIM_THRESHOLD and M_MMAP_THRESHOLD.
    private let trimThreshold: Int32 = -1
    private let mmapThreshold: Int32 = -3
#endif

/// glibc's malloc policy for the engine's tensors: keep what a step freed for the next step.
///
/// Every step allocates activations and gradients of a few MB each and frees them at its end.
/// glibc gives blocks above its (dynamic) mmap threshold back to the kernel, and trims a free heap
/// top above its trim threshold, so the next step page-faults the same memory in again and the
/// kernel zeroes every page: 17 % of `bench --architecture mobile-face`'s samples were the kernel
/// clearing pages. Fixed thresholds keep blocks up to 32 MB in the heap and up to 512 MB of free heap
/// top, so steps reuse their memory. The peak is unchanged (a step needs it all at once anyway), but
/// up to 512 MB of it is kept between steps. `MALLOC_MMAP_THRESHOLD_` or `MALLOC_TRIM_THRESHOLD_` in
/// the environment (glibc's own settings) leave the policy to the user.
enum AllocatorPolicy {
    static let configureOnce: Void = {
        #if os(Linux)
            let environment = ProcessInfo.processInfo.environment
            guard environment["MALLOC_MMAP_THRESHOLD_"] == nil, environment["MALLOC_TRIM_THRESHOLD_"] == nil else {
                return
            }
            _ = mallopt(mmapThreshold, 32 << 20)
            _ = mallopt(trimThreshold, 512 << 20)
        #endif
    }()
}
