import FaceTrain
import Foundation

/// `facetrain list`: the versions in a models directory and which one is published.
struct ListVersions: Command {
    static let name = "list"
    static let abstract = "List model versions with date, users, user accuracy and which is latest."
    static var options: [OptionSpec] {
        [
            .option("models", "dir", "Models directory.", default: "models"),
            .flag("json", "Print the list as JSON."),
        ]
    }
    let models: URL
    let json: Bool

    init(arguments: ParsedArguments) throws {
        try arguments.expectPositionals(atMost: 0)
        models = URL(fileURLWithPath: arguments.string("models") ?? "models")
        json = arguments.flag("json")
    }

    func run() throws -> ExitCode {
        let repository = ModelRepository(directory: models)
        let summaries = try repository.summaries()
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            print(String(decoding: try encoder.encode(summaries), as: UTF8.self))
            return .success
        }
        guard !summaries.isEmpty else {
            print("No model versions in \(models.path).")
            return .success
        }
        let header = ["VERSION", "CREATED", "USERS", "USER_ACCURACY", "STATUS", ""]
        var rows = [header]
        for summary in summaries {
            rows.append([
                String(summary.version), summary.createdAt ?? "-", summary.users.map(String.init) ?? "-",
                summary.userAccuracy.map { String(format: "%.4f", $0) } ?? "-",
                summary.problems.isEmpty ? "ok" : "INVALID (\(summary.problems.count) problems)",
                summary.isLatest ? "<- latest" : "",
            ])
        }
        let widths = header.indices.map { column in rows.map { $0[column].count }.max() ?? 0 }
        for row in rows {
            let cells = row.enumerated().map { column, cell in
                column == 0 || column == 2 || column == 3
                    ? String(repeating: " ", count: widths[column] - cell.count) + cell
                    : cell.padding(toLength: widths[column], withPad: " ", startingAt: 0)
            }
            var line = cells.joined(separator: "  ")
            while line.hasSuffix(" ") { line.removeLast() }
            print(line)
        }
        return .success
    }
}
