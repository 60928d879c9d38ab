import Foundation
import Testing

@testable import FaceTrain
@testable import FaceTrainEngine

@Suite("Data folder loading and validation")
struct DataFolderTests {
    let options = DataLoadOptions(inputWidth: 24, inputHeight: 24, channels: 3)

    @Test func loadsAValidFolderWithNumericOrder() throws {
        let folder = try TemporaryDataFolder.valid(users: 0)
        for id in [10, 3, 2_000, 9] { try folder.addImages(String(id), count: 5, seed: id * 100) }
        try folder.write(
            "users.json", Data(#"[{"id": 10, "name": "Ada", "position": "CTO"}, {"id": 3, "name": "Bo"}]"#.utf8))
        try folder.write("9/user.json", Data(#"{"name": "Cy", "position": "Intern"}"#.utf8))
        let dataset = try FaceDataset.load(from: folder.root, options: options)
        #expect(dataset.labels == [1, 2, 3, 9, 10, 2_000])
        #expect(dataset.users.map(\.id) == [3, 9, 10, 2_000])
        #expect(dataset.users.map(\.name) == ["Bo", "Cy", "Ada", "user 2000"])
        #expect(dataset.users[2].position == "CTO")
        #expect(dataset.samples.count == 6 + 6 + 4 * 5)
        #expect(dataset.samples.allSatisfy { $0.image.width == 24 && $0.image.height == 24 && $0.image.channels == 3 })
        #expect(dataset.report.warnings.contains { $0.kind == "missing_metadata" && $0.path.hasSuffix("/2000") })
    }

    @Test func checkpointKeyFollowsDataSettingsAndArchitecture() throws {
        let folder = try TemporaryDataFolder.valid()
        let dataset = try FaceDataset.load(from: folder.root, options: options)
        let configuration = FitConfiguration()
        let labels = dataset.labels.map(String.init)
        let definition = ModelDefinition.referenceSmall(classLabels: labels, inputSize: 24)
        let key = FitSession.key(dataset: dataset, configuration: configuration, definition: definition)
        #expect(key == FitSession.key(dataset: dataset, configuration: configuration, definition: definition))
        var otherSettings = configuration
        otherSettings.seed = 2
        #expect(key != FitSession.key(dataset: dataset, configuration: otherSettings, definition: definition))
        // An older ref-small (no batch norm on the embedding) must not resume into this one.
        var older = definition
        let neck = try #require(definition.layers.firstIndex(of: .globalAveragePool)) + 1
        #expect(older.layers.remove(at: neck) == .batchNorm2D(channels: 128, epsilon: 1e-5, momentum: 0.1))
        #expect(key != FitSession.key(dataset: dataset, configuration: configuration, definition: older))
    }

    @Test func ignoresHiddenFilesAndReportsOtherFiles() throws {
        let folder = try TemporaryDataFolder.valid()
        try folder.write(".DS_Store", Data([0, 1, 2]))
        try folder.write("3/.DS_Store", Data([0, 1, 2]))
        try folder.addImages(".git", count: 1, seed: 77)
        try folder.write("3/notes.txt", Data("hello".utf8))
        try folder.write("README.md", Data("hello".utf8))
        let dataset = try FaceDataset.load(from: folder.root, options: options)
        #expect(dataset.labels == [1, 2, 3, 4, 5])
        let kinds = dataset.report.warnings.map { "\($0.kind) \(URL(fileURLWithPath: $0.path).lastPathComponent)" }
        #expect(kinds.contains("not_an_image notes.txt"))
        #expect(kinds.contains("ignored_file README.md"))
        #expect(!kinds.contains { $0.contains("DS_Store") || $0.contains(".git") })
    }

    @Test(arguments: [1, 2]) func missingNegativeClassIsAProblemThatSaysWhatBelongsThere(label: Int) throws {
        let folder = try TemporaryDataFolder.valid()
        try FileManager.default.removeItem(at: folder.root.appendingPathComponent(String(label)))
        let report = FaceDataset.check(folder.root, options: options)
        let problem = try #require(report.problems.first { $0.kind == "missing_negative_class" })
        #expect(problem.message.contains(label == 1 ? "not a face" : "unknown person"))
        #expect(throws: DataFolderError.self) { try FaceDataset.load(from: folder.root, options: options) }
    }

    @Test func reportsEveryProblemAtOnce() throws {
        let folder = try TemporaryDataFolder.valid()
        let duplicate = TemporaryDataFolder.pgm(seed: 1_000)  // the first crop of user 3
        try folder.write("4/copy.pgm", duplicate)
        try folder.addImages("6", count: 2, seed: 900)
        try FileManager.default.createDirectory(
            at: folder.root.appendingPathComponent("7"), withIntermediateDirectories: true)
        try folder.addImages("alice", count: 5, seed: 800)
        try folder.write("5/broken.jpg", Data("this is text".utf8))
        try folder.write("5/empty.png", Data())
        try folder.write("users.json", Data(#"[{"id": 1, "name": "First user"}]"#.utf8))
        let report = FaceDataset.check(folder.root, options: options)
        let kinds = report.problems.map(\.kind).sorted()
        #expect(
            kinds == [
                "duplicate_across_users", "empty_user", "folder_not_an_id", "reserved_id_in_metadata", "too_few_images",
                "unreadable_image", "unreadable_image",
            ])
        #expect(report.problems.first { $0.kind == "too_few_images" }?.path.hasSuffix("/6") == true)
        #expect(report.problems.first { $0.kind == "reserved_id_in_metadata" }?.message.contains("database") == true)
        let duplicateMessage = try #require(report.problems.first { $0.kind == "duplicate_across_users" }?.message)
        #expect(duplicateMessage.contains("3/img0.pgm") && duplicateMessage.contains("4/copy.pgm"))
    }

    @Test func invalidMetadataNamesTheFile() throws {
        let folder = try TemporaryDataFolder.valid()
        try folder.write("users.json", Data(#"[{"id": 3, "name": "Bo"},"#.utf8))
        try folder.write("4/user.json", Data(#"{"name": 12}"#.utf8))
        let report = FaceDataset.check(folder.root, options: options)
        let paths = report.problems.filter { $0.kind == "invalid_metadata" }.map {
            URL(fileURLWithPath: $0.path).lastPathComponent
        }.sorted()
        #expect(paths == ["user.json", "users.json"])
    }

    @Test func controlCharactersInNamesAreProblems() throws {
        let folder = try TemporaryDataFolder.valid()
        try folder.write(
            "users.json",
            Data(
                #"[{"id": 3, "name": "Bo\u001b[31m"}, {"id": 4, "name": "Mohammad\u200cReza"}, {"id": 6, "name": "Eve\u202eevA"}]"#
                    .utf8))
        try folder.write("5/user.json", Data(#"{"name": "Cy", "position": "line\nbreak"}"#.utf8))
        let report = FaceDataset.check(folder.root, options: options)
        let messages = report.problems.filter { $0.kind == "invalid_metadata" }.map(\.message)
        #expect(messages.count == 3)
        #expect(messages.contains { $0.contains("U+202E") })
        #expect(messages.contains { $0.contains("users.json entry 1") && $0.contains("U+001B") })
        #expect(messages.contains { $0.contains("position of user 5") && $0.contains("U+000A") })
        // A zero-width non-joiner is ordinary spelling (Persian), not a hidden control.
        #expect(!messages.contains { $0.contains("U+200C") })
    }

    /// A name whose bytes are not UTF-8 cannot round-trip through a Swift string: it is named as
    /// such instead of "no such file", and --skip-bad turns it into a warning.
    @Test func fileNamesThatAreNotUTF8AreNamed() throws {
        let folder = try TemporaryDataFolder.valid()
        let bytes = Array(folder.root.appendingPathComponent("3/ok").path.utf8) + [0xFF] + Array(".pgm".utf8) + [0]
        let image = TemporaryDataFolder.pgm(seed: 4_242)
        let descriptor = bytes.withUnsafeBufferPointer {
            $0.withMemoryRebound(to: CChar.self) { open($0.baseAddress!, O_WRONLY | O_CREAT, 0o644) }
        }
        #expect(descriptor >= 0)
        _ = image.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        close(descriptor)
        let problems = FaceDataset.check(folder.root, options: options).problems
        #expect(problems.count == 1)
        #expect(problems.first?.message.contains("not valid UTF-8") == true, "\(problems)")
        var lenient = options
        lenient.skipBad = true
        let dataset = try FaceDataset.load(from: folder.root, options: lenient)
        #expect(dataset.report.warnings.contains { $0.kind == "skipped_image" && $0.message.contains("UTF-8") })
    }

    @Test func onlyNegativeClassesIsAProblem() throws {
        let folder = try TemporaryDataFolder.valid(users: 0)
        let report = FaceDataset.check(folder.root, options: options)
        #expect(report.problems.map(\.kind) == ["no_users"])
        #expect(report.problems.first?.message.contains("one folder of face crops per registered person") == true)
        var evaluation = options
        evaluation.forEvaluation = true
        #expect(FaceDataset.check(folder.root, options: evaluation).problems.isEmpty)
        let file = folder.root.appendingPathComponent("1/img0.pgm")
        #expect(FaceDataset.check(file, options: options).problems.map(\.kind) == ["not_a_folder"])
        #expect(
            FaceDataset.check(file.appendingPathExtension("gone"), options: options).problems.map(\.kind) == [
                "missing_folder"
            ])
    }

    @Test func skipBadTurnsUnreadableImagesIntoNamedWarnings() throws {
        let folder = try TemporaryDataFolder.valid()
        try folder.write("3/broken.jpg", Data([0xFF, 0xD8, 0xFF, 0xE0, 0, 16]))
        #expect(throws: DataFolderError.self) { try FaceDataset.load(from: folder.root, options: options) }
        var lenient = options
        lenient.skipBad = true
        let dataset = try FaceDataset.load(from: folder.root, options: lenient)
        #expect(dataset.report.warnings.contains { $0.kind == "skipped_image" && $0.path.hasSuffix("3/broken.jpg") })
        #expect(dataset.samples.count == 6 + 6 + 3 * 6)
    }

    @Test func duplicatesWithinOneClassAreUsedOnceAndReported() throws {
        let folder = try TemporaryDataFolder.valid()
        try folder.write("3/again.pgm", TemporaryDataFolder.pgm(seed: 1_001))
        let dataset = try FaceDataset.load(from: folder.root, options: options)
        #expect(dataset.samples.filter { $0.label == 3 }.count == 6)
        #expect(dataset.report.warnings.contains { $0.kind == "duplicate_image" })
    }

    /// Evaluation scores every file, copies included: a scorer checks that each one was predicted.
    @Test func evaluationKeepsDuplicatesWithinOneClass() throws {
        let folder = try TemporaryDataFolder.valid()
        try folder.write("3/again.pgm", TemporaryDataFolder.pgm(seed: 1_001))
        var evaluation = options
        evaluation.forEvaluation = true
        let dataset = try FaceDataset.load(from: folder.root, options: evaluation)
        #expect(dataset.samples.filter { $0.label == 3 }.count == 7)
        #expect(dataset.samples.contains { $0.path.hasSuffix("3/again.pgm") })
        #expect(dataset.report.warnings.contains { $0.kind == "duplicate_image" && $0.message.contains("scored") })
    }

    @Test func splitIsStableWhenCropsAndUsersAreAdded() throws {
        let folder = try TemporaryDataFolder.valid(users: 4, perUser: 25)
        let before = try FaceDataset.load(from: folder.root, options: options).split(holdout: 0.2)
        try folder.addImages("3", count: 10, seed: 50_000, prefix: "new")
        try folder.addImages("40", count: 25, seed: 60_000)
        let after = try FaceDataset.load(from: folder.root, options: options).split(holdout: 0.2)
        let afterHeldOut = Set(after.heldOut.map(\.path))
        let afterTraining = Set(after.training.map(\.path))
        #expect(!before.heldOut.isEmpty)
        #expect(before.heldOut.allSatisfy { afterHeldOut.contains($0.path) })
        #expect(before.training.allSatisfy { afterTraining.contains($0.path) })
        #expect(after.heldOut.contains { $0.label == 40 })
        let share = Double(after.heldOut.count) / Double(after.heldOut.count + after.training.count)
        #expect(share > 0.1 && share < 0.3)
    }

    @Test func everyClassWithThreeCropsKeepsAHeldOutCrop() throws {
        let folder = try TemporaryDataFolder.valid(users: 30, perUser: 3)
        let split = try FaceDataset.load(
            from: folder.root, options: DataLoadOptions(inputWidth: 24, inputHeight: 24, minimumImages: 3)
        ).split(holdout: 0.2)
        let labelsWithHeldOut = Set(split.heldOut.map(\.label))
        #expect(labelsWithHeldOut == Set([1, 2] + (3..<33)))
    }

    @Test func missingFolderIsAClearProblem() {
        let report = FaceDataset.check(URL(fileURLWithPath: "/nonexistent/users"), options: options)
        #expect(report.problems.map(\.kind) == ["missing_folder"])
    }
}
