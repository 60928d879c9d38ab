import CVectorKernels
import Testing

@testable import FaceTrain
@testable import FaceTrainEngine

/// Winograd's F(4×4, 3×3) against im2col + GEMM, the convolution every other path is checked with:
/// outputs, weight, bias and input gradients, on even and odd planes, paddings 0-2, and a weight
/// gradient summed in the transform domain over several images.
@Suite struct WinogradTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var geometry: ConvolutionGeometry
        var outputChannels: Int
        var testDescription: String {
            let g = geometry
            return "\(g.channels)->\(outputChannels) \(g.height)x\(g.width) pad \(g.padding)"
        }
    }

    static let cases = [
        Case(
            geometry: .init(channels: 8, height: 6, width: 6, kernelSize: 3, stride: 1, padding: 1), outputChannels: 5),
        Case(
            geometry: .init(channels: 8, height: 5, width: 7, kernelSize: 3, stride: 1, padding: 1), outputChannels: 3),
        Case(
            geometry: .init(channels: 9, height: 4, width: 5, kernelSize: 3, stride: 1, padding: 0), outputChannels: 4),
        Case(
            geometry: .init(channels: 8, height: 3, width: 3, kernelSize: 3, stride: 1, padding: 2), outputChannels: 2),
        Case(
            geometry: .init(channels: 16, height: 8, width: 8, kernelSize: 3, stride: 1, padding: 1), outputChannels: 12
        ),
        Case(
            geometry: .init(channels: 8, height: 3, width: 3, kernelSize: 3, stride: 1, padding: 1), outputChannels: 3),
        // The 80-pixel base's last planes: 10×10 (tiles overhang by 2) and 20×20 (a partial group).
        Case(
            geometry: .init(channels: 8, height: 10, width: 10, kernelSize: 3, stride: 1, padding: 1), outputChannels: 3
        ),
        Case(
            geometry: .init(channels: 8, height: 20, width: 20, kernelSize: 3, stride: 1, padding: 1), outputChannels: 2
        ),
        // More than one group of 4 tiles (16 columns) a row: whole groups, and a partial one after them.
        Case(
            geometry: .init(channels: 8, height: 32, width: 32, kernelSize: 3, stride: 1, padding: 1), outputChannels: 4
        ),
        Case(
            geometry: .init(channels: 8, height: 19, width: 37, kernelSize: 3, stride: 1, padding: 1), outputChannels: 3
        ),
        Case(
            geometry: .init(channels: 10, height: 18, width: 35, kernelSize: 3, stride: 1, padding: 0),
            outputChannels: 2),
        // Tile rows of 16 tiles (a vector of the AVX-512 output transform holds one whole row) and of
        // 18 (a vector's tiles span two rows), with a last tile row half full.
        Case(
            geometry: .init(channels: 8, height: 10, width: 64, kernelSize: 3, stride: 1, padding: 1), outputChannels: 3
        ),
        Case(
            geometry: .init(channels: 8, height: 14, width: 70, kernelSize: 3, stride: 1, padding: 1), outputChannels: 2
        ),
    ]

    static func close(_ a: [Float], _ b: [Float], _ what: String) {
        let scale = b.map { abs($0) }.max() ?? 1
        let worst = zip(a, b).map { abs($0 - $1) }.max() ?? 0
        #expect(a.count == b.count && worst <= 1e-5 * max(1, scale), "\(what): worst difference \(worst)")
        #expect(!a.contains { !$0.isFinite }, "\(what) has a non-finite entry")
    }

    @Test(arguments: cases)
    func matchesIm2colForwardAndBackward(_ testCase: Case) throws {
        let g = testCase.geometry
        let f = testCase.outputChannels
        let winograd = try #require(WinogradGeometry(g))
        let images = 3
        let (inputSize, outputSize) = (g.channels * g.inputPixels, f * g.outputPixels)
        let x = Floats(TestData.normal([images * inputSize], seed: 11).scalars)
        let weight = Floats(TestData.normal([f * g.patchSize], seed: 12).scalars)
        let bias = Floats(TestData.normal([f], seed: 13).scalars)
        let dy = Floats(TestData.normal([images * outputSize], seed: 14).scalars)

        // im2col: the reference.
        let columns = Floats(count: g.patchSize * g.outputPixels, repeating: 0)
        let columnGradient = Floats(count: columns.count, repeating: 0)
        let expectedOutput = Floats(count: images * outputSize, repeating: 0)
        let expectedWeightGradient = Floats(count: weight.count, repeating: 0)
        let expectedBiasGradient = Floats(count: f, repeating: 0)
        let expectedInputGradient = Floats(count: x.count, repeating: 0)
        for image in 0..<images {
            convolutionForward(
                image: x.pointer + image * inputSize, geometry: g, outputChannels: f, weight: weight.pointer,
                bias: bias.pointer, columns: columns.pointer, output: expectedOutput.pointer + image * outputSize)
            convolutionBackward(
                image: x.pointer + image * inputSize, geometry: g, outputChannels: f, weight: weight.pointer,
                outputGradient: dy.pointer + image * outputSize, columns: columns.pointer,
                columnGradient: columnGradient.pointer, weightGradient: expectedWeightGradient.pointer,
                biasGradient: expectedBiasGradient.pointer,
                inputGradient: expectedInputGradient.pointer + image * inputSize)
        }

        // Winograd, with NaN-filled scratch and outputs: every entry it should write, it writes;
        // one image a group, and all three in one group (the products then span their tiles).
        for group in [1, images] {
            let transformed = Floats(
                count: winogradFilterSize(outputChannels: f, inputChannels: g.channels), repeating: .nan)
            winogradFilterTransform(
                weight: weight.pointer, outputChannels: f, inputChannels: g.channels, transformed: transformed.pointer)
            let scratch = Floats(
                count: winogradScratchSize(winograd, outputChannels: f, images: group), repeating: .nan)
            let output = Floats(count: images * outputSize, repeating: .nan)
            let transformedGradient = Floats(count: transformed.count, repeating: 0)
            let weightGradient = Floats(count: weight.count, repeating: 0)
            let biasGradient = Floats(count: f, repeating: 0)
            let inputGradient = Floats(count: x.count, repeating: .nan)
            for first in stride(from: 0, to: images, by: group) {
                let count = min(group, images - first)
                winogradConvolutionForward(
                    images: x.pointer + first * inputSize, count: count, geometry: winograd, outputChannels: f,
                    transformedWeight: transformed.pointer, bias: bias.pointer, scratch: scratch.pointer,
                    output: output.pointer + first * outputSize)
                winogradConvolutionBackward(
                    images: x.pointer + first * inputSize, count: count, geometry: winograd, outputChannels: f,
                    transformedWeight: transformed.pointer, outputGradient: dy.pointer + first * outputSize,
                    scratch: scratch.pointer, transformedWeightGradient: transformedGradient.pointer,
                    biasGradient: biasGradient.pointer, inputGradient: inputGradient.pointer + first * inputSize)
            }
            winogradFilterGradient(
                transformedGradient: transformedGradient.pointer, outputChannels: f, inputChannels: g.channels,
                weightGradient: weightGradient.pointer)

            Self.close(output.array, expectedOutput.array, "output, groups of \(group)")
            Self.close(weightGradient.array, expectedWeightGradient.array, "weight gradient, groups of \(group)")
            Self.close(biasGradient.array, expectedBiasGradient.array, "bias gradient, groups of \(group)")
            Self.close(inputGradient.array, expectedInputGradient.array, "input gradient, groups of \(group)")
        }
    }

    /// Through the fused blocks, where a chunk's images go through Winograd in groups (a 32×32 plane
    /// has 64 tiles, so 2 images a group and a partial last group in a chunk of 3; a 16×16 plane, 8
    /// a group): logits and every gradient equal the public layers' one by one (im2col).
    @Test func fusedBlocksInGroupsMatchLayerByLayer() throws {
        let layers: [LayerSpecification] = [
            .conv2D(inputChannels: 3, outputChannels: 8, kernelSize: 3, stride: 1, padding: 1),
            .batchNorm2D(channels: 8, epsilon: 1e-5, momentum: 0.1), .relu,
            .conv2D(inputChannels: 8, outputChannels: 8, kernelSize: 3, stride: 1, padding: 1),
            .batchNorm2D(channels: 8, epsilon: 1e-5, momentum: 0.1), .relu, .maxPool2D(size: 2, stride: 2),
            .conv2D(inputChannels: 8, outputChannels: 12, kernelSize: 3, stride: 1, padding: 1),
            .batchNorm2D(channels: 12, epsilon: 1e-5, momentum: 0.1), .relu, .globalAveragePool,
            .linear(inputFeatures: 12, outputFeatures: 3),
        ]
        let definition = ModelDefinition(
            input: InputSpecification(width: 32, height: 32, channels: 3), layers: layers, classLabels: ["a", "b", "c"])
        let images = TestData.normal([5, 3, 32, 32], seed: 51)
        let labels = [0, 2, 1, 2, 0]
        var network = try Network(definition: definition, seed: 5)
        var plain = network.layers
        let logits = network.forward(images, mode: .training)
        var x = images
        for index in plain.indices { x = plain[index].forward(x, mode: .training) }
        #expect(GradientCheck.relativeError(logits.scalars, x.scalars.map(Double.init)) < 1e-5)

        let gradient = SoftmaxCrossEntropy().lossAndGradient(logits: logits, labels: labels).logitsGradient
        network.backward(gradient)
        var dx = gradient
        for index in plain.indices.reversed() { dx = plain[index].backward(dx) }
        for (index, (fused, layer)) in zip(network.layers, plain).enumerated() {
            for (a, b) in zip(fused.parameters, layer.parameters) {
                let error = GradientCheck.relativeError(a.gradient.scalars, b.gradient.scalars.map(Double.init))
                let size = b.gradient.scalars.map { abs($0) }.max() ?? 0
                let difference = zip(a.gradient.scalars, b.gradient.scalars).map { abs($0 - $1) }.max() ?? 0
                // A convolution's bias before a batch norm has a zero gradient but for rounding
                // (~1e-7 here), whose relative error says nothing: both must be about zero.
                #expect(
                    error < 1e-4 || (size < 1e-5 && difference < 1e-6),
                    "layer \(index) \(a.name): relative error \(error), largest entry \(size)")
            }
        }
        let inferred = network.forward(images, mode: .inference)
        var y = images
        for index in plain.indices { y = plain[index].forward(y, mode: .inference) }
        #expect(GradientCheck.relativeError(inferred.scalars, y.scalars.map(Double.init)) < 1e-5)
    }

    /// The C transforms (CVectorKernels, every set this CPU runs: AVX-512 and AVX2) give the
    /// portable Swift ones' bits: V and the output for every channel and a range of them, and the
    /// output with the block's normalisation, ReLU and 2×2 max-pool folded in against the Swift
    /// output transform followed by the Swift activation kernels. Buffers start as NaN, so a value
    /// a path leaves unwritten shows. Without AVX2 on this CPU the engine must not choose them,
    /// which is all there is to check.
    @Test(arguments: cases)
    func vectorTransformsGiveThePortableBits(_ testCase: Case) throws {
        guard VectorKernels.available >= .avx2 else {
            #expect(!VectorKernels.vectorized)
            return
        }
        let sets = VectorKernels.Level.allCases.filter { $0 <= VectorKernels.available }
        let g = testCase.geometry
        let f = testCase.outputChannels
        let winograd = try #require(WinogradGeometry(g))
        let images = 2
        let x = Floats(TestData.normal([g.channels * g.inputPixels], seed: 21).scalars)
        let plane = Floats(count: winograd.paddedPlaneSize, repeating: 0)
        func bits(_ values: Floats) -> [UInt32] { values.array.map(\.bitPattern) }
        for channels in [0..<g.channels, 1..<g.channels - 1] {
            var transforms: [[UInt32]] = []
            for kernels in sets {
                let v = Floats(count: winograd.inputTransformSize(images: images), repeating: .nan)
                // This image as the second of a group, to check the strides.
                winogradInputTransform(
                    image: x.pointer, geometry: winograd, images: images, padded: plane.pointer,
                    transformed: v.pointer + winograd.columns, channels: channels, kernels: kernels)
                transforms.append(bits(v))
            }
            for index in 1..<sets.count {
                #expect(transforms[index] == transforms[0], "V, channels \(channels), \(sets[index].name)")
            }
        }

        let m = Floats(
            TestData.normal([winograd.outputTransformSize(outputChannels: f, images: images)], seed: 22).scalars)
        let bias = Floats(TestData.normal([f], seed: 23).scalars)
        let scale = Floats(TestData.normal([f], seed: 24).scalars)
        let shift = Floats(TestData.normal([f], seed: 25).scalars)
        let (h, w) = (g.outputHeight, g.outputWidth)
        for channels in [0..<f, f / 2..<f] {
            var outputs: [[UInt32]] = []
            for kernels in sets {
                let y = Floats(count: f * h * w, repeating: .nan)
                winogradOutputTransform(
                    transformed: m.pointer + winograd.columns, geometry: winograd, images: images, outputChannels: f,
                    bias: bias.pointer, output: y.pointer, channels: channels, kernels: kernels)
                outputs.append(bits(y))
            }
            for index in 1..<sets.count {
                #expect(outputs[index] == outputs[0], "output, channels \(channels), \(sets[index].name)")
            }
        }
        for pool in h % 2 == 0 && w % 2 == 0 ? [false, true] : [false] {
            let convolution = Floats(count: f * h * w, repeating: .nan)
            winogradOutputTransform(
                transformed: m.pointer, geometry: winograd, images: images, outputChannels: f, bias: bias.pointer,
                output: convolution.pointer, kernels: .portable)
            let size = pool ? f * (h / 2) * (w / 2) : f * h * w
            let expected = Floats(count: size, repeating: .nan)
            if pool {
                normalizeReLUMaxPool2x2(
                    convolution.pointer, channels: f, height: h, width: w, scale: scale.pointer, shift: shift.pointer,
                    output: expected.pointer, argmax: nil)
            } else {
                normalizeReLU(
                    convolution.pointer, channels: f, pixels: h * w, scale: scale.pointer, shift: shift.pointer,
                    output: expected.pointer)
            }
            for kernels in sets.dropFirst() {
                let folded = Floats(count: size, repeating: .nan)
                winogradOutputTransform(
                    transformed: m.pointer, geometry: winograd, images: images, outputChannels: f, bias: bias.pointer,
                    output: folded.pointer,
                    activation: WinogradActivation(scale: scale.pointer, shift: shift.pointer, pool: pool),
                    kernels: kernels)
                #expect(bits(folded) == bits(expected), "activation folded in, pool \(pool), \(kernels.name)")
            }
        }
    }

    /// The C products on packed U (AVX-512 and AVX2, whichever this CPU runs) against OpenBLAS's,
    /// one position after another: row counts below, at and past the 12-row blocks (and past 24,
    /// the one-vector kernel's), column counts of one partial vector, two, and several with a
    /// partial last, several channel counts. Within float rounding of OpenBLAS (different sums);
    /// the same bits as each other, and when the rows are split at a block.
    @Test(arguments: [(5, 8, 12), (12, 9, 16), (13, 16, 28), (30, 33, 100), (64, 32, 12), (40, 24, 36), (7, 5, 7)])
    func packedProductsMatchOpenBLAS(_ shape: (outputChannels: Int, channels: Int, columns: Int)) throws {
        guard VectorKernels.available >= .avx2 else {
            #expect(!VectorKernels.vectorized)
            return
        }
        let (f, c, n) = shape
        let (uStride, vStride, mStride) = (
            winogradPositionStride(f * c), winogradPositionStride(c * n), winogradPositionStride(f * n)
        )
        let u = Floats(TestData.normal([winogradPositions * uStride], seed: 31).scalars)
        let v = Floats(TestData.normal([winogradPositions * vStride], seed: 32).scalars)
        let expected = Floats(count: winogradPositions * mStride, repeating: .nan)
        for xi in 0..<winogradPositions {
            gemm(
                transposeA: false, transposeB: false, m: f, n: n, k: c, a: u.pointer + xi * uStride,
                b: v.pointer + xi * vStride, c: expected.pointer + xi * mStride)
        }
        let packed = Floats(count: facetrain_winograd_packed_size(f, c), repeating: .nan)
        facetrain_winograd_pack(u.pointer, uStride, f, c, packed.pointer)
        let kernels =
            VectorKernels.available == .avx512
            ? [facetrain_winograd_products_avx512, facetrain_winograd_products_avx2]
            : [facetrain_winograd_products_avx2]
        var results: [[UInt32]] = []
        for products in kernels {
            let whole = Floats(count: expected.count, repeating: .nan)
            products(packed.pointer, f, v.pointer, vStride, whole.pointer, mStride, c, n, 0, f)
            var worst: Float = 0
            for xi in 0..<winogradPositions {
                for index in 0..<f * n {
                    let (a, b) = (whole.pointer[xi * mStride + index], expected.pointer[xi * mStride + index])
                    worst = max(worst, abs(a - b) / max(1, abs(b)))
                }
            }
            #expect(worst < 1e-5, "largest relative difference \(worst)")
            let split = Floats(count: expected.count, repeating: .nan)
            let block = Int(FACETRAIN_WINOGRAD_ROW_BLOCK)
            let middle = min(f, block)
            products(packed.pointer, f, v.pointer, vStride, split.pointer, mStride, c, n, 0, middle)
            products(packed.pointer, f, v.pointer, vStride, split.pointer, mStride, c, n, middle, f)
            #expect(split.array.map(\.bitPattern) == whole.array.map(\.bitPattern))
            results.append(whole.array.map(\.bitPattern))
        }
        #expect(results.allSatisfy { $0 == results[0] }, "AVX-512 and AVX2 give the same bits")
    }

    /// Inference band by band (a large plane's V and M kept in cache) gives the whole image's bits:
    /// bands of 1-3 tile rows, a last band shorter, tile rows shared by two workers at a band's middle,
    /// with the bias alone, with normalisation and ReLU folded in, and with the 2×2 pool too; and
    /// `bandRows` bands only planes whose V and M pass the budget.
    @Test(arguments: [
        (16, 40, 52, 1, 24), (8, 37, 45, 1, 5), (10, 18, 35, 0, 13), (12, 30, 30, 2, 12), (8, 26, 150, 1, 6),
    ])
    func bandsGiveTheWholeImageBits(_ shape: (channels: Int, height: Int, width: Int, padding: Int, f: Int)) throws {
        // The whole image's reference runs the engine's own set; with the portable kernels (a CPU
        // without AVX2, or FACETRAIN_VECTOR_KERNELS=portable) the engine never bands or folds.
        guard VectorKernels.vectorized else { return }
        let g = ConvolutionGeometry(
            channels: shape.channels, height: shape.height, width: shape.width, kernelSize: 3, stride: 1,
            padding: shape.padding)
        let f = shape.f
        let winograd = try #require(WinogradGeometry(g))
        let x = Floats(TestData.normal([g.channels * g.inputPixels], seed: 81).scalars)
        let weight = TestData.normal([f * g.patchSize], seed: 82).scalars
        let bias = Floats(TestData.normal([f], seed: 83).scalars)
        let scale = Floats(TestData.normal([f], seed: 84).scalars)
        let shift = Floats(TestData.normal([f], seed: 85).scalars)
        let u = Floats(count: winogradFilterSize(outputChannels: f, inputChannels: g.channels), repeating: .nan)
        weight.withUnsafeBufferPointer {
            winogradFilterTransform(
                weight: $0.baseAddress!, outputChannels: f, inputChannels: g.channels, transformed: u.pointer)
        }
        let packed = Floats(count: facetrain_winograd_packed_size(f, g.channels), repeating: .nan)
        facetrain_winograd_pack(
            u.pointer, winogradFilterStride(outputChannels: f, inputChannels: g.channels), f, g.channels, packed.pointer
        )
        let (h, w) = (g.outputHeight, g.outputWidth)
        let pools = h % 2 == 0 && w % 2 == 0 ? [false, true] : [false]
        let activations: [WinogradActivation?] =
            [nil] + pools.map { WinogradActivation(scale: scale.pointer, shift: shift.pointer, pool: $0) }
        for activation in activations {
            let size = activation?.pool == true ? f * (h / 2) * (w / 2) : f * h * w
            let whole = Floats(count: size, repeating: .nan)
            let scratch = Floats(count: winogradScratchSize(winograd, outputChannels: f, images: 1), repeating: .nan)
            winogradConvolutionForward(
                images: x.pointer, count: 1, geometry: winograd, outputChannels: f, transformedWeight: packed.pointer,
                packed: true, bias: bias.pointer, scratch: scratch.pointer, activation: activation,
                output: whole.pointer)
            // Every C set this CPU runs, against the whole image on the engine's own (their bits agree).
            for kernels in VectorKernels.Level.allCases where kernels >= .avx2 && kernels <= VectorKernels.available {
                for bandRows in 1...3 {
                    let banded = Floats(count: size, repeating: .nan)
                    let middle = winograd.tileRows / 2 + 1
                    for share in [0..<middle, middle..<winograd.tileRows] {
                        let work = Floats(
                            count: winogradBandScratchSize(winograd, outputChannels: f, bandRows: bandRows),
                            repeating: .nan)
                        winogradConvolutionForwardBands(
                            image: x.pointer, geometry: winograd, outputChannels: f, packedWeight: packed.pointer,
                            bias: bias.pointer, activation: activation, bandRows: bandRows, tileRows: share,
                            scratch: work.pointer, output: banded.pointer, kernels: kernels)
                    }
                    let folding = activation.map { $0.pool ? "pooled" : "folded" } ?? "none"
                    #expect(
                        banded.array.map(\.bitPattern) == whole.array.map(\.bitPattern),
                        "\(kernels.name): bands of \(bandRows), activation \(folding)")
                }
            }
        }
        let band = try #require(winograd.bandRows(outputChannels: 4096), "4,096 output channels pass the budget")
        #expect(band == 1)
        #expect(winograd.bandRows(outputChannels: 1) == nil, "a small plane of one output channel fits")
    }

    /// A batch smaller than the workers runs each image with all workers on it (Winograd split by
    /// channels, then output channels; im2col's and a pointwise product by output channels): every
    /// image alone gives what it gives among others, where one worker runs it whole, to float rounding
    /// (an OpenBLAS product of fewer rows may round differently: its Prescott and Haswell kernels do),
    /// and both match the layers one by one. Needs two workers (every machine facetrain is tested on
    /// has two cores).
    @Test func oneImageSharedByTheWorkersEqualsItsPlaceInABatch() throws {
        try #require(Parallel.workerCount > 1, "one worker: the shared path cannot run (FACETRAIN_THREADS=1?)")
        let layers: [LayerSpecification] = [
            .conv2D(inputChannels: 3, outputChannels: 9, kernelSize: 3, stride: 1, padding: 1),
            .batchNorm2D(channels: 9, epsilon: 1e-5, momentum: 0.1), .relu,
            .conv2D(inputChannels: 9, outputChannels: 13, kernelSize: 3, stride: 1, padding: 1),
            .batchNorm2D(channels: 13, epsilon: 1e-5, momentum: 0.1), .relu, .maxPool2D(size: 2, stride: 2),
            .conv2D(inputChannels: 13, outputChannels: 10, kernelSize: 1, stride: 1, padding: 0),
            .batchNorm2D(channels: 10, epsilon: 1e-5, momentum: 0.1), .relu,
            .conv2D(inputChannels: 10, outputChannels: 11, kernelSize: 3, stride: 1, padding: 1),
            .batchNorm2D(channels: 11, epsilon: 1e-5, momentum: 0.1), .relu, .globalAveragePool,
            .linear(inputFeatures: 11, outputFeatures: 3),
        ]
        let definition = ModelDefinition(
            input: InputSpecification(width: 36, height: 36, channels: 3), layers: layers, classLabels: ["a", "b", "c"])
        let count = Parallel.workerCount
        let images = TestData.normal([count, 3, 36, 36], seed: 61)
        var network = try Network(definition: definition, seed: 9)
        // A training step first, so that the running statistics are not the identity.
        var trainer = Trainer(network: network, optimizer: SGD(), learningRate: 0.1)
        try trainer.trainStep(images: images, labels: (0..<count).map { $0 % 3 })
        network = trainer.network
        Self.expectSharedEqualsBatchAndLayers(&network, images)
    }

    /// `network` on `images` in one batch equals its layers one by one, and each image alone (shared
    /// by the workers: other tests' forwards may run meanwhile, which would keep the default from
    /// sharing) equals its place in the batch, to float rounding.
    static func expectSharedEqualsBatchAndLayers(_ network: inout Network, _ images: Tensor) {
        network.imageSharing = .always
        let together = network.forward(images, mode: .inference)
        var plain = network.layers
        var y = images
        for index in plain.indices { y = plain[index].forward(y, mode: .inference) }
        #expect(GradientCheck.relativeError(together.scalars, y.scalars.map(Double.init)) < 1e-5)
        let count = images.shape[0]
        let (size, outputSize) = (images.scalars.count / count, together.scalars.count / count)
        for image in 0..<count {
            let alone = network.forward(
                Tensor(
                    shape: [1] + images.shape.dropFirst(),
                    scalars: Array(images.scalars[image * size..<(image + 1) * size])),
                mode: .inference)
            let expected = Array(together.scalars[image * outputSize..<(image + 1) * outputSize]).map(Double.init)
            #expect(GradientCheck.relativeError(alone.scalars, expected) < 1e-5, "image \(image)")
        }
    }

    /// A plane large enough to band (`WinogradGeometry.bandRows`) and a first layer run directly, in
    /// a batch (each image on one worker, band by band), alone (tile rows shared by the workers) and
    /// layer by layer: the same output to float rounding, pooled and not.
    @Test func largePlanesInBandsEqualTheLayersOneByOne() throws {
        try #require(Parallel.workerCount > 1, "one worker: the shared path cannot run (FACETRAIN_THREADS=1?)")
        let side = 200
        let layers: [LayerSpecification] = [
            .conv2D(inputChannels: 3, outputChannels: 8, kernelSize: 3, stride: 1, padding: 1),
            .batchNorm2D(channels: 8, epsilon: 1e-5, momentum: 0.1), .relu,
            .conv2D(inputChannels: 8, outputChannels: 16, kernelSize: 3, stride: 1, padding: 1),
            .batchNorm2D(channels: 16, epsilon: 1e-5, momentum: 0.1), .relu,
            .conv2D(inputChannels: 16, outputChannels: 16, kernelSize: 3, stride: 1, padding: 1),
            .batchNorm2D(channels: 16, epsilon: 1e-5, momentum: 0.1), .relu, .maxPool2D(size: 2, stride: 2),
            .conv2D(inputChannels: 16, outputChannels: 4, kernelSize: 1, stride: 1, padding: 0),
        ]
        let definition = ModelDefinition(
            input: InputSpecification(width: side, height: side, channels: 3), layers: layers, classLabels: [])
        let g = ConvolutionGeometry(channels: 8, height: side, width: side, kernelSize: 3, stride: 1, padding: 1)
        #expect(try #require(WinogradGeometry(g)).bandRows(outputChannels: 16) != nil, "the plane is banded")
        let count = Parallel.workerCount
        let images = TestData.normal([count, 3, side, side], seed: 91)
        // Fresh running statistics: normalisation is an affine map all the same, folded or not.
        var network = try Network(definition: definition, seed: 5)
        Self.expectSharedEqualsBatchAndLayers(&network, images)
    }

    /// The blocks keep the transformed weights between forward passes only while the weights are
    /// the same: after an update (by hand, or a training step) inference equals a fresh network's.
    @Test func transformedWeightsFollowEveryUpdate() throws {
        let definition = ModelDefinition.referenceSmall(classLabels: ["1", "2", "3"], inputSize: 32, width: 8)
        let images = TestData.normal([2, 3, 32, 32], seed: 41)
        var network = try Network(definition: definition, seed: 7)
        let before = network.forward(images, mode: .inference)
        #expect(network.forward(images, mode: .inference) == before)
        network.updateParameters { key, parameter in
            // In place: the array the blocks compare with shares this storage until it is written.
            guard key.hasSuffix("conv2d.weight") else { return }
            for index in parameter.value.scalars.indices { parameter.value.scalars[index] *= 1.5 }
        }
        let after = network.forward(images, mode: .inference)
        var fresh = try Network(definition: definition, weights: network.weights)
        #expect(after == fresh.forward(images, mode: .inference))
        #expect(after != before)

        var trainer = Trainer(network: network, optimizer: SGD(), learningRate: 0.1)
        try trainer.trainStep(images: images, labels: [0, 2])
        var trained = trainer.network
        var restored = try Network(definition: definition, weights: trained.weights)
        #expect(trained.forward(images, mode: .inference) == restored.forward(images, mode: .inference))
    }

    /// Weights transformed ahead (`prepareForInference`, what the server's detector and predictors
    /// do once) give what a fresh network gives, in a copy as in the original, and an update after
    /// them is followed like any other.
    @Test func preparedWeightsGiveTheFreshResultsAndFollowUpdates() throws {
        let definition = ModelDefinition.referenceSmall(classLabels: ["1", "2", "3"], inputSize: 32, width: 8)
        let images = TestData.normal([2, 3, 32, 32], seed: 43)
        var network = try Network(definition: definition, seed: 8)
        network.prepareForInference()
        var copy = network
        var fresh = try Network(definition: definition, weights: network.weights)
        let expected = fresh.forward(images, mode: .inference)
        #expect(copy.forward(images, mode: .inference) == expected)
        #expect(network.forward(images, mode: .inference) == expected)
        network.prepareForInference()
        network.updateParameters { key, parameter in
            guard key.hasSuffix("conv2d.weight") else { return }
            // Not a common factor, which the embedding's normalisation would cancel.
            for index in parameter.value.scalars.indices { parameter.value.scalars[index] *= index % 3 == 0 ? -1 : 0.5 }
        }
        var updated = try Network(definition: definition, weights: network.weights)
        let after = network.forward(images, mode: .inference)
        #expect(after == updated.forward(images, mode: .inference))
        #expect(after != expected)
    }

    /// Kernels other than 3×3 stride 1, thin inputs and tiny planes stay with im2col.
    @Test func onlyThreeByThreeStrideOneOverEnoughChannels() {
        let base = ConvolutionGeometry(channels: 8, height: 8, width: 8, kernelSize: 3, stride: 1, padding: 1)
        #expect(WinogradGeometry(base) != nil)
        var g = base
        g.stride = 2
        #expect(WinogradGeometry(g) == nil)
        g = base
        g.kernelSize = 5
        g.padding = 2
        #expect(WinogradGeometry(g) == nil)
        g = base
        g.channels = 3
        #expect(WinogradGeometry(g) == nil)
        g = base
        g.padding = 3
        #expect(WinogradGeometry(g) == nil)
        // Planes of 2×2 or less: one tile's 36 products cost more than im2col's 9 per output.
        g = base
        (g.height, g.width) = (2, 2)
        #expect(WinogradGeometry(g) == nil)
        (g.height, g.width) = (3, 3)
        #expect(WinogradGeometry(g) != nil)
    }
}

/// Floats at a fixed address for the kernels under test, freed with the object.
private final class Floats {
    let pointer: UnsafeMutablePointer<Float>
    let count: Int
    init(_ values: [Float]) {
        count = values.count
        pointer = .allocate(capacity: max(1, count))
        pointer.initialize(from: values, count: count)
    }
    convenience init(count: Int, repeating value: Float) { self.init([Float](repeating: value, count: count)) }
    var array: [Float] { Array(UnsafeBufferPointer(start: pointer, count: count)) }
    deinit { pointer.deallocate() }
}
