import CTurboJPEG
import Foundation
import Testing

@testable import FaceTrain
@testable import FaceTrainSynthesis

@Suite struct SyntheticFacesTests {
    typealias Support = SynthesisTestSupport

    @Test func sameArgumentsGiveByteIdenticalFilesAndAnotherSeedDoesNot() throws {
        let first = Support.temporaryPath()
        let second = Support.temporaryPath()
        let other = Support.temporaryPath()
        defer { [first, second, other].forEach(Support.removeTemporary) }
        _ = try SyntheticFaces.generate(configuration: Support.smallConfiguration(first))
        _ = try SyntheticFaces.generate(configuration: Support.smallConfiguration(second))
        _ = try SyntheticFaces.generate(configuration: Support.smallConfiguration(other, seed: 8))
        let firstFiles = try Support.files(in: first)
        let secondFiles = try Support.files(in: second)
        let otherFiles = try Support.files(in: other)
        #expect(firstFiles.count == 3 * 3 + 2 * 2 + 4 + 1)
        #expect(firstFiles == secondFiles)
        #expect(Set(otherFiles.keys) == Set(firstFiles.keys))
        let changed = firstFiles.keys.filter { otherFiles[$0] != firstFiles[$0] }
        #expect(changed.count == firstFiles.count, "every image and the user list should change with the seed")
    }

    @Test func parallelOutputEqualsSerialRenderingInAnyOrder() throws {
        let output = Support.temporaryPath()
        defer { Support.removeTemporary(output) }
        let configuration = Support.smallConfiguration(output)
        _ = try SyntheticFaces.generate(configuration: configuration)
        for sample in SyntheticFaces.samples(for: configuration).reversed() {
            let (pixels, quality) = SyntheticFaces.render(sample, seed: configuration.seed, size: 32)
            let expected = try JPEGWriter.encode(rgb: pixels, width: 32, height: 32, quality: quality)
            let written = try Data(contentsOf: output.appendingPathComponent(sample.relativePath))
            #expect(written == expected, "\(sample.relativePath) differs from a serial rendering")
        }
    }

    @Test func largerRunExtendsSmallerRunWithTheSameSeed() throws {
        let small = Support.temporaryPath()
        let large = Support.temporaryPath()
        defer { [small, large].forEach(Support.removeTemporary) }
        _ = try SyntheticFaces.generate(configuration: Support.smallConfiguration(small, users: 2, perUser: 2))
        _ = try SyntheticFaces.generate(configuration: Support.smallConfiguration(large, users: 3, perUser: 3))
        let smallFiles = try Support.files(in: small)
        let largeFiles = try Support.files(in: large)
        for (path, data) in smallFiles where path != SyntheticFaces.usersFileName {
            #expect(largeFiles[path] == data, "\(path) changed when more users or photos were requested")
        }
        let smallUsers = SyntheticFaces.users(count: 5, seed: 3)
        let largeUsers = SyntheticFaces.users(count: 40, seed: 3)
        #expect(Array(largeUsers.prefix(5)) == smallUsers)
    }

    @Test func layoutHasReservedClassesUserFoldersAndUserList() throws {
        let output = Support.temporaryPath()
        defer { Support.removeTemporary(output) }
        let configuration = SynthesisConfiguration(
            outputDirectory: output, userCount: 4, imagesPerUser: 3, seed: 1, imageSize: 32, nonFaceCount: 5,
            unknownIdentityCount: 3, imagesPerUnknownIdentity: 2)
        let summary = try SyntheticFaces.generate(configuration: configuration)

        let folders = try FileManager.default.contentsOfDirectory(atPath: output.path).sorted()
        #expect(folders == ["1", "2", "3", "4", "5", "6", "users.json"])
        func count(_ folder: String) throws -> Int {
            try FileManager.default.contentsOfDirectory(atPath: output.appendingPathComponent(folder).path)
                .filter { $0.hasSuffix(".jpg") }.count
        }
        #expect(try count("1") == 5)
        #expect(try count("2") == 6)
        for user in 3...6 { #expect(try count(String(user)) == 3) }
        #expect(summary.imageCounts == [1: 5, 2: 6, 3: 3, 4: 3, 5: 3, 6: 3])
        #expect(summary.imageCount == 23)
        #expect(summary.leftoverFiles.isEmpty)
        #expect(FileManager.default.fileExists(atPath: output.appendingPathComponent("2/3_2.jpg").path))

        let users = try JSONDecoder().decode(
            [SyntheticUser].self,
            from: Data(contentsOf: output.appendingPathComponent("users.json")))
        #expect(users.map(\.id) == [3, 4, 5, 6])
        #expect(users == summary.users)
        #expect(Set(users.map(\.name)).count == users.count)
        #expect(users.allSatisfy { $0.name.split(separator: " ").count == 2 && !$0.position.isEmpty })
    }

    @Test func namesStayDistinctBeyondTheNameLists() {
        let users = SyntheticFaces.users(count: 3000, seed: 5)
        #expect(Set(users.map(\.name)).count == 3000)
        #expect(Set(users.prefix(50).map(\.position)).count > 10, "positions should vary")
    }

    @Test func imagesAreValidJPEGsOfTheRequestedSize() throws {
        let output = Support.temporaryPath()
        defer { Support.removeTemporary(output) }
        var configuration = Support.smallConfiguration(output)
        configuration.imageSize = 48
        let summary = try SyntheticFaces.generate(configuration: configuration)
        var decoded = 0
        for sample in SyntheticFaces.samples(for: configuration) {
            let data = try Data(contentsOf: output.appendingPathComponent(sample.relativePath))
            let image = try #require(Support.decodeJPEG(data), "\(sample.relativePath) is not a JPEG")
            #expect(image.width == 48 && image.height == 48)
            #expect(image.subsampling == Int32(TJSAMP_420.rawValue))
            let mean = Double(image.rgb.reduce(0) { $0 + Int($1) }) / Double(image.rgb.count)
            #expect(mean > 2 && mean < 253, "\(sample.relativePath) is blank")
            decoded += 1
        }
        #expect(decoded == summary.imageCount)
    }

    @Test func imagesOfOnePersonAreCloserThanImagesOfDifferentPeople() {
        let configuration = SynthesisConfiguration(
            outputDirectory: URL(fileURLWithPath: "/unused"), userCount: 6, imagesPerUser: 6, seed: 11, imageSize: 32,
            nonFaceCount: 0, unknownIdentityCount: 0)
        let samples = SyntheticFaces.samples(for: configuration)
        let images = samples.map { SyntheticFaces.render($0, seed: configuration.seed, size: 32).rgb }
        var within: [Double] = []
        var between: [Double] = []
        for first in samples.indices {
            for second in samples.indices where second > first {
                let distance = Support.distance(images[first], images[second])
                if samples[first].label == samples[second].label {
                    within.append(distance)
                } else {
                    between.append(distance)
                }
            }
        }
        let meanWithin = within.reduce(0, +) / Double(within.count)
        let meanBetween = between.reduce(0, +) / Double(between.count)
        #expect(meanBetween > meanWithin * 1.08, "within \(meanWithin), between \(meanBetween)")
        // Nuisance must be strong: photos of one person are not near-copies of each other.
        #expect(meanWithin > 0.1, "photos of one person vary too little (\(meanWithin))")

        // Leave-one-out nearest centroid on raw pixels: clearly above chance (1/6), clearly below perfect.
        var correct = 0
        for (index, sample) in samples.enumerated() {
            var best = (distance: Double.infinity, label: 0)
            for label in Set(samples.map(\.label)) {
                let members = samples.indices.filter { samples[$0].label == label && $0 != index }
                var centroid = [Double](repeating: 0, count: images[index].count)
                for member in members {
                    for pixel in centroid.indices { centroid[pixel] += Double(images[member][pixel]) / 255 }
                }
                var distance = 0.0
                for pixel in centroid.indices {
                    let difference = centroid[pixel] / Double(members.count) - Double(images[index][pixel]) / 255
                    distance += difference * difference
                }
                if distance < best.distance { best = (distance, label) }
            }
            if best.label == sample.label { correct += 1 }
        }
        let accuracy = Double(correct) / Double(samples.count)
        #expect(accuracy > 0.25 && accuracy < 0.9, "nearest-centroid accuracy \(accuracy)")
    }

    @Test func nonFacesLookLessLikeTheAverageFaceThanFacesDo() {
        let configuration = SynthesisConfiguration(
            outputDirectory: URL(fileURLWithPath: "/unused"), userCount: 8, imagesPerUser: 4, seed: 3, imageSize: 32,
            nonFaceCount: 24, unknownIdentityCount: 6, imagesPerUnknownIdentity: 2)
        let samples = SyntheticFaces.samples(for: configuration)
        // Grey levels standardised per image: structure, not colour or exposure.
        let images = samples.map { sample -> [Double] in
            let rgb = SyntheticFaces.render(sample, seed: configuration.seed, size: 32).rgb
            let grey = stride(from: 0, to: rgb.count, by: 3).map {
                (Double(rgb[$0]) + Double(rgb[$0 + 1]) + Double(rgb[$0 + 2])) / 3
            }
            let mean = grey.reduce(0, +) / Double(grey.count)
            let deviation = (grey.map { ($0 - mean) * ($0 - mean) }.reduce(0, +) / Double(grey.count)).squareRoot()
            return grey.map { ($0 - mean) / max(deviation, 1e-6) }
        }
        let faces = samples.indices.filter { samples[$0].label >= SyntheticFaces.firstUserID }
        var averageFace = [Double](repeating: 0, count: 32 * 32)
        for index in faces { for pixel in averageFace.indices { averageFace[pixel] += images[index][pixel] } }
        averageFace = averageFace.map { $0 / Double(faces.count) }
        func correlation(_ label: Int) -> Double {
            let members = samples.indices.filter {
                samples[$0].label == label || (label == 3 && samples[$0].label >= 3)
            }
            let total = members.map { index in zip(images[index], averageFace).map { $0 * $1 }.reduce(0, +) }
            return total.reduce(0, +) / Double(members.count)
        }
        let userCorrelation = correlation(3)
        let strangerCorrelation = correlation(SyntheticFaces.unknownPersonLabel)
        let nonFaceCorrelation = correlation(SyntheticFaces.nonFaceLabel)
        #expect(nonFaceCorrelation < userCorrelation * 0.5, "non-faces \(nonFaceCorrelation), faces \(userCorrelation)")
        #expect(
            nonFaceCorrelation < strangerCorrelation * 0.5,
            "non-faces \(nonFaceCorrelation), strangers \(strangerCorrelation)")
    }

    @Test func refusesNonEmptyFolderUnlessReplacingAndKeepsForeignFiles() throws {
        let output = Support.temporaryPath()
        defer { Support.removeTemporary(output) }
        try FileManager.default.createDirectory(
            at: output.appendingPathComponent("3"), withIntermediateDirectories: true)
        let foreign = output.appendingPathComponent("3/mine.jpg")
        try Data("keep me".utf8).write(to: foreign)
        var configuration = Support.smallConfiguration(output)
        #expect(throws: SynthesisError.outputNotEmpty(path: output.standardizedFileURL.path)) {
            try SyntheticFaces.generate(configuration: configuration)
        }
        #expect(!FileManager.default.fileExists(atPath: output.appendingPathComponent("users.json").path))

        try Data("stale".utf8).write(to: output.appendingPathComponent("users.json"))
        configuration.replaceExisting = true
        let summary = try SyntheticFaces.generate(configuration: configuration)
        #expect(summary.leftoverFiles == ["3/mine.jpg"])
        #expect(try Data(contentsOf: foreign) == Data("keep me".utf8))
        let users = try JSONDecoder().decode(
            [SyntheticUser].self,
            from: Data(contentsOf: output.appendingPathComponent("users.json")))
        #expect(users.count == 3)

        let fresh = Support.temporaryPath()
        defer { Support.removeTemporary(fresh) }
        _ = try SyntheticFaces.generate(configuration: Support.smallConfiguration(fresh))
        var replaced = try Support.files(in: output)
        replaced["3/mine.jpg"] = nil
        #expect(replaced == (try Support.files(in: fresh)), "replacing must give the same files as a fresh run")
    }

    @Test func newFolderAppearsWholeWithParentsAndNoStagingFolderRemains() throws {
        let parent = Support.temporaryPath()
        defer { Support.removeTemporary(parent) }
        let output = parent.appendingPathComponent("nested/demo")
        _ = try SyntheticFaces.generate(configuration: Support.smallConfiguration(output))
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: output.deletingLastPathComponent().path) == ["demo"])
        #expect(FileManager.default.fileExists(atPath: output.appendingPathComponent("users.json").path))
    }

    @Test func existingEmptyFolderIsFilledInPlace() throws {
        let output = Support.temporaryPath()
        defer { Support.removeTemporary(output) }
        try FileManager.default.createDirectory(at: output, withIntermediateDirectories: true)
        let summary = try SyntheticFaces.generate(configuration: Support.smallConfiguration(output))
        #expect(try Support.files(in: output).count == summary.imageCount + 1)
        #expect(summary.leftoverFiles.isEmpty)
    }

    @Test func unwritableOrInvalidOutputsFailWithClearErrors() throws {
        let parent = Support.temporaryPath()
        defer { Support.removeTemporary(parent) }
        try FileManager.default.createDirectory(at: parent, withIntermediateDirectories: true)
        let file = parent.appendingPathComponent("plain.txt")
        try Data("x".utf8).write(to: file)

        #expect(throws: SynthesisError.outputIsNotDirectory(path: file.path)) {
            try SyntheticFaces.generate(configuration: Support.smallConfiguration(file))
        }
        do {
            _ = try SyntheticFaces.generate(
                configuration: Support.smallConfiguration(file.appendingPathComponent("out")))
            Issue.record("writing below a regular file should fail")
        } catch let error as SynthesisError {
            guard case .cannotCreateDirectory(let path, let reason) = error else {
                Issue.record("unexpected error \(error)")
                return
            }
            #expect(path.hasSuffix("plain.txt") && !reason.isEmpty)
            #expect(error.description.contains("HINT:"))
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: parent.path) == ["plain.txt"])

        var invalid = Support.smallConfiguration(parent.appendingPathComponent("bad"))
        invalid.userCount = 0
        #expect(throws: SynthesisError.self) { try SyntheticFaces.generate(configuration: invalid) }
        invalid.userCount = 2
        invalid.imageSize = 8
        #expect(throws: SynthesisError.self) { try SyntheticFaces.generate(configuration: invalid) }
        #expect(!FileManager.default.fileExists(atPath: invalid.outputDirectory.path))
    }

    @Test func jpegWriterRejectsMismatchedBuffersAndQualities() throws {
        #expect(throws: JPEGWriterError.self) {
            try JPEGWriter.encode(rgb: [0, 0, 0], width: 2, height: 2, quality: 80)
        }
        #expect(throws: JPEGWriterError.self) {
            try JPEGWriter.encode(rgb: [UInt8](repeating: 9, count: 12), width: 2, height: 2, quality: 0)
        }
        let gradient = (0..<(16 * 16 * 3)).map { UInt8($0 % 256) }
        let image = try #require(
            Support.decodeJPEG(
                try JPEGWriter.encode(
                    rgb: gradient, width: 16, height: 16,
                    quality: 95)))
        #expect(image.width == 16 && image.height == 16)
        #expect(Support.distance(image.rgb, gradient) < 0.08)
    }

    @Test func randomStreamsAreIndependentAndReproducible() {
        var first = SynthesisRandom(seed: 1, stream: 3, indices: 4, 5)
        var again = SynthesisRandom(seed: 1, stream: 3, indices: 4, 5)
        var swapped = SynthesisRandom(seed: 1, stream: 3, indices: 5, 4)
        let values = (0..<8).map { _ in first.next() }
        #expect(values == (0..<8).map { _ in again.next() })
        #expect(values != (0..<8).map { _ in swapped.next() })
        var uniform = SynthesisRandom(seed: 42)
        let draws = (0..<10_000).map { _ in uniform.unit() }
        #expect(draws.allSatisfy { $0 >= 0 && $0 < 1 })
        let mean = draws.reduce(0, +) / Float(draws.count)
        #expect(abs(mean - 0.5) < 0.02)
        let integers = Set((0..<1000).map { _ in uniform.integer(2...5) })
        #expect(integers == [2, 3, 4, 5])
    }

    /// With a face check, exactly the faces whose first drawing it refuses are drawn again, every face
    /// written passes it, and everything else is byte for byte the unchecked data set. The check is
    /// made stricter than the standard one (the 30th percentile of the set's own sharpness) so a small
    /// set has refusals; its verdicts are recomputed in this process, so no kernel's rounding decides.
    @Test func aFaceTheCheckRefusesIsDrawnAgainAndTheRestStayByteIdentical() throws {
        let plain = Support.temporaryPath()
        let checked = Support.temporaryPath()
        defer { [plain, checked].forEach(Support.removeTemporary) }
        var configuration = SynthesisConfiguration(
            outputDirectory: plain, userCount: 3, imagesPerUser: 8, seed: 7, imageSize: 64, nonFaceCount: 4,
            unknownIdentityCount: 2, imagesPerUnknownIdentity: 2)
        _ = try SyntheticFaces.generate(configuration: configuration)
        let samples = SyntheticFaces.samples(for: configuration)
        let faces = samples.filter { $0.label != SyntheticFaces.nonFaceLabel }.map(\.relativePath)
        var check = FaceCheckTests.check
        func verdict(_ folder: URL, _ path: String) throws -> FaceCheckResult {
            check.examine(try ImageDecoder.decode(contentsOf: folder.appendingPathComponent(path)))
        }
        let sharpness = try faces.map { try verdict(plain, $0).measures.sharpness }.sorted()
        // Halfway between two neighbouring faces, so no face sits on the threshold (where the
        // rounding of a parallel run's network could move it).
        let cut = sharpness.count * 3 / 10
        check.thresholds.minimumSharpness = (sharpness[cut - 1] + sharpness[cut]) / 2
        let refusedFirst = try Set(faces.filter { try !verdict(plain, $0).accepted })
        #expect(refusedFirst.count >= 5, "the stricter check should refuse about 30 % of \(faces.count) faces")

        configuration.outputDirectory = checked
        let summary = try SyntheticFaces.generate(configuration: configuration, faceCheck: check)
        #expect(Set(summary.redrawn) == refusedFirst)
        let plainFiles = try Support.files(in: plain)
        let checkedFiles = try Support.files(in: checked)
        #expect(Set(plainFiles.keys) == Set(checkedFiles.keys))
        for (path, data) in checkedFiles {
            #expect((data == plainFiles[path]) == !refusedFirst.contains(path), "\(path)")
        }
        for path in faces {
            #expect(try verdict(checked, path).accepted, "\(path) was written though the check refuses it")
        }
    }

    /// A check that refuses every drawing stops the run on the first face, named where it was to go,
    /// and leaves no half-written data set behind.
    @Test func aCheckThatRefusesEveryDrawingStopsTheRunAndWritesNothing() throws {
        let output = Support.temporaryPath()
        defer { Support.removeTemporary(output) }
        var check = FaceCheckTests.check
        check.thresholds.minimumFaceHeight = 10_000
        let configuration = SynthesisConfiguration(
            outputDirectory: output, userCount: 2, imagesPerUser: 2, seed: 7, imageSize: 64, nonFaceCount: 2,
            unknownIdentityCount: 1, imagesPerUnknownIdentity: 1)
        do {
            _ = try SyntheticFaces.generate(configuration: configuration, faceCheck: check)
            Issue.record("a check that refuses everything did not stop the run")
        } catch let error as SynthesisError {
            guard case .refusedByFaceCheck(let path, let drawings, let reason) = error else {
                Issue.record("unexpected error \(error)")
                return
            }
            #expect(path == output.appendingPathComponent("3/1.jpg").path)
            #expect(drawings == SyntheticFaces.maximumDrawings)
            #expect(reason.contains("small"), "\(reason)")
            #expect(error.description.contains("--face-check off"))
        }
        #expect(!FileManager.default.fileExists(atPath: output.path))
    }
}
