/// Nearest-neighbour upsampling: every value of each channel repeated into a factor × factor block
/// (factor 2 only, the one the kernels and exports take). An FPN's top-down path; not a learnt
/// (transposed) convolution and not an interpolating resize.
///
/// Shapes: input [N, C, H, W]; output [N, C, 2H, 2W]. Backward sums each 2×2 block of dY.
public struct Upsample: Layer {
    public let factor: Int
    private var inputShape: [Int] = []

    public init(factor: Int = 2) {
        self.factor = factor
    }

    public var specification: LayerSpecification { .upsample(factor: factor) }

    public mutating func forward(_ input: Tensor, mode: Mode) -> Tensor {
        precondition(
            factor == 2 && input.shape.count == 4, "Upsample takes [N, C, H, W] by factor 2, got \(input.shape)")
        let (planes, height, width) = (input.shape[0] * input.shape[1], input.shape[2], input.shape[3])
        inputShape = input.shape
        return input.scalars.withUnsafeBufferPointer { x in
            Tensor(shape: [input.shape[0], input.shape[1], 2 * height, 2 * width]) { y in
                nearestUpsample2x(x.baseAddress!, planes: planes, height: height, width: width, output: y)
            }
        }
    }

    public mutating func backward(_ outputGradient: Tensor) -> Tensor {
        let (planes, height, width) = (inputShape[0] * inputShape[1], inputShape[2], inputShape[3])
        return outputGradient.scalars.withUnsafeBufferPointer { dy in
            Tensor(shape: inputShape) { dx in
                nearestUpsample2xBackward(
                    dy.baseAddress!, planes: planes, height: height, width: width, inputGradient: dx)
            }
        }
    }
}

// MARK: - The kind

extension Upsample {
    /// `upsample` in the manifest (format 3): ONNX Resize (nearest, asymmetric, floor) and Core ML
    /// upsample (mode NN).
    package struct Kind: LayerKind {
        package let factor: Int

        package var name: LayerKindName { .upsample }
        package var minimumFormatVersion: Int { 3 }
        package var upsamplingFactor: Int { factor }

        package func check(_ input: LayerInput) throws(LayerProblem) {
            _ = try input.featureMap()
            guard factor == 2 else {
                throw LayerProblem(
                    "it upsamples by \(factor), but only factor 2 is supported (use two layers of 2 for 4)")
            }
        }

        /// [C, factor·H, factor·W].
        package func outputShape(for inputShape: [Int]) -> [Int] {
            [inputShape[0], inputShape[1] * factor, inputShape[2] * factor]
        }

        package var summary: String { "Upsample x\(factor), nearest neighbour" }
        package var weightsFileAttributes: [WeightsFileAttribute] {
            [.integers("scale_factor", [factor, factor], scalar: false)]
        }
        package func makeLayer(using generator: inout SplitMix64) -> any Layer { Upsample(factor: factor) }
    }
}
