import FaceTrain
import FaceTrainServer
import Foundation

/// `facetrain serve`: the HTTP API the iPhone app talks to (FaceServer does the work).
struct Serve: Command {
    static let name = "serve"
    static let abstract = "Serve the app's API: register people, upload crops, train, download the published model."
    static var options: [OptionSpec] {
        [
            .required("data", "dir", "Data folder the server owns (users/<id>/ crops and users.json, as fit reads)."),
            .required("models", "dir", "Models folder: bundles, latest.json and the training queue (.jobs/)."),
            .option(
                "listen", "host:port", "Address and port (IPv6 in brackets: [::1]:8080); port 0 picks a free one.",
                default: "127.0.0.1:8080"),
            .option("token-file", "file", "File holding the bearer token every write route needs."),
            .option("cert", "file", "PEM certificate (chain) to serve HTTPS with; needs --key."),
            .option("key", "file", "PEM private key of --cert."),
            .flag("insecure-http", "Allow a non-loopback --listen over plain HTTP (without --cert/--key)."),
            .flag("private", "Reads of the published model (/v1/model, /v1/models...) need the token too."),
            .option(
                "train-after", "seconds|off",
                "Queue a training once users and crops have not changed for this long (0 or off: never).",
                default: "60"),
            .option("base", "builtin|none|dir", "Extractor trainings start from (as fit --base).", default: "builtin"),
            .option("max-crops", "n", "Crops one user may have.", default: "200"),
            .option("max-file-mb", "n", "Largest uploaded file, in MB.", default: "8"),
            .option(
                "body-timeout", "seconds",
                "Time a request's whole body may take after its headers (408 after); raise it for big uploads "
                    + "over slow links.", default: "60"),
            .option(
                "header-timeout", "seconds",
                "Time a connection may take, from its opening or its last answer, to send a request's headers "
                    + "(closed after).", default: "20"),
            .option(
                "connections-per-address", "n",
                "Connections one client address may hold at once (of 64); behind a reverse proxy every client "
                    + "shares its address, so raise it to 64 there.", default: "16"),
            DataOptions.minimumImages("Fewest crops a user may have for a training to run."),
            DataOptions.faceCheck,
            .flag(
                "skip-bad",
                "Trainings skip unreadable images and images the face check refuses (crops stored before the "
                    + "check was on: `facetrain data check` names them) instead of stopping on them."),
        ] + GateOptions.specs(server: true) + [
            .option(
                "base-url", "url", "Prefix of the model URL in latest.json (default: served here, /v1/models/...)."),
            .option(
                "webhook", "url",
                "POST signed events (trainings ending, publish, rollback) to this http(s) URL; repeatable."),
            .option("webhook-secret-file", "file", "File holding the HMAC-SHA256 key of the webhooks' signatures."),
            .option("webhook-retry-for", "seconds", "How long an undelivered event is retried.", default: "86400"),
            .flag("json", "Log one JSON object per request on stdout."),
        ]
    }

    let configuration: ServerConfiguration
    let json: Bool

    init(arguments: ParsedArguments) throws {
        try arguments.expectPositionals(atMost: 0)
        let data = URL(fileURLWithPath: try arguments.required("data"))
        let models = URL(fileURLWithPath: try arguments.required("models"))
        let dataPath = realPath(data)
        let modelsPath = realPath(models)
        guard modelsPath != dataPath, !modelsPath.hasPrefix(dataPath.hasSuffix("/") ? dataPath : dataPath + "/") else {
            throw UsageError(message: "--models \(models.path) is inside --data \(data.path); put it elsewhere")
        }
        let listen: String = try arguments.required("listen")
        guard let (host, port) = ServerConfiguration.parseListen(listen) else {
            throw UsageError(
                message: "--listen must be an address and a port: 127.0.0.1:8080, or [::1]:8080 for IPv6 (port 0: any)")
        }
        var token: String?
        if let file = arguments.string("token-file") {
            guard let text = try? String(contentsOfFile: file, encoding: .utf8) else {
                throw UsageError(message: "cannot read --token-file \(file)")
            }
            let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
            guard trimmed.count >= 16, !trimmed.unicodeScalars.contains(where: { $0.properties.isWhitespace }) else {
                throw UsageError(
                    message: "the token in \(file) must be at least 16 characters without spaces, e.g. "
                        + "`openssl rand -hex 32 > \(file)`")
            }
            token = trimmed
        }
        let base = try BaseModel.resolve(try arguments.required("base"))
        let loadOptions = try DataOptions.loadOptions(arguments)
        let fitConfiguration =
            base.map {
                FitJob.configuration(
                    FitConfiguration(), base: $0, fineTuning: .head, keepEpochs: false, keepLearningRate: false)
            } ?? FitConfiguration()
        // Checked here as `fit` checks it, so that a bad base fails at start, not at the first training.
        try requireValid { () throws(ConfigurationError) in try fitConfiguration.validate() }
        let fitJob = FitJob(
            data: data, models: models, configuration: fitConfiguration, loadOptions: loadOptions, base: base)
        var configuration = ServerConfiguration(data: data, models: models, fitJob: fitJob)
        configuration.host = host
        configuration.port = port
        configuration.token = token
        configuration.insecureHTTP = arguments.flag("insecure-http")
        configuration.isPrivate = arguments.flag("private")
        if configuration.isPrivate && token == nil {
            throw UsageError(
                message: "--private needs --token-file: without a token there is nothing to keep reads behind")
        }
        configuration.tls = try Self.credentials(certificate: arguments.string("cert"), key: arguments.string("key"))
        let trainAfter: String = try arguments.required("train-after")
        if trainAfter == "off" || trainAfter == "0" {
            configuration.trainAfter = nil
        } else {
            guard let seconds = Double(trainAfter), seconds > 0, seconds <= 86400 else {
                throw UsageError(message: "--train-after must be seconds between 0 and 86400, or off")
            }
            configuration.trainAfter = seconds
        }
        configuration.maximumCropsPerUser = try arguments.required("max-crops")
        let megabytes: Int = try arguments.required("max-file-mb")
        guard (1...256).contains(megabytes), configuration.maximumCropsPerUser >= 1 else {
            throw UsageError(message: "--max-file-mb must be in 1...256 and --max-crops at least 1")
        }
        configuration.limits.maximumFileBytes = megabytes << 20
        configuration.limits.maximumUploadBytes = max(configuration.limits.maximumUploadBytes, 4 * (megabytes << 20))
        let bodyTimeout: Int = try arguments.required("body-timeout")
        guard (1...3600).contains(bodyTimeout) else {
            throw UsageError(message: "--body-timeout must be seconds between 1 and 3600")
        }
        configuration.limits.bodyDeadlineSeconds = bodyTimeout
        let headerTimeout: Int = try arguments.required("header-timeout")
        guard (1...3600).contains(headerTimeout) else {
            throw UsageError(message: "--header-timeout must be seconds between 1 and 3600")
        }
        configuration.limits.headerDeadlineSeconds = headerTimeout
        let perAddress: Int = try arguments.required("connections-per-address")
        guard (1...configuration.limits.maximumConnections).contains(perAddress) else {
            throw UsageError(
                message: "--connections-per-address must be between 1 and \(configuration.limits.maximumConnections)")
        }
        configuration.limits.maximumConnectionsPerAddress = perAddress
        // The gate of every publish: a training's and POST /v1/models/{version}/publish's.
        configuration.gate = try GateOptions.gate(arguments)
        configuration.baseURL = arguments.string("base-url")
        try validateBaseURL(configuration.baseURL)
        if let refusal = configuration.refusal() { throw UsageError(message: refusal) }
        json = arguments.flag("json")
        let json = self.json
        configuration.log = { method, path, status, milliseconds in
            if json {
                let line = String(
                    format: "{\"event\":\"request\",\"method\":\"%@\",\"path\":%@,\"status\":%d,\"ms\":%.2f}",
                    method, (try? JSONText.encode(path, pretty: false)) ?? "\"\"", status, milliseconds)
                print(line)
                fflush(nil)
            } else {
                printError(String(format: "%@ %@ %d %.1f ms", method, path, status, milliseconds))
            }
        }
        configuration.pause = { TestHooks.pause(at: $0) }
        configuration.webhooks = try Self.webhooks(arguments)
        configuration.warn = { printError("facetrain serve: \($0)") }
        self.configuration = configuration
    }

    /// --webhook URLs (http or https), the secret they are signed with, and the retry period.
    static func webhooks(_ arguments: ParsedArguments) throws -> WebhookSettings? {
        let texts = arguments.strings("webhook")
        let secretFile = arguments.string("webhook-secret-file")
        guard !texts.isEmpty else {
            if secretFile != nil { throw UsageError(message: "--webhook-secret-file needs at least one --webhook URL") }
            return nil
        }
        let urls = try texts.map { text in
            guard let url = URL(string: text), ["http", "https"].contains(url.scheme?.lowercased() ?? ""),
                url.host?.isEmpty == false
            else {
                throw UsageError(message: "--webhook \(text) is not an http(s) URL, e.g. https://example.com/facetrain")
            }
            return url
        }
        guard let secretFile else {
            throw UsageError(
                message: "--webhook needs --webhook-secret-file: unsigned events could be forged by anyone who can "
                    + "reach the receiver; e.g. `openssl rand -hex 32 > webhook.secret`")
        }
        guard let text = try? String(contentsOfFile: secretFile, encoding: .utf8) else {
            throw UsageError(message: "cannot read --webhook-secret-file \(secretFile)")
        }
        let secret = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard secret.count >= 16 else {
            throw UsageError(
                message: "the secret in \(secretFile) must be at least 16 characters, e.g. "
                    + "`openssl rand -hex 32 > \(secretFile)`")
        }
        var settings = WebhookSettings(urls: urls, secret: Data(secret.utf8))
        guard let retryFor = Double(try arguments.required("webhook-retry-for") as String), retryFor >= 1,
            retryFor <= 30 * 86400
        else { throw UsageError(message: "--webhook-retry-for must be seconds between 1 and 2592000 (30 days)") }
        settings.retryFor = retryFor
        if let backoff = TestHooks.webhookBackoff {
            settings.firstBackoff = min(settings.firstBackoff, backoff)
            settings.longestBackoff = backoff
        }
        return settings
    }

    /// Reads --cert and --key, checking that each is the PEM block it should be before GnuTLS sees them.
    static func credentials(certificate: String?, key: String?) throws -> TLSCredentials? {
        guard certificate != nil || key != nil else { return nil }
        guard let certificate, let key else {
            throw UsageError(message: "--cert and --key go together: give both PEM files, or neither for plain HTTP")
        }
        func read(_ path: String, _ option: String, _ marker: String, _ example: String) throws -> Data {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw UsageError(message: "cannot read --\(option) \(path)")
            }
            let text = String(decoding: data, as: UTF8.self)
            guard text.contains("-----BEGIN "), text.contains(marker) else {
                throw UsageError(
                    message: "--\(option) \(path) is not a PEM \(example) (no '-----BEGIN ...\(marker)' line); "
                        + "convert it with openssl, e.g. `openssl x509 -in cert.der -inform der -out cert.pem`")
            }
            return data
        }
        return TLSCredentials(
            certificate: try read(certificate, "cert", "CERTIFICATE-----", "certificate"),
            key: try read(key, "key", "PRIVATE KEY-----", "private key"))
    }

    func run() throws -> ExitCode {
        installInterruptHandler()
        let server = try FaceServer(configuration: configuration)
        let address =
            "\(configuration.tls == nil ? "http" : "https")://\(ServerConfiguration.urlHost(configuration.host)):\(server.port)"
        printError(
            "facetrain serve: listening on \(address) (data \(configuration.data.path), models "
                + "\(configuration.models.path)); Ctrl-C stops")
        if json { print("{\"event\":\"listening\",\"url\":\"\(address)\",\"port\":\(server.port)}") }
        fflush(nil)
        while !interruptRequested { usleep(100_000) }
        server.stop()
        printError("facetrain serve: stopped")
        return .success
    }
}
