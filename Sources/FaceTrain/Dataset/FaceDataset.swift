import Foundation

/// How a data folder is read: the model's input size and how strict validation is.
public struct DataLoadOptions: Sendable {
    public var inputWidth: Int
    public var inputHeight: Int
    /// 3: colour model (grey crops become 3 equal channels); 1: grey model.
    public var channels: Int
    /// Users with fewer crops than this stop the run.
    public var minimumImages: Int
    /// Unreadable images become warnings naming each skipped file instead of problems.
    public var skipBad: Bool
    /// Scoring a model: classes 1 and 2 may be missing, and folders whose name is not an id are
    /// read as people the model does not know (they get negative labels, never a model class).
    public var forEvaluation = false
    /// The face check that every image of a person or of class 2 passes (FaceCheck); nil reads
    /// images unchecked. `eval` never checks: it scores every file it is given.
    package var faceCheck: FaceCheck?

    public init(
        inputWidth: Int = 64, inputHeight: Int = 64, channels: Int = 3, minimumImages: Int = 5, skipBad: Bool = false
    ) {
        self.inputWidth = inputWidth
        self.inputHeight = inputHeight
        self.channels = channels
        self.minimumImages = minimumImages
        self.skipBad = skipBad
    }

    /// Throws when the options cannot read a folder (`fit`, `data check` and the server check them).
    public func validate() throws(ConfigurationError) {
        guard minimumImages >= 1 else {
            throw ConfigurationError(option: "min-images", message: "--min-images must be at least 1")
        }
    }
}

/// One face crop: where it came from, its class, its content hash and its pixels at input size.
public struct FaceSample: Sendable {
    public var path: String
    /// Class label: 1, 2 or a user id.
    public var label: Int
    /// Hex SHA-256 of the file's bytes.
    public var contentHash: String
    /// 8-bit pixels already resized to the model's input size.
    public var image: Image
    public var originalWidth: Int
    public var originalHeight: Int
}

/// A validated data folder: `<root>/<id>/<images>`, ids 1 and 2 being the negative classes.
public struct FaceDataset: Sendable {
    public var root: URL
    /// Class labels in output order: 1, 2, then user ids ascending.
    public var labels: [Int]
    /// Metadata of every user class (not 1 and 2), in label order.
    public var users: [UserRecord]
    public var samples: [FaceSample]
    /// What validation found, including warnings.
    public var report: DataReport
    /// Content hashes of crops filed as corrections (`.corrections.jsonl`): always trained on.
    public var corrections: Set<String> = []

    /// Reads, decodes and validates a data folder; throws `DataFolderError.invalid` with every
    /// problem at once when anything would make training unsound.
    public static func load(from root: URL, options: DataLoadOptions = DataLoadOptions()) throws(DataFolderError)
        -> FaceDataset
    {
        let scan = DataFolderScanner(root: root, options: options).scan()
        guard scan.report.problems.isEmpty else { throw .invalid(scan.report) }
        var report = scan.report
        let log = CorrectionLog(data: root)
        var corrections: Set<String> = []
        do { corrections = Set(try log.records().map(\.crop)) } catch {
            report.warnings.append(
                DataWarning(
                    kind: "unreadable_corrections", path: log.url.path,
                    message: "\(error); its crops are split like any other until it is fixed"))
        }
        var dataset = FaceDataset(
            root: root, labels: scan.labels, users: scan.users, samples: scan.samples, report: report)
        dataset.corrections = corrections
        return dataset
    }

    /// Validates a data folder and returns the report, problems included (for `data check`).
    public static func check(_ root: URL, options: DataLoadOptions = DataLoadOptions()) -> DataReport {
        DataFolderScanner(root: root, options: options).scan().report
    }

    /// Hash over the sorted content hashes of all samples: names the training data in manifests.
    public var fingerprint: String { Self.fingerprint(of: samples) }

    /// Hash over the sorted content hashes of some samples.
    public static func fingerprint(of samples: [FaceSample]) -> String {
        contentHash(Data(samples.map { "\($0.label):\($0.contentHash)" }.sorted().joined(separator: "\n").utf8))
    }

    /// Splits the samples per class into training and held-out crops, decided by each crop's hash;
    /// corrections always train.
    public func split(holdout: Double) -> (training: [FaceSample], heldOut: [FaceSample]) {
        let heldOutHashes = DataSplit.heldOut(samples: samples, fraction: holdout)
        var training: [FaceSample] = []
        var heldOut: [FaceSample] = []
        for sample in samples {
            if heldOutHashes.contains(sample.contentHash) && !corrections.contains(sample.contentHash) {
                heldOut.append(sample)
            } else {
                training.append(sample)
            }
        }
        return (training, heldOut)
    }

    /// The same data without some user classes (their crops, labels and metadata).
    public func without(labels removed: Set<Int>) -> FaceDataset {
        var copy = self
        copy.labels = labels.filter { !removed.contains($0) }
        copy.users = users.filter { !removed.contains($0.id) }
        copy.samples = samples.filter { !removed.contains($0.label) }
        return copy
    }

    /// Display name of a class label: the user's name or the negative class's name.
    public func name(of label: Int) -> String {
        ClassLabel(id: label)?.negativeName ?? users.first { $0.id == label }?.name ?? "user \(label)"
    }
}

/// A data folder with problems; its description lists them all.
public enum DataFolderError: Error, CustomStringConvertible {
    case invalid(DataReport)

    public var description: String {
        switch self {
        case .invalid(let report):
            let count = report.problems.count
            return
                "the data folder \(report.root) has \(count) problem\(count == 1 ? "" : "s"); "
                + "nothing was trained or written:\n"
                + report.problems.map { "  - \($0.message)" }.joined(separator: "\n")
        }
    }
}

/// The deterministic per-class split.
///
/// A crop is held out when its content hash, read as a fraction of 2^64, is below `fraction`,
/// so adding crops or users never moves an existing crop. A class with at least 3 crops and none
/// below the line holds out its lowest-hash crop; that crop can return to training if a later crop
/// of the same class falls below the line, the one exception to stability.
public enum DataSplit {
    /// Content hashes of the held-out samples.
    public static func heldOut(samples: [FaceSample], fraction: Double) -> Set<String> {
        guard fraction > 0 else { return [] }
        var byLabel: [Int: [String]] = [:]
        for sample in samples { byLabel[sample.label, default: []].append(sample.contentHash) }
        var result = Set<String>()
        for hashes in byLabel.values {
            let unique = Set(hashes)
            let below = unique.filter { hashFraction($0) < fraction }
            result.formUnion(below)
            if below.isEmpty && unique.count >= 3, let lowest = unique.min(by: { hashFraction($0) < hashFraction($1) })
            {
                result.insert(lowest)
            }
        }
        return result
    }

    /// The first 64 bits of a hex hash as a number in [0, 1).
    static func hashFraction(_ hash: String) -> Double {
        Double(UInt64(hash.prefix(16), radix: 16) ?? 0) / 18_446_744_073_709_551_616.0
    }
}
