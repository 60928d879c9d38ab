import FaceTrain
import Foundation

/// `facetrain data check`: validates a data folder and prints its report.
struct DataCheck: Command {
    static let name = "data check"
    static let abstract = "Validate a data folder: every problem at once, and a summary per class."
    static var options: [OptionSpec] {
        [
            .required(
                "data", "dir", "Folder with one sub-folder of crops per user id (1 = not a face, 2 = unknown person)."),
            DataOptions.minimumImages(),
            .flag("skip-bad", "Report unreadable and refused images as warnings instead of problems."),
            DataOptions.faceCheck,
            .flag("json", "Print the report as JSON."),
        ]
    }
    let data: String
    let options: DataLoadOptions
    let json: Bool

    init(arguments: ParsedArguments) throws {
        try arguments.expectPositionals(atMost: 0)
        data = try arguments.required("data")
        options = try DataOptions.loadOptions(arguments)
        json = arguments.flag("json")
    }

    func run() throws -> ExitCode {
        let report = FaceDataset.check(URL(fileURLWithPath: data), options: options)
        if json {
            print(try JSONText.encode(report))
        } else {
            print(report.text)
        }
        return report.problems.isEmpty ? .success : .failure
    }
}
