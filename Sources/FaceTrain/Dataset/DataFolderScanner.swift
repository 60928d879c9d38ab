import FaceTrainEngine
import Foundation

/// Walks a data folder once, decodes every image in parallel, and collects every problem.
struct DataFolderScanner {
    let root: URL
    let options: DataLoadOptions

    struct Result {
        var report: DataReport
        var labels: [Int]
        var users: [UserRecord]
        var samples: [FaceSample]
    }

    /// Extensions that promise an image; a file with one that does not decode is a problem.
    static let imageExtensions = ImageDecoder.fileExtensions

    private enum FileOutcome {
        /// `cutFromPhoto`: the face check found a photo and the sample is its face's aligned crop.
        case sample(FaceSample, cutFromPhoto: Bool)
        case notAnImage
        case unreadable(String)
        case refused(CropRefusal)
    }

    func scan() -> Result {
        var problems: [DataProblem] = []
        var warnings: [DataWarning] = []
        let fileManager = FileManager.default
        var isDirectory: ObjCBool = false
        guard fileManager.fileExists(atPath: root.path, isDirectory: &isDirectory), isDirectory.boolValue else {
            let problem: DataProblem =
                fileManager.fileExists(atPath: root.path)
                ? .notAFolder(path: root.path) : .missingFolder(path: root.path)
            return finish(problems: [problem], warnings: [], samples: [], classFolders: [:], users: [])
        }

        // Root level: one folder per class, users.json, nothing else.
        var classFolders: [Int: URL] = [:]
        var metadata: [RawUser] = []
        let rootEntries = visibleEntries(of: root, problems: &problems, warnings: &warnings)
        guard problems.isEmpty else {  // nothing else can be judged in a folder that cannot be listed
            return finish(problems: problems, warnings: [], samples: [], classFolders: [:], users: [])
        }
        for name in rootEntries {
            let url = root.appendingPathComponent(name)
            if isFolder(url) {
                if let id = Int(name), id > 0, String(id) == name {
                    classFolders[id] = url
                } else if options.forEvaluation {
                    classFolders[-(classFolders.keys.filter { $0 < 0 }.count + 1)] = url
                } else {
                    problems.append(.folderNotAnId(path: url.path))
                }
            } else if name == "users.json" {
                do { metadata += try UserMetadataReader.readList(at: url) } catch { problems.append(error) }
            } else {
                warnings.append(
                    DataWarning(
                        kind: "ignored_file", path: url.path, message: "not a class folder or users.json; ignored"))
            }
        }

        // Class folders: image files, user.json, nothing else.
        var candidates: [(label: Int, url: URL)] = []
        var unlistable = Set<Int>()
        for (label, folder) in classFolders.sorted(by: { $0.key < $1.key }) {
            let known = problems.count
            let entries = visibleEntries(of: folder, problems: &problems, warnings: &warnings)
            if problems.count > known { unlistable.insert(label) }
            for name in entries {
                let url = folder.appendingPathComponent(name)
                if isFolder(url) {
                    warnings.append(
                        DataWarning(
                            kind: "ignored_folder", path: url.path,
                            message: "folders inside a class folder are not read; ignored"))
                } else if name == "user.json" {
                    do {
                        var record = try UserMetadataReader.readSingle(at: url)
                        if let id = record.id, id != label {
                            problems.append(
                                .conflictingMetadata(
                                    id: label, sources: ["folder \(folder.path)", "\(url.path) (id \(id))"]))
                        }
                        record.id = label
                        if ClassLabel.isNegative(id: label) {
                            warnings.append(
                                DataWarning(
                                    kind: "ignored_file", path: url.path,
                                    message: "classes 1 and 2 have no user metadata; ignored"))
                        } else {
                            metadata.append(record)
                        }
                    } catch { problems.append(error) }
                } else {
                    candidates.append((label, url))
                }
            }
        }

        // Decode (and check) everything at once, on all cores.
        let outcomes: [FileOutcome]
        if let faceCheck = options.faceCheck, !options.forEvaluation {
            outcomes = faceCheck.map(candidates.count) { check, index in
                decode(candidates[index].url, label: candidates[index].label) { check.examine($0) }
            }
        } else {
            outcomes = Parallel.map(candidates.count) { index in
                decode(candidates[index].url, label: candidates[index].label) { _ in nil }
            }
        }
        var samples: [FaceSample] = []
        for (candidate, outcome) in zip(candidates, outcomes) {
            switch outcome {
            case .sample(let sample, let cutFromPhoto):
                samples.append(sample)
                if cutFromPhoto {
                    warnings.append(
                        DataWarning(
                            kind: "cut_from_photo", path: sample.path,
                            message: "a photo, not a crop: its face was found, aligned and cut out"))
                }
            case .refused(let refusal) where options.skipBad:
                warnings.append(
                    DataWarning(
                        kind: "skipped_image", path: candidate.url.path,
                        message: "skipped: refused by the face check: \(refusal.description)"))
            case .refused(let refusal):
                problems.append(
                    .refusedFace(
                        path: candidate.url.path, kind: refusal.kind, reason: refusal.description, hint: refusal.hint))
            case .notAnImage where !Self.imageExtensions.contains(candidate.url.pathExtension.lowercased()):
                warnings.append(
                    DataWarning(kind: "not_an_image", path: candidate.url.path, message: "not an image file; ignored"))
            case .notAnImage where options.skipBad:
                warnings.append(
                    DataWarning(
                        kind: "skipped_image", path: candidate.url.path,
                        message: "skipped: not an image (unknown format)"))
            case .notAnImage:
                problems.append(.unreadableImage(path: candidate.url.path, reason: "not an image (unknown format)"))
            case .unreadable(let reason):
                if options.skipBad {
                    warnings.append(
                        DataWarning(
                            kind: "skipped_image", path: candidate.url.path,
                            message: "skipped: \(reason)"))
                } else {
                    problems.append(.unreadableImage(path: candidate.url.path, reason: reason))
                }
            }
        }

        // The same bytes twice: within a class it is a harmless repeat (trained on once; evaluation
        // scores every file, as a scorer of the predictions expects), across classes a labelling error.
        var firstByHash: [String: FaceSample] = [:]
        var pathsByHash: [String: [String]] = [:]
        var unique: [FaceSample] = []
        for sample in samples {
            if let first = firstByHash[sample.contentHash] {
                if first.label == sample.label {
                    warnings.append(
                        DataWarning(
                            kind: "duplicate_image", path: sample.path,
                            message: "same bytes as \(first.path); "
                                + (options.forEvaluation ? "scored as a crop of its own" : "used once")))
                    if options.forEvaluation { unique.append(sample) }
                } else {
                    pathsByHash[sample.contentHash, default: [first.path]].append(sample.path)
                }
                continue
            }
            firstByHash[sample.contentHash] = sample
            unique.append(sample)
        }
        for paths in pathsByHash.values.sorted(by: { $0[0] < $1[0] }) {
            problems.append(.duplicateAcrossUsers(paths: paths))
        }

        // Counts per class.
        var counts: [Int: Int] = [:]
        for sample in unique { counts[sample.label, default: 0] += 1 }
        for label in ClassLabel.negatives.map(\.id)
        where counts[label, default: 0] == 0 && !options.forEvaluation && !unlistable.contains(label) {
            problems.append(
                .missingNegativeClass(
                    label: label, path: classFolders[label]?.path ?? root.appendingPathComponent(String(label)).path))
        }
        for (label, folder) in classFolders.sorted(by: { $0.key < $1.key })
        where ClassLabel.isUser(id: label) && !unlistable.contains(label) {
            let count = counts[label, default: 0]
            if count == 0 {
                problems.append(.emptyUser(path: folder.path))
            } else if count < options.minimumImages && !options.forEvaluation {
                problems.append(.tooFewImages(path: folder.path, count: count, minimum: options.minimumImages))
            }
        }

        let userIds = classFolders.keys.filter(ClassLabel.isUser(id:)).sorted()
        if userIds.isEmpty && !options.forEvaluation { problems.append(.noUsers(path: root.path)) }
        let users = resolveUsers(ids: userIds, metadata: metadata, problems: &problems, warnings: &warnings)
        return finish(problems: problems, warnings: warnings, samples: unique, classFolders: classFolders, users: users)
    }

    private func finish(
        problems: [DataProblem], warnings: [DataWarning], samples: [FaceSample], classFolders: [Int: URL],
        users: [UserRecord]
    ) -> Result {
        let labels = classFolders.keys.sorted()
        var grouped: [Int: [FaceSample]] = [:]
        for sample in samples { grouped[sample.label, default: []].append(sample) }
        let classes = labels.map { label in
            let members = grouped[label] ?? []
            return DataReport.ClassSummary(
                label: label,
                // `eval` reads folders that are not named by an id as unknown people.
                kind: (ClassLabel(id: label) ?? .unknownPerson).kindName,
                name: ClassLabel(id: label)?.negativeName ?? users.first { $0.id == label }?.name ?? "user \(label)",
                images: members.count,
                minimumWidth: members.map(\.originalWidth).min() ?? 0,
                minimumHeight: members.map(\.originalHeight).min() ?? 0,
                maximumWidth: members.map(\.originalWidth).max() ?? 0,
                maximumHeight: members.map(\.originalHeight).max() ?? 0)
        }
        let report = DataReport(
            root: root.path,
            problems: problems.map { DataReport.Entry(kind: $0.kind, path: $0.path, message: $0.description) },
            warnings: warnings,
            classes: classes)
        return Result(report: report, labels: labels, users: users, samples: samples)
    }

    /// Merges users.json and user.json records; every user folder gets a record.
    private func resolveUsers(
        ids: [Int], metadata: [RawUser], problems: inout [DataProblem], warnings: inout [DataWarning]
    ) -> [UserRecord] {
        var byId: [Int: RawUser] = [:]
        for record in metadata {
            guard let id = record.id else {
                problems.append(.invalidMetadata(path: record.source, reason: "has no \"id\""))
                continue
            }
            if ClassLabel.isNegative(id: id) {
                problems.append(.reservedIdInMetadata(source: record.source, id: id))
                continue
            }
            // Names reach terminals, the report and the app: an escape, NUL, line break or bidirectional
            // override (which can make one name read as another) is never meant.
            for (field, text) in [("name", record.name), ("position", record.position)] {
                if let problem = text?.displayProblem {
                    problems.append(
                        .invalidMetadata(path: record.source, reason: "the \(field) of user \(id) \(problem)"))
                }
            }
            if let earlier = byId[id] {
                if earlier.name != nil, record.name != nil,
                    earlier.name != record.name
                        || (earlier.position != nil && record.position != nil && earlier.position != record.position)
                {
                    problems.append(.conflictingMetadata(id: id, sources: [earlier.source, record.source]))
                }
                byId[id] = RawUser(
                    id: id, name: earlier.name ?? record.name, position: earlier.position ?? record.position,
                    source: earlier.source)
            } else {
                byId[id] = record
            }
        }
        let idSet = Set(ids)
        for id in byId.keys.sorted() where !idSet.contains(id) {
            warnings.append(
                DataWarning(
                    kind: "metadata_without_folder", path: byId[id]!.source,
                    message: "describes user \(id), who has no folder; ignored"))
        }
        return ids.map { id in
            guard let record = byId[id], let name = record.name, !name.isEmpty else {
                warnings.append(
                    DataWarning(
                        kind: "missing_metadata", path: root.appendingPathComponent(String(id)).path,
                        message: "no name in users.json or user.json; using \"user \(id)\""))
                return UserRecord(id: id, name: "user \(id)", position: byId[id]?.position)
            }
            return UserRecord(id: id, name: name, position: record.position)
        }
    }

    /// Reads, decodes and resizes one image; with a face check, an image of a person or of class 2
    /// is checked first (class 1, not a face, never is): `examine` gives the check's verdict, or
    /// nil when the folder is read unchecked.
    private func decode(_ url: URL, label: Int, examine: (Image) -> FaceCheckResult?) -> FileOutcome {
        let data: Data
        do throws(ImageError) { data = try ImageDecoder.readFile(url) } catch {
            guard case .unreadable(_, let reason) = error else { return .unreadable(error.description) }
            return .unreadable("cannot be read (\(reason))")
        }
        do {
            let image = try ImageDecoder.decode(data: data, name: url.path)
            var face = image
            var cutFromPhoto = false
            if ClassLabel(id: label) != .notAFace, let result = examine(image) {
                if let refusal = result.refusal { return .refused(refusal) }
                if let crop = result.alignedCrop { (face, cutFromPhoto) = (crop, true) }
            }
            let resized = face.converted(channels: options.channels).resized(
                width: options.inputWidth, height: options.inputHeight)
            return .sample(
                FaceSample(
                    path: url.path, label: label, contentHash: contentHash(data), image: resized,
                    originalWidth: image.width, originalHeight: image.height),
                cutFromPhoto: cutFromPhoto)
        } catch {
            if case .notAnImage = error { return .notAnImage }
            let text = error.description
            return .unreadable(text.hasPrefix(url.path + ": ") ? String(text.dropFirst(url.path.count + 2)) : text)
        }
    }

    /// Names of a folder's entries, hidden ones (".DS_Store", ".git") left out, sorted; a folder
    /// that cannot be listed is a problem of its own, not an empty class.
    private func visibleEntries(of folder: URL, problems: inout [DataProblem], warnings: inout [DataWarning])
        -> [String]
    {
        do {
            let listing = try FileSystem.listing(of: folder)
            for name in listing.notUTF8 where !name.hasPrefix(".") {
                let path = folder.appendingPathComponent(name).path
                let reason = "its name is not valid UTF-8 (shown with \u{FFFD}); rename it"
                if options.skipBad {
                    warnings.append(DataWarning(kind: "skipped_image", path: path, message: "skipped: \(reason)"))
                } else {
                    problems.append(.unreadableImage(path: path, reason: reason))
                }
            }
            return listing.names.filter { !$0.hasPrefix(".") }
        } catch {
            let reason = (error as? FileSystemError)?.reason ?? "\(error)"
            problems.append(.unreadableFolder(path: folder.path, reason: reason))
            return []
        }
    }

    private func isFolder(_ url: URL) -> Bool {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) && isDirectory.boolValue
    }
}
