import FaceTrain
import Foundation
import Testing

/// `facetrain erase` end to end, and the byte scan that proves an erasure left nothing: no file
/// under the data and models folders holds the person's name, a piece of one of their crops, a
/// crop's SHA-256 or a piece of one of their cached embeddings.
@Suite("erase", .serialized)
struct EraseCommandTests {
    /// What identifies a person on disk, gathered before the erasure.
    struct Traces {
        var name: String
        /// 64-byte pieces: from the middle of each crop file, and the start of each cached embedding.
        var pieces: [(what: String, bytes: Data)] = []
        /// The SHA-256 of each crop (the stored file names and the cache's keys).
        var hashes: [String] = []

        /// The person's crops in `folder` and, when `caches` holds them, their cached embeddings.
        /// A crop's piece is one no other file under `others` holds (drawn faces share flat stretches).
        init(name: String, crops folder: URL, caches: URL?, others: URL) throws {
            self.name = name
            var elsewhere: [Data] = []
            if let walker = FileManager.default.enumerator(atPath: others.path) {
                while let relative = walker.nextObject() as? String {
                    let url = others.appendingPathComponent(relative)
                    if !url.path.hasPrefix(folder.path + "/"), let data = FileManager.default.contents(atPath: url.path)
                    {
                        elsewhere.append(data)
                    }
                }
            }
            for file in try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
            where !file.hasPrefix(".") && file != "user.json" {
                let data = try Data(contentsOf: folder.appendingPathComponent(file))
                let piece = try #require(
                    stride(from: data.count / 2, to: data.count - 64, by: 64).lazy.map {
                        data.subdata(in: $0..<($0 + 64))
                    }.first { piece in !elsewhere.contains { $0.range(of: piece) != nil } },
                    "crop \(file) has no 64 bytes of its own")
                pieces.append(("crop \(file)", piece))
                hashes.append(SHA256.hash(data))
            }
            for cache in caches.map({ (try? FileManager.default.contentsOfDirectory(atPath: $0.path)) ?? [] }) ?? []
            where cache.hasSuffix(".cache") {
                let embeddings = try EraseCommandTests.cachedEmbeddings(caches!.appendingPathComponent(cache))
                for hash in hashes {
                    if let bytes = embeddings[hash] {
                        pieces.append(("embedding of \(hash.prefix(12))", bytes.prefix(64)))
                    }
                }
            }
        }

        /// Every place under `folders` (file names and contents, hidden files too) that still holds a trace.
        func found(under folders: [URL]) -> [String] {
            var findings: [String] = []
            for folder in folders {
                guard let walker = FileManager.default.enumerator(atPath: folder.path) else { continue }
                while let relative = walker.nextObject() as? String {
                    let path = folder.appendingPathComponent(relative).path
                    if let hash = hashes.first(where: { relative.contains($0) }) {
                        findings.append("\(path): named after crop \(hash.prefix(12))")
                    }
                    var isDirectory: ObjCBool = false
                    guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory),
                        !isDirectory.boolValue,
                        let data = FileManager.default.contents(atPath: path)
                    else { continue }
                    if data.range(of: Data(name.utf8)) != nil { findings.append("\(path): the name") }
                    for hash in hashes where data.range(of: Data(hash.utf8)) != nil {
                        findings.append("\(path): the SHA-256 of crop \(hash.prefix(12))")
                    }
                    for piece in pieces where data.range(of: piece.bytes) != nil {
                        findings.append("\(path): \(piece.what)")
                    }
                }
            }
            return findings
        }
    }

    /// The embeddings of an embeddings cache by crop SHA-256, read by the file's layout (a
    /// little-endian UInt64 header length, a JSON header listing the tensors, their float32s in
    /// that order, a SHA-256), independently of the code that writes it.
    static func cachedEmbeddings(_ url: URL) throws -> [String: Data] {
        let data = try Data(contentsOf: url)
        let length = Int(data.prefix(8).enumerated().reduce(UInt64(0)) { $0 | UInt64($1.element) << (8 * $1.offset) })
        let header = try #require(
            try JSONSerialization.jsonObject(with: data.subdata(in: 8..<(8 + length))) as? [String: Any])
        var offset = 8 + length
        var embeddings: [String: Data] = [:]
        for entry in try #require(header["tensors"] as? [[String: Any]]) {
            let count = try #require(entry["shape"] as? [Int]).reduce(1, *) * 4
            embeddings[try #require(entry["name"] as? String)] = data.subdata(in: offset..<(offset + count))
            offset += count
        }
        return embeddings
    }

    static func name(of id: Int, in data: URL) throws -> String {
        let users = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: data.appendingPathComponent("users.json")))
                as? [[String: Any]])
        return try #require(users.first { $0["id"] as? Int == id }?["name"] as? String)
    }

    @Test func erasingAPersonLeavesNoTraceAndTheNextFitIsANewVersion() throws {
        let data = try FitCommandTests.syntheticData()
        let root = data.deletingLastPathComponent()
        let models = root.appendingPathComponent("models")
        defer { try? FileManager.default.removeItem(at: root) }
        // Two versions trained on everyone (head-only fits cache embeddings), the second published,
        // and a from-scratch fit killed part-way (its checkpoint holds everyone too).
        for _ in 0..<2 {
            let fit = try CLIRunner.run(["fit", "--data", data.path, "--out", models.path])
            #expect(fit.status == 0, "\(fit.standardError)")
        }
        #expect(try CLIRunner.run(["publish", "--models", models.path, "2"]).status == 0)
        let killed = try FitCommandTests.backgroundFit(
            ["fit", "--json", "--data", data.path, "--out", models.path] + FitCommandTests.longFit, afterEpoch: 2)
        killed.kill()
        let checkpoints = models.appendingPathComponent(".checkpoints")
        #expect(
            ((try? FileManager.default.contentsOfDirectory(atPath: checkpoints.path)) ?? []).contains {
                $0.hasPrefix("fit-") && $0.hasSuffix(".checkpoint")
            })

        let erased = 4
        let caches = models.appendingPathComponent(".embeddings")
        let traces = try Traces(
            name: try Self.name(of: erased, in: data), crops: data.appendingPathComponent(String(erased)),
            caches: caches, others: data)
        #expect(traces.hashes.count == 20)
        #expect(traces.pieces.count == 40, "every crop and its cached embedding")
        // The scan finds them before: in the embeddings cache and in the bundles' manifests.
        let before = traces.found(under: [data, models])
        #expect(before.contains { $0.contains("/.embeddings/") && $0.contains("embedding of") })
        #expect(before.contains { $0.contains("/models/2/manifest.json") && $0.hasSuffix("the name") })
        let cacheName = try #require(
            try FileManager.default.contentsOfDirectory(atPath: caches.path).first { $0.hasSuffix(".cache") })
        let cachedBefore = try Self.cachedEmbeddings(caches.appendingPathComponent(cacheName)).count

        let run = try CLIRunner.run([
            "erase", "--data", data.path, "--models", models.path, "--user", String(erased), "--json",
        ])
        #expect(run.status == 0, "\(run.standardError)")
        let record = try #require(
            try JSONSerialization.jsonObject(with: Data(run.standardOutput.utf8)) as? [String: Any])
        #expect(record["user"] as? Int == erased && record["crops"] as? Int == 20, "\(record)")
        #expect(record["embeddings"] as? Int == 20 && record["checkpoints"] as? Int == 1, "\(record)")
        #expect(record["withdrawnVersions"] as? [Int] == [1, 2] && record["unpublishedVersion"] as? Int == 2)

        let findings = traces.found(under: [data, models])
        #expect(findings.count == 0, "\(findings.prefix(10))")
        // Only their embeddings left the cache; nothing is published; the log names no one.
        let cachedAfter = try Self.cachedEmbeddings(caches.appendingPathComponent(cacheName))
        #expect(cachedAfter.count == cachedBefore - 20)
        #expect(!FileManager.default.fileExists(atPath: models.appendingPathComponent("latest.json").path))
        #expect(FitCommandTests.versions(in: models).isEmpty)
        let log = try String(contentsOf: models.appendingPathComponent("erasures.jsonl"), encoding: .utf8)
        #expect(log.split(separator: "\n").count == 1 && log.contains("\"user\":\(erased)"))
        #expect(try CLIRunner.run(["data", "check", "--data", data.path]).status == 0)

        // The next fit is version 3 (numbers are never reused) and knows five users.
        let fit = try CLIRunner.run(["fit", "--data", data.path, "--out", models.path])
        #expect(fit.status == 0, "\(fit.standardError)")
        #expect(FitCommandTests.versions(in: models) == ["3"])
        let manifest = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: models.appendingPathComponent("3/manifest.json")))
                as? [String: Any])
        let users = try #require(manifest["users"] as? [[String: Any]]).compactMap { $0["id"] as? Int }
        #expect(users == [3, 5, 6, 7, 8])

        // Again: nothing is left to erase, and the folders are untouched.
        let again = try CLIRunner.run(["erase", "--data", data.path, "--models", models.path, "--user", "4"])
        #expect(again.status == 1 && again.standardError.contains("nothing to erase"), "\(again.standardError)")
        #expect(try String(contentsOf: models.appendingPathComponent("erasures.jsonl"), encoding: .utf8) == log)
        // A data folder that is not there: named, nothing created in the models folder's place.
        let missing = root.appendingPathComponent("no-such-data")
        let noData = try CLIRunner.run(["erase", "--data", missing.path, "--models", models.path, "--user", "3"])
        #expect(noData.status == 1 && noData.standardError.contains("\(missing.path) is not a folder"))
        #expect(!FileManager.default.fileExists(atPath: missing.path))
        for (arguments, message) in [
            (["--user", "2"], "1 and 2 are classes"), (["--user", "x"], "got 'x'"),
        ] {
            let refused = try CLIRunner.run(["erase", "--data", data.path, "--models", models.path] + arguments)
            #expect(refused.status == 64 && refused.standardError.contains(message), "\(refused.standardError)")
        }
    }

    /// A fit writing into the models folder would put the person back: erase waits for it.
    @Test func aRunningFitIsNotErasedUnderneath() throws {
        let data = try FitCommandTests.syntheticData()
        let root = data.deletingLastPathComponent()
        let models = root.appendingPathComponent("models")
        defer { try? FileManager.default.removeItem(at: root) }
        let running = try FitCommandTests.backgroundFit(
            ["fit", "--json", "--data", data.path, "--out", models.path] + FitCommandTests.longFit, afterEpoch: 1)
        defer { running.kill() }
        let refused = try CLIRunner.run(["erase", "--data", data.path, "--models", models.path, "--user", "3"])
        #expect(refused.status == 1 && refused.standardError.contains("a fit is writing"), "\(refused.standardError)")
        #expect(FileManager.default.fileExists(atPath: data.appendingPathComponent("3").path))
    }
}
