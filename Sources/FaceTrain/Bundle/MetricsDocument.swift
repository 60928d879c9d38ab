// metrics.json as one type: what the bundle writer encodes and what `eval`, the HTML report, the
// publish gate and the server's admin page decode. Not the scoring itself (`ModelEvaluation`), and
// not what `eval --json` prints.
import Foundation

/// A bundle's metrics.json: the held-out evaluation at fit time, how the threshold was chosen, the
/// training curves and which crops were held out.
///
/// Every field is optional: a document written before a field existed (or by hand) lacks it, and
/// a missing number stays nil rather than becoming a default. Unknown keys are ignored. The keys
/// are those facetrain has always written, plus `format_version`.
public struct MetricsDocument: Codable, Sendable, Equatable {
    /// The layout this code writes; the verifier refuses newer ones. Documents without
    /// `format_version` were written before it existed and are read as they are.
    public static let currentFormatVersion = 1

    /// Precision, recall and support of one user class.
    public struct ClassMetrics: Codable, Sendable, Equatable {
        public var name: String?
        public var precision: Double?
        public var recall: Double?
        public var support: Int?

        public init(name: String? = nil, precision: Double?, recall: Double?, support: Int?) {
            self.name = name
            self.precision = precision
            self.recall = recall
            self.support = support
        }
    }

    /// A crop held out of training, so that `eval` and the server can find it again by content.
    public struct HeldOutCrop: Codable, Sendable, Equatable {
        public var path: String?
        public var sha256: String?
        /// The class label ("17"), as a string.
        public var label: String?

        public init(path: String?, sha256: String?, label: String?) {
            self.path = path
            self.sha256 = sha256
            self.label = label
        }
    }

    /// The threshold the numbers were taken at. facetrain writes a number; the publish gate's
    /// test bundles write `{"accept": 0.6, "method": "far"}`, which reads as its accept value.
    public struct Threshold: Codable, Sendable, Equatable {
        public var accept: Double

        public init(accept: Double) { self.accept = accept }

        private enum CodingKeys: String, CodingKey { case accept }

        public init(from decoder: any Decoder) throws {
            if let number = try? decoder.singleValueContainer().decode(Double.self) {
                accept = number
            } else {
                accept = try decoder.container(keyedBy: CodingKeys.self).decode(Double.self, forKey: .accept)
            }
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            try container.encode(accept)
        }
    }

    /// nil: written before metrics.json carried a version.
    public var formatVersion: Int?

    // The held-out evaluation at the threshold in use (`EvaluationMetrics`).
    public var threshold: Threshold?
    public var userAccuracy: Double?
    public var macroUserRecall: Double?
    public var macroUserPrecision: Double?
    /// Unknown people accepted as some user.
    public var unknownFalseAcceptRate: Double?
    /// Non-faces accepted as some user.
    public var nonFaceFalseAcceptRate: Double?
    public var userRejected: Double?
    public var overallAccuracy: Double?
    /// The same rates with no threshold (plain argmax).
    public var unthresholded: [String: Double]?
    /// Keyed by class label ("17").
    public var perUser: [String: ClassMetrics]?
    public var confusionLabels: [String]?
    public var confusion: [[Int]]?
    public var misclassified: [Misclassification]?
    public var counts: [String: Int]?
    /// False accept rate of each source of strangers that calibrated the threshold (fits from a base).
    public var calibration: [String: Double]?

    // How the fit chose its threshold, how it trained, and on what it was scored.
    public var chosenThreshold: Double?
    /// The unknown-person false accept rate the threshold was chosen for.
    public var targetFalseAcceptRate: Double?
    public var thresholdSweep: [ThresholdPoint]?
    public var history: [EpochRecord]?
    public var bestEpoch: Int?
    public var heldOut: [HeldOutCrop]?

    enum CodingKeys: String, CodingKey {
        case threshold, unthresholded, confusion, misclassified, counts, calibration, history
        case formatVersion = "format_version"
        case userAccuracy = "user_accuracy"
        case macroUserRecall = "macro_user_recall"
        case macroUserPrecision = "macro_user_precision"
        case unknownFalseAcceptRate = "unknown_far"
        case nonFaceFalseAcceptRate = "nonface_far"
        case userRejected = "user_rejected"
        case overallAccuracy = "overall_accuracy"
        case perUser = "per_user"
        case confusionLabels = "confusion_labels"
        case chosenThreshold = "chosen_threshold"
        case targetFalseAcceptRate = "target_far"
        case thresholdSweep = "threshold_sweep"
        case bestEpoch = "best_epoch"
        case heldOut = "held_out"
    }

    /// Decodes metrics.json bytes.
    public static func decode(_ data: Data) throws -> MetricsDocument {
        try JSONDecoder().decode(MetricsDocument.self, from: data)
    }

    /// metrics.json bytes: pretty-printed with sorted keys, as facetrain has always written them.
    public func encoded() throws -> Data { try JSONText.data(self) }

    /// The larger of the two false-accept rates (nil when neither is known).
    public var worstFalseAcceptRate: Double? {
        [unknownFalseAcceptRate, nonFaceFalseAcceptRate].compactMap { $0 }.max()
    }

    /// The content hashes of the held-out crops (empty when none are recorded).
    public var heldOutHashes: Set<String> { Set((heldOut ?? []).compactMap(\.sha256)) }

    /// The headline numbers under their metrics.json names, for the manifest.
    public var keyNumbers: [String: Double] {
        let pairs: [(CodingKeys, Double?)] = [
            (.userAccuracy, userAccuracy), (.macroUserRecall, macroUserRecall),
            (.macroUserPrecision, macroUserPrecision), (.unknownFalseAcceptRate, unknownFalseAcceptRate),
            (.nonFaceFalseAcceptRate, nonFaceFalseAcceptRate), (.userRejected, userRejected),
            (.overallAccuracy, overallAccuracy),
        ]
        return Dictionary(uniqueKeysWithValues: pairs.compactMap { key, value in value.map { (key.rawValue, $0) } })
    }
}

extension MetricsDocument {
    /// The document of a fit: its held-out evaluation `run`, the target the threshold was chosen
    /// for, the training curves and the held-out crops by content hash.
    public init(run: EvaluationRun, fit: FitResult, targetFalseAcceptRate: Double) {
        let metrics = run.metrics
        self.init(
            formatVersion: Self.currentFormatVersion, threshold: Threshold(accept: metrics.threshold),
            userAccuracy: metrics.userAccuracy, macroUserRecall: metrics.macroUserRecall,
            macroUserPrecision: metrics.macroUserPrecision, unknownFalseAcceptRate: metrics.unknownFalseAcceptRate,
            nonFaceFalseAcceptRate: metrics.nonfaceFalseAcceptRate, userRejected: metrics.userRejected,
            overallAccuracy: metrics.overallAccuracy, unthresholded: metrics.unthresholded,
            perUser: metrics.perUser.mapValues {
                ClassMetrics(name: $0.name, precision: $0.precision, recall: $0.recall, support: $0.support)
            },
            confusionLabels: metrics.confusionLabels, confusion: metrics.confusion,
            misclassified: metrics.misclassified, counts: metrics.counts, calibration: metrics.calibration,
            chosenThreshold: run.chosenThreshold, targetFalseAcceptRate: targetFalseAcceptRate,
            thresholdSweep: run.sweep, history: fit.history, bestEpoch: fit.bestEpoch,
            heldOut: fit.heldOut.map { HeldOutCrop(path: $0.path, sha256: $0.contentHash, label: String($0.label)) })
    }
}
