import FaceTrainEngine
import Foundation

/// A model scored on a set of crops: predictions, the threshold sweep, the chosen threshold and
/// the metrics at it, plus the embeddings for the report's map.
public struct EvaluationRun: Sendable {
    public var predictions: [Prediction]
    public var sweep: [ThresholdPoint]
    /// The threshold the sweep chose for the target false accept rate.
    public var chosenThreshold: Double
    /// Metrics at the threshold in use (the chosen one, or the bundle's).
    public var metrics: EvaluationMetrics
    /// Embedding rows in sample order, at unit length when the model compares directions (its
    /// classifier follows an L2 normalisation), so the report's map shows what the classifier sees.
    public var embeddings: [[Float]]
}

/// Runs a trained model over crops and scores it.
public enum ModelEvaluation {
    /// True label of a crop for a model: its folder's class if the model knows it, else unknown person.
    public static func trueLabel(of sample: FaceSample, classLabels: [ClassLabel]) -> ClassLabel {
        guard let label = ClassLabel(id: sample.label), classLabels.contains(label) else { return .unknownPerson }
        return label
    }

    /// Scores `model` on `samples`. With `threshold` nil, the sweep's choice for
    /// `targetFalseAcceptRate` is used; otherwise the given one (a bundle's recorded threshold).
    /// `probabilities` (one row per crop) are the model's outputs when the caller already has them.
    public static func evaluate(
        _ model: TrainedModel, on samples: [FaceSample], names: [String: String], targetFalseAcceptRate: Double,
        threshold: Double? = nil, withEmbeddings: Bool = false, strangers: [String: [Prediction]]? = nil,
        probabilities known: [[Float]]? = nil
    ) throws -> EvaluationRun {
        let labels = try ClassLabel.parse(model.definition.classLabels)
        precondition(known.map { $0.count == samples.count } ?? true, "one row of probabilities per crop")
        // The network is built only when something must run through it.
        var built: Network? = nil
        func network() throws -> Network { try built ?? Network(model: model) }
        let probabilities: [[Float]]
        if let known {
            probabilities = known
        } else {
            var running = try network()
            probabilities = try Inference.probabilities(of: samples, with: &running, definition: model.definition)
            built = running
        }
        let predictions = zip(samples, probabilities).map { sample, row in
            Prediction(path: sample.path, trueLabel: trueLabel(of: sample, classLabels: labels), probabilities: row)
        }
        let sweep = Scoring.sweep(predictions, classLabels: labels, strangers: strangers)
        let chosen = Scoring.chooseThreshold(sweep, targetFalseAcceptRate: targetFalseAcceptRate)
        var metrics = Scoring.metrics(
            predictions, rule: DecisionRule(classLabels: labels, threshold: threshold ?? chosen), names: names)
        if strangers != nil {
            metrics.calibration = Scoring.calibrationRates(
                predictions, classLabels: labels, strangers: strangers, threshold: threshold ?? chosen)
        }
        var embeddings: [[Float]] = []
        if withEmbeddings {
            var running = try network()
            embeddings = try Inference.embeddings(of: samples, with: &running, definition: model.definition)
        }
        if model.definition.layers.contains(where: { $0.kind == .l2Normalize }) {
            embeddings = embeddings.map(unitLength)
        }
        return EvaluationRun(
            predictions: predictions, sweep: sweep, chosenThreshold: chosen, metrics: metrics, embeddings: embeddings)
    }

    /// `row` scaled to length 1 (a zero row stays zero).
    static func unitLength(_ row: [Float]) -> [Float] {
        let length = row.reduce(0) { $0 + $1 * $1 }.squareRoot()
        return length > 0 ? row.map { $0 / length } : row
    }
}
