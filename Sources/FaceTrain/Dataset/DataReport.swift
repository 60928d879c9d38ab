import Foundation

/// What validation found in a data folder: every problem at once, warnings and a summary per class.
public struct DataReport: Codable, Sendable {
    /// A problem as the JSON report lists it.
    public struct Entry: Codable, Sendable, Equatable {
        public var kind: String
        public var path: String
        public var message: String
    }

    /// One class of the folder.
    public struct ClassSummary: Codable, Sendable, Equatable {
        public var label: Int
        /// "negative" for 1 and 2, "user" otherwise.
        public var kind: String
        public var name: String
        public var images: Int
        public var minimumWidth: Int
        public var minimumHeight: Int
        public var maximumWidth: Int
        public var maximumHeight: Int
    }

    public var root: String
    public var problems: [Entry]
    public var warnings: [DataWarning]
    public var classes: [ClassSummary]

    /// Number of usable images over all classes.
    public var imageCount: Int { classes.reduce(0) { $0 + $1.images } }
    /// Number of user classes (not counting 1 and 2).
    public var userCount: Int { classes.filter { ClassLabel.isUser(id: $0.label) }.count }
    /// Whether classes 1 and 2 both have images.
    public var negativesPresent: Bool {
        ClassLabel.negatives.allSatisfy { negative in
            classes.contains { $0.label == negative.id && $0.images > 0 }
        }
    }

    enum CodingKeys: String, CodingKey {
        case root, problems, warnings, classes
        case imageCount = "image_count"
        case userCount = "user_count"
        case negativesPresent = "negatives_present"
    }

    init(root: String, problems: [Entry], warnings: [DataWarning], classes: [ClassSummary]) {
        self.root = root
        self.problems = problems
        self.warnings = warnings
        self.classes = classes
    }

    public init(from decoder: Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        root = try container.decode(String.self, forKey: .root)
        problems = try container.decode([Entry].self, forKey: .problems)
        warnings = try container.decode([DataWarning].self, forKey: .warnings)
        classes = try container.decode([ClassSummary].self, forKey: .classes)
    }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(root, forKey: .root)
        try container.encode(problems, forKey: .problems)
        try container.encode(warnings, forKey: .warnings)
        try container.encode(classes, forKey: .classes)
        try container.encode(imageCount, forKey: .imageCount)
        try container.encode(userCount, forKey: .userCount)
        try container.encode(negativesPresent, forKey: .negativesPresent)
    }

    /// The report as a person reads it: problems, warnings, then a table of classes.
    public var text: String {
        var lines: [String] = []
        if !problems.isEmpty {
            lines.append("\(problems.count) problem\(problems.count == 1 ? "" : "s"):")
            lines += problems.map { "  - \($0.message)" }
        }
        if !warnings.isEmpty {
            lines.append("\(warnings.count) warning\(warnings.count == 1 ? "" : "s"):")
            lines += warnings.map { "  - \($0.description)" }
        }
        lines.append("")
        lines.append("label  kind      images  sizes             name")
        for summary in classes {
            let sameSize =
                summary.minimumWidth == summary.maximumWidth && summary.minimumHeight == summary.maximumHeight
            let smallest = "\(summary.minimumWidth)x\(summary.minimumHeight)"
            let sizes =
                summary.images == 0
                ? "-" : sameSize ? smallest : "\(smallest)..\(summary.maximumWidth)x\(summary.maximumHeight)"
            lines.append(
                String(summary.label).padding(toLength: 7, withPad: " ", startingAt: 0)
                    + summary.kind.padding(toLength: 10, withPad: " ", startingAt: 0)
                    + String(summary.images).padding(toLength: 8, withPad: " ", startingAt: 0)
                    + sizes.padding(toLength: 18, withPad: " ", startingAt: 0) + summary.name)
        }
        lines.append("")
        let negatives = negativesPresent ? "present" : "MISSING"
        lines.append(
            "\(userCount) users, \(imageCount) images; negatives (1 not a face, 2 unknown person): \(negatives)")
        lines.append(
            problems.isEmpty
                ? "OK: ready to train." : "NOT READY: fix the problems above (nothing is trained until then).")
        return lines.joined(separator: "\n")
    }
}
