import FaceTrain
import FaceTrainServer
import FaceTrainTestSupport
import Foundation
import Testing

/// What `facetrain serve`'s HTTP layer refuses before any route runs, and what reaches its log.
/// Raw sockets are Python's, where curl would mend the request.
extension ServeCommandTests {
    /// A python3 script run in the background, its stdout going to a file; its stdin stays open
    /// until `finish`, for scripts that hold something until the test is done.
    final class PythonClient {
        let process = Process()
        let input = Pipe()
        let outputURL: URL

        init(_ script: String, _ arguments: [String]) throws {
            outputURL = FileManager.default.temporaryDirectory.appendingPathComponent("python-\(UUID().uuidString)")
            _ = FileManager.default.createFile(atPath: outputURL.path, contents: nil)
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["python3", "-c", script] + arguments
            process.standardInput = input
            process.standardOutput = try FileHandle(forWritingTo: outputURL)
            try process.run()
        }

        var output: String { (try? String(contentsOf: outputURL, encoding: .utf8)) ?? "" }

        /// Waits until stdout contains `text`; false on timeout or if the script ended first.
        func waitFor(_ text: String, timeout: TimeInterval = 30) -> Bool {
            let deadline = Date().addingTimeInterval(timeout)
            while Date() < deadline {
                if output.contains(text) { return true }
                if !process.isRunning { return output.contains(text) }
                Thread.sleep(forTimeInterval: 0.05)
            }
            return false
        }

        /// Closes its stdin, waits for it to end, and returns its stdout.
        func finish() -> String {
            try? input.fileHandleForWriting.close()
            process.waitUntilExit()
            defer { try? FileManager.default.removeItem(at: outputURL) }
            return output
        }
    }

    /// Sends argv[2] on a new connection to 127.0.0.1:argv[1] and prints what comes back until the
    /// server closes (10 s at most).
    static let rawExchangeScript = """
        import socket, sys
        connection = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
        connection.sendall(sys.argv[2].encode())
        answer = b""
        try:
            while chunk := connection.recv(65536):
                answer += chunk
        except OSError:
            pass
        sys.stdout.write(answer.decode("latin-1"))
        """

    /// One request written byte for byte (curl would mend duplicate or conflicting headers); the answer.
    static func rawExchange(_ server: Server, _ request: String) throws -> String {
        try PythonClient(rawExchangeScript, [String(server.port), request]).finish()
    }

    /// Sends argv[3] (a request's head), then for 10 s at most either a byte of body every 0.4 s
    /// (argv[2] "trickle") or nothing ("silent"); prints the seconds until the server closed, then
    /// what it answered.
    static let slowClientScript = """
        import select, socket, sys, time
        connection = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
        connection.sendall(sys.argv[3].encode())
        start = time.monotonic()
        answer = b""
        while time.monotonic() - start < 10:
            if select.select([connection], [], [], 0.4)[0]:
                try:
                    chunk = connection.recv(65536)
                except OSError:
                    break
                if not chunk:
                    break
                answer += chunk
            elif sys.argv[2] == "trickle":
                try:
                    connection.send(b" ")
                except OSError:
                    break
        print("%.2f" % (time.monotonic() - start))
        sys.stdout.write(answer.decode("latin-1"))
        """

    /// A body that does not arrive within --body-timeout of its headers is answered 408 and its
    /// connection closed, whether the client trickles a byte at a time (each well within the 30 s
    /// idle timeout) or falls silent; other requests are served meanwhile, and a prompt body still is.
    @Test func slowBodiesAreCutOffAtTheDeadline() throws {
        let (_, data, models) = try Self.folders(users: 1, perUser: 5)
        defer { try? FileManager.default.removeItem(at: data.deletingLastPathComponent()) }
        let server = try Server(data: data, models: models, extra: ["--body-timeout", "2"])
        defer { server.kill() }
        let head =
            "POST /v1/users HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\nAuthorization: Bearer \(Self.token)\r\n"
            + "Content-Type: application/json\r\nContent-Length: 64\r\n\r\n{\"name\": \"Slow\""
        for mode in ["trickle", "silent"] {
            let client = try PythonClient(Self.slowClientScript, [String(server.port), mode, head])
            Thread.sleep(forTimeInterval: 1)
            #expect(try server.json("GET", "/healthz").status == 200, "\(mode)")
            let output = client.finish()
            let seconds = Double(output.prefix { $0 != "\n" }) ?? .infinity
            #expect(output.contains("HTTP/1.1 408") && output.contains("within 2 s"), "\(mode): \(output)")
            #expect((1.5...6).contains(seconds), "\(mode): closed after \(seconds) s")
        }
        #expect(server.process.standardError.contains("POST /v1/users 408"), "\(server.process.standardError)")
        #expect(try server.json("POST", "/v1/users", "{\"name\": \"Prompt\"}").status == 201)
        let users = try String(contentsOf: data.appendingPathComponent("users.json"), encoding: .utf8)
        #expect(!users.contains("Slow") && users.contains("Prompt"))
    }

    /// Headers that trickle in a byte at a time (each byte well within the 30 s idle timeout), and a
    /// connection that never sends a byte, are closed --header-timeout after the connection opened,
    /// and a keep-alive connection's next request that trickles, that long after the last answer;
    /// other requests are served meanwhile.
    @Test func slowHeadersAreCutOffAtTheDeadline() throws {
        let (_, data, models) = try Self.folders(users: 1, perUser: 5)
        defer { try? FileManager.default.removeItem(at: data.deletingLastPathComponent()) }
        let server = try Server(data: data, models: models, extra: ["--header-timeout", "2"])
        defer { server.kill() }
        let head = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\nX-Slow: a"
        let answered = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\n\r\n"
        for (mode, sent) in [("trickle", head), ("silent", ""), ("trickle", answered + head)] {
            let client = try PythonClient(Self.slowClientScript, [String(server.port), mode, sent])
            Thread.sleep(forTimeInterval: 1)
            #expect(try server.json("GET", "/healthz").status == 200, "\(mode)")
            let output = client.finish()
            let seconds = Double(output.prefix { $0 != "\n" }) ?? .infinity
            #expect((1.5...6).contains(seconds), "\(mode): closed after \(seconds) s")
            let answers = output.components(separatedBy: "HTTP/1.1 200").count - 1
            #expect(answers == (sent.hasPrefix(answered) ? 1 : 0), "\(mode): only a finished request is answered")
        }
        let usage = try CLIRunner.run(["serve", "--data", data.path, "--models", models.path, "--header-timeout", "0"])
        #expect(usage.status == 64 && usage.standardError.contains("--header-timeout"), "\(usage.standardError)")
    }

    /// Opens argv[2] idle connections to 127.0.0.1:argv[1], prints how many the server kept open
    /// after a second, and holds them until its stdin closes (30 s at most).
    static let connectionHolderScript = """
        import signal, socket, sys, time
        signal.alarm(30)
        held = [socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5) for _ in range(int(sys.argv[2]))]
        time.sleep(1)
        def is_open(connection):
            connection.setblocking(False)
            try:
                return connection.recv(1, socket.MSG_PEEK) != b""
            except BlockingIOError:
                return True
            except OSError:
                return False
        print("open %d" % sum(is_open(connection) for connection in held), flush=True)
        sys.stdin.read()
        """

    /// One address gets at most `maximumConnectionsPerAddress` of the 64 connections: the extra ones
    /// are closed as they come, that address's next request too, while another address is served;
    /// once the idle ones go, the address is served again.
    @Test func oneAddressCannotHoldEveryConnection() throws {
        let (_, data, models) = try Self.folders(users: 1, perUser: 5)
        defer { try? FileManager.default.removeItem(at: data.deletingLastPathComponent()) }
        let server = try Server(data: data, models: models)
        defer { server.kill() }
        let cap = HTTPLimits().maximumConnectionsPerAddress
        #expect(cap < HTTPLimits().maximumConnections / 2)
        let holder = try PythonClient(Self.connectionHolderScript, [String(server.port), String(cap + 8)])
        #expect(holder.waitFor("open "), "\(holder.output)")
        #expect(holder.output.contains("open \(cap)\n"), "\(holder.output)")
        // Another loopback address (the whole of 127/8 is this machine) is not held back.
        #expect(try server.curl("GET", "/healthz", ["--interface", "127.0.0.2"]).status == 200)
        #expect(try server.curl("GET", "/healthz").status != 200)
        _ = holder.finish()
        var status = 0
        for _ in 0..<50 where status != 200 {
            Thread.sleep(forTimeInterval: 0.1)
            status = try server.curl("GET", "/healthz").status
        }
        #expect(status == 200)
    }

    /// Behind a reverse proxy every client has the proxy's address: `--connections-per-address`
    /// raises the cap, within the total.
    @Test func theCapPerAddressCanBeRaisedForAProxy() throws {
        let (_, data, models) = try Self.folders(users: 1, perUser: 5)
        defer { try? FileManager.default.removeItem(at: data.deletingLastPathComponent()) }
        let server = try Server(data: data, models: models, extra: ["--connections-per-address", "24"])
        defer { server.kill() }
        let holder = try PythonClient(Self.connectionHolderScript, [String(server.port), "32"])
        #expect(holder.waitFor("open "), "\(holder.output)")
        #expect(holder.output.contains("open 24\n"), "\(holder.output)")
        _ = holder.finish()
        for value in ["0", "65", "x"] {
            let refused = try CLIRunner.run([
                "serve", "--data", data.path, "--models", models.path, "--connections-per-address", value,
            ])
            #expect(refused.status == 64 && refused.standardError.contains("--connections-per-address"))
        }
    }

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

    /// A path with an escaped CR LF (or any control character) is logged on one line, its controls
    /// escaped, so a client cannot write a line of its own into the log.
    @Test func controlCharactersCannotForgeLogLines() throws {
        let (_, data, models) = try Self.folders(users: 1, perUser: 5)
        defer { try? FileManager.default.removeItem(at: data.deletingLastPathComponent()) }
        let server = try Server(data: data, models: models)
        defer { server.kill() }
        let forged = "/nothing%0D%0AGET%20/v1/forged%20200%200.1%20ms%1B[2J"
        #expect(try server.json("GET", forged, authorized: false).status == 404)
        #expect(try server.json("GET", "/healthz", authorized: false).status == 200)
        let log = server.process.standardError
        #expect(log.contains("GET /nothing%0D%0AGET /v1/forged 200 0.1 ms%1B[2J 404"), "\(log)")
        #expect(!log.split(whereSeparator: \.isNewline).contains { $0.hasPrefix("GET /v1/forged") }, "\(log)")
        #expect(!log.contains("\u{1B}"))
        #expect(ServerConfiguration.loggable("a\u{7F}b\u{85}c\u{0}é") == "a%7Fb%C2%85c%00é")
    }

    /// A body with two readings (two different Content-Length values, or Content-Length beside
    /// Transfer-Encoding) is refused with 400 from its headers and nothing is written; a repeated
    /// identical Content-Length is one reading and passes.
    @Test func ambiguousBodyFramingIsRefused() throws {
        let (_, data, models) = try Self.folders(users: 1, perUser: 5)
        defer { try? FileManager.default.removeItem(at: data.deletingLastPathComponent()) }
        let server = try Server(data: data, models: models)
        defer { server.kill() }
        let body = "{\"name\": \"Smuggled\"}"
        let head =
            "POST /v1/users HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\nAuthorization: Bearer \(Self.token)\r\n"
            + "Content-Type: application/json\r\nConnection: close\r\n"
        let chunked = String(body.utf8.count, radix: 16) + "\r\n\(body)\r\n0\r\n\r\n"
        let both = "both Transfer-Encoding and Content-Length"
        for (headers, sent, expected) in [
            ("Content-Length: \(body.utf8.count)\r\nContent-Length: 5\r\n", body, "Content-Length headers that differ"),
            ("Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", chunked, both),
            ("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", chunked, both),
            ("Transfer-Encoding: gzip, chunked\r\n", chunked, "is not accepted"),
        ] {
            let answer = try Self.rawExchange(server, head + headers + "\r\n" + sent)
            #expect(answer.hasPrefix("HTTP/1.1 400") && answer.contains(expected), "\(headers): \(answer)")
        }
        let twice = "{\"name\": \"Twice\"}"
        let same = "Content-Length: \(twice.utf8.count)\r\nContent-Length: \(twice.utf8.count)\r\n"
        let answer = try Self.rawExchange(server, head + same + "\r\n" + twice)
        #expect(answer.hasPrefix("HTTP/1.1 201"), "\(answer)")
        let users = try String(contentsOf: data.appendingPathComponent("users.json"), encoding: .utf8)
        #expect(!users.contains("Smuggled") && users.contains("Twice"), "\(users)")
    }

    /// Connects with each TLS version from 1.0 to 1.3 to 127.0.0.1:argv[1] and prints one line each:
    /// "accepted", "refused <reason>", or "untried <reason>" when this OpenSSL cannot offer the version.
    static let tlsVersionsScript = """
        import socket, ssl, sys, warnings
        warnings.simplefilter("ignore")  # 1.0 and 1.1 are deprecated, which is the point
        for name in ["TLSv1", "TLSv1_1", "TLSv1_2", "TLSv1_3"]:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            try:
                context.set_ciphers("ALL:@SECLEVEL=0")
                context.minimum_version = context.maximum_version = getattr(ssl.TLSVersion, name)
            except (ValueError, ssl.SSLError) as error:
                print(name, "untried", error)
                continue
            try:
                with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10) as plain:
                    with context.wrap_socket(plain) as secure:
                        print(name, "accepted", secure.version())
            except ssl.SSLError as error:
                print(name, "untried" if error.reason == "NO_PROTOCOLS_AVAILABLE" else "refused", error.reason)
            except OSError as error:
                print(name, "refused", error)
        """

    /// With --cert/--key the server speaks TLS 1.2 and 1.3 only: GnuTLS's defaults took 1.0 and 1.1.
    @Test func tlsBefore1_2IsRefused() throws {
        let (_, data, models) = try Self.folders(users: 1, perUser: 5)
        defer { try? FileManager.default.removeItem(at: data.deletingLastPathComponent()) }
        let server = try Self.httpsServer(data: data, models: models)
        defer { server.kill() }
        let lines = try PythonClient(Self.tlsVersionsScript, [String(server.port)]).finish()
            .split(separator: "\n").map(String.init)
        let outcome = Dictionary(lines.map { (String($0.prefix { $0 != " " }), $0) }, uniquingKeysWith: { $1 })
        #expect(outcome["TLSv1_2"]?.contains("accepted TLSv1.2") == true, "\(lines)")
        #expect(outcome["TLSv1_3"]?.contains("accepted TLSv1.3") == true, "\(lines)")
        var tried = 0
        for version in ["TLSv1", "TLSv1_1"] {
            let line = outcome[version] ?? "\(version) missing"
            // An OpenSSL that cannot even offer the version says so before connecting: nothing to learn.
            if line.contains(" untried ") { continue }
            tried += 1
            #expect(line.contains(" refused "), "\(line)")
        }
        if tried == 0 { print("note: this OpenSSL cannot offer TLS 1.0 or 1.1; only 1.2 and 1.3 were checked") }
        #expect(try server.json("GET", "/healthz").status == 200)
    }
}
