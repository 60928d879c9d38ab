import FaceTrainEngine
import Foundation

/// Adam with decoupled weight decay (Loshchilov & Hutter 2019), as PyTorch's `torch.optim.AdamW`:
/// w -= lr·λ·w (decaying parameters only); m = β₁m + (1-β₁)g; v = β₂v + (1-β₂)g²;
/// w -= lr·m̂ / (√v̂ + ε) with m̂ = m/(1-β₁ᵗ), v̂ = v/(1-β₂ᵗ).
public struct AdamW: Optimizer {
    public var beta1: Float
    public var beta2: Float
    public var epsilon: Float
    public var weightDecay: Float
    private var firstMoment: [String: Tensor] = [:]
    private var secondMoment: [String: Tensor] = [:]
    private var step = 0

    public init(beta1: Float = 0.9, beta2: Float = 0.999, epsilon: Float = 1e-8, weightDecay: Float = 0.01) {
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon
        self.weightDecay = weightDecay
    }

    public mutating func beginStep() { step += 1 }

    public mutating func update(key: String, _ parameter: inout Parameter, learningRate: Float) {
        guard parameter.isTrainable else { return }
        let (b1, b2, eps, decay) = (beta1, beta2, epsilon, weightDecay)
        let correction1 = Float(1 - pow(Double(b1), Double(step)))
        let correction2 = Float(1 - pow(Double(b2), Double(step)))
        let shrink = parameter.decays ? 1 - learningRate * decay : 1
        var m = firstMoment.removeValue(forKey: key) ?? Tensor(zeros: parameter.value.shape)
        var v = secondMoment.removeValue(forKey: key) ?? Tensor(zeros: parameter.value.shape)
        let count = parameter.value.scalars.count
        parameter.value.scalars.withUnsafeMutableBufferPointer { w in
            parameter.gradient.scalars.withUnsafeBufferPointer { dw in
                m.scalars.withUnsafeMutableBufferPointer { m in
                    v.scalars.withUnsafeMutableBufferPointer { v in
                        let (w, dw, m, v) = (w.baseAddress!, dw.baseAddress!, m.baseAddress!, v.baseAddress!)
                        // Sixteen lanes at a time: the compiler does not vectorise the loop itself (it
                        // cannot rule out that the four buffers overlap). Lane by lane the same IEEE
                        // operations in the same order as the tail, so the result is bit-identical.
                        typealias Lanes = SIMD16<Float>
                        var index = 0
                        while index + Lanes.scalarCount <= count {
                            let g = UnsafeRawPointer(dw + index).loadUnaligned(as: Lanes.self)
                            let first =
                                b1 * UnsafeRawPointer(m + index).loadUnaligned(as: Lanes.self) + (1 - b1) * g
                            let second =
                                b2 * UnsafeRawPointer(v + index).loadUnaligned(as: Lanes.self) + (1 - b2) * g * g
                            let update = (first / correction1) / ((second / correction2).squareRoot() + eps)
                            let weight = UnsafeRawPointer(w + index).loadUnaligned(as: Lanes.self)
                            UnsafeMutableRawPointer(m + index).storeBytes(of: first, as: Lanes.self)
                            UnsafeMutableRawPointer(v + index).storeBytes(of: second, as: Lanes.self)
                            UnsafeMutableRawPointer(w + index).storeBytes(
                                of: weight * shrink - learningRate * update, as: Lanes.self)
                            index += Lanes.scalarCount
                        }
                        while index < count {
                            let g = dw[index]
                            m[index] = b1 * m[index] + (1 - b1) * g
                            v[index] = b2 * v[index] + (1 - b2) * g * g
                            let update = (m[index] / correction1) / ((v[index] / correction2).squareRoot() + eps)
                            w[index] = w[index] * shrink - learningRate * update
                            index += 1
                        }
                    }
                }
            }
        }
        firstMoment[key] = m
        secondMoment[key] = v
    }

    public var state: OptimizerState {
        var slots: [String: Tensor] = [:]
        for (key, tensor) in firstMoment { slots["m/\(key)"] = tensor }
        for (key, tensor) in secondMoment { slots["v/\(key)"] = tensor }
        return OptimizerState(kind: "adamw", step: step, slots: slots)
    }

    public mutating func restore(_ state: OptimizerState) throws {
        let state = try state.validated(kind: "adamw")
        var (first, second): ([String: Tensor], [String: Tensor]) = ([:], [:])
        for (key, tensor) in state.slots {
            if key.hasPrefix("m/") {
                first[String(key.dropFirst(2))] = tensor
            } else if key.hasPrefix("v/") {
                second[String(key.dropFirst(2))] = tensor
            } else {
                throw TrainingError.stateMismatch("unknown AdamW slot \(key)")
            }
        }
        (firstMoment, secondMoment, step) = (first, second, state.step)
    }
}
