import FaceTrainTestSupport
import Foundation
import Testing

@testable import FaceTrain

@Suite("SHA-256")
struct SHA256Tests {
    // FIPS 180-2 appendix B and the NIST example values.
    @Test func nistShortMessages() {
        #expect(SHA256.hash(Data("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(SHA256.hash(Data()) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(
            SHA256.hash(Data("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8))
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
    }

    @Test func nistMillionAStreamedInUnevenPieces() {
        let hasher = SHA256Hasher()
        var remaining = 1_000_000
        var piece = 1
        while remaining > 0 {
            let count = min(piece, remaining)
            hasher.update(Data(repeating: UInt8(ascii: "a"), count: count))
            remaining -= count
            piece = piece * 3 + 1
        }
        #expect(hasher.finalizeHex() == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test func fileHashMatchesBufferHashAndSha256sum() throws {
        let directory = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        // Larger than the 1 MiB read size, so the streaming path is taken.
        let data = Data((0..<(3 << 20) + 17).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 7) })
        let url = directory.appendingPathComponent("blob")
        try data.write(to: url)
        let digest = try SHA256.hashFile(at: url)
        #expect(digest.size == Int64(data.count))
        #expect(digest.sha256 == SHA256.hash(data))
        let tool = try BundleFixture.run("/usr/bin/sha256sum", [url.path])
        #expect(tool.output.hasPrefix(digest.sha256 + " "))
    }

    @Test func missingFileIsAnIOErrorNamingIt() {
        #expect(throws: FileSystemError(operation: "open", path: "/nonexistent/facetrain-x", code: ENOENT)) {
            try SHA256.hashFile(at: URL(fileURLWithPath: "/nonexistent/facetrain-x"))
        }
        do {
            _ = try SHA256.hashFile(at: URL(fileURLWithPath: "/nonexistent/facetrain-x"))
        } catch {
            #expect("\(error)".contains("/nonexistent/facetrain-x"))
        }
    }
}
