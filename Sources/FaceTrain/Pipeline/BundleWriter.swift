import Foundation

/// Turns a finished fit and its evaluation into a published bundle version: weights, metrics,
/// both exports and the manifest, staged and made visible with one rename.
public enum BundleWriter {
    /// Writes the bundle into `modelsDirectory` and returns its directory; nothing becomes
    /// visible unless every file was written.
    public static func write(
        fit: FitResult, run: EvaluationRun, dataset: FaceDataset, configuration: FitConfiguration, modelsDirectory: URL,
        parentVersion: Int? = nil
    ) throws -> URL {
        try FileManager.default.createDirectory(at: modelsDirectory, withIntermediateDirectories: true)
        let staging = try BundleStaging(modelsDirectory: modelsDirectory)
        do {
            // What `eval` needs later besides the numbers: the held-out crops, the sweep, the curves.
            let metrics = MetricsDocument(
                run: run, fit: fit, targetFalseAcceptRate: configuration.targetFalseAcceptRate)
            var training = try JSONDecoder().decode([String: JSONValue].self, from: JSONText.data(configuration))
            training["data"] = .string(dataset.root.standardizedFileURL.path)
            training["best_epoch"] = .integer(fit.bestEpoch)
            training["training_crops"] = .integer(fit.training.count)
            training["held_out_crops"] = .integer(fit.heldOut.count)
            let threshold = run.metrics.threshold
            let fingerprint = FaceDataset.fingerprint(of: fit.training + fit.heldOut)
            let manifest = Manifest(
                version: staging.version, definition: fit.model.definition,
                users: dataset.users,
                training: training, seed: configuration.seed, dataFingerprint: fingerprint,
                gitCommit: ProcessInfo.processInfo.environment["FACETRAIN_GIT_COMMIT"] ?? gitCommit(),
                metrics: metrics, acceptThreshold: threshold, parentVersion: parentVersion)
            try staging.writeWeights(fit.model)
            try staging.write(metrics.encoded(), named: BundleVerifier.metricsName)
            for format in BundleExport.Format.allCases {
                try staging.write(
                    BundleExport.encode(fit.model, manifest: manifest, format: format), named: format.bundleFileName)
            }
            return try staging.publishVersion(manifest: manifest)
        } catch {
            staging.discard()
            throw error
        }
    }

    /// The commit of facetrain's own source tree, when this binary was built inside a git
    /// checkout of it (`<checkout>/.build/.../facetrain`), with "-dirty" when the tree had changes;
    /// nil for an installed binary (set FACETRAIN_GIT_COMMIT when packaging). Never the repository
    /// the user happens to run it in: that commit says nothing about the code that trained.
    static func gitCommit() -> String? {
        guard let checkout = sourceCheckout() else { return nil }
        guard let head = git(["rev-parse", "HEAD"], in: checkout), head.count == 40 else { return nil }
        guard let changes = git(["status", "--porcelain", "--untracked-files=no"], in: checkout) else { return head }
        return changes.isEmpty ? head : head + "-dirty"
    }

    /// The checkout whose `.build` folder holds the running executable, if it is one.
    static func sourceCheckout() -> URL? {
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        let components = executable.pathComponents
        guard let build = components.lastIndex(of: ".build"), build > 1 else { return nil }
        let checkout = URL(fileURLWithPath: NSString.path(withComponents: Array(components[..<build])))
        let files = FileManager.default
        guard files.fileExists(atPath: checkout.appendingPathComponent("Package.swift").path),
            files.fileExists(atPath: checkout.appendingPathComponent(".git").path)
        else { return nil }
        return checkout
    }

    private static func git(_ arguments: [String], in folder: URL) -> String? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["git", "-C", folder.path] + arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return nil }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { return nil }
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
