import FaceTrainEngine
import Foundation

/// The exports of a bundle: the metadata fit embeds and the encoders, shared by `fit` (which
/// writes them into the bundle) and `export` (which re-creates them from a verified bundle, byte
/// for byte).
public enum BundleExport {
    /// An export file format.
    public enum Format: String, CaseIterable, Sendable {
        /// Core ML `.mlmodel` (specification version 1) for the iOS app.
        case coreML = "coreml"
        /// ONNX (IR 7, opset 13).
        case onnx

        /// The file name the export has inside a bundle.
        public var bundleFileName: String {
            switch self {
            case .coreML: CoreMLExporter.fileName
            case .onnx: ONNXExporter.fileName
            }
        }
    }

    /// Author written into every export.
    public static let author = "facetrain"
    /// License written into every export.
    public static let license = "Proprietary: for the registered users' app only"

    /// The metadata of a bundle's exports, taken from its manifest only (so a re-export of the same
    /// bundle is identical to the bundle's own file).
    public static func metadata(for manifest: Manifest) throws -> ExportMetadata {
        ExportMetadata(
            version: manifest.version, author: author, license: license, facetrainVersion: manifest.facetrainVersion,
            manifestSHA256: try manifest.contentSHA256, acceptThreshold: manifest.acceptThreshold,
            dataFingerprint: manifest.dataFingerprint)
    }

    /// The bytes of one export of `model`, described by `manifest`.
    public static func encode(_ model: TrainedModel, manifest: Manifest, format: Format) throws -> Data {
        let metadata = try metadata(for: manifest)
        switch format {
        case .coreML: return try CoreMLExporter.encode(model, metadata: metadata)
        case .onnx: return try ONNXExporter.encode(model, metadata: metadata)
        }
    }

    /// The bytes of one export of a verified bundle.
    public static func encode(_ bundle: ModelBundle, format: Format) throws -> Data {
        try encode(bundle.model, manifest: bundle.manifest, format: format)
    }
}
