// libFuzzer target: the API's JSON and upload routes (ServerRoutes) on a real user store, in
// process: corrections, users, class 1 and 2 uploads, crop reads and deletions, erasure. Not the
// HTTP parsing (the multipart target) and not the routes that need a trained model to say more
// than 404 (recognize, verify), which are reached here only to be refused.
//
// Byte 0 picks the route, byte 1 the id or crop it names (an existing one or not); the rest is the
// body: JSON for the JSON routes, one file's bytes for the uploads. Every answer must be a JSON
// error or success with a 2xx/4xx status (a client cannot cause a 500), and the store must keep
// its own accounting: a user's crop count is the number of crops it lists.
import FaceTrain
import Foundation

@testable import FaceTrainServer

let root: URL = {
    let folder = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
    return URL(fileURLWithPath: folder).appendingPathComponent("facetrain-fuzz-routes-\(getpid())")
}()

let routes: ServerRoutes = {
    do {
        let data = root.appendingPathComponent("data")
        let models = root.appendingPathComponent("models")
        let store = try UserStore(root: data)
        store.maximumCropsPerUser = 20
        let job = FitJob(
            data: data, models: models, configuration: FitConfiguration(), loadOptions: DataLoadOptions(), base: nil)
        let queue = try TrainingQueue(store: store, models: models, job: job)
        let repository = ModelRepository(directory: models)
        return ServerRoutes(
            store: store, queue: queue, repository: repository, metrics: ServerMetrics(),
            recognition: RecognitionService(repository: repository), eraser: PersonEraser(store: store, models: models),
            tokenDigest: nil, tokens: try TokenStore(folder: data))
    } catch {
        fatalError("cannot open the store in \(root.path): \(error)")
    }
}()

/// The routes this target drives: method, path with `{id}` and `{sha}` filled per input, body kind.
let templates: [(method: String, path: String, upload: Bool)] = [
    ("POST", "/v1/corrections", false), ("GET", "/v1/corrections", false), ("POST", "/v1/users", false),
    ("PATCH", "/v1/users/{id}", false), ("DELETE", "/v1/users/{id}", false), ("POST", "/v1/users/{id}/photos", true),
    ("GET", "/v1/users/{id}/photos", false), ("GET", "/v1/users/{id}/photos/{sha}", false),
    ("DELETE", "/v1/users/{id}/photos/{sha}", false), ("POST", "/v1/strangers/photos", true),
    ("POST", "/v1/non-faces/photos", true), ("GET", "/v1/strangers/photos/{sha}", false),
    ("DELETE", "/v1/non-faces/photos/{sha}", false), ("POST", "/v1/users/{id}/verify", true),
    ("POST", "/v1/recognize", true), ("GET", "/v1/recognize/crops/{sha}", false),
]

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRoutes(_ bytes: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    guard count >= 2 else { return 0 }
    let store = routes.store
    if store.list().count < 2 { _ = try? store.create(name: "Fuzz \(store.list().count)", position: nil) }
    let users = store.list().map(\.id)
    let template = templates[Int(bytes[0]) % templates.count]
    // Even: an existing user and crop; odd: one that is not (deleted ids are never given out again).
    let pick = Int(bytes[1])
    let id = pick % 2 == 0 ? users[pick / 2 % users.count] : 1000 + pick
    let crops = (try? store.storedCrops(id)) ?? []
    let sha = pick % 2 == 0 && !crops.isEmpty ? crops[pick / 2 % crops.count].sha256 : String(repeating: "0", count: 64)
    let path = template.path.replacingOccurrences(of: "{id}", with: String(id))
        .replacingOccurrences(of: "{sha}", with: sha)
    let body = Data(bytes: bytes + 2, count: count - 2)
    var request = HTTPRequest(
        method: template.method, path: path, headers: ["host": "127.0.0.1"], body: Data(), files: [], fields: [:])
    if template.upload {
        request.headers["content-type"] = "multipart/form-data; boundary=x"
        let field = path.hasSuffix("/photos") ? "photos" : "photo"
        request.files = [FormFile(field: field, fileName: "fuzz.jpg", data: body)]
    } else {
        request.headers["content-type"] = "application/json"
        request.body = body
    }
    let (response, _) = routes.respond(request)
    guard (200..<500).contains(response.status) else {
        fatalError(
            "\(template.method) \(path) answered \(response.status): \(String(decoding: response.body, as: UTF8.self))")
    }
    guard
        response.status == 200 && template.method == "GET" && path.contains("/photos/") || response.status == 304
            || (try? JSONSerialization.jsonObject(with: response.body)) is [String: Any]
    else {
        fatalError("\(template.method) \(path) answered \(response.status) without a JSON object")
    }
    for user in store.list() where user.crops != ((try? store.storedCrops(user.id)) ?? []).count {
        fatalError("user \(user.id) counts \(user.crops) crops but lists a different number")
    }
    return 0
}
