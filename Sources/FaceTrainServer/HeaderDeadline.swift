import CMicroHTTPD
import Foundation

/// Closes connections whose next request's headers do not arrive in time. libmicrohttpd's idle
/// timeout restarts with every byte, so a client that sends a header byte every few seconds would
/// hold its connection (and one of the 64 slots) forever; this watch gives each connection
/// `seconds` from its opening, or from its last answer, until a request's headers are in, and then
/// shuts its socket down, which makes libmicrohttpd close it. Not the body's deadline (HTTPServer's
/// `holdToBodyDeadline`), which starts when the headers are in.
final class HeaderDeadline: @unchecked Sendable {
    let seconds: Int
    private let lock = NSLock()
    /// Each open connection's socket, and since when it has been waiting for headers (nil while a
    /// request is read or answered).
    private var connections: [OpaquePointer: (socket: Int32, waitingSince: ContinuousClock.Instant?)] = [:]
    private var timer: DispatchSourceTimer?

    init(seconds: Int) {
        precondition(seconds > 0)
        self.seconds = seconds
        let timer = DispatchSource.makeTimerSource(queue: .global(qos: .utility))
        // A quarter of the deadline, at most a second: a late connection is closed within that of it.
        timer.schedule(deadline: .now(), repeating: .milliseconds(min(1000, 250 * seconds)))
        timer.setEventHandler { [weak self] in self?.closeLate() }
        timer.resume()
        self.timer = timer
    }

    func stop() {
        timer?.cancel()
        timer = nil
    }

    deinit { stop() }

    /// A connection opened (libmicrohttpd sets its socket before it tells; one without is not watched).
    func opened(_ connection: OpaquePointer) {
        let socket = cmhd_connection_socket(connection)
        guard socket >= 0 else { return }
        lock.withLock { connections[connection] = (socket, .now) }
    }

    /// A request's headers are in: its body has its own deadline.
    func headersIn(_ connection: OpaquePointer) {
        lock.withLock { connections[connection]?.waitingSince = nil }
    }

    /// A request was answered: the connection may wait for the next one's headers.
    func answered(_ connection: OpaquePointer) {
        lock.withLock { connections[connection]?.waitingSince = .now }
    }

    /// libmicrohttpd tells of the close before it closes the socket, so the lock keeps `closeLate`
    /// from shutting down a socket number that another connection may reuse.
    func closed(_ connection: OpaquePointer) {
        lock.withLock { _ = connections.removeValue(forKey: connection) }
    }

    private func closeLate() {
        let now = ContinuousClock.now
        lock.withLock {
            for (connection, entry) in connections {
                guard let since = entry.waitingSince, now - since >= .seconds(seconds) else { continue }
                shutdown(entry.socket, Int32(SHUT_RDWR))
                connections[connection]?.waitingSince = nil
            }
        }
    }
}
