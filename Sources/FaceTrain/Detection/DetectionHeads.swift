import FaceTrainEngine
import Foundation

/// The layout of the detector's three head tensors and the cells (point priors) they describe:
/// which channel means what, where each cell's centre is, and how a cell's values become a box and
/// landmarks. Decoding, assignment and the loss all read the layout from here.
///
/// Not here: the network that produces the heads, score floors, NMS (DetectionDecoder).
///
/// Heads: `[N, 15, H/s, W/s]` for strides s = 8, 16, 32 (input H, W multiples of 32). Per cell (i, j)
/// with centre c = ((j + 0.5) s, (i + 0.5) s): channel 0 = score logit; 1-4 = t_l, t_t, t_r, t_b, the
/// distances s * exp(min(t, 6)) from c to the left, top, right and bottom edge; 5-14 = landmarks,
/// point k = c + s * (channel 5 + 2k, channel 6 + 2k).
package enum DetectionHeads {
    package static let strides = [8, 16, 32]
    package static let channelCount = 15
    package static let scoreChannel = 0
    package static let firstDistanceChannel = 1
    package static let firstLandmarkChannel = 5
    /// Distances are capped at s * e^6 (403 s): keeps exp finite while a head is still untrained.
    package static let maximumLogDistance = 6.0

    /// One level of the heads: its stride and grid.
    package struct Level: Sendable, Equatable {
        package var stride: Int
        package var rows: Int
        package var columns: Int

        package var cellCount: Int { rows * columns }

        /// The centre of cell `cell` (row-major index) in input pixels.
        package func centre(ofCell cell: Int) -> FacePoint {
            let row = cell / columns
            let column = cell % columns
            return FacePoint(x: (Double(column) + 0.5) * Double(stride), y: (Double(row) + 0.5) * Double(stride))
        }
    }

    /// The three levels of an input `height` x `width` pixels (both multiples of 32).
    package static func levels(inputHeight height: Int, inputWidth width: Int) -> [Level] {
        precondition(
            height > 0 && width > 0 && height % 32 == 0 && width % 32 == 0,
            "detector input must be a positive multiple of 32 on each side, got \(width)x\(height)")
        return strides.map { Level(stride: $0, rows: height / $0, columns: width / $0) }
    }

    /// The levels of three head tensors, checking that they describe one input size.
    package static func levels(of heads: [Tensor]) -> [Level] {
        precondition(heads.count == strides.count, "the detector has 3 heads (strides 8, 16, 32), got \(heads.count)")
        let first = heads[0].shape
        precondition(first.count == 4 && first[1] == channelCount, "head shape must be [N, 15, H/8, W/8], got \(first)")
        let levels = self.levels(inputHeight: first[2] * strides[0], inputWidth: first[3] * strides[0])
        for (head, level) in zip(heads, levels) {
            precondition(
                head.shape == [first[0], channelCount, level.rows, level.columns],
                "head at stride \(level.stride) has shape \(head.shape), expected "
                    + "\([first[0], channelCount, level.rows, level.columns]) for the same input and batch")
        }
        return levels
    }

    /// A cell's distance to one edge in pixels: s * exp(min(t, 6)).
    package static func distance(_ logit: Double, stride: Int) -> Double {
        Double(stride) * exp(min(logit, maximumLogDistance))
    }

    /// The box a cell predicts from its four distance values (left, top, right, bottom).
    package static func box(centre: FacePoint, distances t: [Double], stride: Int) -> DetectionBox {
        DetectionBox(
            left: centre.x - distance(t[0], stride: stride), top: centre.y - distance(t[1], stride: stride),
            right: centre.x + distance(t[2], stride: stride), bottom: centre.y + distance(t[3], stride: stride))
    }

    /// The landmark a cell predicts from its offset (u, v): c + s (u, v).
    package static func landmark(centre: FacePoint, u: Double, v: Double, stride: Int) -> FacePoint {
        FacePoint(x: centre.x + Double(stride) * u, y: centre.y + Double(stride) * v)
    }
}
