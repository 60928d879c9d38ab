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
        let length = body.prefix(8).withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }.littleEndian
        guard length > 0, length <= UInt64(body.count - 8) else { throw unreadable("bad header length") }
        let headerEnd = body.startIndex + 8 + Int(length)
        guard let header = try? JSONDecoder().decode(Header.self, from: body[(body.startIndex + 8)..<headerEnd]) else {
            throw unreadable("bad header")
        }
        guard header.formatVersion == formatVersion else {
            throw unreadable("format version \(header.formatVersion), this facetrain reads \(formatVersion)")
        }
        var offset = headerEnd
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
        let length = data.prefix(8).withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }.littleEndian
        guard length > 0, length <= UInt64(data.count - 8),
            let header = try? JSONDecoder().decode(Version.self, from: data[8..<(8 + Int(length))]),
            header.formatVersion < formatVersion
        else { return nil }
        return header.formatVersion
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

/// A file that could not be written; names it and says why.
public struct FileWriteError: Error, CustomStringConvertible {
    public var path: String
    public var reason: String
    public var hint = "check that the folder exists, is writable and has free space."
    public var description: String { "cannot write \(path): \(reason). HINT: \(hint)" }

    init(path: String, code: Int32) {
        self.path = path
        self.reason = String(cString: strerror(code))
    }

    init(path: String, reason: String, hint: String) {
        self.path = path
        self.reason = reason
        self.hint = hint
    }
}

/// Writes files so that a crash leaves the old content or the new, never a mix.
public enum DurableFile {
    /// Throws unless `url` can take a new file: its folder exists, and the rename that installs the
    /// file would not replace a device, pipe, folder, link, read-only file, or anything of a model
    /// bundle or the models folder's `latest.json` (published versions are never changed).
    public static func checkTarget(_ url: URL) throws {
        func refuse(_ reason: String, _ hint: String = "choose a path for a new or ordinary file.") -> FileWriteError {
            FileWriteError(path: url.path, reason: reason, hint: hint)
        }
        let folder = url.deletingLastPathComponent()
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: folder.path, isDirectory: &isDirectory), isDirectory.boolValue
        else { throw refuse("its folder \(folder.path) does not exist", "create the folder first.") }
        // A bundle holds its manifest and checksums; a models folder its version counter.
        let exists = { (name: String) in
            FileManager.default.fileExists(atPath: folder.appendingPathComponent(name).path)
        }
        if exists("manifest.json") && exists("SHA256SUMS") {
            throw refuse("it is inside a model bundle, which is never changed")
        }
        if url.lastPathComponent == "latest.json" && exists(".last-version") {
            throw refuse("it is the models folder's latest.json, which only publish and rollback write")
        }
        var status = stat()
        guard lstat(url.path, &status) == 0 else { return }
        switch status.st_mode & S_IFMT {
        case S_IFREG where status.st_mode & S_IWUSR == 0:
            throw refuse("it is read-only; nothing was replaced")
        case S_IFREG: return
        case S_IFLNK: throw refuse("it is a symbolic link, which would be replaced; pass the path it points to")
        default: throw refuse("it exists and is not a regular file (a folder, device or pipe); nothing was replaced")
        }
    }

    /// Writes `data` to a temporary sibling, fsyncs it, renames it over `url` and fsyncs the folder.
    public static func write(_ data: Data, to url: URL) throws {
        try checkTarget(url)
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
