// Writes the seed corpora of the fuzz targets into the folder given as the argument: small valid
// inputs made here (synthetic patterns, never faces) and by the library's own writers.
import CPNG
import FaceTrain
import FaceTrainEngine
import FaceTrainSynthesis
import Foundation

let root = URL(fileURLWithPath: CommandLine.arguments.count > 1 ? CommandLine.arguments[1] : "corpus")

func write(_ target: String, _ name: String, _ data: Data) {
    let folder = root.appendingPathComponent(target)
    try! FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    try! data.write(to: folder.appendingPathComponent(name))
}

/// A diagonal gradient, `channels` samples per pixel.
func gradient(width: Int, height: Int, channels: Int) -> [UInt8] {
    (0..<height).flatMap { y in
        (0..<width).flatMap { x in (0..<channels).map { c in UInt8(truncatingIfNeeded: x * 7 + y * 3 + c * 80) } }
    }
}

func png(width: Int, height: Int, format: UInt32, channels: Int) -> Data {
    var image = png_image()
    image.version = UInt32(PNG_IMAGE_VERSION)
    image.width = UInt32(width)
    image.height = UInt32(height)
    image.format = format
    let pixels = gradient(width: width, height: height, channels: channels)
    var size = 0
    guard png_image_write_to_memory(&image, nil, &size, 0, pixels, 0, nil) != 0 else { fatalError("libpng: size") }
    var memory = [UInt8](repeating: 0, count: size)
    guard png_image_write_to_memory(&image, &memory, &size, 0, pixels, 0, nil) != 0 else { fatalError("libpng: write") }
    return Data(memory[..<size])
}

/// An APP1 Exif segment whose IFD0 holds only the orientation tag, little-endian TIFF.
func exifSegment(orientation: UInt8) -> [UInt8] {
    let tiff: [UInt8] = [
        0x49, 0x49, 0x2A, 0x00, 0x08, 0x00, 0x00, 0x00, 0x01, 0x00, 0x12, 0x01, 0x03, 0x00,
        0x01, 0x00, 0x00, 0x00, orientation, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ]
    let payload = Array("Exif".utf8) + [0, 0] + tiff
    let length = payload.count + 2
    return [0xFF, 0xE1, UInt8(length >> 8), UInt8(length & 0xFF)] + payload
}

// Images: JPEG (with and without an orientation), PNG in grey, RGB and RGBA, PGM and PPM.
let jpeg = try! JPEGWriter.encode(rgb: gradient(width: 32, height: 24, channels: 3), width: 32, height: 24, quality: 75)
write("image", "gradient.jpg", jpeg)
write("image", "rotated.jpg", Data(jpeg.prefix(2)) + Data(exifSegment(orientation: 6)) + jpeg.dropFirst(2))
write("image", "grey.png", png(width: 24, height: 24, format: 0, channels: 1))
write("image", "rgb.png", png(width: 24, height: 32, format: UInt32(PNG_FORMAT_FLAG_COLOR), channels: 3))
write(
    "image", "rgba.png",
    png(width: 24, height: 24, format: UInt32(PNG_FORMAT_FLAG_COLOR | PNG_FORMAT_FLAG_ALPHA), channels: 4))
write(
    "image", "grey.pgm", Data("P5\n# a comment\n24 24\n255\n".utf8) + Data(gradient(width: 24, height: 24, channels: 1))
)
write("image", "rgb.ppm", Data("P6 24 24 255\n".utf8) + Data(gradient(width: 24, height: 24, channels: 3)))
write("image", "text.pgm", Data(("P2 24 24 15\n" + (0..<576).map { String($0 % 16) }.joined(separator: " ")).utf8))

// Metadata: users.json as `synth` and `serve` write it, and one <id>/user.json.
let users = [UserRecord(id: 3, name: "Ada Lovelace", position: "Engineer"), UserRecord(id: 4, name: "Grace Hopper")]
write("metadata", "users.json", try! JSONEncoder().encode(users))
write("metadata", "user.json", Data(#"{"name": "Alan Turing", "position": "Mathematician"}"#.utf8))
write("metadata", "unicode.json", Data(#"[{"id": 5, "name": "Zoë \u00e9 李", "position": null}]"#.utf8))

// Multipart: byte 0 picks the chunk size, the rest is a body with a field and two 'photos' files.
func part(_ disposition: String, _ content: Data) -> Data {
    Data("--fuzzboundary\r\nContent-Disposition: form-data; \(disposition)\r\nContent-Type: image/jpeg\r\n\r\n".utf8)
        + content + Data("\r\n".utf8)
}
let upload =
    part(#"name="id""#, Data("3".utf8)) + part(#"name="photos"; filename="a.jpg""#, jpeg)
    + part(#"name="photos"; filename="b.pgm""#, Data("P5 2 2 255\n\u{1}\u{2}\u{3}\u{4}".utf8))
    + Data("--fuzzboundary--\r\n".utf8)
write("multipart", "whole", Data([0xFF]) + upload)
write("multipart", "split", Data([0x01]) + upload)
write("multipart", "cut", Data([0x00]) + upload.prefix(upload.count / 2))

// Routes: byte 0 the route (routes.swift's `templates`), byte 1 an existing (even) or unknown id, then the body.
let unknownCrop = String(repeating: "0", count: 64)
write("routes", "correction", Data([0, 0]) + Data(#"{"crop": "\#(unknownCrop)", "class": "stranger"}"#.utf8))
write("routes", "new-user", Data([2, 0]) + Data(#"{"name": "Ada", "position": "CTO"}"#.utf8))
write("routes", "rename", Data([3, 0]) + Data(#"{"name": "Grace", "position": null}"#.utf8))
write("routes", "upload", Data([5, 0]) + jpeg)
write("routes", "stranger", Data([9, 2]) + jpeg)
write("routes", "erase", Data([4, 0]))
