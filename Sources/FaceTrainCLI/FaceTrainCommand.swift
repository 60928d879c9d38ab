import FaceTrain
import FaceTrainEngine
import Foundation

/// Exit codes: success, failure, a refused gate (publish), a usage error (EX_USAGE).
enum ExitCode: Int32 {
    case success = 0
    case failure = 1
    case refused = 2
    case usage = 64
}

/// A subcommand: parses its arguments in `init`, does its work in `run`.
protocol Command {
    /// Words after `facetrain`, e.g. "fit" or "data check".
    static var name: String { get }
    static var abstract: String { get }
    /// Positional part of the usage line, e.g. "<image>...".
    static var arguments: String { get }
    static var options: [OptionSpec] { get }
    init(arguments: ParsedArguments) throws
    /// Returns the exit code; throws library errors (exit 1) or `UsageError` (exit 64).
    func run() throws -> ExitCode
}

extension Command {
    static var arguments: String { "" }
    static var usage: String {
        (["facetrain \(name)", arguments] + options.map { $0.isRequired ? $0.label : "[\($0.label)]" }).filter {
            !$0.isEmpty
        }.joined(separator: " ")
    }
    static var help: String {
        var lines = ["OVERVIEW: \(abstract)", "", "USAGE: \(usage)", "", "OPTIONS:"]
        for option in options + [.flag("help", "Show help information.")] {
            let label = option.name == "help" ? "-h, --help" : option.label
            let help = option.help + (option.defaultValue.map { " (default: \($0))" } ?? "")
            lines.append("  " + label.padding(toLength: max(label.count + 2, 26), withPad: " ", startingAt: 0) + help)
        }
        return lines.joined(separator: "\n")
    }
}

@main
struct FaceTrainCommand {
    static var commands: [any Command.Type] {
        [
            DataCheck.self, Synth.self, Pretrain.self, Fit.self, Eval.self, Predict.self, Recognize.self, Export.self,
            Verify.self,
            ListVersions.self,
            Publish.self, Rollback.self, Serve.self, Erase.self, Bench.self,
            Architectures.self, BLAS.self, Detect.self, FaceCheckCommand.self, Crop.self, DetectorTrain.self,
            DetectorEval.self, DetectorExport.self, DetectorBench.self,
        ]
            + TestHooks.commands
    }

    static func main() {
        do {
            try BLASRuntime.selectKernel(
                cpuFlags: TestHooks.cpuFlags, openBLASDoesNotKnowThisCPU: TestHooks.openBLASDoesNotKnowThisCPU,
                selfCheckFails: TestHooks.selfCheckFails)
        } catch {
            printError(error.message)
            exit(ExitCode.failure.rawValue)
        }
        // A misspelt or unrunnable set would silently run another: refused before any work.
        if let problem = VectorKernels.environmentProblem {
            printError("Error: " + problem)
            exit(ExitCode.failure.rawValue)
        }
        exit(run(Array(CommandLine.arguments.dropFirst())).rawValue)
    }

    static func run(_ argv: [String]) -> ExitCode {
        if argv.first == "--version" {
            print("facetrain \(FaceTrainVersion.string)")
            print("BLAS: \(BLASRuntime.summary)")
            return .success
        }
        var words = argv
        if words.first == "help" {
            words.removeFirst()
            words.append("--help")
        }
        guard !words.isEmpty, !["-h", "--help"].contains(words[0]) else {
            printRootHelp()
            return .success
        }
        // Longest command name that prefixes the words ("data check" before "data").
        let match =
            commands
            .map { ($0, $0.name.split(separator: " ").map(String.init)) }
            .filter { words.starts(with: $0.1) }
            .max { $0.1.count < $1.1.count }
        guard let (command, nameWords) = match else {
            printError(
                "Error: Unknown subcommand '\(words[0])'\nUsage: facetrain <subcommand>\n"
                    + "  See 'facetrain --help' for more information.")
            return .usage
        }
        let rest = Array(words.dropFirst(nameWords.count))
        if rest.contains("-h") || rest.contains("--help") {
            print(command.help)
            return .success
        }
        do {
            let parsed = try ParsedArguments(rest, specs: command.options)
            return try command.init(arguments: parsed).run()
        } catch let error as UsageError {
            printError(
                "Error: \(error.message)\nUsage: \(command.usage)\n"
                    + "  See 'facetrain \(command.name) --help' for more information.")
            return .usage
        } catch {
            printError("Error: \(error)")
            return .failure
        }
    }

    static func printRootHelp() {
        print("OVERVIEW: Train face-recognition models from per-user folders of face crops.\n")
        print("USAGE: facetrain <subcommand> [options]\n")
        print("SUBCOMMANDS:")
        for command in commands {
            print("  " + command.name.padding(toLength: 16, withPad: " ", startingAt: 0) + command.abstract)
        }
        print(
            "\nOPTIONS:\n  --version               Show the version and the BLAS kernel.\n"
                + "  -h, --help              Show help information.")
        print("\nSee 'facetrain help <subcommand>' for detailed help.")
    }
}

/// Writes a line to standard error.
func printError(_ text: String) {
    FileHandle.standardError.write(Data((terminalSafe(text) + "\n").utf8))
}

/// Every line the command line prints to standard output comes here (it is preferred over
/// `Swift.print` for a single string), so that no file or user name can reach the terminal raw.
func print(_ text: String) {
    Swift.print(terminalSafe(text))
}

/// `text` with hidden controls (see `isHiddenControl`) other than line breaks, carriage returns and
/// tabs shown as `\u{1B}`: an escape sequence or a bidirectional override in a file name could
/// otherwise clear the screen, hide a warning or make one name read as another.
func terminalSafe(_ text: String) -> String {
    guard text.unicodeScalars.contains(where: isHidden) else { return text }
    var result = ""
    for scalar in text.unicodeScalars {
        if isHidden(scalar) {
            result += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
        } else {
            result.unicodeScalars.append(scalar)
        }
    }
    return result
}

private func isHidden(_ scalar: Unicode.Scalar) -> Bool {
    scalar.isHiddenControl && !["\n", "\r", "\t"].contains(scalar)
}
