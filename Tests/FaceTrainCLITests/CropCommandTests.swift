import FaceTrain
import Foundation
import Testing

@testable import FaceTrainCLI

/// `facetrain crop` end to end with a detector trained here in about a second (3 epochs at 64 px on
/// 20 synthetic scenes). Such a detector finds little, so the test checks the bookkeeping, not the
/// faces: every photo accounted for, crops of the asked size, grey photos giving grey-looking
/// crops, nothing replaced, --out inside --in refused. Which faces are chosen is CropPlannerTests'.
@Suite("facetrain crop")
struct CropCommandTests {
    struct Line: Decodable {
        struct CropLine: Decodable {
            var file: String
            var score: Double
            var box: [Double]
            var outside: Double
        }
        var file: String
        var crops: [CropLine]
        var refused: String?
    }

    /// A binary PGM of `image` turned grey.
    static func pgm(_ image: Image) -> Data {
        let grey = image.converted(channels: 1)
        return Data("P5\n\(grey.width) \(grey.height)\n255\n".utf8) + Data(grey.pixels)
    }

    @Test func cropsAFolderOfPhotosAndNeverReplacesACrop() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("facetrain-crop-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let scenes = root.appendingPathComponent("scenes")
        let detector = root.appendingPathComponent("detector")
        #expect(try CLIRunner.run(["synth", "--scenes", "20", "--max-side", "128", "--out", scenes.path]).status == 0)
        let trained = try CLIRunner.run([
            "detector", "train", "--data", scenes.path, "--epochs", "3", "--input-size", "64", "--out", detector.path,
        ])
        try #require(trained.status == 0, "\(trained.standardError)")

        // users/3/ holds the scenes as they are, users/4/ the same photos grey as PGM.
        let photos = root.appendingPathComponent("photos")
        let sceneImages = scenes.appendingPathComponent("images/0--Synthetic")
        for folder in ["users/3", "users/4"] {
            try FileManager.default.createDirectory(
                at: photos.appendingPathComponent(folder), withIntermediateDirectories: true)
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: sceneImages.path).sorted()
        for name in names {
            let source = sceneImages.appendingPathComponent(name)
            try FileManager.default.copyItem(at: source, to: photos.appendingPathComponent("users/3/\(name)"))
            let stem = (name as NSString).deletingPathExtension
            try Self.pgm(try ImageDecoder.decode(contentsOf: source)).write(
                to: photos.appendingPathComponent("users/4/\(stem).pgm"))
        }

        let crops = root.appendingPathComponent("crops")
        let arguments = [
            "crop", "--in", photos.path, "--out", crops.path, "--detector", detector.path, "--threshold", "0.02",
            "--all", "--min-face", "0", "--size", "80", "--json",
        ]
        let first = try CLIRunner.run(arguments)
        let lines = try first.standardOutput.split(separator: "\n").map {
            try JSONDecoder().decode(Line.self, from: Data($0.utf8))
        }
        // Every photo once, in order, with crops or a reason.
        let expected =
            names.map { "users/3/\($0)" } + names.map { "users/4/\(($0 as NSString).deletingPathExtension).pgm" }
        #expect(lines.map(\.file) == expected)
        for line in lines { #expect(line.crops.isEmpty == (line.refused != nil), "\(line.file)") }
        let written = lines.flatMap(\.crops)
        try #require(!written.isEmpty, "the tiny detector found nothing to crop: \(first.standardError)")
        #expect(first.status == 0)
        #expect(first.standardError.contains("Read 40 photos, wrote \(written.count) crop"))
        var contents: [String: Data] = [:]
        for crop in written {
            let url = crops.appendingPathComponent(crop.file)
            let image = try ImageDecoder.decode(contentsOf: url)
            #expect(image.width == 80 && image.height == 80 && image.channels == 3)
            #expect(crop.outside <= 1.0 / 3)
            if crop.file.hasPrefix("users/4/") {
                // Equal R, G and B carry no colour, which JPEG keeps to a step of rounding.
                for pixel in 0..<(80 * 80) {
                    let red = Int(image.pixels[3 * pixel])
                    #expect(abs(red - Int(image.pixels[3 * pixel + 1])) <= 2)
                    #expect(abs(red - Int(image.pixels[3 * pixel + 2])) <= 2)
                }
            }
            contents[crop.file] = try Data(contentsOf: url)
        }

        // A second run replaces nothing: the photos with crops are refused by name and it fails.
        let second = try CLIRunner.run(arguments)
        #expect(second.status == 1)
        #expect(second.standardError.contains("HINT: existing crops are never replaced"))
        let again = try second.standardOutput.split(separator: "\n").map {
            try JSONDecoder().decode(Line.self, from: Data($0.utf8))
        }
        #expect(again.filter { $0.refused == "crop exists" }.count == lines.filter { !$0.crops.isEmpty }.count)
        for (file, data) in contents { #expect(try Data(contentsOf: crops.appendingPathComponent(file)) == data) }

        // Crops inside the photos would be read as photos next time.
        let inside = try CLIRunner.run([
            "crop", "--in", photos.path, "--out", photos.appendingPathComponent("crops").path, "--detector",
            detector.path,
        ])
        #expect(inside.status == 64)
        #expect(inside.standardError.contains("is inside --in") && inside.standardError.contains("HINT:"))
        #expect(!FileManager.default.fileExists(atPath: photos.appendingPathComponent("crops").path))
    }

    @Test func badOptionsAreUsageErrors() throws {
        let folder = FileManager.default.temporaryDirectory.path
        for bad in [
            ["--in", folder, "--out", "/nonexistent/x", "--template", "square"],
            ["--in", folder, "--out", "/nonexistent/x", "--threshold", "2"],
            ["--in", folder, "--out", "/nonexistent/x", "--size", "8"],
            ["--in", folder, "--out", "/nonexistent/x", "--pad", "1.5"],
            ["--in", folder, "--out", "/nonexistent/x", "--pad", "-0.1"],
            ["--in", "/nonexistent/photos", "--out", "/nonexistent/x"],
        ] {
            #expect(throws: UsageError.self) { _ = try Crop(arguments: try ParsedArguments(bad, specs: Crop.options)) }
        }
    }
}
