import FaceTrainEngine
import Foundation

// Building an eval report from a bundle and one evaluation run: the data the page shows. Not the
// page itself (HTMLReport.swift draws it).

extension HTMLReport {
    /// The report of `bundle` for an evaluation `run` over `samples`: the training curves and
    /// calibration from its metrics.json, the embedding map, and thumbnails of the first 200
    /// misclassified crops. `facetrain eval --report` and the server's
    /// `/v1/models/{version}/report.html` both make it here (through `HeldOutEvaluation`).
    public init(bundle: ModelBundle, run: EvaluationRun, samples: [FaceSample]) {
        let epochs = bundle.metrics?.history ?? []
        var points: [EmbeddingPoint] = []
        var explained: [Float] = []
        if let dimension = run.embeddings.first?.count, dimension >= 2,
            let projection = PrincipalComponents.project(
                run.embeddings.flatMap { $0 }, rows: run.embeddings.count, dimension: dimension)
        {
            explained = projection.explained
            points = run.predictions.indices.map {
                EmbeddingPoint(
                    x: projection.coordinates[$0 * 2], y: projection.coordinates[$0 * 2 + 1],
                    label: run.predictions[$0].trueLabel.description)
            }
        }
        let wrong = Set(run.metrics.misclassified.prefix(200).map(\.file))
        var thumbnails: [String: String] = [:]
        for sample in samples where wrong.contains(sample.path) {
            thumbnails[sample.path] = Thumbnail.bmpDataURI(sample.image)
        }
        self.init(
            title: "facetrain model \(bundle.version)", history: epochs, metrics: run.metrics, sweep: run.sweep,
            embeddings: points, explainedVariance: explained, thumbnails: thumbnails)
        if let sources = bundle.metrics?.calibration, let target = bundle.metrics?.targetFalseAcceptRate {
            calibration = (target, sources)
        }
    }
}
