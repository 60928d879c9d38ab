import CTurboJPEG
import Foundation
import Testing

@testable import FaceTrain

@Suite("Image decoding errors")
struct ImageDecoderErrorTests {
    let colour = Fixtures.blockPattern(width: 64, height: 64, channels: 3)

    @Test func emptyFile() {
        let error = expectImageError { () throws(ImageError) in
            try ImageDecoder.decode(data: Data(), name: "a/empty.jpg")
        }
        #expect(error == .empty(file: "a/empty.jpg"))
        #expect(error?.description.contains("a/empty.jpg: the file is empty") == true)
    }

    /// Files that are not plain files are refused by what they are, before any read (a pipe would
    /// block, a device never end).
    @Test func devicesPipesAndDanglingLinksAreNamed() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("decoder-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let pipe = folder.appendingPathComponent("pipe.jpg")
        #expect(mkfifo(pipe.path, 0o600) == 0)
        let link = folder.appendingPathComponent("link.jpg")
        try FileManager.default.createSymbolicLink(atPath: link.path, withDestinationPath: "missing.jpg")
        let loop = folder.appendingPathComponent("loop.jpg")
        try FileManager.default.createSymbolicLink(atPath: loop.path, withDestinationPath: "loop.jpg")
        let cases: [(URL, String)] = [
            (pipe, "not a regular file"), (URL(fileURLWithPath: "/dev/zero"), "not a regular file"),
            (link, "symbolic link to a file that does not exist"), (loop, "a loop of symbolic links"),
            (folder.appendingPathComponent("absent.jpg"), "no such file"),
        ]
        for (url, reason) in cases {
            let error = expectImageError { () throws(ImageError) in try ImageDecoder.decode(contentsOf: url) }
            #expect(error?.description.contains(reason) == true, "\(url.path): \(String(describing: error))")
            #expect(error?.description.hasPrefix(url.path) == true)
        }
    }

    @Test func textFileNamedJPG() {
        let error = expectImageError { () throws(ImageError) in
            try ImageDecoder.decode(data: Data("name,label\nalice,1\n".utf8), name: "faces/notes.jpg")
        }
        guard case .notAnImage(let file, let reason) = error else {
            Issue.record("got \(String(describing: error))")
            return
        }
        #expect(file == "faces/notes.jpg")
        #expect(reason.contains("6e 61 6d 65"))  // "name"
        #expect(error!.description.hasPrefix("faces/notes.jpg: not an image"))
    }

    @Test func asciiNetpbmIsNamedAsUnsupported() {
        let error = expectImageError { () throws(ImageError) in
            try ImageDecoder.decode(data: Data("P2\n24 24\n255\n0 0 0\n".utf8), name: "ascii.pgm")
        }
        guard case .notAnImage(_, let reason) = error else {
            Issue.record("got \(String(describing: error))")
            return
        }
        #expect(reason.contains("P2"))
    }

    @Test func formatComesFromTheBytesNotTheName() throws {
        let png = Fixtures.png(colour)
        let jpeg = Fixtures.jpeg(colour)
        #expect(try ImageDecoder.decode(data: png, name: "really-a-png.jpg") == colour)
        #expect(try ImageDecoder.decode(data: jpeg, name: "really-a-jpeg.png").width == 64)
        #expect(ImageFormat(signature: png) == .png)
        #expect(ImageFormat(signature: jpeg) == .jpeg)
        #expect(ImageFormat(signature: Data("P5\n".utf8)) == .pgm)
        #expect(ImageFormat(signature: Data("P6 ".utf8)) == .ppm)
        #expect(ImageFormat(signature: Data("P5x".utf8)) == nil)
    }

    @Test func truncatedJPEG() throws {
        // Noise, so that most of the file is scan data: cuts after the SOS marker decode "successfully" with a
        // libjpeg warning, cuts before it fail in the header.
        let data = Fixtures.jpeg(Fixtures.noise(width: 64, height: 64, channels: 3), quality: 90)
        let scanStart = try #require([UInt8](data).indices.first { data[$0] == 0xFF && data[$0 + 1] == 0xDA })
        #expect(scanStart < data.count / 4)
        for keep in [data.count / 2, data.count - 2, scanStart + 20, scanStart, 300, 40, 3] {
            let error = expectImageError { () throws(ImageError) in
                try ImageDecoder.decode(data: data.prefix(keep), name: "cut.jpg")
            }
            guard case .truncated(let file, .jpeg, _) = error else {
                Issue.record("keeping \(keep) of \(data.count) bytes: \(String(describing: error))")
                continue
            }
            #expect(file == "cut.jpg")
            #expect(error!.description.contains("truncated"))
        }
    }

    @Test func corruptJPEGScanData() {
        var bytes = [UInt8](Fixtures.jpeg(colour, quality: 90))
        // Overwrite the middle of the entropy-coded data with a marker that may not appear there.
        let middle = bytes.count * 2 / 3
        bytes.replaceSubrange(middle..<(middle + 4), with: [0xFF, 0xC4, 0xFF, 0x01])
        let error = expectImageError { () throws(ImageError) in
            try ImageDecoder.decode(data: Data(bytes), name: "bad.jpg")
        }
        switch error {
        case .corrupt(_, .jpeg, let message), .truncated(_, .jpeg, let message):
            #expect(message.contains("libjpeg-turbo"))
        default:
            Issue.record("got \(String(describing: error))")
        }
    }

    @Test func truncatedPNG() throws {
        let data = Fixtures.png(Fixtures.noise(width: 64, height: 64, channels: 3))
        // The last 12 bytes are the IEND chunk and the 4 before them the IDAT CRC.
        for keep in [data.count / 2, data.count - 17, 20, 9] {
            let error = expectImageError { () throws(ImageError) in
                try ImageDecoder.decode(data: data.prefix(keep), name: "cut.png")
            }
            guard case .truncated(let file, .png, let detail) = error else {
                Issue.record("keeping \(keep) of \(data.count) bytes: \(String(describing: error))")
                continue
            }
            #expect(file == "cut.png")
            #expect(detail.contains("libpng"))
        }
        // Only the IEND chunk missing: every pixel arrived, so the image is accepted.
        #expect(try ImageDecoder.decode(data: data.prefix(data.count - 12), name: "no-iend.png").width == 64)
    }

    @Test func corruptPNGReportsLibpngsMessage() {
        var bytes = [UInt8](Fixtures.png(colour))
        bytes[bytes.count / 2] ^= 0xFF  // inside the compressed IDAT stream
        let error = expectImageError { () throws(ImageError) in
            try ImageDecoder.decode(data: Data(bytes), name: "bad.png")
        }
        guard case .corrupt("bad.png", .png, let message) = error else {
            Issue.record("got \(String(describing: error))")
            return
        }
        #expect(message.hasPrefix("libpng: IDAT"), "\(message)")
    }

    @Test func truncatedPGM() {
        let data = Fixtures.netpbm(header: "P5\n30 30\n255\n", samples: [UInt8](repeating: 7, count: 899))
        let error = expectImageError { () throws(ImageError) in try ImageDecoder.decode(data: data, name: "cut.pgm") }
        guard case .truncated("cut.pgm", .pgm, let detail) = error else {
            Issue.record("got \(String(describing: error))")
            return
        }
        #expect(detail.contains("900") && detail.contains("899"))
        let headerOnly = expectImageError { () throws(ImageError) in
            try ImageDecoder.decode(data: Data("P6\n30 ".utf8), name: "cut.ppm")
        }
        guard case .truncated("cut.ppm", .ppm, _) = headerOnly else {
            Issue.record("got \(String(describing: headerOnly))")
            return
        }
    }

    @Test func cmykJPEGIsAnUnsupportedColourSpace() {
        let cmyk = (0..<(32 * 32)).flatMap { i -> [UInt8] in [UInt8(i % 256), 40, 200, 10] }
        let data = Fixtures.jpeg(pixels: cmyk, width: 32, height: 32, pixelFormat: TJPF_CMYK)
        let error = expectImageError { () throws(ImageError) in try ImageDecoder.decode(data: data, name: "print.jpg") }
        guard case .unsupportedColorSpace("print.jpg", .jpeg, let space) = error else {
            Issue.record("got \(String(describing: error))")
            return
        }
        #expect(space.contains("CMYK"))
        #expect(error!.description.contains("print.jpg: unsupported colour space"))
    }

    // MARK: - Size limits, checked on the header before any pixel memory exists

    @Test func jpegClaimingHugeSizeIsRefusedBeforeDecoding() {
        // SOF stores 16-bit sizes and libjpeg caps them at 65500, so 65500 x 65500 (4.3 gigapixels) is the
        // largest a JPEG can claim. Were the pixels decoded first, this 64 x 64 stream would fail as corrupt.
        let data = Fixtures.patchingFrameSize(of: Fixtures.jpeg(colour), width: 65500, height: 65500)
        let error = expectImageError { () throws(ImageError) in try ImageDecoder.decode(data: data, name: "bomb.jpg") }
        #expect(error == .tooLarge(file: "bomb.jpg", width: 65500, height: 65500, maximumPixelCount: 50_000_000))
        let text = error?.description ?? ""
        #expect(text.contains("bomb.jpg") && text.contains("65500 x 65500") && text.contains("50.0 megapixels"))
    }

    @Test func pgmClaiming100000By100000IsRefusedBeforeReadingSamples() {
        let data = Fixtures.netpbm(header: "P5\n100000 100000\n255\n", samples: [1, 2, 3])
        let error = expectImageError { () throws(ImageError) in try ImageDecoder.decode(data: data, name: "bomb.pgm") }
        #expect(error == .tooLarge(file: "bomb.pgm", width: 100_000, height: 100_000, maximumPixelCount: 50_000_000))
        #expect(error?.description.contains("10000.0 megapixels") == true)
    }

    @Test func pngClaimingHugeSizeIsRefusedBeforeDecoding() {
        let data = Fixtures.patchingHeaderSize(of: Fixtures.png(colour), width: 20000, height: 20000)
        let error = expectImageError { () throws(ImageError) in try ImageDecoder.decode(data: data, name: "bomb.png") }
        #expect(error == .tooLarge(file: "bomb.png", width: 20000, height: 20000, maximumPixelCount: 50_000_000))
    }

    @Test func customPixelLimit() throws {
        let data = Fixtures.jpeg(colour)
        let limits = ImageDecoder.Limits(maximumPixelCount: 64 * 64 - 1)
        let error = expectImageError { () throws(ImageError) in
            try ImageDecoder.decode(data: data, name: "x.jpg", limits: limits)
        }
        #expect(error == .tooLarge(file: "x.jpg", width: 64, height: 64, maximumPixelCount: 4095))
        #expect(try ImageDecoder.decode(data: data, name: "x.jpg", limits: .init(maximumPixelCount: 4096)).width == 64)
    }

    @Test func tenByTenImagesAreTooSmall() {
        let tiny = Fixtures.blockPattern(width: 10, height: 10, channels: 3)
        let files: [(String, Data)] = [
            ("tiny.jpg", Fixtures.jpeg(tiny)),
            ("tiny.png", Fixtures.png(tiny)),
            ("tiny.ppm", Fixtures.netpbm(header: "P6\n10 10\n255\n", samples: tiny.pixels)),
        ]
        for (name, data) in files {
            let error = expectImageError { () throws(ImageError) in try ImageDecoder.decode(data: data, name: name) }
            #expect(error == .tooSmall(file: name, width: 10, height: 10, minimumSide: 24))
            #expect(error?.description.contains("\(name): 10 x 10 pixels is smaller than the minimum of 24") == true)
        }
        // One short side is enough to refuse; 24 itself is accepted.
        let narrow = Fixtures.netpbm(header: "P5 23 100 255\n", samples: [UInt8](repeating: 0, count: 2300))
        #expect(
            expectImageError { () throws(ImageError) in try ImageDecoder.decode(data: narrow, name: "n.pgm") }
                == .tooSmall(file: "n.pgm", width: 23, height: 100, minimumSide: 24))
        let edge = Fixtures.netpbm(header: "P5 24 24 255\n", samples: [UInt8](repeating: 0, count: 576))
        #expect((try? ImageDecoder.decode(data: edge, name: "e.pgm")) != nil)
    }

    // MARK: - Files on disk

    @Test func decodesFromAURLAndNamesMissingFiles() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("facetrain-images-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("face.png")
        try Fixtures.png(colour).write(to: file)
        #expect(try ImageDecoder.decode(contentsOf: file) == colour)

        let missing = directory.appendingPathComponent("gone.jpg")
        let error = expectImageError { () throws(ImageError) in try ImageDecoder.decode(contentsOf: missing) }
        guard case .unreadable(let path, let reason) = error else {
            Issue.record("got \(String(describing: error))")
            return
        }
        #expect(path == missing.path)
        #expect(reason == "no such file")
        let folder = expectImageError { () throws(ImageError) in try ImageDecoder.decode(contentsOf: directory) }
        #expect(folder == .unreadable(file: directory.path, reason: "it is a directory"))
        #expect(error?.description.contains("gone.jpg: cannot read the file: no such file") == true)
    }
}
