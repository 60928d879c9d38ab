import FaceTrain
import FaceTrainEngine
import Foundation

/// One made-up enrolled person, as written to `users.json`.
public struct SyntheticUser: Codable, Sendable, Equatable {
    public let id: Int
    public let name: String
    public let position: String
}

/// One crop of a synthetic data set: its class label, whose photo it is, and where it is written.
public struct SyntheticSample: Sendable, Equatable {
    /// 1 = not a face, 2 = unknown person, 3… = user id.
    public let label: Int
    /// Index of the person within their class (user index, stranger index), or of the non-face.
    public let identity: Int
    /// Index of the photo of that person (0 for non-faces).
    public let photo: Int
    /// Path relative to the output folder, e.g. `3/7.jpg`, `2/12_3.jpg` (stranger 12, photo 3), `1/40.jpg`.
    public let relativePath: String
}

/// What `SyntheticFaces.generate` wrote.
public struct SynthesisSummary: Sendable {
    public let outputDirectory: URL
    public let users: [SyntheticUser]
    /// Number of crops per class label.
    public let imageCounts: [Int: Int]
    /// Files already in the output folder that this run neither wrote nor removed (only with replacing allowed).
    public let leftoverFiles: [String]
    /// Wall-clock time of the whole run.
    public let seconds: Double
    /// Crops (relative paths) whose first drawing the face check refused and that were drawn again;
    /// empty when no check was asked for.
    public let redrawn: [String]

    /// Crops written in total.
    public var imageCount: Int { imageCounts.values.reduce(0, +) }
}

/// Deterministic synthetic face crops for demos and tests: per-user folders of one made-up person each, a
/// class of strangers and a class of non-faces, in the layout `facetrain` trains from.
///
/// Layout: `1/<n>.jpg` not a face; `2/<p>_<n>.jpg` photo n of stranger p; `3/<n>.jpg` … `<N+2>/<n>.jpg`
/// the users; `users.json` = `[{"id", "name", "position"}]`. A person's traits live in `FaceIdentity`, the
/// per-photo nuisance in `PhotoConditions` and `Camera`, the non-faces in `NonFaceRenderer`.
///
/// Every crop is rendered from its own random stream derived from (seed, class, person, photo), so a run is
/// byte-identical whatever the thread count or build configuration, and a larger run with the same seed
/// contains the crops of a smaller one.
///
/// With a face check (what `fit` applies to faces), a face whose drawing the check refuses is drawn
/// again as another photo of the same person (the photo stream gains the attempt number), so a data
/// set is one `fit` takes as it is. That decision rests on the detector's output: a drawing scored
/// within rounding of a threshold may be redrawn on one CPU and not on another.
public enum SyntheticFaces {
    /// Label of the "not a face" class.
    public static let nonFaceLabel = 1
    /// Label of the "unknown person" class.
    public static let unknownPersonLabel = 2
    /// Label of the first user; user labels are consecutive from here.
    public static let firstUserID = 3
    /// Name of the user list in the output folder.
    public static let usersFileName = "users.json"
    /// Drawings of one face the face check may refuse before the run stops: refusals are rare (about
    /// 1 in 100 drawings) and independent of the person, so eight in a row mean a broken check.
    public static let maximumDrawings = 8

    /// Random streams, one per kind of draw, so that changing one count never shifts another stream.
    enum Stream: UInt64 {
        case userIdentity = 1
        case unknownIdentity
        case userPhoto
        case unknownPhoto
        case nonFace
        case userName
    }

    /// The users of a data set: ids from `firstUserID`, distinct names while the name lists last.
    public static func users(count: Int, seed: UInt64) -> [SyntheticUser] {
        var taken = Set<String>()
        return (0..<max(0, count)).map { index in
            var random = SynthesisRandom(seed: seed, stream: Stream.userName.rawValue, indices: index)
            var name = ""
            for attempt in 0..<64 {
                name = random.element(of: PeopleNames.firstNames) + " " + random.element(of: PeopleNames.lastNames)
                if !taken.contains(name) { break }
                if attempt == 63 { name += " \(index + 1)" }
            }
            taken.insert(name)
            return SyntheticUser(
                id: firstUserID + index, name: name, position: random.element(of: PeopleNames.positions))
        }
    }

    /// Every crop of a configuration, users first, then strangers, then non-faces.
    public static func samples(for configuration: SynthesisConfiguration) -> [SyntheticSample] {
        var samples: [SyntheticSample] = []
        for user in 0..<max(0, configuration.userCount) {
            let label = firstUserID + user
            for photo in 0..<max(0, configuration.imagesPerUser) {
                samples.append(
                    SyntheticSample(
                        label: label, identity: user, photo: photo,
                        relativePath: "\(label)/\(photo + 1).jpg"))
            }
        }
        for stranger in 0..<max(0, configuration.unknownIdentityCount) {
            for photo in 0..<max(0, configuration.imagesPerUnknownIdentity) {
                samples.append(
                    SyntheticSample(
                        label: unknownPersonLabel, identity: stranger, photo: photo,
                        relativePath: "\(unknownPersonLabel)/\(stranger + 1)_\(photo + 1).jpg"))
            }
        }
        for index in 0..<max(0, configuration.nonFaceCount) {
            samples.append(
                SyntheticSample(
                    label: nonFaceLabel, identity: index, photo: 0,
                    relativePath: "\(nonFaceLabel)/\(index + 1).jpg"))
        }
        return samples
    }

    /// The crop of one sample as `size`×`size` interleaved 8-bit RGB, and the JPEG quality its camera uses.
    ///
    /// Renders in memory, for tests that want pixels without files; sizes below 1 are treated as 1.
    /// `drawing` above 0 draws another photo of the same face (see `maximumDrawings`); non-faces have one.
    public static func render(_ sample: SyntheticSample, seed: UInt64, size: Int, drawing: Int = 0)
        -> (rgb: [UInt8], jpegQuality: Int)
    {
        let size = max(1, min(size, SynthesisConfiguration.maximumImageSize * 4))
        if sample.label == nonFaceLabel {
            var random = SynthesisRandom(seed: seed, stream: Stream.nonFace.rawValue, indices: sample.identity)
            return NonFaceRenderer.render(size: size, random: &random)
        }
        let isUser = sample.label != unknownPersonLabel
        var identityRandom = SynthesisRandom(
            seed: seed, stream: (isUser ? Stream.userIdentity : .unknownIdentity).rawValue, indices: sample.identity)
        let identity = FaceIdentity(using: &identityRandom)
        let stream = (isUser ? Stream.userPhoto : .unknownPhoto).rawValue
        // The first drawing keeps the stream it has always had, so data sets stay byte-identical.
        var photoRandom =
            drawing == 0
            ? SynthesisRandom(seed: seed, stream: stream, indices: sample.identity, sample.photo)
            : SynthesisRandom(seed: seed, stream: stream, indices: sample.identity, sample.photo, drawing)
        let conditions = PhotoConditions(using: &photoRandom)
        let pixels = FaceRenderer.render(identity: identity, conditions: conditions, size: size, random: &photoRandom)
        return (pixels, conditions.camera.jpegQuality)
    }

    /// Renders every crop of `configuration` in parallel and writes the data set.
    ///
    /// A new output folder is filled as a hidden sibling folder and renamed into place at the end, so an
    /// interrupted run leaves nothing half-written behind; an existing empty folder is filled in place, with
    /// `users.json` written last. A non-empty folder is refused unless `replaceExisting` is set; then each
    /// generated file is replaced atomically and other files are kept and reported in
    /// `SynthesisSummary.leftoverFiles`.
    public static func generate(configuration: SynthesisConfiguration) throws -> SynthesisSummary {
        try generate(configuration: configuration, faceCheck: nil)
    }

    /// `generate`, every face (users and strangers) drawn until `faceCheck` takes it.
    package static func generate(configuration: SynthesisConfiguration, faceCheck: FaceCheck?) throws
        -> SynthesisSummary
    {
        let start = Date()
        try configuration.validate()
        let output = configuration.outputDirectory.standardizedFileURL
        var redrawn: [String] = []
        let wasEmpty = try SynthesisOutput.fill(output, replaceExisting: configuration.replaceExisting) { folder in
            redrawn = try write(configuration, into: folder, faceCheck: faceCheck)
        }

        var counts: [Int: Int] = [:]
        let samples = samples(for: configuration)
        for sample in samples { counts[sample.label, default: 0] += 1 }
        let leftovers =
            wasEmpty
            ? []
            : SynthesisOutput.leftoverFiles(in: output, expected: Set(samples.map(\.relativePath) + [usersFileName]))
        return SynthesisSummary(
            outputDirectory: output,
            users: users(
                count: configuration.userCount,
                seed: configuration.seed),
            imageCounts: counts, leftoverFiles: leftovers, seconds: Date().timeIntervalSince(start),
            redrawn: redrawn)
    }

    /// Writes the class folders, every crop (in parallel) and `users.json` into `directory`; returns
    /// the crops drawn more than once.
    private static func write(_ configuration: SynthesisConfiguration, into directory: URL, faceCheck: FaceCheck?)
        throws -> [String]
    {
        let samples = samples(for: configuration)
        for label in Set(samples.map(\.label)).sorted() {
            let folder = directory.appendingPathComponent(String(label))
            do {
                try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            } catch {
                throw SynthesisError.cannotCreateDirectory(path: folder.path, reason: SynthesisOutput.reason(error))
            }
        }
        let outcomes: [Result<Int, SynthesisError>]
        if let faceCheck {
            // One copy of the check per core: a copy has its own network buffers.
            outcomes = faceCheck.map(samples.count) { check, index in
                writeSample(samples[index], of: configuration, into: directory) { check.examine($0) }
            }
        } else {
            outcomes = Parallel.map(samples.count) { index in
                writeSample(samples[index], of: configuration, into: directory) { _ in nil }
            }
        }
        var redrawn: [String] = []
        for (sample, outcome) in zip(samples, outcomes) {
            if case .success(let drawings) = outcome, drawings > 1 { redrawn.append(sample.relativePath) }
            if case .failure(let failure) = outcome { throw failure }
        }
        // Written last, so a folder with users.json is a finished data set.
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let usersFile = directory.appendingPathComponent(usersFileName)
        do {
            var json = try encoder.encode(users(count: configuration.userCount, seed: configuration.seed))
            json.append(0x0A)
            try json.write(to: usersFile, options: .atomic)
        } catch {
            throw SynthesisError.cannotWrite(path: usersFile.path, reason: SynthesisOutput.reason(error))
        }
        return redrawn
    }

    /// Renders, encodes and writes one crop; a face is drawn again while `examine` refuses its
    /// decoded JPEG (what `fit` reads). Returns how many drawings it took.
    private static func writeSample(
        _ sample: SyntheticSample, of configuration: SynthesisConfiguration, into directory: URL,
        examine: (Image) -> FaceCheckResult?
    ) -> Result<Int, SynthesisError> {
        let file = directory.appendingPathComponent(sample.relativePath)
        let size = configuration.imageSize
        var refusal: CropRefusal?
        for drawing in 0..<(sample.label == nonFaceLabel ? 1 : maximumDrawings) {
            let (pixels, quality) = render(sample, seed: configuration.seed, size: size, drawing: drawing)
            let data: Data
            do {
                data = try JPEGWriter.encode(rgb: pixels, width: size, height: size, quality: quality)
            } catch {
                return .failure(.encodingFailed(path: file.path, reason: "\(error)"))
            }
            if sample.label != nonFaceLabel {
                let image: Image
                do throws(ImageError) {
                    image = try ImageDecoder.decode(data: data, name: file.path)
                } catch {
                    return .failure(.encodingFailed(path: file.path, reason: "its JPEG does not decode: \(error)"))
                }
                if let refused = examine(image)?.refusal {
                    refusal = refused
                    continue
                }
            }
            do {
                try data.write(to: file, options: .atomic)
            } catch {
                return .failure(.cannotWrite(path: file.path, reason: SynthesisOutput.reason(error)))
            }
            return .success(drawing + 1)
        }
        // Named where it was to go: `file` may be in the hidden folder a new data set is filled in.
        return .failure(
            .refusedByFaceCheck(
                path: configuration.outputDirectory.appendingPathComponent(sample.relativePath).path,
                drawings: maximumDrawings, reason: refusal.map(\.description) ?? "refused"))
    }
}
