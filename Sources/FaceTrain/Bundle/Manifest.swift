import FaceTrainEngine
import Foundation

/// manifest.json: what a bundle holds and how it was made.
///
/// Encoded pretty-printed with sorted keys; optional fields are written as `null` so every key
/// is always present. `files` lists every other file of the bundle (not manifest.json and not
/// SHA256SUMS) with its SHA-256 and size.
///
/// `contentSHA256` identifies the manifest without its `files` list. The Core ML export embeds it
/// as "manifest SHA-256"; it cannot be the hash of manifest.json itself, because the export is
/// one of the `files` and that would be circular. See `canonicalContent` for the exact bytes.
public struct Manifest: Codable, Sendable, Equatable {
    /// Newest layout version this code reads; readers refuse newer ones. A bundle is written with
    /// the oldest version that describes it: 1 for a plain layer stack, 2 when a convolution has
    /// groups or a layer adds an earlier output (facetrain before 2 could not run those), 3 with
    /// routes, upsampling or a list of outputs (a detector).
    public static let currentFormatVersion = 3

    /// One output of the classifier, in output order.
    public struct ClassEntry: Codable, Sendable, Equatable {
        /// "negative" (labels "1" and "2") or "user" (`ClassLabel.kindName`), kept as read.
        public var kind: String
        /// What the model outputs, written as "1", "2" or the user id.
        public var label: ClassLabel
        /// The user id, for user classes.
        public var id: Int?
        public var name: String

        /// The entry of `label`: its kind, and its id when it is a user.
        public init(label: ClassLabel, name: String) {
            self.label = label
            self.kind = label.kindName
            self.id = label.isUser ? label.id : nil
            self.name = name
        }

        /// Reserved class "1": the crop is not a face.
        public static let notAFace = negative(.notAFace)
        /// Reserved class "2": a face of someone not enrolled.
        public static let unknownPerson = negative(.unknownPerson)

        private static func negative(_ label: ClassLabel) -> ClassEntry {
            ClassEntry(label: label, name: label.negativeName ?? "")
        }

        /// A user's class; its label is the id as a string.
        public static func user(_ user: UserEntry) -> ClassEntry {
            ClassEntry(label: .user(user.id), name: user.name)
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(kind, forKey: .kind)
            try container.encode(label, forKey: .label)
            try container.encodeIfPresent(id, forKey: .id)
            try container.encode(name, forKey: .name)
        }
    }

    /// A user as the iOS app's `model/info` payload lists them (the data folder's record).
    public typealias UserEntry = UserRecord

    /// One layer in readable form.
    public struct ArchitectureLayer: Codable, Sendable, Equatable {
        /// "<index>.<kind>", as in weights.h5.
        public var name: String
        /// E.g. "Conv2D 3->16, kernel 3x3, stride 1, padding 1".
        public var summary: String
        public var parameterCount: Int
        public var specification: LayerSpecification

        public init(name: String, specification: LayerSpecification) {
            self.name = name
            self.specification = specification
            self.summary = Manifest.summary(of: specification)
            self.parameterCount = specification.parameterShapes.reduce(0) { $0 + $1.shape.reduce(1, *) }
        }
    }

    /// A file of the bundle with its checksum.
    public struct FileEntry: Codable, Sendable, Equatable {
        /// Relative to the bundle directory.
        public var path: String
        public var sha256: String
        public var size: Int64

        public init(path: String, sha256: String, size: Int64) {
            self.path = path
            self.sha256 = sha256
            self.size = size
        }
    }

    public var formatVersion: Int
    public var version: Int
    /// ISO 8601, UTC, whole seconds.
    public var createdAt: String
    public var facetrainVersion: String
    public var gitCommit: String?
    public var classes: [ClassEntry]
    public var users: [UserEntry]
    public var input: InputSpecification
    public var architecture: [ArchitectureLayer]
    public var training: [String: JSONValue]
    public var seed: UInt64
    public var dataFingerprint: String
    /// BLAS library, version and kernel (`BLASRuntime.summary`).
    public var blas: String
    /// Headline numbers from metrics.json (`MetricsDocument.keyNumbers`).
    public var metrics: [String: Double]
    /// Minimum confidence at which the app should accept a user prediction (set by eval).
    public var acceptThreshold: Double?
    /// The version this one was trained from or replaces, if any.
    public var parentVersion: Int?
    public var files: [FileEntry]

    enum CodingKeys: String, CodingKey {
        case formatVersion, version, createdAt, facetrainVersion, gitCommit, classes, users, input, architecture
        case training, seed, dataFingerprint, blas, metrics, acceptThreshold, parentVersion, files
    }

    /// A manifest for `definition`, whose class labels must be "1", "2", then the users' ids (a
    /// data folder's classes always are; anything else is a programming error and stops).
    public init(
        version: Int, definition: ModelDefinition, users: [UserEntry], training: [String: JSONValue], seed: UInt64,
        dataFingerprint: String, gitCommit: String?, metrics: MetricsDocument? = nil, acceptThreshold: Double? = nil,
        parentVersion: Int? = nil, createdAt: Date = Date(), blas: String = BLASRuntime.summary
    ) {
        let usersById = Dictionary(users.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        self.formatVersion = definition.minimumFormatVersion
        self.version = version
        self.createdAt = Manifest.timestamp(createdAt)
        self.facetrainVersion = FaceTrainVersion.string
        self.gitCommit = gitCommit
        self.classes = definition.classLabels.map { text in
            guard let label = ClassLabel(text) else { preconditionFailure(ClassLabelError(label: text).description) }
            switch label {
            case .notAFace: return .notAFace
            case .unknownPerson: return .unknownPerson
            case .user(let id): return usersById[id].map(ClassEntry.user) ?? ClassEntry(label: label, name: "")
            }
        }
        self.users = users
        self.input = definition.input
        self.architecture = zip(definition.layerNames, definition.layers).map {
            ArchitectureLayer(name: $0, specification: $1)
        }
        self.training = training
        self.seed = seed
        self.dataFingerprint = dataFingerprint
        self.blas = blas
        self.metrics = metrics?.keyNumbers ?? [:]
        self.acceptThreshold = acceptThreshold
        self.parentVersion = parentVersion
        self.files = []
    }

    /// The model definition the manifest describes.
    public var definition: ModelDefinition {
        ModelDefinition(
            input: input, layers: architecture.map(\.specification), classLabels: classes.map(\.label.description))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(formatVersion, forKey: .formatVersion)
        try container.encode(version, forKey: .version)
        try container.encode(createdAt, forKey: .createdAt)
        try container.encode(facetrainVersion, forKey: .facetrainVersion)
        try container.encode(gitCommit, forKey: .gitCommit)
        try container.encode(classes, forKey: .classes)
        try container.encode(users, forKey: .users)
        try container.encode(input, forKey: .input)
        try container.encode(architecture, forKey: .architecture)
        try container.encode(training, forKey: .training)
        try container.encode(seed, forKey: .seed)
        try container.encode(dataFingerprint, forKey: .dataFingerprint)
        try container.encode(blas, forKey: .blas)
        try container.encode(metrics, forKey: .metrics)
        try container.encode(acceptThreshold, forKey: .acceptThreshold)
        try container.encode(parentVersion, forKey: .parentVersion)
        if encoder.userInfo[Manifest.omitFilesKey] as? Bool != true {
            try container.encode(files, forKey: .files)
        }
    }

    private static let omitFilesKey = CodingUserInfoKey(rawValue: "facetrain.manifest.omitFiles")!

    /// manifest.json bytes: pretty-printed, sorted keys, a final newline.
    public func encoded() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(self) + Data("\n".utf8)
    }

    /// Decodes manifest.json bytes.
    public static func decode(_ data: Data) throws -> Manifest {
        try JSONDecoder().decode(Manifest.self, from: data)
    }

    /// The canonical bytes `contentSHA256` hashes: the manifest as compact JSON (no whitespace),
    /// keys sorted, slashes unescaped, numbers as Swift's JSONEncoder prints them, and the `files`
    /// key left out. Decoding manifest.json and calling this again gives the same bytes.
    public func canonicalContent() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.userInfo[Manifest.omitFilesKey] = true
        return try encoder.encode(self)
    }

    /// SHA-256 (hex) of `canonicalContent()`: the manifest's identity without its file list.
    public var contentSHA256: String {
        get throws { SHA256.hash(try canonicalContent()) }
    }

    /// "2025-01-31T12:00:00Z".
    public static func timestamp(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.string(from: date)
    }

    /// One readable line for a layer (its kind's `summary`).
    public static func summary(of layer: LayerSpecification) -> String { layer.layerKind.summary }
}
