import FaceTrain
import FaceTrainSynthesis
import Foundation
import Testing

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// `fit` and `eval` end to end through the built binary, on synthetic faces.
@Suite("fit and eval", .serialized)
struct FitCommandTests {
    /// A small synthetic data folder: 6 users x 20 crops, 40 non-faces, 10 strangers x 4 crops.
    /// Returns the data folder; bundles go beside it (`data.deletingLastPathComponent()`), never inside.
    static func syntheticData() throws -> URL {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent(
            "facetrain-fit-\(UUID().uuidString)/data")
        let output = try CLIRunner.run([
            "synth", "--out", root.path, "--users", "6", "--per-user", "20", "--seed", "7", "--negatives", "40",
            "--unknown-identities", "10", "--per-unknown", "4",
        ])
        #expect(output.status == 0, "\(output.standardError)")
        return root
    }

    /// Small and fast: 32 px input, a quarter of ref-small's width.
    static let quickFit = [
        "--base", "none", "--epochs", "30", "--batch-size", "16", "--input-size", "32", "--width", "8",
    ]
    /// Long enough that a run can be killed part-way.
    static let longFit = [
        "--base", "none", "--epochs", "60", "--batch-size", "16", "--input-size", "32", "--width", "8",
    ]

    /// Starts `arguments` (a fit with `--json`) in the background and returns once `epoch` is done.
    static func backgroundFit(_ arguments: [String], afterEpoch epoch: Int) throws -> CLIRunner.Background {
        let run = try CLIRunner.Background(arguments, environment: [:])
        let deadline = Date().addingTimeInterval(600)
        while !run.standardOutput.contains("\"epoch\":\(epoch),") && run.process.isRunning && Date() < deadline {
            Thread.sleep(forTimeInterval: 0.02)
        }
        return run
    }

    static func versions(in models: URL) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: models.path)) ?? []).filter { Int($0) != nil }.sorted()
    }

    /// On a terminal (a pseudo-terminal from util-linux `script`), epoch lines clear the live bar
    /// with a real escape sequence; the escaping of untrusted text must not print it as `\u{1B}[K`.
    @Test func epochLinesOnATerminalClearTheBarWithARealEscape() throws {
        let data = try Self.syntheticData()
        let models = data.deletingLastPathComponent().appendingPathComponent("models")
        defer { try? FileManager.default.removeItem(at: data.deletingLastPathComponent()) }
        let command = ([CLIRunner.binary.path, "fit", "--data", data.path, "--out", models.path] + Self.quickFit)
            .map { "'\($0)'" }.joined(separator: " ")
        let run = try CLIRunner.runProgram("/usr/bin/script", ["-qec", command, "/dev/null"])
        #expect(run.status == 0, "\(run.standardOutput)")
        #expect(run.standardOutput.contains("\r\u{1B}[Kepoch   1/30"), "\(run.standardOutput.prefix(600))")
        #expect(!run.standardOutput.contains("\\u{1B}"), "\(run.standardOutput.prefix(600))")
    }

    @Test func fitWritesAVerifiedBundleThatRecognisesSyntheticUsers() throws {
        let data = try Self.syntheticData()
        let models = data.deletingLastPathComponent().appendingPathComponent("models")
        defer { try? FileManager.default.removeItem(at: data.deletingLastPathComponent()) }
        // Run inside another git repository: the manifest names facetrain's commit, not that one.
        let elsewhere = data.deletingLastPathComponent()
        for command in [
            ["init", "-q"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "t"],
        ] {
            #expect(try CLIRunner.runProgram("/usr/bin/git", ["-C", elsewhere.path] + command).status == 0)
        }
        let fit = try CLIRunner.run(
            ["fit", "--data", data.path, "--out", models.path] + Self.quickFit, in: elsewhere)
        #expect(fit.status == 0, "\(fit.standardError)")
        let manifest =
            try JSONSerialization.jsonObject(
                with: Data(contentsOf: models.appendingPathComponent("1/manifest.json"))) as! [String: Any]
        let checkout = CLIRunner.binary.resolvingSymlinksInPath().path.components(separatedBy: "/.build/")[0]
        let facetrainHead = try CLIRunner.runProgram("/usr/bin/git", ["-C", checkout, "rev-parse", "HEAD"])
            .standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
        let recorded = try #require(manifest["gitCommit"] as? String)
        #expect(recorded == facetrainHead || recorded == facetrainHead + "-dirty", "gitCommit \(recorded)")
        let lines = fit.standardOutput.split(separator: "\n")
        #expect(lines.last.map(String.init) == models.appendingPathComponent("1").path)
        #expect(lines.filter { $0.hasPrefix("epoch ") }.count == 30)
        #expect(try CLIRunner.run(["verify", models.appendingPathComponent("1").path]).status == 0)

        // Stated accuracy on the held-out synthetic crops (see README): users recognised, non-faces rejected.
        let metrics =
            try JSONSerialization.jsonObject(with: Data(contentsOf: models.appendingPathComponent("1/metrics.json")))
            as! [String: Any]
        let plain = metrics["unthresholded"] as! [String: Double]
        #expect(plain["user_accuracy"]! >= 0.85, "held-out user accuracy \(plain["user_accuracy"]!)")
        #expect(plain["nonface_far"]! <= 0.2)
        let history = metrics["history"] as! [[String: Any]]
        #expect((history.last!["train_loss"] as! Double) < (history.first!["train_loss"] as! Double))

        // eval: JSON keys CI jobs read, and a report that is well-formed.
        let report = data.deletingLastPathComponent().appendingPathComponent("report.html")
        let eval = try CLIRunner.run([
            "eval", "--model", models.appendingPathComponent("1").path, "--json", "--report", report.path,
        ])
        #expect(eval.status == 0, "\(eval.standardError)")
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(eval.standardOutput.utf8)) as? [String: Any])
        for key in [
            "user_accuracy", "macro_user_recall", "macro_user_precision", "unknown_far", "nonface_far", "user_rejected",
            "overall_accuracy", "per_user", "confusion", "misclassified", "threshold", "threshold_sweep",
        ] {
            #expect(object[key] != nil, "eval --json lacks \(key)")
        }
        let html = try String(contentsOf: report, encoding: .utf8)
        #expect(html.hasPrefix("<!DOCTYPE html>") && html.hasSuffix("</html>"))
        #expect(html.contains("Face embeddings") && html.contains("<circle"))
        #expect(!html.contains("<script"))
        var rest = Substring(html)
        while let start = rest.range(of: "<svg"),
            let end = rest.range(of: "</svg>", range: start.upperBound..<rest.endIndex)
        {
            let parser = XMLParser(data: Data(String(rest[start.lowerBound..<end.upperBound]).utf8))
            #expect(parser.parse(), "an SVG of the report is not well-formed")
            rest = rest[end.upperBound...]
        }

        // A report that cannot be written names its path.
        let unwritable = data.deletingLastPathComponent().appendingPathComponent("missing/report.html").path
        let failed = try CLIRunner.run([
            "eval", "--model", models.appendingPathComponent("1").path, "--report", unwritable,
        ])
        #expect(
            failed.status == 1 && failed.standardError.contains("cannot write \(unwritable)"),
            "\(failed.standardError)")
        // Outputs are checked before scoring (no half-written pair) and never land in a bundle.
        let csv = data.deletingLastPathComponent().appendingPathComponent("p.csv")
        let half = try CLIRunner.run([
            "eval", "--model", models.appendingPathComponent("1").path, "--predictions", csv.path,
            "--report", unwritable,
        ])
        #expect(half.status == 1 && !FileManager.default.fileExists(atPath: csv.path))
        for (inside, says) in [
            ("1/metrics.json", "model bundle"), ("1/report.html", "model bundle"),
            ("latest.json", "publish and rollback"),
        ] {
            let target = models.appendingPathComponent(inside).path
            let refused = try CLIRunner.run([
                "eval", "--model", models.appendingPathComponent("1").path, "--predictions", target,
            ])
            #expect(refused.status == 1 && refused.standardError.contains(says), "\(inside)")
        }
        #expect(try CLIRunner.run(["verify", models.appendingPathComponent("1").path]).status == 0)
        // Ordinary folders are not mistaken for them: a web app's manifest.json, a report named latest.json.
        let web = data.deletingLastPathComponent().appendingPathComponent("web")
        try FileManager.default.createDirectory(at: web, withIntermediateDirectories: true)
        try Data("{}".utf8).write(to: web.appendingPathComponent("manifest.json"))
        let ordinary = try CLIRunner.run([
            "eval", "--model", models.appendingPathComponent("1").path, "--predictions",
            web.appendingPathComponent("latest.json").path, "--report", web.appendingPathComponent("r.html").path,
        ])
        #expect(ordinary.status == 0, "\(ordinary.standardError)")

        // eval on a folder: a folder the model does not know counts as unknown people.
        let probe = data.deletingLastPathComponent().appendingPathComponent("probe")
        try FileManager.default.createDirectory(
            at: probe.appendingPathComponent("stranger"), withIntermediateDirectories: true)
        for name in try FileManager.default.contentsOfDirectory(atPath: data.appendingPathComponent("2").path).prefix(5)
        {
            try FileManager.default.copyItem(
                at: data.appendingPathComponent("2/\(name)"), to: probe.appendingPathComponent("stranger/\(name)"))
        }
        let truncated = probe.appendingPathComponent("stranger/cut.jpg")
        try Data([0xFF, 0xD8]).write(to: truncated)
        let probeEval = try CLIRunner.run([
            "eval", "--model", models.appendingPathComponent("1").path, "--data", probe.path, "--json",
        ])
        #expect(probeEval.status == 0, "\(probeEval.standardError)")
        let counts =
            (try JSONSerialization.jsonObject(with: Data(probeEval.standardOutput.utf8)) as? [String: Any])?["counts"]
            as? [String: Int]
        #expect(counts?["unknown"] == 5)
        // The unreadable crop is left out of the scores, and said so in the JSON and on stderr.
        let notScored =
            (try JSONSerialization.jsonObject(with: Data(probeEval.standardOutput.utf8)) as? [String: Any])?[
                "not_scored"] as? [[String: String]]
        #expect(notScored?.count == 1 && notScored?.first?["path"] == truncated.path)
        #expect(notScored?.first?["reason"]?.contains("truncated") == true, "\(notScored ?? [])")
        #expect(probeEval.standardError.contains(truncated.path))
    }

    @Test func divergingRunFailsCleanlyAndWritesNoBundle() throws {
        let data = try Self.syntheticData()
        let models = data.deletingLastPathComponent().appendingPathComponent("models")
        defer { try? FileManager.default.removeItem(at: data.deletingLastPathComponent()) }
        let fit = try CLIRunner.run(
            ["fit", "--data", data.path, "--out", models.path, "--learning-rate", "1e6"] + Self.quickFit)
        #expect(fit.status == 1)
        #expect(fit.standardError.contains("diverged") && fit.standardError.contains("--learning-rate"))
        #expect(!fit.standardError.contains("Fatal error"))
        #expect(Self.versions(in: models).isEmpty)
        // So large that the weights overflow within an epoch: said as divergence, not as a file error.
        let huge = try CLIRunner.run(
            ["fit", "--data", data.path, "--out", models.path, "--learning-rate", "1e300"] + Self.quickFit)
        #expect(huge.status == 1 && huge.standardError.contains("training diverged"), "\(huge.standardError)")
        #expect(!huge.standardError.contains("cannot write"))
    }

    @Test func resumeAfterSIGKILLEndsWithTheSameModel() throws {
        let data = try Self.syntheticData()
        defer { try? FileManager.default.removeItem(at: data.deletingLastPathComponent()) }
        let straight = data.deletingLastPathComponent().appendingPathComponent("straight")
        let resumed = data.deletingLastPathComponent().appendingPathComponent("resumed")
        let uninterrupted = try CLIRunner.run(["fit", "--data", data.path, "--out", straight.path] + Self.longFit)
        #expect(uninterrupted.status == 0, "\(uninterrupted.standardError)")

        let run = try Self.backgroundFit(
            ["fit", "--data", data.path, "--out", resumed.path, "--json"] + Self.longFit, afterEpoch: 3)
        #expect(run.process.isRunning, "fit ended before it could be killed: \(run.standardError)")
        run.kill()
        #expect(Self.versions(in: resumed).isEmpty)

        let again = try CLIRunner.run(
            ["fit", "--data", data.path, "--out", resumed.path, "--json", "--resume"] + Self.longFit)
        #expect(again.status == 0, "\(again.standardError)")
        let start = again.standardOutput.split(separator: "\n").first { $0.contains("\"event\":\"start\"") } ?? ""
        #expect(["3", "4", "5"].contains { start.contains("\"resumed_from_epoch\":\($0)") }, "\(start)")
        let a = try Data(contentsOf: straight.appendingPathComponent("1/weights.h5"))
        let b = try Data(contentsOf: resumed.appendingPathComponent("1/weights.h5"))
        #expect(a == b, "a resumed fit must end with the same weights as an uninterrupted one")
    }

    @Test func interruptKeepsTheCheckpointAndPublishesNothing() throws {
        let data = try Self.syntheticData()
        let models = data.deletingLastPathComponent().appendingPathComponent("models")
        defer { try? FileManager.default.removeItem(at: data.deletingLastPathComponent()) }
        let run = try Self.backgroundFit(
            ["fit", "--data", data.path, "--out", models.path, "--json"] + Self.longFit, afterEpoch: 2)
        kill(run.process.processIdentifier, SIGINT)
        #expect(run.wait() == 1)
        #expect(run.standardError.contains("interrupted") && run.standardError.contains("--resume"))
        #expect(Self.versions(in: models).isEmpty)
        let checkpoints =
            (try? FileManager.default.contentsOfDirectory(atPath: models.appendingPathComponent(".checkpoints").path))
            ?? []
        #expect(checkpoints.contains { $0.hasSuffix(".checkpoint") })
    }

    @Test func holdoutWithoutUserCropsIsRefused() throws {
        let data = try Self.syntheticData()
        let models = data.deletingLastPathComponent().appendingPathComponent("models")
        defer { try? FileManager.default.removeItem(at: data.deletingLastPathComponent()) }
        let fit = try CLIRunner.run(
            ["fit", "--data", data.path, "--out", models.path, "--holdout", "0"] + Self.quickFit)
        #expect(fit.status == 1)
        #expect(fit.standardError.contains("--holdout 0.0 holds out no crop of any user"))
        #expect(!fit.standardError.contains("Fatal error"))
        #expect(Self.versions(in: models).isEmpty)
    }

    @Test func resumeWithoutCheckpointSaysSo() throws {
        let data = try Self.syntheticData()
        defer { try? FileManager.default.removeItem(at: data.deletingLastPathComponent()) }
        let fit = try CLIRunner.run(
            [
                "fit", "--data", data.path, "--out", data.deletingLastPathComponent().appendingPathComponent("m").path,
                "--resume",
            ] + Self.quickFit)
        #expect(fit.status == 1)
        #expect(fit.standardError.contains("no checkpoint"))
    }

    /// A damaged checkpoint, or one whose counts were edited (checksum recomputed), is refused with
    /// a clear error on --resume: no crash, no endless run, no bundle.
    @Test func damagedOrEditedCheckpointIsRefusedOnResume() throws {
        let data = try Self.syntheticData()
        let models = data.deletingLastPathComponent().appendingPathComponent("models")
        defer { try? FileManager.default.removeItem(at: data.deletingLastPathComponent()) }
        let fit = ["fit", "--data", data.path, "--out", models.path, "--json"] + Self.longFit
        let run = try Self.backgroundFit(fit, afterEpoch: 2)
        kill(run.process.processIdentifier, SIGINT)
        #expect(run.wait() == 1)
        let folder = models.appendingPathComponent(".checkpoints")
        let name = try #require(
            try FileManager.default.contentsOfDirectory(atPath: folder.path).first { $0.hasSuffix(".checkpoint") })
        let url = folder.appendingPathComponent(name)
        let original = try Data(contentsOf: url)

        // A killed run's half-written temporary file is cleaned up by the next run of the same fit.
        let leftover = folder.appendingPathComponent(".\(name).tmp-999999")
        try Data(count: 100).write(to: leftover)
        var damaged = original
        damaged[damaged.count / 2] ^= 0x10
        try damaged.write(to: url)
        let first = try CLIRunner.run(fit + ["--resume"])
        #expect(first.status == 1)
        #expect(first.standardError.contains("checksum"), "\(first.standardError)")
        #expect(!FileManager.default.fileExists(atPath: leftover.path))

        // Header length, JSON header, tensors, SHA-256: rewrite the header with impossible counts.
        let length = Int(original.prefix(8).withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }.littleEndian)
        let header = try #require(
            try JSONSerialization.jsonObject(with: original.subdata(in: 8..<(8 + length))) as? [String: Any])
        var edits: [[String: Any]] = []
        var epochs = header
        epochs["epochsDone"] = 1_000_000_001
        edits.append(epochs)
        var steps = header
        var trainer = try #require(header["trainer"] as? [String: Any])
        trainer["step"] = Int.max
        steps["trainer"] = trainer
        edits.append(steps)
        var stderr = first.standardError
        for edit in edits {
            let json = try JSONSerialization.data(withJSONObject: edit)
            var edited = Data()
            var newLength = UInt64(json.count).littleEndian
            withUnsafeBytes(of: &newLength) { edited.append(contentsOf: $0) }
            edited.append(json)
            edited.append(original.subdata(in: (8 + length)..<(original.count - 32)))
            let hasher = SHA256Hasher()
            hasher.update(edited)
            edited.append(contentsOf: hasher.finalize())
            try edited.write(to: url)
            let second = try CLIRunner.run(fit + ["--resume"])
            #expect(second.status == 1)
            #expect(second.standardError.contains("counters"), "\(second.standardError)")
            stderr += second.standardError
        }
        #expect(!stderr.contains("Fatal error"))
        #expect(Self.versions(in: models).isEmpty)
    }

    @Test func unwritableOutFailsBeforeTraining() throws {
        let data = try Self.syntheticData()
        let file = data.deletingLastPathComponent().appendingPathComponent("a-file")
        defer { try? FileManager.default.removeItem(at: data.deletingLastPathComponent()) }
        try Data("x".utf8).write(to: file)
        let fit = try CLIRunner.run(["fit", "--data", data.path, "--out", file.path, "--json"] + Self.quickFit)
        #expect(fit.status == 1)
        #expect(fit.standardError.contains(file.path) && fit.standardError.contains("Not a directory"))
        #expect(!fit.standardOutput.contains("\"event\":\"epoch\""), "nothing is trained first")
    }

    @Test func folderWithoutUsersIsRefusedWithWhatToAdd() throws {
        let data = try Self.syntheticData()
        defer { try? FileManager.default.removeItem(at: data.deletingLastPathComponent()) }
        for entry in try FileManager.default.contentsOfDirectory(atPath: data.path)
        where Int(entry).map({ $0 > 2 }) == true {
            try FileManager.default.removeItem(at: data.appendingPathComponent(entry))
        }
        let check = try CLIRunner.run(["data", "check", "--data", data.path])
        #expect(check.status == 1)
        #expect(check.standardError.contains("no user folders") || check.standardOutput.contains("no user folders"))
        let fit = try CLIRunner.run(
            ["fit", "--data", data.path, "--out", data.deletingLastPathComponent().appendingPathComponent("m").path]
                + Self.quickFit)
        #expect(fit.status == 1)
        #expect(fit.standardError.contains("no user folders"))
    }

    /// Two fits of the same data and options would write one checkpoint: the second is refused
    /// while the first runs, and a models folder inside the data folder is refused outright.
    @Test func secondFitOfTheSameCheckpointWaitsItsTurn() throws {
        let data = try Self.syntheticData()
        let models = data.deletingLastPathComponent().appendingPathComponent("models")
        defer { try? FileManager.default.removeItem(at: data.deletingLastPathComponent()) }
        let fit = ["fit", "--data", data.path, "--out", models.path, "--json"] + Self.longFit
        let run = try Self.backgroundFit(fit, afterEpoch: 1)
        let second = try CLIRunner.run(fit + ["--resume"])
        kill(run.process.processIdentifier, SIGINT)
        #expect(run.wait() == 1)
        #expect(second.status == 1)
        #expect(second.standardError.contains("another fit of the same data and options is running"))

        let link = data.deletingLastPathComponent().appendingPathComponent("data-link")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: data)
        for inside in [data, data.appendingPathComponent("models"), link.appendingPathComponent("new/models")] {
            let refused = try CLIRunner.run(["fit", "--data", data.path, "--out", inside.path] + Self.quickFit)
            #expect(refused.status == 64 && refused.standardError.contains("is inside --data"))
        }
    }
}
