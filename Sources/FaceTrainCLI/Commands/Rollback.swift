import FaceTrain
import FaceTrainSynthesis
import Foundation

/// `facetrain rollback`: points models/latest.json back at an earlier verified version.
struct Rollback: Command {
    static let name = "rollback"
    static let abstract = "Point latest.json back at an earlier, verified version."
    static let arguments = "<version>"
    static var options: [OptionSpec] {
        [
            .option("models", "dir", "Models directory, when <version> is a bare number.", default: "models"),
            .option("base-url", "url", "Prefix for the model URL in latest.json."),
        ]
    }
    let target: String
    let models: URL
    let baseURL: String?

    init(arguments: ParsedArguments) throws {
        try arguments.expectPositionals(atMost: 1)
        guard let target = arguments.positionals.first else {
            throw UsageError(message: "Missing expected argument '<version>'")
        }
        self.target = target
        models = URL(fileURLWithPath: arguments.string("models") ?? "models")
        baseURL = arguments.string("base-url")
        try validateBaseURL(baseURL)
    }

    func run() throws -> ExitCode {
        let (repository, version) = try BundleArgument.resolve(target, models: models)
        let pointer = try repository.rollback(
            to: version, baseURL: baseURL, beforeRename: { TestHooks.pause(at: "pointer-written") })
        print(
            "rolled back: latest.json -> version \(pointer.version) "
                + "(was \(pointer.previousVersion.map(String.init) ?? "none")), "
                + "\(pointer.url)")
        return .success
    }
}
