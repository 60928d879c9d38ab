import FaceTrain
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What `serve --webhook` asked for.
public struct WebhookSettings: Sendable {
    /// Receivers, each sent every event, in order.
    public var urls: [URL]
    /// The HMAC-SHA256 key of `X-Facetrain-Signature`.
    public var secret: Data
    /// Seconds an event is retried before it is given up (logged, and recorded in the journal).
    public var retryFor: TimeInterval = 86_400
    /// The wait after a failed try; it doubles after each, up to `longestBackoff`.
    public var firstBackoff: TimeInterval = 1
    public var longestBackoff: TimeInterval = 600
    /// Seconds a receiver may take to answer one try.
    public var requestTimeout: TimeInterval = 10

    public init(urls: [URL], secret: Data) {
        self.urls = urls
        self.secret = secret
    }
}

/// One line of the journal: an event when it happened, or an event done for one receiver.
struct WebhookJournalLine: Codable {
    struct Event: Codable, Sendable {
        /// A random UUID: receivers drop an id they have seen (a kill between a receiver's 2xx and
        /// the `done` line makes the next start send that event again).
        var id: String
        /// The exact bytes that are signed and sent.
        var body: String
        /// Seconds since 1970, for `retryFor`.
        var createdAt: Double
        var urls: [String]
    }

    struct Done: Codable {
        var id: String
        var url: String
        /// "delivered" (a 2xx answer) or "expired" (retried for `retryFor` without one).
        var outcome: String
    }

    var event: Event?
    var done: Done?
}

/// Events of the server (trainings ending, versions published or rolled back) posted as signed JSON
/// to each `--webhook` URL, at least once and in order per URL, from one background thread per URL:
/// a request that causes an event only waits for its journal line.
///
/// The journal `<models>/.webhooks.jsonl` is appended and fsynced per event before it is queued, and
/// per delivery before the next event of that URL is tried, so a kill or restart loses no event and
/// sends again at most the one that was in flight. A start drops what is done and a torn last line
/// (a kill mid-write), and writes the rest back atomically; the file is removed when nothing is pending.
/// Not a general queue: events are few (a handful a day), so each write syncs the disk.
public final class WebhookDispatcher: @unchecked Sendable {
    public let settings: WebhookSettings
    public let journalURL: URL
    /// Told of an event's first failed try, of each event given up, and of journal writes that failed.
    public var log: @Sendable (String) -> Void = { _ in }

    static let journalName = ".webhooks.jsonl"

    /// Guards everything below and every write of the journal.
    private let condition = NSCondition()
    /// Events not yet done, per URL, oldest first.
    private var pending: [String: [WebhookJournalLine.Event]] = [:]
    private var stopped = false
    private var running = 0
    private let session: URLSession

    /// Reads the journal in `folder`, keeping the events still pending for the configured URLs.
    public init(settings: WebhookSettings, folder: URL) throws {
        self.settings = settings
        journalURL = folder.appendingPathComponent(Self.journalName)
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = settings.requestTimeout
        configuration.timeoutIntervalForResource = settings.requestTimeout
        session = URLSession(configuration: configuration)
        let urls = settings.urls.map(\.absoluteString)
        for url in urls { pending[url] = [] }
        var events: [WebhookJournalLine.Event] = []
        var done: Set<[String]> = []
        let lines = try Self.read(journalURL)
        for line in lines {
            if let event = line.event { events.append(event) }
            if let finished = line.done { done.insert([finished.id, finished.url]) }
        }
        var kept: [WebhookJournalLine.Event] = []
        for var event in events {
            event.urls = event.urls.filter { urls.contains($0) && !done.contains([event.id, $0]) }
            guard !event.urls.isEmpty else { continue }
            kept.append(event)
            for url in event.urls { pending[url]?.append(event) }
        }
        try rewrite(kept)
    }

    /// The journal's lines; a last line that does not parse is a write a kill cut short, and is dropped.
    static func read(_ url: URL) throws -> [WebhookJournalLine] {
        guard FileSystem.kind(at: url) != .missing else { return [] }
        let lines = try String(contentsOf: url, encoding: .utf8).split(separator: "\n")
        return try lines.enumerated().compactMap { index, line in
            do { return try JSONDecoder().decode(WebhookJournalLine.self, from: Data(line.utf8)) } catch {
                if index == lines.count - 1 { return nil }
                throw DataProblem.invalidMetadata(
                    path: url.path,
                    reason: "line \(index + 1) is not a webhook event (\(error)); fix or remove that line")
            }
        }
    }

    /// Replaces the journal with these events (none: removes it).
    private func rewrite(_ events: [WebhookJournalLine.Event]) throws {
        guard !events.isEmpty else {
            if FileSystem.kind(at: journalURL) != .missing {
                try FileSystem.removeTree(journalURL)
                try FileSystem.sync(journalURL.deletingLastPathComponent())
            }
            return
        }
        var data = Data()
        for event in events {
            data += try JSONText.data(WebhookJournalLine(event: event), pretty: false) + Data("\n".utf8)
        }
        try FileSystem.replaceAtomically(data, at: journalURL)
    }

    /// Appends one line and fsyncs it; call with `condition` held.
    private func append(_ line: WebhookJournalLine) throws {
        let data = try JSONText.data(line, pretty: false) + Data("\n".utf8)
        let isNew = FileSystem.kind(at: journalURL) == .missing
        let descriptor = open(journalURL.path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw FileSystemError(operation: "open", path: journalURL.path, code: errno) }
        defer { close(descriptor) }
        let written = data.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        guard written == data.count, fsync(descriptor) == 0 else {
            throw FileSystemError(operation: "append to", path: journalURL.path, code: errno)
        }
        if isNew { try FileSystem.sync(journalURL.deletingLastPathComponent()) }
    }

    /// Starts one delivery thread per URL.
    public func start() {
        for url in settings.urls {
            condition.lock()
            running += 1
            condition.unlock()
            let thread = Thread { [self] in deliver(to: url) }
            thread.name = "webhook \(url.host ?? "")"
            thread.start()
        }
    }

    /// Stops the delivery threads after the try each is in (bounded by `requestTimeout`).
    public func stop() {
        condition.lock()
        stopped = true
        condition.broadcast()
        while running > 0 { condition.wait() }
        condition.unlock()
    }

    /// Journals an event (`type`, its `data`) and queues it for every URL; the caller only waits for
    /// the journal line. A journal that cannot be written is logged, and the event still goes out
    /// while the process lives.
    public func send(_ type: String, _ data: [String: JSONValue]) {
        guard !settings.urls.isEmpty else { return }
        let now = Date()
        let id = UUID().uuidString.lowercased()
        let body: [String: JSONValue] = [
            "id": .string(id), "type": .string(type), "createdAt": .string(Manifest.timestamp(now)),
            "data": .object(data),
        ]
        let text = (try? JSONText.encode(JSONValue.object(body), pretty: false)) ?? "{}"
        let event = WebhookJournalLine.Event(
            id: id, body: text, createdAt: now.timeIntervalSince1970, urls: settings.urls.map(\.absoluteString))
        condition.lock()
        defer { condition.unlock() }
        do { try append(WebhookJournalLine(event: event)) } catch {
            log("webhook event \(type) \(id) is not journaled (\(error)); it is lost if the server stops first")
        }
        for url in event.urls { pending[url]?.append(event) }
        condition.broadcast()
    }

    /// Events not yet done for `url` (tests, and the admin's view of a receiver that is down).
    public func pendingCount(_ url: URL) -> Int {
        condition.lock()
        defer { condition.unlock() }
        return pending[url.absoluteString]?.count ?? 0
    }

    /// The `X-Facetrain-Signature` value of a body: what a receiver recomputes with the shared secret.
    public static func signature(_ body: Data, secret: Data) -> String {
        "sha256=" + SHA256.hmac(key: secret, message: body)
    }

    /// One URL's loop: the oldest pending event until a 2xx answer (or `retryFor` passes), then the next.
    private func deliver(to url: URL) {
        let key = url.absoluteString
        defer {
            condition.lock()
            running -= 1
            condition.broadcast()
            condition.unlock()
        }
        var attempt = 0
        while true {
            condition.lock()
            while !stopped && (pending[key]?.isEmpty ?? true) { condition.wait() }
            guard !stopped, let event = pending[key]?.first else {
                condition.unlock()
                return
            }
            condition.unlock()
            attempt += 1
            let failure = post(event, to: url, attempt: attempt)
            let expired = Date().timeIntervalSince1970 - event.createdAt >= settings.retryFor
            if let failure, attempt == 1 {
                log("webhook event \(event.id) to \(key) failed (\(failure)); retrying with back-off")
            }
            if failure != nil && !expired {
                let wait = min(settings.firstBackoff * pow(2, Double(min(attempt - 1, 40))), settings.longestBackoff)
                condition.lock()
                let until = Date().addingTimeInterval(wait)
                while !stopped && condition.wait(until: until) {}
                condition.unlock()
                continue
            }
            if let failure {
                log(
                    "webhook event \(event.id) to \(key) is given up after \(attempt) tries over "
                        + "\(Int(settings.retryFor)) s: \(failure)")
            }
            attempt = 0
            condition.lock()
            do {
                try append(
                    WebhookJournalLine(
                        done: .init(id: event.id, url: key, outcome: failure == nil ? "delivered" : "expired")))
            } catch {
                log("webhook delivery of \(event.id) to \(key) is not journaled (\(error)); a restart sends it again")
            }
            pending[key]?.removeFirst()
            // Nothing pending anywhere: the journal has nothing a start would need.
            if pending.values.allSatisfy(\.isEmpty) { try? rewrite([]) }
            condition.unlock()
        }
    }

    /// One try: nil for a 2xx answer, otherwise why not.
    private func post(_ event: WebhookJournalLine.Event, to url: URL, attempt: Int) -> String? {
        let body = Data(event.body.utf8)
        var request = URLRequest(
            url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: settings.requestTimeout)
        request.httpMethod = "POST"
        request.httpBody = body
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue("facetrain/\(FaceTrainVersion.string)", forHTTPHeaderField: "User-Agent")
        request.setValue(event.id, forHTTPHeaderField: "X-Facetrain-Event-Id")
        request.setValue(String(Int(event.createdAt)), forHTTPHeaderField: "X-Facetrain-Timestamp")
        request.setValue(String(attempt), forHTTPHeaderField: "X-Facetrain-Attempt")
        request.setValue(Self.signature(body, secret: settings.secret), forHTTPHeaderField: "X-Facetrain-Signature")
        let answer = Answer()
        let finished = DispatchSemaphore(value: 0)
        let task = session.dataTask(with: request) { _, response, error in
            answer.status = (response as? HTTPURLResponse)?.statusCode
            answer.error = error.map { "\($0.localizedDescription)" }
            finished.signal()
        }
        task.resume()
        finished.wait()
        if let status = answer.status, (200..<300).contains(status) { return nil }
        return answer.error ?? "the receiver answered \(answer.status.map(String.init) ?? "nothing")"
    }

    /// What the session's callback saw; read after its semaphore.
    private final class Answer: @unchecked Sendable {
        var status: Int?
        var error: String?
    }
}

extension WebhookDispatcher {
    /// The events of a training that ended: `model.published` first when it published, then
    /// `training.succeeded`, `training.failed` or `training.refused`.
    func trainingFinished(_ job: TrainingJob, repository: ModelRepository) {
        if job.published == true, let version = job.version,
            let pointer = try? repository.latestPointer(), pointer.version == version
        {
            send("model.published", Self.published(pointer, by: "training \(job.job)"))
        }
        var data: [String: JSONValue] = ["job": .integer(job.job), "state": .string(job.state.rawValue)]
        if let version = job.version { data["version"] = .integer(version) }
        if let published = job.published { data["published"] = .bool(published) }
        if let accuracy = job.userAccuracy { data["userAccuracy"] = .number(accuracy) }
        if let error = job.error { data["error"] = .string(error) }
        send("training.\(job.state.rawValue)", data)
    }

    /// The data of `model.published` and `model.rolled_back`.
    static func published(_ pointer: LatestPointer, by cause: String) -> [String: JSONValue] {
        [
            "version": .integer(pointer.version), "sha256": .string(pointer.sha256), "url": .string(pointer.url),
            "previousVersion": pointer.previousVersion.map { .integer($0) } ?? .null,
            "publishedAt": .string(pointer.publishedAt), "by": .string(cause),
        ]
    }
}
