import Foundation
import Synchronization
import Testing

@testable import FaceTrain

/// The erasure log keeps every record when erasures run at once, and while another writer of the
/// models folder sweeps its stale temporary files (schemathesis found both: two concurrent
/// `DELETE /v1/users/{id}` answered 500 and the log lost a record).
@Suite struct ErasureLogTests {
    @Test func concurrentAppendsKeepEveryRecordWhileTheFolderIsSwept() throws {
        let models = FileManager.default.temporaryDirectory.appendingPathComponent("erasure-log-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: models, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: models) }
        let log = ErasureLog(models: models)
        let repository = ModelRepository(directory: models)
        let failures = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 24) { index in
            do {
                if index % 4 == 0 {
                    for _ in 0..<10 { _ = try repository.withLock { try repository.removeStaleEntries() } }
                } else {
                    for round in 0..<4 {
                        try log.append(
                            ErasureRecord(
                                user: 3 + index * 10 + round, erasedAt: "2026-12-06T00:00:00Z", by: "test", crops: 0,
                                embeddings: 0, withdrawnVersions: [], unpublishedVersion: nil, checkpoints: 0,
                                corrections: 0))
                    }
                }
            } catch { failures.withLock { $0.append("\(error)") } }
        }
        #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0 })")
        #expect(try log.records().count == 18 * 4)
    }
}
