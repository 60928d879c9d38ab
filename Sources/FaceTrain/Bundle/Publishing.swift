import Foundation

/// models/latest.json: the published version. A superset of the legacy app's `model/info`
/// payload (`version`, `url`, `users`), plus the Core ML file's checksum.
public struct LatestPointer: Codable, Sendable, Equatable {
    public var version: Int
    /// The Core ML model: "7/FaceClassifier.mlmodel", or under `--base-url`.
    public var url: String
    public var users: [Manifest.UserEntry]
    /// SHA-256 of the Core ML file; the app checks it after downloading.
    public var sha256: String
    public var size: Int64
    /// The manifest's `contentSHA256`, which the Core ML file also embeds.
    public var manifestSHA256: String
    public var publishedAt: String
    /// "publish" or "rollback".
    public var action: String
    /// The version latest.json named before, if any.
    public var previousVersion: Int?
}

/// Thresholds a bundle's metrics must meet to be published.
public struct PublishGate: Sendable, Equatable {
    /// Lowest acceptable `user_accuracy`.
    public var minimumUserAccuracy: Double?
    /// Highest acceptable false-accept rate: the larger of `unknown_far` and `nonface_far`.
    public var maximumFalseAcceptRate: Double?
    /// How much lower the mean recall over the users both versions know may be than the
    /// published version's.
    public var allowedRegression: Double

    public static let defaultAllowedRegression = 0.02

    public init(
        minimumUserAccuracy: Double? = nil, maximumFalseAcceptRate: Double? = nil,
        allowedRegression: Double = PublishGate.defaultAllowedRegression
    ) {
        self.minimumUserAccuracy = minimumUserAccuracy
        self.maximumFalseAcceptRate = maximumFalseAcceptRate
        self.allowedRegression = allowedRegression
    }

    /// Throws unless every bound is a share in 0...1.
    public func validate() throws(ConfigurationError) {
        for (option, value) in [
            ("min-accuracy", minimumUserAccuracy), ("max-false-accept", maximumFalseAcceptRate),
            ("allow-regression", allowedRegression),
        ] {
            if let value, !(value.isFinite && (0...1).contains(value)) {
                throw ConfigurationError(option: option, message: "'--\(option)' must be between 0 and 1")
            }
        }
    }

    /// Why `candidate` must not replace the published version (empty: it may), and remarks
    /// about checks that could not run.
    public func evaluate(candidate: MetricsDocument?, baseline: MetricsDocument?, baselineVersion: Int?)
        -> (refusals: [String], notes: [String])
    {
        var refusals: [String] = []
        var notes: [String] = []
        guard let candidate else {
            return (["the bundle has no metrics.json, so its quality is unknown (run facetrain eval)"], [])
        }
        if let minimum = minimumUserAccuracy {
            if let accuracy = candidate.userAccuracy {
                if accuracy < minimum {
                    refusals.append("user_accuracy \(format(accuracy)) is below --min-accuracy \(format(minimum))")
                }
            } else {
                refusals.append("metrics.json has no user_accuracy to compare with --min-accuracy")
            }
        }
        if let maximum = maximumFalseAcceptRate {
            if let worst = candidate.worstFalseAcceptRate {
                if worst > maximum {
                    let which = worst == candidate.unknownFalseAcceptRate ? "unknown_far" : "nonface_far"
                    refusals.append(
                        "false-accept rate \(format(worst)) (\(which)) is above --max-false-accept \(format(maximum))")
                }
            } else {
                refusals.append(
                    "metrics.json has neither unknown_far nor nonface_far to compare with --max-false-accept")
            }
        }
        if let baselineVersion {
            if let baseline {
                if let regression = regression(
                    candidate: candidate, baseline: baseline, baselineVersion: baselineVersion)
                {
                    refusals.append(regression)
                } else if commonRecalls(candidate, baseline).isEmpty {
                    notes.append("no users in common with version \(baselineVersion); regression check skipped")
                }
            } else {
                notes.append("version \(baselineVersion) has no metrics.json; regression check skipped")
            }
        }
        return (refusals, notes)
    }

    /// Recalls of the user labels both metrics know: label -> (candidate, baseline).
    private func commonRecalls(_ candidate: MetricsDocument, _ baseline: MetricsDocument)
        -> [(String, Double, Double)]
    {
        let new = candidate.perUser ?? [:]
        let old = baseline.perUser ?? [:]
        return new.keys.sorted().compactMap { label in
            guard let newRecall = new[label]?.recall, let oldRecall = old[label]?.recall else { return nil }
            return (label, newRecall, oldRecall)
        }
    }

    private func regression(candidate: MetricsDocument, baseline: MetricsDocument, baselineVersion: Int) -> String? {
        let common = commonRecalls(candidate, baseline)
        guard !common.isEmpty else { return nil }
        let newMean = common.map(\.1).reduce(0, +) / Double(common.count)
        let oldMean = common.map(\.2).reduce(0, +) / Double(common.count)
        guard newMean < oldMean - allowedRegression - 1e-12 else { return nil }
        let worst = common.min { ($0.1 - $0.2) < ($1.1 - $1.2) }!
        return "mean recall on the \(common.count) users both versions know fell from \(format(oldMean)) (version "
            + "\(baselineVersion)) to \(format(newMean)), more than --allow-regression \(format(allowedRegression)); "
            + "largest drop: user \(worst.0) \(format(worst.2)) -> \(format(worst.1))"
    }

    private func format(_ value: Double) -> String { String(format: "%.4g", value) }
}

/// The publish gate said no; `reasons` are one line each.
public struct PublishRefused: Error, CustomStringConvertible {
    public var version: Int
    public var reasons: [String]
    /// Whether `--force` would override every reason.
    public var forceable: Bool
    public var description: String { "refused to publish version \(version): " + reasons.joined(separator: "; ") }
}

/// What `publish` did.
public struct PublishOutcome: Sendable {
    public var pointer: LatestPointer
    /// Gate refusals that `force` overrode.
    public var skipped: [String]
    /// Checks that could not run.
    public var notes: [String]
    /// The version was already the published one; nothing changed.
    public var unchanged: Bool
}

extension ModelRepository {
    /// Verifies bundle `version`, applies `gate` against the published version, then points
    /// latest.json at it atomically. `force` overrides the metric gate (never verification).
    /// `beforeRename` runs after the new pointer is on disk and before it replaces the old.
    public func publish(
        version: Int, gate: PublishGate, force: Bool = false, baseURL: String? = nil, beforeRename: (() -> Void)? = nil
    ) throws -> PublishOutcome {
        try withLock {
            try removeStaleEntries()
            let candidateURL = try resolve(String(version))
            let candidate: ModelBundle
            do {
                candidate = try ModelBundle.open(candidateURL)
            } catch let error as BundleError {
                if case .verificationFailed(_, let problems) = error {
                    throw PublishRefused(
                        version: version,
                        reasons: ["it fails verification: " + problems.map(\.description).joined(separator: "; ")],
                        forceable: false)
                }
                throw error
            }
            guard candidate.fileEntry(BundleVerifier.coreMLName) != nil else {
                throw PublishRefused(
                    version: version, reasons: ["it has no \(BundleVerifier.coreMLName) for the app to download"],
                    forceable: false)
            }
            var reasons: [String] = []
            var current: LatestPointer?
            do {
                current = try latestPointer()
            } catch {
                reasons.append("\(ModelRepository.pointerName) cannot be read, so the published version is unknown")
            }
            if let current {
                if current.version == version {
                    // Moving the download (a new CDN) re-points the same version; nothing else changes.
                    let moved = try makePointer(
                        for: candidate, action: "publish", previous: current.previousVersion, baseURL: baseURL)
                    guard baseURL != nil, moved.url != current.url else {
                        return PublishOutcome(
                            pointer: current, skipped: [], notes: ["version \(version) is already published"],
                            unchanged: true)
                    }
                    try writePointer(moved, beforeRename: beforeRename)
                    return PublishOutcome(
                        pointer: moved, skipped: [], notes: ["version \(version) now downloads from \(moved.url)"],
                        unchanged: false)
                }
                if current.version > version {
                    throw PublishRefused(
                        version: version,
                        reasons: [
                            "it is older than the published version \(current.version); "
                                + "use 'facetrain rollback \(version)'"
                        ], forceable: false)
                }
            }
            var baselineMetrics: MetricsDocument?
            if let current {
                do {
                    baselineMetrics = try ModelBundle.open(bundleURL(version: current.version)).metrics
                } catch {
                    reasons.append(
                        "the published version \(current.version) cannot be opened, so the regression check "
                            + "cannot run: \(error)"
                    )
                }
            }
            let (refusals, notes) = gate.evaluate(
                candidate: candidate.metrics, baseline: baselineMetrics,
                baselineVersion: reasons.isEmpty ? current?.version : nil)
            reasons += refusals
            if !reasons.isEmpty && !force { throw PublishRefused(version: version, reasons: reasons, forceable: true) }
            let pointer = try makePointer(
                for: candidate, action: "publish", previous: current?.version, baseURL: baseURL)
            try writePointer(pointer, beforeRename: beforeRename)
            return PublishOutcome(pointer: pointer, skipped: reasons, notes: notes, unchanged: false)
        }
    }

    /// Points latest.json back at an earlier version after verifying it. No metric gate: this
    /// is the way back from a bad publish.
    public func rollback(to version: Int, baseURL: String? = nil, beforeRename: (() -> Void)? = nil) throws
        -> LatestPointer
    {
        try withLock {
            try removeStaleEntries()
            guard let current = try latestPointer() else {
                throw BundleError.nothingPublished(modelsDirectory: directory.path)
            }
            guard version < current.version else {
                throw BundleError.rollbackNotEarlier(target: version, published: current.version)
            }
            let bundle = try ModelBundle.open(try resolve(String(version)))
            guard bundle.fileEntry(BundleVerifier.coreMLName) != nil else {
                throw BundleError.verificationFailed(
                    path: bundle.directory.path,
                    problems: [
                        BundleProblem(
                            file: BundleVerifier.coreMLName, message: "is missing; the app has nothing to download")
                    ])
            }
            let pointer = try makePointer(for: bundle, action: "rollback", previous: current.version, baseURL: baseURL)
            try writePointer(pointer, beforeRename: beforeRename)
            return pointer
        }
    }

    /// Withdraws every bundle whose manifest lists one of `users` (or cannot be read, so cannot
    /// prove it does not): latest.json is removed first when it names one (nothing is published
    /// until a model without them is), then each folder is renamed to a hidden `.withdrawn-<version>`
    /// (no longer listed, served or publishable) and removed. Version numbers are never given out
    /// again (`.last-version`). Safe to repeat; a kill leaves only hidden leftovers that the next
    /// writer removes. Returns the versions withdrawn and the one that was published, if it was.
    public func withdraw(trainedOn users: Set<Int>) throws -> (versions: [Int], unpublished: Int?) {
        try withLock {
            try removeStaleEntries()
            var withdrawn: [Int] = []
            for version in try versions() {
                let manifestURL = bundleURL(version: version).appendingPathComponent(BundleVerifier.manifestName)
                let listed = (try? Manifest.decode(Data(contentsOf: manifestURL)))?.users.map(\.id)
                if listed.map({ !users.isDisjoint(with: $0) }) ?? true { withdrawn.append(version) }
            }
            guard !withdrawn.isEmpty else { return ([], nil) }
            try recordAllocated(try nextVersion() - 1)
            var unpublished: Int?
            let pointerURL = directory.appendingPathComponent(ModelRepository.pointerName)
            let pointer = try? latestPointer()
            if let pointer,
                withdrawn.contains(pointer.version) || pointer.users.contains(where: { users.contains($0.id) })
            {
                guard unlink(pointerURL.path) == 0 || errno == ENOENT else {
                    throw FileSystemError(operation: "remove", path: pointerURL.path, code: errno)
                }
                try FileSystem.sync(directory)
                unpublished = pointer.version
            }
            for version in withdrawn {
                let hidden = directory.appendingPathComponent("\(ModelRepository.withdrawnPrefix)\(version)")
                try FileSystem.removeTree(hidden)
                guard rename(bundleURL(version: version).path, hidden.path) == 0 else {
                    throw FileSystemError(
                        operation: "rename to \(hidden.lastPathComponent)", path: bundleURL(version: version).path,
                        code: errno)
                }
                try FileSystem.sync(directory)
                try FileSystem.removeTree(hidden)
            }
            try FileSystem.sync(directory)
            return (withdrawn, unpublished)
        }
    }

    private func makePointer(for bundle: ModelBundle, action: String, previous: Int?, baseURL: String?) throws
        -> LatestPointer
    {
        guard let file = bundle.fileEntry(BundleVerifier.coreMLName) else {
            throw BundleError.notABundle(path: bundle.directory.path)
        }
        let relative = "\(bundle.version)/\(file.path)"
        let url = baseURL.map { $0.hasSuffix("/") ? $0 + relative : $0 + "/" + relative } ?? relative
        return LatestPointer(
            version: bundle.version, url: url, users: bundle.manifest.users, sha256: file.sha256, size: file.size,
            manifestSHA256: try bundle.manifest.contentSHA256, publishedAt: Manifest.timestamp(Date()), action: action,
            previousVersion: previous)
    }

    private func writePointer(_ pointer: LatestPointer, beforeRename: (() -> Void)?) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let data = try encoder.encode(pointer) + Data("\n".utf8)
        try FileSystem.replaceAtomically(
            data, at: directory.appendingPathComponent(ModelRepository.pointerName), beforeRename: beforeRename)
    }
}
