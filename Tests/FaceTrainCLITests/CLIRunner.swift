import FaceTrain
import FaceTrainBenchmark
import FaceTrainEngine
import FaceTrainSynthesis
import FaceTrainTestSupport
import Foundation

/// Runs the built `facetrain` binary (it sits next to the test bundle in .build/<config>/).
enum CLIRunner {
    struct Result {
        var status: Int32
        var standardOutput: String
        var standardError: String
    }

    static var binary: URL {
        let candidates = [
            Bundle.main.bundleURL.appendingPathComponent("facetrain"),
            Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent("facetrain"),
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent(
                "facetrain"),
            URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().appendingPathComponent(".build/debug/facetrain"),
        ]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) } ?? candidates[0]
    }

    static func environment(_ extra: [String: String]) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["FACETRAIN_TEST_PAUSE_AT"] = nil
        environment["FACETRAIN_TEST_COMMANDS"] = nil
        environment.merge(extra) { _, new in new }
        return environment
    }

    /// Runs facetrain to completion.
    static func run(_ arguments: [String], environment extra: [String: String] = [:], in directory: URL? = nil) throws
        -> Result
    {
        try runProgram(binary.path, arguments, environment: extra, in: directory)
    }

    /// Runs any program to completion with the test environment (see `ProcessRunner`).
    static func runProgram(
        _ path: String, _ arguments: [String], environment extra: [String: String] = [:],
        in directory: URL? = nil
    ) throws -> Result {
        let result = try ProcessRunner.run(path, arguments, environment: environment(extra), in: directory)
        return Result(status: result.status, standardOutput: result.standardOutput, standardError: result.standardError)
    }

    /// A facetrain process started in the background, its stderr going to a file.
    final class Background {
        let process = Process()
        let errorURL: URL
        let outputURL: URL

        init(_ arguments: [String], environment extra: [String: String]) throws {
            let scratch = FileManager.default.temporaryDirectory.appendingPathComponent(
                "facetrain-bg-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
            errorURL = scratch.appendingPathComponent("err")
            outputURL = scratch.appendingPathComponent("out")
            _ = FileManager.default.createFile(atPath: errorURL.path, contents: nil)
            _ = FileManager.default.createFile(atPath: outputURL.path, contents: nil)
            process.executableURL = CLIRunner.binary
            process.arguments = arguments
            process.environment = CLIRunner.environment(extra)
            process.standardOutput = try FileHandle(forWritingTo: outputURL)
            process.standardError = try FileHandle(forWritingTo: errorURL)
            try process.run()
        }

        var standardError: String { (try? String(contentsOf: errorURL, encoding: .utf8)) ?? "" }
        var standardOutput: String { (try? String(contentsOf: outputURL, encoding: .utf8)) ?? "" }

        /// Waits until stderr contains `text`; false on timeout or if the process ended first.
        func waitFor(_ text: String, timeout: TimeInterval = 60) -> Bool {
            let deadline = Date().addingTimeInterval(timeout)
            while Date() < deadline {
                if standardError.contains(text) { return true }
                if !process.isRunning { return standardError.contains(text) }
                Thread.sleep(forTimeInterval: 0.01)
            }
            return false
        }

        func kill() {
            Foundation.kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }

        func wait() -> Int32 {
            process.waitUntilExit()
            return process.terminationStatus
        }
    }
}
