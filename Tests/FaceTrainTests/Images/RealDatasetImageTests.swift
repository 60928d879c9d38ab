import Foundation
import Testing

@testable import FaceTrain

/// Every image of the shared face datasets decodes with its documented size.
///
/// The data lives outside the repository (face photos are personal data), in `../shared/datasets` next to the
/// package root. Under CI=true a missing folder fails the test; elsewhere the test notes it and stops.
@Suite("Real face datasets")
struct RealDatasetImageTests {
    static let datasets = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()  // Images
        .deletingLastPathComponent()  // FaceTrainTests
        .deletingLastPathComponent()  // Tests
        .deletingLastPathComponent()  // package root
        .deletingLastPathComponent()
        .appendingPathComponent("shared/datasets")

    @Test("ORL: 400 PGM files, 92 x 112 grey")
    func orl() throws {
        try check(collection: "orl_faces", count: 400, width: 92, height: 112, channels: 1)
    }

    @Test("CS131: 960 JPEG files, 64 x 64 RGB")
    func cs131() throws {
        try check(collection: "cs131_celebrity_faces", count: 960, width: 64, height: 64, channels: 3)
    }

    private func check(collection: String, count: Int, width: Int, height: Int, channels: Int) throws {
        let folder = Self.datasets.appendingPathComponent(collection)
        guard FileManager.default.fileExists(atPath: folder.path) else {
            let message = "dataset folder \(folder.path) is missing"
            if ProcessInfo.processInfo.environment["CI"] == "true" {
                Issue.record("\(message); CI=true requires it. HINT: mount or copy the shared datasets there.")
                return
            }
            try Test.cancel("\(message); skipped outside CI")
        }
        let files = try #require(
            FileManager.default.enumerator(at: folder, includingPropertiesForKeys: [.isRegularFileKey])
        )
        .compactMap { $0 as? URL }
        .filter { (try? $0.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true }
        .filter { !$0.lastPathComponent.hasPrefix(".") }
        #expect(files.count == count)
        var decoded = 0
        for file in files {
            do {
                let image = try ImageDecoder.decode(contentsOf: file)
                #expect(
                    image.width == width && image.height == height && image.channels == channels,
                    "\(file.path): \(image)")
                // Real photos span a wide range of values: a flat image would mean a decoding fault.
                let (darkest, brightest) = Self.range(image.pixels)
                #expect(brightest - darkest > 64, "\(file.path) only spans \(darkest)...\(brightest)")
                decoded += 1
            } catch {
                Issue.record("\(error)")
            }
        }
        #expect(decoded == count)
    }

    /// Smallest and largest sample; a plain loop, since `min()` and `max()` crawl in debug builds.
    private static func range(_ samples: [UInt8]) -> (UInt8, UInt8) {
        samples.withUnsafeBufferPointer { buffer in
            var (low, high) = (UInt8.max, UInt8.min)
            for i in 0..<buffer.count {
                if buffer[i] < low { low = buffer[i] }
                if buffer[i] > high { high = buffer[i] }
            }
            return (low, high)
        }
    }
}
