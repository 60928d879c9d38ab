import Dispatch
import FaceTrainEngine

/// Finds faces in a photo of any size: the letterboxed photo through the detector network, its
/// heads decoded into boxes, scores and landmarks, overlapping boxes suppressed, everything in the
/// photo's own pixels. Not training (DetectorTrainingSession) and not the files a detector is kept
/// in (DetectorModel). Holds the network's buffers, so `detect` is mutating; copy it per thread.
package struct FaceDetector: Sendable {
    private var network: Network
    package let strides: [Int]
    /// Photos with a longer side above this are shrunk to it first (the scale the detector learnt).
    package var maximumSide: Int

    /// The longer side photos are shrunk to: the scale of the photos the detector learnt from.
    package static let defaultMaximumSide = 640

    /// `strides` lists the heads' strides in the order of the network's outputs.
    package init(model: TrainedModel, strides: [Int], maximumSide: Int = defaultMaximumSide) {
        // The model comes from a checked detector file or a training run: its weights fit.
        network = try! Network(model: model)
        // Copies (one per request or thread) then share the transformed weights.
        network.prepareForInference()
        self.strides = strides
        self.maximumSide = maximumSide
    }

    /// The faces in `photo` with a score of at least `scoreFloor`, best first.
    package mutating func detect(in photo: Image, scoreFloor: Double, side: Int? = nil) -> [Detection] {
        detect(
            DetectorInput(
                photo: photo, maximumSide: side ?? maximumSide, stride: strides.max() ?? 32,
                input: network.definition.input),
            scoreFloor: scoreFloor)
    }

    private mutating func detect(_ input: DetectorInput, scoreFloor: Double) -> [Detection] {
        let heads = network.forwardOutputs(input.tensor, mode: .inference)
        var decoder = DetectionDecoder()
        decoder.scoreFloor = scoreFloor
        return decoder.decode(heads: heads, image: 0, letterbox: input.placement)
    }

    /// The faces of `image` with `padding` x its side of grey added on every side, in the image's
    /// own pixels: a tight crop's face touches the border, where the detector learnt no faces. The
    /// image is first shrunk so that, padded, it fits `side` (`maximumSide` unless given): the
    /// network's cost stays that of one such photo (a 640-px photo is seen at 427 px; crops that
    /// small are not shrunk).
    package mutating func detect(in image: Image, padding: Double, scoreFloor: Double, side: Int? = nil)
        -> [Detection]
    {
        guard padding > 0 else { return detect(in: image, scoreFloor: scoreFloor) }
        let maximumSide = side ?? maximumSide
        let longer = max(image.width, image.height)
        let room = Double(maximumSide) / (1 + 2 * padding)
        let shrink = Double(longer) > room ? room / Double(longer) : 1
        let shrunk =
            shrink < 1
            ? image.resized(
                width: max(1, Int((Double(image.width) * shrink).rounded())),
                height: max(1, Int((Double(image.height) * shrink).rounded())))
            : image
        // Rounded, a padded side could pass the limit by a pixel, which would cost the network a
        // whole stride (641 -> 672 columns): the padding gives way instead.
        func pad(_ side: Int) -> Int { max(0, min(Int((Double(side) * padding).rounded()), (maximumSide - side) / 2)) }
        let (padX, padY) = (pad(shrunk.width), pad(shrunk.height))
        // The padding laid straight into the network's input around the image (no padded copy).
        let input = DetectorInput(
            photo: shrunk.channels == 1 || shrunk.channels == 3 ? shrunk : shrunk.converted(channels: 3), left: padX,
            top: padY, canvasWidth: shrunk.width + 2 * padX, canvasHeight: shrunk.height + 2 * padY,
            canvasValue: Float(Self.paddingGrey), stride: strides.max() ?? 32, input: network.definition.input)
        let scaleX = Double(image.width) / Double(shrunk.width)
        let scaleY = Double(image.height) / Double(shrunk.height)
        return detect(input, scoreFloor: scoreFloor).map { found in
            func back(_ point: FacePoint) -> FacePoint {
                FacePoint(x: (point.x - Double(padX)) * scaleX, y: (point.y - Double(padY)) * scaleY)
            }
            let corner = back(FacePoint(x: found.box.x, y: found.box.y))
            return Detection(
                box: DetectionBox(
                    x: corner.x, y: corner.y, width: found.box.width * scaleX, height: found.box.height * scaleY),
                score: found.score, landmarks: found.landmarks.map(back))
        }
    }

    /// The grey around a padded image: mid-grey as a byte (what the padding was when it was an image).
    static let paddingGrey = UInt8(DetectionResampling.outsideValue.rounded(.down))
}

extension FaceDetector {
    /// The faces of every photo, the photos shared among the cores (one detector copy each: a copy
    /// has its own buffers), and each photo's time in seconds (letterbox, network, decoding, NMS).
    package func detect(in photos: [Image], scoreFloor: Double) -> (detections: [[Detection]], seconds: [Double]) {
        let results = UnsafeMutableBufferPointer<([Detection], Double)>.allocate(capacity: photos.count)
        results.initialize(repeating: ([], 0))
        defer {
            results.deinitialize()
            results.deallocate()
        }
        let box = UncheckedDetections(pointer: results.baseAddress!)
        let ranges = Parallel.ranges(photos.count, parts: Parallel.workerCount)
        Parallel.forEach(ranges.count) { part in
            var detector = self
            for index in ranges[part] {
                let started = DispatchTime.now().uptimeNanoseconds
                let found = detector.detect(in: photos[index], scoreFloor: scoreFloor)
                box.pointer[index] = (found, Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9)
            }
        }
        return (results.map(\.0), results.map(\.1))
    }

    private struct UncheckedDetections: @unchecked Sendable {
        let pointer: UnsafeMutablePointer<([Detection], Double)>
    }
}
