// HTML escaping for the pages facetrain writes: the eval report, the base report and the server's
// admin page. It makes any text inert between tags and inside quoted attribute values; it is not
// a sanitiser that lets some markup through, and not for URLs, CSS or script.

/// Text as it may stand in an HTML page.
package enum HTMLText {
    /// The characters that end text or a quoted attribute value, and what stands for each.
    private static let entities: [Unicode.Scalar: String] = [
        "&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&#39;",
    ]

    /// `text` with `& < > " '` written as entities, so it reads as text between tags and inside an
    /// attribute quoted with either quote.
    ///
    /// Works on Unicode scalars, not `Character`s: a quote followed by a combining mark is one
    /// `Character` that differs from `"`, yet a browser still ends the attribute at the quote.
    package static func escape(_ text: String) -> String {
        var escaped = ""
        escaped.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            if let entity = entities[scalar] { escaped += entity } else { escaped.unicodeScalars.append(scalar) }
        }
        return escaped
    }
}
