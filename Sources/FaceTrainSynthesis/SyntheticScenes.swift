import FaceTrain
import Foundation

// Synthetic photos for the face detector: drawn people on a photo-like background, each face with its exact
// box and five landmarks, written in faces_in_photos' layout (images/<event>/<name>.jpg, annotations.jsonl,
// splits.json). Not the recognition crops (SyntheticFaces) and not a detector: only data with known answers.

/// Settings of one set of synthetic scenes.
public struct SceneConfiguration: Sendable, Equatable {
    /// Folder that receives `images/`, `annotations.jsonl`, `splits.json` and `README.md`.
    public var outputDirectory: URL
    public var sceneCount: Int
    /// The same seed and settings always give byte-identical files.
    public var seed: UInt64
    /// Longer side of every photo in pixels.
    public var maximumSide: Int
    /// Share of the photos listed under `dev` in `splits.json`; the rest are `train`.
    public var devFraction: Double
    /// Allows writing into a non-empty folder; only the files this run generates are replaced.
    public var replaceExisting: Bool

    /// faces_in_photos' photos are 640 px on their longer side.
    public static let defaultMaximumSide = 640
    /// Below this a 20 px face no longer fits with room to move.
    public static let smallestMaximumSide = 64
    public static let largestMaximumSide = 2048
    public static let defaultDevFraction = 0.2
    public static let largestSceneCount = 1_000_000

    public init(
        outputDirectory: URL, sceneCount: Int, seed: UInt64, maximumSide: Int = defaultMaximumSide,
        devFraction: Double = defaultDevFraction, replaceExisting: Bool = false
    ) {
        self.outputDirectory = outputDirectory
        self.sceneCount = sceneCount
        self.seed = seed
        self.maximumSide = maximumSide
        self.devFraction = devFraction
        self.replaceExisting = replaceExisting
    }

    /// Throws `SynthesisError.invalidConfiguration` for settings that cannot make a scene set.
    public func validate() throws {
        func check(_ condition: Bool, _ message: String) throws {
            if !condition { throw SynthesisError.invalidConfiguration(message) }
        }
        try check(
            (1...Self.largestSceneCount).contains(sceneCount),
            "the scene count must be within 1...\(Self.largestSceneCount), not \(sceneCount)")
        try check(
            (Self.smallestMaximumSide...Self.largestMaximumSide).contains(maximumSide),
            "the longer side must be within \(Self.smallestMaximumSide)...\(Self.largestMaximumSide) px, "
                + "not \(maximumSide)")
        try check(
            devFraction.isFinite && (0...1).contains(devFraction),
            "the dev fraction must be within 0...1, not \(devFraction)")
    }
}

/// One face of a scene, as faces_in_photos writes it.
public struct SceneFace: Sendable, Equatable {
    /// `[x, y, width, height]` in image pixels, x to the right, y down, (0, 0) the image's top-left corner.
    public let box: [Double]
    /// WIDER's attributes: blur 0 clear / 1 normal / 2 heavy, expression 0 typical / 1 exaggerated,
    /// illumination 0 normal / 1 extreme, occlusion 0 none / 1 partial / 2 heavy, pose 0 typical / 1 atypical,
    /// invalid 1 where the face cannot be labelled reliably.
    public let blur: Int
    public let expression: Int
    public let illumination: Int
    public let invalid: Int
    public let occlusion: Int
    public let pose: Int
    /// Five `[x, y]` points in image pixels: the person's right eye centre (image left), left eye centre,
    /// nose tip, right mouth corner, left mouth corner.
    public let landmarks: [[Double]]
}

/// One photo of a scene set: its file relative to the output folder, its size and its faces.
public struct SceneAnnotation: Sendable, Equatable {
    public let file: String
    public let width: Int
    public let height: Int
    public let faces: [SceneFace]

    /// The photo's line of `annotations.jsonl`, with faces_in_photos' keys in its order.
    public var jsonLine: String {
        let faceObjects = faces.map { face in
            "{\"box\":\(SceneJSON.numbers(face.box)),\"blur\":\(face.blur),\"expression\":\(face.expression),"
                + "\"illumination\":\(face.illumination),\"invalid\":\(face.invalid),"
                + "\"occlusion\":\(face.occlusion),\"pose\":\(face.pose),"
                + "\"landmarks5\":[\(face.landmarks.map(SceneJSON.numbers).joined(separator: ","))],"
                + "\"landmarks5_score\":1.0}"
        }
        return "{\"file\":\(SceneJSON.string(file)),\"width\":\(width),\"height\":\(height),"
            + "\"source_size\":[\(width),\(height)],\"faces\":[\(faceObjects.joined(separator: ","))]}"
    }
}

/// What `SyntheticScenes.generate` wrote.
public struct SceneSummary: Sendable {
    public let outputDirectory: URL
    public let annotations: [SceneAnnotation]
    public let trainFiles: [String]
    public let devFiles: [String]
    /// Files already in the output folder that this run neither wrote nor removed (only with replacing allowed).
    public let leftoverFiles: [String]
    public let seconds: Double

    public var faceCount: Int { annotations.reduce(0) { $0 + $1.faces.count } }
}

/// One drawn person of a scene: who, how they look in this photo, and where the face lands on the canvas.
struct ScenePerson: Sendable {
    let identity: FaceIdentity
    let conditions: PhotoConditions
    /// Face units to supersampled canvas pixels: the one transform both the painting and the labels use.
    let view: ViewTransform
    let grainSeed: UInt64
}

/// A non-face photo (NonFaceRenderer) hung in the scene like a poster or a screen: clutter for the detector.
struct ScenePoster: Sendable {
    /// Top-left corner in image pixels.
    let x: Int
    let y: Int
    let size: Int
    let rgb: [UInt8]
}

/// Everything that decides one scene's pixels and labels, drawn from its own random stream.
struct ScenePlan: Sendable {
    let width: Int
    let height: Int
    let backgroundSeed: UInt64
    let posters: [ScenePoster]
    /// In painting order, back to front; no person covers the face box of one painted before.
    let people: [ScenePerson]
    let camera: Camera
}

/// Deterministic synthetic scenes for the face detector, in faces_in_photos' format.
///
/// Each photo is a `Background` scene with 0–6 people drawn by `FaceRenderer`, faces 20–200 px high
/// (log-uniform, at most 60 % of the shorter side) and sometimes `NonFaceRenderer` posters behind them. The box
/// and the five landmarks of a face come from the renderer's own geometry through the transform that painted it.
/// No person covers another's face box, so every face is fully visible (occlusion only from tinted glasses).
public enum SyntheticScenes {
    /// The one event folder under `images/`, named like WIDER's (`<n>--<Event>`).
    public static let eventFolder = "0--Synthetic"
    public static let annotationsFileName = "annotations.jsonl"
    public static let splitsFileName = "splits.json"
    public static let readmeFileName = "README.md"
    public static let maximumFacesPerScene = 6
    public static let smallestFaceHeight: Float = 20
    public static let largestFaceHeight: Float = 200

    enum Stream: UInt64 {
        // Continues SyntheticFaces.Stream's numbering so no stream is shared.
        case scene = 101
        case split
    }

    /// Renders every scene of `configuration` in parallel and writes the set; the output folder rule is
    /// `SynthesisOutput.fill`'s. `annotations.jsonl` is written last, so a folder with it is finished.
    public static func generate(configuration: SceneConfiguration) throws -> SceneSummary {
        let start = Date()
        try configuration.validate()
        let output = configuration.outputDirectory.standardizedFileURL
        let count = configuration.sceneCount
        let files = (0..<count).map(file(index:))
        let (train, dev) = split(files, devFraction: configuration.devFraction, seed: configuration.seed)
        let annotations = AnnotationList(count: count)
        let wasEmpty = try SynthesisOutput.fill(output, replaceExisting: configuration.replaceExisting) { folder in
            try SynthesisOutput.createDirectory(folder.appendingPathComponent("images/\(eventFolder)"))
            let failures = FailureList()
            DispatchQueue.concurrentPerform(iterations: count) { index in
                let (annotation, rgb, quality) = render(
                    index: index, seed: configuration.seed, maximumSide: configuration.maximumSide)
                annotations.set(index, annotation)
                let path = folder.appendingPathComponent(annotation.file)
                do {
                    let data = try JPEGWriter.encode(
                        rgb: rgb, width: annotation.width, height: annotation.height, quality: quality)
                    try SynthesisOutput.write(data, to: path)
                } catch let error as SynthesisError {
                    failures.record(index, error)
                } catch {
                    failures.record(index, .encodingFailed(path: path.path, reason: "\(error)"))
                }
            }
            if let failure = failures.first { throw failure }
            let sorted = annotations.all.sorted { $0.file < $1.file }
            try SynthesisOutput.write(
                Data(readme(configuration, annotations: sorted).utf8), to: folder.appendingPathComponent(readmeFileName)
            )
            try SynthesisOutput.write(
                Data(splitsJSON(train: train, dev: dev).utf8), to: folder.appendingPathComponent(splitsFileName))
            try SynthesisOutput.write(
                Data(sorted.map { $0.jsonLine + "\n" }.joined().utf8),
                to: folder.appendingPathComponent(annotationsFileName))
        }
        let expected = Set(files + [annotationsFileName, splitsFileName, readmeFileName])
        return SceneSummary(
            outputDirectory: output, annotations: annotations.all.sorted { $0.file < $1.file }, trainFiles: train,
            devFiles: dev, leftoverFiles: wasEmpty ? [] : SynthesisOutput.leftoverFiles(in: output, expected: expected),
            seconds: Date().timeIntervalSince(start))
    }

    /// A seeded split of `files`: round(devFraction × count) of them, drawn by a Fisher–Yates shuffle, are
    /// `dev`; both lists come back sorted.
    static func split(_ files: [String], devFraction: Double, seed: UInt64) -> (train: [String], dev: [String]) {
        var random = SynthesisRandom(seed: seed, stream: Stream.split.rawValue)
        var shuffled = files
        for index in stride(from: shuffled.count - 1, to: 0, by: -1) {
            shuffled.swapAt(index, random.integer(0...index))
        }
        let devCount = Int((Double(files.count) * devFraction).rounded())
        return (Array(shuffled[devCount...]).sorted(), Array(shuffled[..<devCount]).sorted())
    }

    /// `splits.json` laid out as faces_in_photos' is: one file per line.
    static func splitsJSON(train: [String], dev: [String]) -> String {
        func list(_ files: [String]) -> String {
            files.isEmpty ? "[]" : "[\n" + files.map(SceneJSON.string).joined(separator: ",\n") + "\n]"
        }
        return "{\n\"train\": \(list(train)),\n\"dev\": \(list(dev))\n}\n"
    }

    private static func readme(_ configuration: SceneConfiguration, annotations: [SceneAnnotation]) -> String {
        let faces = annotations.reduce(0) { $0 + $1.faces.count }
        let empty = annotations.filter { $0.faces.isEmpty }.count
        return """
            # Synthetic scenes: \(annotations.count) photos, \(faces) drawn faces with boxes and 5 landmarks

            Written by `facetrain synth --scenes \(configuration.sceneCount) --seed \(configuration.seed) \
            --max-side \(configuration.maximumSide) --dev-fraction \(configuration.devFraction)`; the same command \
            writes the same bytes. Drawn, not photographed: people made up by facetrain's face renderer on \
            made-up backgrounds, sometimes with non-face pictures behind them. \(empty) photos have no face.

            The layout and fields are those of faces_in_photos (WIDER FACE val with YuNet landmarks), so the same \
            code and scorer read both:

            - `images/\(eventFolder)/*.jpg`: the photos, longer side \(configuration.maximumSide) px.
            - `annotations.jsonl`: one object per photo, sorted by `file`: `file`, `width`, `height`, \
            `source_size` (the same size: nothing was resized), `faces` with `box` `[x, y, w, h]` in pixels, \
            WIDER's attributes, `landmarks5` and `landmarks5_score` 1.0.
            - `splits.json`: `{"train": [...], "dev": [...]}`, a seeded \(configuration.devFraction) of the photos in dev.

            Boxes follow WIDER's convention: from the hairline to the chin and from cheek to cheek, ears left out. \
            The 5 points are exact, taken from the renderer's geometry, not estimated: the person's right eye \
            centre (image left), left eye centre, nose tip, right mouth corner, left mouth corner. No face \
            covers another's box; `occlusion` is 1 only for tinted glasses, `blur` 1 when the camera blurred \
            the photo, and `pose`, `expression`, `illumination` and `invalid` are 0 (near-frontal heads, \
            everyday expressions). Faces are drawn 20 to 200 px high, log-uniform, at most 60 % of the \
            shorter side.

            """
    }

    /// `images/0--Synthetic/0_Synthetic_000001.jpg` for scene 0: zero-padded, so sorting by file keeps index order.
    public static func file(index: Int) -> String {
        let number = String(index + 1)
        return
            "images/\(eventFolder)/0_Synthetic_\(String(repeating: "0", count: max(0, 6 - number.count)))\(number).jpg"
    }

    /// Renders scene `index` in memory: its annotation, 8-bit RGB pixels (width × height × 3) and JPEG quality.
    public static func render(index: Int, seed: UInt64, maximumSide: Int) -> (
        annotation: SceneAnnotation, rgb: [UInt8], jpegQuality: Int
    ) {
        let plan = plan(index: index, seed: seed, maximumSide: maximumSide)
        let annotation = SceneAnnotation(
            file: file(index: index), width: plan.width, height: plan.height,
            faces: plan.people.map { face(of: $0, in: plan) })
        return (annotation, develop(plan), plan.camera.jpegQuality)
    }

    /// The layout of scene `index`: size, camera, posters and people, without painting anything.
    static func plan(index: Int, seed: UInt64, maximumSide: Int) -> ScenePlan {
        var random = SynthesisRandom(seed: seed, stream: Stream.scene.rawValue, indices: index)
        // Three in four photos are landscape, as in faces_in_photos.
        let longer = maximumSide
        let shorter = Int((Float(longer) * random.uniform(0.56...1)).rounded())
        let landscape = random.chance(0.75)
        let width = landscape ? longer : shorter
        let height = landscape ? shorter : longer
        let backgroundSeed = random.next()
        let camera = Camera(using: &random)

        var posters: [ScenePoster] = []
        if random.chance(0.4) {
            for _ in 0..<random.integer(1...3) {
                let size = Int(logUniform(24, max(24, Float(min(width, height)) * 0.4), using: &random))
                guard size < min(width, height) else { continue }
                var posterRandom = SynthesisRandom(seed: random.next())
                let rgb = NonFaceRenderer.render(size: size, random: &posterRandom).rgb
                posters.append(
                    ScenePoster(
                        x: random.integer(0...(width - size)), y: random.integer(0...(height - size)), size: size,
                        rgb: rgb))
            }
        }

        // Smaller (farther) faces first, so nearer people are painted over them, as in a crowd.
        let tallest = max(smallestFaceHeight, min(largestFaceHeight, Float(min(width, height)) * 0.6))
        let heights = (0..<random.integer(0...maximumFacesPerScene)).map { _ in
            logUniform(smallestFaceHeight, tallest, using: &random)
        }.sorted()
        var people: [ScenePerson] = []
        var boxes: [Bounds] = []
        for faceHeight in heights {
            let identity = FaceIdentity(using: &random)
            let conditions = PhotoConditions(using: &random)
            let grainSeed = random.next()
            let geometry = FaceRenderer.geometry(identity: identity, conditions: conditions)
            // Scale so the face box is `faceHeight` image pixels high before roll.
            let boxUnits = Bounds(geometry.boxOutline).height
            let scale = faceHeight * Float(FaceRenderer.supersampling) / boxUnits
            let centered = ViewTransform(scale: scale, angle: conditions.roll, originX: 0, originY: 0)
            let box = imageBounds(geometry.boxOutline, centered)
            guard box.width < Float(width), box.height < Float(height) else { continue }
            for _ in 0..<40 {
                let dx = random.uniform(-box.minX...(Float(width) - box.maxX))
                let dy = random.uniform(-box.minY...(Float(height) - box.maxY))
                let factor = Float(FaceRenderer.supersampling)
                let view = ViewTransform(
                    scale: scale, angle: conditions.roll, originX: dx * factor, originY: dy * factor)
                let footprint = footprint(identity: identity, view: view)
                if footprint.contains(where: { part in boxes.contains { $0.intersects(part) } }) { continue }
                people.append(ScenePerson(identity: identity, conditions: conditions, view: view, grainSeed: grainSeed))
                boxes.append(imageBounds(geometry.boxOutline, view))
                break
            }
        }
        return ScenePlan(
            width: width, height: height, backgroundSeed: backgroundSeed, posters: posters, people: people,
            camera: camera)
    }

    /// The annotation of one person: the renderer's box outline and landmarks through the person's view.
    static func face(of person: ScenePerson, in plan: ScenePlan) -> SceneFace {
        let geometry = FaceRenderer.geometry(identity: person.identity, conditions: person.conditions)
        let box = imageBounds(geometry.boxOutline, person.view)
        let factor = Float(FaceRenderer.supersampling)
        let landmarks = geometry.landmarks.map { point -> [Double] in
            let canvas = person.view.canvasPoint(point)
            return [rounded(canvas.x / factor), rounded(canvas.y / factor)]
        }
        // Clamped so float rounding never puts an edge a hundredth outside the photo.
        let x = max(0, rounded(box.minX))
        let y = max(0, rounded(box.minY))
        let right = min(Double(plan.width), rounded(box.maxX))
        let bottom = min(Double(plan.height), rounded(box.maxY))
        // Attributes as WIDER defines them, chosen from what was drawn: the renderer's heads are near frontal
        // (yaw moves features by at most 0.1 face units, roll is about 5 degrees) with everyday expressions, the
        // camera's strongest blur is a 3x3 box ("normal"), and tinted lenses hide part of the eyes.
        let tinted = person.conditions.wearsGlasses && (person.identity.glasses?.tint ?? 0) > 0
        return SceneFace(
            box: [x, y, rounded(Float(right - x)), rounded(Float(bottom - y))], blur: plan.camera.blur > 0 ? 1 : 0,
            expression: 0, illumination: 0, invalid: 0, occlusion: tinted ? 1 : 0, pose: 0,
            landmarks: landmarks)
    }

    /// Paints the plan's background, posters and people, then develops the canvas through the scene's camera.
    static func develop(_ plan: ScenePlan) -> [UInt8] {
        var canvas = canvas(for: plan)
        var random = SynthesisRandom(seed: plan.backgroundSeed)
        Background.paint(&canvas, using: &random)
        hang(plan.posters, on: &canvas)
        paint(plan.people, on: &canvas)
        return crop(plan.camera.develop(canvas, size: side(of: plan), factor: FaceRenderer.supersampling), plan)
    }

    /// A square supersampled canvas over the longer side, whose view maps [-1, 1]² onto it as `Background`
    /// expects; the photo is its top-left width × height.
    static func canvas(for plan: ScenePlan) -> Canvas {
        let size = side(of: plan) * FaceRenderer.supersampling
        let half = Float(size) / 2
        return Canvas(
            width: size, height: size, view: ViewTransform(scale: half, angle: 0, originX: half, originY: half))
    }

    /// Draws each person through their own view, back to front.
    static func paint(_ people: [ScenePerson], on canvas: inout Canvas) {
        let sceneView = canvas.view
        for person in people {
            canvas.view = person.view
            FaceRenderer.paint(
                identity: person.identity, conditions: person.conditions, grainSeed: person.grainSeed, on: &canvas)
        }
        canvas.view = sceneView
    }

    private static func hang(_ posters: [ScenePoster], on canvas: inout Canvas) {
        let factor = FaceRenderer.supersampling
        for poster in posters {
            for row in 0..<(poster.size * factor) {
                for column in 0..<(poster.size * factor) {
                    let source = ((row / factor) * poster.size + column / factor) * 3
                    let target = ((poster.y * factor + row) * canvas.width + poster.x * factor + column) * 3
                    for channel in 0..<3 { canvas.pixels[target + channel] = Float(poster.rgb[source + channel]) / 255 }
                }
            }
        }
    }

    private static func side(of plan: ScenePlan) -> Int { max(plan.width, plan.height) }

    private static func crop(_ square: [UInt8], _ plan: ScenePlan) -> [UInt8] {
        let side = side(of: plan)
        var rgb: [UInt8] = []
        rgb.reserveCapacity(plan.width * plan.height * 3)
        for row in 0..<plan.height {
            rgb.append(contentsOf: square[(row * side * 3)..<((row * side + plan.width) * 3)])
        }
        return rgb
    }

    /// Where a person's paint can reach, in image pixels: the head with hair and ears, and the shoulders.
    /// Kept off earlier faces' boxes so no labelled face is covered. In face units (`FacePainter`): hair reaches
    /// 0.9 sideways and 1.35 up (curly), long hair and the neck 1.35 down; the clothes 1.4 sideways, from just
    /// below the chin to 1.4 under it.
    private static func footprint(identity: FaceIdentity, view: ViewTransform) -> [Bounds] {
        let chin = identity.faceHeight
        let head = [Point(-0.95, -1.35), Point(0.95, -1.35), Point(-0.95, 1.35), Point(0.95, 1.35)]
        let body = [Point(-1.4, chin + 0.2), Point(1.4, chin + 0.2), Point(-1.4, chin + 1.4), Point(1.4, chin + 1.4)]
        return [imageBounds(head, view), imageBounds(body, view)]
    }

    /// The bounding rectangle, in image pixels, of face-space points seen through `view`.
    private static func imageBounds(_ points: [Point], _ view: ViewTransform) -> Bounds {
        let factor = Float(FaceRenderer.supersampling)
        return Bounds(points.map { view.canvasPoint($0) * (1 / factor) })
    }

    private static func logUniform(_ low: Float, _ high: Float, using random: inout SynthesisRandom) -> Float {
        expf(random.uniform(logf(low)...logf(max(low, high))))
    }

    /// Two decimals, as faces_in_photos writes its boxes.
    private static func rounded(_ value: Float) -> Double { (Double(value) * 100).rounded() / 100 }
}

/// Annotations filled in by worker threads, one slot per scene.
private final class AnnotationList: @unchecked Sendable {
    private let lock = NSLock()
    private var slots: [SceneAnnotation?]

    init(count: Int) { slots = Array(repeating: nil, count: count) }

    func set(_ index: Int, _ annotation: SceneAnnotation) {
        lock.lock()
        slots[index] = annotation
        lock.unlock()
    }

    var all: [SceneAnnotation] {
        lock.lock()
        defer { lock.unlock() }
        return slots.compactMap { $0 }
    }
}

/// An axis-aligned rectangle in image pixels.
struct Bounds: Sendable {
    var minX: Float
    var minY: Float
    var maxX: Float
    var maxY: Float

    init(_ points: [Point]) {
        minX = points.map(\.x).min() ?? 0
        minY = points.map(\.y).min() ?? 0
        maxX = points.map(\.x).max() ?? 0
        maxY = points.map(\.y).max() ?? 0
    }

    var width: Float { maxX - minX }
    var height: Float { maxY - minY }

    func intersects(_ other: Bounds) -> Bool {
        minX < other.maxX && other.minX < maxX && minY < other.maxY && other.minY < maxY
    }
}

/// The JSON text faces_in_photos uses: no spaces, numbers in their shortest form.
enum SceneJSON {
    static func numbers(_ values: [Double]) -> String {
        "[" + values.map { "\($0)" }.joined(separator: ",") + "]"
    }

    /// A JSON string; file names here hold only letters, digits, `_`, `-`, `.` and `/`, escaped anyway.
    static func string(_ text: String) -> String {
        var result = "\""
        for character in text.unicodeScalars {
            switch character {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case _ where character.value < 0x20: result += String(format: "\\u%04x", character.value)
            default: result.unicodeScalars.append(character)
            }
        }
        return result + "\""
    }
}
