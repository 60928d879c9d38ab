import CVectorKernels
import Testing

@testable import FaceTrain
@testable import FaceTrainEngine

/// The C direct kernels inference runs on shallow layers (a network's first; AVX-512 and AVX2,
/// whichever this CPU runs), against im2col + GEMM: strides 1 and 2, paddings 0-2, planes narrower
/// and wider than a vector with ragged ends, output channels in and past a block of 8 and 16; the
/// same bits however rows and channels are split, and from both sets.
@Suite struct DirectConvolutionTests {
    static let cases: [(ConvolutionGeometry, Int)] = [
        // The detector's first layer on a photo's odd size, and the base's at 80 px.
        (ConvolutionGeometry(channels: 3, height: 37, width: 53, kernelSize: 3, stride: 2, padding: 1), 16),
        (ConvolutionGeometry(channels: 3, height: 20, width: 20, kernelSize: 3, stride: 1, padding: 1), 32),
        (ConvolutionGeometry(channels: 1, height: 5, width: 7, kernelSize: 3, stride: 1, padding: 1), 3),
        (ConvolutionGeometry(channels: 2, height: 9, width: 34, kernelSize: 3, stride: 2, padding: 0), 20),
        (ConvolutionGeometry(channels: 4, height: 6, width: 17, kernelSize: 3, stride: 1, padding: 2), 17),
        (ConvolutionGeometry(channels: 2, height: 11, width: 12, kernelSize: 5, stride: 2, padding: 2), 5),
        (ConvolutionGeometry(channels: 3, height: 2, width: 3, kernelSize: 3, stride: 2, padding: 1), 1),
        // Wider than one strip of 32 output columns, at stride 2 and 1.
        (ConvolutionGeometry(channels: 3, height: 14, width: 141, kernelSize: 3, stride: 2, padding: 1), 18),
        (ConvolutionGeometry(channels: 3, height: 9, width: 67, kernelSize: 3, stride: 1, padding: 1), 32),
        // 7 channels, 63 taps: the deepest it takes.
        (ConvolutionGeometry(channels: 7, height: 8, width: 40, kernelSize: 3, stride: 1, padding: 1), 9),
    ]

    @Test(arguments: cases)
    func matchesIm2colAndGEMM(_ g: ConvolutionGeometry, _ f: Int) throws {
        guard VectorKernels.available >= .avx2 else {
            #expect(!VectorKernels.vectorized)
            return
        }
        #expect(g.suitsDirectKernel)
        let image = TestData.normal([g.channels * g.inputPixels], seed: 71).scalars
        let weight = TestData.normal([f * g.patchSize], seed: 72).scalars
        let bias = TestData.normal([f], seed: 73).scalars
        var columns = [Float](repeating: .nan, count: g.patchSize * g.outputPixels)
        var expected = [Float](repeating: .nan, count: f * g.outputPixels)
        convolutionForward(
            image: image, geometry: g, outputChannels: f, weight: weight, bias: bias, columns: &columns,
            output: &expected)
        var results: [[UInt32]] = []
        for kernels in VectorKernels.Level.allCases where kernels >= .avx2 && kernels <= VectorKernels.available {
            var whole = [Float](repeating: .nan, count: expected.count)
            directConvolutionForward(
                image: image, geometry: g, weight: weight, bias: bias, channels: 0..<f, rows: 0..<g.outputHeight,
                output: &whole, kernels: kernels)
            let worst = zip(whole, expected).map { abs($0 - $1) / max(1, abs($1)) }.max() ?? 0
            #expect(!whole.contains { !$0.isFinite }, "\(kernels.name)")
            #expect(worst < 1e-5, "\(kernels.name): largest relative difference \(worst)")

            // Split into two row ranges and two channel ranges (the second starting inside a block).
            var split = [Float](repeating: .nan, count: expected.count)
            let (middleRow, middleChannel) = (g.outputHeight / 2, f / 2)
            for rows in [0..<middleRow, middleRow..<g.outputHeight] {
                for channels in [0..<middleChannel, middleChannel..<f] {
                    directConvolutionForward(
                        image: image, geometry: g, weight: weight, bias: bias, channels: channels, rows: rows,
                        output: &split, kernels: kernels)
                }
            }
            #expect(split.map(\.bitPattern) == whole.map(\.bitPattern), "\(kernels.name)")
            results.append(whole.map(\.bitPattern))
        }
        #expect(results.allSatisfy { $0 == results[0] }, "AVX-512 and AVX2 give the same bits")
    }

    /// The fused kernel (convolution, batch norm, ReLU and 2×2 max-pool in one pass) against the
    /// direct kernel followed by `normalizeReLUMaxPool2x2`: the same bits, whole or split by pooled
    /// rows and channels, on planes of odd and even sizes, wider and narrower than 32 columns (the
    /// 2x3 plane has no pooled row: nothing to write, and nothing written).
    @Test(.enabled(if: directPoolingFused, "the fused kernel runs with the AVX-512 kernels only"), arguments: cases)
    func pooledEqualsDirectThenPool(_ g: ConvolutionGeometry, _ f: Int) throws {
        let image = TestData.normal([g.channels * g.inputPixels], seed: 74).scalars
        let weight = TestData.normal([f * g.patchSize], seed: 75).scalars
        let bias = TestData.normal([f], seed: 76).scalars
        // Negative scales too: the normalisation must come before the maximum.
        let scale = TestData.normal([f], seed: 77).scalars
        let shift = TestData.normal([f], seed: 78).scalars
        let (pooledHeight, pooledWidth) = (g.outputHeight / 2, g.outputWidth / 2)
        var convolution = [Float](repeating: .nan, count: f * g.outputPixels)
        directConvolutionForward(
            image: image, geometry: g, weight: weight, bias: bias, channels: 0..<f, rows: 0..<g.outputHeight,
            output: &convolution)
        var expected = [Float](repeating: .nan, count: f * pooledHeight * pooledWidth)
        normalizeReLUMaxPool2x2(
            convolution, channels: f, height: g.outputHeight, width: g.outputWidth, scale: scale, shift: shift,
            output: &expected, argmax: nil)
        var whole = [Float](repeating: .nan, count: expected.count)
        directConvolutionPooledForward(
            image: image, geometry: g, weight: weight, bias: bias, scale: scale, shift: shift, channels: 0..<f,
            pooledRows: 0..<pooledHeight, output: &whole)
        #expect(whole.map(\.bitPattern) == expected.map(\.bitPattern))
        var split = [Float](repeating: .nan, count: expected.count)
        let (middleRow, middleChannel) = (pooledHeight / 2, f / 2)
        for rows in [0..<middleRow, middleRow..<pooledHeight] {
            for channels in [0..<middleChannel, middleChannel..<f] {
                directConvolutionPooledForward(
                    image: image, geometry: g, weight: weight, bias: bias, scale: scale, shift: shift,
                    channels: channels, pooledRows: rows, output: &split)
            }
        }
        #expect(split.map(\.bitPattern) == expected.map(\.bitPattern))
    }

    @Test func onlyShallowStrideOneOrTwoKernels() {
        func geometry(_ channels: Int, _ kernel: Int, _ stride: Int, _ padding: Int) -> ConvolutionGeometry {
            ConvolutionGeometry(
                channels: channels, height: 8, width: 8, kernelSize: kernel, stride: stride, padding: padding)
        }
        #expect(geometry(3, 3, 2, 1).suitsDirectKernel)
        #expect(geometry(7, 3, 1, 1).suitsDirectKernel)
        #expect(!geometry(8, 3, 1, 1).suitsDirectKernel)  // 72 taps
        #expect(!geometry(3, 3, 3, 1).suitsDirectKernel)
        #expect(!geometry(16, 1, 1, 0).suitsDirectKernel)  // pointwise: GEMM reads the image itself
        #expect(geometry(16, 1, 2, 0).suitsDirectKernel)  // a strided 1×1 reads every other pixel: not GEMM's
    }
}
