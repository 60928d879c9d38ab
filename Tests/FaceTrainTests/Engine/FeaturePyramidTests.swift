import Foundation
import Testing

@testable import FaceTrain
@testable import FaceTrainBenchmark
@testable import FaceTrainEngine

/// What a detector's feature pyramid needs from the engine: routes, upsampling inside a network,
/// several outputs, any-size inference, and the det-dense definition. Not the layers' own
/// gradient checks (LayerTests) nor the exports (Export/).
@Suite struct FeaturePyramidTests {
    static let images = TestData.normal([3, 3, 8, 8], seed: 61)

    // MARK: - Route

    /// Two branches from one trunk joined by an add, then a strided conv and upsample back, added to
    /// the trunk again: every gradient a route and an upsample pass back crosses a branch.
    static func twoBranchDefinition() -> ModelDefinition {
        ModelDefinition(
            input: InputSpecification(width: 8, height: 8, channels: 3),
            layers: [
                .conv2D(inputChannels: 3, outputChannels: 4, kernelSize: 3, stride: 1, padding: 1),  // 0
                .batchNorm2D(channels: 4, epsilon: 1e-5, momentum: 0.1),
                .relu,  // 2: the trunk, read by the route and the last add
                .conv2D(inputChannels: 4, outputChannels: 4, kernelSize: 3, stride: 1, padding: 1),  // 3: branch A
                .route(source: 2),  // 4: branch B starts again from the trunk
                .conv2D(inputChannels: 4, outputChannels: 4, kernelSize: 1, stride: 1, padding: 0),
                .add(source: 3),  // 6: B + A
                // Strided rather than a max-pool: no pooling kink within a finite-difference step.
                .conv2D(inputChannels: 4, outputChannels: 4, kernelSize: 3, stride: 2, padding: 1),
                .upsample(factor: 2),
                .add(source: 2),  // 9
                .globalAveragePool,
                .linear(inputFeatures: 4, outputFeatures: 3),
            ],
            classLabels: ["1", "2", "3"])
    }

    /// The network with its batch norm off γ = 1, β = 0 (see BranchingTests.residualNetwork).
    static func perturbed(_ definition: ModelDefinition, seed: UInt64) throws -> Network {
        var network = try Network(definition: definition, seed: seed)
        var noiseSeed = seed * 100
        network.updateParameters { key, parameter in
            guard key.contains(LayerKindName.batchNorm2D.rawValue), parameter.isTrainable else { return }
            noiseSeed += 1
            let noise = TestData.normal(parameter.value.shape, seed: noiseSeed, standardDeviation: 0.3)
            parameter.value.scalars = zip(parameter.value.scalars, noise.scalars).map(+)
        }
        return network
    }

    @Test func twoBranchGradientsMatchFiniteDifferences() throws {
        let network = try Self.perturbed(Self.twoBranchDefinition(), seed: 3)
        let check = GradientCheck(network, input: Self.images)
        for (key, error) in check.parameters {
            #expect(error < 2e-2, "\(key): \(error)")
        }
        #expect(check.parameters.count == 11, "\(check.parameters.keys.sorted())")
        #expect(check.cancelled.count == 1, "\(check.cancelled)")
    }

    /// The route's output is its source's, whatever its input; the branch it skips still trains
    /// through the add that reads it.
    @Test func routeForwardsItsSourceAndSendsItsInputNothing() throws {
        var network = try Network(definition: Self.twoBranchDefinition(), seed: 4)
        let layers = network.layers
        _ = network.forward(Self.images, mode: .training)
        // Layer by layer, by hand: the route takes the trunk.
        var outputs: [Tensor] = []
        var x = Self.images
        for index in 0..<5 {
            var layer = layers[index]
            if index == 4 {
                var route = try #require(layer as? Route)
                route.shortcut = outputs[2]
                layer = route
            }
            x = layer.forward(x, mode: .training)
            outputs.append(x)
        }
        #expect(outputs[4] == outputs[2])
        var route = Route(source: 2)
        route.shortcut = outputs[2]
        _ = route.forward(outputs[3], mode: .training)
        #expect(route.backward(TestData.normal(outputs[2].shape, seed: 5)).scalars.allSatisfy { $0 == 0 })
    }

    /// Every layer's inference output, each layer run alone on the previous one's, routes and adds
    /// handed the earlier output they read.
    static func layerByLayer(_ layers: [any Layer], input: Tensor) -> [Tensor] {
        var outputs: [Tensor] = []
        var x = input
        for var layer in layers {
            if var route = layer as? Route {
                route.shortcut = outputs[route.source]
                layer = route
            } else if var add = layer as? ResidualAdd {
                add.shortcut = outputs[add.source]
                layer = add
            }
            x = layer.forward(x, mode: .inference)
            outputs.append(x)
        }
        return outputs
    }

    /// At inference the network runs routes, upsamplings and adds between its own buffers, not
    /// through the layers' forward: the two-branch network (batch norms fused into blocks) must give
    /// what its layers give one by one, to rounding.
    @Test func branchesAtInferenceEqualTheLayersOneByOne() throws {
        var network = try Self.perturbed(Self.twoBranchDefinition(), seed: 9)
        // Running statistics off zero and one, so the batch norm's inference form matters too.
        _ = network.forward(Self.images, mode: .training)
        let trained = network.layers
        let output = network.forward(Self.images, mode: .inference)
        let x = try #require(Self.layerByLayer(trained, input: Self.images).last)
        #expect(output.shape == x.shape)
        #expect(GradientCheck.relativeError(output.scalars, x.scalars.map(Double.init)) < 1e-5)
        // Twice in a row (the buffers are reused) and the same bits.
        #expect(network.forward(Self.images, mode: .inference) == output)
    }

    /// The same at the bit, with a route, an upsampling and an add as the network's outputs (no pool
    /// or linear layer after them to average a misplaced pixel away): the convolutions run alone,
    /// through the same code in both, so any difference is the buffers' doing.
    @Test func routesUpsamplingsAndAddsAtInferenceAreTheLayersBits() throws {
        let definition = ModelDefinition(
            input: InputSpecification(width: 8, height: 8, channels: 3),
            layers: [
                .conv2D(inputChannels: 3, outputChannels: 4, kernelSize: 3, stride: 2, padding: 1),  // 0: 4x4
                .upsample(factor: 2),  // 1: an output
                .route(source: 0),  // 2
                .conv2D(inputChannels: 4, outputChannels: 4, kernelSize: 1, stride: 1, padding: 0),  // 3
                .upsample(factor: 2),  // 4
                .add(source: 1),  // 5: an output
            ],
            classLabels: [], outputs: [1, 5])
        var network = try Network(definition: definition, seed: 12)
        let layers = network.layers
        let outputs = network.forwardOutputs(Self.images, mode: .inference)
        let expected = Self.layerByLayer(layers, input: Self.images)
        #expect(outputs.map(\.shape) == [[3, 4, 8, 8], [3, 4, 8, 8]])
        #expect(outputs[0] == expected[1] && outputs[1] == expected[5])
        #expect(outputs[1] != expected[4], "the add changed something")
    }

    @Test func deadBranchesAndBadRoutesAreRefused() {
        func message(_ change: (inout ModelDefinition) -> Void) -> String {
            var definition = Self.twoBranchDefinition()
            change(&definition)
            do {
                _ = try Network(definition: definition, seed: 1)
                return "accepted"
            } catch {
                return "\(error)"
            }
        }
        #expect(message { _ in }.contains("accepted"))
        // Branch A's output read by nobody once the add reads the trunk instead.
        let dead = message { $0.layers[6] = .add(source: 2) }
        #expect(dead.contains("layer 3 (conv2d): its output is never read: layer 4 routes past it"), "\(dead)")
        #expect(message { $0.layers[4] = .route(source: 4) }.contains("routes layer 4, which is not an earlier layer"))
        // After the linear layer the data is a vector: a route back to it is refused.
        let flattened = message {
            $0.layers += [.route(source: 11), .linear(inputFeatures: 3, outputFeatures: 3)]
        }
        #expect(flattened.contains("which is not a [C, H, W] feature map"), "\(flattened)")
        let factor = message { $0.layers[8] = .upsample(factor: 3) }
        #expect(factor.contains("upsamples by 3, but only factor 2 is supported"), "\(factor)")
        #expect(message { $0.outputs = [11, 11] }.contains("lists a layer twice"))
        #expect(message { $0.outputs = [12] }.contains("12 is not a layer index"))
        // An output list without the last layer leaves it unread.
        #expect(message { $0.outputs = [9] }.contains("layer 11 (linear): its output is never read"))
        var classifier = Self.twoBranchDefinition()
        classifier.outputs = [9, 11]
        #expect(
            throws: ModelDefinitionError.invalidOutputs(
                reason: "a classifier returns its last layer alone, but the definition lists [9, 11]")
        ) {
            try classifier.validate(as: .classifier)
        }
    }

    @Test func newKindsAndOutputsNeedFormatThreeAndOldDefinitionsKeepTheirBytes() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let old = BranchingTests.residualDefinition()
        let text = String(decoding: try encoder.encode(old), as: UTF8.self)
        #expect(!text.contains("outputs"))
        #expect(try JSONDecoder().decode(ModelDefinition.self, from: Data(text.utf8)) == old)
        #expect(old.minimumFormatVersion == 2)

        let detector = ModelDefinition.denseDetector()
        let detectorText = String(decoding: try encoder.encode(detector), as: UTF8.self)
        #expect(detectorText.contains(#""outputs":[51,56,61]"#), "\(detectorText.suffix(120))")
        #expect(
            detectorText.contains(#"{"route":{"source":16}}"#) && detectorText.contains(#"{"upsample":{"factor":2}}"#))
        #expect(try JSONDecoder().decode(ModelDefinition.self, from: Data(detectorText.utf8)) == detector)
        #expect(detector.minimumFormatVersion == 3)
        #expect(Self.twoBranchDefinition().minimumFormatVersion == 3)
        var listed = BranchingTests.residualDefinition()
        listed.outputs = [listed.layers.count - 1]
        #expect(listed.minimumFormatVersion == 3)
    }

    // MARK: - Several outputs

    /// A trunk and three heads: a strided conv (stride 2), a 1x1 conv after a route, and a
    /// pool + conv + upsample after another; outputs listed out of layer order.
    static let threeHeadLayers: [LayerSpecification] = [
        .conv2D(inputChannels: 3, outputChannels: 4, kernelSize: 3, stride: 1, padding: 1),  // 0
        .batchNorm2D(channels: 4, epsilon: 1e-5, momentum: 0.1),
        .relu,  // 2: the trunk
        .conv2D(inputChannels: 4, outputChannels: 6, kernelSize: 3, stride: 2, padding: 1),  // 3: head A
        .route(source: 2),
        .conv2D(inputChannels: 4, outputChannels: 5, kernelSize: 1, stride: 1, padding: 0),  // 5: head B
        .route(source: 2),
        .maxPool2D(size: 2, stride: 2),
        .conv2D(inputChannels: 4, outputChannels: 3, kernelSize: 3, stride: 1, padding: 1),
        .upsample(factor: 2),  // 9: head C
    ]
    static let threeHeadOutputs = [9, 3, 5]

    static func threeHeadDefinition(height: Int = 8, width: Int = 8) -> ModelDefinition {
        ModelDefinition(
            input: InputSpecification(width: width, height: height, channels: 3), layers: threeHeadLayers,
            classLabels: [], outputs: threeHeadOutputs)
    }

    /// Head C, A and B each as a chain of its own: the trunk, then the head's layers.
    static func chains() -> [(layers: [Int], definition: ModelDefinition)] {
        [[0, 1, 2, 7, 8, 9], [0, 1, 2, 3], [0, 1, 2, 5]].map { indices in
            (
                indices,
                ModelDefinition(
                    input: InputSpecification(width: 8, height: 8, channels: 3),
                    layers: indices.map { threeHeadLayers[$0] }, classLabels: [])
            )
        }
    }

    /// The three outputs and every gradient equal the three chains' (same weights), the trunk's
    /// gradient being the sum of the chains'.
    @Test func threeOutputsEqualThreeChains() throws {
        var network = try Self.perturbed(Self.threeHeadDefinition(), seed: 8)
        let outputs = network.forwardOutputs(Self.images, mode: .training)
        #expect(outputs.map(\.shape) == [[3, 3, 8, 8], [3, 6, 4, 4], [3, 5, 8, 8]])
        let gradients = outputs.enumerated().map { TestData.normal($0.element.shape, seed: 70 + UInt64($0.offset)) }
        network.zeroGradients()
        network.backward(outputGradients: gradients)

        var expected: [String: [Double]] = [:]
        for (chain, (indices, definition)) in Self.chains().enumerated() {
            var single = try Network(
                definition: definition,
                weights: indices.map { index in
                    var weights = network.weights[index]
                    weights.name = definition.layerNames[indices.firstIndex(of: index)!]
                    return weights
                })
            let output = single.forward(Self.images, mode: .training)
            #expect(
                GradientCheck.relativeError(outputs[chain].scalars, output.scalars.map(Double.init)) < 1e-5,
                "output \(chain)")
            single.zeroGradients()
            single.backward(gradients[chain])
            for (position, index) in indices.enumerated() {
                for parameter in single.layers[position].parameters where parameter.isTrainable {
                    let key = "\(network.layerNames[index]).\(parameter.name)"
                    let sum = zip(
                        expected[key] ?? [Double](repeating: 0, count: parameter.gradient.count),
                        parameter.gradient.scalars
                    ).map { $0 + Double($1) }
                    expected[key] = sum
                }
            }
        }
        var checked = 0
        network.updateParameters { key, parameter in
            guard parameter.isTrainable, let sum = expected[key] else { return }
            checked += 1
            if key == "0.conv2d.bias" {
                // Cancelled by the batch norm: zero up to rounding in both.
                #expect(parameter.gradient.scalars.allSatisfy { abs($0) < 1e-4 } && sum.allSatisfy { abs($0) < 1e-4 })
            } else {
                #expect(GradientCheck.relativeError(parameter.gradient.scalars, sum) < 1e-4, "\(key)")
            }
        }
        #expect(checked == 10)
    }

    /// `backward(outputGradients:)` against finite differences of Σ_k outputs_k · probe_k.
    @Test func threeOutputGradientsMatchFiniteDifferences() throws {
        let network = try Self.perturbed(Self.threeHeadDefinition(), seed: 9)
        var probing = network
        let outputs = probing.forwardOutputs(Self.images, mode: .training)
        let probes = outputs.enumerated().map { TestData.normal($0.element.shape, seed: 80 + UInt64($0.offset)) }
        probing.zeroGradients()
        probing.backward(outputGradients: probes)
        func loss(_ network: Network) -> Double {
            var copy = network
            let outputs = copy.forwardOutputs(Self.images, mode: .training)
            return zip(outputs, probes).reduce(0) { total, pair in
                zip(pair.0.scalars, pair.1.scalars).reduce(total) { $0 + Double($1.0) * Double($1.1) }
            }
        }
        var analytic: [(key: String, gradient: [Float])] = []
        probing.updateParameters { key, parameter in
            if parameter.isTrainable, key != "0.conv2d.bias" { analytic.append((key, parameter.gradient.scalars)) }
        }
        let step: Float = 1e-3
        for (key, gradient) in analytic {
            let numeric = gradient.indices.map { index in
                func shifted(_ delta: Float) -> Network {
                    var copy = network
                    copy.updateParameters { name, parameter in
                        if name == key { parameter.value.scalars[index] += delta }
                    }
                    return copy
                }
                return (loss(shifted(step)) - loss(shifted(-step))) / Double(2 * step)
            }
            #expect(GradientCheck.relativeError(gradient, numeric) < 2e-2, "\(key)")
        }
        #expect(analytic.count == 9)
    }

    // MARK: - Any size

    @Test func fullyConvolutionalNetworksRunAtAnyMultipleOfTheirStride() throws {
        let definition = Self.threeHeadDefinition()
        #expect(definition.totalStride == 2)
        var network = try Self.perturbed(definition, seed: 10)
        let large = TestData.normal([2, 3, 12, 16], seed: 62)
        try network.validateAnySize(large)
        let outputs = network.forwardOutputs(large, mode: .inference)
        #expect(outputs.map(\.shape) == [[2, 3, 12, 16], [2, 6, 6, 8], [2, 5, 12, 16]])
        // The same weights in a definition made for that size: the same numbers.
        var sized = try Network(
            definition: Self.threeHeadDefinition(height: 12, width: 16), weights: network.weights)
        let reference = sized.forwardOutputs(large, mode: .inference)
        for (output, expected) in zip(outputs, reference) { #expect(output == expected) }
        // Back at the definition's size after a larger call: the fixed-size path's numbers.
        var fresh = network
        let small = TestData.normal([2, 3, 8, 8], seed: 63)
        let again = network.forwardOutputs(small, mode: .inference)
        var untouched = try Network(definition: definition, weights: fresh.weights)
        try untouched.validate(small)
        #expect(again == untouched.forwardOutputs(small, mode: .inference))
        #expect(fresh.forward(small, mode: .inference) == again[0])

        func refusal(_ shape: [Int]) -> String {
            do {
                try network.validateAnySize(Tensor(zeros: shape))
                return "accepted"
            } catch {
                return "\(error)"
            }
        }
        #expect(refusal([1, 3, 9, 8]).contains("H and W multiples of 2 (the network's total stride)"))
        #expect(refusal([1, 1, 8, 8]).contains("expected [N, 3, H, W]"))
        #expect(refusal([1, 3, 8, 8]) == "accepted")
        // After a global pool the linear layer's width is the same at any size; straight after a
        // feature map it is not.
        let pooled = try Network(definition: Self.twoBranchDefinition(), seed: 1)
        #expect(pooled.definition.totalStride == 2)
        try pooled.validateAnySize(Tensor(zeros: [1, 3, 16, 16]))
        let flat = try Network(
            definition: ModelDefinition(
                input: InputSpecification(width: 8, height: 8, channels: 3),
                layers: [
                    .conv2D(inputChannels: 3, outputChannels: 2, kernelSize: 3, stride: 2, padding: 1),
                    .linear(inputFeatures: 32, outputFeatures: 3),
                ],
                classLabels: ["1", "2", "3"]),
            seed: 1)
        try flat.validateAnySize(Tensor(zeros: [1, 3, 8, 8]))
        do {
            try flat.validateAnySize(Tensor(zeros: [1, 3, 16, 16]))
            Issue.record("a linear layer on a 2x8x8 map of a definition made for 2x4x4 was accepted")
        } catch {
            #expect("\(error)".contains("at that size, layer 1 (linear)"), "\(error)")
        }
    }

    // MARK: - det-dense

    /// The design's figures (docs/design/detector.md 3.3): 170,317 trainable parameters and
    /// 1,185 MFLOP at 640x640 (296 at 320), counted here from the built network and the kinds'
    /// FLOP rule; three 15-channel outputs at strides 8, 16, 32.
    @Test func denseDetectorHasTheDesignedSizeAndOutputs() throws {
        let definition = ModelDefinition.denseDetector(inputSize: 640)
        try definition.validate(as: .extractor)
        #expect(definition.totalStride == 32)
        let network = try Network(definition: definition, seed: 1)
        #expect(network.trainableParameterCount == 170_317)
        let flops = try FLOPCount(definition: definition).forwardPerImage
        #expect(abs(flops / 1e6 - 1185) < 1, "\(flops / 1e6) MFLOP")
        let small = try FLOPCount(definition: ModelDefinition.denseDetector()).forwardPerImage
        #expect(abs(small / 1e6 - 296) < 1, "\(small / 1e6) MFLOP")
        let shapes = try definition.layerOutputShapes()
        #expect(definition.outputLayers.map { shapes[$0] } == [[15, 80, 80], [15, 40, 40], [15, 20, 20]])
        print(
            "det-dense: \(network.trainableParameterCount) parameters, "
                + "\(String(format: "%.1f", flops / 1e6)) MFLOP at 640x640, \(String(format: "%.1f", small / 1e6)) at 320x320"
        )
    }

    /// det-dense trains and runs at a size other than its definition's.
    @Test func denseDetectorRunsForwardAndBackwardAtAnySize() throws {
        var network = try Network(definition: ModelDefinition.denseDetector(inputSize: 64), seed: 2)
        let images = TestData.normal([2, 3, 64, 64], seed: 64)
        let outputs = network.forwardOutputs(images, mode: .training)
        #expect(outputs.map(\.shape) == [[2, 15, 8, 8], [2, 15, 4, 4], [2, 15, 2, 2]])
        network.zeroGradients()
        network.backward(outputGradients: outputs.map { Tensor(repeating: 1e-2, shape: $0.shape) })
        var finite = true
        network.updateParameters { _, parameter in finite = finite && parameter.gradient.scalars.allSatisfy(\.isFinite)
        }
        #expect(finite)
        let photo = TestData.normal([1, 3, 96, 128], seed: 65)
        try network.validateAnySize(photo)
        #expect(
            network.forwardOutputs(photo, mode: .inference).map(\.shape) == [
                [1, 15, 12, 16], [1, 15, 6, 8], [1, 15, 3, 4],
            ])
        #expect(throws: NetworkError.self) { try network.validateAnySize(TestData.normal([1, 3, 80, 64], seed: 66)) }
    }
}
