// Scoring a finished bundle: finding the crops its metrics.json held out of training and running
// its model on them (or on any crops) at its accept threshold. `facetrain eval` and the server's
// report both go through here. Not the scoring arithmetic (`ModelEvaluation`, `Scoring`), and not
// the evaluation a fit runs before its bundle exists (`FitJob`).
import Foundation

/// Why a bundle's held-out crops cannot be scored.
public enum HeldOutEvaluationError: Error, CustomStringConvertible {
    /// metrics.json lists no held-out crops, or the manifest names no data folder to find them in.
    case noHeldOutRecord(bundle: String)
    /// Some held-out crops are no longer in the data folder.
    case heldOutMissing(folder: String, found: Int, expected: Int)

    public var description: String {
        switch self {
        case .noHeldOutRecord(let bundle): "\(bundle) records no held-out crops"
        case .heldOutMissing(let folder, let found, let expected):
            "only \(found) of the bundle's \(expected) held-out crops are still in \(folder)"
        }
    }
}

/// A bundle evaluated after the fact: on the crops it held out of training, or on a folder of crops.
public struct HeldOutEvaluation: Sendable {
    public let bundle: ModelBundle

    public init(bundle: ModelBundle) {
        self.bundle = bundle
    }

    /// How crops are read to score this bundle: at its input size, with folders it does not know
    /// read as unknown people and unreadable crops skipped (each named in the data report).
    public var loadOptions: DataLoadOptions {
        let input = bundle.model.definition.input
        var options = DataLoadOptions(inputWidth: input.width, inputHeight: input.height, channels: input.channels)
        options.forEvaluation = true
        options.skipBad = true
        return options
    }

    /// The data folder the bundle was trained on, as its manifest records it.
    public var trainingDataFolder: URL? {
        guard case .string(let folder)? = bundle.manifest.training["data"] else { return nil }
        return URL(fileURLWithPath: folder)
    }

    /// The held-out crops, found by content in `folder` (by default the one the bundle was trained
    /// on). The record is checked before the folder is read; `read` reads it, so that a server can
    /// hold its writers off meanwhile. A crop copied within its class is scored once per copy, as
    /// every evaluation scores every file.
    public func heldOutSamples(
        in folder: URL? = nil,
        read: (URL, DataLoadOptions) throws -> FaceDataset = { try FaceDataset.load(from: $0, options: $1) }
    ) throws -> [FaceSample] {
        let hashes = bundle.metrics?.heldOutHashes ?? []
        guard !hashes.isEmpty, let folder = folder ?? trainingDataFolder else {
            throw HeldOutEvaluationError.noHeldOutRecord(bundle: bundle.directory.path)
        }
        let samples = try read(folder, loadOptions).samples.filter { hashes.contains($0.contentHash) }
        let found = Set(samples.map(\.contentHash)).count
        guard found == hashes.count else {
            throw HeldOutEvaluationError.heldOutMissing(folder: folder.path, found: found, expected: hashes.count)
        }
        return samples
    }

    /// Scores the bundle's model on `samples` at the accept threshold of its manifest. The sweep's
    /// suggested threshold is chosen for `targetFalseAcceptRate`: by default the target the fit
    /// chose for, or a fit's default target when metrics.json does not record one.
    public func run(
        on samples: [FaceSample], targetFalseAcceptRate: Double? = nil, withEmbeddings: Bool
    ) throws -> EvaluationRun {
        let target =
            targetFalseAcceptRate ?? bundle.metrics?.targetFalseAcceptRate
            ?? FitConfiguration().targetFalseAcceptRate
        let names = Dictionary(bundle.manifest.users.map { (String($0.id), $0.name) }) { first, _ in first }
        return try ModelEvaluation.evaluate(
            bundle.model, on: samples, names: names, targetFalseAcceptRate: target,
            threshold: bundle.manifest.acceptThreshold ?? 0, withEmbeddings: withEmbeddings)
    }
}
