import Foundation

/// A command-line mistake: exit status 64 with the command's usage line.
struct UsageError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}

/// `url` with every symbolic link resolved, also when its last components do not exist yet (the
/// links of the deepest existing folder still count).
func realPath(_ url: URL) -> String {
    var existing = url.standardizedFileURL
    var missing: [String] = []
    while !FileManager.default.fileExists(atPath: existing.path) && existing.path != "/" {
        missing.insert(existing.lastPathComponent, at: 0)
        existing.deleteLastPathComponent()
    }
    var resolved = existing.resolvingSymlinksInPath()
    for component in missing { resolved.appendPathComponent(component) }
    return resolved.standardizedFileURL.path
}

/// Whether `text` is an absolute http(s) URL with a host, without query, fragment or credentials.
func validBaseURL(_ text: String) -> Bool {
    // The version's path is appended, so a query or fragment would swallow it; credentials would
    // be served to every phone with latest.json.
    guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme),
        url.host?.isEmpty == false, url.query == nil, url.fragment == nil, url.user == nil, url.password == nil,
        url.port.map({ (1...65535).contains($0) }) ?? true,
        !url.path.split(separator: "/").contains(where: { $0 == "." || $0 == ".." })
    else { return false }
    return !text.unicodeScalars.contains {
        $0.properties.isWhitespace || $0.properties.generalCategory == .control
            || "\"'<>\\`{}|^".unicodeScalars.contains($0)
    }
}

/// `--base-url` of publish and rollback: where the app downloads `<version>/FaceClassifier.mlmodel` from.
func validateBaseURL(_ text: String?) throws {
    guard let text, !validBaseURL(text) else { return }
    throw UsageError(
        message: "--base-url must be an http:// or https:// URL with a host and no query, fragment or user name, "
            + "e.g. https://cdn.example.com/models")
}

/// One named option (`--batch-size 32`) or flag (`--json`) of a subcommand.
struct OptionSpec: Sendable {
    let name: String
    /// "n", "dir"…; nil for a flag.
    let valueName: String?
    let help: String
    var defaultValue: String? = nil
    /// Shown without brackets in the usage line; `ParsedArguments.required` enforces it.
    var isRequired = false

    static func flag(_ name: String, _ help: String) -> OptionSpec {
        OptionSpec(name: name, valueName: nil, help: help)
    }

    static func option(_ name: String, _ valueName: String, _ help: String, default value: String? = nil) -> OptionSpec
    {
        OptionSpec(name: name, valueName: valueName, help: help, defaultValue: value)
    }

    /// An option the command cannot run without.
    static func required(_ name: String, _ valueName: String, _ help: String) -> OptionSpec {
        OptionSpec(name: name, valueName: valueName, help: help, isRequired: true)
    }

    var label: String { valueName.map { "--\(name) <\($0)>" } ?? "--\(name)" }
}

/// The command line of one subcommand, split into options, flags and positional arguments.
///
/// Accepts `--name value` and `--name=value`; `--` ends option parsing.
struct ParsedArguments {
    private(set) var values: [String: String] = [:]
    /// Every value of each option, in order (`values` keeps the last): for options that may repeat.
    private(set) var allValues: [String: [String]] = [:]
    private(set) var flags: Set<String> = []
    private(set) var positionals: [String] = []
    let specs: [OptionSpec]

    init(_ arguments: [String], specs: [OptionSpec]) throws {
        self.specs = specs
        var index = 0
        var onlyPositionals = false
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if onlyPositionals || !argument.hasPrefix("-") || argument == "-" {
                positionals.append(argument)
                continue
            }
            if argument == "--" {
                onlyPositionals = true
                continue
            }
            guard argument.hasPrefix("--") else { throw UsageError(message: "Unknown option '\(argument)'") }
            var name = String(argument.dropFirst(2))
            var inlineValue: String?
            if let equals = name.firstIndex(of: "=") {
                inlineValue = String(name[name.index(after: equals)...])
                name = String(name[..<equals])
            }
            guard let spec = specs.first(where: { $0.name == name }) else {
                throw UsageError(message: "Unknown option '--\(name)'")
            }
            if spec.valueName == nil {
                if inlineValue != nil { throw UsageError(message: "The flag '--\(name)' takes no value") }
                flags.insert(name)
            } else {
                guard let value = inlineValue ?? (index < arguments.count ? arguments[index] : nil) else {
                    throw UsageError(message: "Missing value for '\(spec.label)'")
                }
                if inlineValue == nil { index += 1 }
                // An empty path would silently mean the current folder.
                guard !value.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
                    throw UsageError(message: "The value of '\(spec.label)' is empty or only blanks")
                }
                values[name] = value
                allValues[name, default: []].append(value)
            }
        }
    }

    /// Whether an option was given a value on the command line (not just its default).
    func isGiven(_ name: String) -> Bool { values[name] != nil || flags.contains(name) }

    /// Whether a flag was given.
    func flag(_ name: String) -> Bool { flags.contains(name) }

    /// Whether the command line gave the option (not only its default).
    func given(_ name: String) -> Bool { values[name] != nil }

    /// Every value a repeatable option was given, in order.
    func strings(_ name: String) -> [String] { allValues[name] ?? [] }

    /// The raw string of an option, or its default.
    func string(_ name: String) -> String? {
        values[name] ?? specs.first(where: { $0.name == name })?.defaultValue
    }

    /// An option parsed as `T`, or its default; a value that does not parse is a usage error.
    func value<T: LosslessStringConvertible>(_ name: String, as type: T.Type = T.self) throws -> T? {
        guard let text = string(name) else { return nil }
        guard let value = T(text) else {
            let label = specs.first(where: { $0.name == name })?.label ?? "--\(name)"
            throw UsageError(message: "The value '\(text)' is invalid for '\(label)'")
        }
        return value
    }

    /// Like `value`, but required.
    func required<T: LosslessStringConvertible>(_ name: String, as type: T.Type = T.self) throws -> T {
        guard let value: T = try value(name) else {
            let label = specs.first(where: { $0.name == name })?.label ?? "--\(name)"
            throw UsageError(message: "Missing expected option '\(label)'")
        }
        return value
    }

    /// Fails with a usage error when more than `count` positional arguments were given.
    func expectPositionals(atMost count: Int) throws {
        if positionals.count > count {
            throw UsageError(message: "Unexpected argument '\(positionals[count])'")
        }
    }
}
