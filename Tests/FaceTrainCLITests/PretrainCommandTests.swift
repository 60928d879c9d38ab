import FaceTrainTestSupport
import Foundation
import Testing

@testable import FaceTrain
@testable import FaceTrainBenchmark
@testable import FaceTrainEngine
@testable import FaceTrainSynthesis

/// `pretrain` and `fit --base` end to end through the built binary, on synthetic identities.
@Suite("pretrain and fit from a base", .serialized)
struct PretrainCommandTests {
    /// A corpus of `identities` synthetic people x `crops` crops, laid out as <identity>/<crop>.
    static func syntheticCorpus(identities: Int = 200, crops: Int = 6) throws -> URL {
        let root = BundleFixture.temporaryDirectory().appendingPathComponent("corpus")
        let synth = try CLIRunner.run([
            "synth", "--out", root.path, "--users", String(identities), "--per-user", String(crops), "--seed", "5",
            "--negatives", "1", "--unknown-identities", "1", "--per-unknown", "1",
        ])
        try #require(synth.status == 0, "\(synth.standardError)")
        // Classes 1 and 2 and the metadata belong to a user data folder, not to a corpus of identities.
        for name in ["1", "2", "users.json"] {
            try FileManager.default.removeItem(at: root.appendingPathComponent(name))
        }
        return root
    }

    /// Pretrains a small base at `base` from a fresh 40-identity synthetic corpus (removed after),
    /// its crop cache beside the base.
    /// `named: false` leaves `--name` out, so the base takes pretrain's default name.
    static func tinyBase(at base: URL, epochs: Int, extra: [String] = [], named: Bool = true) throws -> CLIRunner.Result
    {
        let corpus = try syntheticCorpus(identities: 40, crops: 4)
        defer { try? FileManager.default.removeItem(at: corpus.deletingLastPathComponent()) }
        return try CLIRunner.run(
            [
                "pretrain", "--data", corpus.path, "--out", base.path, "--epochs", String(epochs),
                "--cache", base.deletingLastPathComponent().appendingPathComponent("cache").path,
            ] + extra
                + (named ? small : Array(small.dropLast(2))))
    }

    static let small = ["--input-size", "32", "--width", "8", "--batch-size", "32", "--name", "test-base"]

    static func epochs(_ output: String) -> [[String: Any]] {
        output.split(separator: "\n").compactMap {
            guard let object = try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any],
                object["event"] as? String == "epoch"
            else { return nil }
            return object
        }
    }

    @Test func pretrainingLowersTheLossRaisesVerificationAndWritesAVerifiedBase() throws {
        let corpus = try Self.syntheticCorpus()
        let root = corpus.deletingLastPathComponent()
        defer { try? FileManager.default.removeItem(at: root) }
        let base = root.appendingPathComponent("base")
        let cache = root.appendingPathComponent("cache")
        let run = try CLIRunner.run(
            ["pretrain", "--data", corpus.path, "--out", base.path, "--epochs", "10", "--cache", cache.path, "--json"]
                + Self.small)
        try #require(run.status == 0, "\(run.standardError)")
        let epochs = Self.epochs(run.standardOutput)
        try #require(epochs.count == 10)
        let losses = epochs.map { $0["loss"] as! Double }
        let verification = epochs.map { $0["verification_accuracy"] as! Double }
        #expect(losses.last! < losses.first! * 0.8, "loss \(losses)")
        #expect(verification.last! > verification.first! + 0.05, "verification \(verification)")
        #expect(verification.last! > 0.7, "verification \(verification)")

        let loaded = try BaseModel.load(from: base)
        #expect(loaded.manifest.name == "test-base")
        #expect(loaded.manifest.license.contains("non-commercial"))
        #expect(loaded.manifest.verification.roc.count == 10)
        #expect(loaded.manifest.data.identities + loaded.manifest.data.verificationIdentities == 200)

        // --remeasure measures the same weights again: the same numbers, the same weights and bank.
        let remeasured = root.appendingPathComponent("remeasured")
        let again0 = try CLIRunner.run(
            [
                "pretrain", "--data", corpus.path, "--out", remeasured.path, "--remeasure", base.path, "--cache",
                cache.path,
            ])
        #expect(again0.status == 0, "\(again0.standardError)")
        let reloaded = try BaseModel.load(from: remeasured)
        #expect(reloaded.manifest.verification == loaded.manifest.verification)
        #expect(reloaded.manifest.training.epochs == loaded.manifest.training.epochs)
        for file in ["weights.h5", "bank.h5"] {
            #expect(
                try Data(contentsOf: base.appendingPathComponent(file))
                    == Data(contentsOf: remeasured.appendingPathComponent(file)))
        }

        // A second run reuses the cache; a changed crop is decoded again, alone.
        let again = try CLIRunner.run(
            [
                "pretrain", "--data", corpus.path, "--out", root.appendingPathComponent("b2").path, "--epochs", "1",
                "--cache", cache.path,
            ] + Self.small)
        #expect(again.status == 0, "\(again.standardError)")
        #expect(again.standardOutput.contains("1200 crops reused, 0 decoded"), "\(again.standardOutput)")
        // New content under an old name (a grey PGM no other crop shares) is decoded; the rest is copied.
        let changed = corpus.appendingPathComponent("3/1.jpg")
        var pgm = Data("P5\n40 40\n255\n".utf8)
        pgm.append(contentsOf: (0..<1600).map { UInt8(($0 * 37) % 251) })
        try pgm.write(to: changed)
        let third = try CLIRunner.run(
            [
                "pretrain", "--data", corpus.path, "--out", root.appendingPathComponent("b3").path, "--epochs", "1",
                "--cache", cache.path,
            ] + Self.small)
        #expect(third.status == 0, "\(third.standardError)")
        #expect(third.standardOutput.contains("1199 crops reused, 1 decoded"), "\(third.standardOutput)")
        #expect(third.standardError.contains("rebuilt: files of the corpus changed"))

        // A damaged cache is rebuilt from scratch, and says so.
        let cacheFile = try #require(
            try FileManager.default.contentsOfDirectory(atPath: cache.path).first { $0.hasSuffix(".cache") })
        try BundleFixture.flipByte(in: cache.appendingPathComponent(cacheFile), at: 50_000)
        let fourth = try CLIRunner.run(
            [
                "pretrain", "--data", corpus.path, "--out", root.appendingPathComponent("b4").path, "--epochs", "1",
                "--cache", cache.path,
            ] + Self.small)
        #expect(fourth.status == 0, "\(fourth.standardError)")
        #expect(fourth.standardError.contains("is damaged (its checksum does not match)"), "\(fourth.standardError)")
        #expect(fourth.standardOutput.contains("0 crops reused, 1200 decoded"))
    }

    /// A teacher descriptor file for a synthetic corpus: per identity a random direction, per crop
    /// that direction plus noise, all shifted by one common offset (as dlib's lie in a narrow cone).
    static func writeTeacher(for corpus: URL, to file: URL, features: Int = 16) throws {
        var generator = SplitMix64(seed: 99)
        func normal() -> Float {
            let u = Float(Double(generator.next() % 1_000_000 + 1) / 1_000_001)
            let v = Float(Double(generator.next() % 1_000_000) / 1_000_000)
            return (-2 * log(u)).squareRoot() * cos(2 * .pi * v)
        }
        let offset = (0..<features).map { _ in 3 * normal() }
        var paths: [String] = []
        var scalars: [Float] = []
        let files = FileManager.default
        for identity in try files.contentsOfDirectory(atPath: corpus.path).sorted() {
            let direction = (0..<features).map { _ in normal() }
            for crop in try files.contentsOfDirectory(atPath: corpus.appendingPathComponent(identity).path).sorted() {
                paths.append("images/\(identity)/\(crop)")
                scalars += (0..<features).map { offset[$0] + direction[$0] + 0.3 * normal() }
            }
        }
        try HDF5File.withLibrary {
            let h5 = try HDF5File.create(at: file.path)
            try h5.root.writeFixedStringDataset("files", paths)
            try h5.root.writeDataset("descriptors", shape: [paths.count, features], scalars: scalars)
            try h5.close()
        }
    }

    /// Without a teacher, and distilling one by relations or by features (whose projection and
    /// its optimizer state must be in the checkpoint too).
    @Test(arguments: ["none", "relational", "feature"])
    func resumeAfterSIGKILLGivesTheSameWeights(teacherLoss: String) throws {
        let corpus = try Self.syntheticCorpus(identities: 60, crops: 5)
        let root = corpus.deletingLastPathComponent()
        defer { try? FileManager.default.removeItem(at: root) }
        let cache = root.appendingPathComponent("cache").path
        var options = ["--epochs", "5", "--cache", cache, "--json"] + Self.small
        if teacherLoss != "none" {
            let teacher = root.appendingPathComponent("teacher.h5")
            try Self.writeTeacher(for: corpus, to: teacher)
            options += ["--teacher", teacher.path, "--teacher-loss", teacherLoss, "--teacher-weight", "5"]
        }
        let straight = root.appendingPathComponent("straight/base")
        let uninterrupted = try CLIRunner.run(["pretrain", "--data", corpus.path, "--out", straight.path] + options)
        try #require(uninterrupted.status == 0, "\(uninterrupted.standardError)")

        let resumed = root.appendingPathComponent("resumed/base")
        let arguments = ["pretrain", "--data", corpus.path, "--out", resumed.path] + options
        let background = try CLIRunner.Background(arguments, environment: [:])
        let deadline = Date().addingTimeInterval(300)
        while !background.standardOutput.contains("\"epoch\":2,") && background.process.isRunning && Date() < deadline {
            Thread.sleep(forTimeInterval: 0.02)
        }
        kill(background.process.processIdentifier, SIGKILL)
        background.process.waitUntilExit()
        #expect(!FileManager.default.fileExists(atPath: resumed.path))
        let finish = try CLIRunner.run(arguments + ["--resume"])
        try #require(finish.status == 0, "\(finish.standardError)")
        #expect(Self.epochs(finish.standardOutput).first?["epoch"] as? Int ?? 0 >= 3)
        for file in ["weights.h5", "bank.h5"] {
            #expect(
                try Data(contentsOf: straight.appendingPathComponent(file))
                    == Data(contentsOf: resumed.appendingPathComponent(file)), "\(file) differs after resuming")
        }
        let losses = Self.epochs(uninterrupted.standardOutput).map { $0["loss"] as! Double }
        #expect(losses.last! < losses.first!, "loss \(losses)")
        let recipe = try BaseModel.load(from: straight).manifest.recipe
        #expect(recipe.teacherLoss?.rawValue == (teacherLoss == "none" ? nil : teacherLoss))
        #expect(recipe.teacherWeight == (teacherLoss == "none" ? 0 : 5))
    }

    @Test func unknownTeacherLossIsAUsageError() throws {
        let run = try CLIRunner.run([
            "pretrain", "--data", "/nonexistent", "--out", "/tmp/x", "--teacher", "/tmp/t.h5", "--teacher-loss", "mse",
        ])
        #expect(run.status == 64)
        #expect(
            run.standardError.contains("--teacher-loss mse is not known; use relational or feature"),
            "\(run.standardError)")
    }

    /// Each number of the recipe outside its range: usage errors (64) that name the range.
    @Test(arguments: [
        ("greyscale", ["1.5", "-0.1", "nan"], "--greyscale must be a share in 0...1"),
        ("min-area", ["0.05", "1.5", "nan"], "--min-area must be a share in 0.1...1"),
        ("centre-crop", ["0.3", "1.2", "nan"], "--centre-crop must be a share in 0.5...1"),
        ("weight-decay", ["1", "-0.01", "nan"], "--weight-decay must be a number in 0..<1"),
    ])
    func recipeNumbersOutsideTheirRangeAreUsageErrors(option: String, values: [String], message: String) throws {
        for value in values {
            let run = try CLIRunner.run(["pretrain", "--data", "/nonexistent", "--out", "/tmp/x", "--" + option, value])
            #expect(run.status == 64, "--\(option) \(value)")
            #expect(run.standardError.contains(message), "\(run.standardError)")
        }
    }

    /// `--centre-crop`: the base's embeddings see the centre of each crop, and so do `fit`'s classifier
    /// and its exports (the crop is part of the input); `--remeasure` gives an existing base a crop.
    @Test func aCentreCroppedBaseCarriesItsCropIntoFitsAndExports() throws {
        let data = try FitCommandTests.syntheticData()
        let root = data.deletingLastPathComponent()
        defer { try? FileManager.default.removeItem(at: root) }
        let base = root.appendingPathComponent("base")
        let corpus = try Self.syntheticCorpus(identities: 40, crops: 4)
        let cache = root.appendingPathComponent("cache")
        let teacher = root.appendingPathComponent("teacher.h5")
        try Self.writeTeacher(for: corpus, to: teacher)
        let made = try CLIRunner.run(
            [
                "pretrain", "--data", corpus.path, "--out", base.path, "--epochs", "2", "--cache", cache.path,
                "--centre-crop", "0.8", "--min-area", "0.6", "--teacher", teacher.path,
            ] + Self.small)
        try #require(made.status == 0, "\(made.standardError)")
        let loaded = try BaseModel.load(from: base)
        // 32-px network input, 0.8 of the side: 40-px crops, 4 pixels cut from every edge.
        #expect(loaded.manifest.recipe.centreCrop == 0.8 && loaded.manifest.formatVersion == 2)
        #expect(loaded.manifest.recipe.augmentation.minimumArea == 0.6)
        let input = loaded.extractor.definition.input
        #expect(input.width == 40 && input.height == 40 && input.crop == 4 && input.networkWidth == 32)
        #expect(
            loaded.extractor.definition.layers
                == ModelDefinition.extractor(architecture: "ref-small", inputSize: 32, width: 8).layers)

        // The whole crop again, by --remeasure: the same weights, no crop, another name and version.
        let whole = root.appendingPathComponent("whole")
        let remeasured = try CLIRunner.run(
            [
                "pretrain", "--data", corpus.path, "--out", whole.path, "--remeasure", base.path, "--cache", cache.path,
                "--centre-crop", "1", "--name", "whole-crop", "--version", "2",
            ])
        try #require(remeasured.status == 0, "\(remeasured.standardError)")
        let wholeBase = try BaseModel.load(from: whole)
        #expect(wholeBase.manifest.recipe.centreCrop == nil && wholeBase.manifest.formatVersion == 1)
        #expect(wholeBase.extractor.definition.input.width == 32 && wholeBase.extractor.definition.input.crop == 0)
        #expect(wholeBase.manifest.name == "whole-crop" && wholeBase.manifest.version == 2)
        // The data it was trained on, teacher included, although --remeasure loads no teacher.
        #expect(wholeBase.manifest.data == loaded.manifest.data)
        #expect(wholeBase.extractor.weights == loaded.extractor.weights)
        #expect(wholeBase.manifest.verification != loaded.manifest.verification, "measured again, on whole crops")
        try? FileManager.default.removeItem(at: corpus.deletingLastPathComponent())

        let models = root.appendingPathComponent("models")
        for extra in [[], ["--fine-tune", "all", "--epochs", "1"]] {
            let fit = try CLIRunner.run(
                ["fit", "--data", data.path, "--out", models.path, "--base", base.path] + extra)
            try #require(fit.status == 0, "\(fit.standardError)")
        }
        for version in ["1", "2"] {
            let bundle = models.appendingPathComponent(version)
            let verified = try CLIRunner.run(["verify", bundle.path])
            #expect(verified.status == 0, "\(verified.standardOutput)\(verified.standardError)")
            let manifest = try JSONDecoder().decode(
                Manifest.self, from: Data(contentsOf: bundle.appendingPathComponent("manifest.json")))
            #expect(manifest.input == input && manifest.formatVersion == 2)
            let crop = data.appendingPathComponent("3").path
            let image = try #require(try FileManager.default.contentsOfDirectory(atPath: crop).sorted().first)
            let predicted = try CLIRunner.run(["predict", "--model", bundle.path, "--json", crop + "/" + image])
            #expect(predicted.status == 0, "\(predicted.standardError)")
        }
    }

    @Test func ctrlCStopsBetweenBatchesKeepsTheCheckpointAndWritesNoBase() throws {
        let corpus = try Self.syntheticCorpus(identities: 60, crops: 5)
        let root = corpus.deletingLastPathComponent()
        defer { try? FileManager.default.removeItem(at: root) }
        let base = root.appendingPathComponent("out/base")
        let arguments =
            [
                "pretrain", "--data", corpus.path, "--out", base.path, "--epochs", "40", "--json",
                "--cache", root.appendingPathComponent("cache").path,
            ] + Self.small
        let background = try CLIRunner.Background(arguments, environment: [:])
        let deadline = Date().addingTimeInterval(300)
        while !background.standardOutput.contains("\"epoch\":1,") && background.process.isRunning && Date() < deadline {
            Thread.sleep(forTimeInterval: 0.02)
        }
        kill(background.process.processIdentifier, SIGINT)
        background.process.waitUntilExit()
        #expect(background.process.terminationStatus == 1)
        #expect(background.standardError.contains("interrupted"), "\(background.standardError)")
        #expect(!FileManager.default.fileExists(atPath: base.path))
        let checkpoints = try FileManager.default.contentsOfDirectory(
            atPath: root.appendingPathComponent("out/.checkpoints").path)
        #expect(checkpoints.contains { $0.hasSuffix(".checkpoint") }, "\(checkpoints)")
        let finish = try CLIRunner.run(arguments + ["--resume"])
        #expect(finish.status == 0, "\(finish.standardError)")
        #expect(try BaseModel.load(from: base).manifest.training.epochs.count == 40)
    }

    @Test func badCorporaAreClearErrors() throws {
        let root = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        // One crop per identity: nothing to learn what keeps a person's crops together.
        let single = try Self.syntheticCorpus(identities: 30, crops: 1)
        let one = try CLIRunner.run(
            [
                "pretrain", "--data", single.path, "--out", root.appendingPathComponent("b").path,
                "--cache", root.appendingPathComponent("c").path,
            ] + Self.small)
        #expect(one.status == 1)
        #expect(one.standardError.contains("has two crops or more"), "\(one.standardError)")
        try? FileManager.default.removeItem(at: single.deletingLastPathComponent())

        // An unreadable crop is named, and nothing is trained unless --skip-bad.
        let corpus = try Self.syntheticCorpus(identities: 40, crops: 4)
        defer { try? FileManager.default.removeItem(at: corpus.deletingLastPathComponent()) }
        try Data("not a jpeg".utf8).write(to: corpus.appendingPathComponent("5/broken.jpg"))
        let bad = try CLIRunner.run(
            [
                "pretrain", "--data", corpus.path, "--out", root.appendingPathComponent("b").path, "--epochs", "1",
                "--cache", root.appendingPathComponent("c").path,
            ] + Self.small)
        #expect(bad.status == 1)
        #expect(bad.standardError.contains("5/broken.jpg"), "\(bad.standardError)")
        #expect(bad.standardError.contains("--skip-bad"))
        #expect(!FileManager.default.fileExists(atPath: root.appendingPathComponent("b").path))
        let skipped = try CLIRunner.run(
            [
                "pretrain", "--data", corpus.path, "--out", root.appendingPathComponent("b").path, "--epochs", "1",
                "--cache", root.appendingPathComponent("c").path, "--skip-bad",
            ] + Self.small)
        #expect(skipped.status == 0, "\(skipped.standardError)")
        #expect(skipped.standardError.contains("skipped:") && skipped.standardError.contains("broken.jpg"))

        // Splits that share people, and a base written into the corpus, are refused before anything is read.
        try Data(#"{"train": ["3", "4", "5", "6"], "val": ["6", "7"], "note": "text"}"#.utf8)
            .write(to: corpus.appendingPathComponent("splits.json"))
        let overlap = try CLIRunner.run(
            [
                "pretrain", "--data", corpus.path, "--out", root.appendingPathComponent("o").path, "--epochs", "1",
                "--cache", root.appendingPathComponent("c").path,
            ] + Self.small)
        #expect(overlap.status == 1)
        #expect(overlap.standardError.contains("in both \"train\" and \"val\" (first: 6)"), "\(overlap.standardError)")
        try Data(#"{"train": ["3", "4", "5", "6"], "val": ["7"]}"#.utf8).write(
            to: corpus.appendingPathComponent("splits.json"))
        let lonely = try CLIRunner.run(
            [
                "pretrain", "--data", corpus.path, "--out", root.appendingPathComponent("o").path, "--epochs", "1",
                "--cache", root.appendingPathComponent("c").path, "--skip-bad",
            ] + Self.small)
        #expect(lonely.status == 1)
        #expect(lonely.standardError.contains("1 verification identity"), "\(lonely.standardError)")
        let insideData = try CLIRunner.run(
            ["pretrain", "--data", corpus.path, "--out", corpus.appendingPathComponent("base").path] + Self.small)
        #expect(insideData.status == 64)
        #expect(insideData.standardError.contains("is inside --data"))

        let missing = try CLIRunner.run([
            "pretrain", "--data", "/nonexistent", "--out", root.appendingPathComponent("x").path,
        ])
        #expect(missing.status == 1)
        #expect(missing.standardError.contains("is not a folder"))
    }

    @Test func fitFromTheBuiltinBaseAndFromNoneBothWriteVerifiedBundles() throws {
        let data = try FitCommandTests.syntheticData()
        let root = data.deletingLastPathComponent()
        defer { try? FileManager.default.removeItem(at: root) }
        let models = root.appendingPathComponent("models")
        let fromBase = try CLIRunner.run(["fit", "--data", data.path, "--out", models.path])
        try #require(fromBase.status == 0, "\(fromBase.standardError)")
        let builtinName = try #require(try BaseModel.resolve("builtin")).manifest.name
        #expect(builtinName.hasPrefix("celeba-"))
        #expect(fromBase.standardOutput.contains("base: \(builtinName)"))
        #expect(fromBase.standardOutput.contains("leave_users_out"))
        let bundle = models.appendingPathComponent("1")
        #expect(try CLIRunner.run(["verify", bundle.path]).status == 0)
        let manifest =
            try JSONSerialization.jsonObject(with: Data(contentsOf: bundle.appendingPathComponent("manifest.json")))
            as! [String: Any]
        let training = manifest["training"] as! [String: Any]
        let base = try #require(training["base"] as? [String: Any])
        #expect(base["name"] as? String == builtinName)
        #expect((base["sha256"] as? String)?.count == 64)
        #expect(base["training"] as? String == "head")
        let metrics =
            try JSONSerialization.jsonObject(with: Data(contentsOf: bundle.appendingPathComponent("metrics.json")))
            as! [String: Any]
        let calibration = try #require(metrics["calibration"] as? [String: Double])
        #expect(Set(calibration.keys) == ["held_out_unknown", "leave_users_out", "bank", "pooled"])
        // The threshold holds the pooled strangers of this data and the bank to the target.
        #expect(calibration["pooled"]! <= 0.05 + 1e-9 && calibration["bank"]! <= 0.05 + 1e-9, "\(calibration)")

        // The second fit of the same data reuses every cached embedding.
        let again = try CLIRunner.run(["fit", "--data", data.path, "--out", models.path])
        #expect(again.status == 0, "\(again.standardError)")
        #expect(
            try Data(contentsOf: bundle.appendingPathComponent("weights.h5"))
                == Data(contentsOf: models.appendingPathComponent("2/weights.h5")))

        let scratch = try CLIRunner.run(["fit", "--data", data.path, "--out", models.path] + FitCommandTests.quickFit)
        #expect(scratch.status == 0, "\(scratch.standardError)")
        let scratchManifest =
            try JSONSerialization.jsonObject(
                with: Data(contentsOf: models.appendingPathComponent("3/manifest.json"))) as! [String: Any]
        #expect((scratchManifest["training"] as! [String: Any])["base"] == nil)

        // Options of the from-scratch network are refused with a base, saying why.
        let mixed = try CLIRunner.run(["fit", "--data", data.path, "--out", models.path, "--width", "32"])
        #expect(mixed.status == 64)
        #expect(mixed.standardError.contains("--width applies to --base none only"))
    }

    @Test func fineTuningEverythingFromTheBaseCalibratesOnLeftOutUsers() throws {
        let data = try FitCommandTests.syntheticData()
        let root = data.deletingLastPathComponent()
        defer { try? FileManager.default.removeItem(at: root) }
        let models = root.appendingPathComponent("models")
        let fit = try CLIRunner.run(
            ["fit", "--data", data.path, "--out", models.path, "--fine-tune", "all", "--epochs", "2", "--json"])
        try #require(fit.status == 0, "\(fit.standardError)")
        let bundle = models.appendingPathComponent("1")
        #expect(try CLIRunner.run(["verify", bundle.path]).status == 0)
        let manifest =
            try JSONSerialization.jsonObject(with: Data(contentsOf: bundle.appendingPathComponent("manifest.json")))
            as! [String: Any]
        let training = manifest["training"] as! [String: Any]
        #expect((training["base"] as? [String: Any])?["training"] as? String == "all")
        #expect(training["epochs"] as? Int == 2)
        let metrics =
            try JSONSerialization.jsonObject(with: Data(contentsOf: bundle.appendingPathComponent("metrics.json")))
            as! [String: Any]
        let calibration = try #require(metrics["calibration"] as? [String: Double])
        #expect(Set(calibration.keys) == ["held_out_unknown", "leave_users_out", "pooled"])
        #expect(calibration["pooled"]! <= 0.05 + 1e-9, "\(calibration)")
        // Its checkpoints are gone with the run; --width still belongs to --base none.
        let leftovers =
            (try? FileManager.default.contentsOfDirectory(atPath: models.appendingPathComponent(".checkpoints").path))
            ?? []
        #expect(leftovers.filter { $0.hasSuffix(".checkpoint") }.isEmpty, "\(leftovers)")
        let refused = try CLIRunner.run([
            "fit", "--data", data.path, "--out", models.path, "--fine-tune", "all", "--width", "8",
        ])
        #expect(refused.status == 64)
        #expect(refused.standardError.contains("--width applies to --base none only"))
    }

    @Test func aDamagedOrForeignBaseIsRefusedByName() throws {
        let data = try FitCommandTests.syntheticData()
        let root = data.deletingLastPathComponent()
        defer { try? FileManager.default.removeItem(at: root) }
        let base = root.appendingPathComponent("base")
        let made = try Self.tinyBase(at: base, epochs: 1)
        try #require(made.status == 0, "\(made.standardError)")
        // A base of another input size (32 px) fits data read at its own size.
        let fit = try CLIRunner.run([
            "fit", "--data", data.path, "--out", root.appendingPathComponent("m").path,
            "--base", base.path,
        ])
        #expect(fit.status == 0, "\(fit.standardError)")

        try BundleFixture.flipByte(in: base.appendingPathComponent("weights.h5"), at: 4000)
        let damaged = try CLIRunner.run([
            "fit", "--data", data.path, "--out", root.appendingPathComponent("m").path,
            "--base", base.path,
        ])
        #expect(damaged.status == 1)
        #expect(damaged.standardError.contains("weights.h5: its SHA-256 does not match"), "\(damaged.standardError)")
        #expect(Self.versions(root.appendingPathComponent("m")) == ["1"])

        // A manifest whose input crop leaves nothing of the image, its checksums made to match:
        // refused by name before any weight is read, nothing written.
        let foreign = root.appendingPathComponent("foreign")
        let remade = try Self.tinyBase(at: foreign, epochs: 1)
        try #require(remade.status == 0, "\(remade.standardError)")
        let manifestURL = foreign.appendingPathComponent("manifest.json")
        var manifest = try JSONDecoder().decode(BaseModel.Manifest.self, from: Data(contentsOf: manifestURL))
        manifest.definition.input.crop = 16
        let manifestData = try JSONText.data(manifest) + Data("\n".utf8)
        try manifestData.write(to: manifestURL)
        let sumsURL = foreign.appendingPathComponent("SHA256SUMS")
        let sums = try String(contentsOf: sumsURL, encoding: .utf8).split(separator: "\n").map { line in
            line.hasSuffix("  manifest.json") ? "\(SHA256.hash(manifestData))  manifest.json" : String(line)
        }
        try (sums.joined(separator: "\n") + "\n").write(to: sumsURL, atomically: true, encoding: .utf8)
        let cropped = try CLIRunner.run([
            "fit", "--data", data.path, "--out", root.appendingPathComponent("m").path,
            "--base", foreign.path,
        ])
        #expect(cropped.status == 1)
        #expect(cropped.standardError.contains("manifest.json"), "\(cropped.standardError)")
        #expect(
            cropped.standardError.contains("a crop of 16 pixels a side leaves nothing of 32x32"),
            "\(cropped.standardError)")
        #expect(Self.versions(root.appendingPathComponent("m")) == ["1"])

        let notABase = try CLIRunner.run([
            "fit", "--data", data.path, "--out", root.appendingPathComponent("m").path,
            "--base", data.path,
        ])
        #expect(notABase.status == 1)
        #expect(notABase.standardError.contains("has no manifest.json"), "\(notABase.standardError)")
    }

    /// The manifest's data fingerprint names the data, not the recipe: another recipe on the same
    /// corpus records the same fingerprint, another corpus a different one.
    @Test func theDataFingerprintNamesTheCorpusNotTheRecipe() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("fingerprint-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        func fingerprint(_ name: String, _ extra: [String]) throws -> String {
            let base = root.appendingPathComponent(name)
            let made = try Self.tinyBase(at: base, epochs: 1, extra: extra)
            try #require(made.status == 0, "\(made.standardError)")
            return try BaseModel.load(from: base).manifest.data.fingerprint
        }
        let plain = try fingerprint("plain", [])
        #expect(
            try fingerprint("grey", ["--greyscale", "0.5", "--learning-rate", "0.001", "--weight-decay", "0.05"])
                == plain)
        // The recipe records what was asked, so `make base` can train it again.
        let recipe = try BaseModel.load(from: root.appendingPathComponent("grey")).manifest.recipe
        #expect(recipe.weightDecay == 0.05 && recipe.learningRate == 0.001)
        #expect(try BaseModel.load(from: root.appendingPathComponent("plain")).manifest.recipe.weightDecay == 5e-4)
        let corpus = try Self.syntheticCorpus(identities: 60, crops: 4)
        defer { try? FileManager.default.removeItem(at: corpus.deletingLastPathComponent()) }
        let other = root.appendingPathComponent("other")
        let made = try CLIRunner.run(
            [
                "pretrain", "--data", corpus.path, "--out", other.path, "--epochs", "1",
                "--cache", root.appendingPathComponent("cache").path,
            ] + Self.small)
        try #require(made.status == 0, "\(made.standardError)")
        #expect(try BaseModel.load(from: other).manifest.data.fingerprint != plain)
    }

    /// A mobile-face base (depthwise blocks and residual adds) pretrains, records its architecture
    /// (and its recipe's greyscale share),
    /// and starts fits: head on the frozen extractor, the whole network fine-tuned, and a clash with
    /// another architecture refused; `--base none --architecture mobile-face` trains it from scratch.
    @Test func aMobileFaceBaseTrainsAndStartsFits() throws {
        let data = try FitCommandTests.syntheticData()
        let root = data.deletingLastPathComponent()
        defer { try? FileManager.default.removeItem(at: root) }
        let base = root.appendingPathComponent("base")
        let made = try Self.tinyBase(
            at: base, epochs: 2, extra: ["--architecture", "mobile-face", "--greyscale", "0.5", "--json"], named: false)
        try #require(made.status == 0, "\(made.standardError)")
        #expect(Self.epochs(made.standardOutput).count == 2)
        let loaded = try BaseModel.load(from: base)
        // Without --name, the base is named after its data folder, architecture and width.
        #expect(loaded.manifest.name == "corpus-mobile-face-8", "\(loaded.manifest.name)")
        #expect(loaded.manifest.architecture == "mobile-face" && loaded.manifest.recipe.architecture == "mobile-face")
        #expect(loaded.manifest.recipe.augmentation.greyscaleShare == 0.5)
        #expect(loaded.extractor.definition.layers.contains { $0.kind == .add })
        #expect(
            loaded.extractor.definition
                == ModelDefinition.extractor(architecture: "mobile-face", inputSize: 32, width: 8))

        let models = root.appendingPathComponent("models")
        let head = try CLIRunner.run(["fit", "--data", data.path, "--out", models.path, "--base", base.path])
        try #require(head.status == 0, "\(head.standardError)")
        let tuned = try CLIRunner.run(
            [
                "fit", "--data", data.path, "--out", models.path, "--base", base.path, "--fine-tune", "all", "--epochs",
                "1",
            ])
        try #require(tuned.status == 0, "\(tuned.standardError)")
        for version in ["1", "2"] {
            let bundle = models.appendingPathComponent(version)
            #expect(try CLIRunner.run(["verify", bundle.path]).status == 0)
            let manifest =
                try JSONSerialization.jsonObject(
                    with: Data(contentsOf: bundle.appendingPathComponent("manifest.json"))) as! [String: Any]
            #expect(manifest["formatVersion"] as? Int == 2)
            #expect((manifest["training"] as! [String: Any])["architecture"] as? String == "mobile-face")
            let layers = (manifest["architecture"] as! [[String: Any]]).map { $0["name"] as! String }
            #expect(
                Array(layers.prefix(loaded.extractor.definition.layers.count)) == loaded.extractor.definition.layerNames
            )
            // The app's file predicts what facetrain predicts (verify compared the exports' structure).
            let crop = data.appendingPathComponent("3").path
            let image = try #require(try FileManager.default.contentsOfDirectory(atPath: crop).sorted().first)
            let predicted = try CLIRunner.run(["predict", "--model", bundle.path, "--json", crop + "/" + image])
            #expect(predicted.status == 0, "\(predicted.standardError)")
        }

        let clash = try CLIRunner.run(
            ["fit", "--data", data.path, "--out", models.path, "--base", base.path, "--architecture", "ref-small"])
        #expect(clash.status == 64)
        #expect(clash.standardError.contains("--architecture ref-small clashes with --base"), "\(clash.standardError)")
        #expect(clash.standardError.contains("is mobile-face"))
        let scratch = try CLIRunner.run(
            ["fit", "--data", data.path, "--out", models.path, "--architecture", "mobile-face", "--epochs", "3"]
                + FitCommandTests.quickFit.filter { $0 != "30" && $0 != "--epochs" })
        try #require(scratch.status == 0, "\(scratch.standardError)")
        let scratchManifest =
            try JSONSerialization.jsonObject(
                with: Data(contentsOf: models.appendingPathComponent("3/manifest.json"))) as! [String: Any]
        #expect((scratchManifest["training"] as! [String: Any])["architecture"] as? String == "mobile-face")
        #expect(
            (scratchManifest["architecture"] as! [[String: Any]]).count == loaded.extractor.definition.layers.count + 2)
    }

    static func versions(_ models: URL) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: models.path)) ?? []).filter { Int($0) != nil }.sorted()
    }
}
