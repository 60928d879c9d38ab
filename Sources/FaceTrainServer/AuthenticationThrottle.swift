import Foundation

/// Wrong tokens counted per client address: after `limit` of them within `window` seconds, the
/// address may not try the `--token-file` token (right or wrong) until the window ends, so a person's
/// chosen token cannot be guessed at speed, and a misconfigured or hostile client neither spends the
/// server's CPU nor fills its log. Scoped tokens, secrets the server drew, still pass
/// (ServerRoutes.respond): others on the same address must not lock their owners out.
public final class AuthenticationThrottle: @unchecked Sendable {
    public let limit: Int
    public let window: TimeInterval
    /// Addresses remembered at most; beyond it the ones whose window ended are forgotten first.
    let capacity: Int
    private let now: @Sendable () -> Date
    private let lock = NSLock()
    private var failures: [String: (start: Date, count: Int)] = [:]

    public init(
        limit: Int = 10, window: TimeInterval = 60, capacity: Int = 10_000,
        now: @escaping @Sendable () -> Date = Date.init
    ) {
        precondition(limit > 0 && window > 0 && capacity > 0)
        self.limit = limit
        self.window = window
        self.capacity = capacity
        self.now = now
    }

    /// Whole seconds until `address` may try again, or nil when it may now.
    public func secondsLocked(_ address: String) -> Int? {
        lock.lock()
        defer { lock.unlock() }
        guard let entry = failures[address], entry.count >= limit else { return nil }
        let left = window - now().timeIntervalSince(entry.start)
        return left > 0 ? Int(left.rounded(.up)) : nil
    }

    /// One wrong token from `address`.
    public func recordFailure(_ address: String) {
        lock.lock()
        defer { lock.unlock() }
        let time = now()
        if let entry = failures[address], time.timeIntervalSince(entry.start) < window {
            failures[address] = (entry.start, entry.count + 1)
            return
        }
        if failures.count >= capacity { forgetOldest(at: time) }
        failures[address] = (time, 1)
    }

    /// Addresses remembered now (for tests of the bound).
    public var count: Int {
        lock.lock()
        defer { lock.unlock() }
        return failures.count
    }

    /// Drops every ended window; if all are live, the oldest half (a flood of addresses must not
    /// grow memory, and the addresses it forgets get a fresh count, no more).
    private func forgetOldest(at time: Date) {
        failures = failures.filter { time.timeIntervalSince($0.value.start) < window }
        guard failures.count >= capacity else { return }
        let keep = failures.sorted { $0.value.start > $1.value.start }.prefix(capacity / 2)
        failures = Dictionary(uniqueKeysWithValues: keep.map { ($0.key, $0.value) })
    }
}
