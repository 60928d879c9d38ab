import FaceTrain
import FaceTrainBenchmark
import FaceTrainEngine
import FaceTrainSynthesis
import FaceTrainTestSupport
import Foundation
import Testing

/// Real processes killed with SIGKILL at named points and at random moments, concurrent
/// writers, and writes that run out of space.
@Suite("Crash safety", .serialized)
struct CrashSafetyTests {
    static let testEnvironment = ["FACETRAIN_TEST_COMMANDS": "1"]

    /// Every version directory verifies, latest.json is byte-identical to `pointer`.
    func expectConsistent(
        _ models: URL, versions expected: [Int], pointer: Data?, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let repository = ModelRepository(directory: models)
        #expect(try repository.versions() == expected, sourceLocation: sourceLocation)
        for version in try repository.versions() {
            let problems = BundleVerifier.verify(repository.bundleURL(version: version)).problems
            #expect(problems.isEmpty, "version \(version): \(problems)", sourceLocation: sourceLocation)
        }
        let pointerURL = models.appendingPathComponent("latest.json")
        #expect(FileManager.default.contents(atPath: pointerURL.path) == pointer, sourceLocation: sourceLocation)
    }

    /// A models directory with version 1 published (pointer) and returns the pointer bytes.
    func publishedBaseline(_ models: URL) throws -> Data {
        try BundleFixture.publish(in: models)
        _ = try ModelRepository(directory: models).publish(version: 1, gate: PublishGate())
        return try Data(contentsOf: models.appendingPathComponent("latest.json"))
    }

    func stagingLeftovers(_ models: URL) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: models.path).filter {
            $0.hasPrefix(".staging") || $0.contains(".tmp-")
        }
    }

    @Test(arguments: ["start", "reserved", "file-written", "lists-written", "ready-to-rename", "renamed"])
    func killedWriterLeavesModelsValid(point: String) throws {
        let models = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: models) }
        let pointer = try publishedBaseline(models)
        let writer = try CLIRunner.Background(
            ["_test-write-bundle", "--models", models.path, "--seed", "5"],
            environment: Self.testEnvironment.merging(["FACETRAIN_TEST_PAUSE_AT": point]) { $1 })
        #expect(writer.waitFor("paused at \(point)"), "never paused: \(writer.standardError)")
        if point != "start" && point != "renamed" {
            #expect(try !stagingLeftovers(models).isEmpty, "the writer should be mid-way")
        }
        writer.kill()
        // Killed after the rename: version 2 is complete. Before: there is no version 2.
        try expectConsistent(models, versions: point == "renamed" ? [1, 2] : [1], pointer: pointer)

        let next = try CLIRunner.run(
            ["_test-write-bundle", "--models", models.path, "--seed", "6"], environment: Self.testEnvironment)
        #expect(next.status == 0, "\(next.standardError)")
        #expect(try stagingLeftovers(models).isEmpty, "stale staging not cleaned")
        let expectedNext = point == "start" ? 2 : 3  // a reserved number is never reused
        #expect(next.standardOutput.contains("published \(models.path)/\(expectedNext)"), "\(next.standardOutput)")
        try expectConsistent(models, versions: (point == "renamed" ? [1, 2] : [1]) + [expectedNext], pointer: pointer)
    }

    @Test func killedAtRandomMomentsLeavesModelsValid() throws {
        let models = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: models) }
        let pointer = try publishedBaseline(models)
        var generator = SystemRandomNumberGenerator()
        for round in 0..<10 {
            let writer = try CLIRunner.Background(
                ["_test-write-bundle", "--models", models.path, "--seed", String(round)],
                environment: Self.testEnvironment)
            Thread.sleep(forTimeInterval: Double.random(in: 0.0...0.5, using: &generator))
            writer.kill()
            let repository = ModelRepository(directory: models)
            let versions = try repository.versions()
            #expect(versions.first == 1)
            for version in versions {
                #expect(
                    BundleVerifier.verify(repository.bundleURL(version: version)).isValid,
                    "round \(round), version \(version)")
            }
            #expect(FileManager.default.contents(atPath: models.appendingPathComponent("latest.json").path) == pointer)
        }
        let last = try CLIRunner.run(
            ["_test-write-bundle", "--models", models.path], environment: Self.testEnvironment)
        #expect(last.status == 0)
        #expect(try stagingLeftovers(models).isEmpty)
        let versions = try ModelRepository(directory: models).versions()
        #expect(Set(versions).count == versions.count && versions == versions.sorted())
    }

    @Test func concurrentWritersGetDistinctVersions() throws {
        let models = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: models) }
        let writers = try (0..<4).map { seed in
            try CLIRunner.Background(
                ["_test-write-bundle", "--models", models.path, "--seed", String(seed)],
                environment: Self.testEnvironment)
        }
        let statuses = writers.map { $0.wait() }
        #expect(statuses == [0, 0, 0, 0], "\(writers.map(\.standardError))")
        let published = writers.map { $0.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines) }
        #expect(Set(published).count == 4, "\(published)")
        try expectConsistent(models, versions: [1, 2, 3, 4], pointer: nil)
        // Each directory holds the weights its own writer wrote (nobody clobbered another).
        let seeds = try (1...4).map { version in
            try Manifest.decode(Data(contentsOf: models.appendingPathComponent("\(version)/manifest.json"))).seed
        }
        #expect(Set(seeds) == [0, 1, 2, 3])
    }

    @Test func liveReservationBlocksItsNumberAndDeadOneIsCleaned() throws {
        let models = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: models) }
        let holder = try CLIRunner.Background(
            ["_test-write-bundle", "--models", models.path, "--seed", "1"],
            environment: Self.testEnvironment.merging(["FACETRAIN_TEST_PAUSE_AT": "file-written"]) { $1 })
        #expect(holder.waitFor("paused at file-written"))
        let other = try CLIRunner.run(
            ["_test-write-bundle", "--models", models.path, "--seed", "2"], environment: Self.testEnvironment)
        #expect(other.standardOutput.contains("published \(models.path)/2"))
        // The paused writer's staging area survived the other writer's cleanup.
        #expect(try stagingLeftovers(models).contains { $0.hasPrefix(".staging-1-") && !$0.hasSuffix(".lock") })
        holder.kill()
        let third = try CLIRunner.run(
            ["_test-write-bundle", "--models", models.path, "--seed", "3"], environment: Self.testEnvironment)
        #expect(third.standardOutput.contains("published \(models.path)/3"))
        #expect(try stagingLeftovers(models).isEmpty)
        try expectConsistent(models, versions: [2, 3], pointer: nil)
    }

    @Test func killedPublishKeepsTheOldPointer() throws {
        let models = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: models) }
        let pointer = try publishedBaseline(models)
        try BundleFixture.publish(in: models, seed: 2)
        let publisher = try CLIRunner.Background(
            ["publish", models.appendingPathComponent("2").path],
            environment: Self.testEnvironment.merging(["FACETRAIN_TEST_PAUSE_AT": "pointer-written"]) { $1 })
        #expect(publisher.waitFor("paused at pointer-written"))
        #expect(try stagingLeftovers(models).contains { $0.hasPrefix(".latest.json.tmp-") })
        publisher.kill()
        try expectConsistent(models, versions: [1, 2], pointer: pointer)
        let again = try CLIRunner.run(["publish", models.appendingPathComponent("2").path])
        #expect(again.status == 0, "\(again.standardError)")
        #expect(try stagingLeftovers(models).isEmpty)
        #expect(try ModelRepository(directory: models).latestPointer()?.version == 2)
    }

    @Test func fileSizeLimitFailsClearlyAndPublishesNothing() throws {
        let models = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: models) }
        let pointer = try publishedBaseline(models)
        // 64 blocks of 512 bytes: smaller than weights.h5. SIGXFSZ ignored, so writes get EFBIG.
        let script = "trap '' XFSZ; ulimit -f 64; exec \"$0\" _test-write-bundle --models \"$1\""
        let result = try CLIRunner.runProgram(
            "/bin/sh", ["-c", script, CLIRunner.binary.path, models.path],
            environment: Self.testEnvironment)
        #expect(result.status == 1, "\(result.standardOutput)\(result.standardError)")
        #expect(result.standardError.contains("weights.h5"), "\(result.standardError)")
        #expect(result.standardError.contains("File too large"), "\(result.standardError)")
        #expect(try stagingLeftovers(models).isEmpty)
        try expectConsistent(models, versions: [1], pointer: pointer)
    }

    static let namespacesWork: Bool = {
        (try? CLIRunner.runProgram("/usr/bin/unshare", ["-Urm", "true"]).status) == 0
    }()

    /// Runs `script` in a private mount namespace with a small tmpfs at $1 (the binary is $0).
    func inSmallFileSystem(_ script: String, size: String = "100k") throws -> CLIRunner.Result {
        let mountPoint = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: mountPoint) }
        let wrapped = "mount -t tmpfs -o size=\(size) tmpfs \"$1\" || exit 99; \(script)"
        return try CLIRunner.runProgram(
            "/usr/bin/unshare", ["-Urm", "/bin/sh", "-c", wrapped, CLIRunner.binary.path, mountPoint.path],
            environment: Self.testEnvironment)
    }

    @Test(.enabled(if: namespacesWork, "needs unprivileged user and mount namespaces"))
    func fullDiskFailsClearlyAndKeepsPublishedVersions() throws {
        let result = try inSmallFileSystem(
            """
            "$0" _test-write-bundle --models "$1/models" >/dev/null || exit 98
            "$0" _test-write-bundle --models "$1/models" --seed 2; echo "status=$?"
            ls -a "$1/models"; "$0" verify --models "$1/models"
            """)
        #expect(result.standardOutput.contains("status=1"), "\(result.standardOutput)\(result.standardError)")
        #expect(result.standardError.contains("No space left on device"), "\(result.standardError)")
        #expect(result.standardError.contains("HINT"))
        #expect(!result.standardOutput.contains(".staging"))
        #expect(result.standardOutput.contains("/models/1: OK"))
        #expect(!result.standardOutput.contains("/models/2"))
    }

    @Test(.enabled(if: namespacesWork, "needs unprivileged user and mount namespaces"))
    func readOnlyModelsDirectoryFailsClearly() throws {
        let result = try inSmallFileSystem(
            """
            "$0" _test-write-bundle --models "$1/models" >/dev/null || exit 98
            mount -o remount,ro "$1" || exit 97
            "$0" _test-write-bundle --models "$1/models" --seed 2; echo "status=$?"
            "$0" verify --models "$1/models"
            """, size: "1m")
        #expect(result.standardOutput.contains("status=1"), "\(result.standardOutput)\(result.standardError)")
        #expect(result.standardError.contains("Read-only file system"), "\(result.standardError)")
        #expect(result.standardError.contains("HINT: the file system is read-only"))
        #expect(result.standardOutput.contains("/models/1: OK"))
    }
}
