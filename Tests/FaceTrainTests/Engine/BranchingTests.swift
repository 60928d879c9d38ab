import Foundation
import Testing

@testable import FaceTrain
@testable import FaceTrainEngine

/// Grouped and depthwise convolutions, residual adds and gradient accumulation.
@Suite struct BranchingTests {
    static let images = TestData.normal([4, 3, 8, 8], seed: 41)
    static let labels = [0, 2, 1, 2]

    // MARK: - Grouped and depthwise convolution

    @Test func depthwiseGradients() {
        var generator = SplitMix64(seed: 11)
        // groups == channels, multiplier 1 and 2, strides 1 and 2, with and without padding.
        let cases: [(channels: Int, outputs: Int, kernel: Int, stride: Int, padding: Int, shape: [Int])] = [
            (3, 3, 3, 1, 1, [2, 3, 5, 6]),
            (2, 4, 3, 2, 1, [2, 2, 7, 6]),
            (2, 2, 3, 2, 0, [1, 2, 7, 7]),
            (4, 4, 2, 1, 0, [2, 4, 4, 5]),
            // 3x3 at stride 1 (the register-blocked path): multiplier 2, no padding, wide padding.
            (2, 4, 3, 1, 1, [2, 2, 5, 7]),
            (3, 3, 3, 1, 0, [1, 3, 6, 5]),
            (2, 2, 3, 1, 2, [2, 2, 3, 4]),
            // Kernel as large as the plane (GDConv): the whole-plane path, any stride.
            (3, 3, 5, 1, 0, [2, 3, 5, 5]),
            (2, 4, 4, 2, 0, [3, 2, 4, 4]),
        ]
        for (channels, outputs, kernel, stride, padding, shape) in cases {
            let conv = Conv2D(
                inputChannels: channels, outputChannels: outputs, kernelSize: kernel, stride: stride, padding: padding,
                groups: channels, using: &generator)
            #expect(conv.isDepthwise)
            #expect(conv.weight.value.shape == [outputs, 1, kernel, kernel])
            let check = GradientCheck(conv, input: TestData.normal(shape, seed: UInt64(channels * 10 + stride)))
            #expect(check.worst < 1e-2, "depthwise \(channels)->\(outputs) k\(kernel) s\(stride) p\(padding): \(check)")
        }
    }

    /// A global depthwise convolution is, per output channel, the dot product of its filter with
    /// the input plane (plus bias): checked against that sum written out, for multipliers 1 and 2.
    @Test(arguments: [1, 2])
    func globalDepthwiseIsPerChannelDot(multiplier: Int) {
        var generator = SplitMix64(seed: 31)
        let (channels, side, batch) = (3, 4, 2)
        var conv = Conv2D(
            inputChannels: channels, outputChannels: channels * multiplier, kernelSize: side, stride: 1, padding: 0,
            groups: channels, using: &generator)
        conv.bias.value = TestData.normal([channels * multiplier], seed: 32)
        let input = TestData.normal([batch, channels, side, side], seed: 33)
        let output = conv.forward(input, mode: .training)
        #expect(output.shape == [batch, channels * multiplier, 1, 1])
        var expected: [Double] = []
        for image in 0..<batch {
            for o in 0..<(channels * multiplier) {
                var total = Double(conv.bias.value.scalars[o])
                for tap in 0..<(side * side) {
                    let x = input.scalars[(image * channels + o / multiplier) * side * side + tap]
                    total += Double(conv.weight.value.scalars[o * side * side + tap]) * Double(x)
                }
                expected.append(total)
            }
        }
        #expect(GradientCheck.relativeError(output.scalars, expected) < 1e-5)
    }

    @Test func groupedGradients() {
        var generator = SplitMix64(seed: 12)
        let conv = Conv2D(
            inputChannels: 4, outputChannels: 6, kernelSize: 3, stride: 1, padding: 1, groups: 2, using: &generator)
        #expect(!conv.isDepthwise)
        #expect(conv.weight.value.shape == [6, 2, 3, 3])
        #expect(GradientCheck(conv, input: TestData.normal([2, 4, 5, 5], seed: 13)).worst < 1e-2)
        let strided = Conv2D(
            inputChannels: 6, outputChannels: 3, kernelSize: 3, stride: 2, padding: 0, groups: 3, using: &generator)
        #expect(GradientCheck(strided, input: TestData.normal([2, 6, 7, 6], seed: 14)).worst < 1e-2)
    }

    /// A grouped convolution is an ungrouped one whose weights are zero outside the diagonal blocks:
    /// forward and input gradient must agree with that dense convolution (GEMM path), for the
    /// depthwise kernel too, and the weight gradient with the dense one's diagonal blocks.
    @Test(arguments: [(4, 4, 4, 1), (4, 8, 4, 2), (4, 8, 4, 1), (4, 6, 2, 1), (6, 6, 3, 2)])
    func groupedEqualsBlockDiagonalDense(channels: Int, outputs: Int, groups: Int, stride: Int) {
        var generator = SplitMix64(seed: 21)
        var grouped = Conv2D(
            inputChannels: channels, outputChannels: outputs, kernelSize: 3, stride: stride, padding: 1,
            groups: groups, using: &generator)
        grouped.bias.value = TestData.normal([outputs], seed: 22)
        var dense = Conv2D(
            inputChannels: channels, outputChannels: outputs, kernelSize: 3, stride: stride, padding: 1,
            using: &generator)
        let (groupInputs, groupOutputs) = (channels / groups, outputs / groups)
        var denseWeight = [Float](repeating: 0, count: outputs * channels * 9)
        for o in 0..<outputs {
            let first = (o / groupOutputs) * groupInputs
            for i in 0..<groupInputs {
                for tap in 0..<9 {
                    denseWeight[(o * channels + first + i) * 9 + tap] =
                        grouped.weight.value.scalars[(o * groupInputs + i) * 9 + tap]
                }
            }
        }
        dense.weight.value = Tensor(shape: [outputs, channels, 3, 3], scalars: denseWeight)
        dense.bias.value = grouped.bias.value
        let input = TestData.normal([3, channels, 7, 6], seed: 23)
        let groupedOutput = grouped.forward(input, mode: .training)
        let denseOutput = dense.forward(input, mode: .training)
        #expect(groupedOutput.shape == denseOutput.shape)
        #expect(GradientCheck.relativeError(groupedOutput.scalars, denseOutput.scalars.map(Double.init)) < 1e-5)
        let probe = TestData.normal(groupedOutput.shape, seed: 24)
        let groupedInputGradient = grouped.backward(probe)
        let denseInputGradient = dense.backward(probe)
        #expect(
            GradientCheck.relativeError(groupedInputGradient.scalars, denseInputGradient.scalars.map(Double.init))
                < 1e-5)
        var diagonal: [Double] = []
        for o in 0..<outputs {
            let first = (o / groupOutputs) * groupInputs
            for i in 0..<groupInputs {
                for tap in 0..<9 {
                    diagonal.append(Double(dense.weight.gradient.scalars[(o * channels + first + i) * 9 + tap]))
                }
            }
        }
        #expect(GradientCheck.relativeError(grouped.weight.gradient.scalars, diagonal) < 1e-5)
        #expect(grouped.bias.gradient == dense.bias.gradient)
    }

    @Test func preluGradientsAndHandCase() {
        var prelu = PReLU(channels: 3)
        prelu.weight.value = Tensor(shape: [3], scalars: [0.1, 0.5, -0.2])
        #expect(GradientCheck(prelu, input: TestData.spaced([2, 3, 2, 2], seed: 15)).worst < 1e-2)
        #expect(GradientCheck(prelu, input: TestData.spaced([4, 3], seed: 16)).worst < 1e-2)
        var layer = PReLU(channels: 2)
        let output = layer.forward(Tensor(shape: [1, 2], scalars: [-2, 3]), mode: .training)
        #expect(output.scalars == [-0.5, 3])  // the initial slope 0.25 on the negative value
        let dx = layer.backward(Tensor(shape: [1, 2], scalars: [1, 1]))
        #expect(dx.scalars == [0.25, 1])
        #expect(layer.weight.gradient.scalars == [-2, 0])
        #expect(!layer.weight.decays)
    }

    @Test func depthwiseByHand() {
        var generator = SplitMix64(seed: 1)
        var conv = Conv2D(
            inputChannels: 2, outputChannels: 2, kernelSize: 2, stride: 1, padding: 0, groups: 2, using: &generator)
        conv.weight.value = Tensor(shape: [2, 1, 2, 2], scalars: [1, 0, 0, 1, 0, 1, 1, 0])
        conv.bias.value = Tensor(shape: [2], scalars: [0, 10])
        // Channel 0 = 1…9, channel 1 = 11…19 (3×3); filter 0 adds the diagonal, filter 1 the anti-diagonal.
        let input = Tensor(shape: [1, 2, 3, 3], scalars: (1...9).map(Float.init) + (11...19).map(Float.init))
        let output = conv.forward(input, mode: .training)
        #expect(output.shape == [1, 2, 2, 2])
        #expect(output.scalars == [6, 8, 12, 14, 36, 38, 42, 44])
        _ = conv.backward(Tensor(repeating: 1, shape: [1, 2, 2, 2]))
        // dW[o, tap] = sum of the 2×2 window of channel o at the tap's offset.
        #expect(conv.weight.gradient.scalars == [12, 16, 24, 28, 52, 56, 64, 68])
        #expect(conv.bias.gradient.scalars == [4, 4])
    }

    // MARK: - Residual add and accumulation

    /// A stem block, an inverted bottleneck with a depthwise convolution and a residual add, a grouped
    /// 1×1 convolution, then the pooled classifier: the branching the named architectures use.
    static func residualDefinition(classes: Int = 3) -> ModelDefinition {
        ModelDefinition(
            input: InputSpecification(width: 8, height: 8, channels: 3),
            layers: [
                .conv2D(inputChannels: 3, outputChannels: 4, kernelSize: 3, stride: 2, padding: 1),  // 0
                .batchNorm2D(channels: 4, epsilon: 1e-5, momentum: 0.1),
                .relu,  // 2: the block's input, read by the add
                .conv2D(inputChannels: 4, outputChannels: 8, kernelSize: 1, stride: 1, padding: 0),
                .batchNorm2D(channels: 8, epsilon: 1e-5, momentum: 0.1),
                .relu,
                .conv2D(inputChannels: 8, outputChannels: 8, kernelSize: 3, stride: 1, padding: 1, groups: 8),
                .batchNorm2D(channels: 8, epsilon: 1e-5, momentum: 0.1),
                .relu,
                .conv2D(inputChannels: 8, outputChannels: 4, kernelSize: 1, stride: 1, padding: 0, groups: 2),
                .batchNorm2D(channels: 4, epsilon: 1e-5, momentum: 0.1),
                .add(source: 2),  // 11
                .add(source: 11),  // 12: an add of an add (doubles the block), to route through both
                .globalAveragePool,
                .linear(inputFeatures: 4, outputFeatures: classes),
            ],
            classLabels: (0..<classes).map(String.init))
    }

    /// The residual network with its batch norms off their initial γ = 1, β = 0: with β = 0 a ReLU
    /// commutes with γ and the next depthwise convolution + batch norm cancel it, so γ's true gradient
    /// would be exactly 0 and comparisons would only see rounding.
    static func residualNetwork(seed: UInt64) throws -> Network {
        var network = try Network(definition: Self.residualDefinition(), seed: seed)
        var noiseSeed = seed * 100
        network.updateParameters { key, parameter in
            guard key.contains(LayerKindName.batchNorm2D.rawValue), parameter.isTrainable else { return }
            noiseSeed += 1
            let noise = TestData.normal(parameter.value.shape, seed: noiseSeed, standardDeviation: 0.3)
            parameter.value.scalars = zip(parameter.value.scalars, noise.scalars).map(+)
        }
        return network
    }

    @Test func residualBlockGradientsMatchFiniteDifferences() throws {
        let network = try Self.residualNetwork(seed: 5)
        let check = GradientCheck(network, input: Self.images)
        for (key, error) in check.parameters {
            #expect(error < 2e-2, "\(key): \(error)")
        }
        // Every trainable parameter was checked; the biases a batch norm cancels have no gradient.
        #expect(
            check.parameters.count + check.cancelled.count
                == network.layers.flatMap(\.parameters).filter(\.isTrainable).count)
        #expect(check.cancelled.count == 4, "\(check.cancelled)")
        for (key, magnitude) in check.cancelled {
            #expect(magnitude.analytic < 1e-4 && magnitude.numeric < 1e-2, "\(key): \(magnitude)")
        }
    }

    /// The residual network gives the same logits and gradients as its layers run one by one, with
    /// the adds fed by hand and their gradients summed by hand.
    @Test func residualRoutingMatchesLayerByLayer() throws {
        let definition = Self.residualDefinition()
        var network = try Self.residualNetwork(seed: 6)
        var layers = network.layers
        let logits = network.forward(Self.images, mode: .training)
        var outputs: [Tensor] = []
        var x = Self.images
        for index in layers.indices {
            if var add = layers[index] as? ResidualAdd {
                add.shortcut = outputs[add.source]
                layers[index] = add
            }
            x = layers[index].forward(x, mode: .training)
            outputs.append(x)
        }
        #expect(GradientCheck.relativeError(logits.scalars, x.scalars.map(Double.init)) < 1e-5)

        let gradient = SoftmaxCrossEntropy().lossAndGradient(logits: logits, labels: Self.labels).logitsGradient
        network.zeroGradients()
        network.backward(gradient)
        var pending = [Tensor?](repeating: nil, count: layers.count)
        var dx = gradient
        for index in layers.indices.reversed() {
            if let extra = pending[index] {
                dx = Tensor(shape: dx.shape, scalars: zip(dx.scalars, extra.scalars).map(+))
            }
            if let add = layers[index] as? ResidualAdd {
                pending[add.source] = Tensor(
                    shape: dx.shape,
                    scalars: zip(pending[add.source]?.scalars ?? [Float](repeating: 0, count: dx.count), dx.scalars)
                        .map(+))
            }
            dx = layers[index].backward(dx)
        }
        for (index, (fused, plain)) in zip(network.layers, layers).enumerated() {
            for (a, b) in zip(fused.parameters, plain.parameters) where a.isTrainable {
                if a.name == "bias", index + 1 < definition.layers.count,
                    definition.layers[index + 1].kind == .batchNorm2D
                {
                    // Cancelled by the batch norm: zero up to rounding in both.
                    #expect(a.gradient.scalars.allSatisfy { abs($0) < 1e-5 })
                    #expect(b.gradient.scalars.allSatisfy { abs($0) < 1e-5 })
                } else {
                    #expect(
                        GradientCheck.relativeError(a.gradient.scalars, b.gradient.scalars.map(Double.init)) < 1e-4,
                        "\(network.layerNames[index]).\(a.name)")
                }
            }
        }
    }

    @Test func backwardAddsUntilGradientsAreZeroed() throws {
        var network = try Network(definition: Self.residualDefinition(), seed: 7)
        func step() {
            let logits = network.forward(Self.images, mode: .training)
            network.backward(SoftmaxCrossEntropy().lossAndGradient(logits: logits, labels: Self.labels).logitsGradient)
        }
        func gradients() -> [Float] {
            network.layers.flatMap(\.parameters).filter(\.isTrainable).flatMap(\.gradient.scalars)
        }
        step()
        let once = gradients()
        #expect(once.contains { $0 != 0 })
        step()
        let twice = gradients()
        // Running statistics moved between the passes, but batch-mode outputs (and so gradients) did not.
        #expect(GradientCheck.relativeError(twice, once.map { 2 * Double($0) }) < 1e-5)
        network.zeroGradients()
        #expect(gradients().allSatisfy { $0 == 0 })
        step()
        #expect(GradientCheck.relativeError(gradients(), once.map(Double.init)) < 1e-6)
    }

    /// A trainer's step is the same with branching layers in it: loss falls on a fixed batch.
    @Test func residualNetworkTrains() throws {
        var trainer = Trainer(
            network: try Network(definition: Self.residualDefinition(), seed: 8),
            optimizer: AdamW(weightDecay: 0), learningRate: 0.01)
        let first = try trainer.trainStep(images: Self.images, labels: Self.labels).loss
        var last = first
        for _ in 0..<30 { last = try trainer.trainStep(images: Self.images, labels: Self.labels).loss }
        #expect(last < first * 0.5, "loss \(first) -> \(last)")
    }

    @Test func invalidBranchesAreRejected() {
        func message(_ change: (inout ModelDefinition) -> Void) -> String {
            var definition = Self.residualDefinition()
            change(&definition)
            do {
                _ = try Network(definition: definition, seed: 1)
                return "accepted"
            } catch {
                return "\(error)"
            }
        }
        #expect(message { $0.layers[11] = .add(source: 12) }.contains("not an earlier layer"))
        #expect(message { $0.layers[11] = .add(source: 5) }.contains("adds layer 5's output of shape"))
        #expect(
            message {
                $0.layers[9] = .conv2D(
                    inputChannels: 8, outputChannels: 4, kernelSize: 1, stride: 1, padding: 0, groups: 3)
            }.contains("3 groups do not divide 8 -> 4 channels"))
        #expect(message { _ in }.contains("accepted"))
    }

    // MARK: - Manifest coding

    /// Layer lists written before groups and adds existed decode unchanged (groups 1) and encode to
    /// the same bytes; grouped layers and adds carry their new keys and need format version 2.
    @Test func oldLayerListsDecodeAndReencodeByteForByte() throws {
        let old = """
            [{"conv2D":{"inputChannels":3,"kernelSize":3,"outputChannels":16,"padding":1,"stride":1}},\
            {"batchNorm2D":{"channels":16,"epsilon":1e-05,"momentum":0.1}},\
            {"relu":{}},{"maxPool2D":{"size":2,"stride":2}},{"globalAveragePool":{}},{"l2Normalize":{"scale":16}},\
            {"linear":{"inputFeatures":16,"outputFeatures":3}},{"dropout":{"rate":0.5}}]
            """
        let layers = try JSONDecoder().decode([LayerSpecification].self, from: Data(old.utf8))
        #expect(
            layers[0] == .conv2D(inputChannels: 3, outputChannels: 16, kernelSize: 3, stride: 1, padding: 1, groups: 1))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        #expect(String(decoding: try encoder.encode(layers), as: UTF8.self) == old)
        #expect(layers.map(\.minimumFormatVersion).max() == 1)

        let branching: [LayerSpecification] = [
            .conv2D(inputChannels: 8, outputChannels: 8, kernelSize: 3, stride: 1, padding: 1, groups: 8),
            .add(source: 0),
            .prelu(channels: 8),
        ]
        let text = String(decoding: try encoder.encode(branching), as: UTF8.self)
        #expect(
            text
                == #"[{"conv2D":{"groups":8,"inputChannels":8,"kernelSize":3,"outputChannels":8,"padding":1,"stride":1}},"#
                + #"{"add":{"source":0}},{"prelu":{"channels":8}}]"#)
        #expect(try JSONDecoder().decode([LayerSpecification].self, from: Data(text.utf8)) == branching)
        #expect(branching.map(\.minimumFormatVersion) == [2, 2, 2])
        // A kind this facetrain does not know is an error, not a silent guess.
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode([LayerSpecification].self, from: Data(#"[{"concat":{"sources":[1]}}]"#.utf8))
        }
    }

    /// The builtin base's manifest, written before this coding existed, decodes and re-encodes to
    /// its exact bytes (so its SHA-256, which bundles record, still matches).
    @Test func builtinBaseManifestReencodesIdentically() throws {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent(
                "base/builtin/manifest.json")
        let data = try Data(contentsOf: url)
        let manifest = try JSONDecoder().decode(BaseModel.Manifest.self, from: data)
        #expect(try JSONText.data(manifest) + Data("\n".utf8) == data)
    }

    @Test func bundleManifestsRecordTheFormatTheyNeed() {
        // A manifest lists classes: "1", "2" and a user's id.
        var tiny = TestData.tinyDefinition()
        tiny.classLabels = ["1", "2", "3"]
        var residual = Self.residualDefinition()
        residual.classLabels = tiny.classLabels
        let plain = Manifest(
            version: 1, definition: tiny, users: [], training: [:], seed: 1, dataFingerprint: "", gitCommit: nil)
        #expect(plain.formatVersion == 1)
        let branching = Manifest(
            version: 1, definition: residual, users: [], training: [:], seed: 1, dataFingerprint: "", gitCommit: nil)
        #expect(branching.formatVersion == 2)
        #expect(branching.architecture[6].summary.hasSuffix(", depthwise"))
        #expect(branching.architecture[9].summary.hasSuffix(", 2 groups"))
        #expect(branching.architecture[11].summary == "Add the output of layer 2")
    }
}
