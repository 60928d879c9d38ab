/// Descriptive data written into exported models: Core ML `metadata` and ONNX `metadata_props`.
public struct ExportMetadata: Sendable, Equatable {
    /// Bundle version: ONNX `model_version`, and by default the Core ML `versionString`.
    public var version: Int
    /// Core ML `versionString`; "\(version)" unless given.
    public var versionString: String
    /// One line shown by Xcode (Core ML `shortDescription`) and stored as ONNX `doc_string`.
    public var shortDescription: String
    public var author: String
    public var license: String
    /// Toolkit version that trained the model; nil leaves the entry out.
    public var facetrainVersion: String?
    /// SHA-256 (hex) of the bundle manifest the model was exported from; nil leaves it out.
    public var manifestSHA256: String?
    /// Probability under which an app should answer "unknown"; nil leaves it out.
    public var acceptThreshold: Double?
    /// Fingerprint of the training data (e.g. a hash over file checksums); nil leaves it out.
    public var dataFingerprint: String?
    /// Further free-form key-value pairs; on a key clash the named fields above win.
    public var additionalEntries: [String: String]

    /// Metadata with the toolkit's version filled in and everything else as given.
    public init(
        version: Int,
        versionString: String? = nil,
        shortDescription: String = "Face classifier trained with facetrain",
        author: String = "",
        license: String = "",
        facetrainVersion: String? = FaceTrainVersion.string,
        manifestSHA256: String? = nil,
        acceptThreshold: Double? = nil,
        dataFingerprint: String? = nil,
        additionalEntries: [String: String] = [:]
    ) {
        self.version = version
        self.versionString = versionString ?? String(version)
        self.shortDescription = shortDescription
        self.author = author
        self.license = license
        self.facetrainVersion = facetrainVersion
        self.manifestSHA256 = manifestSHA256
        self.acceptThreshold = acceptThreshold
        self.dataFingerprint = dataFingerprint
        self.additionalEntries = additionalEntries
    }

    /// Keys of the named entries in Core ML `userDefined` and ONNX `metadata_props`.
    public enum Key {
        public static let facetrainVersion = "facetrain_version"
        public static let manifestSHA256 = "manifest_sha256"
        public static let acceptThreshold = "accept_threshold"
        public static let dataFingerprint = "data_fingerprint"
    }

    /// The free-form entries (Core ML `userDefined`), sorted by key so that exports are reproducible.
    public var userDefinedEntries: [(key: String, value: String)] {
        var entries = additionalEntries
        if let facetrainVersion { entries[Key.facetrainVersion] = facetrainVersion }
        if let manifestSHA256 { entries[Key.manifestSHA256] = manifestSHA256 }
        if let acceptThreshold { entries[Key.acceptThreshold] = String(acceptThreshold) }
        if let dataFingerprint { entries[Key.dataFingerprint] = dataFingerprint }
        return entries.sorted { $0.key < $1.key }.map { (key: $0.key, value: $0.value) }
    }
}
