// libFuzzer target: manifest.json as `verify`, `serve` and the repository read it (Manifest.decode),
// then what they do with a manifest that decoded: the model definition's checks and the content hash.
import FaceTrain
import FaceTrainEngine
import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzManifest(_ bytes: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    guard let manifest = try? Manifest.decode(Data(bytes: bytes, count: count)) else { return 0 }
    let definition = manifest.definition
    _ = try? definition.validate(as: .classifier)
    _ = try? definition.validate(as: .extractor)
    // The content hash is promised stable across a write and a read (bundles are checked against it).
    guard let canonical = try? manifest.canonicalContent(), let written = try? manifest.encoded() else { return 0 }
    guard let reread = try? Manifest.decode(written) else {
        fatalError(
            "a manifest that decoded cannot be read back after encoding:\n\(String(decoding: written, as: UTF8.self))")
    }
    guard (try? reread.canonicalContent()) == canonical else {
        fatalError(
            "the canonical content changed across encode and decode:\n\(String(decoding: written, as: UTF8.self))")
    }
    return 0
}
