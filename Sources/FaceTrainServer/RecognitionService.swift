import FaceTrain
import Foundation

/// What `POST /v1/recognize` and `POST /v1/users/{id}/verify` run: the builtin detector and the
/// model of the published version (or the one asked for), one predictor kept per version so a
/// request does not reread weights. Not HTTP (ServerRoutes) and not the rules of recognition
/// (FaceRecognizer).
final class RecognitionService: @unchecked Sendable {
    private let repository: ModelRepository
    private let lock = NSLock()
    private var detector: FaceDetector?
    /// Predictors by version, the most recently used last; at most `cachedVersions`.
    private var predictors: [(version: Int, predictor: FacePredictor)] = []
    static let cachedVersions = 3
    /// Copies of the detector and of cached versions' predictors that finished a request, at most
    /// `idleCopies` of each: their network buffers already have a photo's sizes, where a fresh copy
    /// allocates (and the kernel zeroes) its tens of MB again for every request.
    private var idleDetectors: [FaceDetector] = []
    private var idlePredictors: [Int: [FacePredictor]] = [:]
    static let idleCopies = 4
    /// The detector's best face score per crop SHA-256 (crops never change, so it never goes stale).
    private var scores: [String: Double] = [:]

    /// A face a recognition returned, as a JPEG, with what the model said: what a correction files.
    struct RecentCrop {
        var data: Data
        var version: Int
        /// The user the model decided on; nil when it rejected the face.
        var decidedUser: Int?
    }
    /// Recognised crops by SHA-256, the oldest first in `recentOrder`; in memory only, so a
    /// restart or an erasure forgets them.
    private var recent: [String: RecentCrop] = [:]
    private var recentOrder: [String] = []
    static let keptCrops = 512

    init(repository: ModelRepository) {
        self.repository = repository
    }

    /// The faces of `image` and what version `version` (nil: the published one) says of each.
    func recognize(_ image: Image, version: Int?) throws -> (version: Int, faces: [RecognizedFace]) {
        let (version, detector, predictor) = try parts(version: version)
        // This request's copies: each holds its own network buffers, kept afterwards for another.
        var recognizer = FaceRecognizer(detector: detector, predictor: predictor)
        defer { keepIdle(recognizer.detector, recognizer.predictor, version: version) }
        return (version, try recognizer.recognize(image))
    }

    private func keepIdle(_ detector: FaceDetector, _ predictor: FacePredictor, version: Int) {
        lock.withLock {
            if idleDetectors.count < Self.idleCopies { idleDetectors.append(detector) }
            // A version forgotten or dropped from the cache meanwhile keeps no copies.
            guard predictors.contains(where: { $0.version == version }) else { return }
            if idlePredictors[version, default: []].count < Self.idleCopies {
                idlePredictors[version, default: []].append(predictor)
            }
        }
    }

    /// The detector's best face score on each file (as the face check looks at it; 0 when no face
    /// is found), nil for a file that cannot be read; kept per SHA-256 in `hashes`.
    func faceScores(_ files: [URL?], hashes: [String]) -> [Double?] {
        guard var detector = try? loadedDetector() else { return files.map { _ in nil } }
        return zip(files, hashes).map { file, hash in
            if let known = (lock.withLock { scores[hash] }) { return known }
            guard let file, let image = try? ImageDecoder.decode(contentsOf: file) else { return nil }
            let score =
                FaceCheck.look(at: image, by: &detector, thresholds: .standard).detections.map(\.score).max() ?? 0
            lock.withLock { scores[hash] = score }
            return score
        }
    }

    /// Keeps a recognised face's crop for a correction; its SHA-256, or nil when it cannot be encoded.
    func remember(_ face: RecognizedFace, version: Int) -> String? {
        let rgb = face.crop.converted(channels: 3)
        guard let data = try? JPEGWriter.encode(rgb: rgb.pixels, width: rgb.width, height: rgb.height, quality: 95)
        else { return nil }
        let hash = SHA256.hash(data)
        let decided: Int? =
            if case .user(let id) = face.classification.decidedLabel { id } else { nil }
        lock.withLock {
            if recent.updateValue(RecentCrop(data: data, version: version, decidedUser: decided), forKey: hash) == nil {
                recentOrder.append(hash)
            }
            while recentOrder.count > Self.keptCrops { recent[recentOrder.removeFirst()] = nil }
        }
        return hash
    }

    func recentCrop(_ hash: String) -> RecentCrop? { lock.withLock { recent[hash] } }

    /// After an erasure: the person's face scores, the withdrawn versions' predictors, and every
    /// recognised crop (any of them may show the person under another name).
    func forget(cropHashes: Set<String>, versions: [Int]) {
        lock.withLock {
            for hash in cropHashes { scores[hash] = nil }
            predictors.removeAll { versions.contains($0.version) }
            for version in versions { idlePredictors[version] = nil }
            recent = [:]
            recentOrder = []
        }
    }

    /// Loads the detector and the published version's model on a background thread, so that the
    /// first recognition after a start or a publication does not wait for them (a few hundred ms
    /// on 2 cores, paid by every request that arrives meanwhile). Nothing published: nothing to load.
    func warmUpInBackground() {
        DispatchQueue.global(qos: .utility).async { [self] in _ = try? parts(version: nil) }
    }

    /// A copy of the builtin detector, loaded on first use.
    private func loadedDetector() throws -> FaceDetector {
        try lock.withLock {
            if detector == nil {
                let model = try DetectorModel.builtin()
                detector = FaceDetector(model: model.model, strides: model.manifest.strides)
            }
            return detector!
        }
    }

    private func parts(version asked: Int?) throws -> (Int, FaceDetector, FacePredictor) {
        let version: Int
        if let asked {
            version = asked
        } else {
            guard let pointer = try repository.latestPointer() else {
                throw ClientError(404, "no model is published yet; POST /v1/training trains and publishes one")
            }
            version = pointer.version
        }
        var detector = try loadedDetector()
        lock.lock()
        defer { lock.unlock() }
        if let idle = idleDetectors.popLast() { detector = idle }
        if let index = predictors.firstIndex(where: { $0.version == version }) {
            let entry = predictors.remove(at: index)
            predictors.append(entry)
            return (version, detector, idlePredictors[version]?.popLast() ?? entry.predictor)
        }
        let url = repository.bundleURL(version: version)
        guard FileSystem.kind(at: url) == .directory else {
            throw ClientError(404, "there is no version \(version); GET /v1/models lists the versions")
        }
        let predictor: FacePredictor
        do { predictor = try FacePredictor(bundle: try ModelBundle.open(url)) } catch {
            throw ClientError(409, "version \(version) cannot be used: \(error)")
        }
        predictors.append((version, predictor))
        if predictors.count > Self.cachedVersions { idlePredictors[predictors.removeFirst().version] = nil }
        return (version, detector, predictor)
    }
}
