import FaceTrainSynthesis
import Foundation
import Testing

@testable import FaceTrain
@testable import FaceTrainEngine

/// The face check: its reasons on constructed images with hand-made detections (the rules without
/// the network), its measures, and the builtin detector's verdicts on synthetic crops, blank and
/// non-face images, judged as rates with margin so no kernel's rounding decides a test.
@Suite("Face check")
struct FaceCheckTests {
    static let check: FaceCheck = {
        let model = try! DetectorModel.builtin()
        return FaceCheck(detector: FaceDetector(model: model.model, strides: model.manifest.strides))
    }()

    /// A `width` x `height` grey image of seeded noise around `level` (+- `spread`): detail everywhere.
    static func noise(width: Int, height: Int, level: Int = 128, spread: Int = 60, seed: UInt64 = 1) -> Image {
        var random = SplitMix64(seed: seed)
        let pixels = (0..<(width * height)).map { _ in
            UInt8(clamping: level - spread + Int(random.next() % UInt64(2 * spread + 1)))
        }
        return Image(width: width, height: height, channels: 1, pixels: pixels)
    }

    /// A face whose landmarks are the celeba96 template scaled by `scale` and moved by (x, y).
    static func face(x: Double, y: Double, scale: Double, score: Double = 0.9) -> Detection {
        let points = AlignmentTemplate.celebaMean96.points.map { FacePoint(x: x + $0.x * scale, y: y + $0.y * scale) }
        return Detection(
            box: DetectionBox(x: x + 20 * scale, y: y + 15 * scale, width: 56 * scale, height: 64 * scale),
            score: score, landmarks: points)
    }

    @Test func aSharpLitCropPassesAsItIs() throws {
        let image = Self.noise(width: 96, height: 96)
        let result = Self.check.decide(image, detections: [Self.face(x: 0, y: 0, scale: 1)])
        #expect(result.refusal == nil)
        #expect(result.alignedCrop == nil, "a crop is kept as it is")
        #expect(result.measures.faces == 1 && abs(result.measures.faceHeight - 64) < 1e-9)
        #expect(abs(result.measures.brightness - 128) < 6)
        #expect(result.measures.sharpness > 1, "independent noise has a Laplacian variance of 20 times its variance")
    }

    @Test func eachReasonOnItsOwnImage() {
        let image = Self.noise(width: 96, height: 96)
        #expect(Self.check.decide(image, detections: []).refusal == .noFace)
        #expect(Self.check.decide(image, detections: [Self.face(x: 0, y: 0, scale: 1, score: 0.1)]).refusal == .noFace)

        let wide = Self.noise(width: 200, height: 100)
        let pair = [Self.face(x: 0, y: 0, scale: 1), Self.face(x: 100, y: 2, scale: 0.95)]
        guard case .secondFace(let ratio) = Self.check.decide(wide, detections: pair).refusal else {
            Issue.record("two faces side by side are not refused as a second face")
            return
        }
        #expect(abs(ratio - 0.9025) < 1e-9)

        let tiny = Self.check.decide(
            Self.noise(width: 24, height: 24), detections: [Self.face(x: 0, y: 0, scale: 0.25)])
        #expect(tiny.refusal == .tooSmall(height: 16))

        let dark = Self.check.decide(
            Self.noise(width: 96, height: 96, level: 8, spread: 6), detections: [Self.face(x: 0, y: 0, scale: 1)])
        guard case .tooDark(let brightness) = dark.refusal else {
            Issue.record("a face of mean grey 8 is not refused as too dark: \(String(describing: dark.refusal))")
            return
        }
        #expect(abs(brightness - 8) < 1)

        // A smooth ramp has no detail: its Laplacian is zero inside.
        let ramp = Image(
            width: 96, height: 96, channels: 1, pixels: (0..<(96 * 96)).map { UInt8(40 + ($0 % 96)) })
        guard
            case .tooBlurry(let sharpness) = Self.check.decide(ramp, detections: [Self.face(x: 0, y: 0, scale: 1)])
                .refusal
        else {
            Issue.record("a ramp is not refused as too blurry")
            return
        }
        #expect(sharpness < 0.02)
    }

    /// A grey image blurred by `passes` passes of a 3x3 box filter (edges clamped).
    static func blurred(_ image: Image, passes: Int) -> Image {
        var values = image.pixels.map(Double.init)
        let (width, height) = (image.width, image.height)
        for _ in 0..<passes {
            var next = values
            for y in 0..<height {
                for x in 0..<width {
                    var sum = 0.0
                    for dy in -1...1 {
                        for dx in -1...1 {
                            sum += values[min(max(y + dy, 0), height - 1) * width + min(max(x + dx, 0), width - 1)]
                        }
                    }
                    next[y * width + x] = sum / 9
                }
            }
            values = next
        }
        return Image(width: width, height: height, channels: 1, pixels: values.map { UInt8($0.rounded()) })
    }

    /// Blurring a drawn face lowers its sharpness step by step, to below the threshold at last.
    @Test func sharpnessFallsWithBlur() {
        let sample = SyntheticFaces.samples(
            for: SynthesisConfiguration(
                outputDirectory: URL(fileURLWithPath: "/unused"), userCount: 1, imagesPerUser: 1, seed: 2,
                imageSize: 96, nonFaceCount: 0, unknownIdentityCount: 0, imagesPerUnknownIdentity: 0))[0]
        let image = Image(
            width: 96, height: 96, channels: 3, pixels: SyntheticFaces.render(sample, seed: 2, size: 96).rgb
        ).converted(channels: 1)
        let face = Self.face(x: 0, y: 0, scale: 1)
        var previous = Double.infinity
        for passes in [0, 2, 4, 8, 16, 32] {
            let (sharpness, _) = FaceCheck.appearance(
                of: face, in: Self.blurred(image, passes: passes), template: .celebaMean96)
            #expect(sharpness < previous, "after \(passes) passes")
            previous = sharpness
        }
        #expect(previous < FaceCheckThresholds.standard.minimumSharpness, "32 passes of a box blur")
    }

    /// A face small in a large photo is cut out: its landmarks land on the template of the crop.
    @Test func aPhotoIsCutToItsFacesAlignedCrop() throws {
        let photo = Self.noise(width: 640, height: 480)
        let face = Self.face(x: 300, y: 200, scale: 1.5)
        let result = Self.check.decide(photo, detections: [face])
        #expect(result.refusal == nil)
        let crop = try #require(result.alignedCrop)
        #expect(crop.width == Self.check.cropSide && crop.height == Self.check.cropSide)
        let transform = try #require(
            FaceAlignment.transform(
                landmarks: face.landmarks, template: Self.check.template, side: Self.check.cropSide))
        for (point, target) in zip(face.landmarks, Self.check.template.points(side: Self.check.cropSide)) {
            let moved = transform.apply(point)
            #expect(abs(moved.x - target.x) < 1 && abs(moved.y - target.y) < 1)
        }
        #expect(crop == FaceAlignment.warp(photo, transform: transform, side: Self.check.cropSide)?.image)
    }

    /// The face check's padding, laid straight into the network's input: the image at its offset,
    /// the canvas around it the byte mid-grey (127), right and below the canvas the stride's 127.5,
    /// each normalised alike; a grey image feeds all three channels.
    @Test func paddingIsMidGreyAroundTheImage() {
        let spec = InputSpecification(width: 32, height: 32, channels: 3)
        func value(_ raw: Float, _ channel: Int) -> Float { raw * spec.scale + spec.bias[channel] }
        let image = Image(width: 2, height: 1, channels: 3, pixels: [10, 20, 30, 40, 50, 60])
        let input = DetectorInput(
            photo: image, left: 1, top: 1, canvasWidth: 4, canvasHeight: 3,
            canvasValue: Float(FaceDetector.paddingGrey), stride: 4, input: spec)
        #expect(input.tensor.shape == [1, 3, 4, 4])
        let scalars = input.tensor.scalars
        for channel in 0..<3 {
            let plane = Array(scalars[channel * 16..<(channel + 1) * 16])
            #expect(
                plane[5] == value(Float(10 + 10 * channel), channel)
                    && plane[6] == value(Float(40 + 10 * channel), channel))
            for index in [0, 3, 4, 7, 8, 11] { #expect(plane[index] == value(127, channel), "canvas \(index)") }
            for index in 12..<16 { #expect(plane[index] == value(127.5, channel), "below the canvas \(index)") }
        }
        let grey = DetectorInput(
            photo: Image(width: 1, height: 1, channels: 1, pixels: [200]), left: 0, top: 0, canvasWidth: 1,
            canvasHeight: 1, canvasValue: 127, stride: 2, input: spec)
        #expect((0..<3).map { grey.tensor.scalars[$0 * 4] } == (0..<3).map { value(200, $0) })
    }

    /// The builtin detector passes the demo's drawn faces and refuses blank images and the demo's
    /// non-faces; rates with margin, as `make demo` needs them.
    @Test func theBuiltinDetectorPassesSyntheticFacesAndRefusesNonFaces() {
        let configuration = SynthesisConfiguration(
            outputDirectory: URL(fileURLWithPath: "/unused"), userCount: 8, imagesPerUser: 5, seed: 5, imageSize: 64,
            nonFaceCount: 30, unknownIdentityCount: 2, imagesPerUnknownIdentity: 5)
        let samples = SyntheticFaces.samples(for: configuration)
        let images = samples.map { sample in
            Image(
                width: 64, height: 64, channels: 3,
                pixels: SyntheticFaces.render(sample, seed: configuration.seed, size: 64).rgb)
        }
        let verdicts = Self.check.map(images.count) { check, index in check.examine(images[index]).accepted }
        let faces = samples.indices.filter { samples[$0].label != SyntheticFaces.nonFaceLabel }
        let nonFaces = samples.indices.filter { samples[$0].label == SyntheticFaces.nonFaceLabel }
        let facesPassed = faces.filter { verdicts[$0] }.count
        let nonFacesPassed = nonFaces.filter { verdicts[$0] }.count
        #expect(Double(facesPassed) >= 0.9 * Double(faces.count), "\(facesPassed) of \(faces.count) faces pass")
        #expect(nonFacesPassed <= 1, "\(nonFacesPassed) of \(nonFaces.count) non-faces pass")
        var check = Self.check
        let blank = Image(width: 64, height: 64, channels: 3, pixels: [UInt8](repeating: 90, count: 64 * 64 * 3))
        #expect(check.examine(blank).refusal == .noFace)
    }

    /// A large crop is decided at the first, small look, with the verdict the same face gets at
    /// 64 px; a face small in a large photo is looked at again at full size, found and cut out.
    @Test func aLargeCropIsDecidedAtAGlanceAndAPhotoAtFullSize() throws {
        let configuration = SynthesisConfiguration(
            outputDirectory: URL(fileURLWithPath: "/unused"), userCount: 6, imagesPerUser: 4, seed: 5, imageSize: 64,
            nonFaceCount: 0, unknownIdentityCount: 0, imagesPerUnknownIdentity: 1)
        let samples = SyntheticFaces.samples(for: configuration)
        func drawn(_ sample: SyntheticSample, _ size: Int) -> Image {
            Image(
                width: size, height: size, channels: 3,
                pixels: SyntheticFaces.render(sample, seed: configuration.seed, size: size).rgb)
        }
        let small = Self.check.map(samples.count) { check, index in check.examine(drawn(samples[index], 64)) }
        let large = Self.check.map(samples.count) { check, index in check.examine(drawn(samples[index], 400)) }
        let glanced = large.filter(\.glanced).count
        #expect(Double(glanced) >= 0.9 * Double(samples.count), "\(glanced) of \(samples.count) decided at a glance")
        let disagreements = zip(small, large).filter { $0.accepted != $1.accepted }.count
        #expect(disagreements <= 1, "\(disagreements) of \(samples.count) faces judged differently at 400 px")
        // Without the small look (recognition's way) a large crop's face is still found, later,
        // and still fills it: recognition classifies such a crop whole, as the app does.
        let found = Self.check.map(samples.count) { check, index in
            var detector = check.detector
            let look = FaceCheck.look(
                at: drawn(samples[index], 400), by: &detector, thresholds: check.thresholds, glance: false)
            return !look.glanced && check.thresholds.isCrop(look.detections, imageHeight: 400)
        }
        #expect(
            Double(found.filter { $0 }.count) >= 0.9 * Double(samples.count),
            "\(found.filter { $0 }.count) of \(samples.count) found filling the crop without the small look")

        // A 96-px drawn face on a 640 x 480 quiet grey photo: 14 % of its height, so not a crop.
        let face = drawn(samples[0], 96)
        var pixels = Self.noise(width: 640, height: 480, spread: 8).converted(channels: 3).pixels
        for row in 0..<96 {
            for column in 0..<(96 * 3) {
                pixels[((200 + row) * 640 + 300) * 3 + column] = face.pixels[row * 96 * 3 + column]
            }
        }
        var check = Self.check
        let photo = check.examine(Image(width: 640, height: 480, channels: 3, pixels: pixels))
        #expect(!photo.glanced)
        #expect(photo.accepted, "\(String(describing: photo.refusal))")
        #expect(photo.alignedCrop != nil, "a photo passes as its face's aligned crop")
        #expect(try #require(photo.face).box.x > 290, "the face found is the one pasted at x = 300")
    }
}
