import Foundation

/// The state of a fit after a finished epoch: enough to continue as if never stopped.
///
/// One file: a little-endian UInt64 header length, a JSON header, then the float32 data of every
/// tensor in header order. Written to a temporary file, fsynced and renamed, so a crash leaves
/// either the previous checkpoint or the new one.
struct Checkpoint {
    struct Header: Codable {
        var formatVersion = 1
        /// Hash of the data fingerprint and the configuration; resuming needs the same.
        var key: String
        var epochsDone: Int
        var history: [EpochRecord]
        var bestEpoch: Int
        var bestHeldOutLoss: Double
        var trainer: TrainerState?
        /// Name and shape of each tensor stored after the header, in order.
        var tensors: [TensorEntry]
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
            try FileManager.default.createDirectory(
                at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try DurableFile.write(data, to: url)
        } catch {
            throw .checkpointNotWritable(path: url.path, reason: (error as? FileWriteError)?.reason ?? "\(error)")
        }
    }

    static func read(from url: URL) throws(FitError) -> Checkpoint {
        guard let data = FileManager.default.contents(atPath: url.path) else { throw .noCheckpoint(path: url.path) }
        guard data.count >= 8 else { throw .checkpointUnreadable(path: url.path, reason: "truncated") }
        let length = Int(data.prefix(8).withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }.littleEndian)
        guard length > 0, 8 + length <= data.count,
            let header = try? JSONDecoder().decode(Header.self, from: data.subdata(in: 8..<(8 + length)))
        else { throw .checkpointUnreadable(path: url.path, reason: "bad header") }
        var offset = 8 + length
        var tensors: [String: Tensor] = [:]
        for entry in header.tensors {
            let count = entry.shape.reduce(1, *)
            guard offset + count * 4 <= data.count else {
                throw .checkpointUnreadable(path: url.path, reason: "truncated")
            }
            var scalars = [Float](repeating: 0, count: count)
            scalars.withUnsafeMutableBytes { _ = data.copyBytes(to: $0, from: offset..<(offset + count * 4)) }
            tensors[entry.name] = Tensor(shape: entry.shape, scalars: scalars)
            offset += count * 4
        }
        return Checkpoint(header: header, tensors: tensors)
    }
}

/// A file that could not be written; names it and says why.
public struct FileWriteError: Error, CustomStringConvertible {
    public var path: String
    public var reason: String
    public var description: String {
        "cannot write \(path): \(reason). HINT: check that the folder exists, is writable and has free space."
    }

    init(path: String, code: Int32) {
        self.path = path
        self.reason = String(cString: strerror(code))
    }
}

/// Writes files so that a crash leaves the old content or the new, never a mix.
public enum DurableFile {
    /// Writes `data` to a temporary sibling, fsyncs it, renames it over `url` and fsyncs the folder.
    public static func write(_ data: Data, to url: URL) throws {
        let temporary = url.deletingLastPathComponent().appendingPathComponent(
            ".\(url.lastPathComponent).tmp-\(getpid())")
        let descriptor = open(temporary.path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        guard descriptor >= 0 else { throw FileWriteError(path: url.path, code: errno) }
        var failure: Int32 = 0
        data.withUnsafeBytes { bytes in
            var written = 0
            while written < bytes.count {
                let result = Foundation.write(descriptor, bytes.baseAddress! + written, bytes.count - written)
                if result < 0 {
                    if errno == EINTR { continue }
                    failure = errno
                    return
                }
                written += result
            }
        }
        if failure == 0 && fsync(descriptor) != 0 { failure = errno }
        close(descriptor)
        if failure == 0 && rename(temporary.path, url.path) != 0 { failure = errno }
        guard failure == 0 else {
            unlink(temporary.path)
            throw FileWriteError(path: url.path, code: failure)
        }
        let folder = open(url.deletingLastPathComponent().path, O_RDONLY)
        if folder >= 0 {
            fsync(folder)
            close(folder)
        }
    }
}
