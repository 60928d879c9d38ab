import Dispatch

/// Computes `body(i)` for every index on all cores and returns the results in index order.
func parallelMap<T>(count: Int, _ body: (Int) -> T) -> [T] {
    guard count > 0 else { return [] }
    let results = UnsafeMutableBufferPointer<T?>.allocate(capacity: count)
    results.initialize(repeating: nil)
    defer { results.deallocate() }
    withoutActuallyEscaping(body) { body in
        nonisolated(unsafe) let body = body
        nonisolated(unsafe) let results = results
        DispatchQueue.concurrentPerform(iterations: count) { index in
            results[index] = body(index)
        }
    }
    return results.map { $0! }
}
