import FaceTrain
import FaceTrainEngine
import Foundation

/// Test-only support, active only when FACETRAIN_TEST_COMMANDS=1: a hidden subcommand that
/// writes a small bundle, and pauses at named points (FACETRAIN_TEST_PAUSE_AT) so tests can
/// SIGKILL the process there.
enum TestHooks {
    static var enabled: Bool { ProcessInfo.processInfo.environment["FACETRAIN_TEST_COMMANDS"] == "1" }

    /// Hidden subcommands, registered only in test runs.
    static var commands: [any Command.Type] { enabled ? [TestWriteBundle.self] : [] }

    /// The CPU flags a test pretends this CPU has (FACETRAIN_TEST_CPU_FLAGS, space-separated), to
    /// check kernel choices for CPUs the test machine is not.
    static var cpuFlags: Set<String>? {
        guard enabled, let flags = ProcessInfo.processInfo.environment["FACETRAIN_TEST_CPU_FLAGS"] else { return nil }
        return Set(flags.split(separator: " ").map(String.init))
    }

    /// FACETRAIN_TEST_UNKNOWN_CPU=1: the environment's OPENBLAS_CORETYPE stands for what OpenBLAS
    /// picked on its own for a CPU it does not know (Prescott on a new Xeon), not the user's choice.
    static var openBLASDoesNotKnowThisCPU: Bool {
        enabled && ProcessInfo.processInfo.environment["FACETRAIN_TEST_UNKNOWN_CPU"] == "1"
    }

    /// FACETRAIN_TEST_BLAS_SELF_CHECK=fail: the kernel facetrain chose fails its self-check.
    static var selfCheckFails: Bool {
        enabled && ProcessInfo.processInfo.environment["FACETRAIN_TEST_BLAS_SELF_CHECK"] == "fail"
    }

    /// FACETRAIN_TEST_WEBHOOK_BACKOFF=seconds: the longest wait between two tries of a webhook
    /// event (600 s otherwise), so a test sees a receiver that comes back within seconds.
    static var webhookBackoff: TimeInterval? {
        guard enabled, let text = ProcessInfo.processInfo.environment["FACETRAIN_TEST_WEBHOOK_BACKOFF"] else {
            return nil
        }
        return TimeInterval(text)
    }

    /// Announces "paused at <point>" on stderr and sleeps until killed, when asked to.
    static func pause(at point: String) {
        guard enabled, ProcessInfo.processInfo.environment["FACETRAIN_TEST_PAUSE_AT"] == point else { return }
        FileHandle.standardError.write(Data("paused at \(point)\n".utf8))
        while true { sleep(60) }
    }
}

/// `facetrain _test-write-bundle`: publishes a ref-small bundle with seeded random weights and
/// no metrics (it was never evaluated; `publish` gates refuse it as of unknown quality).
struct TestWriteBundle: Command {
    static let name = "_test-write-bundle"
    static let abstract = "(tests only) Write a bundle with seeded random weights."
    static var options: [OptionSpec] {
        [
            .option("models", "dir", "Models directory.", default: "models"),
            .option("seed", "n", "Weight seed.", default: "1"),
            .option("users", "ids", "Comma-separated user ids.", default: "17,23"),
        ]
    }
    let models: URL
    let seed: UInt64
    let users: [Int]

    init(arguments: ParsedArguments) throws {
        models = URL(fileURLWithPath: arguments.string("models") ?? "models")
        seed = try arguments.required("seed")
        users = (arguments.string("users") ?? "").split(separator: ",").compactMap { Int($0) }
    }

    func run() throws -> ExitCode {
        TestHooks.pause(at: "start")
        let staging = try BundleStaging(modelsDirectory: models)
        TestHooks.pause(at: "reserved")
        staging.checkpoint = { TestHooks.pause(at: $0.rawValue) }
        let definition = ModelDefinition.referenceSmall(
            classLabels: (ClassLabel.negatives + users.map(ClassLabel.user)).map(\.description), inputSize: 16,
            width: 4)
        try staging.writeWeights(Network(definition: definition, seed: seed).trainedModel)
        // No metrics.json: the bundle was never evaluated, and a made-up score would pass a gate.
        let manifest = Manifest(
            version: staging.version, definition: definition,
            users: users.map { Manifest.UserEntry(id: $0, name: "user \($0)") }, training: ["epochs": 1], seed: seed,
            dataFingerprint: "test", gitCommit: nil)
        let url = try staging.publishVersion(manifest: manifest)
        print("published \(url.path)")
        return .success
    }
}
