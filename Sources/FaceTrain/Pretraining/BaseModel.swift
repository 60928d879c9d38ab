import CBaseModel
import FaceTrainEngine
import Foundation

/// A pretrained extractor that `fit` starts from: a folder with `manifest.json`, `weights.h5`
/// (the extractor's layers, named as in the classifier that `fit` builds on it), `bank.h5` (unit
/// embeddings of strangers the extractor never trained on: the floor of the threshold
/// calibration), `report.html` (its verification ROC) and `SHA256SUMS` over them. The first
/// three are checked before use.
public struct BaseModel: Sendable {
    public struct Manifest: Codable, Sendable, Equatable {
        public static let formatName = "facetrain.base"
        /// 2: the definition's input may have a crop.
        public static let currentFormatVersion = 2

        public var format = formatName
        public var formatVersion = currentFormatVersion
        public var name: String
        public var version: Int
        public var facetrainVersion: String
        public var architecture: String
        public var width: Int
        public var definition: ModelDefinition
        public var embeddingFeatures: Int
        public var data: DataSummary
        public var recipe: PretrainConfiguration
        public var training: TrainingSummary
        public var verification: VerificationMetrics
        public var bank: BankSummary
        public var provenance: String
        public var license: String

        public struct DataSummary: Codable, Sendable, Equatable {
            public var corpus: String
            public var fingerprint: String
            public var identities: Int
            public var crops: Int
            public var verificationIdentities: Int
            public var verificationCrops: Int
        }

        public struct TrainingSummary: Codable, Sendable, Equatable {
            public var epochs: [PretrainEpochRecord]
            public var seconds: Double
            public var threads: Int
            public var blas: String
        }

        public struct BankSummary: Codable, Sendable, Equatable {
            public var identities: Int
            public var crops: Int
            public var split: String
        }
    }

    public var manifest: Manifest
    public var extractor: TrainedModel
    /// Unit-length embeddings of the bank's crops, one row each, and the identity of each row.
    public var bankEmbeddings: [[Float]]
    public var bankIdentities: [Int]
    /// SHA-256 of the manifest file: what a bundle records as its base.
    public var manifestSHA256: String
    /// Where it was loaded from ("builtin" or a folder).
    public var source: String

    static let files = ["manifest.json", "weights.h5", "bank.h5"]

    /// Writes a base model folder (which must not exist) and its SHA256SUMS.
    public static func write(
        manifest: Manifest, extractor: TrainedModel, bankEmbeddings: [[Float]], bankIdentities: [Int], to folder: URL
    ) throws {
        guard !FileManager.default.fileExists(atPath: folder.path) else {
            throw BaseModelError.exists(path: folder.path)
        }
        let staging = folder.deletingLastPathComponent().appendingPathComponent(
            FileSystem.temporaryName(for: folder.lastPathComponent))
        try FileSystem.createDirectory(staging)
        let manifestData = try JSONText.data(manifest) + Data("\n".utf8)
        let weights = try WeightsFile.encode(extractor, fileName: "weights.h5")
        let bank = try encodeBank(bankEmbeddings, identities: bankIdentities)
        // report.html (the ROC and pretraining curves) is for people; loading never reads it.
        let report = Data(BaseReport.html(manifest).utf8)
        let written = Array(zip(files + ["report.html"], [manifestData, weights, bank, report]))
        for (name, data) in written { try FileSystem.writeNewFile(data, to: staging.appendingPathComponent(name)) }
        try FileSystem.writeNewFile(
            Data(ChecksumList.render(files: written).utf8), to: staging.appendingPathComponent(ChecksumList.fileName))
        try FileSystem.sync(staging)
        try FileSystem.renameNoReplace(staging, to: folder)
    }

    /// Loads and verifies the base model in `folder`.
    public static func load(from folder: URL) throws(BaseModelError) -> BaseModel {
        var contents: [String: Data] = [:]
        for name in files + ["SHA256SUMS"] {
            guard let data = FileManager.default.contents(atPath: folder.appendingPathComponent(name).path) else {
                throw .missingFile(base: folder.path, file: name)
            }
            contents[name] = data
        }
        return try load(contents: contents, source: folder.path)
    }

    /// Loads and verifies a base model from its files' bytes (the builtin one is compiled in).
    public static func load(contents: [String: Data], source: String) throws(BaseModelError) -> BaseModel {
        switch ChecksumList.problem(of: files, in: contents) {
        case .missing(let file): throw .missingFile(base: source, file: file)
        case .notListed(let file):
            throw .damaged(base: source, file: ChecksumList.fileName, reason: "\(file) is not listed")
        case .mismatch(let file):
            throw .damaged(base: source, file: file, reason: "its SHA-256 does not match SHA256SUMS")
        case nil: break
        }
        let manifestData = contents["manifest.json"]!
        let manifest: Manifest
        do { manifest = try JSONDecoder().decode(Manifest.self, from: manifestData) } catch {
            throw .damaged(base: source, file: "manifest.json", reason: "not a base manifest (\(error))")
        }
        guard manifest.format == Manifest.formatName, manifest.formatVersion <= Manifest.currentFormatVersion else {
            throw .damaged(
                base: source, file: "manifest.json",
                reason:
                    "format \(manifest.format) \(manifest.formatVersion); this facetrain reads \(Manifest.formatName) "
                    + "up to \(Manifest.currentFormatVersion)")
        }
        // A definition that checks (its input crop included) before any weight is read against it.
        do { try manifest.definition.validate(as: .extractor) } catch {
            throw .damaged(base: source, file: "manifest.json", reason: "\(error)")
        }
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent(
            "facetrain-base-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        defer { try? FileManager.default.removeItem(at: scratch) }
        do {
            try FileSystem.createDirectory(scratch)
            let weightsURL = scratch.appendingPathComponent("weights.h5")
            let bankURL = scratch.appendingPathComponent("bank.h5")
            try FileSystem.writeNewFile(contents["weights.h5"]!, to: weightsURL)
            try FileSystem.writeNewFile(contents["bank.h5"]!, to: bankURL)
            let weights = try WeightsFile.read(from: weightsURL, definition: manifest.definition)
            let (embeddings, identities) = try readBank(bankURL, features: manifest.embeddingFeatures, source: source)
            return BaseModel(
                manifest: manifest, extractor: TrainedModel(definition: manifest.definition, weights: weights),
                bankEmbeddings: embeddings, bankIdentities: identities, manifestSHA256: SHA256.hash(manifestData),
                source: source)
        } catch let error as BaseModelError {
            throw error
        } catch {
            throw .damaged(base: source, file: "weights.h5 or bank.h5", reason: "\(error)")
        }
    }

    /// The base compiled into facetrain (base/builtin of its repository), verified.
    public static func builtin() throws(BaseModelError) -> BaseModel {
        var contents: [String: Data] = [:]
        for (index, name) in (files + ["SHA256SUMS"]).enumerated() {
            var size = 0
            guard let pointer = facetrain_base_file(Int32(index), &size), size > 0 else { throw .noBuiltin }
            contents[name] = Data(bytes: pointer, count: size)
        }
        return try load(contents: contents, source: "builtin")
    }

    /// Checks that the base's extractor is the extractor of a known architecture, so the network
    /// `fit` builds on it takes every one of its tensors.
    static func checkExtractor(_ base: BaseModel) throws(FitError) {
        let recipe = base.manifest.recipe
        guard ModelDefinition.extractorArchitectures.contains(recipe.architecture) else {
            throw .engine(
                BaseModelError.incompatible(
                    base: base.source, reason: "its architecture \(recipe.architecture) is unknown"
                )
                .description)
        }
        let input = base.manifest.definition.input
        let expected = ModelDefinition.extractor(
            architecture: recipe.architecture, inputSize: input.networkWidth, width: base.manifest.width)
        guard expected.layers == base.extractor.definition.layers, input.width == input.height, input.channels == 3
        else {
            throw .engine(
                BaseModelError.incompatible(
                    base: base.source,
                    reason: "its layers are not those of \(recipe.architecture) at width \(base.manifest.width)"
                ).description)
        }
    }

    /// The classifier over `labels` that `fit` builds on this base: its recorded architecture at its
    /// width and input, whose first layers are exactly the extractor's.
    func classifier(labels: [String]) throws(FitError) -> ModelDefinition {
        let named: NamedArchitecture
        do { named = try ModelDefinition.architecture(named: manifest.recipe.architecture) } catch {
            throw .engine(BaseModelError.incompatible(base: source, reason: error.description).description)
        }
        let input = manifest.definition.input
        var definition = named.classifier(
            classLabels: labels, inputSize: input.networkWidth, channels: input.channels, width: manifest.width)
        definition.input = input  // with the base's crop
        return definition
    }

    /// `--base`: "builtin", "none" (nil) or a base model folder.
    public static func resolve(_ option: String) throws(BaseModelError) -> BaseModel? {
        switch option {
        case "none": return nil
        case "builtin": return try builtin()
        default: return try load(from: URL(fileURLWithPath: option))
        }
    }

    /// The bundle manifest's record of this base for a fit that trains `training` on it.
    public func reference(training: String) -> BaseReference {
        BaseReference(name: manifest.name, version: manifest.version, sha256: manifestSHA256, training: training)
    }

    static func encodeBank(_ embeddings: [[Float]], identities: [Int]) throws -> Data {
        try HDF5File.withLibrary {
            let file = try HDF5File.createInMemory()
            let root = file.root
            try root.writeString("format", "facetrain.bank")
            let features = embeddings.first?.count ?? 0
            try root.writeDataset(
                "embeddings", shape: [embeddings.count, features], scalars: embeddings.flatMap { $0 })
            try root.writeDataset("identity", shape: [identities.count], scalars: identities.map { Float($0) })
            let image = try file.image()
            try file.close()
            return image
        }
    }

    static func readBank(_ url: URL, features: Int, source: String) throws -> (embeddings: [[Float]], identities: [Int])
    {
        try HDF5File.withLibrary {
            let file = try HDF5File.open(at: url.path)
            let (shape, scalars) = try file.root.readDataset("embeddings")
            let (identityShape, identityValues) = try file.root.readDataset("identity")
            try file.close()
            guard shape.count == 2, shape[0] == 0 || shape[1] == features, identityShape == [shape[0]] else {
                throw BaseModelError.damaged(
                    base: source, file: "bank.h5", reason: "embeddings \(shape) for \(features) features")
            }
            let rows = (0..<shape[0]).map { Array(scalars[($0 * features)..<(($0 + 1) * features)]) }
            return (rows, identityValues.map { Int($0) })
        }
    }
}

/// Why a base model cannot be used.
public enum BaseModelError: Error, CustomStringConvertible, Equatable {
    case missingFile(base: String, file: String)
    case damaged(base: String, file: String, reason: String)
    case exists(path: String)
    case incompatible(base: String, reason: String)
    case noBuiltin

    public var description: String {
        switch self {
        case .missingFile(let base, let file):
            "base model \(base) has no \(file). HINT: --base takes a folder written by `facetrain pretrain`, "
                + "`builtin` or `none`."
        case .damaged(let base, let file, let reason):
            "base model \(base) is damaged: \(file): \(reason); nothing was trained. "
                + "HINT: restore the folder, retrain it with `facetrain pretrain`, or use --base builtin."
        case .exists(let path):
            "\(path) exists already; a base model is never overwritten. HINT: choose a new --out folder."
        case .incompatible(let base, let reason):
            "base model \(base) cannot start this fit: \(reason). "
                + "HINT: use a base of the same architecture and input size, or --base none."
        case .noBuiltin:
            "this facetrain was built without a builtin base model. HINT: pass --base PATH or --base none."
        }
    }
}
