// libFuzzer target: every image decoder behind ImageDecoder (JPEG through libjpeg-turbo, PNG through
// libpng, PGM/PPM, and the EXIF orientation walk of JPEGs), with the limits the server's uploads use.
import FaceTrain
import FaceTrainEngine
import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzImage(_ bytes: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let data = Data(bytes: bytes, count: count)
    do {
        let image = try ImageDecoder.decode(data: data, name: "fuzz")
        // A decoded image must hold exactly its pixels: the resizer and the network index by these.
        guard image.width > 0, image.height > 0, [1, 3].contains(image.channels),
            image.pixels.count == image.width * image.height * image.channels
        else { fatalError("decoded \(image.width)x\(image.height)x\(image.channels) with \(image.pixels.count) bytes") }
        // Thumbnails and training resize every accepted upload; a tiny crop must survive it too.
        _ = image.resized(width: 16, height: 16)
    } catch {
        // A refusal is the expected answer to most inputs; only a crash or a hang is a finding.
    }
    return 0
}
