import Dispatch
import Foundation
import Synchronization

/// Parallel loops for the non-GEMM work, and the threading policy shared with OpenBLAS.
///
/// Policy: OpenBLAS runs with ONE thread and the engine parallelises over images (or channels)
/// itself, on its helper threads (`WorkerPool`; Dispatch's `concurrentPerform` when they are taken).
/// OpenBLAS threads spin while they wait and split work statically, so with a busy neighbour on
/// one core a 2-thread GEMM stalls on the slower core (5–50× slowdowns measured here). The
/// engine's helpers take work items dynamically, poll only 150 µs after a loop before they
/// block, and never run at the same time as a second pool of BLAS threads.
package enum Parallel {
    /// Engine workers: one per core. `FACETRAIN_THREADS=1` runs every loop on the calling thread
    /// (then `OPENBLAS_NUM_THREADS` alone sets the parallelism), for comparisons and tiny machines.
    package static let workerCount: Int = {
        if let text = ProcessInfo.processInfo.environment["FACETRAIN_THREADS"], let count = Int(text), count >= 1 {
            return count
        }
        return max(1, ProcessInfo.processInfo.activeProcessorCount)
    }()

    /// Images are split into at most this many fixed ranges, each with its own scratch and partial
    /// gradients. Fixed (not per core) so results do not depend on the machine, and more than the
    /// cores so a core slowed by another process takes fewer ranges.
    static let chunkCount = 8

    /// Sets OpenBLAS to one thread the first time the engine runs (see the policy above), and the
    /// allocator's (AllocatorPolicy).
    static let configureOnce: Void = {
        if ProcessInfo.processInfo.environment["OPENBLAS_NUM_THREADS"] == nil { BLASRuntime.setThreadCount(1) }
        AllocatorPolicy.configureOnce
    }()

    /// Runs `body(i)` for `i` in `0..<count`, in parallel when there is more than one item.
    ///
    /// Items are taken dynamically, so a core slowed by another process simply takes fewer. The
    /// body must only write memory that no other item writes.
    package static func forEach(_ count: Int, _ body: (Int) -> Void) {
        _ = configureOnce
        if count <= 1 || workerCount == 1 {
            for index in 0..<count { body(index) }
            return
        }
        if pool.run(count, body) { return }
        // The callers hand out disjoint pointers; the compiler cannot see that, hence the box.
        withoutActuallyEscaping(body) { body in
            let work = UncheckedSendable(value: body)
            DispatchQueue.concurrentPerform(iterations: count) { work.value($0) }
        }
    }

    /// The helper threads that start a loop without waking a thread (WorkerPool); a loop they are
    /// busy with sends the next one to Dispatch.
    static let pool = WorkerPool(helpers: workerCount - 1)

    /// Network forwards running now in this process. An image of a batch-1 forward is shared among
    /// the workers only when no other forward runs (ImageSharing): a server answering several
    /// requests at once already keeps the cores busy, and splitting each adds only waits (measured:
    /// 53 recognitions a second from 4 connections with sharing, 60 without).
    package static let runningForwards = Atomic<Int>(0)

    /// Splits `0..<count` into at most `parts` contiguous ranges of nearly equal size.
    ///
    /// The split depends only on its arguments, never on timing, so per-range partial sums
    /// reduced in range order give bitwise identical results run after run.
    package static func ranges(_ count: Int, parts: Int) -> [Range<Int>] {
        let parts = max(1, min(parts, count))
        return (0..<parts).map { part in (part * count / parts)..<((part + 1) * count / parts) }
    }
}

/// Carries a value the caller has made safe to share across the workers of one parallel loop.
private struct UncheckedSendable<Value>: @unchecked Sendable {
    let value: Value
}

extension Parallel {
    /// Computes `body(i)` for every index in parallel and returns the results in index order.
    package static func map<T>(_ count: Int, _ body: (Int) -> T) -> [T] {
        guard count > 0 else { return [] }
        let results = UnsafeMutableBufferPointer<T?>.allocate(capacity: count)
        results.initialize(repeating: nil)
        defer {
            // Deinitialised first: the results the buffer holds (arrays) would otherwise leak.
            results.deinitialize()
            results.deallocate()
        }
        let slots = UncheckedSendable(value: results)
        forEach(count) { slots.value[$0] = body($0) }
        return results.map { $0! }
    }
}
