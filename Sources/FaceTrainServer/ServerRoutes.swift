import FaceTrain
import Foundation

/// JSON answers: successes carry `"status": "success"`, errors `{"status": "error", "error": ...}`.
enum ServerResponses {
    static func json(_ status: Int, _ object: [String: JSONValue], headers: [(String, String)] = []) -> HTTPResponse {
        var object = object
        object["status"] = .string(status < 400 ? "success" : "error")
        let body = (try? JSONText.data(JSONValue.object(object), pretty: false)) ?? Data("{}".utf8)
        return HTTPResponse(
            status: status, headers: [("Content-Type", "application/json")] + headers, body: body + Data("\n".utf8))
    }

    static func error(_ status: Int, _ message: String, headers: [(String, String)] = []) -> HTTPResponse {
        json(status, ["error": .string(message)], headers: headers)
    }

    /// Any Encodable as a JSON value, to merge into an answer.
    static func value<T: Encodable>(_ value: T) -> JSONValue {
        (try? JSONDecoder().decode(JSONValue.self, from: JSONText.data(value, pretty: false))) ?? .null
    }
}

/// What a request path names, matched component by component against fixed words and canonical
/// integers (`7`, not `07`), so no file path is ever built from what a client sent.
enum Route: Equatable {
    case admin, login, logout, health, metrics
    case model, models
    case download(version: Int, file: String)
    /// The version's HTML evaluation report, made on request from its held-out crops.
    case report(version: Int)
    case publish(version: Int)
    case rollback(version: Int)
    case users
    case user(id: Int)
    case photos(id: Int)
    case trainings
    case training(job: Int)

    init?(path: String) {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map(String.init)
        let number = parts.count > 2 ? ModelRepository.parseVersion(parts[2]) : nil
        switch parts {
        case [""]: self = .admin
        case ["login"]: self = .login
        case ["logout"]: self = .logout
        case ["healthz"]: self = .health
        case ["metrics"]: self = .metrics
        case ["v1", "model"]: self = .model
        case ["v1", "models"]: self = .models
        case ["v1", "users"]: self = .users
        case ["v1", "training"]: self = .trainings
        case let path where path.count == 3 && path[0] == "v1" && number != nil:
            switch path[1] {
            case "users": self = .user(id: number!)
            case "training": self = .training(job: number!)
            default: return nil
            }
        case let path where path.count == 4 && path[0] == "v1" && number != nil:
            switch (path[1], path[3]) {
            case ("users", "photos"): self = .photos(id: number!)
            case ("models", "publish"): self = .publish(version: number!)
            case ("models", "rollback"): self = .rollback(version: number!)
            case ("models", AdminPage.reportName): self = .report(version: number!)
            case ("models", let file) where ServerRoutes.downloads[file] != nil:
                self = .download(version: number!, file: file)
            default: return nil
            }
        default: return nil
        }
    }

    /// The path with its numbers as placeholders: the `route` label of /metrics.
    var template: String {
        switch self {
        case .admin: return "/"
        case .login: return "/login"
        case .logout: return "/logout"
        case .health: return "/healthz"
        case .metrics: return "/metrics"
        case .model: return "/v1/model"
        case .models: return "/v1/models"
        case .download(_, let file): return "/v1/models/{version}/\(file)"
        case .publish: return "/v1/models/{version}/publish"
        case .rollback: return "/v1/models/{version}/rollback"
        case .report: return "/v1/models/{version}/\(AdminPage.reportName)"
        case .users: return "/v1/users"
        case .user: return "/v1/users/{id}"
        case .photos: return "/v1/users/{id}/photos"
        case .trainings: return "/v1/training"
        case .training: return "/v1/training/{job}"
        }
    }

    /// The `route` label of paths that match no route.
    static let unmatchedTemplate = "unmatched"
}

/// The API: dispatches each route, checks the token on everything but the published model's
/// reads (unless `isPrivate`) and the health check, and answers in JSON (the admin page in HTML).
struct ServerRoutes: Sendable {
    let store: UserStore
    let queue: TrainingQueue
    let repository: ModelRepository
    let metrics: ServerMetrics
    /// SHA-256 of the bearer token; nil: writes are open (loopback only).
    let tokenDigest: String?
    /// Reads of the published model need the token too.
    var isPrivate = false
    /// The gate and URL prefix of `POST /v1/models/{version}/publish` (the ones trainings use).
    var gate = PublishGate()
    var baseURL: String?
    /// The admin cookie gets `Secure` (served over HTTPS).
    var secureCookies = false
    /// Wrong tokens per client address (429 after too many).
    var throttle = AuthenticationThrottle()

    /// Files of a version that can be downloaded, and their content types.
    static let downloads = [
        BundleVerifier.coreMLName: "application/octet-stream", BundleVerifier.onnxName: "application/octet-stream",
        BundleVerifier.manifestName: "application/json",
    ]

    /// The answer and the route template it was counted under.
    func respond(_ request: HTTPRequest) -> (response: HTTPResponse, route: String) {
        guard let route = Route(path: request.path) else {
            return (
                ServerResponses.error(
                    404,
                    "no route \(request.method) \(request.path); the routes are listed in the README's serve section"),
                Route.unmatchedTemplate
            )
        }
        // Only requests that offer a secret are throttled: the app's open reads never are.
        let offersSecret = tokenDigest != nil && offersCredentials(request, route)
        if offersSecret, let seconds = throttle.secondsLocked(request.clientAddress) {
            let message =
                "\(throttle.limit) wrong tokens from \(request.clientAddress) within \(Int(throttle.window)) s: "
                + "wait \(seconds) s, and use the token in the server's --token-file"
            return (ServerResponses.error(429, message, headers: [("Retry-After", "\(seconds)")]), route.template)
        }
        let response = answer(route, request)
        if offersSecret && response.status == 401 { throttle.recordFailure(request.clientAddress) }
        return (response, route.template)
    }

    /// A bearer token, an admin session cookie, or the login form's token field.
    private func offersCredentials(_ request: HTTPRequest, _ route: Route) -> Bool {
        request.header("authorization") != nil || request.cookies[Self.sessionCookie] != nil
            || (route == .login && request.fields["token"] != nil)
    }

    private func answer(_ route: Route, _ request: HTTPRequest) -> HTTPResponse {
        do {
            return try respond(route, request)
        } catch let error as UserStoreError {
            return ServerResponses.error(ClientError(error).status, error.description)
        } catch let error as ClientError {
            let headers = error.status == 401 ? [("WWW-Authenticate", "Bearer")] : []
            return ServerResponses.error(error.status, error.message, headers: headers)
        } catch let error as DataProblem {
            return ServerResponses.error(500, "\(error); fix the data folder and restart the server")
        } catch {
            return ServerResponses.error(500, "\(error)")
        }
    }

    private func respond(_ route: Route, _ request: HTTPRequest) throws -> HTTPResponse {
        let method = request.method
        switch route {
        case .admin:
            return try only(["GET", "HEAD"], method) { adminPage(request) }
        case .login:
            return try only(["POST"], method) { login(request) }
        case .logout:
            return try only(["POST"], method) { logout() }
        case .health:
            return try only(["GET"], method) { health() }
        case .metrics:
            return try only(["GET"], method) {
                try authorizeAdmin(request)
                return scrape()
            }
        case .model:
            return try only(["GET"], method) {
                try authorizeRead(request)
                return try model()
            }
        case .models:
            return try only(["GET"], method) {
                try authorizeRead(request)
                return ServerResponses.json(200, ["models": ServerResponses.value(try repository.summaries())])
            }
        case .download(let version, let file):
            return try only(["GET", "HEAD"], method) {
                try authorizeRead(request)
                return try download(version, file, Self.downloads[file]!, request)
            }
        case .report(let version):
            return try only(["GET"], method) {
                try authorizeAdmin(request)
                return try report(version)
            }
        case .publish(let version):
            return try only(["POST"], method) {
                try authorize(request)
                return try publish(version)
            }
        case .rollback(let version):
            return try only(["POST"], method) {
                try authorize(request)
                return try rollback(version)
            }
        case .users:
            switch method {
            case "GET":
                try authorize(request)
                return ServerResponses.json(200, ["users": ServerResponses.value(store.list())])
            case "POST":
                try authorize(request)
                let body = try jsonObject(request, allowed: ["name", "position"])
                guard case .string(let name)? = body["name"] else {
                    throw ClientError(400, "send {\"name\": \"...\", \"position\": \"...\"}; \"name\" is missing")
                }
                let user = try store.create(name: name, position: try position(body))
                queue.noteChange()
                return ServerResponses.json(201, ["user": ServerResponses.value(user), "id": .integer(user.id)])
            default: return notAllowed(["GET", "POST"], method)
            }
        case .user(let id):
            return try user(id, request)
        case .photos(let id):
            return try only(["POST"], method) {
                try authorize(request)
                return try photos(id, request)
            }
        case .trainings:
            switch method {
            case "POST":
                try authorize(request)
                let job = try queue.enqueue()
                return ServerResponses.json(
                    202, ["job": .integer(job.job), "record": ServerResponses.value(job)],
                    headers: [("Location", "/v1/training/\(job.job)")])
            case "GET":
                try authorize(request)
                return ServerResponses.json(200, ["jobs": ServerResponses.value(queue.all())])
            default: return notAllowed(["GET", "POST"], method)
            }
        case .training(let id):
            return try only(["GET"], method) {
                try authorize(request)
                guard let job = queue.record(id) else {
                    throw ClientError(404, "there is no training job \(id); POST /v1/training starts one")
                }
                return ServerResponses.json(200, ["job": .integer(job.job), "record": ServerResponses.value(job)])
            }
        }
    }

    private func only(_ methods: [String], _ method: String, _ body: () throws -> HTTPResponse) throws -> HTTPResponse {
        guard methods.contains(method) else { return notAllowed(methods, method) }
        return try body()
    }

    private func notAllowed(_ methods: [String], _ method: String) -> HTTPResponse {
        ServerResponses.error(
            405, "\(method) is not allowed here; use \(methods.joined(separator: " or "))",
            headers: [("Allow", methods.joined(separator: ", "))])
    }

    /// Throws 401 unless the request carries the bearer token (compared in constant time).
    func authorize(_ request: HTTPRequest) throws {
        guard let tokenDigest else { return }
        guard let header = request.header("authorization"), header.hasPrefix("Bearer ") else {
            throw ClientError(401, "this route needs the server's token: send 'Authorization: Bearer <token>'")
        }
        let given = SHA256.hash(Data(header.dropFirst("Bearer ".count).utf8))
        guard Self.constantTimeEqual(given, tokenDigest) else {
            throw ClientError(401, "the bearer token is wrong; use the one in the server's --token-file")
        }
    }

    /// The published model's reads: open unless `--private`; then the token or the admin page's session.
    private func authorizeRead(_ request: HTTPRequest) throws {
        if isPrivate { try authorizeAdmin(request) }
    }

    /// Reads the admin page links to: the token, or the session cookie of its login form.
    func authorizeAdmin(_ request: HTTPRequest) throws {
        guard !isAdmin(request) else { return }
        try authorize(request)
        throw ClientError(401, "the admin session is not valid; log in again at /")
    }

    /// Equal-length digests compared without an early exit, so timing says nothing about the token.
    static func constantTimeEqual(_ left: String, _ right: String) -> Bool {
        let a = Array(left.utf8)
        let b = Array(right.utf8)
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }

    // MARK: Users

    private func user(_ id: Int, _ request: HTTPRequest) throws -> HTTPResponse {
        switch request.method {
        case "GET":
            try authorize(request)
            guard let user = store.user(id) else { throw UserStoreError.noSuchUser(id: id) }
            return ServerResponses.json(200, ["user": ServerResponses.value(user)])
        case "PATCH":
            try authorize(request)
            let body = try jsonObject(request, allowed: ["name", "position"])
            var name: String?
            if let value = body["name"] {
                guard case .string(let text) = value else { throw ClientError(400, "\"name\" must be a string") }
                name = text
            }
            let position: String?? = body["position"] == nil ? .none : .some(try position(body))
            guard name != nil || position != nil else {
                throw ClientError(400, "send {\"name\": ...} and/or {\"position\": ...} to change")
            }
            let user = try store.update(id, name: name, position: position)
            queue.noteChange()
            return ServerResponses.json(200, ["user": ServerResponses.value(user)])
        case "DELETE":
            try authorize(request)
            try store.delete(id)
            queue.noteChange()
            return ServerResponses.json(
                200,
                [
                    "deleted": .integer(id),
                    "note": .string(
                        "the crops and the entry are removed from disk; models trained before still know the "
                            + "person until a new training is published (POST /v1/training)"),
                ])
        default:
            return notAllowed(["GET", "PATCH", "DELETE"], request.method)
        }
    }

    private func position(_ body: [String: JSONValue]) throws -> String? {
        switch body["position"] {
        case nil, .null?: return nil
        case .string(let text)?: return text
        default: throw ClientError(400, "\"position\" must be a string or null")
        }
    }

    /// The body as a JSON object with only `allowed` keys.
    private func jsonObject(_ request: HTTPRequest, allowed: Set<String>) throws -> [String: JSONValue] {
        guard case .object(let object)? = try? JSONDecoder().decode(JSONValue.self, from: request.body) else {
            throw ClientError(400, "the body must be a JSON object, e.g. {\"name\": \"Ada\", \"position\": \"CTO\"}")
        }
        if let unknown = object.keys.sorted().first(where: { !allowed.contains($0) }) {
            throw ClientError(
                400, "unknown field \"\(unknown)\"; the fields are \(allowed.sorted().joined(separator: ", "))")
        }
        return object
    }

    private func photos(_ id: Int, _ request: HTTPRequest) throws -> HTTPResponse {
        guard store.user(id) != nil else { throw UserStoreError.noSuchUser(id: id) }
        guard request.header("content-type")?.lowercased().hasPrefix("multipart/form-data") == true else {
            throw ClientError(415, "send the crops as multipart/form-data with one 'photos' field per file")
        }
        let wrong = request.files.filter { $0.field != "photos" }
        guard wrong.isEmpty else {
            let fields = Set(wrong.map(\.field)).sorted().map { "'\($0)'" }.joined(separator: ", ")
            throw ClientError(
                400, "files must be sent in the field 'photos', not \(fields); nothing was stored")
        }
        guard !request.files.isEmpty else {
            throw ClientError(400, "no files in the request; send each crop as a 'photos' file")
        }
        let outcomes = try store.addPhotos(id, files: request.files)
        metrics.recordUpload(outcomes)
        let stored = outcomes.filter { $0.result == "stored" }.count
        let duplicates = outcomes.filter { $0.result == "duplicate" }.count
        let rejected = outcomes.filter { $0.result == "rejected" }.count
        var answer: [String: JSONValue] = [
            "stored": .integer(stored), "duplicates": .integer(duplicates), "rejected": .integer(rejected),
            "crops": .integer(store.user(id)?.crops ?? 0), "files": ServerResponses.value(outcomes),
        ]
        if stored > 0 { queue.noteChange() }
        if stored == 0 && duplicates == 0 {
            answer["error"] = .string(
                "none of the \(rejected) files could be stored (files[].reason says why); nothing was stored")
            return ServerResponses.json(422, answer)
        }
        return ServerResponses.json(stored > 0 ? 201 : 200, answer)
    }

    // MARK: Models

    private func health() -> HTTPResponse {
        let published = (try? repository.latestPointer())??.version
        return ServerResponses.json(
            200,
            [
                "facetrain": .string(FaceTrainVersion.string), "published": published.map { .integer($0) } ?? .null,
                "training": queue.running().map { .integer($0.job) } ?? .null,
            ])
    }

    private func model() throws -> HTTPResponse {
        guard let pointer = try repository.latestPointer() else {
            throw ClientError(404, "no model is published yet; POST /v1/training trains and publishes one")
        }
        // A relative url names the file in the models folder, which this server serves here.
        let url =
            pointer.url.contains("://") ? pointer.url : "/v1/models/\(pointer.version)/\(BundleVerifier.coreMLName)"
        return ServerResponses.json(
            200,
            [
                "version": .integer(pointer.version), "url": .string(url),
                "users": ServerResponses.value(pointer.users),
                "sha256": .string(pointer.sha256), "size": .integer(Int(pointer.size)),
                "publishedAt": .string(pointer.publishedAt),
            ], headers: [("Cache-Control", "no-cache")])
    }

    private func download(_ version: Int, _ name: String, _ type: String, _ request: HTTPRequest) throws
        -> HTTPResponse
    {
        // Both parts were checked against fixed forms: a canonical integer and a name from `downloads`.
        let folder = repository.bundleURL(version: version)
        let url = folder.appendingPathComponent(name)
        guard FileSystem.kind(at: folder) == .directory, FileSystem.kind(at: url) == .regular,
            let data = FileManager.default.contents(atPath: url.path)
        else {
            throw ClientError(404, "version \(version) has no \(name); GET /v1/models lists the versions")
        }
        let sha256 = SHA256.hash(data)
        if name != BundleVerifier.manifestName {
            let manifest = try ModelBundle.open(folder).manifest
            guard let entry = manifest.files.first(where: { $0.path == name }), entry.sha256 == sha256 else {
                return ServerResponses.error(
                    500, "\(name) of version \(version) does not match its manifest; run facetrain verify")
            }
        }
        let etag = "\"\(sha256)\""
        let headers = [
            ("ETag", etag), ("Cache-Control", "public, max-age=31536000, immutable"), ("Accept-Ranges", "bytes"),
        ]
        if let match = request.header("if-none-match") {
            let tags = match.split(separator: ",").map {
                $0.trimmingCharacters(in: .whitespaces).replacingOccurrences(of: "W/", with: "")
            }
            if tags.contains(etag) || tags.contains("*") { return HTTPResponse(status: 304, headers: headers) }
        }
        // If-Range with another tag means the client's part is of a different file: send it whole.
        if let range = request.header("range"), request.header("if-range").map({ $0 == etag }) ?? true {
            switch ByteRange.parse(range, size: data.count) {
            case .whole:
                break
            case .unsatisfiable:
                return ServerResponses.error(
                    416,
                    "the range \(range) is outside the \(data.count) bytes of \(name); ask for bytes=0-\(data.count - 1) "
                        + "or less", headers: [("Content-Range", "bytes */\(data.count)")] + headers)
            case .part(let bounds):
                return HTTPResponse(
                    status: 206,
                    headers: headers + [
                        ("Content-Type", type),
                        ("Content-Range", "bytes \(bounds.lowerBound)-\(bounds.upperBound)/\(data.count)"),
                    ], body: data.subdata(in: bounds.lowerBound..<(bounds.upperBound + 1)))
            }
        }
        return HTTPResponse(status: 200, headers: headers + [("Content-Type", type)], body: data)
    }

    // MARK: Publishing

    /// The same gate and atomic promotion as `facetrain publish` (without `--force`).
    private func publish(_ version: Int) throws -> HTTPResponse {
        try requireBundle(version)
        if let current = try repository.latestPointer(), current.version > version {
            throw ClientError(
                409,
                "version \(version) is older than the published version \(current.version); "
                    + "POST /v1/models/\(version)/rollback to go back to it")
        }
        do {
            let outcome = try repository.publish(version: version, gate: gate, baseURL: baseURL)
            return ServerResponses.json(
                200,
                [
                    "version": .integer(outcome.pointer.version), "unchanged": .bool(outcome.unchanged),
                    "notes": .array(outcome.notes.map { .string($0) }),
                    "latest": ServerResponses.value(outcome.pointer),
                ])
        } catch let refusal as PublishRefused {
            let hint =
                refusal.forceable
                ? "; the gate is serve's (facetrain publish --force \(version) on the server overrides it)" : ""
            throw ClientError(409, refusal.description + hint)
        }
    }

    /// The same verified, atomic switch back as `facetrain rollback`.
    private func rollback(_ version: Int) throws -> HTTPResponse {
        try requireBundle(version)
        guard let current = try repository.latestPointer() else {
            throw ClientError(
                409, "nothing is published yet, so there is nothing to roll back; POST /v1/models/\(version)/publish")
        }
        guard version < current.version else {
            throw ClientError(
                409,
                "version \(version) is not earlier than the published version \(current.version); rollback moves "
                    + "back, POST /v1/models/\(version)/publish moves forward")
        }
        do {
            let pointer = try repository.rollback(to: version, baseURL: baseURL)
            return ServerResponses.json(
                200,
                [
                    "version": .integer(pointer.version),
                    "previousVersion": pointer.previousVersion.map { .integer($0) } ?? .null,
                    "latest": ServerResponses.value(pointer),
                ])
        } catch BundleError.verificationFailed(_, let problems) {
            throw ClientError(
                409,
                "version \(version) fails verification (" + problems.map(\.description).joined(separator: "; ")
                    + "); it cannot be published again, pick another version")
        }
    }

    private func requireBundle(_ version: Int) throws {
        guard FileSystem.kind(at: repository.bundleURL(version: version)) == .directory else {
            throw ClientError(404, "there is no version \(version); GET /v1/models lists the versions")
        }
    }

    // MARK: Metrics

    private func scrape() -> HTTPResponse {
        let users = store.list()
        let jobs = queue.all()
        let running = jobs.first { $0.state == .running }
        let gauges = ServerMetrics.Gauges(
            publishedVersion: (try? repository.latestPointer())??.version, users: users.count,
            crops: users.map(\.crops).reduce(0, +), queuedTrainings: jobs.filter { $0.state == .queued }.count,
            runningTrainings: running == nil ? 0 : 1, trainingProgress: running.map { $0.progress ?? 0 })
        return HTTPResponse(
            status: 200, headers: [("Content-Type", "text/plain; version=0.0.4; charset=utf-8")],
            body: Data(metrics.exposition(gauges).utf8))
    }
}

/// A failure a client can fix: the HTTP status and a message that says what to do.
public struct ClientError: Error, CustomStringConvertible {
    public var status: Int
    public var message: String
    public var description: String { message }

    public init(_ status: Int, _ message: String) {
        self.status = status
        self.message = message
    }
}

extension ClientError {
    /// The status of each refusal of the user store.
    init(_ error: UserStoreError) {
        switch error {
        case .noSuchUser: self.init(404, error.description)
        case .invalidField: self.init(400, error.description)
        case .tooManyCrops: self.init(409, error.description)
        }
    }
}
