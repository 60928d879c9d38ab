import Foundation

/// What one erasure removed, as the erasure log keeps it: a user id, a time, counts and version
/// numbers — never a face, an embedding, a crop's hash or a name.
public struct ErasureRecord: Codable, Sendable, Equatable {
    public var user: Int
    public var erasedAt: String
    /// "facetrain serve" or "facetrain erase".
    public var by: String
    public var crops: Int
    /// Crops whose cached embeddings were removed.
    public var embeddings: Int
    /// Bundles trained on the person, removed.
    public var withdrawnVersions: [Int]
    /// The published version, when it was one of them: nothing is published until a model without them is.
    public var unpublishedVersion: Int?
    /// Checkpoints of interrupted fits, removed.
    public var checkpoints: Int
    /// Corrections that named the person, removed from the corrections log.
    public var corrections: Int

    public init(
        user: Int, erasedAt: String, by: String, crops: Int, embeddings: Int, withdrawnVersions: [Int],
        unpublishedVersion: Int?, checkpoints: Int, corrections: Int
    ) {
        self.user = user
        self.erasedAt = erasedAt
        self.by = by
        self.crops = crops
        self.embeddings = embeddings
        self.withdrawnVersions = withdrawnVersions
        self.unpublishedVersion = unpublishedVersion
        self.checkpoints = checkpoints
        self.corrections = corrections
    }
}

/// `<models>/erasures.jsonl`: one `ErasureRecord` per line, oldest first.
public struct ErasureLog: Sendable {
    public static let name = "erasures.jsonl"
    private let file: JSONLines<ErasureRecord>
    private let repository: ModelRepository
    public var url: URL { file.url }

    public init(models: URL) {
        file = JSONLines(url: models.appendingPathComponent(Self.name))
        repository = ModelRepository(directory: models)
    }

    public func records() throws -> [ErasureRecord] { try file.read() }

    /// Appends under the models lock: the log's temporary file lives in the models folder, whose
    /// lock holders remove temporary files as stale (two concurrent erasures lost one record and
    /// answered 500 without it), and two appends must not read the same old log.
    public func append(_ record: ErasureRecord) throws { try repository.withLock { try file.append(record) } }
}

/// The models folder's part of forgetting people: bundles trained on them are withdrawn (and
/// latest.json with them), their crops' embeddings leave the cache, and checkpoints of
/// interrupted fits (trained on everyone) are removed. Safe to repeat, so a killed erasure is
/// finished by running it again. Not the data folder's part: the user store removes crops and
/// entries (FaceTrainServer's PersonEraser runs both).
public struct ModelsScrub: Sendable {
    public let repository: ModelRepository

    public struct Outcome: Sendable, Equatable {
        public var withdrawnVersions: [Int] = []
        public var unpublishedVersion: Int?
        public var embeddings = 0
        public var checkpoints = 0
    }

    public init(models: URL) { repository = ModelRepository(directory: models) }

    var embeddingsDirectory: URL { repository.directory.appendingPathComponent(FitJob.embeddingsFolderName) }
    var checkpointDirectory: URL { repository.directory.appendingPathComponent(FitJob.checkpointsFolderName) }

    public func scrub(users: Set<Int>, cropHashes: Set<String>) throws -> Outcome {
        var outcome = Outcome()
        guard FileSystem.kind(at: repository.directory) == .directory else { return outcome }
        (outcome.withdrawnVersions, outcome.unpublishedVersion) = try repository.withdraw(trainedOn: users)
        outcome.embeddings = try BaseFitSession.forgetEmbeddings(of: cropHashes, in: embeddingsDirectory)
        outcome.checkpoints = try FitSession.removeCheckpoints(in: checkpointDirectory)
        return outcome
    }

    /// A fit writing into this models folder (a live staging area or a held checkpoint lock) would
    /// put the person back; its path, or nil.
    public func writerInProgress() -> String? {
        if let running = FitSession.runningCheckpoint(in: checkpointDirectory) { return running }
        return try? repository.liveStagingArea()
    }
}
