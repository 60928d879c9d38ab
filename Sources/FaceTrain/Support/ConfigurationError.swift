/// An option outside what facetrain can run, found by a configuration's own check (TrainingLimits,
/// PublishGate.validate, DataLoadOptions.validate): the command line turns it into a usage error
/// (exit 64), the server into a refused request or a failed training, with the same words. Not for
/// problems found while running (bad data, a full disk): those have their own errors.
public struct ConfigurationError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The option as the command line names it, without dashes ("epochs").
    public var option: String
    /// The whole sentence, naming the option and its range.
    public var message: String

    public init(option: String, message: String) {
        self.option = option
        self.message = message
    }

    public var description: String { message }
}
