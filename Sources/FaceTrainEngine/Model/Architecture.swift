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
            layers += convolution3x3(inputChannels, outputChannels) + [.maxPool2D(size: 2, stride: 2)]
            inputChannels = outputChannels
        }
        let embedding = width * 8
        layers += convolution3x3(inputChannels, embedding)
        return pooledEmbeddingClassifier(
            layers: layers, embedding: embedding, classLabels: classLabels, inputSize: inputSize, channels: channels)
    }

    /// `ref-small-gdc`: ref-small whose embedding is a global depthwise convolution (MobileFaceNet's
    /// GDConv, Chen et al. 2018) over the last 8x8 map instead of its average: each channel weighs
    /// every position with its own filter, so the embedding keeps *where* on the face a feature is
    /// (eyes above the mouth), which averaging throws away. The pool that follows only flattens the
    /// 1x1 map. Input sizes are multiples of 8.
    public static func referenceSmallGlobalDepthwise(
        classLabels: [String], inputSize: Int = 64, channels: Int = 3, width: Int = 16
    ) -> ModelDefinition {
        var definition = referenceSmall(
            classLabels: classLabels, inputSize: inputSize, channels: channels, width: width)
        let embedding = width * 8
        let poolIndex = definition.layers.firstIndex(of: .globalAveragePool)!
        definition.layers.insert(globalDepthwise(channels: embedding, inputSize: inputSize), at: poolIndex)
        return definition
    }

    /// `ref-deep-gdc`: ref-small-gdc with a second Conv 3x3 + BatchNorm + ReLU at the end of each
    /// of its last three resolutions (seven convolutions instead of four, VGG's pairs): depth at
    /// the small maps, where a layer costs the same as at the large ones but sees twice the face
    /// per pixel. Measured because ref-small-gdc's embedding underfits the teacher descriptors even
    /// on the crops it trains on (capacity), and widening costs FLOPs with the square of the width.
    /// `convolutionsPerStage` counts the Conv 3x3 blocks at each of the four resolutions (width ·
    /// 2^stage channels, a 2x2 max-pool between stages); `ref-deeper-gdc` is [1, 2, 3, 3]: a third
    /// at the last two, because ref-deep-gdc still underfits the teacher (1.44 times its FLOPs).
    public static func referenceDeepGlobalDepthwise(
        classLabels: [String], inputSize: Int = 64, channels: Int = 3, width: Int = 16,
        convolutionsPerStage: [Int] = [1, 2, 2, 2]
    ) -> ModelDefinition {
        let widths = [width, width * 2, width * 4, width * 8]
        precondition(convolutionsPerStage.count == widths.count && convolutionsPerStage.allSatisfy { $0 >= 1 })
        var layers: [LayerSpecification] = []
        var inputChannels = channels
        for (stage, outputChannels) in widths.enumerated() {
            for _ in 0..<convolutionsPerStage[stage] {
                layers += convolution3x3(inputChannels, outputChannels)
                inputChannels = outputChannels
            }
            if stage < widths.count - 1 { layers.append(.maxPool2D(size: 2, stride: 2)) }
        }
        let embedding = width * 8
        layers.append(globalDepthwise(channels: embedding, inputSize: inputSize))
        return pooledEmbeddingClassifier(
            layers: layers, embedding: embedding, classLabels: classLabels, inputSize: inputSize, channels: channels)
    }

    /// Conv 3x3 (stride 1, padding 1) + BatchNorm + ReLU: the block of the ref-* architectures.
    static func convolution3x3(_ inputs: Int, _ outputs: Int) -> [LayerSpecification] {
        [
            .conv2D(inputChannels: inputs, outputChannels: outputs, kernelSize: 3, stride: 1, padding: 1),
            .batchNorm2D(channels: outputs, epsilon: 1e-5, momentum: 0.1),
            .relu,
        ]
    }

    /// MobileFaceNet's GDConv: one filter per channel over the whole last map (the input / 8).
    static func globalDepthwise(channels: Int, inputSize: Int) -> LayerSpecification {
        .conv2D(
            inputChannels: channels, outputChannels: channels, kernelSize: max(1, inputSize / 8), stride: 1, padding: 0,
            groups: channels)
    }

    /// What every named architecture ends with, after its last convolution block: global average
    /// pooling, then batch norm of the pooled features (a "BN neck", Luo et al. 2019: it centres the
    /// embedding, which after ReLU and pooling is all positive, so that people spread over the whole
    /// sphere the normalisation maps them onto instead of one narrow cone), the embedding scaled to
    /// length 16, and a linear classifier. `extractor` drops the last two.
    static func pooledEmbeddingClassifier(
        layers: [LayerSpecification], embedding: Int, classLabels: [String], inputSize: Int, channels: Int
    ) -> ModelDefinition {
        ModelDefinition(
            input: InputSpecification(width: inputSize, height: inputSize, channels: channels),
            layers: layers + [
                .globalAveragePool,
                .batchNorm2D(channels: embedding, epsilon: 1e-5, momentum: 0.1),
                .l2Normalize(scale: 16),
                .linear(inputFeatures: embedding, outputFeatures: classLabels.count),
            ],
            classLabels: classLabels)
    }
}

extension ModelDefinition {
    /// `mobile-face`: a MobileFaceNet-like network (Chen et al. 2018, arXiv:1804.07573) sized for
    /// 64-px crops. A stem Conv 3x3 / 2 (2·width channels) and a depthwise 3x3; inverted
    /// bottlenecks (1x1 expansion + BatchNorm + ReLU, depthwise 3x3 + BatchNorm + ReLU, 1x1
    /// projection + BatchNorm, plus the block's input when the shapes match) in five stages,
    /// (expansion, channels, repeats, first stride) = (2, 2w, 2, 2), (4, 4w, 1, 2), (2, 4w, 3, 1),
    /// (4, 4w, 1, 2), (2, 4w, 2, 1), which take 32x32 to 4x4; Conv 1x1 to the 8·width embedding
    /// channels + BatchNorm + ReLU, global average pooling, the BN neck, the embedding scaled to
    /// length 16 and Linear to the classes: the same tail as ref-small, so fit and pretrain treat
    /// both alike. ReLU rather than PReLU, and fewer repeats than MobileFaceNet's 112-px network.
    public static func mobileFace(
        classLabels: [String], inputSize: Int = 64, channels: Int = 3, width: Int = 32
    ) -> ModelDefinition {
        var layers: [LayerSpecification] = []
        func convolution(_ inputs: Int, _ outputs: Int, kernel: Int, stride: Int = 1, groups: Int = 1, relu: Bool) {
            layers += [
                .conv2D(
                    inputChannels: inputs, outputChannels: outputs, kernelSize: kernel, stride: stride,
                    padding: kernel / 2, groups: groups),
                .batchNorm2D(channels: outputs, epsilon: 1e-5, momentum: 0.1),
            ]
            if relu { layers.append(.relu) }
        }
        let stem = 2 * width
        convolution(channels, stem, kernel: 3, stride: 2, relu: true)
        convolution(stem, stem, kernel: 3, groups: stem, relu: true)
        var current = stem
        let stages = [
            (2, 2 * width, 2, 2), (4, 4 * width, 1, 2), (2, 4 * width, 3, 1), (4, 4 * width, 1, 2),
            (2, 4 * width, 2, 1),
        ]
        for (expansion, outputs, repeats, firstStride) in stages {
            for block in 0..<repeats {
                let stride = block == 0 ? firstStride : 1
                let blockInput = layers.count - 1
                let expanded = current * expansion
                convolution(current, expanded, kernel: 1, relu: true)
                convolution(expanded, expanded, kernel: 3, stride: stride, groups: expanded, relu: true)
                convolution(expanded, outputs, kernel: 1, relu: false)
                if stride == 1 && current == outputs { layers.append(.add(source: blockInput)) }
                current = outputs
            }
        }
        let embedding = width * 8
        convolution(current, embedding, kernel: 1, relu: true)
        return pooledEmbeddingClassifier(
            layers: layers, embedding: embedding, classLabels: classLabels, inputSize: inputSize, channels: channels)
    }
}

/// An architecture by name: what `--architecture NAME` builds, for `fit`, `pretrain`, `bench` and
/// `facetrain architectures`.
public struct NamedArchitecture: Sendable {
    public let name: String
    /// One line for listings.
    public let summary: String
    let build: @Sendable (_ classLabels: [String], _ inputSize: Int, _ channels: Int, _ width: Int) -> ModelDefinition

    /// The classifier over `classLabels`: the extractor, the embedding's normalisation and Linear.
    public func classifier(classLabels: [String], inputSize: Int, channels: Int = 3, width: Int) -> ModelDefinition {
        build(classLabels, inputSize, channels, width)
    }

    /// The extractor part: input to the batch-normalised embedding, without the normalisation and the
    /// classifier that `fit` adds. Its layers are the first layers of the classifier, with the same
    /// names, so its weights load into it.
    public func extractor(inputSize: Int, width: Int) -> ModelDefinition {
        var definition = build(["1"], inputSize, 3, width)
        definition.layers.removeLast(2)
        definition.classLabels = []
        return definition
    }
}

/// `--architecture` names no known architecture.
public struct UnknownArchitectureError: Error, CustomStringConvertible, Equatable {
    public let name: String

    public var description: String {
        "architecture '\(name)' is not known; known: "
            + ModelDefinition.architectures.map(\.name).joined(separator: ", ")
            + ".\nHINT: `facetrain architectures` lists them with their sizes."
    }
}

extension ModelDefinition {
    /// Every named architecture, in listing order.
    public static let architectures: [NamedArchitecture] = [
        NamedArchitecture(
            name: "ref-small",
            summary:
                "plain stack: 3 conv 3x3 + batch norm + ReLU + 2x2 max-pool blocks, conv to 8x width, pooled, BN neck",
            build: { referenceSmall(classLabels: $0, inputSize: $1, channels: $2, width: $3) }),
        NamedArchitecture(
            name: "ref-small-gdc",
            summary: "ref-small with a global depthwise convolution (GDConv) embedding instead of average pooling",
            build: { referenceSmallGlobalDepthwise(classLabels: $0, inputSize: $1, channels: $2, width: $3) }),
        NamedArchitecture(
            name: "ref-deep-gdc",
            summary: "ref-small-gdc with a second conv 3x3 at each of its last three resolutions (7 convolutions)",
            build: { referenceDeepGlobalDepthwise(classLabels: $0, inputSize: $1, channels: $2, width: $3) }),
        NamedArchitecture(
            name: "ref-deeper-gdc",
            summary: "ref-deep-gdc with a third conv 3x3 at each of its last two resolutions (9 convolutions)",
            build: {
                referenceDeepGlobalDepthwise(
                    classLabels: $0, inputSize: $1, channels: $2, width: $3, convolutionsPerStage: [1, 2, 3, 3])
            }),
        NamedArchitecture(
            name: "mobile-face",
            summary: "MobileFaceNet-like: depthwise-separable inverted bottlenecks with residual adds, pooled, BN neck",
            build: { mobileFace(classLabels: $0, inputSize: $1, channels: $2, width: $3) }),
    ]

    /// The architecture called `name`.
    public static func architecture(named name: String) throws(UnknownArchitectureError) -> NamedArchitecture {
        guard let found = architectures.first(where: { $0.name == name }) else {
            throw UnknownArchitectureError(name: name)
        }
        return found
    }

    /// Architectures a base extractor can be pretrained with, by name.
    public static var extractorArchitectures: [String] { architectures.map(\.name) }

    /// The extractor of a known architecture (see `NamedArchitecture.extractor`).
    public static func extractor(architecture: String, inputSize: Int, width: Int) -> ModelDefinition {
        guard let named = try? Self.architecture(named: architecture) else {
            preconditionFailure("unknown architecture \(architecture)")
        }
        return named.extractor(inputSize: inputSize, width: width)
    }
}
