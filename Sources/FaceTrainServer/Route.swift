import FaceTrain
import Foundation

/// What a request path names, matched component by component against fixed words and canonical
/// integers (`7`, not `07`), so no file path is ever built from what a client sent; the methods each
/// route answers and the roles a scoped token needs for it. The one table that the router's 404 and
/// 405 answers, OpenAPIDocument and the token checks read. Not the handlers (ServerRoutes) nor the
/// HTTP parsing (HTTPServer).
enum Route: Equatable {
    case admin, login, logout, health, metrics
    /// The admin page's "Test a photo" form.
    case testPhoto
    /// The admin page of one person's crops, and its Delete buttons.
    case person(id: Int)
    case personPhotoDelete(id: Int, sha256: String)
    /// The test page's "file this face under" form.
    case correctForm
    case model, models
    case download(version: Int, file: String)
    /// The version's HTML evaluation report, made on request from its held-out crops.
    case report(version: Int)
    case publish(version: Int)
    case rollback(version: Int)
    case users
    case user(id: Int)
    case photos(id: Int)
    /// One crop of a user, by its SHA-256.
    case photo(id: Int, sha256: String)
    /// Is the face in the photo this user? (`POST /v1/users/{id}/verify`)
    case verify(id: Int)
    /// Who is in the photo? (`POST /v1/recognize`)
    case recognize
    /// A face crop a recognition returned, kept a while so it can be corrected.
    case recognizedCrop(sha256: String)
    /// Files a recognised face under the right class (`POST /v1/corrections`), or lists them.
    case corrections
    /// Crops of class 2 (`/v1/strangers/photos`) or class 1 (`/v1/non-faces/photos`).
    case classPhotos(label: Int)
    case classPhoto(label: Int, sha256: String)
    case trainings
    case training(job: Int)
    /// Scoped tokens: created and listed (`/v1/tokens`), revoked (`/v1/tokens/{id}`).
    case tokens
    case token(id: Int)
    /// The admin page's forms that create and revoke a token.
    case tokenForm, tokenRevokeForm
    /// This API's OpenAPI description (`GET /openapi.json`, open like the health check).
    case openAPI

    init?(path: String) {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map(String.init)
        let number = parts.count > 2 ? ModelRepository.parseVersion(parts[2]) : nil
        switch parts {
        case [""]: self = .admin
        case ["login"]: self = .login
        case ["logout"]: self = .logout
        case ["test-photo"]: self = .testPhoto
        case ["correct"]: self = .correctForm
        case ["tokens"]: self = .tokenForm
        case ["tokens", "revoke"]: self = .tokenRevokeForm
        case ["v1", "tokens"]: self = .tokens
        case let path where path.count == 2 && path[0] == "people" && ModelRepository.parseVersion(path[1]) != nil:
            self = .person(id: ModelRepository.parseVersion(path[1])!)
        case let path
        where path.count == 5 && path[0] == "people" && ModelRepository.parseVersion(path[1]) != nil
            && path[2] == "photos" && Route.isSHA256(path[3]) && path[4] == "delete":
            self = .personPhotoDelete(id: ModelRepository.parseVersion(path[1])!, sha256: path[3])
        case ["healthz"]: self = .health
        case ["openapi.json"]: self = .openAPI
        case ["metrics"]: self = .metrics
        case ["v1", "model"]: self = .model
        case ["v1", "models"]: self = .models
        case ["v1", "users"]: self = .users
        case ["v1", "training"]: self = .trainings
        case ["v1", "recognize"]: self = .recognize
        case ["v1", "corrections"]: self = .corrections
        case let path where path.count == 4 && path[0...2] == ["v1", "recognize", "crops"] && Route.isSHA256(path[3]):
            self = .recognizedCrop(sha256: path[3])
        case let path
        where path.count == 3 && path[0] == "v1" && Route.classFolders[path[1]] != nil && path[2] == "photos":
            self = .classPhotos(label: Route.classFolders[path[1]]!)
        case let path
        where path.count == 4 && path[0] == "v1" && Route.classFolders[path[1]] != nil && path[2] == "photos"
            && Route.isSHA256(path[3]):
            self = .classPhoto(label: Route.classFolders[path[1]]!, sha256: path[3])
        case let path where path.count == 3 && path[0] == "v1" && number != nil:
            switch path[1] {
            case "users": self = .user(id: number!)
            case "training": self = .training(job: number!)
            case "tokens": self = .token(id: number!)
            default: return nil
            }
        case let path where path.count == 4 && path[0] == "v1" && number != nil:
            switch (path[1], path[3]) {
            case ("users", "photos"): self = .photos(id: number!)
            case ("users", "verify"): self = .verify(id: number!)
            case ("models", "publish"): self = .publish(version: number!)
            case ("models", "rollback"): self = .rollback(version: number!)
            case ("models", AdminPage.reportName): self = .report(version: number!)
            case ("models", let file) where ServerRoutes.downloads[file] != nil:
                self = .download(version: number!, file: file)
            default: return nil
            }
        case let path
        where path.count == 5 && path[0] == "v1" && path[1] == "users" && number != nil && path[3] == "photos"
            && Route.isSHA256(path[4]):
            self = .photo(id: number!, sha256: path[4])
        default: return nil
        }
    }

    /// The path word of classes 2 and 1, whose crops are uploaded like a user's.
    static let classFolders = ["strangers": ClassLabel.unknownPerson.id, "non-faces": ClassLabel.notAFace.id]

    /// The path of a user's or class's crops.
    static func photosPath(_ id: Int) -> String {
        switch ClassLabel(id: id) {
        case .unknownPerson?: "/v1/strangers/photos"
        case .notAFace?: "/v1/non-faces/photos"
        default: "/v1/users/\(id)/photos"
        }
    }

    /// 64 lower-case hexadecimal digits: the only crop names a path may carry.
    static func isSHA256(_ text: String) -> Bool {
        text.utf8.count == 64 && text.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }

    /// The path with its numbers as placeholders: the `route` label of /metrics.
    var template: String {
        switch self {
        case .admin: return "/"
        case .login: return "/login"
        case .logout: return "/logout"
        case .testPhoto: return "/test-photo"
        case .person: return "/people/{id}"
        case .personPhotoDelete: return "/people/{id}/photos/{sha256}/delete"
        case .correctForm: return "/correct"
        case .health: return "/healthz"
        case .metrics: return "/metrics"
        case .model: return "/v1/model"
        case .models: return "/v1/models"
        case .download(_, let file): return "/v1/models/{version}/\(file)"
        case .publish: return "/v1/models/{version}/publish"
        case .rollback: return "/v1/models/{version}/rollback"
        case .report: return "/v1/models/{version}/\(AdminPage.reportName)"
        case .users: return "/v1/users"
        case .user: return "/v1/users/{id}"
        case .photos: return "/v1/users/{id}/photos"
        case .photo: return "/v1/users/{id}/photos/{sha256}"
        case .verify: return "/v1/users/{id}/verify"
        case .recognize: return "/v1/recognize"
        case .recognizedCrop: return "/v1/recognize/crops/{sha256}"
        case .corrections: return "/v1/corrections"
        case .classPhotos(let label): return Route.photosPath(label)
        case .classPhoto(let label, _): return Route.photosPath(label) + "/{sha256}"
        case .trainings: return "/v1/training"
        case .training: return "/v1/training/{job}"
        case .tokens: return "/v1/tokens"
        case .token: return "/v1/tokens/{id}"
        case .tokenForm: return "/tokens"
        case .tokenRevokeForm: return "/tokens/revoke"
        case .openAPI: return "/openapi.json"
        }
    }

    /// The methods the route answers; any other gets 405 with them in `Allow`.
    var methods: [String] {
        switch self {
        case .admin, .download: return ["GET", "HEAD"]
        case .login, .logout, .testPhoto, .personPhotoDelete, .correctForm, .publish, .rollback, .recognize, .verify,
            .tokenForm, .tokenRevokeForm:
            return ["POST"]
        case .person, .health, .metrics, .model, .models, .report, .recognizedCrop, .training, .openAPI:
            return ["GET"]
        case .users, .photos, .classPhotos, .corrections, .trainings, .tokens: return ["GET", "POST"]
        case .token: return ["DELETE"]
        case .user: return ["GET", "PATCH", "DELETE"]
        case .photo, .classPhoto: return ["GET", "DELETE"]
        }
    }

    /// Each kind of route, without its path's values: the compiler makes `kind` name every case, and
    /// `CaseIterable` then lists them all, so `Route.all` cannot miss one.
    enum Kind: CaseIterable {
        case admin, login, logout, testPhoto, person, personPhotoDelete, correctForm, health, metrics, model, models
        case download, report, publish, rollback, users, user, photos, photo, verify, recognize, recognizedCrop
        case corrections, classPhotos, classPhoto, trainings, training, openAPI, tokens, token, tokenForm
        case tokenRevokeForm

        /// One route of the kind for each path template it has (a download per file, a class per folder).
        var routes: [Route] {
            let hash = String(repeating: "0", count: 64)
            switch self {
            case .admin: return [.admin]
            case .login: return [.login]
            case .logout: return [.logout]
            case .testPhoto: return [.testPhoto]
            case .person: return [.person(id: 3)]
            case .personPhotoDelete: return [.personPhotoDelete(id: 3, sha256: hash)]
            case .correctForm: return [.correctForm]
            case .health: return [.health]
            case .metrics: return [.metrics]
            case .model: return [.model]
            case .models: return [.models]
            case .download: return ServerRoutes.downloads.keys.sorted().map { .download(version: 1, file: $0) }
            case .report: return [.report(version: 1)]
            case .publish: return [.publish(version: 1)]
            case .rollback: return [.rollback(version: 1)]
            case .users: return [.users]
            case .user: return [.user(id: 3)]
            case .photos: return [.photos(id: 3)]
            case .photo: return [.photo(id: 3, sha256: hash)]
            case .verify: return [.verify(id: 3)]
            case .recognize: return [.recognize]
            case .recognizedCrop: return [.recognizedCrop(sha256: hash)]
            case .corrections: return [.corrections]
            case .classPhotos: return Route.classFolders.values.sorted().map { .classPhotos(label: $0) }
            case .classPhoto: return Route.classFolders.values.sorted().map { .classPhoto(label: $0, sha256: hash) }
            case .trainings: return [.trainings]
            case .training: return [.training(job: 1)]
            case .openAPI: return [.openAPI]
            case .tokens: return [.tokens]
            case .token: return [.token(id: 1)]
            case .tokenForm: return [.tokenForm]
            case .tokenRevokeForm: return [.tokenRevokeForm]
            }
        }
    }

    var kind: Kind {
        switch self {
        case .admin: .admin
        case .login: .login
        case .logout: .logout
        case .testPhoto: .testPhoto
        case .person: .person
        case .personPhotoDelete: .personPhotoDelete
        case .correctForm: .correctForm
        case .health: .health
        case .metrics: .metrics
        case .model: .model
        case .models: .models
        case .download: .download
        case .report: .report
        case .publish: .publish
        case .rollback: .rollback
        case .users: .users
        case .user: .user
        case .photos: .photos
        case .photo: .photo
        case .verify: .verify
        case .recognize: .recognize
        case .recognizedCrop: .recognizedCrop
        case .corrections: .corrections
        case .classPhotos: .classPhotos
        case .classPhoto: .classPhoto
        case .trainings: .trainings
        case .training: .training
        case .openAPI: .openAPI
        case .tokens: .tokens
        case .token: .token
        case .tokenForm: .tokenForm
        case .tokenRevokeForm: .tokenRevokeForm
        }
    }

    /// Every route, one per path template.
    static let all: [Route] = Kind.allCases.flatMap(\.routes)

    /// Every operation the router answers: (method, path template), as the OpenAPI document must list them.
    static var operations: [(method: String, template: String)] {
        all.flatMap { route in route.methods.map { (method: $0, template: route.template) } }
    }

    /// The `route` label of paths that match no route.
    static let unmatchedTemplate = "unmatched"
}

extension Route {
    /// The roles whose tokens may use this route with `method`: the one table of what a scoped token
    /// opens (the admin role opens everything; routes without a token check never ask).
    func roles(_ method: String) -> Set<TokenRole> {
        switch (self, method) {
        case (.users, "POST"), (.photos, "POST"): [.admin, .enrol]
        case (.model, _), (.models, _), (.download, _), (.recognize, _), (.verify, _), (.recognizedCrop, _):
            [.admin, .app]
        default: [.admin]
        }
    }
}
