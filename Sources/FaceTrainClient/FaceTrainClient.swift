import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The app's side of `facetrain serve`: typed async calls over URLSession, for an iPhone app (it
/// depends on Foundation only, so SwiftPM builds it without the engine's C libraries). It is not
/// a full mirror of the API: it has what an app needs (register, upload, train, download,
/// recognise, verify); docs/openapi.json describes every route.
/// iOS 16 and macOS 13 for async URLSession, `Duration` and `Task.sleep(for:)`.
@available(iOS 16.0, macOS 13.0, tvOS 16.0, watchOS 9.0, *)
public struct FaceTrainClient: Sendable {
    /// The server's root, e.g. https://faces.example.com:8443.
    public var baseURL: URL
    /// The bearer token of the server's --token-file; nil for a server on loopback without one.
    public var token: String?
    public var session: URLSession

    public init(baseURL: URL, token: String? = nil, session: URLSession = .shared) {
        self.baseURL = baseURL
        self.token = token
        self.session = session
    }

    // MARK: People

    /// `POST /v1/users`: registers a person; the server gives the id (3 or more).
    public func registerPerson(name: String, position: String? = nil) async throws -> Person {
        var body: [String: String?] = ["name": name]
        if let position { body["position"] = position }
        let data = try JSONEncoder().encode(body.compactMapValues { $0 })
        let answer: PersonAnswer = try await send("POST", "/v1/users", body: data, type: "application/json")
        return answer.user
    }

    /// `GET /v1/users`: everyone registered, with their crop counts.
    public func people() async throws -> [Person] {
        let answer: PeopleAnswer = try await send("GET", "/v1/users")
        return answer.users
    }

    /// `POST /v1/users/{id}/photos`: face crops (the app's Vision crops) in one multipart request.
    /// Every file gets its own result; none stored answers 422, which is returned here too (not
    /// thrown) so the caller sees each file's reason.
    public func uploadCrops(personID: Int, _ files: [UploadFile]) async throws -> UploadResult {
        let form = MultipartForm(files: files.map { ("photos", $0) })
        return try await send(
            "POST", "/v1/users/\(personID)/photos", body: form.body, type: form.contentType, accepting: [422])
    }

    // MARK: Training

    /// `POST /v1/training`: queues a training, or returns the one still waiting.
    public func startTraining() async throws -> TrainingJob {
        let answer: TrainingAnswer = try await send("POST", "/v1/training")
        return answer.record
    }

    /// `GET /v1/training/{job}`.
    public func training(job: Int) async throws -> TrainingJob {
        let answer: TrainingAnswer = try await send("GET", "/v1/training/\(job)")
        return answer.record
    }

    /// Polls `GET /v1/training/{job}` until it is no longer queued or running; throws
    /// `.trainingTimedOut` after `timeout`. A failed or refused job is returned: its `error` says why.
    public func waitForTraining(
        job: Int, every interval: Duration = .seconds(1), timeout: Duration = .seconds(600)
    ) async throws -> TrainingJob {
        let deadline = ContinuousClock.now + timeout
        while true {
            let record = try await training(job: job)
            guard record.state == .queued || record.state == .running else { return record }
            guard ContinuousClock.now + interval < deadline else {
                throw FaceTrainClientError.trainingTimedOut(job: job, state: record.state)
            }
            try await Task.sleep(for: interval)
        }
    }

    // MARK: The model

    /// `GET /v1/model`: the published version, its users (names for the labels) and the Core ML
    /// file's URL, SHA-256 and size.
    public func model() async throws -> ModelInfo {
        try await send("GET", "/v1/model")
    }

    // MARK: Recognition

    /// `POST /v1/recognize`: every face in a photo (or the one face of a crop) and who it is, at
    /// the published version or `version`.
    public func recognize(_ photo: UploadFile, version: Int? = nil) async throws -> Recognition {
        let form = MultipartForm(files: [("photo", photo)])
        return try await send(
            "POST", "/v1/recognize" + (version.map { "?version=\($0)" } ?? ""), body: form.body, type: form.contentType)
    }

    /// `POST /v1/users/{id}/verify`: is the largest face in the photo this person?
    public func verify(personID: Int, _ photo: UploadFile, version: Int? = nil) async throws -> Verification {
        let form = MultipartForm(files: [("photo", photo)])
        return try await send(
            "POST", "/v1/users/\(personID)/verify" + (version.map { "?version=\($0)" } ?? ""), body: form.body,
            type: form.contentType)
    }

    // MARK: Requests

    /// A request to `path` (with its query) on the server, with the token.
    func request(_ method: String, _ path: String, url: URL? = nil) -> URLRequest {
        var request = URLRequest(url: url ?? URL(string: path, relativeTo: baseURL)!.absoluteURL)
        request.httpMethod = method
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        return request
    }

    /// Sends a request and decodes a 2xx answer (or one of `accepting`); any other status throws
    /// the server's error.
    func send<Answer: Decodable>(
        _ method: String, _ path: String, body: Data? = nil, type: String? = nil, accepting: Set<Int> = []
    ) async throws -> Answer {
        var request = request(method, path)
        if let body {
            request.httpBody = body
            request.setValue(type, forHTTPHeaderField: "Content-Type")
        }
        let (data, response) = try await exchange(request)
        guard (200..<300).contains(response.statusCode) || accepting.contains(response.statusCode) else {
            throw FaceTrainClientError(status: response.statusCode, body: data)
        }
        do { return try JSONDecoder().decode(Answer.self, from: data) } catch {
            throw FaceTrainClientError.unexpectedAnswer("\(method) \(path): \(error)")
        }
    }

    /// One round trip, as an HTTP response.
    func exchange(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        let (data, response) = try await session.data(for: request)
        guard let http = response as? HTTPURLResponse else {
            throw FaceTrainClientError.unexpectedAnswer("\(request.url?.absoluteString ?? "?") answered without HTTP")
        }
        return (data, http)
    }
}

/// A file to upload: a crop or a photo, as JPEG, PNG or PGM/PPM bytes.
public struct UploadFile: Sendable {
    public var fileName: String
    public var data: Data
    public var contentType: String

    public init(fileName: String, data: Data, contentType: String = "image/jpeg") {
        self.fileName = fileName
        self.data = data
        self.contentType = contentType
    }

    /// A file on disk, named as it is.
    public init(contentsOf url: URL) throws {
        let type = ["png": "image/png", "pgm": "image/x-portable-graymap", "ppm": "image/x-portable-pixmap"]
        self.init(
            fileName: url.lastPathComponent, data: try Data(contentsOf: url),
            contentType: type[url.pathExtension.lowercased()] ?? "image/jpeg")
    }
}

/// What went wrong, with the server's own message when it answered with an error.
public enum FaceTrainClientError: Error, Equatable, CustomStringConvertible {
    /// The server's JSON error (`{"status": "error", "error": message}`), or the body's text.
    case server(status: Int, message: String)
    /// A downloaded file whose SHA-256 is not the one the server announced; it was not kept.
    case checksumMismatch(expected: String, actual: String)
    case trainingTimedOut(job: Int, state: TrainingJob.State)
    /// A 2xx answer this client cannot read (another server version?).
    case unexpectedAnswer(String)

    init(status: Int, body: Data) {
        struct ErrorAnswer: Decodable { var error: String }
        let message =
            (try? JSONDecoder().decode(ErrorAnswer.self, from: body).error)
            ?? String(decoding: body.prefix(500), as: UTF8.self)
        self = .server(status: status, message: message)
    }

    /// The HTTP status of a server error.
    public var status: Int? {
        if case .server(let status, _) = self { return status }
        return nil
    }

    public var description: String {
        switch self {
        case .server(let status, let message): "the server answered \(status): \(message)"
        case .checksumMismatch(let expected, let actual):
            "the download's SHA-256 is \(actual), the server announced \(expected); it was deleted, download again"
        case .trainingTimedOut(let job, let state): "training \(job) is still \(state.rawValue); wait longer"
        case .unexpectedAnswer(let text): "unexpected answer: \(text)"
        }
    }
}
