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

    /// `strides` lists the heads' strides in the order of the network's outputs.
    package init(model: TrainedModel, strides: [Int], maximumSide: Int = 640) {
        // The model comes from a checked detector file or a training run: its weights fit.
        network = try! Network(model: model)
        self.strides = strides
        self.maximumSide = maximumSide
    }

    /// The faces in `photo` with a score of at least `scoreFloor`, best first.
    package mutating func detect(in photo: Image, scoreFloor: Double) -> [Detection] {
        let input = DetectorInput(
            photo: photo, maximumSide: maximumSide, stride: strides.max() ?? 32, input: network.definition.input)
        let heads = network.forwardOutputs(input.tensor, mode: .inference)
        var decoder = DetectionDecoder()
        decoder.scoreFloor = scoreFloor
        return decoder.decode(heads: heads, image: 0, letterbox: input.placement)
    }
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
