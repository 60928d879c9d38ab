import FaceTrain
import Foundation

/// What `facetrain serve` was asked to run.
public struct ServerConfiguration: Sendable {
    public var data: URL
    public var models: URL
    public var host = "127.0.0.1"
    public var port = 8080
    /// The bearer token write routes need; nil leaves them open (allowed on loopback only).
    public var token: String?
    /// Listen on a non-loopback address over plain HTTP.
    public var insecureHTTP = false
    /// Serve HTTPS with this certificate and key.
    public var tls: TLSCredentials?
    /// Reads of the published model need the token too.
    public var isPrivate = false
    /// Seconds of quiet after a change in users or crops before a training is queued by itself; nil: never.
    public var trainAfter: TimeInterval? = 60
    public var limits = HTTPLimits()
    public var maximumCropsPerUser = 200
    /// Trainings: the job every `POST /v1/training` runs (its data and models are the server's).
    public var fitJob: FitJob
    public var gate = PublishGate()
    public var baseURL: String?
    /// Called with each answered request (method, path, status, milliseconds); the method and path
    /// have their control characters escaped (`ServerConfiguration.loggable`).
    public var log: @Sendable (String, String, Int, Double) -> Void = { _, _, _, _ in }
    /// Signed event posts (`--webhook`); nil: none.
    public var webhooks: WebhookSettings?
    /// Told of what the server cannot do by itself in the background (a webhook event given up).
    public var warn: @Sendable (String) -> Void = { _ in }
    /// Tests: called at named points of a write, where they kill the process.
    public var pause: @Sendable (String) -> Void = { _ in }

    public init(data: URL, models: URL, fitJob: FitJob) {
        self.data = data
        self.models = models
        self.fitJob = fitJob
    }

    /// `host:port` with a dotted IPv4 host, or `[host]:port` with an IPv6 one; nil otherwise.
    public static func parseListen(_ text: String) -> (host: String, port: Int)? {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]),
            (0...65535).contains(port)
        else { return nil }
        var host = String(text[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") {
            host = String(host.dropFirst().dropLast())
            var address = in6_addr()
            return inet_pton(AF_INET6, host, &address) == 1 ? (host, port) : nil
        }
        var address = in_addr()
        return inet_pton(AF_INET, host, &address) == 1 ? (host, port) : nil
    }

    /// `text` with its control characters (C0, DEL, C1) percent-escaped as their UTF-8 bytes: what a
    /// client sent goes into one log line, and an encoded CR LF in a path must not start a forged one.
    public static func loggable(_ text: String) -> String {
        var escaped = ""
        for scalar in text.unicodeScalars {
            if scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) {
                for byte in String(scalar).utf8 { escaped += String(format: "%%%02X", byte) }
            } else {
                escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped
    }

    /// The host as it goes into a URL: IPv6 addresses in brackets.
    public static func urlHost(_ host: String) -> String { host.contains(":") ? "[\(host)]" : host }

    /// 127.0.0.0/8, ::1, and 127.0.0.0/8 mapped into IPv6 (::ffff:127.x.y.z).
    public static func isLoopback(_ host: String) -> Bool {
        var address = in_addr()
        if inet_pton(AF_INET, host, &address) == 1 { return UInt32(bigEndian: address.s_addr) >> 24 == 127 }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, host, &v6) == 1 else { return false }
        let bytes = withUnsafeBytes(of: v6) { Array($0) }
        if bytes[0..<15].allSatisfy({ $0 == 0 }) && bytes[15] == 1 { return true }
        return bytes[0..<10].allSatisfy { $0 == 0 } && bytes[10] == 0xFF && bytes[11] == 0xFF && bytes[12] == 127
    }

    /// Why this configuration must not start, or nil.
    public func refusal() -> String? {
        guard !Self.isLoopback(host) else { return nil }
        guard token != nil else {
            return "--listen \(host) is not a loopback address: anyone on the network could change users and "
                + "trainings; give --token-file"
        }
        guard tls != nil || insecureHTTP else {
            return "--listen \(host) is not a loopback address and there is no --cert/--key: tokens and faces would "
                + "cross the network in clear text; give --cert FILE --key FILE for HTTPS, or add --insecure-http to "
                + "accept that (e.g. behind a TLS proxy)"
        }
        return nil
    }
}

/// `facetrain serve`: the data folder, the models folder, the training queue and the HTTP
/// adapter wired together.
public final class FaceServer: @unchecked Sendable {
    public let configuration: ServerConfiguration
    public let store: UserStore
    public let queue: TrainingQueue
    /// The scoped tokens (`/v1/tokens`), in the data folder.
    public let tokens: TokenStore
    public let metrics = ServerMetrics()
    /// Posts the events of trainings and publishing to the `--webhook` URLs.
    public let webhooks: WebhookDispatcher?
    private var http: HTTPServer?
    /// The data and models folders are this server's alone while it runs.
    private let ownership: FolderOwnership

    /// The port it listens on.
    public var port: Int { http?.port ?? 0 }

    /// Opens the folders (finishing whatever a killed server left half done) and starts listening
    /// and training.
    public init(configuration: ServerConfiguration) throws {
        if let refusal = configuration.refusal() { throw ClientError(400, refusal) }
        self.configuration = configuration
        // Before anything is written: a second server (or `erase`) on these folders is refused here.
        ownership = try FolderOwnership.claim([configuration.data, configuration.models], for: "facetrain serve")
        store = try UserStore(root: configuration.data)
        store.maximumCropsPerUser = configuration.maximumCropsPerUser
        store.faceCheck = configuration.fitJob.loadOptions.faceCheck
        store.pause = configuration.pause
        tokens = try TokenStore(folder: configuration.data)
        let repository = ModelRepository(directory: configuration.models)
        try repository.prepareForWriting()
        queue = try TrainingQueue(
            store: store, models: configuration.models, job: configuration.fitJob, gate: configuration.gate,
            baseURL: configuration.baseURL)
        queue.pause = configuration.pause
        queue.quietPeriod = configuration.trainAfter
        queue.minimumCrops = configuration.fitJob.loadOptions.minimumImages
        let metrics = self.metrics
        webhooks = try configuration.webhooks.map { try WebhookDispatcher(settings: $0, folder: configuration.models) }
        webhooks?.log = configuration.warn
        let webhooks = self.webhooks
        let recognition = RecognitionService(repository: repository)
        queue.finished = { job in
            metrics.recordTraining(job.state)
            webhooks?.trainingFinished(job, repository: repository)
            if job.state == .succeeded { recognition.warmUpInBackground() }
        }
        var routes = ServerRoutes(
            store: store, queue: queue, repository: repository, metrics: metrics, recognition: recognition,
            eraser: PersonEraser(store: store, models: configuration.models),
            tokenDigest: configuration.token.map { SHA256.hash(Data($0.utf8)) }, tokens: tokens)
        routes.isPrivate = configuration.isPrivate
        routes.gate = configuration.gate
        routes.baseURL = configuration.baseURL
        routes.secureCookies = configuration.tls != nil
        routes.webhooks = webhooks
        let log = configuration.log
        // Every answer, early or not, is counted and logged the same way.
        let record: @Sendable (HTTPRequest, HTTPResponse, String, Double) -> Void = {
            request, response, route, seconds in
            metrics.recordRequest(route: route, method: request.method, status: response.status, seconds: seconds)
            log(
                ServerConfiguration.loggable(request.method), ServerConfiguration.loggable(request.path),
                response.status, seconds * 1000)
        }
        let preflight: HTTPServer.Preflight = { [routes] request in
            guard let (response, route) = routes.preflight(request) else { return nil }
            record(request, response, route, 0)
            return response
        }
        // The adapter's own answers (limits, paths, framing, slow bodies), under the route they name.
        let refused: HTTPServer.Refused = { request, response in
            record(request, response, Route(path: request.path)?.template ?? Route.unmatchedTemplate, 0)
        }
        let handler: HTTPServer.Handler = { [routes] request in
            let started = Date()
            let (response, route) = routes.respond(request)
            record(request, response, route, Date().timeIntervalSince(started))
            return response
        }
        http = try HTTPServer(
            host: configuration.host, port: configuration.port, limits: configuration.limits, tls: configuration.tls,
            urlEncodedFormPaths: [
                Route.login.template, Route.correctForm.template, Route.tokenForm.template,
                Route.tokenRevokeForm.template,
            ], preflight: preflight,
            refused: refused,
            handler: handler)
        webhooks?.start()
        queue.start()
        recognition.warmUpInBackground()
    }

    /// Stops listening; a running training is left to finish or die with the process.
    public func stop() {
        http?.stop()
        http = nil
        queue.stop()
        webhooks?.stop()
        try? tokens.flush()
        ownership.release()
    }
}
