import Foundation

/// A small JSON Lines file of records (one JSON object per line), read whole and rewritten
/// durably on every change: for logs that grow by a line per rare event (erasures, corrections),
/// not for anything written per request.
package struct JSONLines<Record: Codable>: Sendable {
    package let url: URL

    package init(url: URL) { self.url = url }

    /// Every record, oldest first; a line that is not a record is named with its number.
    package func read() throws -> [Record] {
        guard FileSystem.kind(at: url) != .missing else { return [] }
        let text = try String(contentsOf: url, encoding: .utf8)
        return try text.split(separator: "\n").enumerated().map { index, line in
            do { return try JSONDecoder().decode(Record.self, from: Data(line.utf8)) } catch {
                throw DataProblem.invalidMetadata(
                    path: url.path,
                    reason: "line \(index + 1) is not a valid record (\(error)); fix or remove that line")
            }
        }
    }

    /// Replaces the file's records, durably (an empty list removes the file).
    package func write(_ records: [Record]) throws {
        guard !records.isEmpty else {
            try FileSystem.removeTree(url)
            try FileSystem.sync(url.deletingLastPathComponent())
            return
        }
        var data = Data()
        for record in records { data += try JSONText.data(record, pretty: false) + Data("\n".utf8) }
        try FileSystem.replaceAtomically(data, at: url)
    }

    package func append(_ record: Record) throws { try write(try read() + [record]) }
}
