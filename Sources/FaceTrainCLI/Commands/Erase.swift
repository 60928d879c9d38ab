import FaceTrain
import FaceTrainServer
import Foundation

/// `facetrain erase`: forgets one person without a server, as `DELETE /v1/users/{id}` does with
/// one (PersonEraser): crops, entry, cached embeddings, corrections, and every bundle trained on
/// them; the erasure log says what was removed. Refused while a server or a fit works on the folders.
struct Erase: Command {
    static let name = "erase"
    static let abstract = "Forget a person: crops, embeddings and every model version trained on them."
    static var options: [OptionSpec] {
        [
            .required("data", "dir", "Data folder (<id>/ crops and users.json)."),
            .required("models", "dir", "Models folder whose bundles, caches and latest.json are scrubbed."),
            .required("user", "id", "The user id to erase (3 or more)."),
            .flag("json", "Print the erasure record as JSON."),
        ]
    }
    let data: URL
    let models: URL
    let user: Int
    let json: Bool

    init(arguments: ParsedArguments) throws {
        try arguments.expectPositionals(atMost: 0)
        data = URL(fileURLWithPath: try arguments.required("data"))
        models = URL(fileURLWithPath: try arguments.required("models"))
        let text: String = try arguments.required("user")
        guard let user = Int(text), ClassLabel.isUser(id: user) else {
            throw UsageError(message: "--user takes a user id of 3 or more (1 and 2 are classes), got '\(text)'")
        }
        self.user = user
        json = arguments.flag("json")
    }

    func run() throws -> ExitCode {
        guard FileSystem.kind(at: data) == .directory else {
            printError("Error: --data \(data.path) is not a folder; give the data folder the person's crops are in")
            return .failure
        }
        let ownership = try FolderOwnership.claim([data, models], for: "facetrain erase")
        defer { ownership.release() }
        let scrub = ModelsScrub(models: models)
        if let writer = scrub.writerInProgress() {
            printError(
                "Error: a fit is writing into \(models.path) (\(writer)); what it writes would hold the person. "
                    + "Wait for it or stop it, then erase")
            return .failure
        }
        let eraser = PersonEraser(store: try UserStore(root: data), models: models)
        let record: ErasureRecord
        do { record = try eraser.erase(user, by: "facetrain erase").record } catch UserStoreError.noSuchUser {
            printError(
                "Error: there is no user \(user) in \(data.path), and no model version in \(models.path) was "
                    + "trained on them: nothing to erase (\(ErasureLog.name) there lists past erasures)")
            return .failure
        }
        if json {
            print(String(decoding: try JSONText.data(record, pretty: false), as: UTF8.self))
            return .success
        }
        var lines = ["erased user \(user): \(record.crops) crops, \(record.embeddings) cached embeddings"]
        if record.withdrawnVersions.isEmpty {
            lines.append("no model version was trained on them")
        } else {
            lines.append(
                "withdrew version(s) " + record.withdrawnVersions.map(String.init).joined(separator: ", ")
                    + " (removed; their numbers are never given out again)")
        }
        if let version = record.unpublishedVersion {
            lines.append(
                "version \(version) was the published one: nothing is published now; train without them "
                    + "(facetrain fit --data \(data.path) --out \(models.path)) and publish")
        }
        if record.checkpoints > 0 { lines.append("removed \(record.checkpoints) checkpoint(s) of interrupted fits") }
        if record.corrections > 0 { lines.append("removed \(record.corrections) correction(s) that named them") }
        lines.append("recorded in \(eraser.log.url.path) (no name, no face)")
        print(lines.joined(separator: "\n"))
        return .success
    }
}
