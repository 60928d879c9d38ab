import Foundation

/// A folder of identity-labelled face crops for pretraining: `<identity>/<crop>` (or
/// `images/<identity>/<crop>` next to a `splits.json`), thousands of people with few crops each.
///
/// `splits.json` (optional) maps split names to identity names: `train` is what pretraining
/// learns from, `val` what verification is measured on, `bank` the strangers the base ships
/// features of. Without it, every identity trains and a fixed share (chosen by the hash of its
/// name) is held out for verification.
public struct IdentityCorpus: Sendable {
    public struct Crop: Sendable, Equatable {
        /// Path relative to `imagesRoot`: "<identity>/<file>".
        public var path: String
        /// Index into `identities`.
        public var identity: Int
    }

    public let root: URL
    /// The folder holding one sub-folder per identity.
    public let imagesRoot: URL
    public private(set) var identities: [String]
    public private(set) var crops: [Crop]
    /// Identity names per split, when the corpus has a `splits.json`.
    public let splits: [String: [String]]?

    /// Lists the corpus (no image is read): identity folders in name order, their files in name order.
    public static func scan(_ root: URL) throws(CorpusError) -> IdentityCorpus {
        guard isDirectory(root) else { throw .notAFolder(path: root.path) }
        let imagesFolder = root.appendingPathComponent("images")
        let imagesRoot = isDirectory(imagesFolder) ? imagesFolder : root
        var splits: [String: [String]]?
        let splitsURL = root.appendingPathComponent("splits.json")
        if FileManager.default.fileExists(atPath: splitsURL.path) {
            guard let data = FileManager.default.contents(atPath: splitsURL.path),
                let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
            else {
                throw .badSplits(path: splitsURL.path, reason: "it is not a JSON object of identity lists")
            }
            // Lists of identity names (or numbers) are splits; other members (a "note") are not.
            splits = object.compactMapValues { value in (value as? [Any])?.map { "\($0)" } }
            guard splits?["train"] != nil else {
                throw .badSplits(path: splitsURL.path, reason: "it has no \"train\" list")
            }
        }
        let names: [String]
        do { names = try FileSystem.entries(of: imagesRoot) } catch {
            throw .unlistable(path: imagesRoot.path, reason: "\(error)")
        }
        var identities: [String] = []
        var crops: [Crop] = []
        for name in names.sorted() where !name.hasPrefix(".") {
            let folder = imagesRoot.appendingPathComponent(name)
            guard isDirectory(folder) else { continue }
            let files: [String]
            do { files = try FileSystem.entries(of: folder) } catch {
                throw .unlistable(path: folder.path, reason: "\(error)")
            }
            let visible = files.filter { !$0.hasPrefix(".") }.sorted()
            guard !visible.isEmpty else { continue }
            for file in visible { crops.append(Crop(path: "\(name)/\(file)", identity: identities.count)) }
            identities.append(name)
        }
        guard !identities.isEmpty else { throw .noIdentities(path: imagesRoot.path) }
        if let splits {
            let names = ["train", "val", "bank"].filter { splits[$0] != nil }
            for (index, first) in names.enumerated() {
                for second in names[(index + 1)...] {
                    let shared = Set(splits[first]!).intersection(splits[second]!)
                    if let example = shared.sorted().first {
                        throw .badSplits(
                            path: splitsURL.path,
                            reason:
                                "\(shared.count) identities are in both \"\(first)\" and \"\(second)\" (first: \(example)); "
                                + "a split must never see another's people")
                    }
                }
            }
            let known = Set(identities)
            for (split, members) in splits where members.contains(where: { !known.contains($0) }) {
                let missing = members.filter { !known.contains($0) }
                throw .badSplits(
                    path: splitsURL.path,
                    reason: "split \"\(split)\" names \(missing.count) identities with no folder (first: \(missing[0]))"
                )
            }
        }
        return IdentityCorpus(root: root, imagesRoot: imagesRoot, identities: identities, crops: crops, splits: splits)
    }

    /// The identities of one split: from `splits.json`, or for a corpus without one, `val` is
    /// every identity whose name hashes into the first `validationShare` and `train` the rest.
    public func identities(ofSplit split: String, validationShare: Double = 0.1) -> Set<String> {
        if let splits { return Set(splits[split] ?? []) }
        let threshold = UInt64(validationShare * 65536)
        let validation = Set(identities.filter { UInt64(Self.hashPrefix($0)) < threshold })
        switch split {
        case "train": return Set(identities).subtracting(validation)
        case "val": return validation
        default: return []
        }
    }

    private static func hashPrefix(_ name: String) -> UInt16 {
        let hex = contentHash(Data(name.utf8)).prefix(4)
        return UInt16(hex, radix: 16) ?? 0
    }

    /// The same corpus with only the named identities (renumbered in name order).
    public func restricted(to names: Set<String>) -> IdentityCorpus {
        var copy = self
        let kept = identities.filter { names.contains($0) }
        let newIndex = Dictionary(uniqueKeysWithValues: kept.enumerated().map { ($1, $0) })
        copy.identities = kept
        copy.crops = crops.compactMap { crop in
            newIndex[identities[crop.identity]].map { Crop(path: crop.path, identity: $0) }
        }
        return copy
    }

    /// The same corpus without some crops (by path), dropping identities left with none.
    public func removing(paths: Set<String>) -> IdentityCorpus {
        guard !paths.isEmpty else { return self }
        let kept = crops.filter { !paths.contains($0.path) }
        return restricted(to: Set(kept.map { identities[$0.identity] })).filteredCrops { !paths.contains($0.path) }
    }

    private func filteredCrops(_ keep: (Crop) -> Bool) -> IdentityCorpus {
        var copy = self
        copy.crops = crops.filter(keep)
        return copy
    }

    /// Crops per identity, in identity order.
    public var cropCounts: [Int] {
        var counts = [Int](repeating: 0, count: identities.count)
        for crop in crops { counts[crop.identity] += 1 }
        return counts
    }

    public func url(of crop: Crop) -> URL { imagesRoot.appendingPathComponent(crop.path) }
}

/// Whether a folder is at `url`, following symbolic links (a corpus may be linked in).
private func isDirectory(_ url: URL) -> Bool {
    var flag: ObjCBool = false
    return FileManager.default.fileExists(atPath: url.path, isDirectory: &flag) && flag.boolValue
}

/// Why a corpus cannot be used for pretraining.
public enum CorpusError: Error, CustomStringConvertible, Equatable {
    case notAFolder(path: String)
    case unlistable(path: String, reason: String)
    case noIdentities(path: String)
    case badSplits(path: String, reason: String)
    case noRepeatedIdentity(path: String, identities: Int)
    case unreadableImages([String])
    case cacheNotWritable(path: String, reason: String)
    case badTeacher(path: String, reason: String)
    case cacheNotMappable(path: String, reason: String)
    case noVerificationIdentities(path: String, identities: Int)
    case interrupted

    public var description: String {
        switch self {
        case .notAFolder(let path):
            "--data \(path) is not a folder. HINT: give a folder with one sub-folder of face crops per identity."
        case .unlistable(let path, let reason):
            "cannot list \(path): \(reason). HINT: check that the folder exists and is readable."
        case .noIdentities(let path):
            "\(path) holds no identity folder with crops in it. "
                + "HINT: lay the corpus out as <identity>/<crop>.jpg (or images/<identity>/... beside splits.json)."
        case .badSplits(let path, let reason):
            "\(path): \(reason). HINT: fix splits.json or remove it (then 10 % of identities are held out for verification)."
        case .noRepeatedIdentity(let path, let identities):
            "none of the \(identities) training identities in \(path) has two crops or more: a margin softmax "
                + "over identities cannot learn what keeps one person's crops together from one crop each. "
                + "HINT: add identities with several crops (a few hundred with 5 or more work well)."
        case .unreadableImages(let problems):
            "\(problems.count) image\(problems.count == 1 ? "" : "s") cannot be used; nothing was trained:\n"
                + problems.prefix(20).map { "  \($0)" }.joined(separator: "\n")
                + (problems.count > 20 ? "\n  ... and \(problems.count - 20) more" : "")
                + "\nHINT: fix or remove them, or pass --skip-bad to pretrain without them."
        case .badTeacher(let path, let reason):
            "--teacher \(path) cannot be used: \(reason). HINT: give an HDF5 file with `files` [N] and "
                + "`descriptors` [N, D] datasets (like dlib_descriptors.h5)."
        case .interrupted:
            "interrupted while building the crop cache; nothing was trained and the cache is as it was. "
                + "HINT: run the same command again (crops already in the old cache are reused)."
        case .cacheNotMappable(let path, let reason):
            "cannot map the crop cache \(path) into memory: \(reason). HINT: raise the address-space limit "
                + "(ulimit -v) or free memory; the cache itself is fine."
        case .noVerificationIdentities(let path, let identities):
            "\(path) leaves \(identities) verification identit\(identities == 1 ? "y" : "ies") with a crop, and pair "
                + "accuracy needs two or more, one of them with two crops. HINT: list more identities under \"val\" "
                + "in splits.json (or, without splits.json, add identities: 10 % of them verify)."
        case .cacheNotWritable(let path, let reason):
            "cannot write the crop cache \(path): \(reason). HINT: pass --cache with a writable folder."
        }
    }
}
