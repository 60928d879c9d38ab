import FaceTrain
import Foundation

/// The scoped tokens' routes: `POST/GET /v1/tokens`, `DELETE /v1/tokens/{id}` (admin only, as the
/// role table says), and the admin page's forms `POST /tokens` and `POST /tokens/revoke`. Who may
/// use which route is `Route.roles`, not here.
extension ServerRoutes {
    /// A token as the API lists it: never its digest.
    static func listed(_ token: AccessToken) -> JSONValue {
        .object([
            "id": .integer(token.id), "name": .string(token.name), "role": .string(token.role.rawValue),
            "createdAt": .string(token.createdAt), "lastUsedAt": token.lastUsedAt.map { .string($0) } ?? .null,
        ])
    }

    /// Without `--token-file` every route is open, so a scoped token would restrict nothing.
    private func requireTokenFile() throws {
        guard tokenDigest != nil else {
            throw ClientError(
                409,
                "this server runs without --token-file, so every route is open (on loopback only) and a scoped "
                    + "token would restrict nothing; restart it with --token-file to use scoped tokens")
        }
    }

    /// The role a client named, or 400 naming the roles.
    private func role(_ text: String?) throws -> TokenRole {
        let roles = TokenRole.allCases.map(\.rawValue).joined(separator: ", ")
        guard let text, let role = TokenRole(rawValue: text) else {
            throw ClientError(
                400,
                "\"role\" must be one of \(roles) (enrol: register people and upload their crops; app: model "
                    + "reads, recognise, verify; admin: everything)")
        }
        return role
    }

    func tokenRoute(_ route: Route, _ request: HTTPRequest) throws -> HTTPResponse {
        switch (route, request.method) {
        case (.tokens, "GET"):
            try authorize(request, route)
            return ServerResponses.json(200, ["tokens": .array(tokens.list().map(Self.listed))])
        case (.tokens, "POST"):
            try authorize(request, route)
            try requireTokenFile()
            let body = try jsonObject(request, allowed: ["name", "role"])
            guard case .string(let name)? = body["name"] else {
                throw ClientError(400, "send {\"name\": \"front desk\", \"role\": \"enrol\"}; \"name\" is missing")
            }
            let roleText: String? = if case .string(let text)? = body["role"] { text } else { nil }
            let (token, secret) = try tokens.create(name: name, role: try role(roleText))
            return ServerResponses.json(
                201,
                [
                    "token": Self.listed(token), "secret": .string(secret),
                    "note": .string(
                        "the secret is shown this once and only its SHA-256 is kept: give it to the client now "
                            + "(Authorization: Bearer <secret>); DELETE /v1/tokens/\(token.id) revokes it"),
                ], headers: [("Location", "/v1/tokens/\(token.id)"), ("Cache-Control", "no-store")])
        case (.tokens, _):
            return notAllowed(route.methods, request.method)
        case (.token(let id), "DELETE"):
            try authorize(request, route)
            let token = try tokens.revoke(id)
            return ServerResponses.json(
                200,
                [
                    "revoked": Self.listed(token),
                    "note": .string("requests with it are refused from now on (401)"),
                ])
        case (.token, _):
            return notAllowed(route.methods, request.method)
        case (.tokenForm, "POST"):
            return tokenFromAdminPage(request)
        case (.tokenRevokeForm, "POST"):
            return revokeFromAdminPage(request)
        default:
            return notAllowed(route.methods, request.method)
        }
    }

    /// `POST /tokens` (fields `name`, `role`): creates the token and shows its secret on a page, once.
    private func tokenFromAdminPage(_ request: HTTPRequest) -> HTTPResponse {
        guard isAdmin(request) else { return htmlResponse(401, AdminPage.loginPage(message: nil)) }
        do {
            try requireTokenFile()
            let (token, secret) = try tokens.create(
                name: request.fields["name"] ?? "", role: try role(request.fields["role"]))
            return htmlResponse(201, AdminPage.newTokenPage(token, secret: secret))
        } catch {
            let refusal = ClientError(answering: error)
            return htmlResponse(
                refusal.status, AdminPage.messagePage(title: "Create a token", message: refusal.message))
        }
    }

    /// `POST /tokens/revoke` (field `id`): revokes the token and goes back to the admin page.
    private func revokeFromAdminPage(_ request: HTTPRequest) -> HTTPResponse {
        guard isAdmin(request) else { return htmlResponse(401, AdminPage.loginPage(message: nil)) }
        do {
            guard let id = request.fields["id"].flatMap(ModelRepository.parseVersion) else {
                throw ClientError(400, "the form needs the id of the token to revoke; reload the admin page")
            }
            try tokens.revoke(id)
            return HTTPResponse(status: 303, headers: [("Location", "/#tokens"), ("Cache-Control", "no-store")])
        } catch {
            let refusal = ClientError(answering: error)
            return htmlResponse(
                refusal.status, AdminPage.messagePage(title: "Revoke a token", message: refusal.message))
        }
    }
}
