import Foundation

/// A detector written as ONNX for other runtimes (`facetrain detector export`): the network only,
/// its heads as outputs, with what a consumer needs to prepare a photo and read the heads in the
/// file's metadata. Not the decoding, the non-maximum suppression or the letterbox (DetectorInput,
/// DetectionDecoder), which the consumer does as they do.
extension DetectorModel {
    /// Output names, finest head first: "stride8", "stride16", "stride32" for the builtin detector.
    package var onnxHeadNames: [String] { manifest.strides.map { "stride\($0)" } }

    package func onnxExport() throws(ExportError) -> Data {
        let metadata = ExportMetadata(
            version: manifest.version,
            shortDescription: "Face detector trained with facetrain: boxes, 5 landmarks and a score per face",
            license: manifest.license,
            dataFingerprint: manifest.data.fingerprint,
            additionalEntries: [
                "detector": "\(manifest.name) v\(manifest.version)",
                "strides": "[" + manifest.strides.map(String.init).joined(separator: ", ") + "]",
                "letterbox":
                    "the photo shrunk to at most \(FaceDetector.defaultMaximumSide) px on its longer side, at the "
                    + "top left; right and below it raw value \(DetectionResampling.outsideValue) in every "
                    + "channel up to multiples of \(manifest.strides.max() ?? 32) px",
                "heads":
                    "per cell (i, j) of stride s, centre ((j + 0.5) s, (i + 0.5) s): channel 0 the face score's "
                    + "logit; 1-4 the box's left, top, right, bottom distances from the centre as s * exp(min(t, 6)); "
                    + "5-14 the 5 landmarks (x, y) as centre + s * (u, v): eyes (the person's right first), nose, "
                    + "mouth corners",
                "decoding": Self.onnxDecoding(DetectionDecoder()),
            ])
        return try ONNXExporter.encodeDetector(model, heads: onnxHeadNames, metadata: metadata)
    }

    /// How facetrain decodes the heads (DetectionDecoder), in words, with the decoder's settings.
    static func onnxDecoding(_ decoder: DetectionDecoder) -> String {
        "score = sigmoid(channel 0); cells below \(decoder.scoreFloor) dropped (a product's operating threshold "
            + "instead), the best \(decoder.candidateLimit) kept; non-maximum suppression, best score first: a box "
            + "with an IoU above \(decoder.suppressionThreshold) with a kept box is suppressed, at most "
            + "\(decoder.keepLimit) kept"
            + (decoder.voting
                ? "; each kept face keeps its score and takes the score-squared weighted mean of the boxes and "
                    + "landmarks of its group (itself and the boxes it suppressed)" : "")
    }
}
