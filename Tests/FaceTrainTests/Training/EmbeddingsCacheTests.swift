import FaceTrainEngine
import Foundation
import Testing

@testable import FaceTrain

/// The embeddings cache under erasures that overlap: `DELETE /v1/users/{id}` requests and a
/// training's cache write run on different threads (CI's fuzzing once got a 500 when one erasure
/// removed another's temporary file as a "leftover").
@Suite("embeddings cache")
struct EmbeddingsCacheTests {
    static func cache(hashes: [String]) -> Checkpoint {
        Checkpoint(
            header: .init(
                key: "base", epochsDone: 0, history: [], bestEpoch: 0, bestHeldOutLoss: 0, trainer: nil, tensors: []),
            tensors: Dictionary(
                uniqueKeysWithValues: hashes.enumerated().map {
                    ($1, Tensor(shape: [2, 4], scalars: [Float](repeating: Float($0), count: 8)))
                }))
    }

    @Test func overlappingErasuresAndWritesLoseNothingAndFailNothing() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "facetrain-cache-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let hashes = (0..<64).map { String(format: "%064x", $0) }
        let url = directory.appendingPathComponent("embeddings-base-2views.cache")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try Self.cache(hashes: hashes).write(to: url)
        // A second cache (another data folder's crops) that a training keeps rewriting.
        let kept = (1000..<1008).map { String(format: "%064x", $0) }
        let other = directory.appendingPathComponent("embeddings-other-2views.cache")

        /// Counts from several threads.
        final class Tally: @unchecked Sendable {
            private let lock = NSLock()
            private(set) var removed = 0
            private(set) var failures: [String] = []
            func add(removed count: Int) { lock.withLock { removed += count } }
            func fail(_ error: Error) { lock.withLock { failures.append("\(error)") } }
        }
        let tally = Tally()
        let erasers = 4
        DispatchQueue.concurrentPerform(iterations: erasers + 1) { thread in
            if thread == erasers {
                for _ in 0..<40 {
                    do {
                        try BaseFitSession.withCacheLock(in: directory) {
                            try Self.cache(hashes: kept).write(to: other)
                        }
                    } catch { tally.fail(error) }
                }
                return
            }
            // Each eraser forgets its own quarter of the crops, one person at a time.
            for index in stride(from: thread, to: hashes.count, by: erasers) {
                do {
                    tally.add(removed: try BaseFitSession.forgetEmbeddings(of: [hashes[index]], in: directory))
                } catch { tally.fail(error) }
            }
        }
        #expect(tally.failures.isEmpty, "\(tally.failures.prefix(3))")
        // Every crop of the first cache was forgotten exactly once; the rewritten cache is whole.
        #expect(tally.removed == hashes.count)
        #expect(try Checkpoint.read(from: url).tensors.isEmpty)
        #expect(try Checkpoint.read(from: other).tensors.keys.sorted() == kept)
        let names = try FileSystem.entries(of: directory)
        #expect(!names.contains { FileSystem.isTemporaryName($0) }, "\(names)")
    }

    @Test func anErasureRemovesALeftoverTemporaryFileButNotTheLock() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "facetrain-cache-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let leftover = directory.appendingPathComponent(".embeddings-base-2views.cache.tmp-1-2")
        try Data([1, 2, 3]).write(to: leftover)
        #expect(try BaseFitSession.forgetEmbeddings(of: ["x"], in: directory) == 0)
        #expect(try FileSystem.entries(of: directory) == [BaseFitSession.cacheLockName])
        // A models folder without a cache is left as it is.
        let empty = directory.appendingPathComponent("none")
        #expect(try BaseFitSession.forgetEmbeddings(of: ["x"], in: empty) == 0)
        #expect(FileSystem.kind(at: empty) == .missing)
    }
    /// After a write, the same base's caches of another view count (an older facetrain's) go;
    /// other bases' caches, the temporary files and the lock stay.
    @Test func aWriteRemovesTheSameBasesCachesOfOtherViewCounts() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "facetrain-cache-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        for name in ["embeddings-base-2views.cache", "embeddings-base-3views.cache", "embeddings-other-2views.cache"] {
            try Self.cache(hashes: ["a"]).write(to: directory.appendingPathComponent(name))
        }
        let current = directory.appendingPathComponent("embeddings-base-1views.cache")
        try BaseFitSession.withCacheLock(in: directory) {
            try Self.cache(hashes: ["a"]).write(to: current)
            try BaseFitSession.removeOtherViewCounts(besides: current)
        }
        #expect(
            try FileSystem.entries(of: directory).sorted()
                == [BaseFitSession.cacheLockName, "embeddings-base-1views.cache", "embeddings-other-2views.cache"])
    }
    /// An older facetrain's cache with more views a crop gives this one its first views, from
    /// caches of the same base only.
    @Test func theFirstViewsOfAnOlderCacheAreTakenOver() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "facetrain-cache-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        func checkpoint(key: String, views: Int, hashes: [String]) -> Checkpoint {
            Checkpoint(
                header: .init(
                    key: key, epochsDone: 0, history: [], bestEpoch: 0, bestHeldOutLoss: 0, trainer: nil, tensors: []),
                tensors: Dictionary(
                    uniqueKeysWithValues: hashes.enumerated().map { position, hash in
                        (
                            hash,
                            Tensor(shape: [views, 4], scalars: (0..<(views * 4)).map { Float(position * 100 + $0) })
                        )
                    }))
        }
        let views = BaseFitSession.views
        try checkpoint(key: "base", views: views + 1, hashes: ["a", "b"]).write(
            to: directory.appendingPathComponent("embeddings-base-\(views + 1)views.cache"))
        // Another base's cache, and one of this base's name whose key says otherwise: neither is read.
        try checkpoint(key: "other", views: views + 1, hashes: ["c"]).write(
            to: directory.appendingPathComponent("embeddings-other-\(views + 1)views.cache"))
        try checkpoint(key: "changed", views: views + 2, hashes: ["d"]).write(
            to: directory.appendingPathComponent("embeddings-base-\(views + 2)views.cache"))
        let found = BaseFitSession.firstViewsOfOtherCaches(
            besides: directory.appendingPathComponent("embeddings-base-\(views)views.cache"), key: "base", features: 4)
        #expect(found.keys.sorted() == ["a", "b"])
        #expect(found["b"] == Tensor(shape: [views, 4], scalars: (0..<(views * 4)).map { Float(100 + $0) }))
    }
}
