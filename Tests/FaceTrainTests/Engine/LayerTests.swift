import Foundation
import Testing

@testable import FaceTrain
@testable import FaceTrainEngine

/// Every layer: gradient check against finite differences, and one case worked out by hand.
@Suite struct LayerTests {
    @Test func conv2DGradients() {
        var generator = SplitMix64(seed: 1)
        let plain = Conv2D(inputChannels: 2, outputChannels: 3, kernelSize: 3, stride: 1, padding: 1, using: &generator)
        #expect(GradientCheck(plain, input: TestData.normal([2, 2, 5, 4], seed: 2)).worst < 1e-2)
        let strided = Conv2D(
            inputChannels: 2, outputChannels: 2, kernelSize: 3, stride: 2, padding: 0, using: &generator)
        #expect(GradientCheck(strided, input: TestData.normal([2, 2, 7, 6], seed: 3)).worst < 1e-2)
        let pointwise = Conv2D(inputChannels: 3, outputChannels: 2, kernelSize: 1, using: &generator)
        #expect(GradientCheck(pointwise, input: TestData.normal([1, 3, 3, 3], seed: 4)).worst < 1e-2)
    }

    /// Odd and even planes: backward sums each 2x2 block, against finite differences.
    @Test func upsampleGradients() {
        #expect(GradientCheck(Upsample(factor: 2), input: TestData.normal([2, 3, 3, 5], seed: 21)).worst < 1e-3)
        #expect(GradientCheck(Upsample(factor: 2), input: TestData.normal([1, 2, 4, 2], seed: 22)).worst < 1e-3)
    }

    @Test func upsampleByHand() {
        var layer = Upsample(factor: 2)
        let input = Tensor(shape: [1, 2, 1, 2], scalars: [1, 2, 3, 4])
        let output = layer.forward(input, mode: .training)
        #expect(output.shape == [1, 2, 2, 4])
        #expect(output.scalars == [1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4])
        // Each 2x2 block of 1...16: 1 + 2 + 5 + 6, 3 + 4 + 7 + 8, 9 + 10 + 13 + 14, 11 + 12 + 15 + 16.
        let gradient = layer.backward(Tensor(shape: [1, 2, 2, 4], scalars: (1...16).map(Float.init)))
        #expect(gradient.scalars == [14, 22, 46, 54] as [Float])
    }

    @Test func conv2DByHand() {
        var generator = SplitMix64(seed: 1)
        var conv = Conv2D(inputChannels: 1, outputChannels: 1, kernelSize: 2, stride: 1, padding: 0, using: &generator)
        conv.weight.value = Tensor(shape: [1, 1, 2, 2], scalars: [1, 2, 3, 4])
        conv.bias.value = Tensor(shape: [1], scalars: [0.5])
        // input 3×3 = 1…9; output (0,0) = 1·1 + 2·2 + 3·4 + 4·5 + 0.5 = 37.5, then +10 per step right, +30 down.
        let input = Tensor(shape: [1, 1, 3, 3], scalars: (1...9).map(Float.init))
        let output = conv.forward(input, mode: .training)
        #expect(output.shape == [1, 1, 2, 2])
        #expect(output.scalars == [37.5, 47.5, 67.5, 77.5])
        // dY = 1 everywhere: dW[i] = sum of the 2×2 window at offset i; dBias = 4; dX counts overlaps.
        let dx = conv.backward(Tensor(repeating: 1, shape: [1, 1, 2, 2]))
        #expect(conv.weight.gradient.scalars == [12, 16, 24, 28])
        #expect(conv.bias.gradient.scalars == [4])
        #expect(dx.scalars == [1, 3, 2, 4, 10, 6, 3, 7, 4])
    }

    @Test func batchNormGradients() {
        var norm = BatchNorm2D(channels: 3)
        norm.weight.value = Tensor(shape: [3], scalars: [0.5, -1.5, 2])
        norm.bias.value = Tensor(shape: [3], scalars: [0.1, 0.2, -0.3])
        #expect(GradientCheck(norm, input: TestData.normal([3, 3, 2, 3], seed: 5, standardDeviation: 2)).worst < 1e-2)
        // [N, C] input (the embedding's batch norm) is the same layer with H·W = 1.
        #expect(GradientCheck(norm, input: TestData.normal([6, 3], seed: 6, standardDeviation: 2)).worst < 1e-2)
        let flat = TestData.normal([4, 3], seed: 7)
        var asImages = norm
        var asVectors = norm
        let images = asImages.forward(Tensor(shape: [4, 3, 1, 1], scalars: flat.scalars), mode: .training)
        let vectors = asVectors.forward(flat, mode: .training)
        #expect(vectors.shape == [4, 3] && vectors.scalars == images.scalars)
    }

    @Test func batchNormByHand() {
        var norm = BatchNorm2D(channels: 1, epsilon: 0, momentum: 0.1)
        let input = Tensor(shape: [2, 1, 1, 2], scalars: [1, 2, 3, 4])
        let output = norm.forward(input, mode: .training)
        // mean 2.5, biased variance 1.25 → (x - 2.5)/√1.25.
        let root = Float(1.25).squareRoot()
        for (value, expected) in zip(output.scalars, [-1.5 / root, -0.5 / root, 0.5 / root, 1.5 / root]) {
            #expect(abs(value - expected) < 1e-6)
        }
        // Running: 0.9·0 + 0.1·2.5 and 0.9·1 + 0.1·(1.25·4/3) (unbiased).
        #expect(abs(norm.runningMean.value.scalars[0] - 0.25) < 1e-7)
        #expect(abs(norm.runningVariance.value.scalars[0] - (0.9 + 0.1 * 5 / 3)) < 1e-6)
        // dY = x̂ gives dγ = Σx̂² = 4, dβ = Σx̂ = 0, and dX = 0
        // (the normalisation removes a pure x̂ direction).
        let dx = norm.backward(output)
        #expect(abs(norm.weight.gradient.scalars[0] - 4) < 1e-5)
        #expect(abs(norm.bias.gradient.scalars[0]) < 1e-6)
        #expect(dx.scalars.allSatisfy { abs($0) < 1e-5 })
    }

    @Test func batchNormTrainingVersusInference() {
        var norm = BatchNorm2D(channels: 2, epsilon: 1e-5, momentum: 0.1)
        norm.weight.value = Tensor(shape: [2], scalars: [2, 0.5])
        norm.bias.value = Tensor(shape: [2], scalars: [1, -1])
        var generator = SplitMix64(seed: 9)
        // Channel 0 ~ N(3, 2²), channel 1 ~ N(-1, 0.5²): the running statistics must converge there.
        func batch() -> Tensor {
            var t = Tensor(randomNormal: [16, 2, 4, 4], standardDeviation: 1, using: &generator)
            for index in 0..<t.count {
                let channel = (index / 16) % 2
                t.scalars[index] = channel == 0 ? 3 + 2 * t.scalars[index] : -1 + 0.5 * t.scalars[index]
            }
            return t
        }
        for _ in 0..<200 { _ = norm.forward(batch(), mode: .training) }
        #expect(abs(norm.runningMean.value.scalars[0] - 3) < 0.1)
        #expect(abs(norm.runningVariance.value.scalars[0] - 4) < 0.4)
        #expect(abs(norm.runningMean.value.scalars[1] + 1) < 0.03)
        #expect(abs(norm.runningVariance.value.scalars[1] - 0.25) < 0.03)

        // Inference uses exactly the running statistics and leaves them alone...
        let x = batch()
        let before = norm.parameters
        let inferred = norm.forward(x, mode: .inference)
        #expect(norm.parameters == before)
        for index in 0..<x.count {
            let channel = (index / 16) % 2
            let mean = norm.runningMean.value.scalars[channel]
            let variance = norm.runningVariance.value.scalars[channel]
            let gamma = norm.weight.value.scalars[channel]
            let beta = norm.bias.value.scalars[channel]
            let expected = (x.scalars[index] - mean) / (variance + 1e-5).squareRoot() * gamma + beta
            #expect(abs(inferred.scalars[index] - expected) < 1e-4)
        }
        // ...while training mode normalises with the batch's own statistics: the output's channel mean is β.
        let trained = norm.forward(x, mode: .training)
        var channelMean: Double = 0
        for index in 0..<x.count where (index / 16) % 2 == 0 { channelMean += Double(trained.scalars[index]) }
        #expect(abs(channelMean / Double(x.count / 2) - 1) < 1e-5)
        #expect(trained != inferred)
    }

    @Test func reluGradientsAndHandCase() {
        #expect(GradientCheck(ReLU(), input: TestData.spaced([2, 3, 2, 2], seed: 6)).worst < 1e-2)
        var relu = ReLU()
        #expect(relu.forward(Tensor(shape: [3], scalars: [-1, 0, 2]), mode: .training).scalars == [0, 0, 2])
        #expect(relu.backward(Tensor(shape: [3], scalars: [5, 6, 7])).scalars == [0, 0, 7])
    }

    @Test func l2NormalizeGradientsAndHandCase() {
        #expect(GradientCheck(L2Normalize(scale: 3), input: TestData.spaced([3, 5], seed: 9)).worst < 1e-2)
        var layer = L2Normalize(scale: 10)
        // (3, 4) has length 5: scaled to length 10 it is (6, 8).
        #expect(layer.forward(Tensor(shape: [1, 2], scalars: [3, 4]), mode: .training).scalars == [6, 8])
        // Along the input the output cannot change (the gradient vanishes); across it, it scales by s/‖x‖ = 2.
        #expect(layer.backward(Tensor(shape: [1, 2], scalars: [3, 4])).scalars.allSatisfy { abs($0) < 1e-6 })
        let across = layer.backward(Tensor(shape: [1, 2], scalars: [-4, 3])).scalars
        #expect(abs(across[0] + 8) < 1e-5 && abs(across[1] - 6) < 1e-5)
    }

    @Test func maxPoolGradientsAndHandCase() {
        #expect(
            GradientCheck(MaxPool2D(size: 2, stride: 2), input: TestData.spaced([2, 2, 4, 6], seed: 7)).worst < 1e-2)
        #expect(
            GradientCheck(MaxPool2D(size: 3, stride: 2), input: TestData.spaced([1, 2, 5, 5], seed: 8)).worst < 1e-2)
        var pool = MaxPool2D(size: 2, stride: 2)
        let input = Tensor(shape: [1, 1, 2, 4], scalars: [1, 5, 2, 2, 3, 4, 8, 0])
        #expect(pool.forward(input, mode: .training).scalars == [5, 8])
        #expect(pool.backward(Tensor(shape: [1, 1, 1, 2], scalars: [10, 20])).scalars == [0, 10, 0, 0, 0, 0, 20, 0])
    }

    /// Inference's 2x2 pool records no winners: the same values as training's, odd sides included
    /// (the last row and column are dropped), negative values and ties too.
    @Test func maxPoolInferenceEqualsTraining() {
        for shape in [[2, 3, 6, 8], [1, 2, 5, 7], [3, 1, 2, 2]] {
            let input = TestData.normal(shape, seed: 41)
            var training = MaxPool2D(size: 2, stride: 2)
            var inference = MaxPool2D(size: 2, stride: 2)
            let expected = training.forward(input, mode: .training)
            let output = inference.forward(input, mode: .inference)
            #expect(output.shape == expected.shape)
            #expect(output.scalars == expected.scalars)
        }
        var pool = MaxPool2D(size: 2, stride: 2)
        let ties = Tensor(shape: [1, 1, 2, 5], scalars: [-3, -1, 2, 2, 9, -2, -1, 2, 1, 9])
        #expect(pool.forward(ties, mode: .inference).scalars == [-1, 2])
    }

    @Test func globalAveragePoolGradientsAndHandCase() {
        #expect(GradientCheck(GlobalAveragePool(), input: TestData.normal([2, 3, 3, 2], seed: 9)).worst < 1e-2)
        var pool = GlobalAveragePool()
        let output = pool.forward(Tensor(shape: [1, 2, 1, 2], scalars: [1, 2, 3, 5]), mode: .training)
        #expect(output.shape == [1, 2])
        #expect(output.scalars == [1.5, 4])
        #expect(pool.backward(Tensor(shape: [1, 2], scalars: [2, 4])).scalars == [1, 1, 2, 2])
    }

    @Test func linearGradientsAndHandCase() {
        var generator = SplitMix64(seed: 3)
        let layer = Linear(inputFeatures: 5, outputFeatures: 4, using: &generator)
        #expect(GradientCheck(layer, input: TestData.normal([3, 5], seed: 10)).worst < 1e-2)
        var linear = Linear(inputFeatures: 2, outputFeatures: 2, using: &generator)
        linear.weight.value = Tensor(shape: [2, 2], scalars: [1, 2, 3, 4])
        linear.bias.value = Tensor(shape: [2], scalars: [0.5, -0.5])
        let output = linear.forward(Tensor(shape: [1, 2], scalars: [1, 1]), mode: .training)
        #expect(output.scalars == [3.5, 6.5])
        let dx = linear.backward(Tensor(shape: [1, 2], scalars: [1, 2]))
        #expect(dx.scalars == [7, 10])
        #expect(linear.weight.gradient.scalars == [1, 1, 2, 2])
        #expect(linear.bias.gradient.scalars == [1, 2])
    }

    @Test func dropoutGradientsAndStatistics() {
        let dropout = Dropout(rate: 0.3, generator: SplitMix64(seed: 11))
        #expect(GradientCheck(dropout, input: TestData.normal([4, 25], seed: 12)).worst < 1e-2)
        var layer = Dropout(rate: 0.5, generator: SplitMix64(seed: 12))
        let ones = Tensor(repeating: 1, shape: [10_000])
        let output = layer.forward(ones, mode: .training)
        #expect(output.scalars.allSatisfy { $0 == 0 || $0 == 2 })
        let kept = output.scalars.filter { $0 == 2 }.count
        #expect(abs(kept - 5_000) < 300)
        #expect(layer.backward(ones) == output)
        #expect(layer.forward(ones, mode: .inference) == ones)
    }
}
