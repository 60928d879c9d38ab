import FaceTrainEngine
import Foundation

/// The outcome of checking a bundle: every problem found, plus what could be read.
public struct BundleVerification: Sendable {
    public var directory: URL
    public var problems: [BundleProblem]
    public var manifest: Manifest?
    /// Read from weights.h5 when its checksum and shapes were right.
    public var weights: [LayerWeights]?
    public var metrics: MetricsDocument?
    public var isValid: Bool { problems.isEmpty }
}

/// Checks a bundle directory: checksums, the manifest against the weights and exports, and that
/// no listed path leaves the bundle.
///
/// A file is checked against both manifest.json and SHA256SUMS, so a changed byte in any file —
/// including the two lists — is reported under the name of the file that changed.
public enum BundleVerifier {
    public static let manifestName = "manifest.json"
    public static let checksumsName = "SHA256SUMS"
    public static let weightsName = "weights.h5"
    public static let metricsName = "metrics.json"
    public static let coreMLName = "FaceClassifier.mlmodel"
    public static let onnxName = "model.onnx"

    /// Verifies the bundle at `directory`. `expectedVersion` defaults to the directory's name
    /// when that is a number.
    public static func verify(_ directory: URL, expectedVersion: Int? = nil) -> BundleVerification {
        var result = BundleVerification(directory: directory, problems: [])
        func problem(_ file: String?, _ message: String) {
            result.problems.append(BundleProblem(file: file, message: message))
        }

        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDirectory), isDirectory.boolValue
        else {
            problem(nil, "\(directory.path) is not a directory")
            return result
        }

        // What is on disk, without following symbolic links.
        var onDisk: [String: FileSystem.Kind] = [:]
        collectEntries(directory, prefix: "", into: &onDisk)
        for (path, kind) in onDisk.sorted(by: { $0.key < $1.key }) {
            switch kind {
            case .symbolicLink: problem(path, "is a symbolic link; bundles hold only regular files")
            case .other: problem(path, "is not a regular file")
            default: break
            }
        }

        let manifest = readManifest(directory, onDisk: onDisk, problem: problem)
        result.manifest = manifest
        let sums = readChecksums(directory, onDisk: onDisk, problem: problem)

        // Hash every file either list names, once.
        var listed: [String: Manifest.FileEntry] = [:]
        for entry in manifest?.files ?? [] {
            if listed[entry.path] != nil { problem(manifestName, "lists \(entry.path) twice") }
            listed[entry.path] = entry
        }
        var actual: [String: (sha256: String, size: Int64)] = [:]
        for path in Set(listed.keys).union(sums.keys).sorted() {
            if let reason = unsafePathReason(path) {
                let lister = listed[path] != nil ? manifestName : checksumsName
                problem(lister, "lists '\(path)', which \(reason)")
                continue
            }
            if let reason = pathComponentProblem(path, in: directory) {
                problem(path, reason)
                continue
            }
            do {
                actual[path] = try SHA256.hashFile(at: directory.appendingPathComponent(path))
            } catch {
                problem(path, "cannot be read: \(error)")
            }
        }

        var changed: Set<String> = []
        for (path, entry) in listed.sorted(by: { $0.key < $1.key }) {
            if path == manifestName || path == checksumsName {
                problem(manifestName, "must not list \(path) in files")
                continue
            }
            guard let found = actual[path] else { continue }
            let summed = sums[path]
            if summed == nil { problem(checksumsName, "has no line for \(path)") }
            if found.sha256 == entry.sha256 && found.size == entry.size {
                if let summed, summed != found.sha256 {
                    problem(checksumsName, "has the wrong checksum for \(path) (the file matches manifest.json)")
                }
            } else if let summed, summed == found.sha256 {
                problem(manifestName, "has the wrong checksum or size for \(path) (the file matches SHA256SUMS)")
            } else {
                changed.insert(path)
                let detail =
                    found.size == entry.size
                    ? "SHA-256 is \(found.sha256), the manifest says \(entry.sha256)"
                    : "size is \(found.size) bytes, the manifest says \(entry.size)"
                problem(path, "was modified or damaged: its \(detail)")
            }
        }
        if manifest != nil, let summed = sums[manifestName], let found = actual[manifestName], summed != found.sha256 {
            problem(
                manifestName, "does not match its checksum in SHA256SUMS (manifest.json or SHA256SUMS was modified)")
        }
        if !sums.isEmpty, manifest != nil, sums[manifestName] == nil {
            problem(checksumsName, "has no line for \(manifestName)")
        }
        let checkLists = manifest != nil
        for path in sums.keys.sorted()
        where checkLists && path != manifestName && listed[path] == nil && unsafePathReason(path) == nil {
            problem(checksumsName, "lists \(path), which manifest.json does not")
        }
        for (path, kind) in onDisk.sorted(by: { $0.key < $1.key })
        where checkLists && kind == .regular && path != manifestName && path != checksumsName && listed[path] == nil {
            problem(path, "is in the bundle but not listed in manifest.json")
        }

        guard let manifest else { return result }
        checkManifestContent(manifest, directory: directory, expectedVersion: expectedVersion, problem: problem)

        // Content checks, only on files whose checksum is right (never parse damaged bytes).
        func intact(_ path: String) -> Bool { listed[path] != nil && actual[path] != nil && !changed.contains(path) }
        let definition = manifest.definition
        if listed[weightsName] == nil {
            problem(manifestName, "does not list \(weightsName)")
        } else if intact(weightsName) {
            let weightsURL = directory.appendingPathComponent(weightsName)
            do {
                if let width = try WeightsFile.outputWidth(of: weightsURL, definition: definition),
                    width != manifest.classes.count
                {
                    problem(
                        weightsName,
                        "the classifier has \(width) outputs but manifest.json lists \(manifest.classes.count) classes")
                } else {
                    result.weights = try WeightsFile.read(from: weightsURL, definition: definition)
                }
            } catch {
                problem(weightsName, "\(error)")
            }
        }
        if intact(metricsName) {
            do {
                let metrics = try MetricsDocument.decode(
                    Data(contentsOf: directory.appendingPathComponent(metricsName)))
                result.metrics = metrics
                // A newer layout may have moved a number this code would then read as missing.
                if let format = metrics.formatVersion, format > MetricsDocument.currentFormatVersion {
                    problem(
                        metricsName,
                        "has format version \(format), newer than this facetrain understands "
                            + "(\(MetricsDocument.currentFormatVersion)); HINT: upgrade facetrain")
                }
            } catch {
                problem(metricsName, "is not valid metrics JSON: \(error)")
            }
        }
        let contentHash = try? manifest.contentSHA256
        for path in listed.keys.sorted() where intact(path) && (path.hasSuffix(".mlmodel") || path.hasSuffix(".onnx")) {
            checkExport(
                path, directory: directory, labels: manifest.classes.map(\.label.description), contentHash: contentHash,
                problem: problem)
        }
        return result
    }

    private static func collectEntries(_ directory: URL, prefix: String, into entries: inout [String: FileSystem.Kind])
    {
        guard let names = try? FileSystem.entries(of: directory) else { return }
        for name in names {
            let url = directory.appendingPathComponent(name)
            let path = prefix + name
            let kind = FileSystem.kind(at: url)
            entries[path] = kind
            if kind == .directory { collectEntries(url, prefix: path + "/", into: &entries) }
        }
    }

    private static func readManifest(
        _ directory: URL, onDisk: [String: FileSystem.Kind], problem: (String?, String) -> Void
    ) -> Manifest? {
        guard onDisk[manifestName] == .regular else {
            problem(manifestName, onDisk[manifestName] == nil ? "is missing" : "is not a regular file")
            return nil
        }
        do {
            return try Manifest.decode(Data(contentsOf: directory.appendingPathComponent(manifestName)))
        } catch {
            problem(manifestName, "is not a valid manifest (damaged or hand-edited): \(error)")
            return nil
        }
    }

    /// SHA256SUMS as path -> hex; malformed lines are problems.
    private static func readChecksums(
        _ directory: URL, onDisk: [String: FileSystem.Kind], problem: (String?, String) -> Void
    ) -> [String: String] {
        guard onDisk[checksumsName] == .regular else {
            problem(checksumsName, onDisk[checksumsName] == nil ? "is missing" : "is not a regular file")
            return [:]
        }
        guard let data = try? Data(contentsOf: directory.appendingPathComponent(checksumsName)),
            let text = String(data: data, encoding: .utf8)
        else {
            problem(checksumsName, "cannot be read as UTF-8 text")
            return [:]
        }
        var sums: [String: String] = [:]
        for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            if line.isEmpty { continue }
            guard let parsed = ChecksumList.parse(line: String(line)) else {
                problem(checksumsName, "line \(number + 1) is not '<sha256>  <name>'")
                continue
            }
            if sums[parsed.path] != nil { problem(checksumsName, "lists \(parsed.path) twice") }
            sums[parsed.path] = parsed.sha256
        }
        if !text.isEmpty && !text.hasSuffix("\n") { problem(checksumsName, "does not end with a newline") }
        return sums
    }

    /// Why a listed path could escape the bundle, or nil when it is a plain relative path.
    static func unsafePathReason(_ path: String) -> String? {
        if path.isEmpty { return "is empty" }
        if path.hasPrefix("/") { return "is an absolute path" }
        if path.contains("\\") || path.contains("\0") || path.contains("\n") {
            return "contains a backslash or control character"
        }
        let components = path.split(separator: "/", omittingEmptySubsequences: false)
        if components.contains("..") { return "leaves the bundle through '..'" }
        if components.contains(where: { $0.isEmpty || $0 == "." }) { return "is not a normalised relative path" }
        return nil
    }

    /// Why a relative path does not name a regular file inside `directory` without links.
    private static func pathComponentProblem(_ path: String, in directory: URL) -> String? {
        var url = directory
        let components = path.split(separator: "/").map(String.init)
        for (index, component) in components.enumerated() {
            url.appendPathComponent(component)
            let kind = FileSystem.kind(at: url)
            let last = index == components.count - 1
            switch kind {
            case .missing: return "is missing"
            case .symbolicLink: return "is reached through a symbolic link; bundles hold only regular files"
            case .regular where last, .directory where !last: continue
            default: return last ? "is not a regular file" : "is reached through something that is not a directory"
            }
        }
        return nil
    }

    private static func checkManifestContent(
        _ manifest: Manifest, directory: URL, expectedVersion: Int?, problem: (String?, String) -> Void
    ) {
        if manifest.formatVersion > Manifest.currentFormatVersion {
            problem(
                manifestName,
                "has format version \(manifest.formatVersion), newer than this facetrain "
                    + "understands (\(Manifest.currentFormatVersion)); HINT: upgrade facetrain")
        }
        let expected = expectedVersion ?? Int(directory.lastPathComponent)
        if manifest.version < 1 {
            problem(manifestName, "has version \(manifest.version); versions are positive integers")
        } else if let expected, expected != manifest.version {
            problem(manifestName, "says version \(manifest.version) but the bundle is version \(expected)")
        }
        let labels = manifest.classes.map(\.label.description)
        if Set(labels).count != labels.count { problem(manifestName, "lists a class label twice: \(labels)") }
        let users = Dictionary(manifest.users.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        for entry in manifest.classes {
            if entry.kind != entry.label.kindName {
                problem(
                    manifestName,
                    "class '\(entry.label)' is of kind '\(entry.kind)'; classes 1 and 2 are negative, all others users")
            }
            guard case .user(let id) = entry.label else { continue }
            guard entry.id == id else {
                problem(manifestName, "user class '\(entry.label)' does not carry its id as its label")
                continue
            }
            if users[id] == nil { problem(manifestName, "user class '\(entry.label)' has no entry in users") }
        }
        let definition = manifest.definition
        if let lastLinear = definition.layers.last(where: { if case .linear = $0 { true } else { false } }),
            case .linear(_, let outputs) = lastLinear, outputs != labels.count
        {
            problem(manifestName, "its last linear layer has \(outputs) outputs but it lists \(labels.count) classes")
        }
    }

    private static func checkExport(
        _ path: String, directory: URL, labels: [String], contentHash: String?, problem: (String?, String) -> Void
    ) {
        let contents: ExportInspector.Contents
        do {
            let data = try Data(contentsOf: directory.appendingPathComponent(path))
            contents = path.hasSuffix(".onnx") ? try ExportInspector.onnx(data) : try ExportInspector.coreML(data)
        } catch {
            problem(path, "cannot be parsed as \(path.hasSuffix(".onnx") ? "ONNX" : "Core ML"): \(error)")
            return
        }
        guard let exported = contents.classLabels else {
            problem(path, "holds no class labels")
            return
        }
        if exported != labels {
            problem(path, "has class labels \(exported) but manifest.json lists \(labels)")
        }
        for (key, value) in contents.metadata where isManifestHashKey(key) {
            if let contentHash, value.lowercased() != contentHash {
                problem(path, "embeds manifest SHA-256 \(value) but the manifest's contentSHA256 is \(contentHash)")
            }
        }
    }

    /// Metadata keys that carry the manifest's content hash ("manifestSHA256", "manifest_sha256"…).
    static func isManifestHashKey(_ key: String) -> Bool {
        let folded = key.lowercased().filter { $0.isLetter || $0.isNumber }
        return folded.contains("manifest") && folded.contains("sha256")
    }
}
