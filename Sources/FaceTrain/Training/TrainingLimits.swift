import FaceTrainEngine

/// The ranges the options of a training run must lie in, one definition each, shared by `fit`,
/// `pretrain`, `bench`, `architectures` and the server's trainings (through
/// `FitConfiguration.validate` and `PretrainConfiguration.validate`). Limits lie far beyond any
/// sensible run, so that a typo fails at once, naming the option, instead of as a huge allocation
/// or an endless run. Not the defaults (each configuration holds its own) and not the parsing of
/// arguments (the CLI's).
public enum TrainingLimits {
    public static let epochs = 1...100_000
    /// Batch normalisation needs two crops.
    public static let batchSize = 2...4096
    /// The network's input side; it must also be a multiple of 8 (three 2x poolings).
    public static let inputSize = 32...512
    public static let width = 1...256
    /// The logits of the cosine head lie in -16...16.
    public static let margin = 0.0...16.0

    private static func outside(_ option: String, _ range: ClosedRange<Int>) -> ConfigurationError {
        ConfigurationError(option: option, message: "--\(option) must be in \(range.text)")
    }

    public static func checkArchitecture(_ name: String) throws(ConfigurationError) {
        do { _ = try ModelDefinition.architecture(named: name) } catch {
            throw ConfigurationError(option: "architecture", message: "--architecture: \(error.description)")
        }
    }

    public static func checkEpochs(_ epochs: Int) throws(ConfigurationError) {
        guard Self.epochs.contains(epochs) else { throw outside("epochs", Self.epochs) }
    }

    public static func checkBatchSize(_ batchSize: Int) throws(ConfigurationError) {
        guard Self.batchSize.contains(batchSize) else {
            throw ConfigurationError(
                option: "batch-size",
                message: "--batch-size must be in \(Self.batchSize.text) (batch normalisation needs two crops)")
        }
    }

    public static func checkInputSize(_ inputSize: Int) throws(ConfigurationError) {
        guard Self.inputSize.contains(inputSize), inputSize % 8 == 0 else {
            throw ConfigurationError(
                option: "input-size", message: "--input-size must be a multiple of 8 in \(Self.inputSize.text)")
        }
    }

    public static func checkWidth(_ width: Int) throws(ConfigurationError) {
        guard Self.width.contains(width) else { throw outside("width", Self.width) }
    }

    public static func checkLearningRate(_ rate: Double) throws(ConfigurationError) {
        guard rate.isFinite, rate > 0 else {
            throw ConfigurationError(option: "learning-rate", message: "--learning-rate must be a positive number")
        }
    }

    /// The options every training run has, in the order the command lines list them.
    public static func checkRun(
        architecture: String, width: Int, inputSize: Int, epochs: Int, batchSize: Int, learningRate: Double
    ) throws(ConfigurationError) {
        try checkArchitecture(architecture)
        try checkEpochs(epochs)
        try checkBatchSize(batchSize)
        try checkInputSize(inputSize)
        try checkWidth(width)
        try checkLearningRate(learningRate)
    }

    /// `--target-far` of fit, eval and the server's trainings.
    public static func checkTargetFalseAcceptRate(_ rate: Double) throws(ConfigurationError) {
        try checkShare(rate, option: "target-far", meaning: "0.05 = 5 % of strangers accepted")
    }

    /// A share such as `--target-far`; `meaning` says what one value means ("0.05 = 5 % of strangers
    /// accepted").
    public static func checkShare(
        _ value: Double, option: String, in range: ClosedRange<Double> = 0...1, meaning: String
    ) throws(ConfigurationError) {
        guard value.isFinite, range.contains(value) else {
            throw ConfigurationError(
                option: option,
                message:
                    "--\(option) must be a share in \(range.lowerBound.text)...\(range.upperBound.text) (\(meaning))")
        }
    }
}

extension ClosedRange<Int> {
    /// "1...100000": how the messages write a range.
    fileprivate var text: String { "\(lowerBound)...\(upperBound)" }
}

extension Double {
    /// 0 and 1 as "0" and "1", 0.1 as "0.1".
    fileprivate var text: String { self == rounded() ? String(Int(self)) : String(self) }
}

extension FitConfiguration {
    /// Throws the first option outside its range; `fit`, the server and `FitJob.run` call it.
    public func validate() throws(ConfigurationError) {
        try TrainingLimits.checkRun(
            architecture: architecture, width: width, inputSize: inputSize, epochs: epochs, batchSize: batchSize,
            learningRate: learningRate)
        guard (0..<1).contains(holdout) else {
            throw ConfigurationError(option: "holdout", message: "--holdout must be in 0..<1")
        }
        guard margin.isFinite, TrainingLimits.margin.contains(margin) else {
            throw ConfigurationError(
                option: "margin", message: "--margin must be in 0...16 (the logits lie in -16...16)")
        }
        try TrainingLimits.checkTargetFalseAcceptRate(targetFalseAcceptRate)
    }
}

extension PretrainConfiguration {
    /// Throws the first option outside its range; `pretrain` calls it before anything is read.
    public func validate() throws(ConfigurationError) {
        try TrainingLimits.checkRun(
            architecture: architecture, width: width, inputSize: inputSize, epochs: epochs, batchSize: batchSize,
            learningRate: learningRate)
        guard weightDecay.isFinite, (0..<1).contains(weightDecay) else {
            throw ConfigurationError(
                option: "weight-decay", message: "--weight-decay must be a number in 0..<1 (0.0005 by default)")
        }
        if let greyscale = augmentation.greyscaleShare {
            try TrainingLimits.checkShare(greyscale, option: "greyscale", meaning: "0.2: one crop in five grey")
        }
        try TrainingLimits.checkShare(
            augmentation.minimumArea, option: "min-area", in: 0.1...1, meaning: "0.3: crops keep 30-100 % of the area")
        if let centreCrop {
            try TrainingLimits.checkShare(
                centreCrop, option: "centre-crop", in: 0.5...1, meaning: "0.8: the central 80 % of the side")
        }
        guard teacherWeight.isFinite, teacherWeight >= 0 else {
            throw ConfigurationError(option: "teacher-weight", message: "--teacher-weight must be a number >= 0")
        }
    }
}
