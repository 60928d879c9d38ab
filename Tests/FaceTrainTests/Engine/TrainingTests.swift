import Foundation
import Testing

@testable import FaceTrain
@testable import FaceTrainEngine

@Suite struct TrainingTests {
    /// Three separable 8×8 patterns (horizontal stripes, vertical stripes, a bright centre) with noise.
    static func batch(_ size: Int, using generator: inout SplitMix64) -> (Tensor, [Int]) {
        var images = Tensor(zeros: [size, 3, 8, 8])
        var labels: [Int] = []
        for image in 0..<size {
            let label = Int(generator.next() % 3)
            labels.append(label)
            for channel in 0..<3 {
                for y in 0..<8 {
                    for x in 0..<8 {
                        let pattern: Float =
                            switch label {
                            case 0: y % 2 == 0 ? 1 : -1
                            case 1: x % 2 == 0 ? 1 : -1
                            default: (2...5).contains(x) && (2...5).contains(y) ? 1 : -1
                            }
                        images.scalars[((image * 3 + channel) * 8 + y) * 8 + x] = pattern + 0.5 * generator.nextNormal()
                    }
                }
            }
        }
        return (images, labels)
    }

    static func trainer(seed: UInt64, optimizer: any Optimizer, dropout: Float = 0) throws -> Trainer {
        Trainer(
            network: try Network(definition: TestData.tinyDefinition(dropout: dropout), seed: seed),
            optimizer: optimizer, learningRate: 0.05,
            schedule: .cosine(warmupSteps: 3, totalSteps: 40, minimumFactor: 0.1),
            loss: SoftmaxCrossEntropy(labelSmoothing: 0.05), maximumGradientNorm: 5)
    }

    @Test func lossFallsAndAccuracyRises() throws {
        var trainer = try Self.trainer(seed: 1, optimizer: SGD(momentum: 0.9, nesterov: true))
        var generator = SplitMix64(seed: 2)
        var results: [TrainingStepResult] = []
        for _ in 0..<40 {
            let (images, labels) = Self.batch(16, using: &generator)
            results.append(try trainer.trainStep(images: images, labels: labels))
        }
        let early = results.prefix(5).map(\.loss).reduce(0, +) / 5
        let late = results.suffix(5).map(\.loss).reduce(0, +) / 5
        #expect(late < 0.5 * early, "loss \(early) → \(late)")
        #expect(results.suffix(5).map(\.accuracy).reduce(0, +) / 5 > 0.9)
        // Held-out batch, inference mode (running statistics).
        let (images, labels) = Self.batch(64, using: &generator)
        let probabilities = try trainer.network.probabilities(for: images)
        #expect(Trainer.accuracy(logits: probabilities, labels: labels) > 0.9)
    }

    static func run(steps: Range<Int>, trainer: inout Trainer) throws {
        for step in steps {
            var generator = SplitMix64(seed: UInt64(100 + step))
            let (images, labels) = Self.batch(8, using: &generator)
            try trainer.trainStep(images: images, labels: labels)
        }
    }

    @Test func sameSeedGivesBitwiseIdenticalWeights() throws {
        var first = try Self.trainer(seed: 5, optimizer: AdamW(weightDecay: 0.01), dropout: 0.2)
        var second = try Self.trainer(seed: 5, optimizer: AdamW(weightDecay: 0.01), dropout: 0.2)
        try Self.run(steps: 0..<6, trainer: &first)
        try Self.run(steps: 0..<6, trainer: &second)
        #expect(first.network.weights == second.network.weights)
        var third = try Self.trainer(seed: 6, optimizer: AdamW(weightDecay: 0.01), dropout: 0.2)
        try Self.run(steps: 0..<6, trainer: &third)
        #expect(first.network.weights != third.network.weights)
    }

    @Test(arguments: ["sgd", "adamw"])
    func resumeReproducesAnUninterruptedRun(_ kind: String) throws {
        func optimizer() -> any Optimizer { kind == "sgd" ? SGD(momentum: 0.9, nesterov: true) : AdamW() }
        var uninterrupted = try Self.trainer(seed: 8, optimizer: optimizer(), dropout: 0.3)
        try Self.run(steps: 0..<6, trainer: &uninterrupted)

        var interrupted = try Self.trainer(seed: 8, optimizer: optimizer(), dropout: 0.3)
        try Self.run(steps: 0..<3, trainer: &interrupted)
        let savedWeights = interrupted.network.weights
        let savedState = try JSONDecoder().decode(
            TrainingState.self, from: JSONEncoder().encode(interrupted.state))
        #expect(savedState == interrupted.state)
        #expect(savedState.step == 3 && !savedState.generators.isEmpty)

        var resumed = Trainer(
            network: try Network(definition: TestData.tinyDefinition(dropout: 0.3), weights: savedWeights),
            optimizer: optimizer(), learningRate: 0.05,
            schedule: .cosine(warmupSteps: 3, totalSteps: 40, minimumFactor: 0.1),
            loss: SoftmaxCrossEntropy(labelSmoothing: 0.05), maximumGradientNorm: 5)
        try resumed.restore(savedState)
        try Self.run(steps: 3..<6, trainer: &resumed)
        #expect(resumed.network.weights == uninterrupted.network.weights)
        #expect(resumed.state == uninterrupted.state)
    }

    @Test func stateOfAnotherOptimizerIsRejected() throws {
        var trainer = try Self.trainer(seed: 1, optimizer: SGD())
        let adamState = TrainingState(step: 1, optimizer: AdamW().state, generators: [:])
        #expect(throws: TrainingError.self) { try trainer.restore(adamState) }
    }

    /// The optimizer indexes its slots like the parameters: a slot of another shape (an edited or
    /// foreign checkpoint) must be refused before any update reads past it.
    @Test func optimizerSlotsOfTheWrongShapeAreRejected() throws {
        var trainer = try Self.trainer(seed: 1, optimizer: AdamW())
        try Self.run(steps: 0..<1, trainer: &trainer)
        var state = trainer.state
        let name = try #require(state.optimizer.slots.keys.sorted().first)
        state.optimizer.slots[name] = Tensor(zeros: [1])
        #expect(throws: TrainingError.self) { try trainer.restore(state) }
        try trainer.restore(trainer.state)
    }

    @Test func badBatchesAreRejected() throws {
        var trainer = try Self.trainer(seed: 1, optimizer: SGD())
        let images = Tensor(zeros: [2, 3, 8, 8])
        #expect(throws: TrainingError.self) { try trainer.trainStep(images: images, labels: [0]) }
        #expect(throws: TrainingError.self) { try trainer.trainStep(images: images, labels: [0, 3]) }
        #expect(throws: NetworkError.self) {
            try trainer.trainStep(images: Tensor(zeros: [2, 1, 8, 8]), labels: [0, 1])
        }
    }

    /// A network that is one Linear layer, with gradients set by hand, for exact optimizer arithmetic.
    static func linearNetwork() throws -> Network {
        let definition = ModelDefinition(
            input: InputSpecification(width: 2, height: 1, channels: 1),
            layers: [.linear(inputFeatures: 2, outputFeatures: 1)],
            classLabels: ["a"])
        var network = try Network(definition: definition, seed: 1)
        network.updateParameters { key, parameter in
            parameter.value = Tensor(shape: parameter.value.shape, scalars: key.hasSuffix("weight") ? [1, -2] : [0.5])
            parameter.gradient = Tensor(
                shape: parameter.value.shape, scalars: key.hasSuffix("weight") ? [0.1, 0.2] : [0.3])
        }
        return network
    }

    static func values(_ network: Network) -> [Float] { network.layers[0].parameters.flatMap(\.value.scalars) }

    @Test func sgdByHand() throws {
        var network = try Self.linearNetwork()
        var sgd = SGD(momentum: 0.5, nesterov: false, weightDecay: 0.1)
        sgd.update(&network, learningRate: 1)
        // weight: g = ∇ + 0.1·w = (0.2, 0); v = g; w -= v → (0.8, -2). bias (no decay): 0.5 - 0.3.
        #expect(Self.values(network).map { ($0 * 1e6).rounded() / 1e6 } == [0.8, -2, 0.2])
        sgd.update(&network, learningRate: 1)
        // g = (0.1 + 0.08, 0.2 - 0.2) = (0.18, 0); v = 0.5·(0.2, 0) + g = (0.28, 0); bias v = 0.15 + 0.3.
        #expect(Self.values(network).map { ($0 * 1e6).rounded() / 1e6 } == [0.52, -2, -0.25])

        var nesterovNetwork = try Self.linearNetwork()
        var nesterov = SGD(momentum: 0.5, nesterov: true, weightDecay: 0)
        nesterov.update(&nesterovNetwork, learningRate: 1)
        // v = g; step g + 0.5·v = 1.5·g.
        #expect(Self.values(nesterovNetwork).map { ($0 * 1e6).rounded() / 1e6 } == [0.85, -2.3, 0.05])
    }

    @Test func adamWByHand() throws {
        var network = try Self.linearNetwork()
        var adam = AdamW(beta1: 0.9, beta2: 0.999, epsilon: 0, weightDecay: 0.5)
        adam.update(&network, learningRate: 0.1)
        // First step: m̂ = g, v̂ = g², so the step is lr·sign(g); decay shrinks weights by 1 - 0.1·0.5 first.
        let expected: [Float] = [1 * 0.95 - 0.1, -2 * 0.95 - 0.1, 0.5 - 0.1]
        for (value, target) in zip(Self.values(network), expected) { #expect(abs(value - target) < 1e-6) }
        #expect(adam.state.step == 1 && adam.state.slots.count == 4)
    }

    /// The update runs sixteen lanes at a time and the rest one by one: both must be the scalar
    /// formula bit for bit, for every element of a tensor whose size is no multiple of sixteen.
    @Test func adamWMatchesTheScalarFormulaBitForBit() {
        let count = 37  // two groups of sixteen and a tail of five
        // Two dimensions, so the weight decays (vectors such as biases do not).
        var parameter = Parameter(name: "w", value: TestData.normal([1, count], seed: 7, standardDeviation: 1))
        var adam = AdamW(beta1: 0.9, beta2: 0.999, epsilon: 1e-8, weightDecay: 0.01)
        var (w, m, v) = (
            parameter.value.scalars, [Float](repeating: 0, count: count), [Float](repeating: 0, count: count)
        )
        for step in 1...3 {
            let gradient = TestData.normal([1, count], seed: UInt64(10 + step), standardDeviation: 0.5)
            parameter.gradient = gradient
            adam.beginStep()
            adam.update(key: "w", &parameter, learningRate: 0.05)
            let (b1, b2, eps): (Float, Float, Float) = (0.9, 0.999, 1e-8)
            let correction1 = Float(1 - pow(Double(b1), Double(step)))
            let correction2 = Float(1 - pow(Double(b2), Double(step)))
            let shrink: Float = 1 - 0.05 * 0.01
            for index in 0..<count {
                let g = gradient.scalars[index]
                m[index] = b1 * m[index] + (1 - b1) * g
                v[index] = b2 * v[index] + (1 - b2) * g * g
                let update = (m[index] / correction1) / ((v[index] / correction2).squareRoot() + eps)
                w[index] = w[index] * shrink - 0.05 * update
            }
            #expect(parameter.value.scalars.map(\.bitPattern) == w.map(\.bitPattern), "step \(step)")
        }
    }

    @Test func gradientClippingBoundsTheUpdate() throws {
        let (images, labels) = {
            var g = SplitMix64(seed: 3)
            return Self.batch(8, using: &g)
        }()
        var trainer = Trainer(
            network: try Network(definition: TestData.tinyDefinition(), seed: 2),
            optimizer: SGD(momentum: 0, weightDecay: 0), learningRate: 1, maximumGradientNorm: 1e-3)
        let before = trainer.network.weights
        let result = try trainer.trainStep(images: images, labels: labels)
        #expect(result.gradientNorm > 1e-2)
        var squared: Double = 0
        for (old, new) in zip(before, trainer.network.weights) {
            for (a, b) in zip(old.tensors, new.tensors) where !a.name.hasPrefix("running") {
                for (x, y) in zip(a.tensor.scalars, b.tensor.scalars) { squared += Double(x - y) * Double(x - y) }
            }
        }
        #expect(abs(squared.squareRoot() - 1e-3) < 1e-5)
    }

    @Test func schedules() {
        let cosine = LearningRateSchedule.cosine(warmupSteps: 4, totalSteps: 14, minimumFactor: 0.1)
        #expect(cosine.learningRate(base: 1, step: 0) == 0.25)
        #expect(cosine.learningRate(base: 1, step: 3) == 1)
        #expect(cosine.learningRate(base: 1, step: 4) == 1)
        #expect(abs(cosine.learningRate(base: 1, step: 9) - 0.55) < 1e-6)
        #expect(abs(cosine.learningRate(base: 1, step: 14) - 0.1) < 1e-6)
        #expect(abs(cosine.learningRate(base: 1, step: 100) - 0.1) < 1e-6)
        let step = LearningRateSchedule.step(every: 10, factor: 0.5)
        #expect(step.learningRate(base: 2, step: 9) == 2)
        #expect(step.learningRate(base: 2, step: 10) == 1)
        #expect(step.learningRate(base: 2, step: 25) == 0.5)
        #expect(LearningRateSchedule.constant.learningRate(base: 0.3, step: 1000) == 0.3)
    }
}
