import FaceTrain
import FaceTrainEngine
import Foundation

// Options several commands share, each defined once: its spec (name, value, help) and how it is
// read; the library's rules (TrainingLimits, PublishGate.validate, DataLoadOptions.validate) check
// the values, so a range is written in one place. A command lists the groups it takes beside its
// own options. Not the parsing itself (Arguments.swift).

/// Runs a library check; its refusal becomes a usage error (exit 64) naming the option.
func requireValid(_ check: () throws(ConfigurationError) -> Void) throws(UsageError) {
    do { try check() } catch { throw UsageError(message: error.message) }
}

/// The options that name a network and its training run (fit, pretrain, bench, architectures).
enum TrainingOptions {
    static func architecture(_ help: String, default value: String) -> OptionSpec {
        .option("architecture", "name", help, default: value)
    }
    static func width(default value: String, _ help: String = "Channels of the first block.") -> OptionSpec {
        .option("width", "n", help, default: value)
    }
    static func inputSize(default value: String = "64") -> OptionSpec {
        .option("input-size", "px", "Side of the square network input.", default: value)
    }
    static func epochs(default value: String) -> OptionSpec {
        .option("epochs", "n", "Passes over the training crops.", default: value)
    }
    static func batchSize(default value: String, _ help: String = "Crops per training step.") -> OptionSpec {
        .option("batch-size", "n", help, default: value)
    }
    static func seed(_ help: String) -> OptionSpec { .option("seed", "n", help, default: "1") }
    static func learningRate(default value: String, _ help: String) -> OptionSpec {
        .option("learning-rate", "rate", help, default: value)
    }
    static let resume = OptionSpec.flag(
        "resume", "Continue an interrupted run of the same data and options from its last epoch.")
    static let jsonEvents = OptionSpec.flag("json", "Print one JSON object per line per event (for CI logs).")
}

/// `--model` and `--models` (which bundle) and `--top` (classes listed): predict, recognize, eval.
enum BundleOptions {
    static let model = OptionSpec.option(
        "model", "bundle", "Bundle directory, version number or 'latest'.", default: "latest")
    static let models = OptionSpec.option(
        "models", "dir", "Models folder that version numbers and 'latest' refer to.", default: "models")
    static func top(_ help: String) -> OptionSpec { .option("top", "k", help, default: "3") }

    /// The bundle the arguments name: `--model` in `--models`.
    static func bundle(_ arguments: ParsedArguments) throws -> (model: String, models: URL) {
        (try arguments.required("model"), URL(fileURLWithPath: try arguments.required("models")))
    }

    /// `--top`, at least 1.
    static func top(_ arguments: ParsedArguments) throws -> Int {
        let top: Int = try arguments.required("top")
        guard top >= 1 else { throw UsageError(message: "The value '\(top)' is invalid for '--top <k>' (at least 1)") }
        return top
    }
}

/// `--min-images` and `--skip-bad`: how a data folder is read (data check, fit, serve).
enum DataOptions {
    static func minimumImages(_ help: String = "Fewest crops a user may have.") -> OptionSpec {
        .option("min-images", "n", help, default: String(DataLoadOptions().minimumImages))
    }
    static let skipBad = OptionSpec.flag(
        "skip-bad", "Train without unreadable images and images the face check refuses, naming each one.")
    /// Whether images of people and of class 2 pass the face check by default.
    static let faceCheckByDefault = true
    static let faceCheck = OptionSpec.option(
        "face-check", "on|off",
        "on: every image of a person or of class 2 must show one clear, large, sharp, lit face (a photo is cut "
            + "to its face's aligned crop; see `facetrain face-check`); off: read images as they are.",
        default: faceCheckByDefault ? "on" : "off")

    /// The builtin detector's face check when `--face-check` is on, nil when off.
    static func faceCheck(_ arguments: ParsedArguments) throws -> FaceCheck? {
        let faceCheck: String = try arguments.required("face-check")
        guard ["on", "off"].contains(faceCheck) else {
            throw UsageError(message: "--face-check must be on or off, got \(faceCheck)")
        }
        guard faceCheck == "on" else { return nil }
        let detector = try DetectorModel.builtin()
        return FaceCheck(detector: FaceDetector(model: detector.model, strides: detector.manifest.strides))
    }

    /// The load options of the arguments, checked.
    static func loadOptions(_ arguments: ParsedArguments, base: DataLoadOptions = DataLoadOptions()) throws
        -> DataLoadOptions
    {
        var options = base
        options.minimumImages = try arguments.required("min-images")
        options.skipBad = arguments.flag("skip-bad")
        options.faceCheck = try faceCheck(arguments)
        try requireValid { () throws(ConfigurationError) in try options.validate() }
        return options
    }
}

/// The publish gate's options (publish, and serve for every training's publish).
enum GateOptions {
    static func specs(server: Bool) -> [OptionSpec] {
        let prefix = server ? "Publish gate: refuse" : "Refuse"
        return [
            .option("min-accuracy", "x", "\(prefix) below this user_accuracy."),
            .option(
                "max-false-accept", "y", "\(prefix) above this false-accept rate (larger of unknown_far, nonface_far)."),
            .option(
                "allow-regression", "z", "\(prefix) when mean recall on the users both versions know drops by more.",
                default: String(PublishGate.defaultAllowedRegression)),
        ]
    }

    /// The gate of the arguments, checked.
    static func gate(_ arguments: ParsedArguments) throws -> PublishGate {
        let gate = PublishGate(
            minimumUserAccuracy: try arguments.value("min-accuracy"),
            maximumFalseAcceptRate: try arguments.value("max-false-accept"),
            allowedRegression: try arguments.required("allow-regression"))
        try requireValid { () throws(ConfigurationError) in try gate.validate() }
        return gate
    }
}
