import FaceTrain
import Foundation

/// `GET /`: the page a person runs the server from. Server-rendered HTML with no scripts and no
/// external assets (thumbnails are `data:` URIs), so the Content-Security-Policy can forbid both.
/// Every text that came from a client or a file (names, positions, errors) goes through `escape`.
struct AdminPage {
    struct UserRow {
        var user: UserStore.Summary
        /// A `data:` URI, or nil when the user has no readable crop.
        var thumbnail: String?
    }

    struct VersionRow {
        var version: Int
        var createdAt: String?
        var users: Int?
        var metrics: MetricsDocument?
        var isPublished: Bool
        var problems: [BundleProblem]
        /// File names of the bundle that can be downloaded here.
        var files: [String]
    }

    /// A correction as the page lists it: names resolved now, the crop as stored.
    struct CorrectionRow {
        var record: CorrectionRecord
        var filedUnder: String
        var decided: String
        var thumbnail: String?
    }

    var users: [UserRow]
    var versions: [VersionRow]
    /// The most recent first.
    var corrections: [CorrectionRow] = []
    var jobs: [TrainingJob]
    var publishedVersion: Int?
    /// Shown when the server has a token (there is a session to end, and scoped tokens to manage).
    var canLogOut: Bool
    var tokens: [AccessToken] = []

    /// The report's name under `/v1/models/{version}/`; it is made on request, never stored.
    static let reportName = "report.html"

    static let contentSecurityPolicy =
        "default-src 'none'; img-src data:; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; "
        + "base-uri 'none'"

    static let style = """
        body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;background:#fafafa}
        h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:24px 0 8px}
        table{border-collapse:collapse;background:#fff}th,td{border:1px solid #ddd;padding:4px 8px;text-align:left}
        th{background:#f0f0f0}td.number{text-align:right;font-variant-numeric:tabular-nums}
        img.thumbnail{width:48px;height:48px;object-fit:cover;display:block;image-rendering:pixelated}
        .published{background:#e6f4ea;font-weight:600}.badge{background:#1e8e3e;color:#fff;border-radius:3px;padding:0 6px}
        .bar{width:320px;height:14px;background:#e0e0e0;border-radius:7px;overflow:hidden;display:inline-block;vertical-align:middle}
        .fill{height:100%;background:#1a73e8}.muted{color:#777}.error{color:#b00020}
        form{display:inline}button,input{font:inherit}
        """

    /// The page; it reloads itself every 5 s while a training is queued or running.
    var html: String {
        let active = jobs.contains { $0.state == .queued || $0.state == .running }
        var page = """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            \(active ? "<meta http-equiv=\"refresh\" content=\"5\">\n" : "")<title>facetrain serve</title>
            <style>\(Self.style)</style></head><body>
            <h1>facetrain serve</h1>
            <p class="muted">facetrain \(HTMLText.escape(FaceTrainVersion.string)) · published version: \
            <span id="published-version">\(publishedVersion.map(String.init) ?? "none")</span> · \
            <a href="/metrics">metrics</a> · <a href="/healthz">health</a></p>
            \(canLogOut ? "<form method=\"post\" action=\"/logout\"><button type=\"submit\">Log out</button></form>\n" : "")

            """
        page += trainingSection
        page += testPhotoSection
        page += usersSection
        page += correctionsSection
        page += versionsSection
        if canLogOut { page += tokensSection }
        page += "</body></html>\n"
        return page
    }

    private var trainingSection: String {
        var text = "<h2>Training</h2>\n"
        if let running = jobs.last(where: { $0.state == .running }) {
            let progress = min(max(running.progress ?? 0, 0), 1)
            let percent = String(format: "%.0f", progress * 100)
            let epoch =
                running.epoch.map { epoch in " · epoch \(epoch)" + (running.epochs.map { " of \($0)" } ?? "") } ?? ""
            text += """
                <p id="running-job">Job \(running.job): \(HTMLText.escape(running.step ?? "running"))\(epoch)<br>
                <span class="bar" role="progressbar" aria-valuemin="0" aria-valuemax="100" aria-valuenow="\(percent)">\
                <span class="fill" style="width:\(percent)%"></span></span> \(percent)%</p>

                """
        } else {
            text += "<p id=\"running-job\" class=\"muted\">No training is running.</p>\n"
        }
        let recent = jobs.suffix(10).reversed()
        guard !recent.isEmpty else { return text }
        text +=
            "<table id=\"jobs\"><tr><th>job</th><th>state</th><th>version</th><th>created</th><th>finished</th>"
            + "<th>note</th></tr>\n"
        for job in recent {
            let note = job.error.map { "<span class=\"error\">\(HTMLText.escape($0))</span>" } ?? ""
            text +=
                "<tr><td class=\"number\">\(job.job)</td><td>\(job.state.rawValue)</td>"
                + "<td class=\"number\">\(job.version.map(String.init) ?? "")</td>"
                + "<td>\(HTMLText.escape(job.createdAt))</td><td>\(HTMLText.escape(job.finishedAt ?? ""))</td>"
                + "<td>\(note)</td></tr>\n"
        }
        return text + "</table>\n"
    }

    private var testPhotoSection: String {
        guard publishedVersion != nil else {
            return
                "<h2>Test a photo</h2>\n<p class=\"muted\">Once a model is published, a photo can be tried here.</p>\n"
        }
        return """
            <h2>Test a photo</h2>
            <form method="post" action="/test-photo" enctype="multipart/form-data" id="test-photo">
            <input type="file" name="photo" accept="image/jpeg,image/png" required>
            <button type="submit">Who is this?</button></form>
            <span class="muted">The published model on every face the detector finds, as the app would decide.</span>

            """
    }

    /// One face of the test page: its colour on the drawn photo, the crop that was classified, the answer.
    struct TestFaceRow {
        var colour: String
        var crop: String
        var record: RecognizedFaceRecord
        /// The crop's SHA-256 for the correction form; nil: it cannot be corrected.
        var cropHash: String?
    }

    /// Where the test page's correction form can file a face: every user, then classes 2 and 1.
    static func correctionChoices(_ users: [UserStore.Summary]) -> [(value: String, label: String)] {
        users.map { (String($0.id), "\($0.name) (\($0.id))") } + [
            ("stranger", "a stranger (class 2)"), ("not_a_face", "not a face (class 1)"),
        ]
    }

    /// A page with one message (an error of a form), and the way back.
    static func messagePage(title: String, message: String, isError: Bool = true) -> String {
        """
        <!DOCTYPE html>
        <html lang="en"><head><meta charset="utf-8"><title>facetrain serve: \(HTMLText.escape(title))</title>
        <style>\(style)</style></head><body>
        <h1>\(HTMLText.escape(title))</h1>
        <p class="\(isError ? "error" : "muted")" id="message">\(HTMLText.escape(message))</p>
        <p><a href="/">back to the admin page</a></p></body></html>

        """
    }

    /// The answer to the admin page's "Test a photo": the photo with each face's box in its row's
    /// colour (green: accepted as that person; orange: not accepted), then a row per face.
    static func testPhotoPage(
        version: Int, drawn: String, faces: [TestFaceRow], choices: [(value: String, label: String)]
    ) -> String {
        var page = """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8"><title>facetrain serve: test a photo</title>
            <style>\(style)</style></head><body>
            <h1>Test a photo</h1>
            <p class="muted">Version \(version) · <a href="/">back to the admin page</a></p>
            <p><img id="drawn" src="\(drawn)" alt="the photo with its faces marked" style="max-width:100%"></p>

            """
        guard !faces.isEmpty else {
            return page + "<p id=\"no-face\">No face was found in this photo.</p>\n</body></html>\n"
        }
        page +=
            "<table id=\"faces\"><tr><th></th><th>face</th><th>who</th><th>probability</th><th>decision</th>"
            + "<th>next best</th><th>wrong? file it under</th></tr>\n"
        for face in faces {
            let record = face.record
            let who = record.name.isEmpty ? "class \(record.label)" : "\(record.name) (\(record.label))"
            let decision =
                record.accepted
                ? "accepted" : record.decision == "2" ? "unknown person (below \(record.threshold))" : "not a face"
            let next = record.top.dropFirst().first.map {
                "\($0.name.isEmpty ? $0.label : $0.name) \(String(format: "%.3f", $0.probability))"
            }
            page +=
                "<tr><td style=\"background:\(face.colour);width:8px\"></td>"
                + "<td><img class=\"thumbnail\" src=\"\(face.crop)\" alt=\"the face that was classified\"></td>"
                + "<td>\(HTMLText.escape(who))</td><td class=\"number\">\(String(format: "%.3f", record.probability))</td>"
                + "<td>\(decision)</td><td>\(HTMLText.escape(next ?? ""))</td><td>\(correctionForm(face, choices))</td></tr>\n"
        }
        return page + "</table>\n</body></html>\n"
    }

    /// The form that files one face of the test page under another class (`POST /correct`).
    private static func correctionForm(_ face: TestFaceRow, _ choices: [(value: String, label: String)]) -> String {
        guard let hash = face.cropHash else { return "" }
        let options = choices.map {
            "<option value=\"\(HTMLText.escape($0.value))\">\(HTMLText.escape($0.label))</option>"
        }
        // No class is chosen for the admin: a quick click must not file a stranger under the first user.
        return "<form method=\"post\" action=\"/correct\" class=\"correct\"><input type=\"hidden\" name=\"crop\" "
            + "value=\"\(hash)\"><select name=\"to\" required><option value=\"\" selected disabled>who is it?</option>"
            + "\(options.joined())</select> <button type=\"submit\">File</button></form>"
    }

    private var correctionsSection: String {
        guard !corrections.isEmpty else { return "" }
        var text =
            "<h2>Recent corrections</h2>\n<table id=\"corrections\"><tr><th></th><th>when</th><th>filed under</th>"
            + "<th>the model said</th><th>version</th></tr>\n"
        for row in corrections {
            let picture =
                row.thumbnail.map { "<img class=\"thumbnail\" alt=\"\" src=\"\(HTMLText.escape($0))\">" }
                ?? "<span class=\"muted\">removed</span>"
            text +=
                "<tr class=\"correction\"><td>\(picture)</td><td>\(HTMLText.escape(row.record.correctedAt))</td>"
                + "<td>\(HTMLText.escape(row.filedUnder))</td><td>\(HTMLText.escape(row.decided))</td>"
                + "<td class=\"number\">\(row.record.version.map(String.init) ?? "")</td></tr>\n"
        }
        return text + "</table>\n<p class=\"muted\">The next training learns from them.</p>\n"
    }

    /// `GET /people/{id}`: one person's crops, each with its face score and a button that deletes it.
    static func personPage(user: UserStore.Summary, crops: [(crop: UserStore.StoredCrop, thumbnail: String?)])
        -> String
    {
        var page = """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8"><title>facetrain serve: \(HTMLText.escape(user.name))</title>
            <style>\(style)</style></head><body>
            <h1>\(HTMLText.escape(user.name)) <span class="muted">(\(user.id))</span></h1>
            <p class="muted">\(HTMLText.escape(user.position ?? "")) · \(user.crops) crops · <a href="/">back to the admin page</a></p>

            """
        guard !crops.isEmpty else { return page + "<p class=\"muted\">No crops yet.</p>\n</body></html>\n" }
        page += "<table id=\"crops\"><tr><th></th><th>SHA-256</th><th>bytes</th><th>stored</th><th></th></tr>\n"
        for (crop, thumbnail) in crops {
            let picture =
                thumbnail.map { "<img class=\"thumbnail\" alt=\"\" src=\"\(HTMLText.escape($0))\">" }
                ?? "<span class=\"muted\">unreadable</span>"
            page +=
                "<tr class=\"crop\" id=\"crop-\(crop.sha256)\"><td>\(picture)</td><td><code>\(crop.sha256.prefix(12))</code></td>"
                + "<td class=\"number\">\(crop.bytes)</td><td>\(HTMLText.escape(crop.addedAt))</td>"
                + "<td><form method=\"post\" action=\"/people/\(user.id)/photos/\(crop.sha256)/delete\">"
                + "<button type=\"submit\">Delete</button></form></td></tr>\n"
        }
        return page + "</table>\n</body></html>\n"
    }

    private var usersSection: String {
        var text = "<h2>Users (\(users.count))</h2>\n"
        guard !users.isEmpty else {
            return text + "<p class=\"muted\">Nobody is registered yet: POST /v1/users, then their crops.</p>\n"
        }
        text += "<table id=\"users\"><tr><th></th><th>id</th><th>name</th><th>position</th><th>crops</th></tr>\n"
        for row in users {
            let picture =
                row.thumbnail.map { "<img class=\"thumbnail\" alt=\"\" src=\"\(HTMLText.escape($0))\">" }
                ?? "<span class=\"muted\">no crop</span>"
            text +=
                "<tr class=\"user\"><td>\(picture)</td><td class=\"number\">\(row.user.id)</td>"
                + "<td class=\"name\"><a href=\"/people/\(row.user.id)\">\(HTMLText.escape(row.user.name))</a></td>"
                + "<td>\(HTMLText.escape(row.user.position ?? ""))</td>"
                + "<td class=\"number\">\(row.user.crops)</td></tr>\n"
        }
        return text + "</table>\n"
    }

    private var versionsSection: String {
        var text = "<h2>Model versions (\(versions.count))</h2>\n"
        guard !versions.isEmpty else {
            return text + "<p class=\"muted\">No model is trained yet: POST /v1/training.</p>\n"
        }
        text +=
            "<table id=\"versions\"><tr><th>version</th><th>created</th><th>users</th><th>user accuracy</th>"
            + "<th>unknown FAR</th><th>non-face FAR</th><th>macro recall</th><th>files</th><th></th></tr>\n"
        func number(_ value: Double?) -> String { value.map { String(format: "%.3f", $0) } ?? "" }
        for row in versions.reversed() {
            let links = row.files.map {
                "<a href=\"/v1/models/\(row.version)/\(HTMLText.escape($0))\">\(HTMLText.escape($0))</a>"
            }
            .joined(separator: " ")
            let status =
                row.isPublished
                ? "<span class=\"badge\">published</span>"
                : row.problems.isEmpty
                    ? ""
                    : "<span class=\"error\">"
                        + HTMLText.escape(row.problems.map(\.description).joined(separator: "; ")) + "</span>"
            text +=
                "<tr class=\"version\(row.isPublished ? " published" : "")\" id=\"version-\(row.version)\">"
                + "<td class=\"number\">\(row.version)</td><td>\(HTMLText.escape(row.createdAt ?? ""))</td>"
                + "<td class=\"number\">\(row.users.map(String.init) ?? "")</td>"
                + "<td class=\"number\">\(number(row.metrics?.userAccuracy))</td>"
                + "<td class=\"number\">\(number(row.metrics?.unknownFalseAcceptRate))</td>"
                + "<td class=\"number\">\(number(row.metrics?.nonFaceFalseAcceptRate))</td>"
                + "<td class=\"number\">\(number(row.metrics?.macroUserRecall))</td>"
                + "<td>\(links)</td><td>\(status)</td></tr>\n"
        }
        text +=
            "</table>\n<p class=\"muted\">A report is made when it is opened, from the version's held-out "
            + "crops in the data folder (as <code>facetrain eval --report</code> does): it takes a few seconds, "
            + "and cannot be made once one of them is deleted.</p>\n"
        return text
    }

    /// The scoped tokens, a Revoke button each, and the form that creates one.
    private var tokensSection: String {
        var text = "<h2>Tokens (\(tokens.count))</h2>\n"
        if tokens.isEmpty {
            text +=
                "<p class=\"muted\">Only the --token-file token exists. Scoped tokens let a kiosk enrol people "
                + "(enrol) or the app recognise faces (app) without the admin's token.</p>\n"
        } else {
            text +=
                "<table id=\"tokens\"><tr><th>id</th><th>name</th><th>role</th><th>created</th><th>last used</th>"
                + "<th></th></tr>\n"
            for token in tokens {
                let name = HTMLText.escape(token.name)
                let used = HTMLText.escape(token.lastUsedAt ?? "never")
                text += "<tr class=\"token\"><td class=\"number\">\(token.id)</td><td>\(name)</td>"
                text += "<td>\(token.role.rawValue)</td><td>\(HTMLText.escape(token.createdAt))</td><td>\(used)</td>"
                text += "<td><form method=\"post\" action=\"/tokens/revoke\"><input type=\"hidden\" name=\"id\" "
                text += "value=\"\(token.id)\"><button type=\"submit\">Revoke</button></form></td></tr>\n"
            }
            text += "</table>\n"
        }
        let options = TokenRole.allCases.map { "<option value=\"\($0.rawValue)\">\($0.rawValue)</option>" }.joined()
        return text
            + "<form method=\"post\" action=\"/tokens\" id=\"new-token\"><label>Name <input type=\"text\" "
            + "name=\"name\" required maxlength=\"100\"></label> <label>Role <select name=\"role\">\(options)"
            + "</select></label> <button type=\"submit\">Create token</button></form>\n"
    }

    /// The answer to "Create token": the secret, shown this once.
    static func newTokenPage(_ token: AccessToken, secret: String) -> String {
        """
        <!DOCTYPE html>
        <html lang="en"><head><meta charset="utf-8"><title>facetrain serve: new token</title>
        <style>\(style)</style></head><body>
        <h1>Token \(token.id): \(HTMLText.escape(token.name)) (\(token.role.rawValue))</h1>
        <p>Copy the secret now: it is shown this once, and the server keeps only its SHA-256.</p>
        <p><code id="secret">\(HTMLText.escape(secret))</code></p>
        <p class="muted">Clients send it as <code>Authorization: Bearer &lt;secret&gt;</code>.</p>
        <p><a href="/#tokens">back to the admin page</a></p></body></html>

        """
    }

    /// The form `GET /` shows a browser without a session.
    static func loginPage(message: String?) -> String {
        """
        <!DOCTYPE html>
        <html lang="en"><head><meta charset="utf-8"><title>facetrain serve: log in</title>
        <style>\(style)</style></head><body>
        <h1>facetrain serve</h1>
        \(message.map { "<p class=\"error\" id=\"login-error\">\(HTMLText.escape($0))</p>\n" } ?? "")\
        <form method="post" action="/login" id="login">
        <input type="text" name="username" value="admin" autocomplete="username" hidden>
        <label>Token (the server's --token-file): <input type="password" name="token" autocomplete="current-password" required></label>
        <button type="submit">Log in</button></form>
        </body></html>

        """
    }
}

extension ServerRoutes {
    static let sessionCookie = "facetrain_admin"
    /// Seconds a login lasts.
    static let sessionSeconds = 12 * 3600

    /// The cookie value a login sets: derived from the token's digest (not the token) and the data
    /// folder's drawn session key, so the cookie opens the admin page and nothing else, cannot be
    /// computed from a guess of the token, and stays valid across restarts with the same token.
    func sessionValue(tokenDigest: String) -> String {
        SHA256.hash(Data("facetrain admin session\n\(tokens.sessionKey)\n\(tokenDigest)".utf8))
    }

    /// The bearer token, or the session cookie of a login (compared in constant time).
    func isAdmin(_ request: HTTPRequest) -> Bool {
        guard let tokenDigest else { return true }
        if request.header("authorization") != nil, (try? bearer(request))?.role == .admin { return true }
        return hasAdminSession(request, tokenDigest: tokenDigest)
    }

    /// The session cookie of a login with the token whose digest is `tokenDigest`.
    func hasAdminSession(_ request: HTTPRequest, tokenDigest: String) -> Bool {
        guard let cookie = request.cookies[Self.sessionCookie], cookie.utf8.count == 64 else { return false }
        return Self.constantTimeEqual(
            SHA256.hash(Data(cookie.utf8)), SHA256.hash(Data(sessionValue(tokenDigest: tokenDigest).utf8)))
    }

    /// Browsers get HTML; curl and the app get the JSON errors every other route answers.
    private func wantsHTML(_ request: HTTPRequest) -> Bool {
        request.header("accept")?.contains("text/html") == true
    }

    func htmlResponse(_ status: Int, _ html: String, headers: [(String, String)] = []) -> HTTPResponse {
        HTTPResponse(
            status: status,
            headers: [
                ("Content-Type", "text/html; charset=utf-8"),
                ("Content-Security-Policy", AdminPage.contentSecurityPolicy),
                ("X-Content-Type-Options", "nosniff"), ("Referrer-Policy", "no-referrer"),
                ("Cache-Control", "no-store"),
            ] + headers, body: Data(html.utf8))
    }

    func adminPage(_ request: HTTPRequest) -> HTTPResponse {
        guard isAdmin(request) else {
            guard wantsHTML(request) else {
                return ServerResponses.error(
                    401,
                    "the admin page needs the token: log in with the form at / in a browser, or send "
                        + "'Authorization: Bearer <token>'", headers: [("WWW-Authenticate", "Bearer")])
            }
            return htmlResponse(401, AdminPage.loginPage(message: nil))
        }
        let users = store.list().map { user in
            AdminPage.UserRow(
                user: user,
                thumbnail: store.firstCrop(user.id).flatMap { url in thumbnails.value(for: url) { Self.thumbnail(url) }
                })
        }
        let published = (try? repository.latestPointer())??.version
        let versions = ((try? repository.versions()) ?? []).map { version -> AdminPage.VersionRow in
            let verification = BundleVerifier.verify(repository.bundleURL(version: version))
            let present = Set(verification.manifest?.files.map(\.path) ?? [])
            return AdminPage.VersionRow(
                version: version, createdAt: verification.manifest?.createdAt,
                users: verification.manifest?.users.count, metrics: verification.metrics,
                isPublished: version == published, problems: verification.problems,
                files: [BundleVerifier.coreMLName, BundleVerifier.onnxName].filter(present.contains)
                    + [BundleVerifier.manifestName] + (verification.problems.isEmpty ? [AdminPage.reportName] : []))
        }
        var page = AdminPage(
            users: users, versions: versions, jobs: queue.all(), publishedVersion: published,
            canLogOut: tokenDigest != nil)
        page.tokens = tokens.list()
        let names = Dictionary(uniqueKeysWithValues: users.map { ($0.user.id, $0.user.name) })
        func describe(_ id: Int?) -> String {
            switch id.flatMap({ ClassLabel(id: $0) }) {
            case nil: "rejected the face"
            case .unknownPerson?: "a stranger"
            case .notAFace?: "not a face"
            case .user(let user)?: names[user].map { "\($0) (\(user))" } ?? "user \(user)"
            }
        }
        page.corrections = ((try? eraser.corrections.records()) ?? []).suffix(10).reversed().map { record in
            AdminPage.CorrectionRow(
                record: record, filedUnder: describe(record.filedUnder), decided: describe(record.decidedUser),
                thumbnail: (try? store.cropFile(record.filedUnder, sha256: record.crop)).flatMap { url in
                    thumbnails.value(for: url) { Self.thumbnail(url) }
                })
        }
        return htmlResponse(200, page.html)
    }

    /// A 48-pixel-wide BMP of the crop, or nil when it cannot be decoded.
    static func thumbnail(_ url: URL) -> String? {
        guard let image = try? ImageDecoder.decode(contentsOf: url), image.width > 0 else { return nil }
        let height = max(1, min(96, image.height * 48 / image.width))
        return Thumbnail.bmpDataURI(image.resized(width: 48, height: height))
    }

    /// The login form's POST: the token in the field `token`; sets the session cookie and goes to `/`.
    func login(_ request: HTTPRequest) -> HTTPResponse {
        guard let tokenDigest else { return HTTPResponse(status: 303, headers: [("Location", "/")]) }
        let given = request.fields["token"].map { SHA256.hash(Data($0.trimmingCharacters(in: .whitespaces).utf8)) }
        guard let given, Self.constantTimeEqual(given, tokenDigest) else {
            guard wantsHTML(request) else {
                return ServerResponses.error(
                    401, "wrong or missing token: post the form field 'token' with the server's --token-file content")
            }
            return htmlResponse(401, AdminPage.loginPage(message: "That is not the server's token."))
        }
        let cookie =
            "\(Self.sessionCookie)=\(sessionValue(tokenDigest: tokenDigest)); Path=/; Max-Age=\(Self.sessionSeconds); "
            + "HttpOnly; SameSite=Strict" + (secureCookies ? "; Secure" : "")
        return HTTPResponse(
            status: 303, headers: [("Location", "/"), ("Set-Cookie", cookie), ("Cache-Control", "no-store")])
    }

    func logout() -> HTTPResponse {
        let cookie =
            "\(Self.sessionCookie)=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict" + (secureCookies ? "; Secure" : "")
        return HTTPResponse(status: 303, headers: [("Location", "/"), ("Set-Cookie", cookie)])
    }
}

extension ServerRoutes {
    /// `GET /people/{id}`: the person's crops for the admin (the session or the token).
    func personPage(_ id: Int, _ request: HTTPRequest) throws -> HTTPResponse {
        guard isAdmin(request) else { return htmlResponse(401, AdminPage.loginPage(message: nil)) }
        guard let user = store.user(id) else { throw UserStoreError.noSuchUser(id: id) }
        let crops = try store.storedCrops(id).map { crop in
            (
                crop,
                (try? store.cropFile(id, sha256: crop.sha256)).flatMap { url in
                    thumbnails.value(for: url) { Self.thumbnail(url) }
                }
            )
        }
        return htmlResponse(200, AdminPage.personPage(user: user, crops: crops))
    }

    /// The person page's Delete button: removes the crop, then shows the page again. A form of
    /// another site cannot post here: the session cookie is SameSite=Strict, and `preflight` refuses
    /// an Origin that is not this server's.
    func deleteFromPersonPage(_ id: Int, _ sha256: String, _ request: HTTPRequest) throws -> HTTPResponse {
        guard isAdmin(request) else { return htmlResponse(401, AdminPage.loginPage(message: nil)) }
        try store.deleteCrop(id, sha256: sha256)
        queue.noteChange()
        return HTTPResponse(status: 303, headers: [("Location", "/people/\(id)"), ("Cache-Control", "no-store")])
    }

    /// `POST /test-photo`: the admin page's form; the published model on the faces of one photo,
    /// answered as a page with the faces drawn.
    func testPhoto(_ request: HTTPRequest) -> HTTPResponse {
        guard isAdmin(request) else { return htmlResponse(401, AdminPage.loginPage(message: nil)) }
        do {
            let image = try uploadedImage(request)
            let (version, faces) = try recognition.recognize(image, version: nil)
            let green: (UInt8, UInt8, UInt8) = (30, 142, 62)
            let orange: (UInt8, UInt8, UInt8) = (230, 120, 0)
            let colours = faces.map { $0.classification.accepted ? green : orange }
            var drawn = DetectionDrawing.draw(faces.map(\.detection), on: image, colours: colours)
            let longer = max(drawn.width, drawn.height)
            if longer > 800 {
                drawn = drawn.resized(width: drawn.width * 800 / longer, height: drawn.height * 800 / longer)
            }
            let jpeg = try JPEGWriter.encode(rgb: drawn.pixels, width: drawn.width, height: drawn.height, quality: 85)
            let rows = zip(faces, colours).map { face, colour in
                AdminPage.TestFaceRow(
                    colour: String(format: "#%02x%02x%02x", colour.0, colour.1, colour.2),
                    crop: Thumbnail.bmpDataURI(face.crop.converted(channels: 3).resized(width: 48, height: 48)),
                    record: RecognizedFaceRecord(face, top: Self.recognitionTop),
                    cropHash: recognition.remember(face, version: version))
            }
            return htmlResponse(
                200,
                AdminPage.testPhotoPage(
                    version: version, drawn: "data:image/jpeg;base64," + jpeg.base64EncodedString(), faces: rows,
                    choices: AdminPage.correctionChoices(store.list())))
        } catch {
            let refusal = ClientError(answering: error)
            return htmlResponse(refusal.status, AdminPage.messagePage(title: "Test a photo", message: refusal.message))
        }
    }

    /// `POST /correct`: the test page's form (`crop`, `to`: a user id, "stranger" or "not_a_face");
    /// files the face and goes back to the admin page, which lists it under "Recent corrections".
    func correctFromTestPage(_ request: HTTPRequest) -> HTTPResponse {
        guard isAdmin(request) else { return htmlResponse(401, AdminPage.loginPage(message: nil)) }
        let target: Int? =
            switch request.fields["to"] {
            case "stranger"?: ClassLabel.unknownPerson.id
            case "not_a_face"?: ClassLabel.notAFace.id
            case let text?: ModelRepository.parseVersion(text).flatMap { ClassLabel.isUser(id: $0) ? $0 : nil }
            case nil: nil
            }
        do {
            guard let hash = request.fields["crop"], Route.isSHA256(hash), let target else {
                throw ClientError(400, "the form needs a crop and where to file it; test the photo again")
            }
            _ = try fileCorrection(hash, under: target)
            return HTTPResponse(status: 303, headers: [("Location", "/#corrections"), ("Cache-Control", "no-store")])
        } catch {
            let refusal = ClientError(answering: error)
            return htmlResponse(
                refusal.status, AdminPage.messagePage(title: "Correct a face", message: refusal.message))
        }
    }

    /// `GET /v1/models/{version}/report.html`: the page `facetrain eval --report` writes, made now from
    /// the version's held-out crops in the data folder. Never stored: it shows crops, and a deletion
    /// has to take those away.
    func report(_ version: Int) throws -> HTTPResponse {
        let folder = repository.bundleURL(version: version)
        guard FileSystem.kind(at: folder) == .directory else {
            throw ClientError(404, "there is no version \(version); GET /v1/models lists the versions")
        }
        let bundle: ModelBundle
        do {
            bundle = try ModelBundle.open(folder)
        } catch {
            throw ClientError(409, "version \(version) cannot be opened, so it has no report: \(error)")
        }
        let evaluation = HeldOutEvaluation(bundle: bundle)
        let samples: [FaceSample]
        do {
            // Held still while it is read, as for a training.
            samples = try evaluation.heldOutSamples(in: store.root) { folder, options in
                store.beginReading()
                defer { store.endReading() }
                return try FaceDataset.load(from: folder, options: options)
            }
        } catch HeldOutEvaluationError.noHeldOutRecord {
            throw ClientError(
                409, "version \(version)'s metrics.json records no held-out crops, so there is nothing to report on")
        } catch HeldOutEvaluationError.heldOutMissing(_, let found, let expected) {
            throw ClientError(
                409,
                "\(expected - found) of the \(expected) held-out crops of version \(version) are no "
                    + "longer in the data folder (a person was deleted, or crops removed), so its report cannot be "
                    + "made; a version trained since has its own")
        }
        let run = try evaluation.run(on: samples, withEmbeddings: true)
        let page = HTMLReport(bundle: bundle, run: run, samples: samples)
        return htmlResponse(200, page.html)
    }
}
