import FaceTrainEngine

/// Size and work of a named architecture, computed from its definition (`facetrain architectures`).
public struct ArchitectureSummary: Sendable, Codable, Equatable {
    public var name: String
    public var summary: String
    public var inputSize: Int
    public var width: Int
    public var classes: Int
    /// Layers in the definition (each batch norm, ReLU and add counts as one).
    public var layers: Int
    /// Trainable scalars of the classifier over `classes` (batch-norm running statistics left out).
    public var parameters: Int
    /// The same without the classifier: what a base extractor holds.
    public var extractorParameters: Int
    public var embeddingFeatures: Int
    /// Multiply-adds × 2 per image, as `FLOPCount` and `facetrain bench` count them.
    public var forwardMFLOPPerImage: Double
    public var trainingMFLOPPerImage: Double

    enum CodingKeys: String, CodingKey {
        case name, summary, width, classes, layers, parameters
        case inputSize = "input_size"
        case extractorParameters = "extractor_parameters"
        case embeddingFeatures = "embedding_features"
        case forwardMFLOPPerImage = "forward_mflop_per_image"
        case trainingMFLOPPerImage = "training_mflop_per_image"
    }

    /// The summary of `architecture` at `width` and `inputSize` with a classifier over `classes`;
    /// throws when the architecture does not check at that size.
    public init(
        _ architecture: NamedArchitecture, inputSize: Int, width: Int, classes: Int
    ) throws(ModelDefinitionError) {
        let definition = architecture.classifier(
            classLabels: (0..<classes).map { "class\($0)" }, inputSize: inputSize, width: width)
        let extractor = architecture.extractor(inputSize: inputSize, width: width)
        func trainable(_ layers: [LayerSpecification]) -> Int {
            layers.flatMap(\.parameterShapes).filter { !$0.name.hasPrefix("running_") }.reduce(0) {
                $0 + $1.shape.reduce(1, *)
            }
        }
        let flops = try FLOPCount(definition: definition)
        name = architecture.name
        summary = architecture.summary
        self.inputSize = inputSize
        self.width = width
        self.classes = classes
        layers = definition.layers.count
        parameters = trainable(definition.layers)
        extractorParameters = trainable(extractor.layers)
        embeddingFeatures = try extractor.layerOutputShapes().last.map { $0.reduce(1, *) } ?? 0
        forwardMFLOPPerImage = flops.forwardPerImage / 1e6
        trainingMFLOPPerImage = flops.trainingPerImage / 1e6
    }
}
