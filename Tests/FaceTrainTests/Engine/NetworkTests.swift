import Foundation
import Testing

@testable import FaceTrain
@testable import FaceTrainEngine

@Suite struct NetworkTests {
    static let images = TestData.normal([4, 3, 8, 8], seed: 31)
    static let labels = [0, 2, 1, 2]

    static func loss(_ network: inout Network) -> Double {
        let logits = network.forward(images, mode: .training)
        return Double(SoftmaxCrossEntropy(labelSmoothing: 0.1).lossAndGradient(logits: logits, labels: labels).loss)
    }

    /// Gradients of the fused network (conv blocks with max-pool, plain ReLU and global average
    /// pool) against central differences of the whole loss, through the shared error measure.
    @Test(arguments: [false, true]) func fusedNetworkGradientsMatchFiniteDifferences(neck: Bool) throws {
        var network = try Network(definition: TestData.tinyDefinition(neck: neck), seed: 3)
        let logits = network.forward(Self.images, mode: .training)
        let (_, gradient) = SoftmaxCrossEntropy(labelSmoothing: 0.1).lossAndGradient(
            logits: logits, labels: Self.labels)
        network.backward(gradient)
        let analytic = network.layers.flatMap { $0.parameters.filter(\.isTrainable) }
        #expect(analytic.count == (neck ? 16 : 14))
        var parameterIndex = 0
        // A smaller step than the per-layer checks: the whole network has many ReLU and max-pool
        // kinks a 1e-2 weight change can cross; Float noise at 1e-3 is still ~1e-3 relative.
        let step: Float = 1e-3
        // With the neck, the batch norm over 4 pooled vectors cancels most of what a block parameter
        // does (a channel's shift or scale), so those gradients are ~0 and a finite difference only
        // measures Float noise; the blocks are checked without the neck, the neck and classifier here.
        let firstChecked = neck ? network.definition.layers.firstIndex(of: .globalAveragePool)! + 1 : 0
        for layerIndex in network.layers.indices {
            for (position, parameter) in network.layers[layerIndex].parameters.enumerated() where parameter.isTrainable
            {
                let sampled = Array(stride(from: 0, to: parameter.value.count, by: 3))
                var numeric: [Double] = []
                for index in sampled {
                    func shifted(_ delta: Float) -> Double {
                        var copy = network
                        var layer = copy.layers[layerIndex]
                        var current = 0
                        layer.updateParameters { p in
                            if current == position { p.value.scalars[index] += delta }
                            current += 1
                        }
                        var weights = copy.weights
                        weights[layerIndex] = LayerWeights(
                            name: weights[layerIndex].name,
                            tensors: layer.parameters.map { NamedTensor(name: $0.name, tensor: $0.value) })
                        try? copy.load(weights)
                        return Self.loss(&copy)
                    }
                    numeric.append((shifted(step) - shifted(-step)) / Double(2 * step))
                }
                let values = sampled.map { analytic[parameterIndex].gradient.scalars[$0] }
                let error = GradientCheck.relativeError(values, numeric)
                // A convolution's bias just before a batch norm (training mode) has a gradient of
                // exactly zero: the norm subtracts it again. A relative error there only compares
                // Float noise (it reached 6e-2 with OpenBLAS's AVX-512 kernel), so check it is zero.
                let cancelled =
                    parameter.name == "bias" && layerIndex + 1 < network.definition.layers.count
                    && network.definition.layers[layerIndex + 1].kind == .batchNorm2D
                if cancelled {
                    #expect(values.allSatisfy { abs($0) < 1e-4 } && numeric.allSatisfy { abs($0) < 1e-3 })
                } else {
                    #expect(
                        layerIndex < firstChecked || error < 2e-2,
                        "\(network.layerNames[layerIndex]).\(parameter.name): \(error)")
                }
                parameterIndex += 1
            }
        }
    }

    /// The fused stages give the same logits and gradients as running the public layers one by one.
    @Test(arguments: [false, true]) func fusedStagesMatchLayerByLayer(neck: Bool) throws {
        var network = try Network(definition: TestData.tinyDefinition(neck: neck), seed: 4)
        var layers = network.layers
        let logits = network.forward(Self.images, mode: .training)
        var x = Self.images
        for index in layers.indices { x = layers[index].forward(x, mode: .training) }
        #expect(GradientCheck.relativeError(logits.scalars, x.scalars.map(Double.init)) < 1e-5)

        let gradient = SoftmaxCrossEntropy().lossAndGradient(logits: logits, labels: Self.labels).logitsGradient
        network.backward(gradient)
        var dx = gradient
        for index in layers.indices.reversed() { dx = layers[index].backward(dx) }
        // Two code paths, so two summation orders (and, across OpenBLAS kernels, FMA or not): a
        // gradient may differ by the rounding of its reductions, at most n·ε of the magnitudes
        // summed, with n = 4·8·8 = 256 terms per channel here and ε = 6e-8 (float32), so 1.5e-5.
        // Where the true gradient is ~0 (a conv bias in front of batch norm, which subtracts the
        // channel mean; the blocks behind the neck, see above) that rounding is all there is, and
        // its size relative to itself means nothing: it was 1.1e-4 with OpenBLAS's Prescott kernel.
        // So each gradient is close relative to itself or, failing that, relative to the largest.
        let largest = network.layers.flatMap(\.parameters).map { parameter in
            parameter.gradient.scalars.reduce(0) { $0 + Double($1) * Double($1) }.squareRoot()
        }.max()!
        for (fused, plain) in zip(network.layers, layers) {
            for (a, b) in zip(fused.parameters, plain.parameters) {
                let difference = zip(a.gradient.scalars, b.gradient.scalars).reduce(0) {
                    $0 + Double($1.0 - $1.1) * Double($1.0 - $1.1)
                }.squareRoot()
                let relative = GradientCheck.relativeError(a.gradient.scalars, b.gradient.scalars.map(Double.init))
                #expect(
                    relative < 1e-4 || difference < 1.5e-5 * largest,
                    "\(a.name): \(relative) of itself, \(difference / largest) of the largest gradient")
                #expect(GradientCheck.relativeError(a.value.scalars, b.value.scalars.map(Double.init)) < 1e-6)
            }
        }
        // Inference too (running statistics instead of batch statistics).
        let inferred = network.forward(Self.images, mode: .inference)
        var y = Self.images
        for index in layers.indices { y = layers[index].forward(y, mode: .inference) }
        #expect(GradientCheck.relativeError(inferred.scalars, y.scalars.map(Double.init)) < 1e-5)
    }

    @Test func parameterNamesAndShapesFollowTheDefinition() throws {
        let definition = ModelDefinition.referenceSmall(classLabels: (0..<42).map(String.init))
        let network = try Network(definition: definition, seed: 1)
        // 103,338 as the PyTorch ref-small of perf-anchors.md, plus γ and β of the embedding's batch norm.
        #expect(network.trainableParameterCount == 103_338 + 2 * 128)
        for (weights, specification) in zip(network.weights, definition.layers) {
            #expect(weights.tensors.map(\.name) == specification.parameterShapes.map(\.name))
            #expect(weights.tensors.map(\.tensor.shape) == specification.parameterShapes.map(\.shape))
        }
        #expect(network.weights.map(\.name) == definition.layerNames)
        #expect(network.description.contains("4.conv2d"))
    }

    @Test func weightsRoundTrip() throws {
        let definition = TestData.tinyDefinition()
        var original = try Network(definition: definition, seed: 5)
        var trainer = Trainer(network: original, optimizer: SGD(), learningRate: 0.1)
        try trainer.trainStep(images: Self.images, labels: Self.labels)
        original = trainer.network
        var restored = try Network(definition: definition, weights: original.weights)
        #expect(restored.weights == original.weights)
        #expect(restored.forward(Self.images, mode: .inference) == original.forward(Self.images, mode: .inference))
        var fromModel = try Network(model: original.trainedModel)
        #expect(fromModel.forward(Self.images, mode: .inference) == original.forward(Self.images, mode: .inference))
    }

    @Test func mismatchedWeightsAreRejected() throws {
        let network = try Network(definition: TestData.tinyDefinition(), seed: 5)
        var weights = network.weights
        weights[0].tensors[0].tensor = Tensor(zeros: [4, 3, 5, 5])
        #expect(throws: NetworkError.self) { try Network(definition: TestData.tinyDefinition(), weights: weights) }
        #expect(throws: NetworkError.self) {
            try Network(definition: TestData.tinyDefinition(classes: 4), weights: network.weights)
        }
        do {
            _ = try Network(definition: TestData.tinyDefinition(), weights: Array(network.weights.dropLast()))
            Issue.record("expected an error")
        } catch {
            #expect("\(error)".contains("HINT"))
        }
    }

    @Test func invalidDefinitionsAreRejected() {
        var definition = TestData.tinyDefinition()
        definition.layers[4] = .conv2D(inputChannels: 5, outputChannels: 6, kernelSize: 3, stride: 1, padding: 1)
        let problem = ModelDefinitionError.invalidLayer(
            index: 4, kind: .conv2D, reason: "it expects 5 channels but gets 4")
        #expect(throws: problem) { try Network(definition: definition, seed: 1) }
    }

    @Test func probabilitiesAndEmbeddings() throws {
        var network = try Network(definition: TestData.tinyDefinition(), seed: 6)
        let probabilities = try network.probabilities(for: Self.images)
        #expect(probabilities.shape == [4, 3])
        for row in 0..<4 {
            let total = probabilities.scalars[(row * 3)..<(row * 3 + 3)].reduce(0, +)
            #expect(abs(total - 1) < 1e-5)
        }
        let embeddings = try network.embeddings(for: Self.images)
        #expect(embeddings.shape == [4, 8])
        // The embedding is the input of the final Linear layer.
        var linear = network.layers.last!
        let logits = linear.forward(embeddings, mode: .inference)
        #expect(logits == network.forward(Self.images, mode: .inference))
        #expect(throws: NetworkError.self) { try network.embeddings(for: Tensor(zeros: [1, 1, 8, 8])) }
    }

    /// With a batch-norm neck the embedding is the neck's output: what the L2 normalisation and the
    /// classifier see, not the raw pooled features.
    @Test func embeddingsAreTheNeckOutput() throws {
        var network = try Network(definition: TestData.tinyDefinition(neck: true), seed: 7)
        _ = network.forward(Self.images, mode: .training)  // running statistics away from 0 and 1
        let embeddings = try network.embeddings(for: Self.images)
        var layers = network.layers
        var x = Self.images
        for index in 0..<(layers.count - 2) { x = layers[index].forward(x, mode: .inference) }
        #expect(embeddings.shape == [4, 8])
        #expect(GradientCheck.relativeError(embeddings.scalars, x.scalars.map(Double.init)) < 1e-6)
        var tail = Array(layers.suffix(2))
        var logits = embeddings
        for index in tail.indices { logits = tail[index].forward(logits, mode: .inference) }
        #expect(
            GradientCheck.relativeError(
                logits.scalars, network.forward(Self.images, mode: .inference).scalars.map(Double.init)) < 1e-5)
    }

    @Test func copiesDoNotShareBuffers() throws {
        var network = try Network(definition: TestData.tinyDefinition(), seed: 7)
        let first = network.forward(Self.images, mode: .inference)
        var copy = network
        _ = copy.forward(TestData.normal([2, 3, 8, 8], seed: 99), mode: .inference)
        #expect(network.forward(Self.images, mode: .inference) == first)
    }

    /// A network whose input has a crop is the network without it on the centre of each image:
    /// outputs, embeddings and (the crop is before the first layer) parameter gradients.
    @Test func aCroppedInputIsTheNetworkOnTheCentre() throws {
        let plain = TestData.tinyDefinition(neck: true)
        var cropped = plain
        cropped.input = plain.input.cropping(2)
        #expect(cropped.input.width == 12 && cropped.input.height == 12 && cropped.input.networkWidth == 8)
        let whole = TestData.normal([4, 3, 12, 12], seed: 5)
        // The centre, by hand: rows and columns 2..<10 of every plane.
        var centre = Tensor(zeros: [4, 3, 8, 8])
        for plane in 0..<12 {
            for y in 0..<8 {
                for x in 0..<8 {
                    centre.scalars[(plane * 8 + y) * 8 + x] = whole.scalars[(plane * 12 + y + 2) * 12 + x + 2]
                }
            }
        }
        var reference = try Network(definition: plain, seed: 9)
        var network = try Network(definition: cropped, weights: reference.weights)
        #expect(network.forward(whole, mode: .inference).scalars == reference.forward(centre, mode: .inference).scalars)
        #expect(try network.embeddings(for: whole).scalars == reference.embeddings(for: centre).scalars)
        #expect(throws: NetworkError.self) { try network.embeddings(for: centre) }
        for (net, images) in [(0, whole), (1, centre)] {
            var current = net == 0 ? network : reference
            let logits = current.forward(images, mode: .training)
            let (_, gradient) = SoftmaxCrossEntropy(labelSmoothing: 0).lossAndGradient(
                logits: logits, labels: Self.labels)
            current.zeroGradients()
            current.backward(gradient)
            if net == 0 { network = current } else { reference = current }
        }
        let gradients = network.layers.flatMap { $0.parameters.map(\.gradient.scalars) }
        #expect(gradients == reference.layers.flatMap { $0.parameters.map(\.gradient.scalars) })
        #expect(gradients.contains { $0.contains { $0 != 0 } })
    }
}
