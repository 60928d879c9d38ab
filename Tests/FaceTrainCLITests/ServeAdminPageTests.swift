import FaceTrain
import FaceTrainBenchmark
import FaceTrainEngine
import FaceTrainTestSupport
import Foundation
import Testing

/// `GET /`, the admin page: its login, its escaping, and the page in headless Chromium.
extension ServeCommandTests {
    static let chromium = "/usr/bin/chromium"
    /// A name that breaks the page unless it is escaped.
    static let hostileName = "<script>alert(\"x\")</script> O'Brien & Søn"

    /// A server with five users (one with `hostileName`) and a published version 1.
    static func adminFixture() throws -> (server: Server, scratch: URL) {
        let (synth, data, models) = try Self.folders(users: 5, perUser: 6)
        let server = try Server(data: data, models: models)
        for user in 3...7 {
            let name = user == 5 ? hostileName : "Person \(user)"
            let body = String(
                decoding: try JSONSerialization.data(withJSONObject: ["name": name, "position": "QA"]), as: UTF8.self)
            let id = try #require(try server.json("POST", "/v1/users", body).object["id"] as? Int)
            #expect(try server.upload(id, try Self.crops(synth, user: user)).status == 201)
        }
        #expect(try Self.train(server)["state"] as? String == "succeeded")
        return (server, data.deletingLastPathComponent())
    }

    @Test func adminPageNeedsTheTokenOrALogin() throws {
        let (server, scratch) = try Self.adminFixture()
        defer {
            server.kill()
            try? FileManager.default.removeItem(at: scratch)
        }
        let html = ["-H", "Accept: text/html,application/xhtml+xml"]
        let form = try server.curl("GET", "/", html, authorized: false)
        #expect(form.status == 401 && form.headers["content-type"] == "text/html; charset=utf-8")
        #expect(String(decoding: form.body, as: UTF8.self).contains("<form method=\"post\" action=\"/login\""))
        let json = try server.json("GET", "/", authorized: false)
        #expect(json.status == 401 && json.object["status"] as? String == "error", "\(json.object)")

        let page = try server.curl("GET", "/")
        #expect(page.status == 200 && page.headers["content-security-policy"]?.contains("default-src 'none'") == true)
        let text = String(decoding: page.body, as: UTF8.self)
        #expect(text.contains("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; O&#39;Brien &amp; Søn"))
        #expect(!text.contains("<script"), "no script of any kind, least of all a user's")
        #expect(text.contains("<span class=\"badge\">published</span>") && text.contains("id=\"version-1\""))
        #expect(text.components(separatedBy: "<img class=\"thumbnail\"").count == 6, "a thumbnail per user")

        let wrong = try server.curl(
            "POST", "/login", html + ["--data-urlencode", "token=not-the-token-at-all"], authorized: false)
        #expect(wrong.status == 401 && wrong.headers["set-cookie"] == nil)
        let login = try server.curl(
            "POST", "/login", html + ["--data-urlencode", "token=\(Self.token)"], authorized: false)
        #expect(login.status == 303 && login.headers["location"] == "/")
        let cookie = try #require(login.headers["set-cookie"])
        for attribute in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age="] {
            #expect(cookie.contains(attribute), "\(cookie)")
        }
        #expect(!cookie.contains(Self.token), "the cookie is not the token")
        let session = try #require(cookie.split(separator: ";").first.map(String.init))
        #expect(try server.curl("GET", "/", ["-H", "Cookie: \(session)"], authorized: false).status == 200)
        #expect(try server.curl("GET", "/metrics", ["-H", "Cookie: \(session)"], authorized: false).status == 200)
        // The session opens the page and what it links to, never the API's writes or its user list.
        #expect(try server.curl("GET", "/v1/users", ["-H", "Cookie: \(session)"], authorized: false).status == 401)
        let write = try server.curl(
            "POST", "/v1/users", ["-H", "Cookie: \(session)", "--data-binary", "{\"name\": \"CSRF\"}"],
            authorized: false)
        #expect(write.status == 401)
        let forged = "facetrain_admin=" + String(repeating: "0", count: 64)
        #expect(try server.curl("GET", "/", ["-H", "Cookie: \(forged)"], authorized: false).status == 401)
        // The version's report, made from its held-out crops; the session opens it, nobody else.
        #expect(text.contains("<a href=\"/v1/models/1/report.html\">"))
        let report = try server.curl(
            "GET", "/v1/models/1/report.html", ["-H", "Cookie: \(session)"], authorized: false)
        #expect(report.status == 200 && report.headers["content-type"] == "text/html; charset=utf-8")
        #expect(String(decoding: report.body, as: UTF8.self).contains("facetrain model 1"))
        #expect(try server.curl("GET", "/v1/models/1/report.html", authorized: false).status == 401)
        #expect(try server.curl("GET", "/v1/models/7/report.html").status == 404)
        // "Test a photo": the session posts a crop and gets a page with its face drawn and named.
        #expect(text.contains("<form method=\"post\" action=\"/test-photo\" enctype=\"multipart/form-data\""))
        let crop = try Self.crops(scratch.appendingPathComponent("synth"), user: 4)[0]
        let tested = try server.curl(
            "POST", "/test-photo", html + ["-H", "Cookie: \(session)", "-F", "photo=@\(crop.path)"], authorized: false)
        let testedPage = String(decoding: tested.body, as: UTF8.self)
        #expect(tested.status == 200 && tested.headers["content-type"] == "text/html; charset=utf-8")
        #expect(testedPage.contains("id=\"drawn\" src=\"data:image/jpeg;base64,"), "\(testedPage.prefix(600))")
        #expect(testedPage.contains("<table id=\"faces\">") && testedPage.contains("Person 4 (4)"))
        #expect(!testedPage.contains("<script"))
        // Each face can be filed elsewhere, and nothing is chosen for the admin.
        #expect(testedPage.contains("<form method=\"post\" action=\"/correct\" class=\"correct\">"))
        #expect(testedPage.contains("<select name=\"to\" required><option value=\"\" selected disabled>"))
        let anonymousTest = try server.curl(
            "POST", "/test-photo", html + ["-F", "photo=@\(crop.path)"], authorized: false)
        #expect(anonymousTest.status == 401)
        let noPhoto = try server.curl("POST", "/test-photo", html + ["-H", "Cookie: \(session)"], authorized: false)
        #expect(noPhoto.status == 415 && String(decoding: noPhoto.body, as: UTF8.self).contains("id=\"message\""))
        // A person's page lists their crops; its Delete button removes one, from this server's page only.
        #expect(text.contains("<a href=\"/people/6\">Person 6</a>"))
        let person = try server.curl("GET", "/people/6", html + ["-H", "Cookie: \(session)"], authorized: false)
        let personPage = String(decoding: person.body, as: UTF8.self)
        #expect(person.status == 200 && personPage.components(separatedBy: "<tr class=\"crop\"").count == 7)
        let listed = try server.json("GET", "/v1/users/6/photos").object["photos"] as? [[String: Any]] ?? []
        let victim = try #require(listed.first?["sha256"] as? String)
        let deletePath = "/people/6/photos/\(victim)/delete"
        #expect(personPage.contains("action=\"\(deletePath)\""))
        let forgedOrigin = try server.curl(
            "POST", deletePath, html + ["-H", "Cookie: \(session)", "-H", "Origin: https://evil.example"],
            authorized: false)
        #expect(forgedOrigin.status == 403)
        #expect(try server.curl("POST", deletePath, html, authorized: false).status == 401)
        let removed = try server.curl(
            "POST", deletePath, html + ["-H", "Cookie: \(session)", "-H", "Origin: \(server.origin)"], authorized: false
        )
        #expect(removed.status == 303 && removed.headers["location"] == "/people/6")
        #expect((try server.json("GET", "/v1/users/6").object["user"] as? [String: Any])?["crops"] as? Int == 5)
        let logout = try server.curl("POST", "/logout", ["-H", "Cookie: \(session)"], authorized: false)
        #expect(logout.status == 303 && logout.headers["set-cookie"]?.contains("Max-Age=0") == true)
        // A deleted crop was held out: the report cannot be made without it.
        let metrics = try JSONSerialization.jsonObject(
            with: Data(contentsOf: scratch.appendingPathComponent("models/1/metrics.json")))
        let heldOut = try #require(
            ((metrics as? [String: Any])?["held_out"] as? [[String: Any]])?.compactMap { entry -> (Int, String)? in
                guard let label = (entry["label"] as? String).flatMap({ Int($0) }), label >= 3,
                    let sha256 = entry["sha256"] as? String,
                    Self.storedCrops(scratch.appendingPathComponent("data"), user: label).contains(where: {
                        $0.hasPrefix(sha256)
                    })
                else { return nil }
                return (label, sha256)
            }.first, "\(metrics)")
        #expect(try server.json("DELETE", "/v1/users/\(heldOut.0)/photos/\(heldOut.1)").status == 200)
        let incomplete = try server.json("GET", "/v1/models/1/report.html")
        #expect(
            incomplete.status == 409
                && (incomplete.object["error"] as? String)?.contains("no longer in the data folder") == true,
            "\(incomplete.object)")
        // Once a person it was trained on is deleted, the version is withdrawn, report and all.
        #expect(try server.json("DELETE", "/v1/users/3").status == 200)
        let gone = try server.json("GET", "/v1/models/1/report.html")
        #expect(gone.status == 404, "\(gone.object)")
    }

    /// The server's report and `facetrain eval --report` are one evaluation of the same held-out
    /// crops: the same page, figure for figure.
    @Test func servedReportIsThePageEvalWrites() throws {
        let (server, scratch) = try Self.adminFixture()
        defer {
            server.kill()
            try? FileManager.default.removeItem(at: scratch)
        }
        let bundle = scratch.appendingPathComponent("models/1")
        // eval suggests its threshold for --target-far; the server for the target the fit recorded.
        let metrics = try MetricsDocument.decode(Data(contentsOf: bundle.appendingPathComponent("metrics.json")))
        let target = try #require(metrics.targetFalseAcceptRate)
        // A held-out crop saved twice in its folder is scored per copy by both (the server once
        // refused such a report, counting "-1" crops missing).
        let first = URL(fileURLWithPath: try #require(metrics.heldOut?.first?.path))
        try FileManager.default.copyItem(
            at: first, to: first.deletingLastPathComponent().appendingPathComponent("copy-\(first.lastPathComponent)"))
        let served = try server.curl("GET", "/v1/models/1/report.html")
        #expect(served.status == 200, "\(String(decoding: served.body, as: UTF8.self))")
        let written = scratch.appendingPathComponent("eval-report.html")
        let eval = try CLIRunner.run([
            "eval", "--model", bundle.path, "--report", written.path, "--target-far", String(target), "--json",
        ])
        #expect(eval.status == 0, "\(eval.standardError)")
        let page = try String(contentsOf: written, encoding: .utf8)
        #expect(page.contains("facetrain model 1"))
        #expect(String(decoding: served.body, as: UTF8.self) == page)
        // And eval's figures are those of the page: the held-out crops the fit recorded and the copy.
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(eval.standardOutput.utf8)) as? [String: Any])
        let counts = try #require(object["counts"] as? [String: Int])
        #expect(counts.values.reduce(0, +) == (metrics.heldOut?.count ?? 0) + 1)
    }

    @Test func adminPageShowsTheRunningJob() throws {
        let (synth, data, models) = try Self.folders(users: 5, perUser: 6)
        defer { try? FileManager.default.removeItem(at: data.deletingLastPathComponent()) }
        // The training stops dead once it is running, so the page can be read while it is.
        let server = try Server(data: data, models: models, pauseAt: "training-running")
        defer { server.kill() }
        _ = try Self.enroll(server, synth, count: 5)
        #expect(try server.json("POST", "/v1/training").object["job"] as? Int == 1)
        #expect(server.process.waitFor("paused at training-running", timeout: 60), "\(server.process.standardError)")
        let page = String(decoding: try server.curl("GET", "/").body, as: UTF8.self)
        #expect(page.contains("<p id=\"running-job\">Job 1: loading data"), "\(page)")
        #expect(page.contains("role=\"progressbar\"") && page.contains("<meta http-equiv=\"refresh\" content=\"5\">"))
        let metrics = try Self.scrape(server)
        #expect(metrics.value("facetrain_trainings_running") == 1)
        #expect(metrics.value("facetrain_training_progress_ratio") == 0)
    }

    /// Runs headless Chromium with a profile folder; its stdout and stderr.
    static func runChromium(_ arguments: [String], profile: URL) throws -> CLIRunner.Result {
        try CLIRunner.runProgram(
            "/usr/bin/timeout",
            [
                "120", chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--user-data-dir=\(profile.path)", "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000",
            ] + arguments)
    }

    /// Console messages Chromium logged (none are expected: the page has no scripts).
    static func consoleLines(_ log: String) -> [String] {
        log.split(separator: "\n").map(String.init).filter { $0.contains(":CONSOLE") }
    }

    @Test func adminPageInHeadlessChromium() throws {
        guard FileManager.default.isExecutableFile(atPath: Self.chromium) else {
            #expect(
                ProcessInfo.processInfo.environment["CI"] != "true", "CI=true needs chromium (make deps installs it)")
            return
        }
        let (server, scratch) = try Self.adminFixture()
        defer {
            server.kill()
            try? FileManager.default.removeItem(at: scratch)
        }
        let profile = scratch.appendingPathComponent("chromium-profile")
        // A person logs in through the form: a local page posts it, as the login page's button would.
        let login = scratch.appendingPathComponent("login.html")
        try Data(
            """
            <!DOCTYPE html><html><body><form method="post" action="\(server.origin)/login">
            <input name="token" value="\(Self.token)"></form><script>document.forms[0].submit()</script></body></html>
            """.utf8
        ).write(to: login)
        let first = try Self.runChromium(["--dump-dom", login.absoluteString], profile: profile)
        #expect(first.status == 0, "\(first.standardError)")
        #expect(Self.consoleLines(first.standardError).isEmpty, "\(Self.consoleLines(first.standardError))")

        // Then opens the page: the session cookie is in the profile.
        let second = try Self.runChromium(["--dump-dom", "\(server.origin)/"], profile: profile)
        #expect(second.status == 0, "\(second.standardError)")
        #expect(Self.consoleLines(second.standardError).isEmpty, "\(Self.consoleLines(second.standardError))")
        let dom = second.standardOutput
        #expect(dom.contains("<table id=\"users\">"), "\(dom.prefix(2000))")
        for name in ["Person 3", "Person 4", "Person 6", "Person 7"] {
            #expect(
                dom.contains("<td class=\"name\"><a href=\"/people/\(name.dropFirst(7))\">\(name)</a></td>"), "\(name)")
        }
        // The browser read the hostile name as text: it is in the DOM escaped, and no script element exists.
        #expect(dom.contains("&lt;script&gt;alert(\"x\")&lt;/script&gt; O'Brien &amp; Søn"), "\(dom.prefix(4000))")
        #expect(!dom.contains("<script"))
        #expect(dom.contains("<tr class=\"version published\" id=\"version-1\">"))
        #expect(dom.contains("<span id=\"published-version\">1</span>"))
        #expect(dom.components(separatedBy: "<img class=\"thumbnail\"").count == 6)

        // The version's report, under the same Content-Security-Policy.
        let report = try Self.runChromium(["--dump-dom", "\(server.origin)/v1/models/1/report.html"], profile: profile)
        #expect(report.status == 0 && report.standardOutput.contains("facetrain model 1"), "\(report.standardError)")
        #expect(Self.consoleLines(report.standardError).isEmpty, "\(Self.consoleLines(report.standardError))")
    }
}
