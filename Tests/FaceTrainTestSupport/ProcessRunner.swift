import FaceTrain
import FaceTrainEngine
import Foundation

/// Runs a program to completion for tests, both test targets: stdout and stderr go through files,
/// so a chatty child cannot deadlock on a full pipe.
public enum ProcessRunner {
    public struct Result: Sendable {
        public var status: Int32
        public var standardOutput: String
        public var standardError: String
    }

    /// `environment` nil inherits this process's environment.
    public static func run(
        _ path: String, _ arguments: [String], environment: [String: String]? = nil, in directory: URL? = nil
    ) throws -> Result {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent(
            "facetrain-process-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let outURL = scratch.appendingPathComponent("out")
        let errURL = scratch.appendingPathComponent("err")
        _ = FileManager.default.createFile(atPath: outURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        if let environment { process.environment = environment }
        if let directory { process.currentDirectoryURL = directory }
        process.standardOutput = try FileHandle(forWritingTo: outURL)
        process.standardError = try FileHandle(forWritingTo: errURL)
        try process.run()
        process.waitUntilExit()
        return Result(
            status: process.terminationStatus,
            standardOutput: String(decoding: try Data(contentsOf: outURL), as: UTF8.self),
            standardError: String(decoding: try Data(contentsOf: errURL), as: UTF8.self))
    }

    /// python3 with the arguments; the exit status and stdout followed by stderr.
    public static func python(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let result = try run("/usr/bin/env", ["python3"] + arguments)
        return (result.status, result.standardOutput + result.standardError)
    }
}
