import FaceTrainEngine
import Foundation

/// A verified bundle on disk: its manifest, the trained model from weights.h5 and its metrics.
///
/// Only `open` makes one, and it verifies every checksum first, so a value of this type is
/// always a bundle that passed `BundleVerifier`.
public struct ModelBundle: Sendable {
    public let directory: URL
    public let manifest: Manifest
    public let model: TrainedModel
    /// Nil when the bundle has no metrics.json.
    public let metrics: MetricsDocument?

    public var version: Int { manifest.version }

    /// Opens and verifies the bundle at `url`; throws `BundleError.verificationFailed` naming
    /// each bad file.
    public static func open(_ url: URL) throws -> ModelBundle {
        if FileSystem.kind(at: url.appendingPathComponent(BundleVerifier.manifestName)) == .missing
            && FileSystem.kind(at: url) == .directory
        {
            throw BundleError.notABundle(path: url.path)
        }
        let verification = BundleVerifier.verify(url)
        guard verification.isValid, let manifest = verification.manifest, let weights = verification.weights else {
            var problems = verification.problems
            if problems.isEmpty { problems = [BundleProblem(file: nil, message: "could not be read")] }
            throw BundleError.verificationFailed(path: url.path, problems: problems)
        }
        return ModelBundle(
            directory: url, manifest: manifest, model: TrainedModel(definition: manifest.definition, weights: weights),
            metrics: verification.metrics)
    }

    /// The URL of a file of the bundle, such as "FaceClassifier.mlmodel".
    public func url(of file: String) -> URL { directory.appendingPathComponent(file) }

    /// The manifest entry of a file, when the bundle has it.
    public func fileEntry(_ path: String) -> Manifest.FileEntry? { manifest.files.first { $0.path == path } }
}
