import Foundation
import Testing

@testable import FaceTrain

/// The ranges of training options live in TrainingLimits alone: fit's and pretrain's configurations
/// refuse a value with the same words, and the job the server runs refuses it before reading data.
@Suite struct TrainingLimitsTests {
    @Test func eachLimitAcceptsItsEdgesAndRefusesBeyond() throws {
        for epochs in [TrainingLimits.epochs.lowerBound, TrainingLimits.epochs.upperBound] {
            try TrainingLimits.checkEpochs(epochs)
        }
        #expect(throws: ConfigurationError(option: "epochs", message: "--epochs must be in 1...100000")) {
            try TrainingLimits.checkEpochs(100_001)
        }
        try TrainingLimits.checkInputSize(32)
        try TrainingLimits.checkInputSize(512)
        for size in [24, 36, 520] {
            #expect(throws: ConfigurationError.self) { try TrainingLimits.checkInputSize(size) }
        }
        #expect(throws: ConfigurationError.self) { try TrainingLimits.checkBatchSize(1) }
        #expect(throws: ConfigurationError.self) { try TrainingLimits.checkWidth(0) }
        #expect(throws: ConfigurationError.self) { try TrainingLimits.checkLearningRate(.infinity) }
        #expect(throws: ConfigurationError.self) { try TrainingLimits.checkArchitecture("no-such-net") }
        try TrainingLimits.checkTargetFalseAcceptRate(0)
        try TrainingLimits.checkTargetFalseAcceptRate(1)
        #expect(
            throws: ConfigurationError(
                option: "target-far",
                message: "--target-far must be a share in 0...1 (0.05 = 5 % of strangers accepted)")
        ) { try TrainingLimits.checkTargetFalseAcceptRate(.nan) }
    }

    /// The rule that used to drift (fit allowed 512 px and 100,000 epochs, pretrain 256 and 10,000).
    @Test(arguments: [
        ("width", 300), ("input-size", 1024), ("epochs", 200_000), ("batch-size", 1), ("input-size", 260),
    ])
    func fitAndPretrainRefuseTheSameValueWithTheSameWords(option: String, value: Int) {
        var fit = FitConfiguration()
        var pretrain = PretrainConfiguration()
        switch option {
        case "width": (fit.width, pretrain.width) = (value, value)
        case "input-size": (fit.inputSize, pretrain.inputSize) = (value, value)
        case "epochs": (fit.epochs, pretrain.epochs) = (value, value)
        default: (fit.batchSize, pretrain.batchSize) = (value, value)
        }
        var fitError: ConfigurationError?
        var pretrainError: ConfigurationError?
        do { try fit.validate() } catch { fitError = error }
        do { try pretrain.validate() } catch { pretrainError = error }
        #expect(fitError?.option == option)
        #expect(fitError != nil && fitError == pretrainError)
        #expect(throws: Never.self) { try FitConfiguration().validate() }
        #expect(throws: Never.self) { try PretrainConfiguration().validate() }
    }

    /// A server builds FitJobs without the command line: the job itself refuses a bad configuration,
    /// before it reads the data folder (which does not exist here) or creates the models folder.
    @Test func theFitJobRefusesAConfigurationTheCommandLineWouldRefuse() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("facetrain-limits-\(UUID())")
        defer { try? FileManager.default.removeItem(at: root) }
        var configuration = FitConfiguration()
        configuration.targetFalseAcceptRate = 2
        let job = FitJob(
            data: root.appendingPathComponent("users"), models: root.appendingPathComponent("models"),
            configuration: configuration, loadOptions: DataLoadOptions(), base: nil)
        #expect(throws: ConfigurationError.self) { _ = try job.run(observer: nil) }
        var options = DataLoadOptions()
        options.minimumImages = 0
        let second = FitJob(
            data: root.appendingPathComponent("users"), models: root.appendingPathComponent("models"),
            configuration: FitConfiguration(), loadOptions: options, base: nil)
        #expect(throws: ConfigurationError(option: "min-images", message: "--min-images must be at least 1")) {
            _ = try second.run(observer: nil)
        }
        #expect(!FileManager.default.fileExists(atPath: root.path))
    }

    @Test func theGateTakesSharesOnly() {
        #expect(throws: Never.self) {
            try PublishGate(minimumUserAccuracy: 0.9, maximumFalseAcceptRate: 0.05).validate()
        }
        #expect(
            throws: ConfigurationError(
                option: "max-false-accept", message: "'--max-false-accept' must be between 0 and 1")
        ) {
            try PublishGate(maximumFalseAcceptRate: 1.5).validate()
        }
        #expect(throws: ConfigurationError.self) { try PublishGate(allowedRegression: .nan).validate() }
    }
}
