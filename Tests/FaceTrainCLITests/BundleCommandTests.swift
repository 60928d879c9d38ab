import FaceTrain
import FaceTrainTestSupport
import Foundation
import Testing

@Suite("verify, list, publish, rollback commands")
struct BundleCommandTests {
    @Test func verifyPassesThenNamesATamperedFile() throws {
        let models = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: models) }
        let first = try BundleFixture.publish(in: models)
        try BundleFixture.publish(in: models, seed: 2)
        let ok = try CLIRunner.run(["verify", first.path])
        #expect(ok.status == 0, "\(ok.standardError)")
        #expect(ok.standardOutput.contains("OK (version 1, 2 users, 4 classes, 6 files)"))

        try BundleFixture.flipByte(in: first.appendingPathComponent("weights.h5"), at: 2000)
        let bad = try CLIRunner.run(["verify", first.path])
        #expect(bad.status == 1)
        #expect(bad.standardOutput.contains("FAILED"))
        #expect(bad.standardOutput.contains("weights.h5: was modified or damaged"))
        #expect(bad.standardError.contains("1 of 1 bundle(s) failed verification"))

        // No argument: every version of --models, the bad one named, the good one OK.
        let all = try CLIRunner.run(["verify", "--models", models.path])
        #expect(all.status == 1)
        #expect(all.standardOutput.contains("\(models.path)/2: OK"))
        #expect(all.standardOutput.contains("\(models.path)/1: FAILED"))
    }

    @Test func verifyChecksThePublishedPointer() throws {
        let models = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: models) }
        try BundleFixture.publish(in: models)
        _ = try ModelRepository(directory: models).publish(version: 1, gate: PublishGate())
        let ok = try CLIRunner.run(["verify", "--models", models.path])
        #expect(ok.status == 0)
        #expect(ok.standardOutput.contains("latest.json: OK (version 1)"))
        let pointerURL = models.appendingPathComponent("latest.json")
        let text = try String(contentsOf: pointerURL, encoding: .utf8)
        let sha = try #require(try ModelRepository(directory: models).latestPointer()?.sha256)
        try text.replacingOccurrences(of: sha, with: String(repeating: "0", count: 64))
            .write(to: pointerURL, atomically: true, encoding: .utf8)
        let bad = try CLIRunner.run(["verify", "--models", models.path])
        #expect(bad.status == 1)
        #expect(bad.standardOutput.contains("latest.json: FAILED"))
    }

    @Test func verifyWithoutVersionsFailsAndUnknownBundleIsAnError() throws {
        let models = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: models) }
        let empty = try CLIRunner.run(["verify", "--models", models.path])
        #expect(empty.status == 1)
        #expect(empty.standardError.contains("no model versions"))
        let missing = try CLIRunner.run(["verify", "--models", models.path, "12"])
        #expect(missing.status == 1)
        #expect(missing.standardError.contains("no model version '12'"))
    }

    @Test func listShowsVersionsAndLatest() throws {
        let models = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: models) }
        try BundleFixture.publish(in: models, metrics: BundleFixture.metrics(userAccuracy: 0.91))
        try BundleFixture.publish(
            in: models, users: [17, 23, 31], seed: 2, metrics: BundleFixture.metrics(userAccuracy: 0.93))
        _ = try ModelRepository(directory: models).publish(version: 1, gate: PublishGate())
        let table = try CLIRunner.run(["list", "--models", models.path])
        #expect(table.status == 0)
        let lines = table.standardOutput.split(separator: "\n").map(String.init)
        #expect(lines.count == 3)
        #expect(lines[0].hasPrefix("VERSION"))
        #expect(lines[1].contains("0.9100") && lines[1].contains("ok") && lines[1].hasSuffix("<- latest"))
        #expect(lines[2].contains("0.9300") && lines[2].contains(" 3 ") && !lines[2].contains("latest"))
        let json = try CLIRunner.run(["list", "--models", models.path, "--json"])
        let entries = try #require(
            try JSONSerialization.jsonObject(with: Data(json.standardOutput.utf8)) as? [[String: Any]])
        #expect(entries.map { $0["version"] as? Int } == [1, 2])
        #expect(entries.map { $0["isLatest"] as? Bool } == [true, false])
        #expect(entries[1]["users"] as? Int == 3)
        #expect(entries[1]["userAccuracy"] as? Double == 0.93)
    }

    @Test func publishGateRefusesWithExitTwoAndOneLine() throws {
        let models = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: models) }
        try BundleFixture.publish(in: models, metrics: BundleFixture.metrics(recalls: ["17": 0.9, "23": 0.9]))
        try BundleFixture.publish(
            in: models, seed: 2, metrics: BundleFixture.metrics(userAccuracy: 0.8, recalls: ["17": 0.5, "23": 0.9]))
        let first = try CLIRunner.run(["publish", models.appendingPathComponent("1").path])
        #expect(first.status == 0, "\(first.standardError)")
        #expect(first.standardOutput.contains("published version 1"))
        let pointerBefore = try Data(contentsOf: models.appendingPathComponent("latest.json"))

        let low = try CLIRunner.run([
            "publish", "2", "--models", models.path, "--min-accuracy", "0.9", "--allow-regression", "0.5",
        ])
        #expect(low.status == 2)
        #expect(
            low.standardError == "refused: refused to publish version 2: user_accuracy 0.8 is below --min-accuracy 0.9"
                + " (--force overrides the metric gate)\n")
        let worse = try CLIRunner.run(["publish", models.appendingPathComponent("2").path])
        #expect(worse.status == 2)
        #expect(worse.standardError.contains("mean recall on the 2 users both versions know fell from 0.9"))
        #expect(worse.standardError.split(separator: "\n").count == 1)
        #expect(try Data(contentsOf: models.appendingPathComponent("latest.json")) == pointerBefore)

        let forced = try CLIRunner.run([
            "publish", models.appendingPathComponent("2").path, "--force",
            "--base-url", "https://cdn.example.com/models",
        ])
        #expect(forced.status == 0)
        #expect(forced.standardError.contains("WARNING: --force: published DESPITE the gate: mean recall"))
        let pointer = try #require(
            try JSONSerialization.jsonObject(
                with: Data(contentsOf: models.appendingPathComponent("latest.json"))) as? [String: Any])
        #expect(pointer["version"] as? Int == 2)
        #expect(pointer["url"] as? String == "https://cdn.example.com/models/2/FaceClassifier.mlmodel")

        // verify checks what the app will download: this version's Core ML file, nothing else.
        let pointerURL = models.appendingPathComponent("latest.json")
        let published = try Data(contentsOf: pointerURL)
        for url in ["../../../etc/passwd", "1/FaceClassifier.mlmodel", "https://cdn.example.com/models/2/weights.h5"] {
            var edited = pointer
            edited["url"] = url
            try JSONSerialization.data(withJSONObject: edited).write(to: pointerURL)
            let verify = try CLIRunner.run(["verify", "--models", models.path])
            #expect(verify.status == 1, "\(url)")
            #expect(verify.standardOutput.contains("its url"), "\(verify.standardOutput)")
        }
        try published.write(to: pointerURL)
        #expect(try CLIRunner.run(["verify", "--models", models.path]).status == 0)

        // A new CDN for the published version re-points it; the same URL again changes nothing.
        for _ in 0..<2 {
            let moved = try CLIRunner.run([
                "publish", "2", "--models", models.path, "--base-url", "https://cdn2.example.com/m/",
            ])
            #expect(moved.status == 0, "\(moved.standardError)")
        }
        let movedPointer = try #require(try ModelRepository(directory: models).latestPointer())
        #expect(movedPointer.version == 2 && movedPointer.url == "https://cdn2.example.com/m/2/FaceClassifier.mlmodel")
        #expect(try CLIRunner.run(["verify", "--models", models.path]).status == 0)

        let rolled = try CLIRunner.run(["rollback", "1", "--models", models.path])
        #expect(rolled.status == 0)
        #expect(rolled.standardOutput.contains("latest.json -> version 1 (was 2)"))
        #expect(try ModelRepository(directory: models).latestPointer()?.version == 1)
        let forward = try CLIRunner.run(["rollback", "2", "--models", models.path])
        #expect(forward.status == 1)
        #expect(forward.standardError.contains("not earlier"))
    }

    @Test func publishRefusesATamperedBundleEvenWithForce() throws {
        let models = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: models) }
        let url = try BundleFixture.publish(in: models)
        try BundleFixture.flipByte(in: url.appendingPathComponent("FaceClassifier.mlmodel"), at: 5)
        let result = try CLIRunner.run(["publish", url.path, "--force"])
        #expect(result.status == 2)
        #expect(result.standardError.contains("fails verification"))
        #expect(result.standardError.contains("FaceClassifier.mlmodel"))
        #expect(!FileManager.default.fileExists(atPath: models.appendingPathComponent("latest.json").path))
    }

    @Test func usageErrorsExit64() throws {
        #expect(try CLIRunner.run(["publish"]).status == 64)
        #expect(try CLIRunner.run(["publish", "1", "--min-accuracy", "high"]).status == 64)
        #expect(try CLIRunner.run(["publish", "1", "--max-false-accept", "3"]).status == 64)
        #expect(try CLIRunner.run(["rollback"]).status == 64)
        // A number that is no valid version is looked up in --models, not as a folder of the working directory.
        let models = BundleFixture.temporaryDirectory()
        for reference in ["0", "007", "99999999999999999999"] {
            let missing = try CLIRunner.run([
                "export", reference, "--models", models.path, "--format", "onnx", "--out", "x",
            ])
            #expect(missing.status == 1)
            #expect(missing.standardError.contains("no model version '\(reference)' in \(models.path)"))
        }
        for url in [
            "javascript:alert(1)//", " ", "ftp://host/models", "https://", "models/../..",
            "https://cdn.example.com/m?sig=1",
            "https://user:secret@cdn.example.com/m", "https://cdn.example.com/m#x", "https://cdn.example.com/\"m\"",
            "https://cdn.example.com/<script>", "https://cdn.example.com:99999/m", "https://cdn.example.com/m/../..",
        ] {
            let refused = try CLIRunner.run(["publish", "1", "--base-url", url])
            #expect(refused.status == 64, "\(url)")
            #expect(try CLIRunner.run(["rollback", "1", "--base-url", url]).status == 64, "\(url)")
        }
        #expect(try CLIRunner.run(["list", "extra"]).status == 64)
        // The test-only writer is hidden unless tests switch it on.
        #expect(try CLIRunner.run(["_test-write-bundle"]).status == 64)
        #expect(!(try CLIRunner.run(["--help"]).standardOutput.contains("_test")))
    }
}
