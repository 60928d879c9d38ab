import CTurboJPEG
import Foundation

@testable import FaceTrain
@testable import FaceTrainEngine
@testable import FaceTrainSynthesis

/// Helpers for the synthesis tests: temporary folders and an independent JPEG decoder (libjpeg-turbo directly).
enum SynthesisTestSupport {
    /// A decoded JPEG: its header fields and RGB pixels.
    struct DecodedJPEG {
        let width: Int
        let height: Int
        let subsampling: Int32
        let rgb: [UInt8]
    }

    /// A fresh, not yet existing path in the temporary folder; remove it with `removeTemporary`.
    static func temporaryPath(_ name: String = "synth") -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("facetrain-\(name)-\(UUID().uuidString)")
    }

    static func removeTemporary(_ url: URL) {
        try? FileManager.default.removeItem(at: url)
    }

    /// A small configuration writing to `output`; counts chosen so a debug build generates it in well under a second.
    static func smallConfiguration(_ output: URL, seed: UInt64 = 7, users: Int = 3, perUser: Int = 3)
        -> SynthesisConfiguration
    {
        SynthesisConfiguration(
            outputDirectory: output, userCount: users, imagesPerUser: perUser, seed: seed,
            imageSize: 32, nonFaceCount: 4, unknownIdentityCount: 2, imagesPerUnknownIdentity: 2)
    }

    /// Decodes JPEG bytes with tjDecompressHeader3 and tjDecompress2; nil when libjpeg-turbo rejects them.
    static func decodeJPEG(_ data: Data) -> DecodedJPEG? {
        guard let handle = tjInitDecompress() else { return nil }
        defer { tjDestroy(handle) }
        let bytes = [UInt8](data)
        var width: Int32 = 0
        var height: Int32 = 0
        var subsampling: Int32 = 0
        var colorspace: Int32 = 0
        let header = bytes.withUnsafeBufferPointer { buffer in
            tjDecompressHeader3(
                handle, buffer.baseAddress, UInt(buffer.count), &width, &height, &subsampling, &colorspace)
        }
        guard header == 0, width > 0, height > 0 else { return nil }
        var rgb = [UInt8](repeating: 0, count: Int(width) * Int(height) * 3)
        let status = bytes.withUnsafeBufferPointer { source in
            rgb.withUnsafeMutableBufferPointer { target in
                tjDecompress2(
                    handle, source.baseAddress, UInt(source.count), target.baseAddress, width, 0, height,
                    Int32(TJPF_RGB.rawValue), 0)
            }
        }
        guard status == 0 else { return nil }
        return DecodedJPEG(width: Int(width), height: Int(height), subsampling: subsampling, rgb: rgb)
    }

    /// Every regular file under `directory` with its bytes, keyed by relative path.
    static func files(in directory: URL) throws -> [String: Data] {
        var result: [String: Data] = [:]
        let enumerator = FileManager.default.enumerator(atPath: directory.path)
        while let path = enumerator?.nextObject() as? String {
            var isDirectory: ObjCBool = false
            let url = directory.appendingPathComponent(path)
            if FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory), !isDirectory.boolValue {
                result[path] = try Data(contentsOf: url)
            }
        }
        return result
    }

    /// Root-mean-square difference of two equally sized byte images, in [0, 1].
    static func distance(_ first: [UInt8], _ second: [UInt8]) -> Double {
        var sum = 0.0
        for index in first.indices {
            let difference = (Double(first[index]) - Double(second[index])) / 255
            sum += difference * difference
        }
        return (sum / Double(first.count)).squareRoot()
    }
}
