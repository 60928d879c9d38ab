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

/// The API: matches method and path, checks the token on everything but the published model's
/// reads and the health check, and answers in JSON. Paths are
/// matched component by component against fixed words and canonical integers, so no file path is
/// ever built from what a client sent.
struct ServerRoutes: Sendable {
    let store: UserStore
    let queue: TrainingQueue
    let repository: ModelRepository
    /// SHA-256 of the bearer token; nil: writes are open (loopback only).
    let tokenDigest: String?

    /// Files of a version that can be downloaded, and their content types.
    static let downloads = [
        BundleVerifier.coreMLName: "application/octet-stream", BundleVerifier.onnxName: "application/octet-stream",
        BundleVerifier.manifestName: "application/json",
    ]

    func respond(_ request: HTTPRequest) -> HTTPResponse {
        let parts = request.path.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map(String.init)
        let method = request.method
        do {
            switch parts {
            case ["healthz"]:
                return try only(["GET"], method) { health() }
            case ["v1", "model"]:
                return try only(["GET"], method) { try model() }
            case ["v1", "models"]:
                return try only(["GET"], method) {
                    ServerResponses.json(200, ["models": ServerResponses.value(try repository.summaries())])
                }
            case let path where path.count == 4 && path[0] == "v1" && path[1] == "models":
                guard let version = ModelRepository.parseVersion(path[2]), let type = Self.downloads[path[3]] else {
                    break
                }
                return try only(["GET", "HEAD"], method) { try download(version, path[3], type, request) }
            case ["v1", "users"]:
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
                    return ServerResponses.json(201, ["user": ServerResponses.value(user), "id": .integer(user.id)])
                default: return notAllowed(["GET", "POST"], method)
                }
            case let path where path.count == 3 && path[0] == "v1" && path[1] == "users":
                guard let id = ModelRepository.parseVersion(path[2]) else { break }
                return try user(id, request)
            case let path where path.count == 4 && path[0] == "v1" && path[1] == "users" && path[3] == "photos":
                guard let id = ModelRepository.parseVersion(path[2]) else { break }
                return try only(["POST"], method) {
                    try authorize(request)
                    return try photos(id, request)
                }
            case ["v1", "training"]:
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
            case let path where path.count == 3 && path[0] == "v1" && path[1] == "training":
                guard let id = ModelRepository.parseVersion(path[2]) else { break }
                return try only(["GET"], method) {
                    try authorize(request)
                    guard let job = queue.record(id) else {
                        throw ClientError(404, "there is no training job \(id); POST /v1/training starts one")
                    }
                    return ServerResponses.json(200, ["job": .integer(job.job), "record": ServerResponses.value(job)])
                }
            default:
                break
            }
            return ServerResponses.error(
                404, "no route \(method) \(request.path); the routes are listed in the README's serve section")
        } catch let error as ClientError {
            let headers = error.status == 401 ? [("WWW-Authenticate", "Bearer")] : []
            return ServerResponses.error(error.status, error.message, headers: headers)
        } catch let error as DataProblem {
            return ServerResponses.error(500, "\(error); fix the data folder and restart the server")
        } catch {
            return ServerResponses.error(500, "\(error)")
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
    private func authorize(_ request: HTTPRequest) throws {
        guard let tokenDigest else { return }
        guard let header = request.header("authorization"), header.hasPrefix("Bearer ") else {
            throw ClientError(401, "this route needs the server's token: send 'Authorization: Bearer <token>'")
        }
        let given = SHA256.hash(Data(header.dropFirst("Bearer ".count).utf8))
        guard Self.constantTimeEqual(given, tokenDigest) else {
            throw ClientError(401, "the bearer token is wrong; use the one in the server's --token-file")
        }
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
            guard let user = store.user(id) else { throw UserStore.noSuchUser(id) }
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
            return ServerResponses.json(200, ["user": ServerResponses.value(user)])
        case "DELETE":
            try authorize(request)
            try store.delete(id)
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
        guard store.user(id) != nil else { throw UserStore.noSuchUser(id) }
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
        let stored = outcomes.filter { $0.result == "stored" }.count
        let duplicates = outcomes.filter { $0.result == "duplicate" }.count
        let rejected = outcomes.filter { $0.result == "rejected" }.count
        var answer: [String: JSONValue] = [
            "stored": .integer(stored), "duplicates": .integer(duplicates), "rejected": .integer(rejected),
            "crops": .integer(store.user(id)?.crops ?? 0), "files": ServerResponses.value(outcomes),
        ]
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
        let headers = [("ETag", etag), ("Cache-Control", "public, max-age=31536000, immutable")]
        if let match = request.header("if-none-match") {
            let tags = match.split(separator: ",").map {
                $0.trimmingCharacters(in: .whitespaces).replacingOccurrences(of: "W/", with: "")
            }
            if tags.contains(etag) || tags.contains("*") { return HTTPResponse(status: 304, headers: headers) }
        }
        return HTTPResponse(status: 200, headers: headers + [("Content-Type", type)], body: data)
    }
}
