/// Named architectures, as readable lists of layers.
extension ModelDefinition {
    /// `ref-small`: three blocks of Conv 3x3 + BatchNorm + ReLU + MaxPool 2x2 (16, 32, 64 channels
    /// at width 16), Conv 3x3 to 128 + BatchNorm + ReLU, global average pooling, BatchNorm (the
    /// 128-d face embedding), the embedding scaled to length 16, then Linear to the classes.
    public static func referenceSmall(
        classLabels: [String], inputSize: Int = 64, channels: Int = 3, width: Int = 16
    ) -> ModelDefinition {
        let widths = [width, width * 2, width * 4]
        var layers: [LayerSpecification] = []
        var inputChannels = channels
        for outputChannels in widths {
            layers += [
                .conv2D(
                    inputChannels: inputChannels, outputChannels: outputChannels, kernelSize: 3, stride: 1, padding: 1),
                .batchNorm2D(channels: outputChannels, epsilon: 1e-5, momentum: 0.1),
                .relu,
                .maxPool2D(size: 2, stride: 2),
            ]
            inputChannels = outputChannels
        }
        let embedding = width * 8
        layers += [
            .conv2D(inputChannels: inputChannels, outputChannels: embedding, kernelSize: 3, stride: 1, padding: 1),
            .batchNorm2D(channels: embedding, epsilon: 1e-5, momentum: 0.1),
            .relu,
            .globalAveragePool,
            // Batch norm of the pooled features (a "BN neck", Luo et al. 2019): centres the
            // embedding, which after ReLU and pooling is all positive, so that people spread over
            // the whole sphere the normalisation maps them onto instead of one narrow cone.
            .batchNorm2D(channels: embedding, epsilon: 1e-5, momentum: 0.1),
            .l2Normalize(scale: 16),
            .linear(inputFeatures: embedding, outputFeatures: classLabels.count),
        ]
        return ModelDefinition(
            input: InputSpecification(width: inputSize, height: inputSize, channels: channels),
            layers: layers,
            classLabels: classLabels)
    }
}

extension ModelDefinition {
    /// Architectures a base extractor can be pretrained with, by name.
    public static let extractorArchitectures = ["ref-small"]

    /// The extractor part of an architecture: input to the batch-normalised embedding, without
    /// the normalisation and the classifier that `fit` adds. Its layers are the first layers of
    /// the classifier of the same architecture, with the same names, so its weights load into it.
    public static func extractor(architecture: String, inputSize: Int, width: Int) -> ModelDefinition {
        precondition(extractorArchitectures.contains(architecture), "unknown architecture \(architecture)")
        var definition = referenceSmall(classLabels: ["1"], inputSize: inputSize, channels: 3, width: width)
        definition.layers.removeLast(2)
        definition.classLabels = []
        return definition
    }
}
