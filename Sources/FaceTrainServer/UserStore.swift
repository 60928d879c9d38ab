import FaceTrain
import FaceTrainEngine
import Foundation

/// Why the user store refused a change, in the store's own words: it knows nothing of HTTP, and the
/// routes give each case its status (`ClientError.init(_:)` in ServerRoutes.swift).
public enum UserStoreError: Error, Equatable, CustomStringConvertible {
    /// No registered user has this id.
    case noSuchUser(id: Int)
    /// A name or position the app cannot show: empty, too long, or with a hidden character.
    case invalidField(field: String, reason: String)
    /// The upload would take a user past the crops allowed per user; nothing was stored.
    case tooManyCrops(id: Int, existing: Int, adding: Int, limit: Int)
    /// The user has no crop with this SHA-256.
    case noSuchCrop(id: Int, sha256: String)

    public var description: String {
        switch self {
        case .noSuchUser(let id): "there is no user \(id); GET /v1/users lists the registered users"
        case .invalidField(let field, let reason): "\"\(field)\" \(reason)"
        case .tooManyCrops(let id, let existing, let adding, let limit):
            "user \(id) has \(existing) crops and this request adds \(adding); the limit is \(limit) crops per user. "
                + "Nothing was stored; delete the user or send fewer"
        case .noSuchCrop(let id, let sha256):
            "user \(id) has no crop with SHA-256 \(sha256); GET /v1/users/\(id)/photos lists their crops"
        }
    }
}

/// What happened to one uploaded file.
public struct PhotoOutcome: Codable, Sendable, Equatable {
    /// The client's file name.
    public var file: String
    /// "stored", "duplicate" or "rejected".
    public var result: String
    /// The stored name (`<sha256>.<ext>`), for stored and duplicate files.
    public var name: String?
    public var reason: String?
    /// Why the face check refused the file ("no_face", "second_face", ...), for rejected files.
    public var refusal: String?
    /// True when the file was a photo and what was stored is the aligned crop of its face.
    public var cropped: Bool?
}

/// The data folder `fit` reads (`<id>/` crops, `users.json`), owned by the server while it runs.
///
/// Every change is durable before it returns (temporary file, fsync, rename, fsync of the folder),
/// and ordered so a kill at any moment leaves a folder `data check` accepts:
/// - a new id is recorded in `.next-user-id` before users.json names it, so ids are never reused;
/// - a crop is written under a hidden temporary name and renamed to `<sha256>.<ext>`, so a half
///   file is never a crop (leftovers are removed at start);
/// - a deleted user's folder is first renamed to `.deleted-<id>` (hidden, so no training reads it),
///   then users.json drops the entry, then the folder is removed; a start finishes what a kill interrupted.
public final class UserStore: @unchecked Sendable {
    public let root: URL
    public var maximumCropsPerUser = 200
    /// Largest crop stored as uploaded (a photo the face check crops may be larger): a 49-megapixel
    /// "crop" costs seconds on every admin page and training and is no better a face.
    public var maximumCropPixels = 16_000_000
    /// The face check uploads of people and of class 2 pass (as `fit` checks them); nil stores
    /// every decodable image.
    package var faceCheck: FaceCheck?
    /// Called at named points between steps (tests kill the process there).
    var pause: @Sendable (String) -> Void = { _ in }

    /// Guards everything below, and the data folder itself while a training reads it.
    private let lock = NSLock()
    private var users: [Int: UserRecord] = [:]
    private var nextId = 3
    /// Which class holds the crop with this SHA-256 (a crop may not be in two classes).
    private var owners: [String: Int] = [:]
    /// The file name of the crop with this SHA-256 in its class's folder.
    private var fileNames: [String: String] = [:]
    private var crops: [Int: Int] = [:]

    static let usersName = "users.json"
    static let nextIdName = ".next-user-id"
    static let deletedPrefix = ".deleted-"

    /// Opens `root` (creating it), finishes interrupted deletions, drops temporary files, and
    /// indexes every crop by content hash.
    public init(root: URL) throws {
        self.root = root
        try FileSystem.createDirectory(root)
        var records: [Int: UserRecord] = [:]
        let usersURL = root.appendingPathComponent(Self.usersName)
        if FileSystem.kind(at: usersURL) != .missing {
            for raw in try UserMetadataReader.readList(at: usersURL) {
                guard let id = raw.id, ClassLabel.isUser(id: id) else {
                    throw DataProblem.invalidMetadata(path: raw.source, reason: "has no id of 3 or more")
                }
                records[id] = UserRecord(id: id, name: raw.name ?? "user \(id)", position: raw.position)
            }
        }
        var deletedIds: [Int] = []
        for name in try FileSystem.entries(of: root) {
            let url = root.appendingPathComponent(name)
            if name.hasPrefix(Self.deletedPrefix) {
                let id = Int(name.dropFirst(Self.deletedPrefix.count).prefix { $0.isNumber }) ?? 0
                deletedIds.append(id)
                records[id] = nil
                try FileSystem.removeTree(url)
                continue
            }
            guard let label = ModelRepository.parseVersion(name), FileSystem.kind(at: url) == .directory else {
                continue
            }
            var count = 0
            for file in try FileSystem.entries(of: url) {
                let fileURL = url.appendingPathComponent(file)
                if FileSystem.isTemporaryName(file) {
                    try FileSystem.removeTree(fileURL)
                    continue
                }
                guard !file.hasPrefix("."), file != "user.json", FileSystem.kind(at: fileURL) == .regular,
                    let data = FileManager.default.contents(atPath: fileURL.path)
                else { continue }
                let hash = contentHash(data)
                owners[hash] = label
                fileNames[hash] = file
                count += 1
            }
            // A kill during a user's first upload leaves their folder empty, which `fit` refuses
            // (an empty user); nothing was acknowledged in it, so it goes.
            if count == 0, ClassLabel.isUser(id: label), (try? FileSystem.entries(of: url))?.isEmpty == true {
                try FileSystem.removeTree(url)
                try FileSystem.sync(root)
                continue
            }
            crops[label] = count
            if ClassLabel.isUser(id: label), records[label] == nil {
                let single = url.appendingPathComponent("user.json")
                let raw = FileSystem.kind(at: single) == .regular ? try? UserMetadataReader.readSingle(at: single) : nil
                records[label] = UserRecord(id: label, name: raw?.name ?? "user \(label)", position: raw?.position)
            }
        }
        users = records
        let recorded =
            (try? String(contentsOf: root.appendingPathComponent(Self.nextIdName), encoding: .utf8))
            .flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) } ?? 0
        nextId = max(3, recorded, (records.keys.max() ?? 0) + 1, (deletedIds.max() ?? 0) + 1)
        if !deletedIds.isEmpty {
            try writeUsers()
            try FileSystem.sync(root)
        }
    }

    // MARK: Reading

    /// A user with their crop count, as the API shows them.
    public struct Summary: Codable, Sendable {
        public var id: Int
        public var name: String
        public var position: String?
        public var crops: Int

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(id, forKey: .id)
            try container.encode(name, forKey: .name)
            try container.encode(position, forKey: .position)
            try container.encode(crops, forKey: .crops)
        }
    }

    public func list() -> [Summary] {
        locked { users.values.sorted { $0.id < $1.id }.map(summary) }
    }

    public func user(_ id: Int) -> Summary? {
        locked { users[id].map(summary) }
    }

    /// One stored crop of a user (the first by name), for the admin page's thumbnail.
    public func firstCrop(_ id: Int) -> URL? {
        let folder = root.appendingPathComponent(String(id))
        let names = ((try? FileSystem.entries(of: folder)) ?? []).sorted()
        return names.lazy.filter { !$0.hasPrefix(".") && $0 != "user.json" }.map { folder.appendingPathComponent($0) }
            .first { FileSystem.kind(at: $0) == .regular }
    }

    /// One stored crop, as `GET /v1/users/{id}/photos` lists it.
    public struct StoredCrop: Codable, Sendable, Equatable {
        public var sha256: String
        /// Its file name in the user's folder.
        public var name: String
        public var bytes: Int
        /// When it was stored (the file's modification time: crops are never rewritten), ISO 8601.
        public var addedAt: String
    }

    /// A user's crops, oldest first.
    public func storedCrops(_ id: Int) throws -> [StoredCrop] {
        let entries = try locked {
            guard holds(id) else { throw UserStoreError.noSuchUser(id: id) }
            return owners.filter { $0.value == id }.keys.compactMap { hash in fileNames[hash].map { (hash, $0) } }
        }
        let folder = root.appendingPathComponent(String(id))
        let formatter = ISO8601DateFormatter()
        let listed = entries.compactMap { hash, name -> (Date, StoredCrop)? in
            guard
                let attributes = try? FileManager.default.attributesOfItem(
                    atPath: folder.appendingPathComponent(name).path),
                let size = attributes[.size] as? Int, let modified = attributes[.modificationDate] as? Date
            else { return nil }
            return (
                modified, StoredCrop(sha256: hash, name: name, bytes: size, addedAt: formatter.string(from: modified))
            )
        }
        return listed.sorted { ($0.0, $0.1.name) < ($1.0, $1.1.name) }.map(\.1)
    }

    /// The file of a user's crop.
    public func cropFile(_ id: Int, sha256: String) throws -> URL {
        try locked {
            guard holds(id) else { throw UserStoreError.noSuchUser(id: id) }
            guard owners[sha256] == id, let name = fileNames[sha256] else {
                throw UserStoreError.noSuchCrop(id: id, sha256: sha256)
            }
            return root.appendingPathComponent(String(id)).appendingPathComponent(name)
        }
    }

    /// Removes one crop of a user from disk, durably; the next training no longer sees it.
    public func deleteCrop(_ id: Int, sha256: String) throws {
        try locked {
            guard holds(id) else { throw UserStoreError.noSuchUser(id: id) }
            guard owners[sha256] == id, let name = fileNames[sha256] else {
                throw UserStoreError.noSuchCrop(id: id, sha256: sha256)
            }
            let folder = root.appendingPathComponent(String(id))
            let file = folder.appendingPathComponent(name)
            guard unlink(file.path) == 0 || errno == ENOENT else {
                throw FileSystemError(operation: "unlink", path: file.path, code: errno)
            }
            try FileSystem.sync(folder)
            owners[sha256] = nil
            fileNames[sha256] = nil
            crops[id] = max(0, (crops[id] ?? 1) - 1)
        }
    }

    /// Ids of the registered users.
    public func ids() -> Set<Int> { locked { Set(users.keys) } }

    /// Crops of a user or of class 1 or 2.
    public func cropCount(_ id: Int) -> Int { locked { crops[id] ?? 0 } }

    /// The content hashes of a user's (or class's) crops.
    public func cropHashes(_ id: Int) -> Set<String> { locked { Set(owners.filter { $0.value == id }.keys) } }

    /// Whether crops can be stored under `id`: a registered user, or class 1 (not a face) or 2
    /// (strangers), which always exist. Call with the lock held.
    private func holds(_ id: Int) -> Bool {
        users[id] != nil || ClassLabel(id: id) == .notAFace || ClassLabel(id: id) == .unknownPerson
    }

    private func summary(_ record: UserRecord) -> Summary {
        Summary(id: record.id, name: record.name, position: record.position, crops: crops[record.id] ?? 0)
    }

    /// Holds changes back until `endReading` (on the same thread): a training holds it while it
    /// loads the folder, and lets go as soon as the crops are in memory.
    func beginReading() { lock.lock() }
    func endReading() { lock.unlock() }

    // MARK: Users

    /// Registers a person; the id is new (>= 3) and never given out again.
    public func create(name: String, position: String?) throws -> Summary {
        try Self.validate(name: name, position: position)
        return try locked {
            let id = nextId
            try FileSystem.replaceAtomically(
                Data("\(id + 1)\n".utf8), at: root.appendingPathComponent(Self.nextIdName))
            nextId = id + 1
            pause("user-id-reserved")
            users[id] = UserRecord(id: id, name: name, position: position)
            do { try writeUsers() } catch {
                users[id] = nil
                throw error
            }
            return summary(users[id]!)
        }
    }

    /// Changes a name and/or position (`position` `.some(nil)` clears it).
    public func update(_ id: Int, name: String?, position: String??) throws -> Summary {
        try locked {
            guard var record = users[id] else { throw UserStoreError.noSuchUser(id: id) }
            let previous = record
            if let name { record.name = name }
            if let position { record.position = position }
            try Self.validate(name: record.name, position: record.position)
            users[id] = record
            do {
                try writeUsers()
                // A user.json beside the crops would contradict users.json (data check: conflicting metadata).
                let single = root.appendingPathComponent(String(id)).appendingPathComponent("user.json")
                if FileSystem.kind(at: single) == .regular {
                    try FileSystem.replaceAtomically(try JSONText.data(record) + Data("\n".utf8), at: single)
                }
            } catch {
                users[id] = previous
                throw error
            }
            return summary(record)
        }
    }

    /// Removes a user's crops and entry from disk, durably; returns how many crops there were.
    @discardableResult
    public func delete(_ id: Int) throws -> Int {
        try locked {
            guard users[id] != nil else { throw UserStoreError.noSuchUser(id: id) }
            let folder = root.appendingPathComponent(String(id))
            let trash = root.appendingPathComponent("\(Self.deletedPrefix)\(id)")
            if FileSystem.kind(at: folder) == .directory {
                try FileSystem.removeTree(trash)
                guard rename(folder.path, trash.path) == 0 else {
                    throw FileSystemError(
                        operation: "rename to \(trash.lastPathComponent)", path: folder.path, code: errno)
                }
                try FileSystem.sync(root)
            }
            pause("user-folder-moved")
            let record = users[id]
            users[id] = nil
            do { try writeUsers() } catch {
                // users.json still names them (a full disk): their crops come back into view too.
                users[id] = record
                if FileSystem.kind(at: trash) == .directory, rename(trash.path, folder.path) == 0 {
                    try? FileSystem.sync(root)
                }
                throw error
            }
            try FileSystem.removeTree(trash)
            try FileSystem.sync(root)
            for (hash, owner) in owners where owner == id { fileNames[hash] = nil }
            owners = owners.filter { $0.value != id }
            return crops.removeValue(forKey: id) ?? 0
        }
    }

    static func validate(name: String, position: String?) throws {
        let trimmed = name.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty else {
            throw UserStoreError.invalidField(field: "name", reason: "is empty; give the person's name")
        }
        for (field, text) in [("name", name), ("position", position ?? "")] {
            // Code points, as JSON Schema's maxLength in the OpenAPI document counts them (not grapheme clusters).
            guard text.unicodeScalars.count <= 200 else {
                throw UserStoreError.invalidField(
                    field: field, reason: "is longer than 200 characters (Unicode code points)")
            }
            // The same rule as data check: names reach terminals, the report and the app.
            if let problem = text.displayProblem { throw UserStoreError.invalidField(field: field, reason: problem) }
        }
    }

    private func writeUsers() throws {
        let records = users.values.sorted { $0.id < $1.id }
        try FileSystem.replaceAtomically(
            try JSONText.data(records) + Data("\n".utf8), at: root.appendingPathComponent(Self.usersName))
    }

    // MARK: Photos

    /// One uploaded file decoded and, with a face check, checked: the bytes to store (the file's,
    /// or the JPEG of its face's aligned crop when it is a photo) under their content hash, or why
    /// it is rejected.
    private struct CheckedFile {
        var file: FormFile
        var data: Data
        var hash: String
        var format: ImageFormat?
        var reason: String?
        var refusal: String?
        var cropped = false
    }

    /// `check` gives the face check's verdict on the decoded image, or nil when there is none.
    private func examine(_ file: FormFile, check: (Image) -> FaceCheckResult?) -> CheckedFile {
        let image: Image
        do { image = try ImageDecoder.decode(data: file.data, name: file.fileName) } catch {
            // The decoder's message starts with the name and ends with a HINT line; keep the reason.
            var reason = String(describing: error).split(separator: "\n").first.map(String.init) ?? "\(error)"
            if reason.hasPrefix(file.fileName + ": ") { reason.removeFirst(file.fileName.count + 2) }
            return CheckedFile(file: file, data: file.data, hash: contentHash(file.data), format: nil, reason: reason)
        }
        var entry = CheckedFile(
            file: file, data: file.data, hash: contentHash(file.data), format: ImageFormat(signature: file.data))
        let pixels = image.width * image.height
        guard let result = check(image) else {
            if pixels > maximumCropPixels { entry.reason = tooLarge(image) }
            return entry
        }
        if let refusal = result.refusal {
            entry.reason = "refused by the face check: \(refusal.description); \(refusal.hint)"
            entry.refusal = refusal.kind
        } else if result.alignedCrop == nil, pixels > maximumCropPixels {
            entry.reason = tooLarge(image)
        } else if let crop = result.alignedCrop {
            let rgb = crop.converted(channels: 3)
            do {
                entry.data = try JPEGWriter.encode(rgb: rgb.pixels, width: rgb.width, height: rgb.height, quality: 95)
                (entry.hash, entry.format, entry.cropped) = (contentHash(entry.data), .jpeg, true)
            } catch {
                entry.reason = "its face's crop could not be encoded (\(error))"
            }
        }
        return entry
    }

    private func tooLarge(_ image: Image) -> String {
        let megapixels = String(format: "%.1f", Double(image.width * image.height) / 1e6)
        return "is \(image.width) x \(image.height) pixels (\(megapixels) megapixels); a stored crop may have at most "
            + "\(maximumCropPixels / 1_000_000) megapixels: send the face's crop, or a smaller image"
    }

    /// Decodes and checks every file as `data check` would (a photo becomes its face's aligned crop),
    /// then stores the good ones under their content hash; duplicates and bad files are reported per file. Nothing is stored when a
    /// request-wide limit is broken.
    public func addPhotos(_ id: Int, files: [FormFile]) throws -> [PhotoOutcome] {
        // Decoding and the face check are the slow part and need no lock. The check's network
        // buffers are this request's own copy.
        var check = ClassLabel(id: id) == .notAFace ? nil : faceCheck
        let checked = files.map { file in
            examine(file) { image in check.map { _ in check!.examine(image) } }
        }
        return try locked {
            guard holds(id) else { throw UserStoreError.noSuchUser(id: id) }
            var outcomes: [PhotoOutcome] = []
            var toStore: [(index: Int, name: String, data: Data, hash: String)] = []
            var seen = Set<String>()
            for entry in checked {
                let name = entry.format.map { "\(entry.hash).\(Self.fileExtension($0))" }
                if let reason = entry.reason {
                    outcomes.append(
                        PhotoOutcome(
                            file: entry.file.fileName, result: "rejected", reason: reason, refusal: entry.refusal))
                } else if let owner = owners[entry.hash], owner != id {
                    let whom =
                        switch ClassLabel(id: owner) {
                        case .notAFace: "class 1 (not a face)"
                        case .unknownPerson: "class 2 (unknown people)"
                        case .user, nil: "user \(owner)"
                        }
                    outcomes.append(
                        PhotoOutcome(
                            file: entry.file.fileName, result: "rejected",
                            reason: "the same image is already a crop of \(whom); one image cannot show two classes"))
                } else if owners[entry.hash] == id || seen.contains(entry.hash) {
                    outcomes.append(
                        PhotoOutcome(
                            file: entry.file.fileName, result: "duplicate", name: name,
                            cropped: entry.cropped ? true : nil))
                } else {
                    seen.insert(entry.hash)
                    toStore.append((outcomes.count, name!, entry.data, entry.hash))
                    outcomes.append(
                        PhotoOutcome(
                            file: entry.file.fileName, result: "stored", name: name,
                            cropped: entry.cropped ? true : nil))
                }
            }
            let existing = crops[id] ?? 0
            if existing + toStore.count > maximumCropsPerUser {
                throw UserStoreError.tooManyCrops(
                    id: id, existing: existing, adding: toStore.count, limit: maximumCropsPerUser)
            }
            guard !toStore.isEmpty else { return outcomes }
            let folder = root.appendingPathComponent(String(id))
            if FileSystem.kind(at: folder) == .missing {
                try FileSystem.createDirectory(folder)
                try FileSystem.sync(root)
                pause("user-folder-created")
            }
            for item in toStore {
                let target = folder.appendingPathComponent(item.name)
                let temporary = folder.appendingPathComponent(FileSystem.temporaryName(for: item.name))
                try FileSystem.writeNewFile(item.data, to: temporary)
                do { try FileSystem.renameNoReplace(temporary, to: target) } catch {
                    unlink(temporary.path)
                    throw error
                }
                try FileSystem.sync(folder)
                owners[item.hash] = id
                fileNames[item.hash] = item.name
                crops[id, default: 0] += 1
                pause("photo-stored")
            }
            return outcomes
        }
    }

    static func fileExtension(_ format: ImageFormat) -> String {
        switch format {
        case .jpeg: return "jpg"
        case .png: return "png"
        case .pgm: return "pgm"
        case .ppm: return "ppm"
        }
    }

    private func locked<T>(_ body: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }
}
