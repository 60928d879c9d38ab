import FaceTrain
import Foundation

/// Forgetting one person everywhere facetrain keeps them, in an order a kill cannot undo: the
/// bundles trained on them are withdrawn first (nothing serves them from then on), then their
/// cached embeddings and the checkpoints of interrupted fits go, then the corrections that name
/// them, then their crops and entry; the erasure log records what was removed. Running it again
/// finishes an erasure a kill interrupted. One rule for `DELETE /v1/users/{id}` and
/// `facetrain erase`; the server adds what only it holds in memory (RecognitionService, TrainingQueue).
public struct PersonEraser: Sendable {
    public let store: UserStore
    public let scrub: ModelsScrub
    public let corrections: CorrectionLog
    public let log: ErasureLog

    /// `corrections` is the log the server files into (one instance per data folder, for its lock).
    public init(store: UserStore, models: URL, corrections: CorrectionLog? = nil) {
        self.store = store
        scrub = ModelsScrub(models: models)
        self.corrections = corrections ?? CorrectionLog(data: store.root)
        log = ErasureLog(models: models)
    }

    /// What an erasure removed, and the content hashes of the crops it removed (for the caches in memory).
    public struct Outcome: Sendable {
        public var record: ErasureRecord
        public var cropHashes: Set<String>
    }

    /// Erases user `id`; `by` names the command in the log. A user the store does not know is
    /// still scrubbed from the models folder (finishing an interrupted erasure); when nothing at
    /// all is found, `UserStoreError.noSuchUser`.
    public func erase(_ id: Int, by command: String) throws -> Outcome {
        guard ClassLabel.isUser(id: id) else { throw UserStoreError.noSuchUser(id: id) }
        let registered = store.user(id) != nil
        let hashes = store.cropHashes(id)
        let models = try scrub.scrub(users: [id], cropHashes: hashes)
        let forgotten = try corrections.forget(user: id, cropHashes: hashes)
        let crops = registered ? try store.delete(id) : 0
        guard registered || !models.withdrawnVersions.isEmpty || forgotten > 0 else {
            throw UserStoreError.noSuchUser(id: id)
        }
        let record = ErasureRecord(
            user: id, erasedAt: Manifest.timestamp(Date()), by: command, crops: crops, embeddings: models.embeddings,
            withdrawnVersions: models.withdrawnVersions, unpublishedVersion: models.unpublishedVersion,
            checkpoints: models.checkpoints, corrections: forgotten)
        try log.append(record)
        return Outcome(record: record, cropHashes: hashes)
    }
}
