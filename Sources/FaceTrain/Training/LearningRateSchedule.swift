import Foundation

/// How the learning rate moves over the optimizer steps (step counts from 0).
public enum LearningRateSchedule: Sendable, Equatable, Codable {
    /// The base rate throughout.
    case constant
    /// Linear warm-up from base/warmupSteps to base over `warmupSteps`, then a cosine decay to
    /// base·minimumFactor at `totalSteps` (and flat after).
    case cosine(warmupSteps: Int, totalSteps: Int, minimumFactor: Float)
    /// base·factor^(step / every): e.g. ×0.1 every 30 epochs' worth of steps.
    case step(every: Int, factor: Float)

    /// The learning rate for optimizer step `step` (0-based).
    public func learningRate(base: Float, step: Int) -> Float {
        switch self {
        case .constant:
            return base
        case .cosine(let warmupSteps, let totalSteps, let minimumFactor):
            if step < warmupSteps { return base * Float(step + 1) / Float(warmupSteps) }
            let span = max(1, totalSteps - warmupSteps)
            let progress = min(1, Double(step - warmupSteps) / Double(span))
            let factor = Double(minimumFactor) + (1 - Double(minimumFactor)) * 0.5 * (1 + cos(Double.pi * progress))
            return base * Float(factor)
        case .step(let every, let factor):
            return base * Float(pow(Double(factor), Double(step / max(1, every))))
        }
    }
}
