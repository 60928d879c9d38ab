import FaceTrain
import FaceTrainServer
import FaceTrainTestSupport
import Foundation
import Testing

/// A strict reader of Prometheus' text exposition format 0.0.4
/// (https://prometheus.io/docs/instrumenting/exposition_formats/): every sample belongs to a family
/// declared by `# TYPE` before it, a family's lines are contiguous, names, labels, escapes and values
/// are well formed, no sample repeats, and histograms are cumulative with `+Inf` equal to `_count`.
struct PrometheusText {
    struct Sample {
        var name: String
        var labels: [String: String]
        var value: Double
    }

    var types: [String: String] = [:]
    var samples: [Sample] = []

    struct Malformed: Error, CustomStringConvertible {
        var description: String
    }

    init(_ text: String) throws {
        guard text.hasSuffix("\n") else { throw Malformed(description: "the exposition must end with a line feed") }
        var finished: Set<String> = []
        var current: String?
        var seen: Set<String> = []
        func enter(_ family: String, line: Int) throws {
            guard family != current else { return }
            if let current { finished.insert(current) }
            guard !finished.contains(family) else {
                throw Malformed(description: "line \(line): family \(family) appears in two groups")
            }
            current = family
        }
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).dropLast().enumerated() {
            let number = index + 1
            if line.hasPrefix("#") {
                let words = line.split(separator: " ", maxSplits: 3, omittingEmptySubsequences: false).map(String.init)
                guard words.count >= 3, words[0] == "#", Self.isMetricName(words[2]) else {
                    throw Malformed(description: "line \(number): bad comment line '\(line)'")
                }
                if words[1] == "TYPE" {
                    guard words.count == 4, ["counter", "gauge", "histogram", "summary", "untyped"].contains(words[3])
                    else { throw Malformed(description: "line \(number): bad TYPE '\(line)'") }
                    guard types[words[2]] == nil else {
                        throw Malformed(description: "line \(number): second TYPE for \(words[2])")
                    }
                    try enter(words[2], line: number)
                    types[words[2]] = words[3]
                } else if words[1] == "HELP" {
                    try enter(words[2], line: number)
                }
                continue
            }
            guard !line.isEmpty else { throw Malformed(description: "line \(number): empty line") }
            let sample = try Self.sample(String(line), line: number)
            let family = family(of: sample.name)
            guard let type = types[family] else {
                throw Malformed(description: "line \(number): \(sample.name) has no # TYPE before it")
            }
            if type == "counter" && !family.hasSuffix("_total") {
                throw Malformed(description: "line \(number): counter \(family) should end in _total")
            }
            if type != "histogram" && family != sample.name {
                throw Malformed(description: "line \(number): \(sample.name) in \(type) family \(family)")
            }
            try enter(family, line: number)
            let key = sample.name + sample.labels.sorted { $0.key < $1.key }.description
            guard seen.insert(key).inserted else { throw Malformed(description: "line \(number): repeated sample") }
            samples.append(sample)
        }
        try checkHistograms()
    }

    func family(of name: String) -> String {
        for suffix in ["_bucket", "_sum", "_count"] where name.hasSuffix(suffix) {
            let base = String(name.dropLast(suffix.count))
            if types[base] == "histogram" { return base }
        }
        return name
    }

    private func checkHistograms() throws {
        for (family, type) in types where type == "histogram" {
            var series: [[String: String]: [(Double, Double)]] = [:]
            for sample in samples where sample.name == family + "_bucket" {
                guard let bound = sample.labels["le"], let le = Self.number(bound) else {
                    throw Malformed(description: "\(family)_bucket without a numeric le label")
                }
                var labels = sample.labels
                labels["le"] = nil
                series[labels, default: []].append((le, sample.value))
            }
            for (labels, buckets) in series {
                guard buckets.map(\.0) == buckets.map(\.0).sorted(), buckets.last?.0 == .infinity else {
                    throw Malformed(description: "\(family) \(labels): buckets out of order or no +Inf")
                }
                guard zip(buckets, buckets.dropFirst()).allSatisfy({ $0.1 <= $1.1 }) else {
                    throw Malformed(description: "\(family) \(labels): bucket counts are not cumulative")
                }
                guard value(family + "_count", labels) == buckets.last?.1, value(family + "_sum", labels) != nil else {
                    throw Malformed(description: "\(family) \(labels): _count differs from the +Inf bucket or no _sum")
                }
            }
        }
    }

    /// The sample with exactly these labels.
    func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
        samples.first { $0.name == name && $0.labels == labels }?.value
    }

    /// Sum over every sample of `name` whose labels include `labels`.
    func total(_ name: String, _ labels: [String: String] = [:]) -> Double {
        samples.filter { sample in sample.name == name && labels.allSatisfy { sample.labels[$0.key] == $0.value } }
            .map(\.value).reduce(0, +)
    }

    static func isMetricName(_ text: String) -> Bool {
        text.wholeMatch(of: /[a-zA-Z_:][a-zA-Z0-9_:]*/) != nil
    }

    static func number(_ text: String) -> Double? {
        switch text {
        case "+Inf": return .infinity
        case "-Inf": return -.infinity
        case "NaN": return .nan
        default: return text.wholeMatch(of: /[-+]?[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?/) != nil ? Double(text) : nil
        }
    }

    private static func sample(_ line: String, line number: Int) throws -> Sample {
        var rest = Substring(line)
        let name = String(rest.prefix { $0.isLetter || $0.isNumber || $0 == "_" || $0 == ":" })
        guard isMetricName(name) else { throw Malformed(description: "line \(number): bad metric name") }
        rest = rest.dropFirst(name.count)
        var labels: [String: String] = [:]
        if rest.first == "{" {
            rest = rest.dropFirst()
            while rest.first != "}" {
                let label = String(rest.prefix { $0.isLetter || $0.isNumber || $0 == "_" })
                guard label.wholeMatch(of: /[a-zA-Z_][a-zA-Z0-9_]*/) != nil, labels[label] == nil else {
                    throw Malformed(description: "line \(number): bad or repeated label name")
                }
                rest = rest.dropFirst(label.count)
                guard rest.hasPrefix("=\"") else { throw Malformed(description: "line \(number): label without =\"") }
                rest = rest.dropFirst(2)
                var value = ""
                while true {
                    guard let character = rest.first else {
                        throw Malformed(description: "line \(number): unterminated label value")
                    }
                    rest = rest.dropFirst()
                    if character == "\"" { break }
                    if character == "\\" {
                        switch rest.first {
                        case "\\": value.append("\\")
                        case "\"": value.append("\"")
                        case "n": value.append("\n")
                        default: throw Malformed(description: "line \(number): bad escape in a label value")
                        }
                        rest = rest.dropFirst()
                    } else {
                        value.append(character)
                    }
                }
                labels[label] = value
                if rest.first == "," {
                    rest = rest.dropFirst()
                } else if rest.first != "}" {
                    throw Malformed(description: "line \(number): labels not separated by ,")
                }
            }
            rest = rest.dropFirst()
        }
        let fields = rest.split(separator: " ", omittingEmptySubsequences: false)
        guard rest.first == " ", (2...3).contains(fields.count), fields[0].isEmpty,
            let value = Self.number(String(fields[1])), fields.count == 2 || Int64(fields[2]) != nil
        else { throw Malformed(description: "line \(number): bad value in '\(line)'") }
        return Sample(name: name, labels: labels, value: value)
    }
}

extension ServeCommandTests {
    /// Registers `count` users (synthetic users 3...) and uploads their crops; the ids.
    static func enroll(_ server: Server, _ synth: URL, count: Int, first: Int = 3) throws -> [Int] {
        try (first..<(first + count)).map { user in
            let id = try #require(
                try server.json("POST", "/v1/users", "{\"name\": \"Person \(user)\"}").object["id"] as? Int)
            #expect(try server.upload(id, try Self.crops(synth, user: user)).status == 201)
            return id
        }
    }

    static func train(_ server: Server) throws -> [String: Any] {
        let job = try #require(try server.json("POST", "/v1/training").object["job"] as? Int)
        return try Self.finished(server, job: job)
    }

    static func scrape(_ server: Server) throws -> PrometheusText {
        let answer = try server.curl("GET", "/metrics")
        #expect(answer.status == 200)
        #expect(answer.headers["content-type"]?.hasPrefix("text/plain; version=0.0.4") == true)
        return try PrometheusText(String(decoding: answer.body, as: UTF8.self))
    }

    // MARK: /metrics

    @Test func metricsParseAndCount() throws {
        let (synth, data, models) = try Self.folders(users: 5, perUser: 6)
        let scratch = data.deletingLastPathComponent()
        defer { try? FileManager.default.removeItem(at: scratch) }
        let server = try Server(data: data, models: models)
        defer { server.kill() }
        #expect(try server.curl("GET", "/metrics", authorized: false).status == 401)

        let before = try Self.scrape(server)
        #expect(before.types["facetrain_http_requests_total"] == "counter")
        #expect(before.types["facetrain_http_request_duration_seconds"] == "histogram")
        #expect(before.value("facetrain_published_model_version") == 0)
        #expect(before.value("facetrain_uploaded_files_total", ["result": "stored"]) == 0)
        #expect(before.value("facetrain_trainings_total", ["outcome": "succeeded"]) == 0)
        // The refused scrape is counted under its route, with its status.
        #expect(
            before.value("facetrain_http_requests_total", ["route": "/metrics", "method": "GET", "status": "401"]) == 1)

        let ids = try Self.enroll(server, synth, count: 5)
        let text = scratch.appendingPathComponent("notes.jpg")
        try Data("not pixels".utf8).write(to: text)
        #expect(try server.upload(ids[0], [text, try Self.crops(synth, user: 3)[0]]).status == 200)
        for _ in 0..<2 { #expect(try server.json("GET", "/v1/users/\(ids[1])").status == 200) }
        #expect(try server.json("GET", "/v1/users/424242").status == 404)
        #expect(try server.curl("GET", "/no/such/route/\(UUID().uuidString)").status == 404)

        let after = try Self.scrape(server)
        let requests = "facetrain_http_requests_total"
        #expect(after.value(requests, ["route": "/v1/users/{id}", "method": "GET", "status": "200"]) == 2)
        #expect(after.value(requests, ["route": "/v1/users/{id}", "method": "GET", "status": "404"]) == 1)
        #expect(after.value(requests, ["route": "/v1/users", "method": "POST", "status": "201"]) == 5)
        #expect(after.value(requests, ["route": "/v1/users/{id}/photos", "method": "POST", "status": "201"]) == 5)
        #expect(after.value(requests, ["route": "unmatched", "method": "GET", "status": "404"]) == 1)
        // Route templates, never raw paths: no label carries an id or the random path.
        let numbered = after.samples.compactMap(\.labels["route"]).filter { $0.contains(/\/[0-9]/) }
        #expect(numbered.isEmpty, "\(numbered)")
        let histogram = "facetrain_http_request_duration_seconds"
        #expect(after.value(histogram + "_count", ["route": "/v1/users/{id}"]) == 3)
        #expect(after.value(histogram + "_bucket", ["route": "/v1/users/{id}", "le": "+Inf"]) == 3)
        #expect(after.value("facetrain_uploaded_files_total", ["result": "stored"]) == 30)
        #expect(after.value("facetrain_uploaded_files_total", ["result": "duplicate"]) == 1)
        #expect(after.value("facetrain_uploaded_files_total", ["result": "rejected"]) == 1)
        #expect(after.value("facetrain_users") == 5 && after.value("facetrain_user_crops") == 30)

        let record = try Self.train(server)
        #expect(record["state"] as? String == "succeeded", "\(record)")
        let trained = try Self.scrape(server)
        #expect(trained.value("facetrain_trainings_total", ["outcome": "succeeded"]) == 1)
        #expect(trained.value("facetrain_published_model_version") == 1)
        #expect(trained.value("facetrain_trainings_running") == 0)
        // Every earlier scrape is in this one's counts.
        #expect(trained.total(requests, ["route": "/metrics"]) == 3)
    }

    // MARK: Publishing over HTTP

    @Test func publishAndRollbackGoThroughTheGate() throws {
        let (synth, data, models) = try Self.folders(users: 5, perUser: 6)
        defer { try? FileManager.default.removeItem(at: data.deletingLastPathComponent()) }
        let server = try Server(data: data, models: models)
        defer { server.kill() }
        _ = try Self.enroll(server, synth, count: 5)
        for version in 1...2 {
            let record = try Self.train(server)
            #expect(record["state"] as? String == "succeeded" && record["version"] as? Int == version, "\(record)")
        }
        #expect(try server.json("GET", "/v1/model").object["version"] as? Int == 2)

        #expect(try server.json("POST", "/v1/models/1/rollback", authorized: false).status == 401)
        #expect(try server.json("POST", "/v1/models/2/publish", authorized: false).status == 401)
        #expect(try server.json("GET", "/v1/models/1/rollback").status == 405)

        let back = try server.json("POST", "/v1/models/1/rollback")
        #expect(back.status == 200 && back.object["version"] as? Int == 1, "\(back.object)")
        #expect(back.object["previousVersion"] as? Int == 2)
        #expect(try server.json("GET", "/v1/model").object["version"] as? Int == 1)
        let pointer =
            try JSONSerialization.jsonObject(
                with: Data(contentsOf: models.appendingPathComponent("latest.json"))) as? [String: Any]
        #expect(pointer?["version"] as? Int == 1 && pointer?["action"] as? String == "rollback")

        let notEarlier = try server.json("POST", "/v1/models/1/rollback")
        #expect(notEarlier.status == 409 && (notEarlier.object["error"] as? String)?.contains("publish") == true)
        let older = try server.json("POST", "/v1/models/1/publish")
        #expect(older.status == 200 && older.object["unchanged"] as? Bool == true, "\(older.object)")
        #expect(try server.json("POST", "/v1/models/9/publish").status == 404)
        #expect(try server.json("POST", "/v1/models/9/rollback").status == 404)

        let forward = try server.json("POST", "/v1/models/2/publish")
        #expect(forward.status == 200 && forward.object["version"] as? Int == 2, "\(forward.object)")
        #expect(try server.json("GET", "/v1/model").object["version"] as? Int == 2)
        let backwards = try server.json("POST", "/v1/models/1/publish")
        #expect(backwards.status == 409 && (backwards.object["error"] as? String)?.contains("rollback") == true)

        // The gate's refusals come back as they are: this test bundle has no Core ML file for the app.
        let written = try CLIRunner.run(
            ["_test-write-bundle", "--models", models.path, "--users", "3,4,5,6,7"],
            environment: ["FACETRAIN_TEST_COMMANDS": "1"])
        #expect(written.status == 0, "\(written.standardError)")
        let unevaluated = try server.json("POST", "/v1/models/3/publish")
        #expect(unevaluated.status == 409, "\(unevaluated.object)")
        #expect(
            (unevaluated.object["error"] as? String)?.hasPrefix(
                "refused to publish version 3: it has no FaceClassifier")
                == true, "\(unevaluated.object)")
        #expect(try server.json("GET", "/v1/model").object["version"] as? Int == 2)

        // Verification is part of the gate: a tampered bundle is refused, and latest.json stays.
        let onnx = models.appendingPathComponent("1/model.onnx")
        var bytes = try Data(contentsOf: onnx)
        bytes[bytes.count / 2] ^= 0xFF
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: onnx.path)
        try bytes.write(to: onnx)
        let tampered = try server.json("POST", "/v1/models/1/rollback")
        #expect(
            tampered.status == 409 && (tampered.object["error"] as? String)?.contains("verification") == true,
            "\(tampered.object)")
        #expect(try server.json("GET", "/v1/model").object["version"] as? Int == 2)
    }

    @Test func serveGateOptionsRefuseOverHTTP() throws {
        let (synth, data, models) = try Self.folders(users: 5, perUser: 6)
        defer { try? FileManager.default.removeItem(at: data.deletingLastPathComponent()) }
        let bad = try CLIRunner.run(["serve", "--data", data.path, "--models", models.path, "--min-accuracy", "2"])
        #expect(bad.status == 64 && bad.standardError.contains("--min-accuracy"), "\(bad.standardError)")
        let server = try Server(data: data, models: models, extra: ["--min-accuracy", "1"])
        defer { server.kill() }
        _ = try Self.enroll(server, synth, count: 5)
        let record = try Self.train(server)
        let accuracy = try #require(record["userAccuracy"] as? Double)
        if accuracy < 1 {
            // The training's publish and the route's are the same gate with the same reason.
            #expect(record["state"] as? String == "refused", "\(record)")
            #expect((record["error"] as? String)?.contains("below --min-accuracy 1") == true, "\(record)")
            let again = try server.json("POST", "/v1/models/1/publish")
            #expect(
                again.status == 409 && (again.object["error"] as? String)?.contains("below --min-accuracy 1") == true)
            #expect(try server.json("GET", "/v1/model").status == 404)
        } else {
            #expect(record["state"] as? String == "succeeded", "\(record)")
        }
    }

    // MARK: Range

    @Test func rangeRequestsOnDownloads() throws {
        let (synth, data, models) = try Self.folders(users: 5, perUser: 6)
        defer { try? FileManager.default.removeItem(at: data.deletingLastPathComponent()) }
        let server = try Server(data: data, models: models)
        defer { server.kill() }
        _ = try Self.enroll(server, synth, count: 5)
        #expect(try Self.train(server)["state"] as? String == "succeeded")
        let path = "/v1/models/1/FaceClassifier.mlmodel"
        let whole = try server.curl("GET", path, authorized: false)
        #expect(whole.status == 200 && whole.headers["accept-ranges"] == "bytes")
        let size = whole.body.count
        let etag = try #require(whole.headers["etag"])

        let head = try server.curl("GET", path, ["-r", "0-99"], authorized: false)
        #expect(head.status == 206 && head.body == whole.body.prefix(100))
        #expect(head.headers["content-range"] == "bytes 0-99/\(size)")
        #expect(head.headers["content-length"] == "100" && head.headers["etag"] == etag)
        let middle = try server.curl("GET", path, ["-H", "Range: bytes=100-"], authorized: false)
        #expect(middle.status == 206 && middle.body == whole.body.dropFirst(100))
        #expect(middle.headers["content-range"] == "bytes 100-\(size - 1)/\(size)")
        let tail = try server.curl("GET", path, ["-r", "-10"], authorized: false)
        #expect(tail.status == 206 && tail.body == whole.body.suffix(10))
        // A resumed download: the rest of what a cut-off transfer left, reassembled byte for byte.
        let past = try server.curl("GET", path, ["-r", "\(size - 5)-\(size + 1000)"], authorized: false)
        #expect(past.status == 206 && past.headers["content-range"] == "bytes \(size - 5)-\(size - 1)/\(size)")

        let unsatisfiable = try server.curl("GET", path, ["-H", "Range: bytes=\(size)-"], authorized: false)
        #expect(unsatisfiable.status == 416 && unsatisfiable.headers["content-range"] == "bytes */\(size)")
        let error = (try? JSONSerialization.jsonObject(with: unsatisfiable.body)) as? [String: Any]
        #expect(error?["status"] as? String == "error" && (error?["error"] as? String)?.contains("bytes=0-") == true)
        #expect(try server.curl("GET", path, ["-H", "Range: bytes=-0"], authorized: false).status == 416)

        // Several ranges, another unit, nonsense, or If-Range naming another file: the whole file.
        for header in ["Range: bytes=0-1,5-6", "Range: items=0-1", "Range: bytes=9-3", "Range: bytes=x-"] {
            let answer = try server.curl("GET", path, ["-H", header], authorized: false)
            #expect(answer.status == 200 && answer.body == whole.body, "\(header)")
        }
        let stale = try server.curl("GET", path, ["-r", "0-9", "-H", "If-Range: \"stale\""], authorized: false)
        #expect(stale.status == 200 && stale.body.count == size)
        let current = try server.curl("GET", path, ["-r", "0-9", "-H", "If-Range: \(etag)"], authorized: false)
        #expect(current.status == 206 && current.body.count == 10)
    }

    // MARK: Training after a quiet period

    @Test func changesQueueATrainingAfterAQuietPeriod() throws {
        let (synth, data, models) = try Self.folders(users: 6, perUser: 6)
        defer { try? FileManager.default.removeItem(at: data.deletingLastPathComponent()) }
        let server = try Server(data: data, models: models, extra: ["--train-after", "2"])
        defer { server.kill() }
        func jobs() throws -> [[String: Any]] {
            try server.json("GET", "/v1/training").object["jobs"] as? [[String: Any]] ?? []
        }
        _ = try Self.enroll(server, synth, count: 5)
        // Each change restarted the quiet period.
        #expect(try jobs().isEmpty)
        var record: [String: Any] = [:]
        let deadline = Date().addingTimeInterval(120)
        while Date() < deadline, record["state"] as? String != "succeeded" {
            Thread.sleep(forTimeInterval: 0.5)
            if let job = try jobs().first?["job"] as? Int { record = try Self.finished(server, job: job) }
        }
        #expect(record["state"] as? String == "succeeded" && record["version"] as? Int == 1, "\(record)")
        #expect(try jobs().count == 1)

        // A person still uploading (fewer crops than --min-images) holds the automatic training back.
        let late = try #require(try server.json("POST", "/v1/users", "{\"name\": \"Late\"}").object["id"] as? Int)
        let crops = try Self.crops(synth, user: 8)
        #expect(try server.upload(late, Array(crops.prefix(2))).status == 201)
        Thread.sleep(forTimeInterval: 4)
        #expect(try jobs().count == 1)
        #expect(try server.upload(late, Array(crops.dropFirst(2))).status == 201)
        let second = Date().addingTimeInterval(120)
        var model: [String: Any] = [:]
        while Date() < second, (model["users"] as? [Any])?.count != 6 {
            Thread.sleep(forTimeInterval: 0.5)
            model = try server.json("GET", "/v1/model").object
        }
        #expect(model["version"] as? Int == 2 && (model["users"] as? [Any])?.count == 6, "\(model)")
    }

    @Test func trainAfterOptionIsChecked() throws {
        let (_, data, models) = try Self.folders(users: 1, perUser: 5)
        defer { try? FileManager.default.removeItem(at: data.deletingLastPathComponent()) }
        for bad in ["-3", "soon", "100000"] {
            let result = try CLIRunner.run([
                "serve", "--data", data.path, "--models", models.path, "--train-after", bad,
            ])
            #expect(result.status == 64 && result.standardError.contains("--train-after"), "\(result.standardError)")
        }
    }

    // MARK: --private

    @Test func privateServerClosesTheModelReads() throws {
        let (synth, data, models) = try Self.folders(users: 5, perUser: 6)
        defer { try? FileManager.default.removeItem(at: data.deletingLastPathComponent()) }
        let open = try CLIRunner.run(["serve", "--data", data.path, "--models", models.path, "--private"])
        #expect(open.status == 64 && open.standardError.contains("--token-file"), "\(open.standardError)")

        let server = try Server(data: data, models: models, extra: ["--private"])
        defer { server.kill() }
        _ = try Self.enroll(server, synth, count: 5)
        #expect(try Self.train(server)["state"] as? String == "succeeded")
        for path in ["/v1/model", "/v1/models", "/v1/models/1/FaceClassifier.mlmodel", "/v1/models/1/manifest.json"] {
            let closed = try server.curl("GET", path, authorized: false)
            #expect(closed.status == 401 && closed.headers["www-authenticate"] == "Bearer", "\(path)")
            #expect(try server.curl("GET", path).status == 200, "\(path)")
        }
        #expect(try server.json("GET", "/healthz", authorized: false).status == 200)
    }

    // MARK: TLS

    /// A self-signed certificate for 127.0.0.1 and its key, made by openssl.
    /// A server over HTTPS with a fresh self-signed certificate that its curl trusts.
    static func httpsServer(data: URL, models: URL) throws -> Server {
        let (certificate, key) = try Self.selfSigned(in: data.deletingLastPathComponent(), name: "server")
        return try Server(
            data: data, models: models, extra: ["--cert", certificate.path, "--key", key.path],
            certificateAuthority: certificate)
    }

    static func selfSigned(in folder: URL, name: String) throws -> (certificate: URL, key: URL) {
        let certificate = folder.appendingPathComponent("\(name).pem")
        let key = folder.appendingPathComponent("\(name)-key.pem")
        let result = try CLIRunner.runProgram(
            "/usr/bin/openssl",
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
                "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key.path, "-out",
                certificate.path,
            ])
        #expect(result.status == 0, "\(result.standardError)")
        return (certificate, key)
    }

    @Test func tlsWithACertificateAndKey() throws {
        #expect(TLSCredentials.isSupported, "Debian's libmicrohttpd is built with GnuTLS")
        let (synth, data, models) = try Self.folders(users: 1, perUser: 5)
        let scratch = data.deletingLastPathComponent()
        defer { try? FileManager.default.removeItem(at: scratch) }
        let server = try Self.httpsServer(data: data, models: models)
        defer { server.kill() }
        #expect(server.process.standardError.contains("listening on https://127.0.0.1:"))
        #expect(try server.json("GET", "/healthz").status == 200)
        let id = try #require(try server.json("POST", "/v1/users", "{\"name\": \"Tls\"}").object["id"] as? Int)
        #expect(try server.upload(id, try Self.crops(synth, user: 3)).status == 201)
        // A client that does not trust the certificate is turned away by curl, and plain HTTP gets no answer.
        let untrusted = try CLIRunner.runProgram("/usr/bin/curl", ["-sS", "\(server.origin)/healthz"])
        #expect(untrusted.status != 0)
        let plain = try CLIRunner.runProgram(
            "/usr/bin/curl",
            ["-sS", "-m", "5", "-o", "/dev/null", "-w", "%{http_code}", "http://127.0.0.1:\(server.port)/healthz"])
        #expect(plain.standardOutput != "200")
        // The admin cookie is Secure over HTTPS.
        let login = try server.curl("POST", "/login", ["--data-urlencode", "token=\(Self.token)"], authorized: false)
        #expect(login.status == 303 && login.headers["set-cookie"]?.contains("; Secure") == true)
    }

    @Test func badCertificatesAreClearErrors() throws {
        let (_, data, models) = try Self.folders(users: 1, perUser: 5)
        let scratch = data.deletingLastPathComponent()
        defer { try? FileManager.default.removeItem(at: scratch) }
        let (certificate, key) = try Self.selfSigned(in: scratch, name: "one")
        let (_, otherKey) = try Self.selfSigned(in: scratch, name: "two")
        let garbage = scratch.appendingPathComponent("garbage.pem")
        try Data("not a certificate\n".utf8).write(to: garbage)
        let serve = [
            "serve", "--data", data.path, "--models", models.path, "--listen", "127.0.0.1:0", "--train-after", "off",
        ]

        let onlyCert = try CLIRunner.run(serve + ["--cert", certificate.path])
        #expect(onlyCert.status == 64 && onlyCert.standardError.contains("--cert and --key go together"))
        let notPEM = try CLIRunner.run(serve + ["--cert", garbage.path, "--key", key.path])
        #expect(
            notPEM.status == 64 && notPEM.standardError.contains("is not a PEM certificate"), "\(notPEM.standardError)")
        let keyAsCert = try CLIRunner.run(serve + ["--cert", key.path, "--key", key.path])
        #expect(keyAsCert.status == 64 && keyAsCert.standardError.contains("is not a PEM certificate"))
        let missing = try CLIRunner.run(
            serve + ["--cert", certificate.path, "--key", scratch.appendingPathComponent("nope").path])
        #expect(missing.status == 64 && missing.standardError.contains("cannot read --key"))
        let mismatched = try CLIRunner.run(serve + ["--cert", certificate.path, "--key", otherKey.path])
        #expect(
            mismatched.status != 0 && mismatched.standardError.contains("GnuTLS refused"), "\(mismatched.standardError)"
        )
    }

    @Test func nonLoopbackWithTLSNeedsNoInsecureFlag() throws {
        let job = FitJob(
            data: URL(fileURLWithPath: "/nonexistent/data"), models: URL(fileURLWithPath: "/nonexistent/models"),
            configuration: FitConfiguration(), loadOptions: DataLoadOptions(), base: nil)
        var configuration = ServerConfiguration(data: job.data, models: job.models, fitJob: job)
        configuration.host = "192.0.2.1"
        configuration.token = Self.token
        #expect(configuration.refusal()?.contains("--cert FILE --key FILE") == true)
        configuration.tls = TLSCredentials(certificate: Data(), key: Data())
        #expect(configuration.refusal() == nil)
        configuration.token = nil
        #expect(configuration.refusal()?.contains("--token-file") == true)
        // IPv6: only ::1 (and IPv4 loopback mapped into IPv6) counts as loopback.
        for host in ["::", "2001:db8::1", "fe80::1", "::ffff:192.0.2.1"] {
            configuration.host = host
            #expect(configuration.refusal()?.contains("--token-file") == true, "\(host)")
        }
        for host in ["::1", "::ffff:127.0.0.1", "127.0.0.1", "127.1.2.3"] {
            configuration.host = host
            #expect(configuration.refusal() == nil, "\(host)")
        }
    }

    @Test func listenAddressesParse() {
        #expect(ServerConfiguration.parseListen("127.0.0.1:8080")! == ("127.0.0.1", 8080))
        #expect(ServerConfiguration.parseListen("[::1]:0")! == ("::1", 0))
        #expect(ServerConfiguration.parseListen("[2001:db8::7]:443")! == ("2001:db8::7", 443))
        for bad in [
            "::1:8080", "[::1]", "localhost:8080", "127.0.0.1", "127.0.0.1:70000", "[127.0.0.1]:80", "[::g]:80",
        ] {
            #expect(ServerConfiguration.parseListen(bad) == nil, "\(bad)")
        }
        #expect(ServerConfiguration.urlHost("::1") == "[::1]")
        #expect(ServerConfiguration.urlHost("127.0.0.1") == "127.0.0.1")
    }

    /// The throttle's window on a clock the test moves: locked after `limit` failures, free again when
    /// the window ends, each address on its own, and memory bounded under a flood of addresses.
    @Test func authenticationThrottleCountsPerAddressWithinItsWindow() {
        final class Clock: @unchecked Sendable { var time = Date(timeIntervalSince1970: 1_000_000) }
        let clock = Clock()
        let throttle = AuthenticationThrottle(limit: 3, window: 60, capacity: 8, now: { clock.time })
        for _ in 0..<2 { throttle.recordFailure("10.0.0.1") }
        #expect(throttle.secondsLocked("10.0.0.1") == nil)
        throttle.recordFailure("10.0.0.1")
        #expect(throttle.secondsLocked("10.0.0.1") == 60)
        #expect(throttle.secondsLocked("10.0.0.2") == nil)
        clock.time += 45.5
        #expect(throttle.secondsLocked("10.0.0.1") == 15)
        clock.time += 14.5
        #expect(throttle.secondsLocked("10.0.0.1") == nil)
        // A failure after the window starts a new count.
        throttle.recordFailure("10.0.0.1")
        #expect(throttle.secondsLocked("10.0.0.1") == nil)
        for address in 0..<100 { throttle.recordFailure("192.168.0.\(address)") }
        #expect(throttle.count <= 8)
        for _ in 0..<3 { throttle.recordFailure("192.168.0.99") }
        #expect(throttle.secondsLocked("192.168.0.99") != nil)
    }
}
