import Foundation
import Synchronization
import Testing

@testable import FaceTrainEngine

/// The helper threads behind `Parallel.forEach`: every item of every loop runs exactly once, loops
/// come one right after another or after the helpers went to sleep, a loop inside a loop and loops
/// from several threads at once (which go to Dispatch while the pool is taken) all finish.
@Suite struct WorkerPoolTests {
    /// Runs `count` items through a fresh pool (or Parallel.forEach when `pool` is nil) and returns
    /// how many times each index ran.
    static func runs(_ count: Int, pool: WorkerPool?) -> [Int] {
        let tally = UnsafeMutableBufferPointer<Int>.allocate(capacity: count)
        tally.initialize(repeating: 0)
        defer { tally.deallocate() }
        let box = Tally(pointer: tally)
        if let pool {
            #expect(pool.run(count) { box.pointer[$0] += 1 })
        } else {
            Parallel.forEach(count) { box.pointer[$0] += 1 }
        }
        return Array(tally)
    }

    struct Tally: @unchecked Sendable { let pointer: UnsafeMutableBufferPointer<Int> }

    @Test func everyItemRunsOnceLoopAfterLoop() {
        let pool = WorkerPool(helpers: 3)
        for round in 0..<5_000 {
            let count = 1 + round % 13
            let tally = Self.runs(count, pool: pool)
            if tally != [Int](repeating: 1, count: count) {
                Issue.record("round \(round): \(tally)")
                return
            }
        }
    }

    @Test func sleepingHelpersAreWokenForTheNextLoop() {
        let pool = WorkerPool(helpers: 2)
        for _ in 0..<20 {
            // Longer than the helpers poll, so each loop finds them asleep.
            Thread.sleep(forTimeInterval: Double(WorkerPool.idleSpin) * 4e-9)
            #expect(Self.runs(7, pool: pool) == [Int](repeating: 1, count: 7))
        }
    }

    @Test func aLoopInsideALoopRunsOnDispatch() {
        // The pool is held by the outer loop, so the inner one is refused and goes to Dispatch.
        let pool = WorkerPool(helpers: 1)
        let refused = Atomic<Int>(0)
        #expect(
            pool.run(4) { _ in
                if !pool.run(3, { _ in }) { refused.add(1, ordering: .relaxed) }
            })
        #expect(refused.load(ordering: .relaxed) == 4)
        // The same through Parallel.forEach and the engine's own pool.
        let inner = Atomic<Int>(0)
        Parallel.forEach(4) { _ in Parallel.forEach(3) { _ in inner.add(1, ordering: .relaxed) } }
        #expect(inner.load(ordering: .relaxed) == 12)
    }

    /// Generations count modulo 2^32: loops across the wrap still reach the caller (a pool with no
    /// helpers hangs if the caller does not take its own items).
    @Test func generationsWrapAround() {
        for helpers in [0, 1] {
            let pool = WorkerPool(helpers: helpers, firstGeneration: 0xFFFF_FFFF - 3)
            for count in [2, 5, 3, 9, 2, 7, 4] {
                #expect(Self.runs(count, pool: pool) == [Int](repeating: 1, count: count))
            }
        }
    }

    @Test func loopsFromSeveralThreadsAllFinish() {
        let failures = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: 4) { caller in
            for round in 0..<500 {
                let count = 2 + (round + caller) % 9
                if Self.runs(count, pool: nil) != [Int](repeating: 1, count: count) {
                    failures.add(1, ordering: .relaxed)
                }
            }
        }
        #expect(failures.load(ordering: .relaxed) == 0)
    }
}
