import FaceTrainEngine

/// Runs training steps: forward, fused loss, zeroed gradients, backward, optional clipping, optimizer update.
///
/// Epochs, augmentation, validation and checkpoints belong to the caller; `state` and `restore`
/// make a resumed run continue bit for bit (together with the network's `weights`).
public struct Trainer: Sendable {
    public var network: Network
    public var optimizer: any Optimizer
    /// The schedule's base rate.
    public var learningRate: Float
    public var schedule: LearningRateSchedule
    public var loss: SoftmaxCrossEntropy
    /// Gradients are rescaled so their global L2 norm is at most this; nil disables clipping.
    public var maximumGradientNorm: Float?
    /// Optimizer steps taken so far.
    public private(set) var step = 0

    public init(
        network: Network, optimizer: any Optimizer, learningRate: Float, schedule: LearningRateSchedule = .constant,
        loss: SoftmaxCrossEntropy = SoftmaxCrossEntropy(), maximumGradientNorm: Float? = nil
    ) {
        self.network = network
        self.optimizer = optimizer
        self.learningRate = learningRate
        self.schedule = schedule
        self.loss = loss
        self.maximumGradientNorm = maximumGradientNorm
    }

    /// One step on a batch: images [N, C, H, W] and one label in 0..<classes per image.
    /// Returns the batch loss and accuracy measured before the update.
    @discardableResult
    public mutating func trainStep(images: Tensor, labels: [Int]) throws -> TrainingStepResult {
        try network.validate(images)
        let classes = network.definition.classLabels.count
        guard labels.count == images.shape[0] else {
            throw TrainingError.badBatch("\(labels.count) labels for \(images.shape[0]) images")
        }
        if let bad = labels.first(where: { !(0..<classes).contains($0) }) {
            throw TrainingError.badBatch("label \(bad) is outside 0..<\(classes)")
        }
        if let weights = loss.classWeights, weights.count != classes {
            throw TrainingError.badBatch("\(weights.count) class weights for \(classes) classes")
        }
        let logits = network.forward(images, mode: .training)
        let (batchLoss, gradient) = loss.lossAndGradient(logits: logits, labels: labels)
        network.zeroGradients()
        network.backward(gradient)
        let norm = gradientNorm()
        if let maximum = maximumGradientNorm, norm > Double(maximum) {
            let factor = Float(Double(maximum) / norm)
            network.updateParameters { _, parameter in
                guard parameter.isTrainable else { return }
                for index in 0..<parameter.gradient.count { parameter.gradient.scalars[index] *= factor }
            }
        }
        let rate = schedule.learningRate(base: learningRate, step: step)
        optimizer.update(&network, learningRate: rate)
        step += 1
        return TrainingStepResult(
            loss: batchLoss, accuracy: Self.accuracy(logits: logits, labels: labels), learningRate: rate,
            gradientNorm: Float(norm))
    }

    /// Global L2 norm of the trainable gradients of the last backward.
    private func gradientNorm() -> Double {
        var total: Double = 0
        for layer in network.layers {
            for parameter in layer.parameters where parameter.isTrainable {
                total += parameter.gradient.scalars.withUnsafeBufferPointer {
                    Double(dot($0.baseAddress!, $0.baseAddress!, count: $0.count))
                }
            }
        }
        return total.squareRoot()
    }

    /// Share of rows whose largest logit is at the label.
    public static func accuracy(logits: Tensor, labels: [Int]) -> Float {
        guard !labels.isEmpty else { return 0 }
        let classes = logits.count / labels.count
        var correct = 0
        for (row, label) in labels.enumerated() {
            let scores = logits.scalars[(row * classes)..<((row + 1) * classes)]
            if let best = scores.indices.max(by: { scores[$0] < scores[$1] }), best - row * classes == label {
                correct += 1
            }
        }
        return Float(correct) / Float(labels.count)
    }

    /// Everything besides the weights that a resumed run needs.
    public var state: TrainingState {
        TrainingState(step: step, optimizer: optimizer.state, generators: network.generatorStates)
    }

    /// Continues from `state`; load the matching weights into `network` first.
    public mutating func restore(_ state: TrainingState) throws {
        // Slots are named "<moment>/<parameter key>"; the optimizer indexes them like the parameter.
        var shapes: [String: [Int]] = [:]
        network.updateParameters { key, parameter in shapes[key] = parameter.value.shape }  // reads only
        for (name, tensor) in state.optimizer.slots {
            let key = name.split(separator: "/", maxSplits: 1).last.map(String.init) ?? name
            guard shapes[key] == tensor.shape else {
                throw TrainingError.stateMismatch("optimizer slot \(name) has shape \(tensor.shape)")
            }
        }
        try optimizer.restore(state.optimizer)
        step = state.step
        network.generatorStates = state.generators
    }
}

/// What one training step measured.
public struct TrainingStepResult: Sendable, Equatable {
    /// Mean loss of the batch (before the update).
    public var loss: Float
    /// Share of the batch classified correctly (before the update).
    public var accuracy: Float
    /// The learning rate this step used.
    public var learningRate: Float
    /// Global gradient norm before clipping.
    public var gradientNorm: Float
}

/// A training checkpoint apart from the weights: step, optimizer state and dropout generators.
public struct TrainingState: Sendable, Equatable, Codable {
    public var step: Int
    public var optimizer: OptimizerState
    /// Dropout generator states by layer name (empty without dropout).
    public var generators: [String: UInt64]

    public init(step: Int, optimizer: OptimizerState, generators: [String: UInt64]) {
        self.step = step
        self.optimizer = optimizer
        self.generators = generators
    }
}
