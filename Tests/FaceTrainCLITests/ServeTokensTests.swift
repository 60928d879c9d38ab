import FaceTrain
import FaceTrainServer
import FaceTrainTestSupport
import Foundation
import Testing

/// Scoped tokens of `facetrain serve`: each role opens its routes and no others (403 naming the
/// role needed), a revoked token is refused on the next request and after a restart, only hashes
/// are stored, and wrong scoped tokens are throttled like wrong admin tokens.
extension ServeCommandTests {
    /// Creates a token with the admin token; its id and secret.
    static func createToken(_ server: Server, name: String, role: String) throws -> (id: Int, secret: String) {
        let answer = try server.json("POST", "/v1/tokens", "{\"name\": \"\(name)\", \"role\": \"\(role)\"}")
        #expect(answer.status == 201, "\(answer.object)")
        let token = try #require(answer.object["token"] as? [String: Any])
        return (try #require(token["id"] as? Int), try #require(answer.object["secret"] as? String))
    }

    /// A request with a scoped token instead of the admin's.
    static func call(_ server: Server, _ secret: String, _ method: String, _ path: String, _ arguments: [String] = [])
        throws -> (status: Int, object: [String: Any])
    {
        let answer = try server.curl(
            method, path, ["-H", "Authorization: Bearer \(secret)"] + arguments, authorized: false)
        return (answer.status, (try? JSONSerialization.jsonObject(with: answer.body)) as? [String: Any] ?? [:])
    }

    @Test func scopedTokensOpenTheirRoutesOnly() throws {
        let (synth, data, models) = try Self.folders(users: 1, perUser: 5)
        defer { try? FileManager.default.removeItem(at: data.deletingLastPathComponent()) }
        var server = try Server(data: data, models: models, extra: ["--private"])
        let enrol = try Self.createToken(server, name: "front desk", role: "enrol")
        let app = try Self.createToken(server, name: "iPhone app", role: "app")
        #expect(enrol.secret.hasPrefix("ft_") && enrol.secret.count == 67)
        let badRole = try server.json("POST", "/v1/tokens", "{\"name\": \"x\", \"role\": \"viewer\"}")
        #expect(badRole.status == 400 && (badRole.object["error"] as? String)?.contains("enrol") == true)
        #expect(try server.json("POST", "/v1/tokens", "{\"role\": \"app\"}").status == 400)

        // Enrolment: register and upload, nothing else.
        let json = ["-H", "Content-Type: application/json", "--data-binary", "{\"name\": \"Ada\"}"]
        let created = try Self.call(server, enrol.secret, "POST", "/v1/users", json)
        #expect(created.status == 201, "\(created.object)")
        let crops = try Self.crops(synth, user: 3).prefix(2).flatMap { ["-F", "photos=@\($0.path)"] }
        #expect(try Self.call(server, enrol.secret, "POST", "/v1/users/3/photos", crops).status == 201)
        for (method, path) in [
            ("DELETE", "/v1/users/3"), ("POST", "/v1/models/1/publish"), ("GET", "/metrics"), ("GET", "/v1/users"),
            ("POST", "/v1/training"), ("GET", "/v1/model"), ("POST", "/v1/tokens"), ("POST", "/v1/strangers/photos"),
        ] {
            let refused = try Self.call(server, enrol.secret, method, path)
            let message = refused.object["error"] as? String ?? ""
            #expect(refused.status == 403, "\(method) \(path): \(refused.object)")
            #expect(
                message.contains("needs a token with the role admin") && message.contains("'front desk'"), "\(message)")
        }
        // A refused upload is answered on its headers: curl, waiting for "100 Continue", sends none of it.
        let big = data.deletingLastPathComponent().appendingPathComponent("big.jpg")
        try Data(repeating: 0xAB, count: 20 << 20).write(to: big)
        let early = try ProcessRunner.run(
            "/usr/bin/curl",
            [
                "-sS", "-o", "/dev/null", "-w", "%{http_code} %{size_upload}", "-H", "Expect: 100-continue",
                "--expect100-timeout", "30", "-H", "Authorization: Bearer \(enrol.secret)", "-F",
                "photos=@\(big.path)", server.origin + "/v1/strangers/photos",
            ])
        let parts = early.standardOutput.split(separator: " ").compactMap { Int($0) }
        #expect(parts.count == 2 && parts[0] == 403 && parts[1] < 1 << 20, "\(early.standardOutput)")

        // The app: the model's reads (closed by --private) and recognition, not the people.
        #expect(try Self.call(server, app.secret, "GET", "/v1/model").status == 404, "no model yet, but let in")
        #expect(try Self.call(server, app.secret, "GET", "/v1/models").status == 200)
        #expect(try Self.call(server, app.secret, "GET", "/v1/users/3").status == 403)
        let recognise = try Self.call(server, app.secret, "POST", "/v1/recognize", ["-F", "photo=@\(big.path)"])
        #expect(![401, 403].contains(recognise.status), "\(recognise.object)")
        #expect(try Self.call(server, enrol.secret, "POST", "/v1/recognize").status == 403)

        // Listed with their last use; stored as hashes only.
        let listed = try server.json("GET", "/v1/tokens")
        let rows = try #require(listed.object["tokens"] as? [[String: Any]])
        #expect(rows.map { $0["name"] as? String } == ["front desk", "iPhone app"])
        #expect(rows.allSatisfy { $0["lastUsedAt"] is String && $0["sha256"] == nil }, "\(rows)")
        #expect(try Self.call(server, app.secret, "GET", "/v1/tokens").status == 403)
        let file = try String(contentsOf: data.appendingPathComponent(".tokens.json"), encoding: .utf8)
        #expect(!file.contains(enrol.secret) && file.contains(SHA256.hash(Data(enrol.secret.utf8))))

        // Revoked: refused on the very next request, and still after a kill and restart.
        #expect(try server.json("DELETE", "/v1/tokens/\(enrol.id)").status == 200)
        let revoked = try Self.call(server, enrol.secret, "POST", "/v1/users", json)
        #expect(revoked.status == 401 && (revoked.object["error"] as? String)?.contains("revoked") == true)
        #expect(try server.json("DELETE", "/v1/tokens/\(enrol.id)").status == 404)
        server.kill()
        server = try Server(data: data, models: models, extra: ["--private"])
        defer { server.kill() }
        #expect(try Self.call(server, enrol.secret, "GET", "/v1/model").status == 401)
        #expect(try Self.call(server, app.secret, "GET", "/v1/models").status == 200)
        let users = try String(contentsOf: data.appendingPathComponent("users.json"), encoding: .utf8)
        #expect(users.components(separatedBy: "Ada").count == 2, "one Ada, from the live enrol token")
    }

    /// Wrong and revoked scoped tokens count toward the throttle; the admin page creates and revokes
    /// tokens through its forms, showing the secret once; without --token-file there are none to make.
    @Test func scopedTokensAreThrottledAndManagedFromTheAdminPage() throws {
        let (_, data, models) = try Self.folders(users: 1, perUser: 5)
        defer { try? FileManager.default.removeItem(at: data.deletingLastPathComponent()) }
        let server = try Server(data: data, models: models)
        let page = try server.curl("POST", "/tokens", ["--data-urlencode", "name=kiosk", "-d", "role=enrol"])
        let html = String(decoding: page.body, as: UTF8.self)
        #expect(page.status == 201 && html.contains("shown this once"), "\(html)")
        let secret = try #require(
            html.range(of: "ft_[0-9a-f]{64}", options: .regularExpression).map { String(html[$0]) })
        let admin = String(decoding: try server.curl("GET", "/", ["-H", "Accept: text/html"]).body, as: UTF8.self)
        #expect(admin.contains("<td>kiosk</td>") && !admin.contains(secret), "the list never shows a secret")
        let json = ["-H", "Content-Type: application/json", "--data-binary", "{\"name\": \"Ada\"}"]
        #expect(try Self.call(server, secret, "POST", "/v1/users", json).status == 201)
        let revoke = try server.curl("POST", "/tokens/revoke", ["-d", "id=1"])
        #expect(revoke.status == 303)
        #expect(try Self.call(server, secret, "POST", "/v1/users", json).status == 401)
        for attempt in 0..<9 {
            #expect(
                try Self.call(server, "ft_" + String(repeating: "\(attempt)", count: 64), "GET", "/v1/users").status
                    == 401)
        }
        let locked = try server.curl("GET", "/v1/users")
        #expect(locked.status == 429, "the revoked try and nine wrong ones lock the address")
        server.kill()

        let open = try Server(data: data, models: models, token: nil)
        defer { open.kill() }
        let refused = try open.json("POST", "/v1/tokens", "{\"name\": \"x\", \"role\": \"app\"}")
        #expect(refused.status == 409 && (refused.object["error"] as? String)?.contains("--token-file") == true)
    }
}
