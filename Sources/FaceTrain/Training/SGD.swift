import FaceTrainEngine

/// Stochastic gradient descent with momentum (optionally Nesterov) and L2 weight decay, as
/// PyTorch's `torch.optim.SGD` (dampening 0):
/// g = ∇ + λ·w (decaying parameters only); v = μ·v + g; w -= lr·(Nesterov ? g + μ·v : v).
public struct SGD: Optimizer {
    public var momentum: Float
    public var nesterov: Bool
    public var weightDecay: Float
    private var velocity: [String: Tensor] = [:]
    private var step = 0

    public init(momentum: Float = 0.9, nesterov: Bool = false, weightDecay: Float = 5e-4) {
        self.momentum = momentum
        self.nesterov = nesterov
        self.weightDecay = weightDecay
    }

    public mutating func beginStep() { step += 1 }

    public mutating func update(key: String, _ parameter: inout Parameter, learningRate: Float) {
        guard parameter.isTrainable else { return }
        let (mu, nesterov) = (momentum, nesterov)
        let lambda = parameter.decays ? weightDecay : 0
        var v = velocity.removeValue(forKey: key) ?? Tensor(zeros: parameter.value.shape)
        parameter.value.scalars.withUnsafeMutableBufferPointer { w in
            parameter.gradient.scalars.withUnsafeBufferPointer { dw in
                v.scalars.withUnsafeMutableBufferPointer { v in
                    for index in 0..<w.count {
                        let g = dw[index] + lambda * w[index]
                        v[index] = mu * v[index] + g
                        w[index] -= learningRate * (nesterov ? g + mu * v[index] : v[index])
                    }
                }
            }
        }
        velocity[key] = v
    }

    public var state: OptimizerState {
        OptimizerState(
            kind: "sgd", step: step,
            slots: Dictionary(uniqueKeysWithValues: velocity.map { ("velocity/\($0.key)", $0.value) }))
    }

    public mutating func restore(_ state: OptimizerState) throws {
        let state = try state.validated(kind: "sgd")
        var restored: [String: Tensor] = [:]
        for (key, tensor) in state.slots {
            guard key.hasPrefix("velocity/") else { throw TrainingError.stateMismatch("unknown SGD slot \(key)") }
            restored[String(key.dropFirst("velocity/".count))] = tensor
        }
        velocity = restored
        step = state.step
    }
}
