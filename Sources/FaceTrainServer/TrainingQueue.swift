import FaceTrain
import Foundation

/// One training the server was asked for, as `GET /v1/training/{job}` shows it.
public struct TrainingJob: Codable, Sendable {
    public enum State: String, Codable, Sendable {
        case queued, running, succeeded, failed
        /// Trained, but not published: the publish gate said no (`error` says why).
        case refused
    }

    public var job: Int
    public var state: State
    public var createdAt: String
    public var startedAt: String?
    public var finishedAt: String?
    /// The step the job is in: "loading data", "training", "calibrating", "publishing".
    public var step: String?
    public var epoch: Int?
    public var epochs: Int?
    /// 0...1 over the training epochs.
    public var progress: Double?
    /// The bundle version the training wrote.
    public var version: Int?
    public var published: Bool?
    public var userAccuracy: Double?
    public var error: String?
}

/// Trainings one at a time on a background thread, through `FitJob`, each published through the
/// same gate as `facetrain publish`. The records live in `<models>/.jobs/jobs.json` (written
/// durably at every change of state), so a restart sees them: queued jobs run, and a job that
/// was running when the process died is marked failed.
public final class TrainingQueue: @unchecked Sendable {
    let store: UserStore
    let models: URL
    let job: FitJob
    let gate: PublishGate
    let baseURL: String?
    /// Called at named points (tests kill the process there).
    var pause: @Sendable (String) -> Void = { _ in }
    /// Called with the record of each training that ended.
    var finished: @Sendable (TrainingJob) -> Void = { _ in }
    /// Seconds without a change in users or crops before a change queues a training by itself;
    /// nil: only `POST /v1/training` queues.
    var quietPeriod: TimeInterval?
    /// A training queued by a change waits until every user with crops has at least this many
    /// (fewer makes the fit fail, which a person still uploading should not see).
    var minimumCrops = 1

    private let condition = NSCondition()
    private var jobs: [TrainingJob] = []
    private var nextJob = 1
    private var stopping = false
    private var thread: Thread?
    /// When the last change's quiet period ends.
    private var changeDue: Date?
    /// People erased while the running training held their crops in memory: it is stopped, and
    /// what it wrote since is scrubbed once it ends.
    private var erasedWhileRunning: (users: Set<Int>, cropHashes: Set<String>) = ([], [])

    static let keptJobs = 200
    private struct Records: Codable {
        var nextJob: Int
        var jobs: [TrainingJob]
    }

    var recordsURL: URL { models.appendingPathComponent(".jobs").appendingPathComponent("jobs.json") }

    /// Reads the records; a job left running by a dead process becomes failed.
    public init(store: UserStore, models: URL, job: FitJob, gate: PublishGate = PublishGate(), baseURL: String? = nil)
        throws
    {
        self.store = store
        self.models = models
        self.job = job
        self.gate = gate
        self.baseURL = baseURL
        try FileSystem.createDirectory(recordsURL.deletingLastPathComponent())
        if FileSystem.kind(at: recordsURL) != .missing {
            let records: Records
            do {
                records = try JSONDecoder().decode(Records.self, from: Data(contentsOf: recordsURL))
            } catch {
                throw BundleError.unreadablePointer(path: recordsURL.path, detail: "\(error)")
            }
            jobs = records.jobs
            nextJob = records.nextJob
            var changed = false
            for index in jobs.indices where jobs[index].state == .running {
                jobs[index].state = .failed
                jobs[index].finishedAt = Manifest.timestamp(Date())
                jobs[index].error =
                    "interrupted: the server stopped while this training ran; POST /v1/training to train again"
                changed = true
            }
            if changed { try save() }
        }
    }

    /// Starts the worker thread.
    public func start() {
        let thread = Thread { [self] in work() }
        thread.name = "facetrain training"
        self.thread = thread
        thread.start()
    }

    /// Asks the worker to stop after the current training.
    public func stop() {
        condition.lock()
        stopping = true
        condition.broadcast()
        condition.unlock()
    }

    /// Records a change in users or crops: a training is queued once `quietPeriod` passes without another.
    public func noteChange() {
        guard let quietPeriod else { return }
        condition.lock()
        defer { condition.unlock() }
        changeDue = Date().addingTimeInterval(quietPeriod)
        condition.broadcast()
    }

    /// Queues a training; a job still waiting already covers every change, so it is returned instead.
    public func enqueue() throws -> TrainingJob {
        condition.lock()
        defer { condition.unlock() }
        if let waiting = jobs.last(where: { $0.state == .queued }) { return waiting }
        let record = TrainingJob(job: nextJob, state: .queued, createdAt: Manifest.timestamp(Date()))
        jobs.append(record)
        nextJob += 1
        do { try save() } catch {
            jobs.removeLast()
            nextJob -= 1
            throw error
        }
        condition.broadcast()
        return record
    }

    /// An erasure happened: a running training read the person, so it is stopped (what it wrote is
    /// scrubbed when it ends), and a training without them is queued when anyone has crops left.
    /// Returns the queued job.
    public func noteErasure(user: Int, cropHashes: Set<String>) -> TrainingJob? {
        condition.lock()
        if jobs.contains(where: { $0.state == .running }) {
            erasedWhileRunning.users.insert(user)
            erasedWhileRunning.cropHashes.formUnion(cropHashes)
        }
        condition.unlock()
        // The store's lock before the queue's (see `work`).
        guard store.list().contains(where: { $0.crops > 0 }) else { return nil }
        return try? enqueue()
    }

    public func record(_ id: Int) -> TrainingJob? {
        condition.lock()
        defer { condition.unlock() }
        return jobs.first { $0.job == id }
    }

    public func all() -> [TrainingJob] {
        condition.lock()
        defer { condition.unlock() }
        return jobs
    }

    /// The running job, if any.
    public func running() -> TrainingJob? {
        condition.lock()
        defer { condition.unlock() }
        return jobs.first { $0.state == .running }
    }

    // MARK: Worker

    private func work() {
        while true {
            condition.lock()
            var changed = false
            while !stopping && !jobs.contains(where: { $0.state == .queued }) {
                if let due = changeDue {
                    if Date() >= due {
                        changeDue = nil
                        changed = true
                        break
                    }
                    _ = condition.wait(until: due)  // the loop re-checks the due time either way
                } else {
                    condition.wait()
                }
            }
            if stopping {
                condition.unlock()
                return
            }
            if changed {
                condition.unlock()
                // The store's lock is taken before the queue's elsewhere (a training reports while it
                // holds the folder), so the crop counts are read with the queue unlocked.
                let counts = store.list().map(\.crops).filter { $0 > 0 }
                if !counts.isEmpty, counts.allSatisfy({ $0 >= minimumCrops }) { _ = try? enqueue() }
                continue
            }
            let id = jobs.first { $0.state == .queued }!.job
            // Erasures noted for the previous job were scrubbed by the erasure itself; this job reads the folder anew.
            erasedWhileRunning = ([], [])
            condition.unlock()
            update(id, persist: true) {
                $0.state = .running
                $0.startedAt = Manifest.timestamp(Date())
                $0.step = "loading data"
            }
            pause("training-running")
            run(id)
        }
    }

    private func run(_ id: Int) {
        let observer = JobObserver(queue: self, job: id)
        // The folder is held still while the job reads it, and released once the crops are in memory.
        store.beginReading()
        observer.holdsStore = true
        let result: FitJobResult
        do {
            defer { observer.releaseStore() }
            result = try job.run(observer: observer, shouldStop: { [self] in isStopping || hasErasures })
        } catch {
            if let erased = scrubErasures() {
                finish(id, state: .failed, error: "stopped: \(erased); a new training was queued")
            } else {
                finish(id, state: .failed, error: "\(error)")
            }
            return
        }
        // The bundle it wrote holds whoever was erased meanwhile: withdraw it with the rest.
        if let erased = scrubErasures() {
            finish(id, state: .refused, error: "not published: \(erased); a new training was queued")
            return
        }
        let version = ModelRepository.parseVersion(result.bundle.lastPathComponent)
        update(id, persist: true) {
            $0.version = version
            $0.userAccuracy = result.metrics.userAccuracy
            $0.step = "publishing"
        }
        guard let version else {
            finish(id, state: .failed, error: "the bundle \(result.bundle.path) has no version number")
            return
        }
        // A user deleted while the job trained must not come back in the published model.
        let trained = (try? ModelBundle.open(result.bundle).manifest.users.map(\.id)) ?? []
        let deleted = Set(trained).subtracting(store.ids())
        if !deleted.isEmpty {
            _ = try? ModelRepository(directory: models).withdraw(trainedOn: deleted)
            finish(
                id, state: .refused,
                error: "not published: user(s) \(deleted.sorted().map(String.init).joined(separator: ", ")) were "
                    + "deleted while it trained; a new training was queued")
            _ = try? enqueue()
            return
        }
        do {
            _ = try ModelRepository(directory: models).publish(version: version, gate: gate, baseURL: baseURL)
            update(id, persist: true) { $0.published = true }
            finish(id, state: .succeeded, error: nil)
        } catch let refused as PublishRefused {
            update(id, persist: false) { $0.published = false }
            finish(id, state: .refused, error: refused.description)
        } catch {
            update(id, persist: false) { $0.published = false }
            finish(id, state: .failed, error: "trained version \(version) but could not publish it: \(error)")
        }
    }

    private var isStopping: Bool {
        condition.lock()
        defer { condition.unlock() }
        return stopping
    }

    private var hasErasures: Bool {
        condition.lock()
        defer { condition.unlock() }
        return !erasedWhileRunning.users.isEmpty
    }

    /// Scrubs the models folder of the people erased while the job ran and says so ("user(s) 4, 7
    /// were erased while it trained"), or nil when nobody was.
    private func scrubErasures() -> String? {
        condition.lock()
        let erased = erasedWhileRunning
        erasedWhileRunning = ([], [])
        condition.unlock()
        guard !erased.users.isEmpty else { return nil }
        let names = erased.users.sorted().map(String.init).joined(separator: ", ")
        do {
            _ = try ModelsScrub(models: models).scrub(users: erased.users, cropHashes: erased.cropHashes)
        } catch {
            return "user(s) \(names) were erased while it trained, and removing what it wrote failed (\(error)); "
                + "send DELETE /v1/users/{id} again to finish"
        }
        return "user(s) \(names) were erased while it trained"
    }

    private func finish(_ id: Int, state: TrainingJob.State, error: String?) {
        update(id, persist: true) {
            $0.state = state
            $0.error = error
            $0.step = nil
            $0.finishedAt = Manifest.timestamp(Date())
            if state == .succeeded { $0.progress = 1 }
        }
        if let job = record(id) { finished(job) }
    }

    /// Changes job `id`; `persist` writes the records (state changes, not every batch).
    func update(_ id: Int, persist: Bool, _ change: (inout TrainingJob) -> Void) {
        condition.lock()
        defer { condition.unlock() }
        guard let index = jobs.firstIndex(where: { $0.job == id }) else { return }
        change(&jobs[index])
        if persist {
            // A failed write keeps the state in memory; the next change writes it again.
            try? save()
        }
    }

    /// Writes the records durably. Call with the condition's lock held.
    private func save() throws {
        if jobs.count > Self.keptJobs {
            let finished = jobs.indices.filter { ![.queued, .running].contains(jobs[$0].state) }
            let drop = Set(finished.prefix(jobs.count - Self.keptJobs))
            jobs = jobs.enumerated().filter { !drop.contains($0.offset) }.map(\.element)
        }
        let data = try JSONText.data(Records(nextJob: nextJob, jobs: jobs)) + Data("\n".utf8)
        try FileSystem.replaceAtomically(data, at: recordsURL)
    }
}

/// Turns a fit job's events into the job record's step, epoch and progress.
private final class JobObserver: FitJobObserver {
    let queue: TrainingQueue
    let job: Int
    var holdsStore = false
    var epochs = 1

    init(queue: TrainingQueue, job: Int) {
        self.queue = queue
        self.job = job
    }

    func releaseStore() {
        guard holdsStore else { return }
        holdsStore = false
        queue.store.endReading()
    }

    func dataLoaded(users: Int, crops: Int, warnings: [DataWarning]) {
        releaseStore()
        queue.update(job, persist: false) { $0.step = "embedding crops" }
    }

    func baseChosen(_ base: BaseModel, fineTuning: FineTuning) {}

    func calibrated(rates: [String: Double], folds: Int, seconds: Double) {}

    func fitStarted(trainingCrops: Int, heldOutCrops: Int, classes: Int, epochs: Int, resumedFrom: Int?) {
        self.epochs = max(epochs, 1)
        queue.update(job, persist: false) {
            $0.step = "training"
            $0.epochs = epochs
            $0.epoch = resumedFrom ?? 0
            $0.progress = 0
        }
    }

    func batchFinished(epoch: Int, batch: Int, batches: Int, imagesPerSecond: Double, loss: Double) {
        let done = (Double(epoch - 1) + Double(batch) / Double(max(batches, 1))) / Double(epochs)
        queue.update(job, persist: false) {
            $0.epoch = epoch
            $0.progress = min(max(done, 0), 1)
        }
    }

    func epochFinished(_ record: EpochRecord, isBest: Bool) {
        queue.update(job, persist: false) {
            $0.epoch = record.epoch
            $0.progress = min(Double(record.epoch) / Double(epochs), 1)
            if record.epoch >= epochs { $0.step = "calibrating and writing the bundle" }
        }
    }
}
