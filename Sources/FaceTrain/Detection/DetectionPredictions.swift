import Foundation

/// Writes detections in the JSON-lines format `shared/eval/score_detection.py --pred` reads: one
/// object per photo, `{"file": "...", "faces": [{"box": [x, y, w, h], "score": s, "landmarks5":
/// [[x, y] x 5]}]}`, boxes and points in the annotated photo's pixels.
///
/// Not here: scoring (DetectionAveragePrecision in Swift, the script in Python). Numbers are written
/// in full (Swift's shortest round-trip form), so the script scores exactly what Swift holds.
package enum DetectionPredictions {
    /// One photo's line, without the newline; with `width` and `height` when given (the scorer
    /// ignores them; `facetrain detect --json` states the photo's size).
    package static func line(
        file: String, detections: [Detection], width: Int? = nil, height: Int? = nil
    ) throws(DetectionPredictionError) -> String {
        var faces: [String] = []
        for (index, detection) in detections.enumerated() {
            let box = detection.box
            let numbers =
                [box.x, box.y, box.width, box.height, detection.score] + detection.landmarks.flatMap { [$0.x, $0.y] }
            guard numbers.allSatisfy(\.isFinite) else { throw .notFinite(file: file, detection: index) }
            let points = detection.landmarks.map { "[\(number($0.x)), \(number($0.y))]" }.joined(separator: ", ")
            var face = "{\"box\": [\(number(box.x)), \(number(box.y)), \(number(box.width)), \(number(box.height))], "
            face += "\"score\": \(number(detection.score))"
            if !detection.landmarks.isEmpty { face += ", \"landmarks5\": [\(points)]" }
            faces.append(face + "}")
        }
        let widthField = width.map { ", \"width\": \($0)" } ?? ""
        let heightField = height.map { ", \"height\": \($0)" } ?? ""
        return "{\"file\": \(quoted(file))\(widthField)\(heightField), \"faces\": [\(faces.joined(separator: ", "))]}"
    }

    /// Writes one line per photo, in the order given (a photo without detections gets an empty list).
    package static func write(_ photos: [(file: String, detections: [Detection])], to url: URL) throws {
        var text = ""
        for photo in photos { text += try line(file: photo.file, detections: photo.detections) + "\n" }
        try DurableFile.write(Data(text.utf8), to: url)
    }

    private static func number(_ value: Double) -> String {
        // Whole numbers print as "12.0", valid JSON; -0.0 as "-0.0", also valid.
        "\(value)"
    }

    /// A JSON string literal: quotes, backslashes and control characters escaped.
    static func quoted(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\t": result += "\\t"
            case "\r": result += "\\r"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                result += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }
}

/// A detection that cannot be written.
package enum DetectionPredictionError: Error, CustomStringConvertible, Equatable {
    case notFinite(file: String, detection: Int)

    package var description: String {
        switch self {
        case .notFinite(let file, let detection):
            "detection \(detection) of \(file) has a non-finite box, score or landmark. HINT: the detector's "
                + "outputs diverged (NaN or infinity); check the training loss and learning rate."
        }
    }
}
