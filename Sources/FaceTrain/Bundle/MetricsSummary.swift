import Foundation

/// The numbers of metrics.json (written by `facetrain eval`) that bundles and the publish gate
/// use. Unknown keys are ignored and every key is optional, so eval can add fields freely.
public struct MetricsSummary: Codable, Sendable, Equatable {
    /// Precision, recall and support of one user class.
    public struct ClassMetrics: Codable, Sendable, Equatable {
        public var precision: Double?
        public var recall: Double?
        public var support: Int?

        public init(precision: Double?, recall: Double?, support: Int?) {
            self.precision = precision
            self.recall = recall
            self.support = support
        }
    }

    public var userAccuracy: Double?
    public var macroUserRecall: Double?
    public var macroUserPrecision: Double?
    /// Unknown people accepted as some user.
    public var unknownFalseAcceptRate: Double?
    /// Non-faces accepted as some user.
    public var nonFaceFalseAcceptRate: Double?
    public var userRejected: Double?
    public var overallAccuracy: Double?
    /// Keyed by class label ("17").
    public var perUser: [String: ClassMetrics]?
    public var threshold: JSONValue?

    enum CodingKeys: String, CodingKey {
        case userAccuracy = "user_accuracy"
        case macroUserRecall = "macro_user_recall"
        case macroUserPrecision = "macro_user_precision"
        case unknownFalseAcceptRate = "unknown_far"
        case nonFaceFalseAcceptRate = "nonface_far"
        case userRejected = "user_rejected"
        case overallAccuracy = "overall_accuracy"
        case perUser = "per_user"
        case threshold
    }

    public init(
        userAccuracy: Double? = nil, macroUserRecall: Double? = nil, macroUserPrecision: Double? = nil,
        unknownFalseAcceptRate: Double? = nil, nonFaceFalseAcceptRate: Double? = nil, userRejected: Double? = nil,
        overallAccuracy: Double? = nil, perUser: [String: ClassMetrics]? = nil, threshold: JSONValue? = nil
    ) {
        self.userAccuracy = userAccuracy
        self.macroUserRecall = macroUserRecall
        self.macroUserPrecision = macroUserPrecision
        self.unknownFalseAcceptRate = unknownFalseAcceptRate
        self.nonFaceFalseAcceptRate = nonFaceFalseAcceptRate
        self.userRejected = userRejected
        self.overallAccuracy = overallAccuracy
        self.perUser = perUser
        self.threshold = threshold
    }

    /// Decodes metrics.json bytes.
    public static func decode(_ data: Data) throws -> MetricsSummary {
        try JSONDecoder().decode(MetricsSummary.self, from: data)
    }

    /// The larger of the two false-accept rates (nil when neither is known).
    public var worstFalseAcceptRate: Double? {
        [unknownFalseAcceptRate, nonFaceFalseAcceptRate].compactMap { $0 }.max()
    }

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
