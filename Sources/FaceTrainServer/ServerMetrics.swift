import FaceTrainEngine
import Foundation

/// The counters behind `GET /metrics`, written in Prometheus' text exposition format (version 0.0.4:
/// https://prometheus.io/docs/instrumenting/exposition_formats/).
///
/// Requests are counted by route template (`/v1/users/{id}`, never the raw path), so a client
/// walking ids or random paths cannot grow the label set.
public final class ServerMetrics: @unchecked Sendable {
    /// Upper bounds of the latency histogram, in seconds.
    static let latencyBuckets: [Double] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
    /// Methods counted by name; any other is counted as "other".
    static let knownMethods: Set<String> = ["GET", "HEAD", "POST", "PATCH", "PUT", "DELETE", "OPTIONS"]

    private struct RequestKey: Hashable {
        var route: String
        var method: String
        var status: Int
    }

    private struct Histogram {
        var bucketCounts = [Int](repeating: 0, count: ServerMetrics.latencyBuckets.count)
        var count = 0
        var sum = 0.0
    }

    private let lock = NSLock()
    private var requests: [RequestKey: Int] = [:]
    private var latency: [String: Histogram] = [:]
    private var uploadedFiles: [String: Int] = ["stored": 0, "duplicate": 0, "rejected": 0]
    private var trainings: [String: Int] = [:]

    public init() {
        for state in [TrainingJob.State.succeeded, .failed, .refused] { trainings[state.rawValue] = 0 }
    }

    /// One answered request.
    public func recordRequest(route: String, method: String, status: Int, seconds: Double) {
        let method = Self.knownMethods.contains(method) ? method : "other"
        lock.lock()
        defer { lock.unlock() }
        requests[RequestKey(route: route, method: method, status: status), default: 0] += 1
        var histogram = latency[route] ?? Histogram()
        for (index, bound) in Self.latencyBuckets.enumerated() where seconds <= bound {
            histogram.bucketCounts[index] += 1
        }
        histogram.count += 1
        histogram.sum += seconds
        latency[route] = histogram
    }

    /// The files of one upload request, by outcome ("stored", "duplicate", "rejected").
    public func recordUpload(_ outcomes: [PhotoOutcome]) {
        lock.lock()
        defer { lock.unlock() }
        for outcome in outcomes { uploadedFiles[outcome.result, default: 0] += 1 }
    }

    /// A training that ended.
    public func recordTraining(_ state: TrainingJob.State) {
        lock.lock()
        defer { lock.unlock() }
        trainings[state.rawValue, default: 0] += 1
    }

    /// Values read at scrape time rather than counted.
    public struct Gauges: Sendable {
        public var publishedVersion: Int?
        public var users: Int
        public var crops: Int
        public var queuedTrainings: Int
        public var runningTrainings: Int
        public var trainingProgress: Double?
    }

    /// The whole exposition: families in a fixed order, label sets sorted, so two scrapes diff cleanly.
    public func exposition(_ gauges: Gauges) -> String {
        lock.lock()
        let requests = self.requests
        let latency = self.latency
        let uploadedFiles = self.uploadedFiles
        let trainings = self.trainings
        lock.unlock()

        var text = ""
        func family(_ name: String, _ type: String, _ help: String) {
            text += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
        }
        func sample(_ name: String, _ labels: [(String, String)], _ value: Double) {
            let rendered =
                labels.isEmpty
                ? "" : "{" + labels.map { "\($0.0)=\"\(Self.escapeLabel($0.1))\"" }.joined(separator: ",") + "}"
            text += "\(name)\(rendered) \(Self.format(value))\n"
        }

        family(
            "facetrain_http_requests_total", "counter", "HTTP requests answered, by route template, method and status.")
        for (key, count) in requests.sorted(by: {
            ($0.key.route, $0.key.method, $0.key.status) < ($1.key.route, $1.key.method, $1.key.status)
        }) {
            sample(
                "facetrain_http_requests_total",
                [("route", key.route), ("method", key.method), ("status", String(key.status))], Double(count))
        }
        family(
            "facetrain_http_request_duration_seconds", "histogram",
            "Time from a complete request to its answer, by route template.")
        for (route, histogram) in latency.sorted(by: { $0.key < $1.key }) {
            let name = "facetrain_http_request_duration_seconds"
            for (index, bound) in Self.latencyBuckets.enumerated() {
                sample(
                    name + "_bucket", [("route", route), ("le", Self.format(bound))],
                    Double(histogram.bucketCounts[index]))
            }
            sample(name + "_bucket", [("route", route), ("le", "+Inf")], Double(histogram.count))
            sample(name + "_sum", [("route", route)], histogram.sum)
            sample(name + "_count", [("route", route)], Double(histogram.count))
        }
        family(
            "facetrain_uploaded_files_total", "counter",
            "Files of photo uploads, by result: stored, duplicate (already the user's) or rejected.")
        for (result, count) in uploadedFiles.sorted(by: { $0.key < $1.key }) {
            sample("facetrain_uploaded_files_total", [("result", result)], Double(count))
        }
        family("facetrain_trainings_total", "counter", "Trainings that ended, by outcome.")
        for (outcome, count) in trainings.sorted(by: { $0.key < $1.key }) {
            sample("facetrain_trainings_total", [("outcome", outcome)], Double(count))
        }
        family("facetrain_trainings_queued", "gauge", "Trainings waiting to run.")
        sample("facetrain_trainings_queued", [], Double(gauges.queuedTrainings))
        family("facetrain_trainings_running", "gauge", "Trainings running (0 or 1).")
        sample("facetrain_trainings_running", [], Double(gauges.runningTrainings))
        if let progress = gauges.trainingProgress {
            family("facetrain_training_progress_ratio", "gauge", "Progress of the running training, 0 to 1.")
            sample("facetrain_training_progress_ratio", [], progress)
        }
        family(
            "facetrain_published_model_version", "gauge",
            "The version models/latest.json names (0: nothing is published).")
        sample("facetrain_published_model_version", [], Double(gauges.publishedVersion ?? 0))
        family("facetrain_users", "gauge", "Registered users.")
        sample("facetrain_users", [], Double(gauges.users))
        family("facetrain_user_crops", "gauge", "Stored crops of the registered users.")
        sample("facetrain_user_crops", [], Double(gauges.crops))
        return text
    }

    /// Label values escape backslash, double quote and line feed, as the format requires.
    static func escapeLabel(_ value: String) -> String {
        value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\n", with: "\\n")
    }

    /// Integers without a fraction; other values as Go's strconv would read them back.
    static func format(_ value: Double) -> String {
        if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return String(value)
    }
}
