import FaceTrainEngine
import Foundation

// libFuzzer target: a data folder's users.json and <id>/user.json (UserMetadataReader, as `data check`,
// `fit` and `serve` read them), then the name checks `serve` applies to what was read.
@testable import FaceTrain
@testable import FaceTrainServer

/// The readers take a file: one per process, rewritten for every input (in /dev/shm when there is one).
let metadataFile: URL = {
    let folder = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
    return URL(fileURLWithPath: folder).appendingPathComponent("facetrain-fuzz-metadata-\(getpid()).json")
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzMetadata(_ bytes: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    // Data(contentsOf:) of an empty file leaks 4 KB in swift-foundation 6.3.1 (Fuzz/README.md, findings);
    // skipping that one input keeps LeakSanitizer on for all the others.
    guard count > 0 else { return 0 }
    guard FileManager.default.createFile(atPath: metadataFile.path, contents: Data(bytes: bytes, count: count)) else {
        fatalError("cannot write \(metadataFile.path)")
    }
    var records: [RawUser] = []
    if let list = try? UserMetadataReader.readList(at: metadataFile) { records += list }
    if let single = try? UserMetadataReader.readSingle(at: metadataFile) { records.append(single) }
    for record in records {
        _ = try? UserStore.validate(name: record.name ?? "", position: record.position)
    }
    return 0
}
