import FaceTrainEngine
import Foundation

/// The state of a fit after a finished epoch: enough to continue as if never stopped.
///
/// One file: a little-endian UInt64 header length, a JSON header, the float32 data of every tensor
/// in header order, then the SHA-256 of everything before it (a damaged file is refused instead of
/// resumed into garbage weights). Written to a temporary file, fsynced and renamed, so a crash
/// leaves either the previous checkpoint or the new one.
struct Checkpoint {
    struct Header: Codable {
        var formatVersion = Checkpoint.formatVersion
        /// Hash of the data fingerprint and the configuration; resuming needs the same.
        var key: String
        var epochsDone: Int
        var history: [EpochRecord]
        var bestEpoch: Int
        var bestHeldOutLoss: Double
        var trainer: TrainerState?
        /// Name and shape of each tensor stored after the header, in order.
        var tensors: [TensorEntry]
        /// Epochs of a pretraining run (`history` is a fit's).
        var pretrainHistory: [PretrainEpochRecord]? = nil
        /// Epochs of a detector's training run.
        var detectorHistory: [DetectorEpochRecord]? = nil
    }

    /// The trainer's counters and generator states; its optimizer slots are stored as tensors.
    struct TrainerState: Codable {
        var step: Int
        var optimizerKind: String
        var optimizerStep: Int
        var generators: [String: UInt64]
    }

    struct TensorEntry: Codable {
        var name: String
        var shape: [Int]
    }

    static let formatVersion = 2
    /// Largest tensor a checkpoint may hold, in scalars (far above any ref-small's).
    static let maximumTensorCount = 1 << 28

    var header: Header
    var tensors: [String: Tensor]

    func write(to url: URL) throws(FitError) {
        var header = self.header
        let names = tensors.keys.sorted()
        header.tensors = names.map { TensorEntry(name: $0, shape: tensors[$0]!.shape) }
        do {
            let json = try JSONText.data(header, pretty: false)
            var data = Data()
            var length = UInt64(json.count).littleEndian
            withUnsafeBytes(of: &length) { data.append(contentsOf: $0) }
            data.append(json)
            for name in names { tensors[name]!.scalars.withUnsafeBytes { data.append(contentsOf: $0) } }
            let hasher = SHA256Hasher()
            hasher.update(data)
            data.append(contentsOf: hasher.finalize())
            try FileManager.default.createDirectory(
                at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try DurableFile.write(data, to: url)
        } catch {
            throw .checkpointNotWritable(path: url.path, reason: (error as? FileWriteError)?.reason ?? "\(error)")
        }
    }

    static func read(from url: URL) throws(FitError) -> Checkpoint {
        guard let data = FileManager.default.contents(atPath: url.path) else { throw .noCheckpoint(path: url.path) }
        func unreadable(_ reason: String) -> FitError { .checkpointUnreadable(path: url.path, reason: reason) }
        guard data.count >= 8 + 32 else { throw unreadable("truncated") }
        let body = data.prefix(data.count - 32)
        let hasher = SHA256Hasher()
        hasher.update(body)
        guard hasher.finalize() == Array(data.suffix(32)) else {
            if let version = olderFormatVersion(data) {
                throw unreadable("it was written by an older facetrain (format \(version)); run without --resume")
            }
            throw unreadable("its checksum does not match: the file is damaged")
        }
        guard let headerRange = headerRange(in: body) else { throw unreadable("bad header length") }
        guard let header = try? JSONDecoder().decode(Header.self, from: body[headerRange]) else {
            throw unreadable("bad header")
        }
        guard header.formatVersion == formatVersion else {
            throw unreadable("format version \(header.formatVersion), this facetrain reads \(formatVersion)")
        }
        var offset = headerRange.upperBound
        var tensors: [String: Tensor] = [:]
        for entry in header.tensors {
            guard let count = elementCount(entry.shape), body.endIndex - offset >= count * 4 else {
                throw unreadable("bad shape \(entry.shape) of \(entry.name), or truncated")
            }
            var scalars = [Float](repeating: 0, count: count)
            scalars.withUnsafeMutableBytes { _ = body.copyBytes(to: $0, from: offset..<(offset + count * 4)) }
            tensors[entry.name] = Tensor(shape: entry.shape, scalars: scalars)
            offset += count * 4
        }
        guard offset == body.endIndex else { throw unreadable("\(body.endIndex - offset) bytes after the last tensor") }
        return Checkpoint(header: header, tensors: tensors)
    }

    /// The format version of a file from before checksums (format 1), whose header sits where it
    /// does now but which has no checksum at its end.
    static func olderFormatVersion(_ data: Data) -> Int? {
        struct Version: Decodable { var formatVersion: Int }
        guard let range = headerRange(in: data),
            let header = try? JSONDecoder().decode(Version.self, from: data[range]),
            header.formatVersion < formatVersion
        else { return nil }
        return header.formatVersion
    }

    /// Where the JSON header lies: after its UInt64 length, which must be positive and fit in `data`.
    static func headerRange(in data: Data) -> Range<Int>? {
        guard data.count >= 8 else { return nil }
        let length = data.prefix(8).withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }.littleEndian
        guard length > 0, length <= UInt64(data.count - 8) else { return nil }
        return (data.startIndex + 8)..<(data.startIndex + 8 + Int(length))
    }

    /// Scalars of a tensor of `shape`, or nil when a dimension is negative or the product is too large.
    static func elementCount(_ shape: [Int]) -> Int? {
        var count = 1
        for dimension in shape {
            guard dimension >= 0, dimension <= maximumTensorCount else { return nil }
            count *= dimension
            guard count <= maximumTensorCount else { return nil }
        }
        return count
    }
}

extension Checkpoint {
    /// The checkpoint of run `key`, read to resume it: its counters must fit a run of `epochs` epochs
    /// of `batchesPerEpoch` steps, and `recordCount` (the run's epoch records) must match them.
    static func readForResume(
        at url: URL, key: String, epochs: Int, batchesPerEpoch: Int, recordCount: (Header) -> Int
    ) throws(FitError) -> (checkpoint: Checkpoint, trainer: TrainerState) {
        let checkpoint = try read(from: url)
        guard checkpoint.header.key == key else { throw .checkpointMismatch(path: url.path) }
        let header = checkpoint.header
        guard (0...epochs).contains(header.epochsDone), recordCount(header) == header.epochsDone,
            let state = header.trainer, state.step == header.epochsDone * batchesPerEpoch,
            state.optimizerStep == state.step
        else {
            throw .checkpointUnreadable(path: url.path, reason: "its counters do not fit a run of \(epochs) epochs")
        }
        return (checkpoint, state)
    }

    /// The tensors a training run saves of its network ("weights/<layer>.<tensor>") and optimizer
    /// ("optimizer/<slot>/<parameter>"); `restore` reads them back.
    static func trainingTensors(network: Network, optimizer: OptimizerState) -> [String: Tensor] {
        var tensors: [String: Tensor] = [:]
        for (name, tensor) in optimizer.slots { tensors["optimizer/" + name] = tensor }
        for layer in network.weights {
            for named in layer.tensors { tensors["weights/\(layer.name).\(named.name)"] = named.tensor }
        }
        return tensors
    }

    /// Loads what `trainingTensors` saved into `network` and `optimizer`; throws when they do not fit.
    func restore(
        _ network: inout Network, definition: ModelDefinition, optimizer: inout some Optimizer, trainer: TrainerState
    ) throws {
        try network.load(FitSession.weights(tensors, prefix: "weights/", definition: definition))
        var slots: [String: Tensor] = [:]
        for (name, tensor) in tensors where name.hasPrefix("optimizer/") { slots[String(name.dropFirst(10))] = tensor }
        try optimizer.restore(OptimizerState(kind: trainer.optimizerKind, step: trainer.optimizerStep, slots: slots))
    }
}

/// The lock beside a checkpoint: one run per checkpoint at a time (a second run of the same data
/// and options would overwrite it), taken with the temporary files killed runs left half-written
/// removed; released with the checkpoint once its run has become a bundle or a base.
final class CheckpointLock {
    let checkpointURL: URL
    private var lock: FileLock?

    init(checkpointURL: URL) { self.checkpointURL = checkpointURL }

    private var lockURL: URL { checkpointURL.appendingPathExtension("lock") }

    func acquire() throws(FitError) {
        guard lock == nil else { return }
        let folder = checkpointURL.deletingLastPathComponent()
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            guard let acquired = try FileLock.acquire(lockURL, create: true, wait: false) else {
                throw FitError.alreadyRunning(checkpoint: checkpointURL.path)
            }
            lock = acquired
        } catch let error as FitError {
            throw error
        } catch {
            throw .checkpointNotWritable(path: lockURL.path, reason: "\(error)")
        }
        let temporaryPrefix = FileSystem.temporaryPrefix(for: checkpointURL.lastPathComponent)
        for name in (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        where name.hasPrefix(temporaryPrefix) {
            try? FileManager.default.removeItem(at: folder.appendingPathComponent(name))
        }
    }

    /// Deletes the checkpoint and its lock.
    func removeCheckpoint() {
        try? FileManager.default.removeItem(at: checkpointURL)
        try? FileManager.default.removeItem(at: lockURL)
        lock?.release()
        lock = nil
    }
}
