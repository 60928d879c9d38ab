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

/// The API: dispatches each route, checks the token on everything but the published model's
/// reads (unless `isPrivate`) and the health check, and answers in JSON (the admin page in HTML).
struct ServerRoutes: Sendable {
    let store: UserStore
    let queue: TrainingQueue
    let repository: ModelRepository
    let metrics: ServerMetrics
    let recognition: RecognitionService
    /// Deleting a person: everything that holds their face or name (DELETE /v1/users/{id}).
    let eraser: PersonEraser
    /// SHA-256 of the `--token-file` token (the admin's); nil: writes are open (loopback only).
    let tokenDigest: String?
    /// The scoped tokens the admin created (`/v1/tokens`).
    let tokens: TokenStore
    /// Reads of the published model need the token too.
    var isPrivate = false
    /// The gate and URL prefix of `POST /v1/models/{version}/publish` (the ones trainings use).
    var gate = PublishGate()
    var baseURL: String?
    /// The admin cookie gets `Secure` (served over HTTPS).
    var secureCookies = false
    /// Posts `model.published` and `model.rolled_back` (`--webhook`).
    var webhooks: WebhookDispatcher?
    /// Wrong tokens per client address (429 after too many).
    var throttle = AuthenticationThrottle()
    /// SHA-256 of each downloaded bundle file, and the admin page's thumbnails of crops.
    let fileHashes = FileCache<String>()
    let thumbnails = FileCache<String?>()

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
                    "no route \(request.method) \(request.path); GET /openapi.json lists the routes"),
                Route.unmatchedTemplate
            )
        }
        // Only requests that offer a secret are throttled: the app's open reads never are.
        let offersSecret = tokenDigest != nil && offersCredentials(request, route)
        if offersSecret, let seconds = throttle.secondsLocked(request.clientAddress),
            route == .login || !offersDrawnSecret(request)
        {
            let message =
                "\(throttle.limit) wrong tokens from \(request.clientAddress) within \(Int(throttle.window)) s: "
                + "wait \(seconds) s, and use the token in the server's --token-file"
            return (ServerResponses.error(429, message, headers: [("Retry-After", "\(seconds)")]), route.template)
        }
        let response = answer(route, request)
        if offersSecret && response.status == 401 { throttle.recordFailure(request.clientAddress) }
        return (response, route.template)
    }

    /// The answer a request gets before its body is read, when its credentials already decide it:
    /// a write (any method but GET and HEAD) without the token, or without the admin session where
    /// the admin page posts, gets the refusal its route would give; nil lets the body be read.
    /// Before that, two refusals that protect a browser's user from other sites' pages: without a
    /// token (loopback only) a Host that is not a loopback name is refused (a page on a rebound DNS
    /// name would otherwise read and write here), and a write whose Origin is another site is refused.
    func preflight(_ request: HTTPRequest) -> (response: HTTPResponse, route: String)? {
        guard let route = Route(path: request.path) else { return nil }
        let host = request.header("host") ?? ""
        if tokenDigest == nil, !Self.isLoopbackHost(host) {
            let message =
                "this server has no token, so it answers only requests to a loopback name (localhost, 127.0.0.1, "
                + "[::1]), not to Host '\(host)'; run it with --token-file to serve other names"
            return (ServerResponses.error(403, message), route.template)
        }
        guard request.method != "GET", request.method != "HEAD" else { return nil }
        // The login form is exempt: a foreign page can only log a browser in with the right token.
        if route != .login, let origin = request.header("origin"), !Self.isSameOrigin(origin, host: host) {
            let message =
                "a write from a page of another site (Origin \(origin)) is refused; use the admin page of this "
                + "server, or a client that sends no Origin"
            return (ServerResponses.error(403, message), route.template)
        }
        guard tokenDigest != nil else { return nil }
        let allowed: Bool
        switch route {
        case .login, .logout: return nil
        case .testPhoto, .personPhotoDelete, .correctForm: allowed = isAdmin(request)
        case .tokenForm, .tokenRevokeForm: allowed = isAdmin(request)
        default: allowed = (try? authorize(request, route)) != nil
        }
        // Every route checks the credentials before it reads the body, so this is its own answer.
        return allowed ? nil : respond(request)
    }

    /// "localhost", "127.0.0.1" (any 127.x) or "[::1]", with or without a port.
    static func isLoopbackHost(_ host: String) -> Bool {
        let lowered = host.lowercased()
        let name: Substring =
            if lowered.hasPrefix("[") { lowered.prefix { $0 != "]" }.dropFirst() } else { lowered.prefix { $0 != ":" } }
        return name == "localhost" || ServerConfiguration.isLoopback(String(name))
    }

    /// Whether an Origin header ("http://127.0.0.1:8080") names the host the request was sent to.
    static func isSameOrigin(_ origin: String, host: String) -> Bool {
        let lowered = origin.lowercased()
        for scheme in ["http://", "https://"] where lowered.hasPrefix(scheme) {
            return !host.isEmpty && lowered.dropFirst(scheme.count) == host.lowercased()
        }
        return false
    }

    /// A live scoped token as the bearer, or else the admin session cookie: secrets that depend on
    /// 256 bits the server drew (TokenStore.sessionKey for the cookie), which no rate of guessing
    /// finds, so a lockout caused by others on the same address (a proxy, an office's NAT) need not
    /// stop them. The `--token-file` token, which a person chose, waits, and so does the login form
    /// (whose credential is its form field, whatever else the request carries).
    private func offersDrawnSecret(_ request: HTTPRequest) -> Bool {
        if let header = request.header("authorization") {
            guard header.hasPrefix("Bearer ") else { return false }
            return tokens.authenticate(String(header.dropFirst("Bearer ".count))) != nil
        }
        guard let tokenDigest else { return false }
        return hasAdminSession(request, tokenDigest: tokenDigest)
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
        } catch let error as TokenStoreError {
            return ServerResponses.error(ClientError(answering: error).status, error.description)
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
            return try only(route, method) { adminPage(request) }
        case .login:
            return try only(route, method) { login(request) }
        case .logout:
            return try only(route, method) { logout() }
        case .testPhoto:
            return try only(route, method) { testPhoto(request) }
        case .person(let id):
            return try only(route, method) { try personPage(id, request) }
        case .personPhotoDelete(let id, let sha256):
            return try only(route, method) { try deleteFromPersonPage(id, sha256, request) }
        case .correctForm:
            return try only(route, method) { correctFromTestPage(request) }
        case .health:
            return try only(route, method) { health() }
        case .openAPI:
            return try only(route, method) {
                HTTPResponse(
                    status: 200, headers: [("Content-Type", "application/json"), ("Cache-Control", "no-cache")],
                    body: OpenAPIDocument.data)
            }
        case .metrics:
            return try only(route, method) {
                try authorizeAdmin(request, route)
                return scrape()
            }
        case .model:
            return try only(route, method) {
                try authorizeRead(request, route)
                return try model()
            }
        case .models:
            return try only(route, method) {
                try authorizeRead(request, route)
                return ServerResponses.json(200, ["models": ServerResponses.value(try repository.summaries())])
            }
        case .download(let version, let file):
            return try only(route, method) {
                try authorizeRead(request, route)
                return try download(version, file, Self.downloads[file]!, request)
            }
        case .report(let version):
            return try only(route, method) {
                try authorizeAdmin(request, route)
                return try report(version)
            }
        case .publish(let version):
            return try only(route, method) {
                try authorize(request, route)
                return try publish(version)
            }
        case .rollback(let version):
            return try only(route, method) {
                try authorize(request, route)
                return try rollback(version)
            }
        case .users:
            switch method {
            case "GET":
                try authorize(request, route)
                return ServerResponses.json(200, ["users": ServerResponses.value(store.list())])
            case "POST":
                try authorize(request, route)
                let body = try jsonObject(request, allowed: ["name", "position"])
                guard case .string(let name)? = body["name"] else {
                    throw ClientError(400, "send {\"name\": \"...\", \"position\": \"...\"}; \"name\" is missing")
                }
                let user = try store.create(name: name, position: try position(body))
                queue.noteChange()
                return ServerResponses.json(201, ["user": ServerResponses.value(user), "id": .integer(user.id)])
            default: return notAllowed(route.methods, method)
            }
        case .user(let id):
            return try user(id, request)
        case .photos(let id), .classPhotos(let id):
            switch method {
            case "POST":
                try authorize(request, route)
                return try photos(id, request)
            case "GET":
                try authorize(request, route)
                return try photoList(id)
            default: return notAllowed(route.methods, method)
            }
        case .photo(let id, let sha256), .classPhoto(let id, let sha256):
            switch method {
            case "GET":
                try authorize(request, route)
                return try photoFile(id, sha256)
            case "DELETE":
                try authorize(request, route)
                try store.deleteCrop(id, sha256: sha256)
                queue.noteChange()
                return ServerResponses.json(200, ["deleted": .string(sha256), "crops": .integer(store.cropCount(id))])
            default: return notAllowed(route.methods, method)
            }
        case .recognize:
            return try only(route, method) {
                try authorize(request, route)
                return try recognize(request)
            }
        case .recognizedCrop(let sha256):
            return try only(route, method) {
                try authorize(request, route)
                let data = try recentCrop(sha256)
                return HTTPResponse(
                    status: 200,
                    headers: [
                        ("Content-Type", "image/jpeg"), ("Cache-Control", "private, no-store"),
                        ("X-Content-Type-Options", "nosniff"),
                    ], body: data.data)
            }
        case .corrections:
            switch method {
            case "POST":
                try authorize(request, route)
                return try correct(request)
            case "GET":
                try authorize(request, route)
                return ServerResponses.json(
                    200, ["corrections": ServerResponses.value(try eraser.corrections.records().reversed())])
            default: return notAllowed(route.methods, method)
            }
        case .verify(let id):
            return try only(route, method) {
                try authorize(request, route)
                return try verify(id, request)
            }
        case .trainings:
            switch method {
            case "POST":
                try authorize(request, route)
                let job = try queue.enqueue()
                return ServerResponses.json(
                    202, ["job": .integer(job.job), "record": ServerResponses.value(job)],
                    headers: [("Location", "/v1/training/\(job.job)")])
            case "GET":
                try authorize(request, route)
                return ServerResponses.json(200, ["jobs": ServerResponses.value(queue.all())])
            default: return notAllowed(route.methods, method)
            }
        case .tokens, .token, .tokenForm, .tokenRevokeForm:
            return try tokenRoute(route, request)
        case .training(let id):
            return try only(route, method) {
                try authorize(request, route)
                guard let job = queue.record(id) else {
                    throw ClientError(404, "there is no training job \(id); POST /v1/training starts one")
                }
                return ServerResponses.json(200, ["job": .integer(job.job), "record": ServerResponses.value(job)])
            }
        }
    }

    private func only(_ route: Route, _ method: String, _ body: () throws -> HTTPResponse) throws -> HTTPResponse {
        guard route.methods.contains(method) else { return notAllowed(route.methods, method) }
        return try body()
    }

    func notAllowed(_ methods: [String], _ method: String) -> HTTPResponse {
        ServerResponses.error(
            405, "\(method) is not allowed here; use \(methods.joined(separator: " or "))",
            headers: [("Allow", methods.joined(separator: ", "))])
    }

    /// Throws 401 unless the request carries the `--token-file` token (compared in constant time) or a
    /// live scoped token, and 403 when that token's role may not use `route` with this method.
    func authorize(_ request: HTTPRequest, _ route: Route) throws {
        guard tokenDigest != nil else { return }
        let (role, name) = try bearer(request)
        let allowed = route.roles(request.method)
        guard allowed.contains(role) else {
            let needed = TokenRole.allCases.filter(allowed.contains).map(\.rawValue).joined(separator: " or ")
            throw ClientError(
                403,
                "\(request.method) \(route.template) needs a token with the role \(needed); the token '\(name)' has "
                    + "the role \(role.rawValue). Ask the admin for a token of that role (POST /v1/tokens)")
        }
    }

    /// The role and name of the request's bearer token: admin for the `--token-file` one; throws
    /// 401 without a token, or with a wrong or revoked one.
    func bearer(_ request: HTTPRequest) throws -> (role: TokenRole, name: String) {
        guard let header = request.header("authorization"), header.hasPrefix("Bearer ") else {
            throw ClientError(401, "this route needs the server's token: send 'Authorization: Bearer <token>'")
        }
        let secret = String(header.dropFirst("Bearer ".count))
        if let tokenDigest, Self.constantTimeEqual(SHA256.hash(Data(secret.utf8)), tokenDigest) {
            return (.admin, "--token-file")
        }
        guard let token = tokens.authenticate(secret) else {
            throw ClientError(
                401,
                "the bearer token is wrong or revoked; use the one in the server's --token-file, or a live token "
                    + "from POST /v1/tokens")
        }
        return (token.role, token.name)
    }

    /// The published model's reads: open unless `--private`; then an admin or app token, or the admin
    /// page's session.
    private func authorizeRead(_ request: HTTPRequest, _ route: Route) throws {
        guard isPrivate, !isAdmin(request) else { return }
        try authorize(request, route)
    }

    /// Reads the admin page links to: an admin token, or the session cookie of its login form.
    func authorizeAdmin(_ request: HTTPRequest, _ route: Route) throws {
        guard !isAdmin(request) else { return }
        try authorize(request, route)
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
            try authorize(request, .user(id: id))
            guard let user = store.user(id) else { throw UserStoreError.noSuchUser(id: id) }
            return ServerResponses.json(200, ["user": ServerResponses.value(user)])
        case "PATCH":
            try authorize(request, .user(id: id))
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
            try authorize(request, .user(id: id))
            let outcome = try eraser.erase(id, by: "facetrain serve")
            recognition.forget(cropHashes: outcome.cropHashes, versions: outcome.record.withdrawnVersions)
            let job = queue.noteErasure(user: id, cropHashes: outcome.cropHashes)
            let withdrawn = outcome.record.withdrawnVersions
            return ServerResponses.json(
                200,
                [
                    "deleted": .integer(id), "erasure": ServerResponses.value(outcome.record),
                    "training": job.map { .integer($0.job) } ?? .null,
                    "note": .string(
                        "their crops, entry, cached embeddings and corrections are removed, and "
                            + (withdrawn.isEmpty
                                ? "no model was trained on them"
                                : "the \(withdrawn.count) model version(s) trained on them are withdrawn")
                            + "; \(ErasureLog.name) in the models folder records what, without the name. Phones "
                            + "keep the model they downloaded until a new one is published"),
                ])
        default:
            return notAllowed(Route.user(id: id).methods, request.method)
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
    func jsonObject(_ request: HTTPRequest, allowed: Set<String>) throws -> [String: JSONValue] {
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
        guard store.user(id) != nil || !ClassLabel.isUser(id: id) else { throw UserStoreError.noSuchUser(id: id) }
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
            "crops": .integer(store.cropCount(id)), "files": ServerResponses.value(outcomes),
        ]
        if stored > 0 { queue.noteChange() }
        if stored == 0 && duplicates == 0 {
            answer["error"] = .string(
                "none of the \(rejected) files could be stored (files[].reason says why); nothing was stored")
            return ServerResponses.json(422, answer)
        }
        return ServerResponses.json(stored > 0 ? 201 : 200, answer)
    }

    /// `GET /v1/users/{id}/photos`: every crop with its SHA-256, size, time stored and face score.
    private func photoList(_ id: Int) throws -> HTTPResponse {
        let stored = try store.storedCrops(id)
        let scores = recognition.faceScores(
            stored.map { (try? store.cropFile(id, sha256: $0.sha256)) }, hashes: stored.map(\.sha256))
        let rows: [JSONValue] = zip(stored, scores).map { crop, score in
            .object([
                "sha256": .string(crop.sha256), "name": .string(crop.name), "bytes": .integer(crop.bytes),
                "added_at": .string(crop.addedAt), "url": .string("\(Route.photosPath(id))/\(crop.sha256)"),
                "face_score": score.map { .number($0) } ?? .null,
            ])
        }
        return ServerResponses.json(
            200, [ClassLabel.isUser(id: id) ? "user" : "class": .integer(id), "photos": .array(rows)])
    }

    /// `GET /v1/users/{id}/photos/{sha256}`: the crop's bytes, as stored.
    private func photoFile(_ id: Int, _ sha256: String) throws -> HTTPResponse {
        let url = try store.cropFile(id, sha256: sha256)
        guard let data = FileManager.default.contents(atPath: url.path) else {
            throw UserStoreError.noSuchCrop(id: id, sha256: sha256)
        }
        let type =
            switch url.pathExtension.lowercased() {
            case "jpg", "jpeg": "image/jpeg"
            case "png": "image/png"
            default: "image/x-portable-anymap"
            }
        return HTTPResponse(
            status: 200,
            headers: [
                ("Content-Type", type), ("ETag", "\"\(sha256)\""), ("Cache-Control", "private, no-store"),
                ("X-Content-Type-Options", "nosniff"),
            ], body: data)
    }

    // MARK: Recognition

    /// Classes listed per face in recognition answers.
    static let recognitionTop = 3

    /// The one image of a recognise or verify request, decoded.
    func uploadedImage(_ request: HTTPRequest) throws -> Image {
        guard request.header("content-type")?.lowercased().hasPrefix("multipart/form-data") == true else {
            throw ClientError(415, "send the photo or crop as multipart/form-data in a 'photo' field")
        }
        guard request.files.count == 1, let file = request.files.first, file.field == "photo" else {
            let fields = request.files.map { "'\($0.field)'" }.joined(separator: ", ")
            throw ClientError(
                400,
                "send exactly one image, in the field 'photo'; got \(request.files.count) file(s)"
                    + (fields.isEmpty ? "" : " in \(fields)"))
        }
        do { return try ImageDecoder.decode(data: file.data, name: file.fileName) } catch {
            throw ClientError(422, "\(error)")
        }
    }

    /// `?version=N`, or nil for the published version.
    private func askedVersion(_ request: HTTPRequest) throws -> Int? {
        guard let text = request.query["version"] else { return nil }
        guard let version = ModelRepository.parseVersion(text) else {
            throw ClientError(400, "?version= takes a version number such as 3, got '\(text)'")
        }
        return version
    }

    private func recognize(_ request: HTTPRequest) throws -> HTTPResponse {
        let image = try uploadedImage(request)
        let (version, faces) = try recognition.recognize(image, version: try askedVersion(request))
        return ServerResponses.json(
            200,
            [
                "version": .integer(version), "width": .integer(image.width), "height": .integer(image.height),
                "faces": .array(faces.map { faceRecord($0, version: version) }),
            ])
    }

    /// A recognised face as the API shows it, with the crop a correction can file (`crop.sha256`).
    func faceRecord(_ face: RecognizedFace, version: Int) -> JSONValue {
        guard case .object(var object) = ServerResponses.value(RecognizedFaceRecord(face, top: Self.recognitionTop))
        else { return .null }
        if let hash = recognition.remember(face, version: version) {
            object["crop"] = .object(["sha256": .string(hash), "url": .string("/v1/recognize/crops/\(hash)")])
        }
        return .object(object)
    }

    // MARK: Corrections

    /// `POST /v1/corrections`: `{"crop": sha256, "user": id}` or `{"crop": sha256, "class":
    /// "stranger" | "not_a_face"}` files a face a recognition returned under that class; the next
    /// training learns from it.
    private func correct(_ request: HTTPRequest) throws -> HTTPResponse {
        let usage =
            "send {\"crop\": \"<faces[].crop.sha256 of POST /v1/recognize>\", \"user\": <id>} or "
            + "{\"crop\": \"...\", \"class\": \"stranger\"} (or \"not_a_face\")"
        let body = try jsonObject(request, allowed: ["crop", "user", "class"])
        guard case .string(let hash)? = body["crop"], Route.isSHA256(hash) else {
            throw ClientError(400, "\"crop\" must be a crop's SHA-256 (64 lower-case hex digits); " + usage)
        }
        let target: Int
        switch (body["user"], body["class"]) {
        case (.integer(let id)?, nil) where ClassLabel.isUser(id: id): target = id
        case (nil, .string("stranger")?): target = ClassLabel.unknownPerson.id
        case (nil, .string("not_a_face")?): target = ClassLabel.notAFace.id
        default: throw ClientError(400, "give exactly one of \"user\" (an id of 3 or more) and \"class\"; " + usage)
        }
        let (record, outcome) = try fileCorrection(hash, under: target)
        return ServerResponses.json(
            record != nil ? 201 : 200,
            [
                "correction": record.map { ServerResponses.value($0) } ?? .null,
                "file": ServerResponses.value(outcome), "crops": .integer(store.cropCount(target)),
            ])
    }

    /// A face a recent recognition returned, or 404.
    private func recentCrop(_ hash: String) throws -> RecognitionService.RecentCrop {
        guard let recent = recognition.recentCrop(hash) else {
            throw ClientError(
                404,
                "no recent recognition returned the crop \(hash); recognised crops are kept for the last "
                    + "\(RecognitionService.keptCrops) faces and until a restart: recognise the photo again")
        }
        return recent
    }

    /// Stores a recognised crop under `target` (face-checked like an upload) and logs the
    /// correction; a crop already filed and logged there is a duplicate and logs nothing.
    func fileCorrection(_ hash: String, under target: Int) throws -> (CorrectionRecord?, PhotoOutcome) {
        let recent = try recentCrop(hash)
        guard !ClassLabel.isUser(id: target) || store.user(target) != nil else {
            throw UserStoreError.noSuchUser(id: target)
        }
        let file = FormFile(field: "photos", fileName: "recognized-\(hash.prefix(12)).jpg", data: recent.data)
        let outcome = try store.addPhotos(target, files: [file])[0]
        metrics.recordUpload([outcome])
        guard outcome.result != "rejected" else {
            throw ClientError(422, "the crop cannot be filed under \(target): \(outcome.reason ?? "refused")")
        }
        guard let name = outcome.name else { return (nil, outcome) }
        // A duplicate is already filed, unless a kill came between storing it and logging it: a
        // retried correction then logs it (and so keeps it in training).
        let hash = String(name.prefix(64))
        if outcome.result == "duplicate", try eraser.corrections.records().contains(where: { $0.crop == hash }) {
            return (nil, outcome)
        }
        let record = CorrectionRecord(
            correctedAt: Manifest.timestamp(Date()), crop: hash, filedUnder: target,
            version: recent.version, decidedUser: recent.decidedUser)
        try eraser.corrections.append(record)
        queue.noteChange()
        return (record, outcome)
    }

    /// The largest face of the photo against one user: the model's probability for them and the
    /// app's decision (accepted as them, or not).
    private func verify(_ id: Int, _ request: HTTPRequest) throws -> HTTPResponse {
        guard store.user(id) != nil else { throw UserStoreError.noSuchUser(id: id) }
        let image = try uploadedImage(request)
        let (version, faces) = try recognition.recognize(image, version: try askedVersion(request))
        guard let face = faces.first else {
            throw ClientError(422, "no face was found in the photo; send a photo or crop that shows the face")
        }
        let classification = face.classification
        // The store holds people only (ids from 3), so the label is a user's.
        guard let label = ClassLabel(id: id) else { throw UserStoreError.noSuchUser(id: id) }
        var answer: [String: JSONValue] = [
            "user": .integer(id), "version": .integer(version),
            "verified": .bool(classification.decidedLabel == label),
            "threshold": .number(classification.threshold),
            "face": ServerResponses.value(RecognizedFaceRecord(face, top: Self.recognitionTop)),
        ]
        if let index = classification.classLabels.firstIndex(of: label) {
            answer["probability"] = .number(Double(classification.probabilities[index]))
        } else {
            answer["probability"] = .null
            answer["note"] = .string(
                "version \(version) was trained without user \(id); POST /v1/training trains one that knows them")
        }
        return ServerResponses.json(200, answer)
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
            if let erasure = try? eraser.log.records().last(where: { $0.unpublishedVersion != nil }),
                let withdrawn = erasure.unpublishedVersion
            {
                let job = queue.all().last { $0.state == .queued || $0.state == .running }
                let next =
                    job.map { "a model without them is being trained (GET /v1/training/\($0.job))" }
                    ?? "no training is queued: POST /v1/training once people have crops"
                return ServerResponses.json(
                    503,
                    [
                        "error": .string(
                            "version \(withdrawn) was withdrawn at \(erasure.erasedAt) because a person it was "
                                + "trained on was erased; \(next)"),
                        "withdrawn": .integer(withdrawn), "training": job.map { .integer($0.job) } ?? .null,
                    ], headers: [("Retry-After", "60"), ("Cache-Control", "no-cache")])
            }
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
        // Bundles never change in place: each file is hashed once, not on every download (the whole
        // bundle's verification took 27 ms of CPU a request, and ~70 requests/s filled both cores).
        let sha256 = fileHashes.value(for: url) { SHA256.hash(data) }
        if name != BundleVerifier.manifestName {
            let manifestURL = folder.appendingPathComponent(BundleVerifier.manifestName)
            let manifest = try? Manifest.decode(Data(contentsOf: manifestURL))
            guard let entry = manifest?.files.first(where: { $0.path == name }), entry.sha256 == sha256 else {
                return ServerResponses.error(
                    500, "\(name) of version \(version) does not match its manifest; run facetrain verify")
            }
        }
        let etag = "\"\(sha256)\""
        // Ranges resume the model downloads; the JSON manifest (a few KB) is sent whole, since a part
        // of it is no JSON document for a client to read.
        let ranged = type != "application/json"
        let headers = [
            ("ETag", etag), ("Cache-Control", "public, max-age=31536000, immutable"),
            ("Accept-Ranges", ranged ? "bytes" : "none"),
        ]
        if let match = request.header("if-none-match") {
            let tags = match.split(separator: ",").map {
                $0.trimmingCharacters(in: .whitespaces).replacingOccurrences(of: "W/", with: "")
            }
            if tags.contains(etag) || tags.contains("*") { return HTTPResponse(status: 304, headers: headers) }
        }
        // If-Range with another tag means the client's part is of a different file: send it whole.
        if ranged, let range = request.header("range"), request.header("if-range").map({ $0 == etag }) ?? true {
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
            if !outcome.unchanged {
                webhooks?.send("model.published", WebhookDispatcher.published(outcome.pointer, by: "POST publish"))
            }
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
            webhooks?.send("model.rolled_back", WebhookDispatcher.published(pointer, by: "POST rollback"))
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
    /// Any failure as a client sees it: its own status, the user store's refusal's, or 500.
    init(answering error: any Error) {
        switch error {
        case let error as ClientError: self = error
        case let error as UserStoreError: self.init(error)
        case TokenStoreError.noSuchToken: self.init(404, "\(error)")
        case TokenStoreError.invalidName: self.init(400, "\(error)")
        default: self.init(500, "\(error)")
        }
    }

    /// The status of each refusal of the user store.
    init(_ error: UserStoreError) {
        switch error {
        case .noSuchUser: self.init(404, error.description)
        case .invalidField: self.init(400, error.description)
        case .tooManyCrops: self.init(409, error.description)
        case .noSuchCrop: self.init(404, error.description)
        }
    }
}
