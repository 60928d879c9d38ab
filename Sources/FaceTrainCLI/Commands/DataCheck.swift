import FaceTrain
import Foundation

/// `facetrain data check`: validates a data folder and prints its report.
struct DataCheck: Command {
    static let name = "data check"
    static let abstract = "Validate a data folder and summarise it."
    static var options: [OptionSpec] {
        [
            .option("data", "dir", "Folder with one sub-folder of crops per user id."),
            .flag("json", "Print the report as JSON."),
        ]
    }
    let data: String
    let json: Bool

    init(arguments: ParsedArguments) throws {
        try arguments.expectPositionals(atMost: 0)
        data = try arguments.required("data")
        json = arguments.flag("json")
    }

    func run() throws -> ExitCode {
        print("data check of \(data): not implemented yet")
        return .failure
    }
}
