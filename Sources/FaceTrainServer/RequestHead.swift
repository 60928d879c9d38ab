// The rules HTTPServer applies to a request's head (its request line and headers) before any
// route sees it.
import Foundation

/// The path of a request target. libmicrohttpd would decode `%2F` into a separator and end the
/// path at `%00`, so `/v1/users%2F3` would reach the route of `/v1/users/3` and `/healthz%00x` that
/// of `/healthz`: the adapter decodes the target itself and refuses those two escapes.
enum RequestTarget {
    /// `path` (the target before any '?') with its percent escapes decoded, or nil when one of them
    /// decodes to '/' or NUL. A '%' not followed by two hexadecimal digits stays as it is.
    static func decodedPath(_ path: String) -> String? {
        let bytes = Array(path.utf8)
        var decoded: [UInt8] = []
        decoded.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "%"), index + 2 < bytes.count,
                let high = hexadecimalValue(bytes[index + 1]), let low = hexadecimalValue(bytes[index + 2])
            {
                let byte = high << 4 | low
                guard byte != UInt8(ascii: "/"), byte != 0 else { return nil }
                decoded.append(byte)
                index += 3
            } else {
                decoded.append(bytes[index])
                index += 1
            }
        }
        return String(decoding: decoded, as: UTF8.self)
    }

    /// Why a path that `decodedPath` refused is refused.
    static func refusal(_ path: String) -> String {
        "the path \(path) has an escaped '/' (%2F) or NUL (%00), which no route takes; write '/' as it is, "
            + "and send no NUL"
    }

    private static func hexadecimalValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// Where a request's body ends must have one reading: a proxy in front that reads it another way
/// than libmicrohttpd (which takes the first Content-Length, and Transfer-Encoding over it) would
/// let a client smuggle a second request inside the first.
enum RequestFraming {
    /// Why the framing headers are ambiguous, or nil. `contentLengths` and `transferEncodings` are
    /// every value of those headers, repeats included.
    static func problem(contentLengths: [String], transferEncodings: [String]) -> String? {
        let lengths = Set(contentLengths.map { $0.trimmingCharacters(in: .whitespaces) })
        if lengths.count > 1 {
            return "the request has \(contentLengths.count) Content-Length headers that differ "
                + "(\(lengths.sorted().joined(separator: ", "))); send one"
        }
        if !transferEncodings.isEmpty && !contentLengths.isEmpty {
            return "the request has both Transfer-Encoding and Content-Length; send one of them "
                + "(Content-Length, or Transfer-Encoding: chunked)"
        }
        if !transferEncodings.isEmpty && transferEncodings.map({ $0.lowercased() }) != ["chunked"] {
            return "Transfer-Encoding '\(transferEncodings.joined(separator: ", "))' is not accepted; send the body "
                + "with Content-Length, or with Transfer-Encoding: chunked alone"
        }
        return nil
    }
}
