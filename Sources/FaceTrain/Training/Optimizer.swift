import FaceTrainEngine

/// Updates a network's trainable parameters from the gradients of the last `backward`.
///
/// Keys of per-parameter state are the network's parameter keys ("0.conv2d.weight"). Batch-norm
/// running statistics are never touched (`Parameter.isTrainable == false`). Weight decay applies
/// only where `Parameter.decays` (conv kernels and linear weights; not biases or batch-norm γ, β).
public protocol Optimizer: Sendable {
    /// Counts one more update; bias corrections and momenta use the count.
    mutating func beginStep()
    /// Updates one parameter (skipped when not trainable) as part of the current step; `key`
    /// names its state. Heads that live outside a `Network` are updated this way.
    mutating func update(key: String, _ parameter: inout Parameter, learningRate: Float)
    /// Everything the optimizer needs to continue exactly where it stopped.
    var state: OptimizerState { get }
    /// Continues from a saved state; throws when it belongs to another kind of optimizer.
    mutating func restore(_ state: OptimizerState) throws
}

extension Optimizer {
    /// One update of every trainable parameter of `network` whose key `isFrozen` does not name.
    public mutating func update(
        _ network: inout Network, learningRate: Float, isFrozen: (String) -> Bool = { _ in false }
    ) {
        beginStep()
        network.updateParameters { key, parameter in
            if !isFrozen(key) { update(key: key, &parameter, learningRate: learningRate) }
        }
    }
}

/// A checkpointable optimizer state: its kind, its update count and its per-parameter tensors,
/// keyed "<slot>/<parameter key>" such as "velocity/0.conv2d.weight".
public struct OptimizerState: Sendable, Equatable, Codable {
    /// "sgd" or "adamw".
    public var kind: String
    public var step: Int
    public var slots: [String: Tensor]

    public init(kind: String, step: Int, slots: [String: Tensor]) {
        self.kind = kind
        self.step = step
        self.slots = slots
    }

    private struct StoredTensor: Codable {
        var shape: [Int]
        var scalars: [Float]
    }

    private enum CodingKeys: String, CodingKey { case kind, step, slots }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        kind = try container.decode(String.self, forKey: .kind)
        step = try container.decode(Int.self, forKey: .step)
        let stored = try container.decode([String: StoredTensor].self, forKey: .slots)
        slots = [:]
        for (key, tensor) in stored {
            guard tensor.shape.reduce(1, *) == tensor.scalars.count else {
                throw DecodingError.dataCorruptedError(
                    forKey: .slots, in: container,
                    debugDescription:
                        "optimizer slot \(key): shape \(tensor.shape) does not hold \(tensor.scalars.count) values")
            }
            slots[key] = Tensor(shape: tensor.shape, scalars: tensor.scalars)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(kind, forKey: .kind)
        try container.encode(step, forKey: .step)
        try container.encode(slots.mapValues { StoredTensor(shape: $0.shape, scalars: $0.scalars) }, forKey: .slots)
    }
}

/// Why training could not go on.
public enum TrainingError: Error, CustomStringConvertible, Equatable {
    case stateMismatch(String)
    case badBatch(String)

    public var description: String {
        switch self {
        case .stateMismatch(let reason):
            "Training state does not fit: \(reason).\n"
                + "HINT: resume with the optimizer and model the checkpoint was written with, or start afresh."
        case .badBatch(let reason):
            "Bad training batch: \(reason).\nHINT: this is a bug in the code that builds batches; please report it."
        }
    }
}

extension OptimizerState {
    /// Checks the kind and that every slot matches a trainable parameter's shape.
    func validated(kind expected: String) throws -> OptimizerState {
        guard kind == expected else {
            throw TrainingError.stateMismatch("the checkpoint holds \(kind) state, the trainer uses \(expected)")
        }
        guard step >= 0 else { throw TrainingError.stateMismatch("negative step \(step)") }
        return self
    }
}
