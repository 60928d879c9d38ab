import FaceTrainEngine
import Foundation

/// One class's probability for an image, with the class's display name.
public struct ClassScore: Sendable, Equatable {
    public var label: ClassLabel
    /// "not a face", "unknown person" or the user's name from the manifest (may be empty).
    public var name: String
    public var probability: Float

    public init(label: ClassLabel, name: String, probability: Float) {
        self.label = label
        self.name = name
        self.probability = probability
    }
}

/// What a bundle's model says about one image file.
public struct ImageClassification: Sendable {
    /// The path as given (`URL.relativePath`).
    public var file: String
    /// Every class, most probable first; ties keep class order, so `ranking[0]` is the argmax
    /// `DecisionRule` uses.
    public var ranking: [ClassScore]
    /// The model's class labels, in output order.
    public var classLabels: [ClassLabel]
    /// Softmax output in the model's class order.
    public var probabilities: [Float]
    /// The accept threshold the decision used.
    public var threshold: Double
    /// The label an app acts on (`DecisionRule`): the top label, or unknown person when the top
    /// class is a user whose probability is below the threshold.
    public var decidedLabel: ClassLabel

    /// The most probable class.
    public var top: ClassScore { ranking[0] }
    /// Whether the top class is a user whose probability reaches the accept threshold, i.e. whether
    /// the app would let this person in.
    public var accepted: Bool { top.label.isUser && decidedLabel == top.label }
}

/// The outcome for one file: its classification, or why it could not be read.
public enum ImageOutcome: Sendable {
    case classified(ImageClassification)
    case failed(file: String, error: ImageError)
}

/// A bundle's model, ready to classify image files exactly as `fit` and `eval` see crops: decoded
/// (EXIF orientation applied), converted to the model's channels, resized to its input, normalised,
/// and run in inference mode.
public struct FacePredictor {
    /// Images run through the network at once.
    public static let batchSize = 64

    public let definition: ModelDefinition
    /// The definition's class labels, in output order.
    public let classLabels: [ClassLabel]
    /// Display name per class.
    public let names: [ClassLabel: String]
    /// The accept threshold (0 when the bundle records none).
    public let threshold: Double
    private var network: Network

    /// A predictor for a verified bundle, with the bundle's names and accept threshold.
    public init(bundle: ModelBundle) throws {
        try self.init(
            model: bundle.model,
            names: Dictionary(
                bundle.manifest.classes.map { ($0.label, $0.name) }, uniquingKeysWith: { first, _ in first }),
            threshold: bundle.manifest.acceptThreshold ?? 0)
    }

    /// A predictor for any trained model whose labels are class labels; `names` maps classes to
    /// display names (the negative classes have theirs by default).
    public init(model: TrainedModel, names: [ClassLabel: String], threshold: Double) throws {
        definition = model.definition
        classLabels = try ClassLabel.parse(model.definition.classLabels)
        network = try Network(model: model)
        // Copies (one per request or thread) then share the transformed weights.
        network.prepareForInference()
        var names = names
        for negative in ClassLabel.negatives { names[negative] = names[negative] ?? negative.negativeName }
        self.names = names
        self.threshold = threshold
    }

    /// The 8-bit pixels the network sees for an image file: decoded, converted to `input.channels`
    /// and resized to the input size, as the data loader prepares training crops.
    public static func pixels(of file: URL, input: InputSpecification) throws(ImageError) -> Image {
        let image = try ImageDecoder.decode(contentsOf: file)
        return image.converted(channels: input.channels).resized(width: input.width, height: input.height)
    }

    /// Classifies the files in order, `batchSize` at a time; a file that cannot be decoded gives a
    /// `.failed` outcome and does not stop the others.
    public mutating func classify(_ files: [URL]) throws -> [ImageOutcome] {
        var outcomes: [ImageOutcome] = []
        outcomes.reserveCapacity(files.count)
        var start = 0
        while start < files.count {
            let end = min(start + Self.batchSize, files.count)
            outcomes += try classifyBatch(files[start..<end])
            start = end
        }
        return outcomes
    }

    private mutating func classifyBatch(_ files: ArraySlice<URL>) throws -> [ImageOutcome] {
        let input = definition.input
        var decoded: [Result<Image, ImageError>] = []
        for file in files {
            do throws(ImageError) {
                decoded.append(.success(try Self.pixels(of: file, input: input)))
            } catch {
                decoded.append(.failure(error))
            }
        }
        let rows = try probabilityRows(decoded.compactMap { try? $0.get() })
        var next = 0
        return zip(files, decoded).map { file, result in
            switch result {
            case .failure(let error):
                return .failed(file: file.relativePath, error: error)
            case .success:
                defer { next += 1 }
                return .classified(classification(of: file.relativePath, probabilities: rows[next]))
            }
        }
    }

    /// Classifies images already in memory (any size, 1 or 3 channels), prepared as files are;
    /// `names[i]` is image i's `file` in its classification.
    public mutating func classify(images: [Image], names: [String]) throws -> [ImageClassification] {
        precondition(images.count == names.count, "one name per image")
        let input = definition.input
        var classifications: [ImageClassification] = []
        var start = 0
        while start < images.count {
            let end = min(start + Self.batchSize, images.count)
            let pixels = images[start..<end].map {
                $0.converted(channels: input.channels).resized(width: input.width, height: input.height)
            }
            for (name, row) in zip(names[start..<end], try probabilityRows(pixels)) {
                classifications.append(classification(of: name, probabilities: row))
            }
            start = end
        }
        return classifications
    }

    /// The softmax rows of images already at the network's input size and channels.
    private mutating func probabilityRows(_ images: [Image]) throws -> [[Float]] {
        guard !images.isEmpty else { return [] }
        let samples = images.map { image in
            FaceSample(
                path: "", label: 0, contentHash: "", image: image, originalWidth: image.width,
                originalHeight: image.height)
        }
        let output = try network.probabilities(for: Inference.batch(samples[...], input: definition.input))
        let width = output.shape[1]
        return (0..<samples.count).map { Array(output.scalars[($0 * width)..<(($0 + 1) * width)]) }
    }

    /// Ranks one probability row and applies the accept threshold.
    public func classification(of file: String, probabilities: [Float]) -> ImageClassification {
        let labels = classLabels
        let ranking = probabilities.indices
            .sorted { probabilities[$0] > probabilities[$1] || (probabilities[$0] == probabilities[$1] && $0 < $1) }
            .map { ClassScore(label: labels[$0], name: names[labels[$0]] ?? "", probability: probabilities[$0]) }
        let decided = DecisionRule(classLabels: labels, threshold: threshold).decide(probabilities)
        return ImageClassification(
            file: file, ranking: ranking, classLabels: labels, probabilities: probabilities, threshold: threshold,
            decidedLabel: decided.label)
    }
}
