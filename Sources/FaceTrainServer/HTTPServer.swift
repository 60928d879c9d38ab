import CMicroHTTPD
import Foundation

/// One file of a multipart/form-data body, as libmicrohttpd's post processor delivered it.
public struct FormFile: Sendable {
    /// The form field ("photos").
    public var field: String
    /// The client's file name; only shown back to the client, never used as a path.
    public var fileName: String
    public var data: Data
}

/// A request whose headers and body libmicrohttpd has parsed.
public struct HTTPRequest: Sendable {
    public var method: String
    /// The path without the query string, its percent escapes decoded (never to a '/' or a NUL:
    /// `RequestTarget` refuses those); as sent when the request was refused for it.
    public var path: String
    /// Header values by lower-cased name.
    public var headers: [String: String]
    /// The body, unless it was multipart/form-data.
    public var body: Data
    /// The files of a multipart/form-data body, in order.
    public var files: [FormFile]
    /// The non-file fields of a multipart/form-data or application/x-www-form-urlencoded body.
    public var fields: [String: String]
    /// Cookies by name, as libmicrohttpd parsed the Cookie header.
    public var cookies: [String: String] = [:]
    /// The peer's numeric address ("127.0.0.1", "::1"); empty when the socket does not say.
    public var clientAddress = ""
    /// The query string's arguments, decoded (`?version=3` gives ["version": "3"]).
    public var query: [String: String] = [:]

    public func header(_ name: String) -> String? { headers[name.lowercased()] }
}

/// What a route answers.
public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: [(String, String)]
    public var body: Data

    public init(status: Int, headers: [(String, String)] = [], body: Data = Data()) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}

/// Sizes and counts a request may not exceed; each breach is answered with a 4xx before any route runs.
public struct HTTPLimits: Sendable {
    /// A body that is not multipart (JSON).
    public var maximumBodyBytes = 64 << 10
    /// A whole multipart/form-data request.
    public var maximumUploadBytes = 64 << 20
    /// One file of a multipart request.
    public var maximumFileBytes = 8 << 20
    /// Files in one multipart request.
    public var maximumFiles = 50
    /// Open connections at once (libmicrohttpd refuses more).
    public var maximumConnections = 64
    /// Open connections from one client address, well below `maximumConnections` so that one client
    /// cannot hold them all (libmicrohttpd closes the extra ones as they come).
    public var maximumConnectionsPerAddress = 16
    /// Seconds a connection may stay idle before libmicrohttpd closes it.
    public var timeoutSeconds = 30
    /// Seconds a request's whole body may take after its headers: a client that sends a byte now and
    /// then (each within `timeoutSeconds`) would otherwise hold its connection forever. Answered 408.
    public var bodyDeadlineSeconds = 60
    /// Seconds from a connection's opening, or its last answer, until a request's headers must be in;
    /// after that the connection is closed (HeaderDeadline), however steadily its bytes trickle.
    public var headerDeadlineSeconds = 20

    public init() {}
}

/// A PEM certificate chain and its private key, for HTTPS.
public struct TLSCredentials: Sendable {
    public var certificate: Data
    public var key: Data

    public init(certificate: Data, key: Data) {
        self.certificate = certificate
        self.key = key
    }

    /// Whether this libmicrohttpd was built with GnuTLS (Debian's is).
    public static var isSupported: Bool { cmhd_supports_tls() != 0 }
}

/// Why a server could not start.
public struct HTTPServerError: Error, CustomStringConvertible {
    public var description: String
}

/// An IPv4 or IPv6 socket address to listen on (IPv6 listens on IPv6 only, not dual stack).
struct SocketAddress {
    private enum Storage {
        case v4(sockaddr_in)
        case v6(sockaddr_in6)
    }
    private let storage: Storage

    /// Nil when `host` is neither a dotted IPv4 address nor an IPv6 one (without brackets).
    init?(host: String, port: Int) {
        var v4 = sockaddr_in()
        if inet_pton(AF_INET, host, &v4.sin_addr) == 1 {
            v4.sin_family = sa_family_t(AF_INET)
            v4.sin_port = in_port_t(UInt16(port)).bigEndian
            storage = .v4(v4)
            return
        }
        var v6 = sockaddr_in6()
        guard inet_pton(AF_INET6, host, &v6.sin6_addr) == 1 else { return nil }
        v6.sin6_family = sa_family_t(AF_INET6)
        v6.sin6_port = in_port_t(UInt16(port)).bigEndian
        storage = .v6(v6)
    }

    var isIPv6: Bool { if case .v6 = storage { true } else { false } }

    func withPointer<T>(_ body: (UnsafePointer<sockaddr>) -> T) -> T {
        switch storage {
        case .v4(var address):
            withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1, body) }
        case .v6(var address):
            withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1, body) }
        }
    }
}

/// The HTTP adapter: libmicrohttpd parses requests (headers, chunked bodies, multipart forms) on
/// one thread per connection and hands each complete request to `handler`.
public final class HTTPServer: @unchecked Sendable {
    public typealias Handler = @Sendable (HTTPRequest) -> HTTPResponse
    /// The answer a request gets from its method, path and headers alone, or nil to read its body.
    public typealias Preflight = @Sendable (HTTPRequest) -> HTTPResponse?
    /// Told of each answer the adapter gives by itself (a broken limit, a bad path or framing, a
    /// body too slow), which neither `preflight` nor `handler` saw.
    public typealias Refused = @Sendable (HTTPRequest, HTTPResponse) -> Void

    let handler: Handler
    let preflight: Preflight?
    let refused: Refused?
    let limits: HTTPLimits
    /// Over TLS the adapter cannot write a late 408 itself (see `refuseLateBody`).
    let isTLS: Bool
    /// Paths whose application/x-www-form-urlencoded bodies libmicrohttpd decodes into `fields`.
    let urlEncodedFormPaths: Set<String>
    private var daemon: OpaquePointer?
    /// Closes connections whose headers come too slowly.
    let headerDeadline: HeaderDeadline
    /// The PEM texts handed to libmicrohttpd, kept alive (NUL-terminated) as long as the daemon.
    private var pemCopies: [UnsafeMutablePointer<CChar>] = []

    /// The port it listens on (the one the kernel chose when asked for port 0).
    public private(set) var port = 0

    /// Starts listening on an IPv4 or IPv6 `host` and `port` (0: any free port), over HTTPS when `tls` is given.
    public init(
        host: String, port: Int, limits: HTTPLimits, tls: TLSCredentials? = nil, urlEncodedFormPaths: Set<String> = [],
        preflight: Preflight? = nil, refused: Refused? = nil, handler: @escaping Handler
    ) throws {
        self.handler = handler
        self.preflight = preflight
        self.refused = refused
        self.limits = limits
        isTLS = tls != nil
        self.urlEncodedFormPaths = urlEncodedFormPaths
        headerDeadline = HeaderDeadline(seconds: limits.headerDeadlineSeconds)
        guard let address = SocketAddress(host: host, port: port) else {
            throw HTTPServerError(
                description: "\(host) is neither an IPv4 address (127.0.0.1) nor an IPv6 one (::1)")
        }
        var flags =
            MHD_USE_THREAD_PER_CONNECTION.rawValue | MHD_USE_INTERNAL_POLLING_THREAD.rawValue
            | MHD_USE_AUTO.rawValue | MHD_USE_ERROR_LOG.rawValue
        if address.isIPv6 { flags |= MHD_USE_IPv6.rawValue }
        var certificate: UnsafeMutablePointer<CChar>?
        var key: UnsafeMutablePointer<CChar>?
        if let tls {
            guard TLSCredentials.isSupported else {
                throw HTTPServerError(
                    description: "this libmicrohttpd was built without TLS; install Debian's libmicrohttpd12 "
                        + "(built with GnuTLS) or drop --cert/--key")
            }
            flags |= MHD_USE_TLS.rawValue
            certificate = strdup(String(decoding: tls.certificate, as: UTF8.self))
            key = strdup(String(decoding: tls.key, as: UTF8.self))
            pemCopies = [certificate, key].compactMap { $0 }
        }
        // Connection memory holds headers and the post processor's buffer, not bodies (we copy those).
        daemon = address.withPointer { socketAddress in
            cmhd_start_daemon(
                UInt32(flags), socketAddress, UInt16(port), accessHandler, requestCompleted, requestStarted,
                Unmanaged.passUnretained(self).toOpaque(), connectionNotified, UInt32(limits.maximumConnections),
                UInt32(limits.maximumConnectionsPerAddress), UInt32(limits.timeoutSeconds), 256 << 10, certificate, key)
        }
        guard let daemon else {
            if tls != nil {
                throw HTTPServerError(
                    description: "cannot start HTTPS on \(host):\(port): GnuTLS refused the certificate or key "
                        + "(the reason is logged above); check that --cert is a PEM certificate and --key the PEM "
                        + "private key that belongs to it")
            }
            throw HTTPServerError(
                description: "cannot listen on \(host):\(port) (\(String(cString: strerror(errno)))); "
                    + "is another server using the port?")
        }
        self.port = Int(cmhd_bound_port(daemon))
    }

    /// Stops accepting and closes every connection.
    public func stop() {
        if let daemon { MHD_stop_daemon(daemon) }
        daemon = nil
        headerDeadline.stop()
        for copy in pemCopies { free(copy) }
        pemCopies = []
    }

    deinit { stop() }

    // MARK: Request assembly

    /// One request on its way in; libmicrohttpd keeps a pointer to it between callbacks.
    final class RequestState: @unchecked Sendable {
        /// The request target as sent ("/v1/users/3?version=2"), before libmicrohttpd decodes it.
        let target: String
        var method = ""
        var path = ""
        /// Whether the access handler has seen the headers (its first call).
        var headersRead = false
        /// When the body must be in (`HTTPLimits.bodyDeadlineSeconds` after the headers).
        var bodyDeadline = ContinuousClock.now
        var headers: [String: String] = [:]
        /// Every Content-Length and Transfer-Encoding value, repeats included (`headers` keeps one).
        var contentLengths: [String] = []
        var transferEncodings: [String] = []
        var cookies: [String: String] = [:]
        var clientAddress = ""
        var query: [String: String] = [:]
        var body = Data()
        /// The most body bytes this request may send (multipart requests get more).
        var bodyLimit = 0
        var files: [FormFile] = []
        var fields: [String: String] = [:]
        var postProcessor: OpaquePointer?
        var receivedBytes = 0
        /// A limit this request broke: answered once the body is in (or at once, from Content-Length).
        var refusal: HTTPResponse?
        /// Whether `refusal` is the adapter's own (`preflight`'s are told of by their route).
        var refusalIsOwn = false
        var answered = false
        let limits: HTTPLimits

        // The multipart part being received.
        var partField = ""
        var partFileName: String?
        var partData = Data()
        var inPart = false

        init(target: String, limits: HTTPLimits) {
            self.target = target
            self.limits = limits
        }

        func refuse(_ status: Int, _ message: String) {
            guard refusal == nil else { return }
            refusal = ServerResponses.error(status, message)
            refusalIsOwn = true
        }

        /// Files the current part into `files` or `fields`.
        func finishPart() {
            guard inPart else { return }
            inPart = false
            if let name = partFileName {
                files.append(FormFile(field: partField, fileName: name, data: partData))
            } else if partData.count <= limits.maximumBodyBytes {
                fields[partField] = String(decoding: partData, as: UTF8.self)
            }
            partData = Data()
        }

        /// One chunk of a multipart part; `offset` 0 starts a new part.
        func receivePart(field: String, fileName: String?, bytes: UnsafeRawBufferPointer, offset: UInt64) {
            if offset == 0 || !inPart || field != partField {
                finishPart()
                inPart = true
                partField = field
                partFileName = fileName
                if fileName != nil && files.count >= limits.maximumFiles {
                    refuse(413, "more than \(limits.maximumFiles) files in one request; send them in several requests")
                }
            }
            guard refusal == nil else { return }
            let limit = partFileName != nil ? limits.maximumFileBytes : limits.maximumBodyBytes
            if partData.count + bytes.count > limit {
                refuse(
                    413,
                    "the file '\(partFileName ?? field)' is larger than \(limit >> 20) MB; face crops are small: "
                        + "crop or downscale it")
                return
            }
            partData.append(bytes.bindMemory(to: UInt8.self))
        }

        func request() -> HTTPRequest {
            HTTPRequest(
                method: method, path: path, headers: headers, body: body, files: files, fields: fields,
                cookies: cookies, clientAddress: clientAddress, query: query)
        }
    }

    /// A request's state, made when its request line is in (before libmicrohttpd decodes the target).
    fileprivate func begin(target: String) -> UnsafeMutableRawPointer {
        Unmanaged.passRetained(RequestState(target: target, limits: limits)).toOpaque()
    }

    fileprivate func handle(
        _ connection: OpaquePointer, url: String, method: String, data: UnsafePointer<CChar>?,
        size: UnsafeMutablePointer<Int>, context: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    ) -> MHD_Result {
        // The URI log callback made the state; libmicrohttpd calls it before this, for every request.
        if context.pointee == nil { context.pointee = begin(target: url) }
        let state = Unmanaged<RequestState>.fromOpaque(context.pointee!).takeUnretainedValue()
        guard state.headersRead else {
            // First call: the headers are in, the body is not.
            state.headersRead = true
            headerDeadline.headersIn(connection)
            state.method = method
            state.bodyDeadline = .now + .seconds(limits.bodyDeadlineSeconds)
            var address = [CChar](repeating: 0, count: 64)
            if cmhd_client_address(connection, &address, address.count) == 0 {
                state.clientAddress = String(cString: address)
            }
            MHD_get_connection_values(
                connection, .HEADER_KIND, collectValue, Unmanaged.passUnretained(state).toOpaque())
            MHD_get_connection_values(
                connection, .COOKIE_KIND, collectValue, Unmanaged.passUnretained(state).toOpaque())
            MHD_get_connection_values(
                connection, .GET_ARGUMENT_KIND, collectValue, Unmanaged.passUnretained(state).toOpaque())
            let rawPath = String(state.target.prefix { $0 != "?" })
            let decodedPath = RequestTarget.decodedPath(rawPath)
            state.path = decodedPath ?? rawPath
            let framingProblem = RequestFraming.problem(
                contentLengths: state.contentLengths, transferEncodings: state.transferEncodings)
            let contentType = state.headers["content-type"]?.lowercased() ?? ""
            let multipart = contentType.hasPrefix("multipart/form-data")
            // Url-encoded fields are decoded only where a form posts them (the admin login): elsewhere
            // such a body is kept whole, because curl -d sends JSON with that Content-Type.
            let form =
                multipart
                || (contentType.hasPrefix("application/x-www-form-urlencoded")
                    && urlEncodedFormPaths.contains(state.path))
            let limit = multipart ? limits.maximumUploadBytes : limits.maximumBodyBytes
            state.bodyLimit = limit
            // A request refused on its headers (a write without the token) is answered before a byte of
            // its body is read, so an anonymous client cannot make the server hold an upload.
            if decodedPath == nil {
                state.refuse(400, RequestTarget.refusal(rawPath))
            } else if let framingProblem {
                state.refuse(400, framingProblem)
            } else if let preflight, let early = preflight(state.request()) {
                state.refusal = early
            } else if let length = state.headers["content-length"].flatMap({ Int($0) }), length > limit {
                state.refuse(413, "the request body is \(length) bytes; the limit is \(limit) bytes")
            } else if form {
                state.postProcessor = MHD_create_post_processor(
                    connection, 64 << 10, receivePost, Unmanaged.passUnretained(state).toOpaque())
                if state.postProcessor == nil {
                    state.refuse(
                        400, "the form body cannot be read: a multipart/form-data Content-Type needs a boundary")
                }
            }
            // Answering now spares reading a body that will be refused (and curl's 100-continue waits for it).
            if let refusal = state.refusal { return answer(connection, state, refusal) }
            _ = holdToBodyDeadline(connection, state)
            return .YES
        }
        if size.pointee > 0 {
            let count = size.pointee
            size.pointee = 0
            guard holdToBodyDeadline(connection, state) else { return refuseLateBody(connection, state) }
            if state.answered || state.refusal != nil { return .YES }  // read and dropped
            state.receivedBytes += count
            let limit = state.bodyLimit
            if state.receivedBytes > limit {
                state.refuse(413, "the request body is larger than the limit of \(limit) bytes")
            } else if let processor = state.postProcessor {
                if MHD_post_process(processor, data, count) != .YES, state.refusal == nil {
                    state.refuse(400, "the form body is malformed; send multipart/form-data or url-encoded fields")
                }
            } else if let data {
                state.body.append(UnsafeRawPointer(data).assumingMemoryBound(to: UInt8.self), count: count)
            }
            return .YES
        }
        if state.answered { return .YES }
        if let processor = state.postProcessor {
            // Destroying the processor delivers the last part; a body cut short fails here.
            if MHD_destroy_post_processor(processor) != .YES, state.refusal == nil {
                state.refuse(400, "the multipart/form-data body ends before its closing boundary")
            }
            state.postProcessor = nil
            state.finishPart()
        }
        return answer(connection, state, state.refusal ?? handler(state.request()))
    }

    /// Whether the body may still come; if so, the connection's idle timeout is cut to the time left,
    /// so that a client that falls silent is closed at the deadline, not `timeoutSeconds` later.
    private func holdToBodyDeadline(_ connection: OpaquePointer, _ state: RequestState) -> Bool {
        let now = ContinuousClock.now
        guard now < state.bodyDeadline else { return false }
        let (seconds, attoseconds) = now.duration(to: state.bodyDeadline).components
        let left = Int(seconds) + (attoseconds > 0 ? 1 : 0)
        cmhd_set_connection_timeout(connection, UInt32(max(1, min(left, limits.timeoutSeconds))))
        return true
    }

    /// Answers 408 to a request whose body missed its deadline, and closes the connection.
    /// libmicrohttpd queues answers only before a body or after the whole of it, so the adapter writes
    /// this one on the socket itself; over TLS it cannot (the bytes would need GnuTLS), and only closes.
    fileprivate func refuseLateBody(_ connection: OpaquePointer, _ state: RequestState) -> MHD_Result {
        guard !state.answered else { return .NO }
        state.answered = true
        let response = ServerResponses.error(
            408,
            "the request body did not arrive within \(limits.bodyDeadlineSeconds) s of its headers; send it at "
                + "once, or in smaller requests")
        refused?(state.request(), response)
        let socket = cmhd_connection_socket(connection)
        if !isTLS, socket >= 0 {
            var head = "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n"
            for (name, value) in response.headers { head += "\(name): \(value)\r\n" }
            head += "Content-Length: \(response.body.count)\r\n\r\n"
            let bytes = Data(head.utf8) + response.body
            _ = bytes.withUnsafeBytes { send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        }
        return .NO
    }

    private func answer(_ connection: OpaquePointer, _ state: RequestState, _ response: HTTPResponse) -> MHD_Result {
        state.answered = true
        if state.refusal != nil && state.refusalIsOwn { refused?(state.request(), response) }
        // The answer and a keep-alive connection's next request get the whole idle timeout again.
        cmhd_set_connection_timeout(connection, UInt32(limits.timeoutSeconds))
        let reply = response.body.withUnsafeBytes { bytes in
            MHD_create_response_from_buffer(
                bytes.count, UnsafeMutableRawPointer(mutating: bytes.baseAddress), .RESPMEM_MUST_COPY)
        }
        guard let reply else { return .NO }
        defer { MHD_destroy_response(reply) }
        for (name, value) in response.headers { MHD_add_response_header(reply, name, value) }
        return MHD_queue_response(connection, UInt32(response.status), reply)
    }
}

// libmicrohttpd's callbacks: C function pointers, so free functions that find their object through `context`.

private func accessHandler(
    _ context: UnsafeMutableRawPointer?, _ connection: OpaquePointer?, _ url: UnsafePointer<CChar>?,
    _ method: UnsafePointer<CChar>?, _ version: UnsafePointer<CChar>?, _ data: UnsafePointer<CChar>?,
    _ size: UnsafeMutablePointer<Int>?, _ requestContext: UnsafeMutablePointer<UnsafeMutableRawPointer?>?
) -> MHD_Result {
    guard let context, let connection, let url, let method, let size, let requestContext else { return .NO }
    let server = Unmanaged<HTTPServer>.fromOpaque(context).takeUnretainedValue()
    return server.handle(
        connection, url: String(cString: url), method: String(cString: method), data: data, size: size,
        context: requestContext)
}

/// Called with each request target as sent, before libmicrohttpd decodes it; the state it returns
/// is the request's context from then on (and `requestCompleted` releases it).
private func requestStarted(
    _ context: UnsafeMutableRawPointer?, _ uri: UnsafePointer<CChar>?, _ connection: OpaquePointer?
) -> UnsafeMutableRawPointer? {
    guard let context else { return nil }
    let server = Unmanaged<HTTPServer>.fromOpaque(context).takeUnretainedValue()
    return server.begin(target: uri.map { String(cString: $0) } ?? "")
}

private func requestCompleted(
    _ context: UnsafeMutableRawPointer?, _ connection: OpaquePointer?,
    _ requestContext: UnsafeMutablePointer<UnsafeMutableRawPointer?>?, _ code: MHD_RequestTerminationCode
) {
    if let context, let connection {
        Unmanaged<HTTPServer>.fromOpaque(context).takeUnretainedValue().headerDeadline.answered(connection)
    }
    guard let requestContext, let pointer = requestContext.pointee else { return }
    let state = Unmanaged<HTTPServer.RequestState>.fromOpaque(pointer).takeRetainedValue()
    // A body that stopped coming (the deadline cut the idle timeout short) is told why before the close.
    if code == .REQUEST_TERMINATED_TIMEOUT_REACHED, state.headersRead, !state.answered, let context, let connection {
        _ = Unmanaged<HTTPServer>.fromOpaque(context).takeUnretainedValue().refuseLateBody(connection, state)
    }
    // A client that hung up mid-upload leaves the processor alive.
    if let processor = state.postProcessor { MHD_destroy_post_processor(processor) }
    state.postProcessor = nil
    requestContext.pointee = nil
}

/// Each connection's opening and closing, for the header deadline.
private func connectionNotified(
    _ context: UnsafeMutableRawPointer?, _ connection: OpaquePointer?,
    _ socketContext: UnsafeMutablePointer<UnsafeMutableRawPointer?>?, _ code: MHD_ConnectionNotificationCode
) {
    guard let context, let connection else { return }
    let deadline = Unmanaged<HTTPServer>.fromOpaque(context).takeUnretainedValue().headerDeadline
    if code == .CONNECTION_NOTIFY_STARTED { deadline.opened(connection) } else { deadline.closed(connection) }
}

/// Collects one request header (lowercased name) or cookie (name as sent) into the request state.
private func collectValue(
    _ context: UnsafeMutableRawPointer?, _ kind: MHD_ValueKind, _ key: UnsafePointer<CChar>?,
    _ value: UnsafePointer<CChar>?
) -> MHD_Result {
    guard let context, let key else { return .YES }
    let state = Unmanaged<HTTPServer.RequestState>.fromOpaque(context).takeUnretainedValue()
    let text = value.map { String(cString: $0) } ?? ""
    if kind == .COOKIE_KIND {
        state.cookies[String(cString: key)] = text
    } else if kind == .GET_ARGUMENT_KIND {
        state.query[String(cString: key)] = text
    } else {
        let name = String(cString: key).lowercased()
        state.headers[name] = text
        if name == "content-length" { state.contentLengths.append(text) }
        if name == "transfer-encoding" { state.transferEncodings.append(text) }
    }
    return .YES
}

private func receivePost(
    _ context: UnsafeMutableRawPointer?, _ kind: MHD_ValueKind, _ key: UnsafePointer<CChar>?,
    _ fileName: UnsafePointer<CChar>?, _ contentType: UnsafePointer<CChar>?, _ transferEncoding: UnsafePointer<CChar>?,
    _ data: UnsafePointer<CChar>?, _ offset: UInt64, _ size: Int
) -> MHD_Result {
    guard let context else { return .NO }
    let state = Unmanaged<HTTPServer.RequestState>.fromOpaque(context).takeUnretainedValue()
    let bytes = UnsafeRawBufferPointer(start: data.map { UnsafeRawPointer($0) }, count: data == nil ? 0 : size)
    state.receivePart(
        field: key.map { String(cString: $0) } ?? "", fileName: fileName.map { String(cString: $0) }, bytes: bytes,
        offset: offset)
    return .YES
}
