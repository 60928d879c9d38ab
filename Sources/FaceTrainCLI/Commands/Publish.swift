import FaceTrain
import Foundation

/// `facetrain publish`: the evaluation gate, then an atomic switch of models/latest.json.
struct Publish: Command {
    static let name = "publish"
    static let abstract = "Gate a verified bundle on its metrics and make it the published (latest) version."
    static let arguments = "<bundle>"
    static var options: [OptionSpec] {
        [
            .option("models", "dir", "Models directory, when <bundle> is a bare version number.", default: "models")
        ] + GateOptions.specs(server: false) + [
            .option(
                "base-url", "url",
                "Prefix for the model URL in latest.json (default: relative '<version>/FaceClassifier.mlmodel')."),
            .flag("force", "Publish even when the metric gate refuses (verification is never skipped)."),
        ]
    }
    let bundle: String
    let models: URL
    let gate: PublishGate
    let baseURL: String?
    let force: Bool

    init(arguments: ParsedArguments) throws {
        try arguments.expectPositionals(atMost: 1)
        guard let bundle = arguments.positionals.first else {
            throw UsageError(message: "Missing expected argument '<bundle>'")
        }
        self.bundle = bundle
        models = URL(fileURLWithPath: arguments.string("models") ?? "models")
        gate = try GateOptions.gate(arguments)
        baseURL = arguments.string("base-url")
        try validateBaseURL(baseURL)
        force = arguments.flag("force")
    }

    func run() throws -> ExitCode {
        let (repository, version) = try BundleArgument.resolve(bundle, models: models)
        do {
            let outcome = try repository.publish(
                version: version, gate: gate, force: force, baseURL: baseURL,
                beforeRename: { TestHooks.pause(at: "pointer-written") })
            for skipped in outcome.skipped {
                printError("WARNING: --force: published DESPITE the gate: \(skipped)")
            }
            for note in outcome.notes { printError("note: \(note)") }
            if outcome.unchanged {
                print("version \(version) is already published; latest.json unchanged")
            } else {
                print(
                    "published version \(version): \(repository.directory.path)/\(ModelRepository.pointerName) -> "
                        + "\(outcome.pointer.url) (sha256 \(outcome.pointer.sha256))")
            }
            return .success
        } catch let refusal as PublishRefused {
            let hint = refusal.forceable ? " (--force overrides the metric gate)" : ""
            printError("refused: " + refusal.description.replacingOccurrences(of: "\n", with: " ") + hint)
            return .refused
        }
    }
}

/// "models/7", "7" or "models/latest" → the models directory and the version number.
enum BundleArgument {
    static func resolve(_ argument: String, models: URL) throws -> (ModelRepository, Int) {
        let url = try ModelRepository.locateBundle(argument, modelsDirectory: models)
        guard let version = ModelRepository.parseVersion(url.lastPathComponent) else {
            throw UsageError(message: "'\(argument)' is not a version directory such as models/7")
        }
        return (ModelRepository(directory: url.deletingLastPathComponent()), version)
    }
}
