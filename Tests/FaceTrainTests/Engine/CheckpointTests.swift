import Foundation
import Testing

@testable import FaceTrain
@testable import FaceTrainEngine

/// A checkpoint is read back exactly, and a damaged or crafted one is refused with a reason instead
/// of crashing the resumed fit or feeding it garbage weights.
@Suite("Checkpoint file")
struct CheckpointTests {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("checkpoint-\(UUID().uuidString)")

    var checkpoint: Checkpoint {
        let record = EpochRecord(
            epoch: 1, trainLoss: 1.5, trainAccuracy: 0.25, heldOutLoss: 1.25, heldOutAccuracy: 0.5,
            learningRate: 0.001, seconds: 2)
        return Checkpoint(
            header: .init(
                key: "abc", epochsDone: 1, history: [record], bestEpoch: 1, bestHeldOutLoss: 1.25,
                trainer: .init(step: 7, optimizerKind: "adamw", optimizerStep: 7, generators: ["dropout": 9]),
                tensors: []),
            tensors: [
                "weights/a": Tensor(shape: [2, 3], scalars: [1, 2, 3, 4, 5, 6]),
                "weights/b": Tensor(shape: [1], scalars: [-0.5]),
            ])
    }

    /// Header length, JSON header, raw data and a correct checksum: the file a bug or an editor
    /// could leave, which the checksum alone does not catch.
    func writeCrafted(header: String, data: [Float], lengthOverride: UInt64? = nil) throws {
        let json = Data(header.utf8)
        var bytes = Data()
        var length = (lengthOverride ?? UInt64(json.count)).littleEndian
        withUnsafeBytes(of: &length) { bytes.append(contentsOf: $0) }
        bytes.append(json)
        data.withUnsafeBytes { bytes.append(contentsOf: $0) }
        let hasher = SHA256Hasher()
        hasher.update(bytes)
        bytes.append(contentsOf: hasher.finalize())
        try bytes.write(to: url)
    }

    func reason() -> String? {
        do {
            _ = try Checkpoint.read(from: url)
            return nil
        } catch {
            guard case .checkpointUnreadable(_, let reason) = error else { return "wrong error \(error)" }
            return reason
        }
    }

    @Test func roundTrip() throws {
        defer { try? FileManager.default.removeItem(at: url) }
        try checkpoint.write(to: url)
        let read = try Checkpoint.read(from: url)
        #expect(read.tensors == checkpoint.tensors)
        #expect(read.header.epochsDone == 1 && read.header.history == checkpoint.header.history)
        #expect(read.header.trainer?.generators == ["dropout": 9])
        #expect(read.header.tensors.map(\.name) == ["weights/a", "weights/b"])
    }

    @Test func damagedBytesAreRefused() throws {
        defer { try? FileManager.default.removeItem(at: url) }
        try checkpoint.write(to: url)
        let original = try Data(contentsOf: url)
        for position in [0, 3, 20, original.count - 30, original.count - 1] {
            var damaged = original
            damaged[position] ^= 0x40
            try damaged.write(to: url)
            #expect(reason()?.contains("checksum") == true, "byte \(position)")
        }
        for length in [0, 7, 39, original.count - 1] {
            try original.prefix(length).write(to: url)
            #expect(reason() != nil, "truncated to \(length) bytes")
        }
    }

    @Test func craftedHeadersAreRefusedWithoutCrashing() throws {
        defer { try? FileManager.default.removeItem(at: url) }
        func header(_ shape: String, version: Int = Checkpoint.formatVersion) -> String {
            """
            {"formatVersion": \(version), "key": "k", "epochsDone": 0, "history": [], "bestEpoch": 0,
             "bestHeldOutLoss": 0, "tensors": [{"name": "t", "shape": \(shape)}]}
            """
        }
        let cases: [(header: String, data: [Float], length: UInt64?, says: String)] = [
            (header("[2]"), [1, 2], UInt64.max, "header length"),
            (header("[2]"), [1, 2], 1 << 62, "header length"),
            (header("[-2, 3]"), [1, 2], nil, "bad shape"),
            (header("[4611686018427387904, 4]"), [1, 2], nil, "bad shape"),
            (header("[3]"), [1, 2], nil, "bad shape"),
            (header("[1]"), [1, 2], nil, "bytes after the last tensor"),
            (header("[2]", version: 1), [1, 2], nil, "format version"),
            ("{not json", [], nil, "bad header"),
        ]
        for crafted in cases {
            try writeCrafted(header: crafted.header, data: crafted.data, lengthOverride: crafted.length)
            #expect(reason()?.contains(crafted.says) == true, "\(crafted.header) -> \(reason() ?? "read")")
        }
        try writeCrafted(header: header("[2]"), data: [1, 2])
        #expect(reason() == nil)

        // Format 1 had no checksum: say it is old, not damaged.
        try checkpoint.write(to: url)
        let current = try Data(contentsOf: url)
        let length = Int(current.prefix(8).withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }.littleEndian)
        var header = try #require(
            try JSONSerialization.jsonObject(with: current.subdata(in: 8..<(8 + length))) as? [String: Any])
        header["formatVersion"] = 1
        let json = try JSONSerialization.data(withJSONObject: header)
        var old = Data()
        var oldLength = UInt64(json.count).littleEndian
        withUnsafeBytes(of: &oldLength) { old.append(contentsOf: $0) }
        try (old + json + current.subdata(in: (8 + length)..<(current.count - 32))).write(to: url)
        #expect(reason()?.contains("older facetrain (format 1)") == true, "\(reason() ?? "read")")
    }

    /// Writing renames a temporary file over the target: a device, pipe or folder there must be
    /// refused, not replaced (`export --out /dev/full` once replaced the device node).
    @Test func durableWriteNeverReplacesAFileThatIsNotRegular() throws {
        let fifo = url.appendingPathExtension("fifo")
        defer { unlink(fifo.path) }
        #expect(mkfifo(fifo.path, 0o600) == 0)
        for target in [fifo, FileManager.default.temporaryDirectory] {
            #expect {
                try DurableFile.write(Data("x".utf8), to: target)
            } throws: { error in
                (error as? FileWriteError)?.reason.contains("not a regular file") == true
            }
        }
        var status = stat()
        #expect(lstat(fifo.path, &status) == 0 && (status.st_mode & S_IFMT) == S_IFIFO)
        let link = url.appendingPathExtension("link")
        defer { unlink(link.path) }
        try FileManager.default.createSymbolicLink(atPath: link.path, withDestinationPath: fifo.path)
        #expect {
            try DurableFile.write(Data("x".utf8), to: link)
        } throws: { error in
            (error as? FileWriteError)?.reason.contains("symbolic link") == true
        }
        defer { try? FileManager.default.removeItem(at: url) }
        try DurableFile.write(Data("first".utf8), to: url)
        try DurableFile.write(Data("second".utf8), to: url)
        #expect(try Data(contentsOf: url) == Data("second".utf8))
        // A read-only file is not renamed over, and a missing folder is named.
        #expect(chmod(url.path, 0o444) == 0)
        for (target, says) in [(url, "read-only"), (url.appendingPathComponent("x/y.csv"), "does not exist")] {
            #expect {
                try DurableFile.write(Data("third".utf8), to: target)
            } throws: { error in
                (error as? FileWriteError)?.reason.contains(says) == true
            }
        }
        #expect(try Data(contentsOf: url) == Data("second".utf8))
    }
}
