/// The face detector's network (docs/design/detector.md, section 3.3): a definition built from
/// layers, with three outputs. Not its training, decoding or loss (those are not layers), and not
/// one of the classifier architectures that `fit` and `pretrain` offer.
extension ModelDefinition {
    /// The name of `denseDetector` in manifests and benchmarks.
    public static let denseDetectorName = "det-dense"

    /// Channels of each head output: 0 the score logit, 1-4 the box distances (left, top, right,
    /// bottom), 5-14 the five landmarks' (x, y).
    public static let detectorHeadChannels = 15

    /// `det-dense`: dense 3x3 Conv + BatchNorm + ReLU blocks (each fuses, with its 2x2 max-pool
    /// where there is one) in stages to C3, C4, C5 at strides 8, 16, 32 (40, 48, 64 channels);
    /// 1x1 laterals to 32 channels; a top-down path by nearest upsampling x2 and addition
    /// (P4 = lateral(C4) + up(P5), P3 = lateral(C3) + up(P4)); per level a head of Conv 3x3 32->32
    /// + BatchNorm + ReLU and Conv 1x1 32->15 with bias. Outputs: the three heads at strides 8, 16,
    /// 32. 170,317 parameters (BatchNorm running statistics apart), 1,185 MFLOP at 640x640.
    /// Fully convolutional: `Network.validateAnySize` takes any multiple of 32.
    public static func denseDetector(inputSize: Int = 320) -> ModelDefinition {
        var layers: [LayerSpecification] = []
        func block(_ inputs: Int, _ outputs: Int, kernelSize: Int = 3, stride: Int = 1) -> Int {
            layers += [
                .conv2D(
                    inputChannels: inputs, outputChannels: outputs, kernelSize: kernelSize, stride: stride,
                    padding: kernelSize / 2),
                .batchNorm2D(channels: outputs, epsilon: 1e-5, momentum: 0.1), .relu,
            ]
            return layers.count - 1
        }
        func pool() { layers.append(.maxPool2D(size: 2, stride: 2)) }
        func route(_ source: Int) { layers.append(.route(source: source)) }

        // Backbone: stride 4 after the stem, 8 (C3), 16 (C4), 32 (C5).
        _ = block(3, 16, stride: 2)
        pool()
        _ = block(16, 24)
        _ = block(24, 24)
        pool()
        _ = block(24, 40)
        let c3 = block(40, 40)
        pool()
        _ = block(40, 48)
        let c4 = block(48, 48)
        pool()
        _ = block(48, 64)
        let c5 = block(64, 64)

        // Neck: laterals, then the top-down path by addition.
        let neck = 32
        let p5 = block(64, neck, kernelSize: 1)
        route(c4)
        let lateral4 = block(48, neck, kernelSize: 1)
        route(p5)
        layers += [.upsample(factor: 2), .add(source: lateral4)]
        let p4 = layers.count - 1
        route(c3)
        let lateral3 = block(40, neck, kernelSize: 1)
        route(p4)
        layers += [.upsample(factor: 2), .add(source: lateral3)]
        let p3 = layers.count - 1

        // Heads, in stride order; P3 is the previous layer, so its head needs no route.
        var outputs: [Int] = []
        for level in [p3, p4, p5] {
            if level != layers.count - 1 { route(level) }
            _ = block(neck, neck)
            layers.append(
                .conv2D(
                    inputChannels: neck, outputChannels: detectorHeadChannels, kernelSize: 1, stride: 1, padding: 0))
            outputs.append(layers.count - 1)
        }
        return ModelDefinition(
            input: InputSpecification(width: inputSize, height: inputSize, channels: 3), layers: layers,
            classLabels: [], outputs: outputs)
    }
}
