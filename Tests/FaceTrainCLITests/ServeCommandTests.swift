import FaceTrain
import FaceTrainServer
import FaceTrainSynthesis
import FaceTrainTestSupport
import Foundation
import Testing

/// `facetrain serve` as a real process on an ephemeral loopback port, driven with curl.
@Suite("serve", .serialized)
struct ServeCommandTests {
    static let token = "test-token-0123456789abcdef"

    /// A running server and what it needs to be talked to.
    final class Server {
        let process: CLIRunner.Background
        let port: Int
        let token: String?
        /// The CA file curl trusts when the server speaks HTTPS.
        let certificateAuthority: URL?

        let host: String
        var origin: String {
            "\(certificateAuthority == nil ? "http" : "https")://\(ServerConfiguration.urlHost(host)):\(port)"
        }

        /// Trainings after a quiet period are off unless `extra` asks for them, so tests count jobs exactly.
        init(
            data: URL, models: URL, token: String? = ServeCommandTests.token, extra: [String] = [],
            pauseAt: String? = nil, certificateAuthority: URL? = nil, host: String = "127.0.0.1",
            environment extraEnvironment: [String: String] = [:]
        ) throws {
            let listen = "\(ServerConfiguration.urlHost(host)):0"
            var arguments = ["serve", "--data", data.path, "--models", models.path, "--listen", listen] + extra
            if !extra.contains("--train-after") { arguments += ["--train-after", "off"] }
            if let token {
                let file = models.deletingLastPathComponent().appendingPathComponent("token-\(UUID().uuidString)")
                try Data((token + "\n").utf8).write(to: file)
                arguments += ["--token-file", file.path]
            }
            var environment = extraEnvironment.merging(["FACETRAIN_TEST_COMMANDS": "1"]) { _, new in new }
            if let pauseAt { environment["FACETRAIN_TEST_PAUSE_AT"] = pauseAt }
            process = try CLIRunner.Background(arguments, environment: environment)
            self.token = token
            self.certificateAuthority = certificateAuthority
            self.host = host
            let announced = "://\(ServerConfiguration.urlHost(host)):"
            guard process.waitFor("listening on ", timeout: 60),
                let range = process.standardError.range(of: announced),
                let port = Int(process.standardError[range.upperBound...].prefix(while: \.isNumber))
            else {
                process.kill()
                throw TestFailure("the server did not start: \(process.standardError)")
            }
            self.port = port
        }

        /// curl against the server: status, body, response headers (lower-cased names).
        func curl(_ method: String, _ path: String, _ arguments: [String] = [], authorized: Bool = true) throws
            -> (status: Int, body: Data, headers: [String: String])
        {
            let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("curl-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: scratch) }
            let bodyURL = scratch.appendingPathComponent("body")
            let headersURL = scratch.appendingPathComponent("headers")
            // -g: the brackets of an IPv6 origin are not a curl glob.
            var all = ["-sS", "-g", "-X", method, "-o", bodyURL.path, "-D", headersURL.path, "-w", "%{http_code}"]
            if authorized, let token { all += ["-H", "Authorization: Bearer \(token)"] }
            if let certificateAuthority { all += ["--cacert", certificateAuthority.path] }
            all += arguments + [origin + path]
            let result = try ProcessRunner.run("/usr/bin/curl", all)
            guard let status = Int(result.standardOutput) else {
                throw TestFailure("curl \(method) \(path) failed: \(result.standardError)")
            }
            var headers: [String: String] = [:]
            let text = (try? String(contentsOf: headersURL, encoding: .utf8)) ?? ""
            for line in text.split(separator: "\r\n") {
                guard let colon = line.firstIndex(of: ":") else { continue }
                headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
                    in: .whitespaces)
            }
            return (status, (try? Data(contentsOf: bodyURL)) ?? Data(), headers)
        }

        /// A JSON request; the answer's object.
        func json(_ method: String, _ path: String, _ body: String? = nil, authorized: Bool = true) throws
            -> (status: Int, object: [String: Any])
        {
            let arguments = body.map { ["-H", "Content-Type: application/json", "--data-binary", $0] } ?? []
            let answer = try curl(method, path, arguments, authorized: authorized)
            let object = (try? JSONSerialization.jsonObject(with: answer.body)) as? [String: Any] ?? [:]
            return (answer.status, object)
        }

        /// Uploads files as multipart `field`s.
        func upload(_ id: Int, _ files: [URL], field: String = "photos") throws -> (status: Int, object: [String: Any])
        {
            let answer = try curl("POST", "/v1/users/\(id)/photos", files.flatMap { ["-F", "\(field)=@\($0.path)"] })
            let object = (try? JSONSerialization.jsonObject(with: answer.body)) as? [String: Any] ?? [:]
            return (answer.status, object)
        }

        func kill() { process.kill() }
    }

    struct TestFailure: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    /// Synthetic crops (`synth`), a server data folder holding only its classes 1 and 2, and a models folder.
    static func folders(users: Int = 5, perUser: Int = 10) throws -> (synth: URL, data: URL, models: URL) {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("facetrain-serve-\(UUID().uuidString)")
        let synth = root.appendingPathComponent("synth")
        let output = try CLIRunner.run([
            "synth", "--out", synth.path, "--users", String(users), "--per-user", String(perUser), "--seed", "3",
            "--negatives", "30", "--unknown-identities", "8", "--per-unknown", "3",
        ])
        #expect(output.status == 0, "\(output.standardError)")
        let data = root.appendingPathComponent("data")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        for label in ["1", "2"] {
            try FileManager.default.copyItem(
                at: synth.appendingPathComponent(label), to: data.appendingPathComponent(label))
        }
        return (synth, data, root.appendingPathComponent("models"))
    }

    static func crops(_ synth: URL, user: Int) throws -> [URL] {
        let folder = synth.appendingPathComponent(String(user))
        return try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".jpg") }.sorted()
            .map { folder.appendingPathComponent($0) }
    }

    static func storedCrops(_ data: URL, user: Int) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: data.appendingPathComponent(String(user)).path)) ?? [])
            .sorted()
    }

    // MARK: The app's flow

    @Test func registerUploadTrainDownload() throws {
        let (synth, data, models) = try Self.folders()
        defer { try? FileManager.default.removeItem(at: data.deletingLastPathComponent()) }
        var server = try Server(data: data, models: models)
        defer { server.kill() }

        #expect(try server.json("GET", "/healthz").status == 200)
        #expect(try server.json("GET", "/v1/model").status == 404)
        var ids: [Int] = []
        for index in 0..<5 {
            let created = try server.json("POST", "/v1/users", "{\"name\": \"Person \(index)\", \"position\": \"QA\"}")
            #expect(created.status == 201, "\(created.object)")
            #expect(created.object["status"] as? String == "success")
            let id = try #require(created.object["id"] as? Int)
            ids.append(id)
            let uploaded = try server.upload(id, try Self.crops(synth, user: 3 + index))
            #expect(uploaded.status == 201, "\(uploaded.object)")
            #expect(uploaded.object["stored"] as? Int == 10)
            // Stored under their content hash, readable as the same bytes.
            let names = Self.storedCrops(data, user: id)
            #expect(names.count == 10 && names.allSatisfy { $0.count == 64 + 4 && $0.hasSuffix(".jpg") }, "\(names)")
        }
        #expect(ids == [3, 4, 5, 6, 7])
        let again = try server.upload(ids[0], Array(try Self.crops(synth, user: 3).prefix(2)))
        #expect(again.status == 200 && again.object["duplicates"] as? Int == 2, "\(again.object)")
        // The server's folder is one `data check` accepts.
        let check = try CLIRunner.run(["data", "check", "--data", data.path])
        #expect(check.status == 0, "\(check.standardOutput)\(check.standardError)")

        let queued = try server.json("POST", "/v1/training")
        #expect(queued.status == 202, "\(queued.object)")
        let job = try #require(queued.object["job"] as? Int)
        let record = try Self.finished(server, job: job)
        #expect(record["state"] as? String == "succeeded", "\(record)")
        #expect(record["version"] as? Int == 1 && record["published"] as? Bool == true, "\(record)")
        #expect(record["progress"] as? Double == 1, "\(record)")

        let model = try server.json("GET", "/v1/model").object
        #expect(model["version"] as? Int == 1)
        #expect(model["url"] as? String == "/v1/models/1/FaceClassifier.mlmodel")
        let users = try #require(model["users"] as? [[String: Any]])
        #expect(users.compactMap { $0["id"] as? Int } == ids)
        #expect(users.first?["name"] as? String == "Person 0" && users.first?["position"] as? String == "QA")
        let sha256 = try #require(model["sha256"] as? String)

        let download = try server.curl("GET", "/v1/models/1/FaceClassifier.mlmodel", authorized: false)
        #expect(download.status == 200)
        #expect(SHA256.hash(download.body) == sha256)
        #expect(download.headers["etag"] == "\"\(sha256)\"")
        let cached = try server.curl(
            "GET", "/v1/models/1/FaceClassifier.mlmodel", ["-H", "If-None-Match: \"\(sha256)\""], authorized: false)
        #expect(cached.status == 304 && cached.body.isEmpty)
        #expect(try server.curl("GET", "/v1/models/1/model.onnx", authorized: false).status == 200)
        #expect(try server.curl("GET", "/v1/models/1/manifest.json", authorized: false).status == 200)
        for path in [
            "/v1/models/1/weights.h5", "/v1/models/01/FaceClassifier.mlmodel", "/v1/models/2/FaceClassifier.mlmodel",
            "/v1/models/1/../1/manifest.json", "/v1/users/0", "/v1/users/abc",
        ] {
            #expect(try server.curl("GET", path, ["--path-as-is"]).status == 404, "\(path)")
        }
        // An escaped '/' is refused before routing (escapedSlashesAndNULsReachNoRoute).
        #expect(try server.curl("GET", "/v1/models/1/..%2Fmanifest.json").status == 400)
        let listing = try server.json("GET", "/v1/models").object["models"] as? [[String: Any]]
        #expect(listing?.compactMap { $0["version"] as? Int } == [1])
        try Self.recognizesAndVerifies(server, synth: synth, ids: ids)

        // Changes: a new name, a deletion that takes the crops with it, ids never reused.
        let renamed = try server.json("PATCH", "/v1/users/\(ids[1])", "{\"name\": \"Renamed\"}")
        #expect(renamed.status == 200 && (renamed.object["user"] as? [String: Any])?["name"] as? String == "Renamed")
        #expect((renamed.object["user"] as? [String: Any])?["position"] as? String == "QA")
        #expect(try server.json("DELETE", "/v1/users/\(ids[4])").status == 200)
        #expect(!FileManager.default.fileExists(atPath: data.appendingPathComponent(String(ids[4])).path))
        #expect(try server.json("GET", "/v1/users/\(ids[4])").status == 404)
        let usersJSON = try String(contentsOf: data.appendingPathComponent("users.json"), encoding: .utf8)
        #expect(!usersJSON.contains("Person 4") && usersJSON.contains("Renamed"))

        // A restart sees the same users, the job and the published model.
        server.kill()
        server = try Server(data: data, models: models)
        let listed = try server.json("GET", "/v1/users").object["users"] as? [[String: Any]] ?? []
        #expect(listed.compactMap { $0["id"] as? Int } == Array(ids.prefix(4)))
        #expect(listed.first?["crops"] as? Int == 10)
        let after = try server.json("GET", "/v1/training/\(job)").object["record"] as? [String: Any]
        #expect(after?["state"] as? String == "succeeded")
        let next = try server.json("POST", "/v1/users", "{\"name\": \"Late\"}")
        #expect(next.object["id"] as? Int == 8, "\(next.object)")
    }

    /// A person's crops are listed (SHA-256, size, time, face score), served byte for byte and
    /// deleted one at a time, durably; names that are not a SHA-256 match no route.
    @Test func cropsAreListedServedAndDeletedOneByOne() throws {
        let (synth, data, models) = try Self.folders(users: 1, perUser: 4)
        defer { try? FileManager.default.removeItem(at: data.deletingLastPathComponent()) }
        let server = try Server(data: data, models: models)
        defer { server.kill() }
        let id = try #require(try server.json("POST", "/v1/users", "{\"name\": \"Ada\"}").object["id"] as? Int)
        #expect(try server.upload(id, try Self.crops(synth, user: 3)).status == 201)

        let listing = try server.json("GET", "/v1/users/\(id)/photos")
        #expect(listing.status == 200, "\(listing.object)")
        let photos = listing.object["photos"] as? [[String: Any]] ?? []
        #expect(photos.count == 4)
        let stored = Set(Self.storedCrops(data, user: id))
        for photo in photos {
            let sha256 = try #require(photo["sha256"] as? String)
            let name = try #require(photo["name"] as? String)
            #expect(stored.contains(name) && name.hasPrefix(sha256))
            let bytes = try Data(contentsOf: data.appendingPathComponent("\(id)/\(name)"))
            #expect(photo["bytes"] as? Int == bytes.count && SHA256.hash(bytes) == sha256)
            #expect((photo["added_at"] as? String)?.hasPrefix("20") == true)
            let score = try #require(photo["face_score"] as? Double)
            #expect((0...1).contains(score))
            let served = try server.curl("GET", "/v1/users/\(id)/photos/\(sha256)")
            #expect(served.status == 200 && served.body == bytes && served.headers["content-type"] == "image/jpeg")
        }

        let victim = try #require(photos.first?["sha256"] as? String)
        let deleted = try server.json("DELETE", "/v1/users/\(id)/photos/\(victim)")
        #expect(deleted.status == 200 && deleted.object["crops"] as? Int == 3, "\(deleted.object)")
        #expect(Self.storedCrops(data, user: id).count == 3)
        #expect(!Self.storedCrops(data, user: id).contains { $0.hasPrefix(victim) })
        #expect(try server.json("GET", "/v1/users/\(id)/photos/\(victim)").status == 404)
        #expect(try server.json("DELETE", "/v1/users/\(id)/photos/\(victim)").status == 404)
        #expect((try server.json("GET", "/v1/users/\(id)/photos").object["photos"] as? [Any])?.count == 3)
        #expect((try server.json("GET", "/v1/users/\(id)").object["user"] as? [String: Any])?["crops"] as? Int == 3)
        // Not a SHA-256, another user's id, no token: refused.
        for path in ["/v1/users/\(id)/photos/\(victim.uppercased())", "/v1/users/\(id)/photos/../\(id)"] {
            #expect(try server.curl("GET", path, ["--path-as-is"]).status == 404, "\(path)")
        }
        let kept = try #require(photos.last?["sha256"] as? String)
        #expect(try server.json("GET", "/v1/users/\(id + 1)/photos/\(kept)").status == 404)
        #expect(try server.json("GET", "/v1/users/\(id)/photos/\(kept)", authorized: false).status == 401)
        #expect(try server.json("DELETE", "/v1/users/\(id)/photos/\(kept)", authorized: false).status == 401)
        // A restart lists the same three.
        server.kill()
        let again = try Server(data: data, models: models)
        defer { again.kill() }
        #expect((try again.json("GET", "/v1/users/\(id)/photos").object["photos"] as? [Any])?.count == 3)
    }

    /// `POST /v1/recognize` and `/v1/users/{id}/verify` against version 1: crops are classified
    /// as they are, a photo of two people face by face, and bad requests get their status.
    static func recognizesAndVerifies(_ server: Server, synth: URL, ids: [Int]) throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("recognize-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        func post(_ path: String, _ file: URL?, field: String = "photo") throws -> (status: Int, object: [String: Any])
        {
            let answer = try server.curl("POST", path, file.map { ["-F", "\(field)=@\($0.path)"] } ?? [])
            return (answer.status, (try? JSONSerialization.jsonObject(with: answer.body)) as? [String: Any] ?? [:])
        }
        // Each of the first user's crops: one face, the whole image, and the model names its owner.
        var named = 0
        let crops = try Self.crops(synth, user: 3)
        var firstFace: [String: Any]?
        for crop in crops {
            let answer = try post("/v1/recognize", crop)
            #expect(answer.status == 200 && answer.object["version"] as? Int == 1, "\(answer.object)")
            let faces = answer.object["faces"] as? [[String: Any]] ?? []
            if crop == crops[0] { firstFace = faces.first }
            #expect(faces.count <= 1, "\(answer.object)")
            guard let face = faces.first else { continue }
            #expect(face["whole_image"] as? Bool == true && (face["landmarks"] as? [[Double]])?.count == 5)
            if face["label"] as? String == String(ids[0]) { named += 1 }
        }
        #expect(named >= crops.count - 2, "\(named) of \(crops.count) crops named their owner")

        // Two people side by side in one photo: two faces, largest first, each cut out and named.
        var pixels = [UInt8](repeating: 100, count: 480 * 300 * 3)
        for (person, left, side) in [(0, 40, 150), (1, 280, 120)] {
            let face = try ImageDecoder.decode(contentsOf: try Self.crops(synth, user: 3 + person)[0])
                .converted(channels: 3).resized(width: side, height: side)
            for row in 0..<side {
                for column in 0..<(side * 3) {
                    pixels[((row + 70) * 480 + left) * 3 + column] = face.pixels[row * side * 3 + column]
                }
            }
        }
        let photo = scratch.appendingPathComponent("two.jpg")
        try JPEGWriter.encode(rgb: pixels, width: 480, height: 300, quality: 92).write(to: photo)
        let group = try post("/v1/recognize", photo)
        let faces = group.object["faces"] as? [[String: Any]] ?? []
        #expect(group.status == 200 && faces.count == 2, "\(group.object)")
        if faces.count == 2 {
            #expect(faces.map { $0["whole_image"] as? Bool } == [false, false])
            let lefts = faces.compactMap { ($0["box"] as? [Double])?.first }
            #expect(lefts.count == 2 && lefts[0] < 240 && lefts[1] > 240, "largest (left) face first: \(lefts)")
            #expect(faces.map { $0["label"] as? String } == [String(ids[0]), String(ids[1])], "\(faces)")
        }
        // The server keeps a finished request's networks for the next: after the larger photo, the
        // first crop gets its first answer again (to float rounding: workers may share it or not).
        let again = (try post("/v1/recognize", crops[0]).object["faces"] as? [[String: Any]])?.first
        let (box, expected) = (again?["box"] as? [Double] ?? [], firstFace?["box"] as? [Double] ?? [.nan])
        #expect(again?["label"] as? String == firstFace?["label"] as? String)
        #expect(
            box.count == expected.count && zip(box, expected).allSatisfy { abs($0 - $1) < 1e-3 },
            "\(box) against \(expected)")
        let (p, q) = (again?["probability"] as? Double ?? 0, firstFace?["probability"] as? Double ?? 1)
        #expect(abs(p - q) < 1e-4, "probability \(p) against \(q)")

        // Verify: the owner's crop against the owner and against someone else.
        let own = try post("/v1/users/\(ids[0])/verify", crops[0])
        #expect(own.status == 200 && own.object["user"] as? Int == ids[0], "\(own.object)")
        let ownProbability = try #require(own.object["probability"] as? Double)
        let other = try post("/v1/users/\(ids[1])/verify", crops[0])
        #expect(other.status == 200 && other.object["verified"] as? Bool == false, "\(other.object)")
        #expect((other.object["probability"] as? Double ?? 1) < ownProbability)
        #expect(own.object["verified"] as? Bool == (ownProbability >= (own.object["threshold"] as? Double ?? 1)))

        // Refusals: no file, the wrong field, not an image, a blank wall to verify, unknown versions.
        let blank = scratch.appendingPathComponent("wall.jpg")
        try JPEGWriter.encode(rgb: [UInt8](repeating: 150, count: 80 * 80 * 3), width: 80, height: 80, quality: 90)
            .write(to: blank)
        let text = scratch.appendingPathComponent("note.jpg")
        try Data("not an image".utf8).write(to: text)
        #expect(try post("/v1/recognize", nil).status == 415)
        #expect(try post("/v1/recognize", crops[0], field: "photos").status == 400)
        #expect(try post("/v1/recognize", text).status == 422)
        let wall = try post("/v1/recognize", blank)
        #expect(wall.status == 200 && (wall.object["faces"] as? [Any])?.isEmpty == true, "\(wall.object)")
        let faceless = try post("/v1/users/\(ids[0])/verify", blank)
        #expect(faceless.status == 422 && (faceless.object["error"] as? String)?.contains("no face") == true)
        #expect(try post("/v1/users/99/verify", crops[0]).status == 404)
        #expect(try post("/v1/recognize?version=9", crops[0]).status == 404)
        #expect(try post("/v1/recognize?version=1", crops[0]).status == 200)
        #expect(try post("/v1/recognize?version=x", crops[0]).status == 400)
        let anonymous = try server.curl("POST", "/v1/recognize", ["-F", "photo=@\(crops[0].path)"], authorized: false)
        #expect(anonymous.status == 401)
    }

    // MARK: Authentication and refusals

    @Test func writesNeedTheToken() throws {
        let (_, data, models) = try Self.folders(users: 1, perUser: 5)
        defer { try? FileManager.default.removeItem(at: data.deletingLastPathComponent()) }
        let server = try Server(data: data, models: models)
        defer { server.kill() }
        let missing = try server.json("POST", "/v1/users", "{\"name\": \"Ada\"}", authorized: false)
        #expect(missing.status == 401 && missing.object["status"] as? String == "error", "\(missing.object)")
        #expect((missing.object["error"] as? String)?.contains("Authorization: Bearer") == true)
        let wrong = try server.curl(
            "POST", "/v1/users",
            ["-H", "Authorization: Bearer wrong-token-0123456789", "--data-binary", "{\"name\":\"A\"}"],
            authorized: false)
        #expect(wrong.status == 401 && wrong.headers["www-authenticate"] == "Bearer")
        #expect(try server.json("POST", "/v1/training", authorized: false).status == 401)
        #expect(try server.json("DELETE", "/v1/users/3", authorized: false).status == 401)
        #expect(try server.json("GET", "/v1/users").status == 200)
        // Who is registered, and the trainings, are not the app's public model.
        for path in ["/v1/users", "/v1/users/3", "/v1/training", "/v1/training/1"] {
            #expect(try server.json("GET", path, authorized: false).status == 401, "\(path)")
        }
        #expect(try server.json("GET", "/healthz", authorized: false).status == 200)
        #expect(try server.json("GET", "/v1/models", authorized: false).status == 200)
        #expect(!FileManager.default.fileExists(atPath: data.appendingPathComponent("users.json").path))
        // Reads of the model stay open.
        #expect(try server.json("GET", "/v1/model", authorized: false).status == 404)
        #expect(try server.json("POST", "/v1/users", "{\"name\": \"Ada\"}").status == 201)
        // An anonymous upload is refused on its headers: curl, waiting for "100 Continue", sends none of
        // its 20 MB (the server once buffered whole uploads before checking the token).
        let big = data.deletingLastPathComponent().appendingPathComponent("big.jpg")
        try Data(repeating: 0xAB, count: 20 << 20).write(to: big)
        for (path, field) in [("/v1/users/3/photos", "photos"), ("/v1/recognize", "photo")] {
            let result = try ProcessRunner.run(
                "/usr/bin/curl",
                [
                    "-sS", "-o", "/dev/null", "-w", "%{http_code} %{size_upload}", "-H", "Expect: 100-continue",
                    "--expect100-timeout", "30", "-F", "\(field)=@\(big.path)", server.origin + path,
                ])
            let parts = result.standardOutput.split(separator: " ").compactMap { Int($0) }
            #expect(parts.count == 2 && parts[0] == 401, "\(path): \(result.standardOutput) \(result.standardError)")
            #expect(parts.count == 2 && parts[1] < 1 << 20, "\(path): \(parts) bytes sent of \(20 << 20)")
        }
    }

    /// Other sites' pages cannot use a browser to reach the server: a write with a foreign Origin is
    /// refused with or without a token, and without a token a Host that is not a loopback name (DNS
    /// rebinding) is refused for reads too; the server's own origin and clients without one pass.
    @Test func foreignPagesCannotWrite() throws {
        let (_, data, models) = try Self.folders(users: 1, perUser: 5)
        defer { try? FileManager.default.removeItem(at: data.deletingLastPathComponent()) }
        for token in [nil, Self.token] {
            let server = try Server(data: data, models: models, token: token)
            defer { server.kill() }
            let body = ["--data-binary", "{\"name\": \"Planted\"}", "-H", "Content-Type: application/json"]
            let foreign = try server.curl("POST", "/v1/users", body + ["-H", "Origin: https://evil.example"])
            #expect(foreign.status == 403, "token \(token ?? "none")")
            #expect(String(decoding: foreign.body, as: UTF8.self).contains("another site"))
            let opaque = try server.curl("POST", "/v1/training", ["-H", "Origin: null"])
            #expect(opaque.status == 403)
            // Another site's page cannot log the admin out either; it can only log in with the token.
            let logout = try server.curl("POST", "/logout", ["-H", "Origin: https://evil.example"])
            #expect(logout.status == 403 && logout.headers["set-cookie"] == nil, "\(logout.headers)")
            let login = try server.curl(
                "POST", "/login", ["--data-urlencode", "token=\(Self.token)", "-H", "Origin: https://evil.example"],
                authorized: false)
            #expect(login.status == 303, "token \(token ?? "none")")
            let own = try server.curl("POST", "/v1/users", body + ["-H", "Origin: \(server.origin)"])
            #expect(own.status == 201, "\(String(decoding: own.body, as: UTF8.self))")
            let rebound = try server.curl("GET", "/v1/users", ["-H", "Host: evil.example:\(server.port)"])
            #expect(rebound.status == (token == nil ? 403 : 200), "token \(token ?? "none")")
            #expect(try server.curl("GET", "/v1/users", ["-H", "Host: localhost:\(server.port)"]).status == 200)
        }
        let users = try String(contentsOf: data.appendingPathComponent("users.json"), encoding: .utf8)
        #expect(users.components(separatedBy: "Planted").count == 3, "two planted by the server's own origin only")
    }

    /// Ten wrong tokens from one address within a minute: the next try of the `--token-file` token,
    /// right or wrong, is 429 with Retry-After, and so is the login form (even with a scoped bearer),
    /// while requests without a secret are not counted and the app's open reads still answer. A live
    /// scoped token and the admin cookie, secrets made with 256 bits the server drew, still pass:
    /// others on the same address cannot lock the app's phones or the admin's browser out.
    @Test func wrongTokensAreThrottled() throws {
        let (_, data, models) = try Self.folders(users: 1, perUser: 5)
        defer { try? FileManager.default.removeItem(at: data.deletingLastPathComponent()) }
        let server = try Server(data: data, models: models)
        defer { server.kill() }
        for _ in 0..<12 { #expect(try server.json("GET", "/v1/users", authorized: false).status == 401) }
        #expect(try server.json("GET", "/v1/users").status == 200)
        let created = try server.json("POST", "/v1/tokens", "{\"name\": \"kiosk\", \"role\": \"enrol\"}")
        let scoped = try #require(created.object["secret"] as? String, "\(created.object)")
        let login = try server.curl("POST", "/login", ["--data-urlencode", "token=\(Self.token)"], authorized: false)
        let session = try #require(login.headers["set-cookie"]?.split(separator: ";").first.map(String.init))
        for attempt in 0..<10 {
            let wrong = try server.curl(
                "GET", "/v1/users", ["-H", "Authorization: Bearer wrong-token-\(attempt)-0123456789"], authorized: false
            )
            #expect(wrong.status == 401, "attempt \(attempt)")
        }
        let locked = try server.curl("GET", "/v1/users")
        let object = try JSONSerialization.jsonObject(with: locked.body) as? [String: Any] ?? [:]
        #expect(locked.status == 429, "\(object)")
        #expect((1...60).contains(Int(locked.headers["retry-after"] ?? "") ?? 0), "\(locked.headers)")
        #expect((object["error"] as? String)?.contains("--token-file") == true, "\(object)")
        let relogin = try server.curl("POST", "/login", ["--data-urlencode", "token=\(Self.token)"], authorized: false)
        #expect(relogin.status == 429)
        let stillWrong = try server.curl(
            "GET", "/v1/users", ["-H", "Authorization: Bearer wrong-token-after-0123456789"], authorized: false)
        #expect(stillWrong.status == 429, "a wrong token is not even checked while locked")
        let enrol = try server.curl(
            "POST", "/v1/users",
            [
                "-H", "Authorization: Bearer \(scoped)", "-H", "Content-Type: application/json", "--data-binary",
                "{\"name\": \"Ada\"}",
            ], authorized: false)
        #expect(enrol.status == 201, "a live scoped token passes the lockout")
        #expect(try server.curl("GET", "/", ["-H", "Cookie: \(session)"], authorized: false).status == 200)
        let forged = "facetrain_admin=" + String(repeating: "a", count: 64)
        #expect(try server.curl("GET", "/", ["-H", "Cookie: \(forged)"], authorized: false).status == 429)
        let guess = try server.curl(
            "POST", "/login",
            ["-H", "Authorization: Bearer \(scoped)", "--data-urlencode", "token=a-guess-of-the-admin-token"],
            authorized: false)
        #expect(guess.status == 429, "a scoped bearer does not open the login form to guesses")
        #expect(try server.json("GET", "/v1/model", authorized: false).status == 404)
        #expect(try server.json("GET", "/healthz", authorized: false).status == 200)
    }

    /// `--listen [::1]:0`: the same API over IPv6 loopback, announced with a bracketed URL.
    @Test func servesOverIPv6Loopback() throws {
        let (_, data, models) = try Self.folders(users: 1, perUser: 5)
        defer { try? FileManager.default.removeItem(at: data.deletingLastPathComponent()) }
        let server = try Server(data: data, models: models, host: "::1")
        defer { server.kill() }
        #expect(server.process.standardError.contains("http://[::1]:\(server.port)"))
        #expect(try server.json("GET", "/healthz", authorized: false).status == 200)
        #expect(try server.json("POST", "/v1/users", "{\"name\": \"Ada\"}").status == 201)
        #expect(try server.json("GET", "/v1/users", authorized: false).status == 401)
        let open = try CLIRunner.run(["serve", "--data", data.path, "--models", models.path, "--listen", "[::]:0"])
        #expect(open.status == 64 && open.standardError.contains("--token-file"), "\(open.standardError)")
        let unbracketed = try CLIRunner.run([
            "serve", "--data", data.path, "--models", models.path, "--listen", "::1:0",
        ])
        #expect(unbracketed.status == 64 && unbracketed.standardError.contains("[::1]:8080"))
    }

    @Test func nonLoopbackNeedsATokenAndInsecureHTTP() throws {
        let (_, data, models) = try Self.folders(users: 1, perUser: 5)
        defer { try? FileManager.default.removeItem(at: data.deletingLastPathComponent()) }
        let open = try CLIRunner.run(["serve", "--data", data.path, "--models", models.path, "--listen", "0.0.0.0:0"])
        #expect(open.status == 64 && open.standardError.contains("--token-file"), "\(open.standardError)")
        let tokenFile = data.deletingLastPathComponent().appendingPathComponent("token")
        try Data(Self.token.utf8).write(to: tokenFile)
        let plain = try CLIRunner.run([
            "serve", "--data", data.path, "--models", models.path, "--listen", "0.0.0.0:0", "--token-file",
            tokenFile.path,
        ])
        #expect(plain.status == 64 && plain.standardError.contains("--insecure-http"), "\(plain.standardError)")
        try Data("short".utf8).write(to: tokenFile)
        let short = try CLIRunner.run([
            "serve", "--data", data.path, "--models", models.path, "--token-file", tokenFile.path,
        ])
        #expect(short.status == 64 && short.standardError.contains("at least 16"), "\(short.standardError)")
    }

    @Test func badUploadsAreRefusedAndLoseNothing() throws {
        let (synth, data, models) = try Self.folders(users: 2, perUser: 6)
        let scratch = data.deletingLastPathComponent()
        defer { try? FileManager.default.removeItem(at: scratch) }
        // The rules of files and sizes, which hold whatever the face check says (on, a faceless
        // 20-megapixel image is refused for its lack of a face: theFaceCheckRejects...).
        let server = try Server(
            data: data, models: models, extra: ["--max-file-mb", "1", "--max-crops", "8", "--face-check", "off"])
        defer { server.kill() }
        let id = try #require(try server.json("POST", "/v1/users", "{\"name\": \"Ada\"}").object["id"] as? Int)
        let good = try Self.crops(synth, user: 3)

        let text = scratch.appendingPathComponent("notes.jpg")
        try Data("these are not pixels\n".utf8).write(to: text)
        let notImage = try server.upload(id, [text])
        #expect(notImage.status == 422 && notImage.object["status"] as? String == "error", "\(notImage.object)")
        let files = notImage.object["files"] as? [[String: Any]]
        #expect(files?.first?["result"] as? String == "rejected")
        #expect((files?.first?["reason"] as? String)?.contains("not an image") == true, "\(files ?? [])")

        let truncated = scratch.appendingPathComponent("cut.jpg")
        let bytes = try Data(contentsOf: good[0])
        try bytes.prefix(bytes.count / 2).write(to: truncated)
        let mixed = try server.upload(id, [truncated, good[0]])
        #expect(mixed.status == 201 && mixed.object["stored"] as? Int == 1 && mixed.object["rejected"] as? Int == 1)
        let reason = ((mixed.object["files"] as? [[String: Any]])?.first?["reason"] as? String) ?? ""
        #expect(reason.contains("truncated") || reason.contains("corrupt"), "\(reason)")

        let huge = scratch.appendingPathComponent("huge.jpg")
        try (bytes + Data(count: 2 << 20)).write(to: huge)
        let tooLarge = try server.upload(id, [good[1], huge])
        #expect(tooLarge.status == 413 && (tooLarge.object["error"] as? String)?.contains("huge.jpg") == true)

        // A 20-megapixel "crop" (a small file: one flat grey) is refused by its size, not stored.
        let giant = scratch.appendingPathComponent("giant.jpg")
        try JPEGWriter.encode(
            rgb: [UInt8](repeating: 128, count: 5000 * 4000 * 3), width: 5000, height: 4000, quality: 50
        ).write(to: giant)
        let giantAnswer = try server.upload(id, [giant])
        let giantReason = ((giantAnswer.object["files"] as? [[String: Any]])?.first?["reason"] as? String) ?? ""
        #expect(giantAnswer.status == 422 && giantReason.contains("at most 16 megapixels"), "\(giantAnswer.object)")

        let wrongField = try server.upload(id, [good[1]], field: "photo")
        #expect(wrongField.status == 400 && (wrongField.object["error"] as? String)?.contains("'photo'") == true)

        // The same crop cannot be two people's.
        let other = try #require(try server.json("POST", "/v1/users", "{\"name\": \"Bo\"}").object["id"] as? Int)
        let stolen = try server.upload(other, [good[0]])
        #expect(stolen.status == 422, "\(stolen.object)")

        let overLimit = try server.upload(id, Array(good.dropFirst()) + Array(try Self.crops(synth, user: 4).prefix(3)))
        #expect(overLimit.status == 409, "\(overLimit.object)")
        #expect(try server.upload(424242, [good[1]]).status == 404)
        #expect(try server.json("POST", "/v1/users", "{\"nmae\": \"typo\"}").status == 400)
        #expect(try server.json("POST", "/v1/users", "{\"name\": \"a\\u001b[2Jb\"}").status == 400)
        #expect(try server.json("POST", "/v1/users", "[1, 2]").status == 400)

        // Only the one good crop of all this is on disk, and nothing temporary.
        #expect(Self.storedCrops(data, user: id) == ["\(SHA256.hash(bytes)).jpg"])
        #expect(Self.storedCrops(data, user: other).isEmpty)
        let user = try server.json("GET", "/v1/users/\(id)").object["user"] as? [String: Any]
        #expect(user?["crops"] as? Int == 1)
    }

    /// The face check is on by default: an image without a face is rejected with the reason (a
    /// 20-megapixel one too), and a photo with one face is stored as its face's aligned crop.
    @Test func theFaceCheckRejectsFacelessUploadsAndCropsPhotos() throws {
        let (synth, data, models) = try Self.folders(users: 1, perUser: 6)
        let scratch = data.deletingLastPathComponent()
        defer { try? FileManager.default.removeItem(at: scratch) }
        let server = try Server(data: data, models: models)
        defer { server.kill() }
        let id = try #require(try server.json("POST", "/v1/users", "{\"name\": \"Ada\"}").object["id"] as? Int)

        let blank = scratch.appendingPathComponent("wall.jpg")
        try JPEGWriter.encode(rgb: [UInt8](repeating: 150, count: 80 * 80 * 3), width: 80, height: 80, quality: 90)
            .write(to: blank)
        let giant = scratch.appendingPathComponent("giant.jpg")
        try JPEGWriter.encode(
            rgb: [UInt8](repeating: 128, count: 5000 * 4000 * 3), width: 5000, height: 4000, quality: 50
        ).write(to: giant)
        for faceless in [blank, giant] {
            let refused = try server.upload(id, [faceless])
            #expect(refused.status == 422, "\(refused.object)")
            let file = (refused.object["files"] as? [[String: Any]])?.first
            #expect(file?["refusal"] as? String == "no_face", "\(refused.object)")
            #expect((file?["reason"] as? String)?.contains("no face") == true)
        }

        // One drawn face, enlarged to 144 px, on a 480 x 360 grey photo: a photo, not a crop.
        let face = try ImageDecoder.decode(contentsOf: try Self.crops(synth, user: 3)[0]).converted(channels: 3)
            .resized(width: 144, height: 144)
        var pixels = [UInt8](repeating: 110, count: 480 * 360 * 3)
        for row in 0..<144 {
            for column in 0..<(144 * 3) {
                pixels[((row + 100) * 480 + 160) * 3 + column] = face.pixels[row * 432 + column]
            }
        }
        let photo = scratch.appendingPathComponent("photo.jpg")
        try JPEGWriter.encode(rgb: pixels, width: 480, height: 360, quality: 92).write(to: photo)
        let stored = try server.upload(id, [photo])
        #expect(stored.status == 201, "\(stored.object)")
        let outcome = try #require((stored.object["files"] as? [[String: Any]])?.first)
        #expect(outcome["cropped"] as? Bool == true, "\(outcome)")
        let name = try #require(outcome["name"] as? String)
        let crop = try ImageDecoder.decode(contentsOf: data.appendingPathComponent("\(id)/\(name)"))
        #expect(crop.width == 128 && crop.height == 128)
        #expect(Self.storedCrops(data, user: id) == [name])
    }

    // MARK: Killed mid-write

    @Test(arguments: ["photo-stored", "user-id-reserved", "user-folder-moved", "user-folder-created"])
    func killedServerRestartsConsistent(point: String) throws {
        let (synth, data, models) = try Self.folders(users: 2, perUser: 6)
        defer { try? FileManager.default.removeItem(at: data.deletingLastPathComponent()) }
        var server = try Server(data: data, models: models)
        let first = try #require(try server.json("POST", "/v1/users", "{\"name\": \"Ada\"}").object["id"] as? Int)
        let acknowledged = try Self.crops(synth, user: 3)
        #expect(try server.upload(first, Array(acknowledged.prefix(5))).status == 201)
        server.kill()

        // The same folders, now with a server that stops dead at `point`.
        server = try Server(data: data, models: models, pauseAt: point)
        let request = Process()
        request.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        let target = "http://127.0.0.1:\(server.port)"
        let auth = ["-H", "Authorization: Bearer \(Self.token)"]
        switch point {
        case "photo-stored":
            let second = try Self.crops(synth, user: 4)[0]
            request.arguments =
                ["-sS"] + auth + ["-F", "photos=@\(acknowledged[5].path)", "-F", "photos=@\(second.path)"]
                + ["\(target)/v1/users/\(first)/photos"]
        case "user-id-reserved":
            request.arguments = ["-sS"] + auth + ["--data-binary", "{\"name\": \"Half\"}", "\(target)/v1/users"]
        case "user-folder-created":
            // A new person's first upload: killed once their folder exists, before any crop is in it.
            let second = try #require(
                try server.json("POST", "/v1/users", "{\"name\": \"Bea\"}").object["id"] as? Int)
            request.arguments =
                ["-sS"] + auth + ["-F", "photos=@\(try Self.crops(synth, user: 4)[0].path)"]
                + ["\(target)/v1/users/\(second)/photos"]
        default:
            request.arguments = ["-sS", "-X", "DELETE"] + auth + ["\(target)/v1/users/\(first)"]
        }
        request.standardOutput = FileHandle.nullDevice
        request.standardError = FileHandle.nullDevice
        try request.run()
        #expect(server.process.waitFor("paused at \(point)", timeout: 60), "\(server.process.standardError)")
        server.kill()
        request.waitUntilExit()

        server = try Server(data: data, models: models)
        defer { server.kill() }
        let users = try server.json("GET", "/v1/users").object["users"] as? [[String: Any]] ?? []
        let leftovers = try FileManager.default.subpathsOfDirectory(atPath: data.path).filter {
            $0.contains(".tmp-") || $0.contains(".deleted-")
        }
        #expect(leftovers.isEmpty, "\(leftovers)")
        switch point {
        case "photo-stored":
            // The acknowledged five are there, and the one stored before the kill is whole.
            let names = Self.storedCrops(data, user: first)
            for file in acknowledged.prefix(6) {
                #expect(names.contains("\(SHA256.hash(try Data(contentsOf: file))).jpg"))
            }
            #expect(names.count == 6)
            #expect(users.first?["crops"] as? Int == 6)
        case "user-id-reserved":
            #expect(users.compactMap { $0["id"] as? Int } == [first])
            // The id the killed request took is never given out again.
            let next = try server.json("POST", "/v1/users", "{\"name\": \"Next\"}").object["id"] as? Int
            #expect(next == first + 2)
        case "user-folder-created":
            // The empty folder (nothing in it was acknowledged) is gone: an empty user stops every training.
            #expect(users.compactMap { $0["crops"] as? Int } == [5, 0], "\(users)")
            #expect(!FileManager.default.fileExists(atPath: data.appendingPathComponent(String(first + 1)).path))
        default:
            #expect(users.isEmpty, "\(users)")
            #expect(!FileManager.default.fileExists(atPath: data.appendingPathComponent(String(first)).path))
        }
        // Whatever was cut short, the folder is one fit can read (with no user left, there is nothing to check).
        if point != "user-folder-moved" {
            let check = try CLIRunner.run(["data", "check", "--data", data.path])
            #expect(check.status == 0, "\(check.standardOutput)\(check.standardError)")
        }
    }

    /// Polls a job until it is neither queued nor running.
    static func finished(_ server: Server, job: Int) throws -> [String: Any] {
        var record: [String: Any] = [:]
        let deadline = Date().addingTimeInterval(600)
        while Date() < deadline {
            record = try server.json("GET", "/v1/training/\(job)").object["record"] as? [String: Any] ?? [:]
            if let state = record["state"] as? String, !["queued", "running"].contains(state) { break }
            Thread.sleep(forTimeInterval: 0.5)
        }
        return record
    }

    @Test func killedDuringTrainingMarksTheJobFailedAndKeepsTheQueue() throws {
        let (synth, data, models) = try Self.folders(users: 5, perUser: 6)
        defer { try? FileManager.default.removeItem(at: data.deletingLastPathComponent()) }
        var server = try Server(data: data, models: models, pauseAt: "training-running")
        for user in 3...7 {
            let id = try #require(try server.json("POST", "/v1/users", "{\"name\": \"P\(user)\"}").object["id"] as? Int)
            #expect(try server.upload(id, try Self.crops(synth, user: user)).status == 201)
        }
        #expect(try server.json("POST", "/v1/training").object["job"] as? Int == 1)
        #expect(server.process.waitFor("paused at training-running", timeout: 60), "\(server.process.standardError)")
        let running = try server.json("GET", "/v1/training/1").object["record"] as? [String: Any]
        #expect(running?["state"] as? String == "running")
        #expect(try server.json("POST", "/v1/training").object["job"] as? Int == 2)
        // A second request while job 2 waits is the same job: it will read every change anyway.
        #expect(try server.json("POST", "/v1/training").object["job"] as? Int == 2)
        server.kill()

        server = try Server(data: data, models: models)
        defer { server.kill() }
        let interrupted = try server.json("GET", "/v1/training/1").object["record"] as? [String: Any]
        #expect(interrupted?["state"] as? String == "failed")
        #expect((interrupted?["error"] as? String)?.contains("interrupted") == true, "\(interrupted ?? [:])")
        let resumed = try Self.finished(server, job: 2)
        #expect(resumed["state"] as? String == "succeeded" && resumed["version"] as? Int == 1, "\(resumed)")
        #expect(try server.json("GET", "/v1/model").object["version"] as? Int == 1)
    }

    @Test func aTrainingThatCannotRunSaysWhy() throws {
        let (synth, data, models) = try Self.folders(users: 1, perUser: 6)
        defer { try? FileManager.default.removeItem(at: data.deletingLastPathComponent()) }
        let server = try Server(data: data, models: models)
        defer { server.kill() }
        let id = try #require(try server.json("POST", "/v1/users", "{\"name\": \"Few\"}").object["id"] as? Int)
        #expect(try server.upload(id, Array(try Self.crops(synth, user: 3).prefix(2))).status == 201)
        let job = try #require(try server.json("POST", "/v1/training").object["job"] as? Int)
        let record = try Self.finished(server, job: job)
        #expect(record["state"] as? String == "failed", "\(record)")
        #expect((record["error"] as? String)?.contains("at least 5 needed") == true, "\(record)")
        #expect(try server.json("GET", "/v1/model").status == 404)
    }

    /// A data folder filled while the face check was off may hold a crop it refuses: a training
    /// stops on it, naming the file and the reason, and `serve --skip-bad` trains without it.
    @Test func aStoredCropTheCheckRefusesStopsTrainingsUnlessSkipBad() throws {
        let (synth, data, models) = try Self.folders(users: 1, perUser: 6)
        defer { try? FileManager.default.removeItem(at: data.deletingLastPathComponent()) }
        var server = try Server(data: data, models: models)
        let id = try #require(try server.json("POST", "/v1/users", "{\"name\": \"Ada\"}").object["id"] as? Int)
        #expect(try server.upload(id, try Self.crops(synth, user: 3)).status == 201)
        server.kill()
        // Stored as an older server stored every upload, unchecked: a grey wall, no face.
        let wall = try JPEGWriter.encode(
            rgb: [UInt8](repeating: 150, count: 80 * 80 * 3), width: 80, height: 80, quality: 90)
        let planted = data.appendingPathComponent("\(id)/\(SHA256.hash(wall)).jpg")
        try wall.write(to: planted)

        server = try Server(data: data, models: models)
        let stopped = try Self.finished(
            server, job: try #require(try server.json("POST", "/v1/training").object["job"] as? Int))
        server.kill()
        #expect(stopped["state"] as? String == "failed", "\(stopped)")
        let error = stopped["error"] as? String ?? ""
        #expect(error.contains(planted.lastPathComponent) && error.contains("no face"), "\(error)")

        server = try Server(data: data, models: models, extra: ["--skip-bad"])
        defer { server.kill() }
        let trained = try Self.finished(
            server, job: try #require(try server.json("POST", "/v1/training").object["job"] as? Int))
        #expect(trained["state"] as? String == "succeeded", "\(trained)")
        #expect(FileManager.default.fileExists(atPath: planted.path), "skipped, not deleted")
    }

    @Test func concurrentUploadersLoseNothing() throws {
        let (synth, data, models) = try Self.folders(users: 8, perUser: 6)
        defer { try? FileManager.default.removeItem(at: data.deletingLastPathComponent()) }
        let server = try Server(data: data, models: models)
        defer { server.kill() }
        var uploads: [(id: Int, process: Process, output: URL)] = []
        for user in 3...10 {
            let id = try #require(try server.json("POST", "/v1/users", "{\"name\": \"P\(user)\"}").object["id"] as? Int)
            let output = data.deletingLastPathComponent().appendingPathComponent("upload-\(id)")
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
            process.arguments =
                ["-sS", "-o", output.path, "-w", "%{http_code}", "-H", "Authorization: Bearer \(Self.token)"]
                + (try Self.crops(synth, user: user)).flatMap { ["-F", "photos=@\($0.path)"] }
                + ["http://127.0.0.1:\(server.port)/v1/users/\(id)/photos"]
            process.standardOutput = FileHandle.nullDevice
            uploads.append((id, process, output))
        }
        for upload in uploads { try upload.process.run() }
        for upload in uploads {
            upload.process.waitUntilExit()
            let answer = (try? JSONSerialization.jsonObject(with: Data(contentsOf: upload.output))) as? [String: Any]
            #expect(answer?["stored"] as? Int == 6, "\(answer ?? [:])")
            #expect(Self.storedCrops(data, user: upload.id).count == 6)
        }
        let users = try server.json("GET", "/v1/users").object["users"] as? [[String: Any]] ?? []
        #expect(users.map { $0["crops"] as? Int } == Array(repeating: 6, count: 8))
    }
}
