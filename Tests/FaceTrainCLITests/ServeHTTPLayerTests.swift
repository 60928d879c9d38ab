import FaceTrain
import FaceTrainServer
import FaceTrainTestSupport
import Foundation
import Testing

/// What `facetrain serve`'s HTTP layer refuses before any route runs, and what reaches its log.
/// Raw sockets are Python's, where curl would mend the request.
extension ServeCommandTests {
    /// libmicrohttpd decodes `%2F` into '/' and ends a path at `%00`: such paths are refused with a
    /// 400 that says why instead of reaching the route of another path; other escapes decode as before.
    @Test func escapedSlashesAndNULsReachNoRoute() throws {
        let (_, data, models) = try Self.folders(users: 1, perUser: 5)
        defer { try? FileManager.default.removeItem(at: data.deletingLastPathComponent()) }
        let server = try Server(data: data, models: models)
        defer { server.kill() }
        #expect(try server.json("POST", "/v1/users", "{\"name\": \"Ada\"}").object["id"] as? Int == 3)
        for path in [
            "/v1/users%2F3", "/v1/users%2f3", "/healthz%00", "/healthz%00.json", "/v1/models/1/..%2Fmanifest.json",
        ] {
            let answer = try server.json("GET", path, authorized: true)
            #expect(answer.status == 400, "\(path)")
            #expect((answer.object["error"] as? String)?.contains("(%2F) or NUL (%00)") == true, "\(answer.object)")
        }
        #expect(try server.json("GET", "/v1/users/%33").status == 200)
        #expect(try server.json("GET", "/health%7A", authorized: false).status == 200)
        #expect(try server.json("GET", "/v1/users/3%20").status == 404)
        // The adapter's own refusals are logged and counted like any other answer.
        #expect(server.process.standardError.contains("GET /v1/users%2F3 400"), "\(server.process.standardError)")
    }
}
