// libFuzzer target: multipart/form-data uploads through HTTPServer, the adapter that feeds libmicrohttpd's
// post processor and assembles its callbacks into files and fields (POST /v1/users/{id}/photos).
//
// The input is the body of one request: byte 0 picks the size of the chunks it is sent in (chunked
// transfer encoding, so parts arrive split at any byte), the rest is the body. A real server on a
// loopback port answers it; no answer within 10 s counts as a hang.
import FaceTrain
import FaceTrainEngine
import FaceTrainServer
import Foundation

let boundary = "fuzzboundary"

/// Small limits, so that the fuzzer reaches every refusal with inputs of a few kilobytes.
let limits: HTTPLimits = {
    var limits = HTTPLimits()
    limits.maximumBodyBytes = 1 << 10
    limits.maximumUploadBytes = 64 << 10
    limits.maximumFileBytes = 8 << 10
    limits.maximumFiles = 4
    // The server's own idle timeout: a shorter one closes connections without an answer whenever the
    // shared machine stalls the server's thread for a few seconds, which is the timeout working.
    limits.timeoutSeconds = 30
    return limits
}()

let server: HTTPServer = {
    do {
        return try HTTPServer(host: "127.0.0.1", port: 0, limits: limits) { request in
            // What the photos route relies on: the limits hold for whatever was assembled.
            guard request.files.count <= limits.maximumFiles else {
                fatalError("\(request.files.count) files passed a limit of \(limits.maximumFiles)")
            }
            for file in request.files where file.data.count > limits.maximumFileBytes {
                fatalError("a file of \(file.data.count) bytes passed a limit of \(limits.maximumFileBytes)")
            }
            let total = request.files.reduce(0) { $0 + $1.data.count } + request.body.count
            guard total <= limits.maximumUploadBytes else {
                fatalError("\(total) body bytes passed a limit of \(limits.maximumUploadBytes)")
            }
            return HTTPResponse(status: 200, body: Data("{\"files\": \(request.files.count)}".utf8))
        }
    } catch {
        fatalError("cannot start the server: \(error)")
    }
}()

/// Why the last exchange stopped early: the errno of a failed send or recv, 0 when none failed.
nonisolated(unsafe) var lastSocketError: Int32 = 0

/// Sends one request on a new connection and returns the whole answer (the server closes it).
func exchange(_ request: [UInt8]) -> [UInt8] {
    lastSocketError = 0
    // libFuzzer's timeout alarm (SIGALRM) would interrupt connect, send and recv (EINTR); it waits until
    // the exchange is over, which its own 10 s receive timeout bounds.
    var alarm = sigset_t()
    var previousMask = sigset_t()
    sigemptyset(&alarm)
    sigaddset(&alarm, SIGALRM)
    pthread_sigmask(SIG_BLOCK, &alarm, &previousMask)
    defer { pthread_sigmask(SIG_SETMASK, &previousMask, nil) }
    let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard socket >= 0 else { fatalError("socket: \(String(cString: strerror(errno)))") }
    defer { close(socket) }
    var timeout = timeval(tv_sec: 10, tv_usec: 0)
    setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(server.port)).bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    guard connected == 0 else { fatalError("connect: \(String(cString: strerror(errno)))") }
    var sent = 0
    while sent < request.count {
        let written = request[sent...].withUnsafeBytes { send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        // The server may answer (a refusal) and close before the whole body is in.
        if written <= 0 {
            lastSocketError = errno
            break
        }
        sent += written
    }
    // No shutdown(SHUT_WR): libmicrohttpd 0.9 drops a connection whose client half-closes before the
    // answer is queued (RFC 2616 8.1.4), which would read as a lost answer. Connection: close ends it.
    var answer: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let received = buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
        if received < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
            fatalError("no answer within 10 s to a request of \(request.count) bytes")
        }
        if received < 0 { lastSocketError = errno }
        if received <= 0 { break }
        answer += buffer[..<received]
    }
    return answer
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzMultipart(_ bytes: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    guard count > 0 else { return 0 }
    let chunkSize = Int(bytes[0]) * 37 + 1
    let body = UnsafeBufferPointer(start: bytes + 1, count: count - 1)
    var request = Array(
        ("POST /v1/users/3/photos HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
            + "Content-Type: multipart/form-data; boundary=\(boundary)\r\nTransfer-Encoding: chunked\r\n\r\n").utf8)
    var start = 0
    while start < body.count {
        let end = min(start + chunkSize, body.count)
        request += Array(String(end - start, radix: 16).utf8) + [13, 10] + body[start..<end] + [13, 10]
        start = end
    }
    request += Array("0\r\n\r\n".utf8)
    let started = Date()
    let answer = exchange(request)
    // Every request gets an answer with a status line; a dropped connection would be a crash on the server side.
    guard answer.starts(with: Array("HTTP/1.1 ".utf8)) else {
        fatalError(
            "the server closed the connection without an answer (\(answer.count) bytes back) after "
                + String(format: "%.1f s", Date().timeIntervalSince(started))
                + (lastSocketError == 0 ? "" : " (\(String(cString: strerror(lastSocketError))))"))
    }
    return 0
}
