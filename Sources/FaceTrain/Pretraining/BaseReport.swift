import Foundation

/// `report.html` of a base model: its verification ROC and pretraining curves as a self-contained
/// page (inline SVG, no scripts, no network), drawn from the manifest alone.
enum BaseReport {
    static func html(_ manifest: BaseModel.Manifest) -> String {
        let verification = manifest.verification
        func format(_ value: Double) -> String { String(format: "%.3f", value) }
        let input = manifest.definition.input
        let seen =
            input.crop > 0
            ? "\(input.width)x\(input.height) px, of which the extractor sees the central "
                + "\(input.networkWidth)x\(input.networkHeight) (\(input.crop) px cut from every edge)"
            : "\(input.width)x\(input.height) px, the whole crop"
        let recipe = manifest.recipe
        var recipeText =
            "\(recipe.epochs) epochs, seed \(recipe.seed), batch \(recipe.batchSize), learning rate \(recipe.learningRate)"
        if let teacher = recipe.teacher, let distillation = recipe.distillation {
            recipeText += ", teacher \(teacher) (\(distillation.rawValue), weight \(recipe.teacherWeight))"
        }
        recipeText += String(
            format: ", random crops of %.0f-100 %% of the area, %.0f %% grey",
            recipe.augmentation.minimumArea * 100, (recipe.augmentation.greyscaleShare ?? 0) * 100)
        var rows = ""
        for (name, value) in [
            (
                "extractor",
                "\(manifest.architecture), width \(manifest.width), \(manifest.embeddingFeatures)-d embedding"
            ),
            ("input", seen), ("recipe", recipeText),
            (
                "pair accuracy (10 folds)",
                "\(format(verification.pairAccuracy)) ± \(format(verification.pairAccuracyStandardDeviation))"
            ),
            ("TAR at FAR 1e-2", format(verification.trueAcceptAt1e2)),
            ("TAR at FAR 1e-3", format(verification.trueAcceptAt1e3)),
            ("verification identities / crops", "\(verification.identities) / \(verification.crops)"),
            ("genuine / impostor pairs", "\(verification.genuinePairs) / \(verification.impostorPairs)"),
            ("trained on", "\(manifest.data.identities) identities, \(manifest.data.crops) crops"),
            ("stranger bank", "\(manifest.bank.crops) crops of \(manifest.bank.identities) identities"),
        ] {
            rows += "<tr><td style='text-align:left'>\(name)</td><td>\(HTMLText.escape(value))</td></tr>"
        }
        return """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8">\
            <title>base \(HTMLText.escape(manifest.name)) v\(manifest.version)</title>
            <style>body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:900px}
            table{border-collapse:collapse}td,th{padding:2px 8px;text-align:right;border-bottom:1px solid #ddd}
            svg{background:#fff;border:1px solid #ddd}h2{margin-top:2em}</style></head><body>
            <h1>Base model \(HTMLText.escape(manifest.name)) v\(manifest.version)</h1>
            <table>\(rows)</table>
            <h2>Verification ROC (every pair of verification crops)</h2>
            \(roc(verification.roc))
            <h2>Pretraining</h2>
            \(curves(manifest.training.epochs))
            <p>\(HTMLText.escape(manifest.license))</p>
            </body></html>
            """
    }

    /// True-accept rate against the false-accept rate on a log axis from 1e-4 to 1.
    static func roc(_ points: [VerificationMetrics.RocPoint]) -> String {
        let (width, height, left, bottom, top, right) = (520.0, 320.0, 50.0, 40.0, 10.0, 10.0)
        func x(_ rate: Double) -> Double { left + (log10(max(rate, 1e-4)) + 4) / 4 * (width - left - right) }
        func y(_ rate: Double) -> Double { height - bottom - rate * (height - bottom - top) }
        var svg = "<svg width='\(Int(width))' height='\(Int(height))' xmlns='http://www.w3.org/2000/svg'>"
        for exponent in -4...0 {
            let position = x(pow(10, Double(exponent)))
            svg += "<line x1='\(position)' y1='\(top)' x2='\(position)' y2='\(height - bottom)' stroke='#eee'/>"
            svg +=
                "<text x='\(position)' y='\(height - bottom + 16)' font-size='11' text-anchor='middle'>1e\(exponent)</text>"
        }
        for tenth in stride(from: 0, through: 10, by: 2) {
            let position = y(Double(tenth) / 10)
            svg += "<line x1='\(left)' y1='\(position)' x2='\(width - right)' y2='\(position)' stroke='#eee'/>"
            svg +=
                "<text x='\(left - 6)' y='\(position + 4)' font-size='11' text-anchor='end'>\(Double(tenth) / 10)</text>"
        }
        let path = points.map { "\(x($0.falseAcceptRate)),\(y($0.trueAcceptRate))" }.joined(separator: " ")
        svg += "<polyline points='\(path)' fill='none' stroke='#1f77b4' stroke-width='2'/>"
        for point in points {
            svg += "<circle cx='\(x(point.falseAcceptRate))' cy='\(y(point.trueAcceptRate))' r='3' fill='#1f77b4'/>"
        }
        svg += "<text x='\(width / 2)' y='\(height - 6)' font-size='12' text-anchor='middle'>false accept rate</text>"
        svg +=
            "<text x='12' y='\(height / 2)' font-size='12' transform='rotate(-90 12 \(height / 2))' "
            + "text-anchor='middle'>true accept rate</text></svg>"
        return svg
    }

    /// Verification pair accuracy per epoch.
    static func curves(_ epochs: [PretrainEpochRecord]) -> String {
        guard !epochs.isEmpty else { return "<p>No epochs recorded.</p>" }
        var rows =
            "<table><tr><th>epoch</th><th>loss</th><th>identity accuracy</th><th>verification</th><th>img/s</th></tr>"
        for record in epochs {
            rows += String(
                format: "<tr><td>%d</td><td>%.4f</td><td>%.3f</td><td>%.4f</td><td>%.0f</td></tr>", record.epoch,
                record.loss, record.accuracy, record.verificationAccuracy, record.imagesPerSecond)
        }
        return rows + "</table>"
    }
}
