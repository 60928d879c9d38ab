import CDetectorModel
import FaceTrainEngine
import Foundation

/// A trained face detector as files: `manifest.json` (the network's definition, the recipe, the
/// data's fingerprint, how training went, what it measured, the license of what it learnt from),
/// `weights.h5` and `SHA256SUMS` over both; checked before use, refused by name when damaged.
/// Not the training (DetectorTrainingSession) and not running it on photos (FaceDetector).
package struct DetectorModel: Sendable {
    package struct Manifest: Codable, Sendable, Equatable {
        package static let formatName = "facetrain.detector"
        package static let currentFormatVersion = 1

        package var format = formatName
        package var formatVersion = currentFormatVersion
        package var name: String
        package var version: Int
        package var facetrainVersion: String
        package var architecture: String
        package var definition: ModelDefinition
        /// Head strides, finest first: the network's outputs in this order.
        package var strides: [Int]
        package var data: DataSummary
        package var recipe: DetectorTrainingConfiguration
        package var training: TrainingSummary
        /// Figures measured on photos it never trained on, by name ("heldOut.ap.easy_medium", ...).
        package var metrics: [String: Double]
        package var provenance: String
        package var license: String
        /// The detector whose weights training started from ("name vN, weights.h5 SHA-256 ..."),
        /// or nil for random weights. Absent in manifests written before it existed.
        package var startedFrom: String?

        package init(
            name: String, version: Int, facetrainVersion: String, architecture: String, definition: ModelDefinition,
            strides: [Int], data: DataSummary, recipe: DetectorTrainingConfiguration, training: TrainingSummary,
            metrics: [String: Double], provenance: String, license: String
        ) {
            self.name = name
            self.version = version
            self.facetrainVersion = facetrainVersion
            self.architecture = architecture
            self.definition = definition
            self.strides = strides
            self.data = data
            self.recipe = recipe
            self.training = training
            self.metrics = metrics
            self.provenance = provenance
            self.license = license
        }

        package struct DataSummary: Codable, Sendable, Equatable {
            package var set: String
            package var fingerprint: String
            package var photos: Int
            package var faces: Int
            package var heldOutPhotos: Int

            package init(set: String, fingerprint: String, photos: Int, faces: Int, heldOutPhotos: Int) {
                self.set = set
                self.fingerprint = fingerprint
                self.photos = photos
                self.faces = faces
                self.heldOutPhotos = heldOutPhotos
            }
        }

        package struct TrainingSummary: Codable, Sendable, Equatable {
            package var epochs: [DetectorEpochRecord]
            package var seconds: Double
            package var threads: Int
            package var blas: String

            package init(epochs: [DetectorEpochRecord], seconds: Double, threads: Int, blas: String) {
                self.epochs = epochs
                self.seconds = seconds
                self.threads = threads
                self.blas = blas
            }
        }
    }

    package var manifest: Manifest
    package var model: TrainedModel
    /// Where it was loaded from ("builtin" or a folder).
    package var source: String
    /// SHA-256 of its weights.h5: names the weights a training started from.
    package var weightsChecksum = ""

    static let files = ["manifest.json", "weights.h5"]

    /// What a detector's manifest says of the terms its weights carry: those of the photos it
    /// learnt from.
    package static func licenseNote(set: String) -> String {
        "Trained on the detection set \(set); these weights derive from its photos and labels and carry their "
            + "terms. faces_in_photos holds WIDER FACE photos (CC BY-NC-ND 4.0: non-commercial research only) with "
            + "landmarks from YuNet (Apache-2.0): a detector trained on it is for non-commercial research only."
            + (set.contains("crops")
                ? " Its crop scenes hold CelebA crops (non-commercial research only) with YuNet's landmarks." : "")
    }

    /// `--detector`: "builtin" or a detector folder.
    package static func resolve(_ option: String) throws(DetectorModelError) -> DetectorModel {
        switch option {
        case "builtin": return try builtin()
        default: return try load(from: URL(fileURLWithPath: option))
        }
    }

    /// The detector compiled into facetrain (detector/builtin of its repository), verified.
    package static func builtin() throws(DetectorModelError) -> DetectorModel {
        var contents: [String: Data] = [:]
        for (index, name) in (files + ["SHA256SUMS"]).enumerated() {
            var size = 0
            guard let pointer = facetrain_detector_file(Int32(index), &size), size > 0 else { throw .noBuiltin }
            contents[name] = Data(bytes: pointer, count: size)
        }
        return try load(contents: contents, source: "builtin")
    }

    /// Writes a detector folder (which must not exist) with its SHA256SUMS, atomically.
    package static func write(manifest: Manifest, model: TrainedModel, to folder: URL) throws {
        guard !FileManager.default.fileExists(atPath: folder.path) else {
            throw DetectorModelError.exists(path: folder.path)
        }
        let staging = folder.deletingLastPathComponent().appendingPathComponent(
            FileSystem.temporaryName(for: folder.lastPathComponent))
        try FileSystem.createDirectory(staging)
        let manifestData = try JSONText.data(manifest) + Data("\n".utf8)
        let weights = try WeightsFile.encode(model, fileName: "weights.h5")
        let written = Array(zip(files, [manifestData, weights]))
        for (name, data) in written { try FileSystem.writeNewFile(data, to: staging.appendingPathComponent(name)) }
        try FileSystem.writeNewFile(
            Data(ChecksumList.render(files: written).utf8), to: staging.appendingPathComponent(ChecksumList.fileName))
        try FileSystem.sync(staging)
        try FileSystem.renameNoReplace(staging, to: folder)
    }

    /// Loads and verifies the detector in `folder`.
    package static func load(from folder: URL) throws(DetectorModelError) -> DetectorModel {
        var contents: [String: Data] = [:]
        for name in files + ["SHA256SUMS"] {
            guard let data = FileManager.default.contents(atPath: folder.appendingPathComponent(name).path) else {
                throw .missingFile(detector: folder.path, file: name)
            }
            contents[name] = data
        }
        return try load(contents: contents, source: folder.path)
    }

    /// Loads and verifies a detector from its files' bytes.
    package static func load(contents: [String: Data], source: String) throws(DetectorModelError) -> DetectorModel {
        switch ChecksumList.problem(of: files, in: contents) {
        case .missing(let file): throw .missingFile(detector: source, file: file)
        case .notListed(let file):
            throw .damaged(detector: source, file: ChecksumList.fileName, reason: "\(file) is not listed")
        case .mismatch(let file):
            throw .damaged(detector: source, file: file, reason: "its SHA-256 does not match SHA256SUMS")
        case nil: break
        }
        let manifest: Manifest
        do { manifest = try JSONDecoder().decode(Manifest.self, from: contents["manifest.json"]!) } catch {
            throw .damaged(detector: source, file: "manifest.json", reason: "not a detector manifest (\(error))")
        }
        guard manifest.format == Manifest.formatName, manifest.formatVersion <= Manifest.currentFormatVersion else {
            throw .damaged(
                detector: source, file: "manifest.json",
                reason:
                    "format \(manifest.format) \(manifest.formatVersion); this facetrain reads \(Manifest.formatName) "
                    + "up to \(Manifest.currentFormatVersion)")
        }
        guard manifest.definition.outputs?.count == manifest.strides.count, !manifest.strides.isEmpty else {
            throw .damaged(
                detector: source, file: "manifest.json",
                reason: "\(manifest.strides.count) strides for \(manifest.definition.outputs?.count ?? 1) outputs")
        }
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent(
            "facetrain-detector-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        defer { try? FileManager.default.removeItem(at: scratch) }
        do {
            try FileSystem.createDirectory(scratch)
            let weightsURL = scratch.appendingPathComponent("weights.h5")
            try FileSystem.writeNewFile(contents["weights.h5"]!, to: weightsURL)
            let weights = try WeightsFile.read(from: weightsURL, definition: manifest.definition)
            let model = TrainedModel(definition: manifest.definition, weights: weights)
            // A definition or weights that do not make a network are damage, found here, not later.
            _ = try Network(model: model)
            var detector = DetectorModel(manifest: manifest, model: model, source: source)
            detector.weightsChecksum = SHA256.hash(contents["weights.h5"]!)
            return detector
        } catch {
            throw .damaged(detector: source, file: "weights.h5", reason: "\(error)")
        }
    }
}

/// Why a detector cannot be used.
package enum DetectorModelError: Error, CustomStringConvertible, Equatable {
    case missingFile(detector: String, file: String)
    case damaged(detector: String, file: String, reason: String)
    case exists(path: String)
    case noBuiltin

    package var description: String {
        switch self {
        case .missingFile(let detector, let file):
            "detector \(detector) has no \(file). HINT: --detector takes a folder written by "
                + "`facetrain detector train`, or `builtin`."
        case .damaged(let detector, let file, let reason):
            "detector \(detector) is damaged: \(file): \(reason); nothing was detected. "
                + "HINT: restore the folder, retrain it with `facetrain detector train`, or use --detector builtin."
        case .exists(let path):
            "\(path) exists already; a detector is never overwritten. HINT: choose a new --out folder."
        case .noBuiltin:
            "this facetrain was built without a builtin detector. HINT: pass --detector PATH "
                + "(a folder written by `facetrain detector train`)."
        }
    }
}
