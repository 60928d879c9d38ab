import CVectorKernels
import Dispatch
import Foundation
import Synchronization

/// The engine's helper threads for `Parallel.forEach`: they keep polling for a short while after a
/// loop, so the next loop of the same forward starts at once instead of waking a sleeping thread.
/// Not a scheduler: one loop at a time, items handed out in index order to whoever asks first.
///
/// Why: Dispatch's `concurrentPerform` brings its second worker in about 45 µs late on the 2-core
/// VMs here (two 50 µs items took 97 µs; 2026-12-07), and a batch-1 forward of the detector runs
/// some 40 loops. A helper that finds no loop for `idleSpin` sleeps on its semaphore, so an idle
/// process costs nothing, and a loop that starts while another runs (a nested one, a second
/// request's forward) goes to `concurrentPerform` as before.
final class WorkerPool: @unchecked Sendable {
    /// How long a helper polls after its last item before it sleeps.
    static let idleSpin: UInt64 = 150_000

    private final class Helper: Sendable {
        /// 0 polling or working, 1 asleep (or about to be) on `wake`.
        let state = Atomic<Int>(0)
        let wake = DispatchSemaphore(value: 0)
    }

    private let helpers: [Helper]
    /// The loop on offer: its generation (high 32 bits, counting modulo 2^32) and the next unclaimed
    /// index (low 32; `closed` once the loop is over, so a helper that read an old ticket can claim
    /// nothing of the next loop).
    private let ticket = Atomic<UInt64>(0)
    private static let closed: UInt64 = 0xFFFF_FFFF
    private let itemCount = Atomic<Int>(0)
    private let finished = Atomic<Int>(0)
    private let inUse = Atomic<Bool>(false)
    /// The loop's body, set before its ticket is published and read only by whoever claims an item.
    private nonisolated(unsafe) var body: ((Int) -> Void)?
    /// The last generation published (written only by the loop's caller, while `inUse`).
    private nonisolated(unsafe) var generation: UInt64 = 0

    /// `firstGeneration` is for the tests of the generation's wrap-around.
    init(helpers count: Int, firstGeneration: UInt64 = 0) {
        generation = firstGeneration & Self.closed
        helpers = (0..<count).map { _ in Helper() }
        // The threads hold the pool: it lives, asleep when idle, as long as the process.
        for helper in helpers {
            let thread = Thread { self.serve(helper) }
            thread.stackSize = 8 << 20
            thread.name = "facetrain worker"
            thread.start()
        }
    }

    /// Runs `body(i)` for `i` in `0..<count` on the caller and the helpers, and returns true; false
    /// (nothing run) when another loop holds the pool, or for more items than a ticket counts.
    func run(_ count: Int, _ body: (Int) -> Void) -> Bool {
        guard count < Int(Self.closed),
            inUse.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged
        else { return false }
        defer { inUse.store(false, ordering: .releasing) }
        withoutActuallyEscaping(body) { body in
            self.body = body
            itemCount.store(count, ordering: .relaxed)
            finished.store(0, ordering: .relaxed)
            generation = (generation + 1) & Self.closed
            ticket.store(generation << 32, ordering: .sequentiallyConsistent)
            for helper in helpers
            where helper.state.compareExchange(expected: 1, desired: 0, ordering: .sequentiallyConsistent).exchanged {
                helper.wake.signal()
            }
            work(generation)
            var polls = 0
            while finished.load(ordering: .acquiring) < count {
                polls += 1
                // A helper holding the last item may have lost its core: let it have this one.
                if polls % 4096 == 0 { sched_yield() } else { facetrain_spin_pause() }
            }
            // Closed before `itemCount` changes for the next loop: a helper still holding this
            // loop's last ticket would otherwise claim an item of the next one.
            ticket.store(generation << 32 | Self.closed, ordering: .sequentiallyConsistent)
            self.body = nil
        }
        return true
    }

    /// Claims and runs items of loop `generation` until none is left.
    private func work(_ generation: UInt64) {
        var current = ticket.load(ordering: .acquiring)
        while true {
            let index = Int(current & 0xFFFF_FFFF)
            guard current >> 32 == generation, index < itemCount.load(ordering: .relaxed) else { return }
            let (exchanged, original) = ticket.compareExchange(
                expected: current, desired: current + 1, ordering: .acquiringAndReleasing)
            guard exchanged else {
                current = original
                continue
            }
            body!(index)
            finished.add(1, ordering: .releasing)
            current = ticket.load(ordering: .acquiring)
        }
    }

    /// A helper's life: poll for a new loop, work on it, and sleep after `idleSpin` without one.
    private func serve(_ helper: Helper) {
        var seen: UInt64 = 0
        var idleSince = DispatchTime.now().uptimeNanoseconds
        var polls = 0
        while true {
            let offered = ticket.load(ordering: .acquiring) >> 32
            if offered != seen {
                seen = offered
                work(seen)
                idleSince = DispatchTime.now().uptimeNanoseconds
                continue
            }
            polls += 1
            if polls % 256 == 0, DispatchTime.now().uptimeNanoseconds - idleSince > Self.idleSpin {
                helper.state.store(1, ordering: .sequentiallyConsistent)
                // A loop published between the last look and the store above found the helper
                // awake and signalled nobody: look once more before sleeping.
                if ticket.load(ordering: .sequentiallyConsistent) >> 32 != seen,
                    helper.state.compareExchange(expected: 1, desired: 0, ordering: .sequentiallyConsistent).exchanged
                {
                    continue
                }
                // Either no new loop, or its caller took the helper's state and signals.
                helper.wake.wait()
                idleSince = DispatchTime.now().uptimeNanoseconds
                continue
            }
            facetrain_spin_pause()
        }
    }
}
