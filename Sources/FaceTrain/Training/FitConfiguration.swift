import FaceTrainEngine
import Foundation

/// Everything that decides how `fit` trains, with defaults meant to work from ~25 crops a person.
public struct FitConfiguration: Codable, Sendable, Equatable {
    public var epochs = 90
    public var batchSize = 32
    public var seed: UInt64 = 1
    public var inputSize = 64
    /// Share of each class held out for model selection and evaluation.
    public var holdout = 0.2
    /// The named architecture trained from scratch (`ModelDefinition.architectures`); with a base,
    /// the base's.
    public var architecture = "ref-small"
    /// Channel multiplier of the architecture (ref-small: 16 gives 16-32-64-128 channels).
    public var width = 16
    /// Peak learning rate of AdamW, reached after the warm-up.
    public var learningRate = 3e-3
    /// Decoupled weight decay of AdamW (not applied to biases and batch-norm parameters).
    public var weightDecay = 0.01
    public var warmupEpochs = 3
    public var labelSmoothing = 0.1
    /// Additive margin on the true class's logit in the training loss (see `SoftmaxCrossEntropy`).
    public var margin = 2.0
    /// Gradients are rescaled when their global norm exceeds this.
    public var gradientClipNorm = 5.0
    /// Unknown-person false accept rate the accept threshold is chosen for.
    public var targetFalseAcceptRate = 0.05
    public var augmentation = AugmentationSettings()
    /// The base model the fit started from; nil trains from scratch (`--base none`).
    public var base: BaseReference?

    public init() {}

    enum CodingKeys: String, CodingKey {
        case epochs, seed, holdout, architecture, width, augmentation, base
        case batchSize = "batch_size"
        case inputSize = "input_size"
        case learningRate = "learning_rate"
        case weightDecay = "weight_decay"
        case warmupEpochs = "warmup_epochs"
        case labelSmoothing = "label_smoothing"
        case margin
        case gradientClipNorm = "gradient_clip_norm"
        case targetFalseAcceptRate = "target_far"
    }
}

/// Why a fit stopped without a model.
public enum FitError: Error, CustomStringConvertible {
    case diverged(epoch: Int, batch: Int, loss: Float)
    case divergedHeldOut(epoch: Int, loss: Double)
    case alreadyRunning(checkpoint: String)
    case interrupted(checkpoint: String)
    case interruptedWithoutResume
    /// A head fit from a frozen base stopped; the embeddings it computed are cached.
    case interruptedHead(cache: String)
    case noCheckpoint(path: String)
    case checkpointMismatch(path: String)
    case checkpointUnreadable(path: String, reason: String)
    case checkpointNotWritable(path: String, reason: String)
    case tooFewTrainingCrops(count: Int)
    case noHeldOutUsers(holdout: Double)
    /// The definition would not train or export (`ModelDefinition.validate`); nothing was trained.
    case invalidDefinition(ModelDefinitionError)
    case engine(String)

    public var description: String {
        switch self {
        case .diverged(let epoch, let batch, let loss):
            "training diverged: the loss became \(loss) at epoch \(epoch), batch \(batch); no bundle was written. "
                + "HINT: lower --learning-rate (the default is 0.003)."
        case .divergedHeldOut(let epoch, let loss):
            "training diverged: the held-out loss after epoch \(epoch) is \(loss) (the weights overflowed); "
                + "no bundle was written. HINT: lower --learning-rate (the default is 0.003)."
        case .alreadyRunning(let checkpoint):
            "another fit of the same data and options is running (it holds \(checkpoint)); nothing was started. "
                + "HINT: wait for it to finish, or stop it and run again with --resume."
        case .interrupted(let checkpoint):
            "interrupted; nothing was published. The last finished epoch is saved in \(checkpoint): "
                + "run the same command with --resume to continue."
        case .interruptedWithoutResume:
            "interrupted; nothing was published. A fit with --fine-tune all cannot be resumed (its folds of users "
                + "left out are separate fine-tunes): run it again from the start."
        case .interruptedHead(let cache):
            "interrupted; nothing was published. The crops' embeddings computed so far are cached in \(cache): "
                + "the same command starts again from them (a head fit takes seconds after that)."
        case .noCheckpoint(let path):
            "--resume: no checkpoint at \(path) for this data and configuration (or it was made by an older "
                + "facetrain). HINT: run without --resume to start afresh."
        case .checkpointMismatch(let path):
            "--resume: the checkpoint in \(path) was made for other data or settings. "
                + "HINT: use the same data and options, or run without --resume."
        case .checkpointUnreadable(let path, let reason):
            "--resume: the checkpoint \(path) cannot be read (\(reason)). HINT: delete it and run without --resume."
        case .checkpointNotWritable(let path, let reason):
            "cannot write the checkpoint \(path): \(reason). "
                + "HINT: check free space and permissions of the models folder."
        case .noHeldOutUsers(let holdout) where holdout <= 0:
            "--holdout \(holdout) holds out no crop of any user, so nothing can choose the best epoch or calibrate "
                + "the accept threshold; no bundle was written. HINT: use --holdout 0.1 or more (the default is 0.2)."
        case .noHeldOutUsers:
            "no crop of any user is held out (a user needs 3 crops or more for one to be held out), so nothing can "
                + "choose the best epoch or calibrate the accept threshold; no bundle was written. "
                + "HINT: record more crops per user (about 25 work well)."
        case .tooFewTrainingCrops(let count):
            "only \(count) crops are left for training after the held-out split. HINT: add crops or lower --holdout."
        case .invalidDefinition(let problem):
            "nothing was trained: \(problem)"
        case .engine(let message):
            "training failed: \(message)"
        }
    }
}
