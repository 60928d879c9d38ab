import Foundation

/// A faces_in_photos-style detection set: `annotations.jsonl` (one photo a line: file, size, face
/// boxes with WIDER's attributes and optional 5 landmarks), `splits.json` (`{"train": [...], "dev":
/// [...]}`, lists of files) and `images/`. Reads and checks the annotations, picks a split, and
/// fingerprints the annotations and splits for a detector's manifest.
///
/// Not here: decoding the photos (Images), turning faces into training targets after augmentation
/// (DetectionAssignment), scoring (DetectionAveragePrecision). The format is the one
/// `shared/eval/score_detection.py` reads (`/work/shared/datasets/faces_in_photos/README.md`).
package struct DetectionSet: Sendable {
    package let root: URL
    /// Every annotated photo, in the file's order.
    package let photos: [DetectionPhoto]
    /// Split name to files, from `splits.json`.
    package let splits: [String: [String]]
    /// Lowercase hex SHA-256 of `annotations.jsonl` and of `splits.json`.
    package let annotationsSHA256: String
    package let splitsSHA256: String

    /// One SHA-256 naming both files' contents: a detector's manifest records it, so a model can be
    /// traced to the exact labels and split it learnt from.
    package var fingerprint: String {
        contentHash(Data("annotations.jsonl \(annotationsSHA256)\nsplits.json \(splitsSHA256)\n".utf8))
    }

    package static let annotationsName = "annotations.jsonl"
    package static let splitsName = "splits.json"
    package static let imagesName = "images"

    /// Reads and checks a set folder (no photo is decoded).
    package static func load(_ root: URL) throws(DetectionSetError) -> DetectionSet {
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: root.path, isDirectory: &isFolder), isFolder.boolValue else {
            throw .notAFolder(path: root.path)
        }
        let annotationsURL = root.appendingPathComponent(annotationsName)
        let splitsURL = root.appendingPathComponent(splitsName)
        let annotationsData = try read(annotationsURL, root: root)
        let splitsData = try read(splitsURL, root: root)
        let imagesURL = root.appendingPathComponent(imagesName)
        guard FileManager.default.fileExists(atPath: imagesURL.path, isDirectory: &isFolder), isFolder.boolValue else {
            throw .missing(path: imagesURL.path, root: root.path)
        }
        let photos = try parseAnnotations(annotationsData, path: annotationsURL.path)
        let splits = try parseSplits(splitsData, path: splitsURL.path, known: Set(photos.map(\.file)))
        return DetectionSet(
            root: root, photos: photos, splits: splits, annotationsSHA256: contentHash(annotationsData),
            splitsSHA256: contentHash(splitsData))
    }

    /// The photos of one split, in the annotations' order.
    package func photos(inSplit name: String) throws(DetectionSetError) -> [DetectionPhoto] {
        guard let files = splits[name] else {
            throw .unknownSplit(
                path: root.appendingPathComponent(Self.splitsName).path, name: name, available: splits.keys.sorted())
        }
        let members = Set(files)
        return photos.filter { members.contains($0.file) }
    }

    /// Where a photo's image file is.
    package func url(of photo: DetectionPhoto) -> URL { root.appendingPathComponent(photo.file) }

    private static func read(_ url: URL, root: URL) throws(DetectionSetError) -> Data {
        guard FileManager.default.fileExists(atPath: url.path) else { throw .missing(path: url.path, root: root.path) }
        do { return try Data(contentsOf: url) } catch { throw .unreadable(path: url.path, reason: "\(error)") }
    }

    static func parseAnnotations(_ data: Data, path: String) throws(DetectionSetError) -> [DetectionPhoto] {
        var photos: [DetectionPhoto] = []
        var lineOfFile: [String: Int] = [:]
        let lines = data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        for (index, bytes) in lines.enumerated() {
            let line = index + 1
            func bad(_ reason: String) -> DetectionSetError { .badLine(path: path, line: line, reason: reason) }
            guard bytes.contains(where: { $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: "\r") }) else { continue }
            guard let object = (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any] else {
                throw bad("not a JSON object")
            }
            let photo: DetectionPhoto
            do { photo = try DetectionPhoto(json: object) } catch { throw bad(error.reason) }
            if let first = lineOfFile[photo.file] {
                throw bad("\(photo.file) is annotated a second time (first on line \(first))")
            }
            lineOfFile[photo.file] = line
            photos.append(photo)
        }
        guard !photos.isEmpty else { throw .badLine(path: path, line: 1, reason: "the file holds no photo") }
        return photos
    }

    static func parseSplits(_ data: Data, path: String, known: Set<String>) throws(DetectionSetError) -> [String:
        [String]]
    {
        guard let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else {
            throw .badSplits(path: path, reason: "it is not a JSON object of file lists")
        }
        var splits: [String: [String]] = [:]
        for (name, value) in object {
            guard let files = value as? [String] else {
                throw .badSplits(path: path, reason: "\"\(name)\" is not a list of file names")
            }
            if let stranger = files.first(where: { !known.contains($0) }) {
                throw .badSplits(
                    path: path, reason: "\"\(name)\" lists \(stranger), which annotations.jsonl does not annotate")
            }
            splits[name] = files
        }
        let names = splits.keys.sorted()
        for (index, first) in names.enumerated() {
            for second in names[(index + 1)...] {
                if let shared = Set(splits[first]!).intersection(splits[second]!).sorted().first {
                    throw .badSplits(
                        path: path,
                        reason: "\(shared) is in both \"\(first)\" and \"\(second)\"; splits must not share photos")
                }
            }
        }
        return splits
    }
}

/// One annotated photo.
package struct DetectionPhoto: Sendable, Equatable {
    /// The file relative to the set's folder (`images/<event>/<name>.jpg`): the scorer's key.
    package var file: String
    package var width: Int
    package var height: Int
    package var faces: [AnnotatedFace]

    package init(file: String, width: Int, height: Int, faces: [AnnotatedFace]) {
        self.file = file
        self.width = width
        self.height = height
        self.faces = faces
    }
}

/// One face as annotated: WIDER's box and attributes, YuNet's landmarks where it found the face.
package struct AnnotatedFace: Sendable, Equatable {
    package var box: DetectionBox
    /// 0 clear, 1 normal, 2 heavy.
    package var blur = 0
    /// 0 typical, 1 exaggerated.
    package var expression = 0
    /// 0 normal, 1 extreme.
    package var illumination = 0
    /// 1 where WIDER's annotators could not label the face reliably: "don't care".
    package var invalid = 0
    /// 0 none, 1 partial, 2 heavy.
    package var occlusion = 0
    /// 0 typical, 1 atypical.
    package var pose = 0
    package var landmarks: [FacePoint]?
    /// YuNet's score for the landmarks (0.3 to 1); nil when the landmarks are exact (synthetic faces).
    package var landmarkScore: Double?

    package init(
        box: DetectionBox, invalid: Int = 0, occlusion: Int = 0, landmarks: [FacePoint]? = nil,
        landmarkScore: Double? = nil
    ) {
        self.box = box
        self.invalid = invalid
        self.occlusion = occlusion
        self.landmarks = landmarks
        self.landmarkScore = landmarkScore
    }

    /// Landmarks are learnt from faces at least this high (photo pixels) whose landmark score is at
    /// least `landmarkMinimumScore`: YuNet's points on tiny or doubtful faces are rough (README,
    /// design §4).
    package static let landmarkMinimumHeight = 20.0
    package static let landmarkMinimumScore = 0.6

    /// The face as training sees it, in the photo's pixels: invalid faces are ignore regions, and
    /// landmarks are kept only where they are good enough to learn from.
    package var labelled: LabelledFace {
        let trusted = box.height >= Self.landmarkMinimumHeight && (landmarkScore ?? 1) >= Self.landmarkMinimumScore
        return LabelledFace(box: box, landmarks: trusted ? landmarks : nil, ignored: invalid != 0)
    }
}

/// A problem with one annotation line, before the line number is known.
private struct AnnotationProblem: Error {
    var reason: String
}

extension DetectionPhoto {
    fileprivate init(json: [String: Any]) throws(AnnotationProblem) {
        guard let file = json["file"] as? String, !file.isEmpty else {
            throw AnnotationProblem(
                reason: "needs \"file\": the photo's path inside the set, like images/<event>/<name>.jpg")
        }
        func size(_ key: String) throws(AnnotationProblem) -> Int {
            guard let value = json[key] as? Double, value == value.rounded(), value >= 1, value <= 1e6 else {
                throw AnnotationProblem(reason: "\(file): \"\(key)\" must be a positive whole number of pixels")
            }
            return Int(value)
        }
        let width = try size("width")
        let height = try size("height")
        guard let faces = json["faces"] as? [Any] else {
            throw AnnotationProblem(reason: "\(file): needs \"faces\", a list (empty for a photo without faces)")
        }
        var parsed: [AnnotatedFace] = []
        for (index, value) in faces.enumerated() {
            guard let face = value as? [String: Any] else {
                throw AnnotationProblem(reason: "\(file) face \(index): not a JSON object")
            }
            do { parsed.append(try AnnotatedFace(json: face)) } catch {
                throw AnnotationProblem(reason: "\(file) face \(index): \(error.reason)")
            }
        }
        self.init(file: file, width: width, height: height, faces: parsed)
    }
}

extension AnnotatedFace {
    fileprivate init(json: [String: Any]) throws(AnnotationProblem) {
        guard let numbers = json["box"] as? [Double], numbers.count == 4, numbers.allSatisfy(\.isFinite) else {
            throw AnnotationProblem(
                reason: "\"box\" must be 4 finite numbers [x, y, w, h], got \(json["box"] ?? "nothing")")
        }
        // A negative width or height is kept: WIDER has such boxes (2 in faces_in_photos), the scorer
        // gives them area 0, and training never learns from them (DetectionAssignment.isLearnt).
        self.init(box: DetectionBox(x: numbers[0], y: numbers[1], width: numbers[2], height: numbers[3]))
        // WIDER's attributes, each optional (0 when absent, as the scorer reads them).
        func attribute(_ key: String, maximum: Int) throws(AnnotationProblem) -> Int {
            guard let raw = json[key] else { return 0 }
            guard let value = raw as? Double, value == value.rounded(), value >= 0, value <= Double(maximum) else {
                throw AnnotationProblem(reason: "\"\(key)\" must be a whole number from 0 to \(maximum), got \(raw)")
            }
            return Int(value)
        }
        blur = try attribute("blur", maximum: 2)
        expression = try attribute("expression", maximum: 1)
        illumination = try attribute("illumination", maximum: 1)
        invalid = try attribute("invalid", maximum: 1)
        occlusion = try attribute("occlusion", maximum: 2)
        pose = try attribute("pose", maximum: 1)
        if let raw = json["landmarks5"] {
            guard let points = raw as? [[Double]], points.count == FaceLandmarks.count,
                points.allSatisfy({ $0.count == 2 && $0.allSatisfy(\.isFinite) })
            else {
                throw AnnotationProblem(reason: "\"landmarks5\" must be 5 [x, y] pairs of finite numbers")
            }
            landmarks = points.map { FacePoint(x: $0[0], y: $0[1]) }
        }
        if let raw = json["landmarks5_score"] {
            guard let score = raw as? Double, score.isFinite, landmarks != nil else {
                throw AnnotationProblem(reason: "\"landmarks5_score\" must be a number and come with \"landmarks5\"")
            }
            landmarkScore = score
        }
    }
}

/// Why a detection set cannot be used.
package enum DetectionSetError: Error, CustomStringConvertible, Equatable {
    case notAFolder(path: String)
    case missing(path: String, root: String)
    case unreadable(path: String, reason: String)
    case badLine(path: String, line: Int, reason: String)
    case badSplits(path: String, reason: String)
    case unknownSplit(path: String, name: String, available: [String])

    private static let layoutHint =
        "HINT: a detection set is a folder with annotations.jsonl (one photo a line), splits.json ({\"train\": "
        + "[...], \"dev\": [...]}) and images/. faces_in_photos is one: ../shared/datasets/faces_in_photos "
        + "beside the checkout (WIDER FACE photos, CC BY-NC-ND 4.0: non-commercial research only; its README "
        + "describes the format)."

    package var description: String {
        switch self {
        case .notAFolder(let path):
            "\(path) is not a folder. " + Self.layoutHint
        case .missing(let path, let root):
            "\(root) has no \((path as NSString).lastPathComponent). " + Self.layoutHint
        case .unreadable(let path, let reason):
            "cannot read \(path): \(reason). HINT: check that the file is readable."
        case .badLine(let path, let line, let reason):
            "\(path):\(line): \(reason). HINT: each line is one JSON object like {\"file\": \"images/e/p.jpg\", "
                + "\"width\": 640, \"height\": 480, \"faces\": [{\"box\": [x, y, w, h], \"invalid\": 0, ...}]} "
                + "(faces_in_photos README, \"Files\")."
        case .badSplits(let path, let reason):
            "\(path): \(reason). HINT: splits.json maps split names to lists of annotated files, "
                + "like {\"train\": [\"images/e/p.jpg\", ...], \"dev\": [...]}."
        case .unknownSplit(let path, let name, let available):
            "\(path) has no split \"\(name)\" (it has \(available.map { "\"\($0)\"" }.joined(separator: ", "))). "
                + "HINT: choose one of those."
        }
    }
}
