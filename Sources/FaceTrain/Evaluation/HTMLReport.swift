import FaceTrainEngine
import Foundation

/// One epoch of training, as `fit` logs it and the report plots it.
public struct EpochRecord: Codable, Sendable, Equatable {
    public var epoch: Int
    public var trainLoss: Double
    public var trainAccuracy: Double
    public var heldOutLoss: Double
    public var heldOutAccuracy: Double
    public var learningRate: Double
    public var seconds: Double

    public init(
        epoch: Int, trainLoss: Double, trainAccuracy: Double, heldOutLoss: Double, heldOutAccuracy: Double,
        learningRate: Double, seconds: Double
    ) {
        self.epoch = epoch
        self.trainLoss = trainLoss
        self.trainAccuracy = trainAccuracy
        self.heldOutLoss = heldOutLoss
        self.heldOutAccuracy = heldOutAccuracy
        self.learningRate = learningRate
        self.seconds = seconds
    }

    enum CodingKeys: String, CodingKey {
        case epoch, seconds
        case trainLoss = "train_loss"
        case trainAccuracy = "train_accuracy"
        case heldOutLoss = "held_out_loss"
        case heldOutAccuracy = "held_out_accuracy"
        case learningRate = "learning_rate"
    }
}

/// A self-contained HTML page (inline SVG, data URIs, no scripts, no network) showing a bundle's
/// evaluation: training curves, confusion heat map, threshold curve, per-user bars, misclassified
/// crops and a 2-D map of the face embeddings.
public struct HTMLReport {
    /// A point of the embedding map: the crop's first two principal components and true label.
    public struct EmbeddingPoint: Sendable {
        public var x: Float
        public var y: Float
        public var label: String
        public init(x: Float, y: Float, label: String) {
            self.x = x
            self.y = y
            self.label = label
        }
    }

    public var title: String
    public var history: [EpochRecord]
    public var metrics: EvaluationMetrics
    public var sweep: [ThresholdPoint]
    public var embeddings: [EmbeddingPoint]
    public var explainedVariance: [Float]
    /// Data URIs of misclassified crops, by file path.
    public var thumbnails: [String: String]
    /// Each calibration source's false accept rate at fit time and the target (fits from a base).
    public var calibration: (target: Double, sources: [String: Double])?

    public init(
        title: String, history: [EpochRecord], metrics: EvaluationMetrics, sweep: [ThresholdPoint],
        embeddings: [EmbeddingPoint], explainedVariance: [Float], thumbnails: [String: String]
    ) {
        self.title = title
        self.history = history
        self.metrics = metrics
        self.sweep = sweep
        self.embeddings = embeddings
        self.explainedVariance = explainedVariance
        self.thumbnails = thumbnails
    }

    /// The page.
    public var html: String {
        var body = "<h1>\(HTMLText.escape(title))</h1>\n" + summaryTable()
        body += section("Training curves", history.isEmpty ? "<p>No training history recorded.</p>" : trainingCurves())
        body += section("Accept threshold", thresholdCurve())
        if let calibration { body += section("Threshold calibration", calibrationTable(calibration)) }
        body += section("Per-user precision and recall", perUserBars())
        body += section("Confusion matrix", confusionHeatMap())
        body += section("Face embeddings (first two principal components)", embeddingMap())
        body += section("Misclassified crops", misclassifiedGallery())
        return """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8"><title>\(HTMLText.escape(title))</title>
            <style>
            body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1100px}
            table{border-collapse:collapse}td,th{padding:2px 8px;text-align:right;border-bottom:1px solid #ddd}
            th{background:#f4f4f4}h2{margin-top:2em}svg{background:#fff;border:1px solid #ddd}
            .gallery{display:flex;flex-wrap:wrap;gap:8px}.gallery figure{margin:0;font-size:11px;width:96px}
            .gallery img{width:96px;height:96px;image-rendering:pixelated}
            </style></head><body>
            \(body)
            </body></html>
            """
    }

    /// What each source of strangers accepted at the threshold when it was chosen, and what the
    /// crops of this report deliver.
    private func calibrationTable(_ calibration: (target: Double, sources: [String: Double])) -> String {
        var html = "<p>Chosen at fit time for at most \(format(calibration.target)) of strangers accepted.</p>"
        html += "<table><tr><th>strangers</th><th>accepted at the threshold</th></tr>"
        for name in calibration.sources.keys.sorted() {
            html +=
                "<tr><td style='text-align:left'>\(HTMLText.escape(name)) (fit time)</td>"
                + "<td>\(format(calibration.sources[name]!))</td></tr>"
        }
        html +=
            "<tr><td style='text-align:left'><b>delivered on these crops</b></td>"
            + "<td><b>\(format(metrics.unknownFalseAcceptRate))</b></td></tr>"
        return html + "</table>"
    }

    private func section(_ heading: String, _ content: String) -> String {
        "<h2>\(HTMLText.escape(heading))</h2>\n\(content)\n"
    }

    private func summaryTable() -> String {
        let rows: [(String, Double)] = [
            ("user_accuracy", metrics.userAccuracy), ("macro_user_recall", metrics.macroUserRecall),
            ("macro_user_precision", metrics.macroUserPrecision), ("unknown_far", metrics.unknownFalseAcceptRate),
            ("nonface_far", metrics.nonfaceFalseAcceptRate), ("user_rejected", metrics.userRejected),
            ("overall_accuracy", metrics.overallAccuracy),
        ]
        var html =
            "<table><tr><th>metric</th><th>at threshold \(format(metrics.threshold))</th><th>no threshold</th></tr>"
        for (name, value) in rows {
            let plain = metrics.unthresholded[name].map(format) ?? ""
            html += "<tr><td style='text-align:left'>\(name)</td><td>\(format(value))</td><td>\(plain)</td></tr>"
        }
        return html + "</table>"
    }

    private func lineChart(
        series: [(name: String, color: String, points: [(Double, Double)])], xLabel: String, yMaximum: Double?,
        marker: Double? = nil
    ) -> String {
        let width = 640.0
        let height = 260.0
        let left = 50.0
        let bottom = 30.0
        let top = 10.0
        let right = 120.0
        let xs = series.flatMap { $0.points.map(\.0) }
        let ys = series.flatMap { $0.points.map(\.1) }
        guard let xMin = xs.min(), let xMax = xs.max() else { return "<p>No data.</p>" }
        let yMax = yMaximum ?? max(ys.max() ?? 1, 1e-9)
        func px(_ x: Double) -> Double {
            left + (xMax > xMin ? (x - xMin) / (xMax - xMin) : 0.5) * (width - left - right)
        }
        func py(_ y: Double) -> Double { height - bottom - min(max(y / yMax, 0), 1) * (height - bottom - top) }
        var svg =
            "<svg xmlns='http://www.w3.org/2000/svg' width='\(Int(width))' height='\(Int(height))' "
            + "viewBox='0 0 \(Int(width)) \(Int(height))'>"
        svg += "<line x1='\(left)' y1='\(py(0))' x2='\(width - right)' y2='\(py(0))' stroke='#888'/>"
        svg += "<line x1='\(left)' y1='\(py(0))' x2='\(left)' y2='\(top)' stroke='#888'/>"
        for tick in 0...4 {
            let value = yMax * Double(tick) / 4
            svg += "<text x='\(left - 6)' y='\(py(value) + 4)' font-size='10' text-anchor='end'>\(format(value))</text>"
        }
        svg += "<text x='\(left)' y='\(height - 8)' font-size='10'>\(format(xMin))</text>"
        svg += "<text x='\(width - right)' y='\(height - 8)' font-size='10' text-anchor='end'>\(format(xMax))</text>"
        svg +=
            "<text x='\((left + width - right) / 2)' y='\(height - 8)' font-size='11' text-anchor='middle'>"
            + "\(HTMLText.escape(xLabel))</text>"
        if let marker {
            svg +=
                "<line x1='\(px(marker))' y1='\(top)' x2='\(px(marker))' y2='\(py(0))' stroke='#000' "
                + "stroke-dasharray='4 3'/>"
        }
        for (index, line) in series.enumerated() where !line.points.isEmpty {
            let path = line.points.map { "\(String(format: "%.1f", px($0.0))),\(String(format: "%.1f", py($0.1)))" }
                .joined(separator: " ")
            svg += "<polyline fill='none' stroke='\(line.color)' stroke-width='2' points='\(path)'/>"
            svg +=
                "<text x='\(width - right + 8)' y='\(top + 14 + Double(index) * 16)' font-size='11' "
                + "fill='\(line.color)'>\(HTMLText.escape(line.name))</text>"
        }
        return svg + "</svg>"
    }

    private func trainingCurves() -> String {
        let epochs = history.map { Double($0.epoch) }
        let loss = lineChart(
            series: [
                ("train loss", "#1f77b4", Array(zip(epochs, history.map(\.trainLoss)))),
                ("held-out loss", "#d62728", Array(zip(epochs, history.map(\.heldOutLoss)))),
            ], xLabel: "epoch", yMaximum: nil)
        let accuracy = lineChart(
            series: [
                ("train accuracy", "#1f77b4", Array(zip(epochs, history.map(\.trainAccuracy)))),
                ("held-out accuracy", "#d62728", Array(zip(epochs, history.map(\.heldOutAccuracy)))),
            ], xLabel: "epoch", yMaximum: 1)
        return loss + "\n" + accuracy
    }

    private func thresholdCurve() -> String {
        let thresholds = sweep.map(\.threshold)
        return
            "<p>The dashed line is the chosen threshold (\(format(metrics.threshold))): a user prediction below it "
            + "becomes \"unknown person\". The calibration rate covers held-out strangers and simulated unseen "
            + "strangers.</p>"
            + lineChart(
                series: [
                    ("user accuracy", "#2ca02c", Array(zip(thresholds, sweep.map(\.userAccuracy)))),
                    ("unknown FAR", "#d62728", Array(zip(thresholds, sweep.map(\.unknownFalseAcceptRate)))),
                    ("calibration FAR", "#ff7f0e", Array(zip(thresholds, sweep.map(\.calibrationFalseAcceptRate)))),
                    ("non-face FAR", "#9467bd", Array(zip(thresholds, sweep.map(\.nonfaceFalseAcceptRate)))),
                ], xLabel: "threshold", yMaximum: 1, marker: metrics.threshold)
    }

    private func perUserBars() -> String {
        let users = metrics.perUser.sorted { (Int($0.key) ?? 0) < (Int($1.key) ?? 0) }
        guard !users.isEmpty else { return "<p>No user crops were scored.</p>" }
        let rowHeight = 16.0
        let labelWidth = 180.0
        let barWidth = 300.0
        let height = Double(users.count) * rowHeight * 2 + 20
        var svg =
            "<svg xmlns='http://www.w3.org/2000/svg' width='\(Int(labelWidth + barWidth + 60))' "
            + "height='\(Int(height))'>"
        for (row, (label, score)) in users.enumerated() {
            let y = 10 + Double(row) * rowHeight * 2
            svg +=
                "<text x='\(labelWidth - 6)' y='\(y + 12)' font-size='11' text-anchor='end'>"
                + "\(HTMLText.escape(label)) \(HTMLText.escape(score.name))</text>"
            svg +=
                "<rect x='\(labelWidth)' y='\(y)' width='\(score.precision * barWidth)' height='\(rowHeight - 3)' "
                + "fill='#1f77b4'><title>precision \(format(score.precision))</title></rect>"
            svg +=
                "<rect x='\(labelWidth)' y='\(y + rowHeight - 2)' width='\(score.recall * barWidth)' "
                + "height='\(rowHeight - 3)' fill='#ff7f0e'><title>recall \(format(score.recall))</title></rect>"
            svg +=
                "<text x='\(labelWidth + barWidth + 6)' y='\(y + 12)' font-size='10'>"
                + "P \(format(score.precision)) R \(format(score.recall))</text>"
        }
        return "<p><span style='color:#1f77b4'>precision</span>, <span style='color:#ff7f0e'>recall</span></p>"
            + svg + "</svg>"
    }

    private func confusionHeatMap() -> String {
        let labels = metrics.confusionLabels
        guard !labels.isEmpty else { return "" }
        let cell = max(8.0, min(28.0, 560.0 / Double(labels.count)))
        let margin = 40.0
        let size = margin + cell * Double(labels.count) + 10
        var svg = "<svg xmlns='http://www.w3.org/2000/svg' width='\(Int(size))' height='\(Int(size))'>"
        for (row, counts) in metrics.confusion.enumerated() {
            let total = max(counts.reduce(0, +), 1)
            svg +=
                "<text x='\(margin - 4)' y='\(margin + (Double(row) + 0.7) * cell)' "
                + "font-size='\(min(10, cell * 0.7))' text-anchor='end'>\(HTMLText.escape(labels[row]))</text>"
            for (column, count) in counts.enumerated() {
                let share = Double(count) / Double(total)
                let color = row == column ? "rgba(44,160,44,\(format(share)))" : "rgba(214,39,40,\(format(share)))"
                svg +=
                    "<rect x='\(margin + Double(column) * cell)' y='\(margin + Double(row) * cell)' "
                    + "width='\(cell)' height='\(cell)' fill='\(color)' stroke='#eee'>"
                    + "<title>true \(HTMLText.escape(labels[row])), "
                    + "predicted \(HTMLText.escape(labels[column])): \(count)</title></rect>"
            }
        }
        for (column, label) in labels.enumerated() {
            svg +=
                "<text x='\(margin + (Double(column) + 0.5) * cell)' y='\(margin - 4)' "
                + "font-size='\(min(10, cell * 0.7))' text-anchor='middle'>\(HTMLText.escape(label))</text>"
        }
        return
            "<p>Rows: true class, columns: decided class (after the threshold). Green: correct, red: confusions; "
            + "darker = larger share of the row.</p>"
            + svg + "</svg>"
    }

    private func embeddingMap() -> String {
        guard !embeddings.isEmpty else { return "<p>No embeddings.</p>" }
        let size = 520.0
        let pad = 20.0
        let xs = embeddings.map { Double($0.x) }
        let ys = embeddings.map { Double($0.y) }
        let xMin = xs.min()!
        let xMax = xs.max()!
        let yMin = ys.min()!
        let yMax = ys.max()!
        func px(_ x: Double) -> Double { pad + (xMax > xMin ? (x - xMin) / (xMax - xMin) : 0.5) * (size - 2 * pad) }
        func py(_ y: Double) -> Double {
            size - pad - (yMax > yMin ? (y - yMin) / (yMax - yMin) : 0.5) * (size - 2 * pad)
        }
        let userLabels = Array(Set(embeddings.map(\.label).filter(DecisionRule.isUser))).sorted {
            (Int($0) ?? 0) < (Int($1) ?? 0)
        }
        var svg = "<svg xmlns='http://www.w3.org/2000/svg' width='\(Int(size))' height='\(Int(size))'>"
        for point in embeddings {
            let x = px(Double(point.x))
            let y = py(Double(point.y))
            switch ClassLabel(point.label) {
            case .notAFace:
                svg +=
                    "<path d='M\(x - 3),\(y - 3)L\(x + 3),\(y + 3)M\(x - 3),\(y + 3)L\(x + 3),\(y - 3)' "
                    + "stroke='#555' stroke-width='1.5'><title>not a face</title></path>"
            case .unknownPerson:
                svg +=
                    "<rect x='\(x - 3)' y='\(y - 3)' width='6' height='6' fill='none' stroke='#000'>"
                    + "<title>unknown person</title></rect>"
            default:
                let hue = Double(userLabels.firstIndex(of: point.label) ?? 0) * 360 / Double(max(userLabels.count, 1))
                svg +=
                    "<circle cx='\(x)' cy='\(y)' r='3.5' fill='hsl(\(Int(hue)),70%,50%)'>"
                    + "<title>user \(HTMLText.escape(point.label))</title></circle>"
            }
        }
        let explained = explainedVariance.map { format(Double($0) * 100) + " %" }.joined(separator: ", ")
        return
            "<p>Each dot is a held-out crop, coloured by user (hover for the label); × = not a face, "
            + "□ = unknown person. Variance explained: \(explained).</p>"
            + svg + "</svg>"
    }

    private func misclassifiedGallery() -> String {
        guard !metrics.misclassified.isEmpty else { return "<p>None.</p>" }
        var html = "<div class='gallery'>"
        for item in metrics.misclassified.prefix(200) {
            let image = thumbnails[item.file].map { "<img src='\($0)' alt=''>" } ?? ""
            html +=
                "<figure>\(image)<figcaption>\(HTMLText.escape(URL(fileURLWithPath: item.file).lastPathComponent)): "
                + "true \(HTMLText.escape(item.trueLabel)), said \(HTMLText.escape(item.predictedLabel)) "
                + "(\(format(item.confidence)))</figcaption></figure>"
        }
        return html + "</div>"
    }

    private func format(_ value: Double) -> String { String(format: "%.3f", value) }
}
