import FaceTrain
import Foundation

/// `facetrain verify`: checks bundles' checksums, classes, exports and paths.
struct Verify: Command {
    static let name = "verify"
    static let abstract = "Verify model bundles: checksums, classes against weights and exports, paths."
    static let arguments = "[<bundle>...]"
    static var options: [OptionSpec] {
        [.option("models", "dir", "Models directory, verified whole when no bundle is named.", default: "models")]
    }
    let bundles: [String]
    let models: URL

    init(arguments: ParsedArguments) throws {
        bundles = arguments.positionals
        models = URL(fileURLWithPath: arguments.string("models") ?? "models")
    }

    func run() throws -> ExitCode {
        var targets: [URL] = []
        var failures = 0
        var pointerFailed = false
        if bundles.isEmpty {
            let repository = ModelRepository(directory: models)
            targets = try repository.versions().map { repository.bundleURL(version: $0) }
            guard !targets.isEmpty else {
                printError(
                    "Error: no model versions in \(models.path)\n"
                        + "HINT: train one with 'facetrain fit', or pass --models."
                )
                return .failure
            }
            pointerFailed = checkPointer(repository) > 0
        } else {
            targets = try bundles.map { try ModelRepository.locateBundle($0, modelsDirectory: models) }
        }
        for target in targets {
            let verification = BundleVerifier.verify(target)
            if verification.isValid, let manifest = verification.manifest {
                let users = manifest.users.count
                print(
                    "\(target.path): OK (version \(manifest.version), \(users) users, "
                        + "\(manifest.classes.count) classes, "
                        + "\(manifest.files.count + 2) files)")
            } else {
                failures += 1
                print("\(target.path): FAILED")
                for problem in verification.problems { print("  \(problem)") }
            }
        }
        if failures > 0 {
            printError(
                "Error: \(failures) of \(targets.count) bundle(s) failed verification\n"
                    + "HINT: never edit a published version; republish from a good copy or retrain.")
        }
        if pointerFailed {
            printError(
                "Error: \(ModelRepository.pointerName) does not point at a verified version's Core ML file\n"
                    + "HINT: re-point it with 'facetrain publish' or 'facetrain rollback' "
                    + "(with --base-url https://... for a CDN).")
        }
        if failures > 0 || pointerFailed { return .failure }
        return .success
    }

    /// Checks that latest.json names a present version and its Core ML file's checksum; returns 1 on a problem.
    private func checkPointer(_ repository: ModelRepository) -> Int {
        let pointer: LatestPointer
        do {
            guard let found = try repository.latestPointer() else { return 0 }
            pointer = found
        } catch {
            print("\(ModelRepository.pointerName): FAILED\n  \(error)")
            return 1
        }
        let manifestURL = repository.bundleURL(version: pointer.version).appendingPathComponent(
            BundleVerifier.manifestName)
        guard let data = try? Data(contentsOf: manifestURL), let manifest = try? Manifest.decode(data) else {
            print(
                "\(ModelRepository.pointerName): FAILED\n"
                    + "  names version \(pointer.version), which has no readable manifest"
            )
            return 1
        }
        let coreML = manifest.files.first { $0.path == BundleVerifier.coreMLName }
        guard coreML?.sha256 == pointer.sha256 else {
            print(
                "\(ModelRepository.pointerName): FAILED\n"
                    + "  its sha256 differs from version \(pointer.version)'s \(BundleVerifier.coreMLName)"
            )
            return 1
        }
        // The app downloads what `url` names: it must end in this version's Core ML file, and a
        // relative one must stay inside the models folder.
        let expected = "\(pointer.version)/\(BundleVerifier.coreMLName)"
        let relative = !pointer.url.contains("://")
        guard
            pointer.url == expected || (!relative && validBaseURL(pointer.url) && pointer.url.hasSuffix("/" + expected))
        else {
            print(
                "\(ModelRepository.pointerName): FAILED\n"
                    + "  its url \"\(pointer.url)\" is not \(expected) or an http(s) URL ending in it")
            return 1
        }
        print("\(ModelRepository.pointerName): OK (version \(pointer.version))")
        return 0
    }
}
