// The rule of a face classifier's classes, in one type: class 1 is "not a face", class 2 an
// unknown person, every other class a user named by its id, and how each is spelled in data
// folders, manifests, exports, metrics and the app's API. It is not a user's record (`UserRecord`)
// nor a manifest's class entry (`Manifest.ClassEntry`), and it does not know users' names.

/// One class of a face classifier. The app's contract: a class label is the user id as a string,
/// and the app ignores labels "1" and "2".
///
/// Read from and written as the same strings ("1", "2", "17"): `description` and `Codable` give back
/// exactly the string a label was parsed from, so every manifest and bundle reads and writes byte
/// for byte.
public enum ClassLabel: Hashable, Sendable, Codable, LosslessStringConvertible {
    /// "1": the crop is not a face.
    case notAFace
    /// "2": a face of someone not enrolled.
    case unknownPerson
    /// A user, by id. Ids are 3 or more; `init(id:)` and `init(_:)` never make a smaller one.
    case user(Int)

    /// The two classes every data folder has and the app ignores, in the model's output order.
    public static let negatives: [ClassLabel] = [.notAFace, .unknownPerson]

    /// The class of a data-folder or user id: 1, 2 or a user's id (3 or more); nil for other numbers
    /// (`eval` gives folders that are not named by an id negative numbers).
    public init?(id: Int) {
        switch id {
        case 1: self = .notAFace
        case 2: self = .unknownPerson
        case 3...: self = .user(id)
        default: return nil
        }
    }

    /// The class a label names. Only the plain decimal form: "017", "+17" or " 17" would be written
    /// back as "17", so they are no labels.
    public init?(_ description: String) {
        guard let id = Int(description), String(id) == description else { return nil }
        self.init(id: id)
    }

    /// Labels as a model lists them (`ModelDefinition.classLabels`), in order.
    public static func parse(_ labels: [String]) throws(ClassLabelError) -> [ClassLabel] {
        var parsed: [ClassLabel] = []
        parsed.reserveCapacity(labels.count)
        for text in labels {
            guard let label = ClassLabel(text) else { throw ClassLabelError(label: text) }
            parsed.append(label)
        }
        return parsed
    }

    /// 1, 2 or the user's id; also the class's folder name in a data folder.
    public var id: Int {
        switch self {
        case .notAFace: 1
        case .unknownPerson: 2
        case .user(let id): id
        }
    }

    /// The label as manifests, exports, metrics and the app write it: the id in decimal.
    public var description: String { String(id) }

    /// Whether the class is a user: the only classes the app acts on.
    public var isUser: Bool {
        if case .user = self { true } else { false }
    }

    /// Whether `id` is a user's id, i.e. neither a negative class nor a placeholder of `eval`.
    public static func isUser(id: Int) -> Bool { ClassLabel(id: id)?.isUser == true }

    /// Whether `id` is 1 or 2, the id of a negative class.
    public static func isNegative(id: Int) -> Bool { ClassLabel(id: id)?.isUser == false }

    /// "negative" or "user": the kind of a class as manifests and data reports write it.
    public var kindName: String { isUser ? "user" : "negative" }

    /// The fixed display name of a negative class; a user's name is in the user's record.
    public var negativeName: String? {
        switch self {
        case .notAFace: "not a face"
        case .unknownPerson: "unknown person"
        case .user: nil
        }
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let label = ClassLabel(text) else {
            throw DecodingError.dataCorruptedError(
                in: container, debugDescription: ClassLabelError(label: text).description)
        }
        self = label
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}

/// A string that stands where a class label must be but is none.
public struct ClassLabelError: Error, Equatable, CustomStringConvertible {
    public var label: String

    public var description: String {
        "'\(label)' is not a class label: labels are \"1\" (not a face), \"2\" (unknown person) or a user id of 3 "
            + "or more, in plain decimal"
    }
}
