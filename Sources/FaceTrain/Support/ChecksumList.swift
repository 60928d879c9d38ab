import Foundation

/// SHA256SUMS in the format `sha256sum -c` reads: "<64 hex>  <name>" per line, sorted by name. Its
/// text, one line parsed, and the check of a model folder written once (the builtin base, a
/// detector). Not the bundle verifier's report (Bundle/BundleVerifier.swift), which also names
/// malformed lines and files the manifest lists.
public enum ChecksumList {
    static let fileName = "SHA256SUMS"

    /// The file's text for `entries` (path, hex).
    public static func render(_ entries: [(path: String, sha256: String)]) -> String {
        entries.sorted { $0.path < $1.path }.map { "\($0.sha256)  \($0.path)\n" }.joined()
    }

    /// Parses one line; accepts the binary-mode marker '*' that `sha256sum -b` writes.
    public static func parse(line: String) -> (path: String, sha256: String)? {
        let characters = Array(line)
        guard characters.count > 66 else { return nil }
        let hash = String(characters[0..<64])
        guard SHA256.isHexDigest(hash), characters[64] == " ", characters[65] == " " || characters[65] == "*" else {
            return nil
        }
        return (String(characters[66...]), hash)
    }

    /// The text for files given by name and bytes.
    static func render(files: [(String, Data)]) -> String {
        render(files.map { (path: $0.0, sha256: SHA256.hash($0.1)) })
    }

    /// What is wrong with a model folder's files against its SHA256SUMS.
    enum Problem: Equatable {
        case missing(file: String)
        case notListed(file: String)
        case mismatch(file: String)
    }

    /// The first problem of `files` in `contents` (file name -> bytes, SHA256SUMS among them), or
    /// nil when every one is listed with its hash.
    static func problem(of files: [String], in contents: [String: Data]) -> Problem? {
        guard let sums = contents[fileName] else { return .missing(file: fileName) }
        var expected: [String: String] = [:]
        for line in String(decoding: sums, as: UTF8.self).split(separator: "\n") {
            if let parsed = parse(line: String(line)) { expected[parsed.path] = parsed.sha256 }
        }
        for name in files {
            guard let data = contents[name] else { return .missing(file: name) }
            guard let sum = expected[name] else { return .notListed(file: name) }
            guard SHA256.hash(data) == sum else { return .mismatch(file: name) }
        }
        return nil
    }
}
