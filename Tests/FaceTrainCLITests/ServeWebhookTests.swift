import FaceTrain
import FaceTrainServer
import Foundation
import Testing

/// A webhook receiver on loopback for the tests: records every POST in order, answers 200 after
/// `delay` seconds, and can be stopped and started again on the same port (a receiver that is down).
final class WebhookReceiver: @unchecked Sendable {
    struct Delivery {
        var headers: [String: String]
        var body: Data
        var object: [String: Any] { (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] ?? [:] }
    }

    private let lock = NSLock()
    private var received: [Delivery] = []
    private var slowness: TimeInterval = 0
    private var server: HTTPServer?
    private(set) var port = 0

    init() throws { try start() }

    var url: String { "http://127.0.0.1:\(port)/hook" }

    var delay: TimeInterval {
        get { lock.withLock { slowness } }
        set { lock.withLock { slowness = newValue } }
    }

    var deliveries: [Delivery] { lock.withLock { received } }

    func start() throws {
        server = try HTTPServer(host: "127.0.0.1", port: port, limits: HTTPLimits()) { [self] request in
            let wait = delay
            if wait > 0 { Thread.sleep(forTimeInterval: wait) }
            lock.withLock { received.append(Delivery(headers: request.headers, body: request.body)) }
            return HTTPResponse(status: 200)
        }
        port = server!.port
    }

    func stop() {
        server?.stop()
        server = nil
    }

    /// Waits until `count` deliveries arrived; false on timeout.
    func waitFor(_ count: Int, timeout: TimeInterval) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if deliveries.count >= count { return true }
            Thread.sleep(forTimeInterval: 0.05)
        }
        return deliveries.count >= count
    }
}

/// `serve --webhook`: trainings and publishing post signed events, in order, at least once and
/// (as receivers see them) once each, through a slow receiver, a receiver that is down, and a
/// killed server.
extension ServeCommandTests {
    static let webhookSecret = "webhook-secret-0123456789abcdef"

    static func webhookServer(data: URL, models: URL, receiver: WebhookReceiver) throws -> Server {
        let secretFile = models.deletingLastPathComponent().appendingPathComponent("webhook.secret")
        try Data((webhookSecret + "\n").utf8).write(to: secretFile)
        return try Server(
            data: data, models: models, extra: ["--webhook", receiver.url, "--webhook-secret-file", secretFile.path],
            environment: ["FACETRAIN_TEST_WEBHOOK_BACKOFF": "0.5"])
    }

    @Test func webhooksAreSignedOrderedAndSurviveAnOutageAndARestart() throws {
        let (synth, data, models) = try Self.folders(users: 5, perUser: 6)
        defer { try? FileManager.default.removeItem(at: data.deletingLastPathComponent()) }
        let bad = try CLIRunner.run(["serve", "--data", data.path, "--models", models.path, "--webhook", receiverless])
        #expect(bad.status == 64 && bad.standardError.contains("--webhook-secret-file"), "\(bad.standardError)")
        let receiver = try WebhookReceiver()
        defer { receiver.stop() }
        var server = try Self.webhookServer(data: data, models: models, receiver: receiver)
        _ = try Self.enroll(server, synth, count: 5)
        for version in 1...2 {
            let record = try Self.train(server)
            #expect(record["state"] as? String == "succeeded" && record["version"] as? Int == version, "\(record)")
        }
        #expect(receiver.waitFor(4, timeout: 30))
        let first = receiver.deliveries
        #expect(
            first.map { "\($0.object["type"] ?? "")" } == [
                "model.published", "training.succeeded", "model.published", "training.succeeded",
            ])
        for delivery in first {
            let expected = "sha256=" + SHA256.hmac(key: Data(Self.webhookSecret.utf8), message: delivery.body)
            #expect(delivery.headers["x-facetrain-signature"] == expected)
            #expect(delivery.headers["x-facetrain-event-id"] == delivery.object["id"] as? String)
            #expect(delivery.headers["x-facetrain-timestamp"].flatMap(Int.init) != nil)
        }
        #expect((first[3].object["data"] as? [String: Any])?["version"] as? Int == 2)

        // A slow receiver does not slow the request that caused the event.
        receiver.delay = 3
        let started = Date()
        #expect(try server.json("POST", "/v1/models/1/rollback").status == 200)
        #expect(Date().timeIntervalSince(started) < 1.5, "answered before the receiver")
        #expect(receiver.waitFor(5, timeout: 30))
        receiver.delay = 0

        // The receiver goes down; 100 events are queued, the server is killed and started again
        // while it is still down, and when it comes back every event arrives once, in order.
        receiver.stop()
        let outage = Date()
        for round in 0..<50 {
            #expect(try server.json("POST", "/v1/models/2/publish").status == 200, "round \(round)")
            #expect(try server.json("POST", "/v1/models/1/rollback").status == 200, "round \(round)")
        }
        server.kill()
        server = try Self.webhookServer(data: data, models: models, receiver: receiver)
        defer { server.kill() }
        Thread.sleep(forTimeInterval: 2)
        try receiver.start()
        #expect(receiver.waitFor(105, timeout: 60), "\(receiver.deliveries.count) of 105")
        let seconds = Date().timeIntervalSince(outage)
        print("webhooks: 100 events through an outage and a restart delivered in \(String(format: "%.1f", seconds)) s")
        let all = receiver.deliveries
        let ids = all.compactMap { $0.object["id"] as? String }
        #expect(ids.count == 105 && Set(ids).count == 105, "each event once")
        let outageEvents = all.suffix(100).map { delivery -> String in
            let version = (delivery.object["data"] as? [String: Any])?["version"] as? Int ?? 0
            return "\(delivery.object["type"] ?? "") \(version)"
        }
        #expect(outageEvents == (0..<50).flatMap { _ in ["model.published 2", "model.rolled_back 1"] })
        Thread.sleep(forTimeInterval: 1)
        #expect(receiver.deliveries.count == 105, "nothing sent twice after the last")
        #expect(!FileManager.default.fileExists(atPath: models.appendingPathComponent(".webhooks.jsonl").path))
    }

    /// A URL no receiver listens on.
    private var receiverless: String { "http://127.0.0.1:9/hook" }
}
