import Foundation

/// A `Range: bytes=...` header against a file of `size` bytes (RFC 9110 section 14). Only single
/// ranges are served: a list of several, another unit or a malformed header gets the whole file,
/// which the RFC allows ("a server MAY ignore the Range header field").
enum ByteRange: Equatable {
    case whole
    /// Inclusive bounds.
    case part(ClosedRange<Int>)
    /// 416: the range starts past the end, or asks for the last 0 bytes.
    case unsatisfiable

    static func parse(_ header: String, size: Int) -> ByteRange {
        let text = header.trimmingCharacters(in: .whitespaces)
        guard text.lowercased().hasPrefix("bytes="), !text.contains(",") else { return .whole }
        let specification = text.dropFirst("bytes=".count).trimmingCharacters(in: .whitespaces)
        guard let dash = specification.firstIndex(of: "-") else { return .whole }
        let first = specification[..<dash]
        let last = specification[specification.index(after: dash)...]
        let digits = { (part: Substring) in !part.isEmpty && part.utf8.allSatisfy { (48...57).contains($0) } }
        if first.isEmpty {
            // bytes=-N: the last N bytes.
            guard digits(last), let suffix = Int(last) else { return .whole }
            guard suffix > 0, size > 0 else { return .unsatisfiable }
            return .part(max(size - suffix, 0)...(size - 1))
        }
        guard digits(first), let start = Int(first) else { return .whole }
        let end: Int
        if last.isEmpty {
            end = size - 1
        } else {
            guard digits(last), let value = Int(last), value >= start else { return .whole }
            end = min(value, size - 1)
        }
        guard start < size else { return .unsatisfiable }
        return .part(start...end)
    }
}
