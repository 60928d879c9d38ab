import FaceTrainTestSupport
import Foundation
import Testing

@testable import FaceTrain
@testable import FaceTrainEngine

/// Exports real-sized models and hands both files to Tests/Scripts/check_exports.py, which loads
/// them with onnx/onnxruntime and coremltools, checks their structure and metadata, runs them on
/// real face crops (onnxruntime, and a numpy evaluation of the Core ML spec) and compares the
/// probabilities with this file's double-precision forward pass.
@Suite(.enabled(if: PythonChecker.shouldRun))
struct ExportConsumerTests {
    static let metadata = ExportMetadata(
        version: 3, shortDescription: "Office door face classifier", author: "facetrain tests",
        license: "Proprietary", manifestSHA256: String(repeating: "ab", count: 32), acceptThreshold: 0.62,
        dataFingerprint: "sha256:0123456789abcdef")

    /// What `metadata` must put into Core ML `userDefined` (and ONNX `metadata_props`), written out by hand.
    static let expectedUserDefined = [
        "facetrain_version": FaceTrainVersion.string,
        "manifest_sha256": String(repeating: "ab", count: 32),
        "accept_threshold": "0.62",
        "data_fingerprint": "sha256:0123456789abcdef",
    ]

    /// ref-small (at width 8, to keep the double-precision oracle quick) on 24 CS131 RGB crops.
    @Test func referenceSmallRGBExportsMatchOnCelebrityCrops() throws {
        let crops = try Self.celebrityCrops(count: 24)
        let people = try Self.celebrityNames()
        // Labels include characters that need JSON escaping and non-ASCII text.
        let labels = ["1", "2"] + people + ["Zoë Ångström", "O\"Brien \\ 17"]
        let model = TrainedModel.seeded(
            .referenceSmall(classLabels: labels, inputSize: 64, channels: 3, width: 8), seed: 42)
        let result = try Self.exportAndCheck(model, crops: crops)
        #expect(result.status == 0, "check_exports.py failed:\n\(result.output)")
    }

    /// A grey, non-square network with a strided, padded 5x5 convolution, a 3x3/2 pooling, dropout
    /// and a flatten of a 6x5 map into two linear layers, on 20 ORL crops (40 classes).
    @Test func grayscaleNetworkExportsMatchOnORLCrops() throws {
        let crops = try Self.orlCrops(count: 20)
        let labels = (1...40).map { String(format: "s%02d", $0) }
        let definition = ModelDefinition(
            input: InputSpecification(width: 46, height: 56, channels: 1, scale: 1 / 255, bias: [-0.5]),
            layers: [
                .conv2D(inputChannels: 1, outputChannels: 8, kernelSize: 3, stride: 1, padding: 1),
                .batchNorm2D(channels: 8, epsilon: 1e-5, momentum: 0.1),
                .relu,
                .maxPool2D(size: 2, stride: 2),
                .conv2D(inputChannels: 8, outputChannels: 16, kernelSize: 5, stride: 2, padding: 2),
                .batchNorm2D(channels: 16, epsilon: 1e-3, momentum: 0.1),
                .relu,
                .dropout(rate: 0.3),
                .maxPool2D(size: 3, stride: 2),
                .linear(inputFeatures: 16 * 6 * 5, outputFeatures: 32),
                .relu,
                .dropout(rate: 0.5),
                .linear(inputFeatures: 32, outputFeatures: labels.count),
            ],
            classLabels: labels)
        let model = TrainedModel.seeded(definition, seed: 7)
        let result = try Self.exportAndCheck(model, crops: crops)
        #expect(result.status == 0, "check_exports.py failed:\n\(result.output)")
    }

    /// A branching network on 16 CS131 crops: depthwise convolutions (multipliers 1 and 2), a grouped
    /// 1x1 convolution, PReLU on images and on pooled features, and a residual add that reads a
    /// PReLU's output, exported as Core ML `add` + `nGroups` + PReLU and ONNX `Add` + `group` + `PRelu`.
    @Test func branchingNetworkExportsMatchOnCelebrityCrops() throws {
        let crops = try Self.celebrityCrops(count: 16)
        let labels = ["1", "2"] + (3...12).map(String.init)
        let definition = ModelDefinition(
            input: InputSpecification(width: 64, height: 64, channels: 3),
            layers: [
                .conv2D(inputChannels: 3, outputChannels: 8, kernelSize: 3, stride: 2, padding: 1),
                .batchNorm2D(channels: 8, epsilon: 1e-5, momentum: 0.1),
                .relu,
                .conv2D(inputChannels: 8, outputChannels: 8, kernelSize: 3, stride: 1, padding: 1, groups: 8),
                .batchNorm2D(channels: 8, epsilon: 1e-5, momentum: 0.1),
                .prelu(channels: 8),  // 5: the residual block's input
                .conv2D(inputChannels: 8, outputChannels: 16, kernelSize: 1, stride: 1, padding: 0),
                .batchNorm2D(channels: 16, epsilon: 1e-5, momentum: 0.1),
                .relu,
                .conv2D(inputChannels: 16, outputChannels: 16, kernelSize: 3, stride: 1, padding: 1, groups: 16),
                .batchNorm2D(channels: 16, epsilon: 1e-5, momentum: 0.1),
                .relu,
                .conv2D(inputChannels: 16, outputChannels: 8, kernelSize: 1, stride: 1, padding: 0, groups: 2),
                .batchNorm2D(channels: 8, epsilon: 1e-5, momentum: 0.1),
                .add(source: 5),
                .conv2D(inputChannels: 8, outputChannels: 16, kernelSize: 3, stride: 2, padding: 1, groups: 8),
                .batchNorm2D(channels: 16, epsilon: 1e-5, momentum: 0.1),
                .relu,
                .maxPool2D(size: 2, stride: 2),
                .conv2D(inputChannels: 16, outputChannels: 32, kernelSize: 3, stride: 1, padding: 1),
                .batchNorm2D(channels: 32, epsilon: 1e-5, momentum: 0.1),
                .relu,
                .globalAveragePool,
                .prelu(channels: 32),  // on the pooled [32, 1, 1] features
                .batchNorm2D(channels: 32, epsilon: 1e-5, momentum: 0.1),
                .l2Normalize(scale: 16),
                .linear(inputFeatures: 32, outputFeatures: labels.count),
            ],
            classLabels: labels)
        let model = TrainedModel.seeded(definition, seed: 17)
        // The engine itself agrees with the oracle the files are compared against.
        var network = try Network(model: model)
        for crop in crops.prefix(4) {
            let pixels = crop.pixels
            var image = Tensor(zeros: [1, 3, 64, 64])
            for c in 0..<3 {
                for index in 0..<(64 * 64) {
                    image.scalars[c * 4096 + index] = Float(pixels[index * 3 + c]) / 127.5 - 1
                }
            }
            let engine = try network.probabilities(for: image).scalars
            let oracle = ReferenceForwardPass.probabilities(model, pixels: pixels)
            #expect(zip(engine, oracle).allSatisfy { abs(Double($0) - $1) < 1e-5 }, "\(crop.name)")
        }
        let result = try Self.exportAndCheck(model, crops: crops)
        #expect(result.status == 0, "check_exports.py failed:\n\(result.output)")
    }

    /// A small feature pyramid on 8 CS131 crops: a pooled branch upsampled x2 and added to the
    /// stem, then two branches split by a route and joined by an add. Exported as ONNX `Resize` and
    /// `Identity` (reading the routed layer's blob, not the previous one), Core ML `upsample` and a
    /// linear activation.
    @Test func pyramidNetworkExportsMatchOnCelebrityCrops() throws {
        let crops = try Self.celebrityCrops(count: 8)
        let labels = ["1", "2"] + (3...8).map(String.init)
        let definition = ModelDefinition(
            input: InputSpecification(width: 64, height: 64, channels: 3),
            layers: [
                .conv2D(inputChannels: 3, outputChannels: 8, kernelSize: 3, stride: 2, padding: 1),
                .batchNorm2D(channels: 8, epsilon: 1e-5, momentum: 0.1),
                .relu,  // 2: the stem, 32x32
                .maxPool2D(size: 2, stride: 2),
                .conv2D(inputChannels: 8, outputChannels: 8, kernelSize: 3, stride: 1, padding: 1),
                .batchNorm2D(channels: 8, epsilon: 1e-5, momentum: 0.1),
                .relu,
                .upsample(factor: 2),
                .add(source: 2),  // 8
                .conv2D(inputChannels: 8, outputChannels: 8, kernelSize: 1, stride: 1, padding: 0),  // 9: branch A
                .route(source: 8),  // 10: branch B starts again from layer 8
                .conv2D(inputChannels: 8, outputChannels: 8, kernelSize: 3, stride: 1, padding: 1),
                .add(source: 9),
                .globalAveragePool,
                .linear(inputFeatures: 8, outputFeatures: labels.count),
            ],
            classLabels: labels)
        let model = TrainedModel.seeded(definition, seed: 29)
        let plan = try ExportPlan(model: model, naming: .product)
        let route = try #require(plan.steps.first { $0.name == "10.route" })
        #expect(route.inputs == ["8.add_out"] && route.operation.onnxNode.operatorName == "Identity")
        var network = try Network(model: model)
        for crop in crops.prefix(4) {
            var image = Tensor(zeros: [1, 3, 64, 64])
            for c in 0..<3 {
                for index in 0..<(64 * 64) {
                    image.scalars[c * 4096 + index] = Float(crop.pixels[index * 3 + c]) / 127.5 - 1
                }
            }
            let engine = try network.probabilities(for: image).scalars
            let oracle = ReferenceForwardPass.probabilities(model, pixels: crop.pixels)
            #expect(zip(engine, oracle).allSatisfy { abs(Double($0) - $1) < 1e-5 }, "\(crop.name)")
        }
        let result = try Self.exportAndCheck(model, crops: crops)
        #expect(result.status == 0, "check_exports.py failed:\n\(result.output)")
    }

    /// Every named architecture (at width 4, to keep the double-precision oracle quick) exports
    /// files that onnxruntime and the numpy Core ML evaluation run as facetrain does.
    @Test(arguments: ModelDefinition.extractorArchitectures)
    func namedArchitecturesExportAndMatch(name: String) throws {
        let crops = try Self.celebrityCrops(count: 8)
        let definition = try ModelDefinition.architecture(named: name).classifier(
            classLabels: ["1", "2", "3", "4", "5"], inputSize: 64, width: 4)
        let result = try Self.exportAndCheck(TrainedModel.seeded(definition, seed: 23), crops: crops)
        #expect(result.status == 0, "\(name): check_exports.py failed:\n\(result.output)")
    }

    /// A base's input crop (the builtin base's architecture at width 4, its 48-px network seeing the
    /// centre of 64-px crops) exports as Core ML `crop` and ONNX `Slice` before the first layer, and
    /// both files give what facetrain gives.
    @Test func croppedInputExportsMatchOnCelebrityCrops() throws {
        let crops = try Self.celebrityCrops(count: 8)
        var definition = try ModelDefinition.architecture(named: "ref-deep-gdc").classifier(
            classLabels: ["1", "2", "3", "4", "5"], inputSize: 48, width: 4)
        definition.input = definition.input.cropping(8)
        #expect(definition.input.width == 64 && definition.minimumFormatVersion == 2)
        let model = TrainedModel.seeded(definition, seed: 29)
        let result = try Self.exportAndCheck(model, crops: crops)
        #expect(result.status == 0, "check_exports.py failed:\n\(result.output)")
        // The crop is in both files, and the numbers are facetrain's own network's.
        let coreML = try CoreMLExporter.encode(model, metadata: Self.metadata)
        let onnx = try ONNXExporter.encode(model, metadata: Self.metadata)
        #expect(coreML.range(of: Data("crop_out".utf8)) != nil && onnx.range(of: Data("Slice".utf8)) != nil)
        var network = try Network(model: model)
        for crop in crops.prefix(2) {
            var images = Tensor(zeros: [1, 3, 64, 64])
            images.scalars.withUnsafeMutableBufferPointer {
                ImageTensor.write(
                    Image(width: 64, height: 64, channels: 3, pixels: crop.pixels), input: definition.input,
                    to: $0.baseAddress!)
            }
            let engine = try network.probabilities(for: images).scalars.map(Double.init)
            let reference = ReferenceForwardPass.probabilities(model, pixels: crop.pixels)
            #expect(zip(engine, reference).allSatisfy { abs($0 - $1) < 1e-4 }, "\(crop.name)")
        }
    }

    /// The checker is not vacuous: expectations that do not belong to the images make it fail.
    @Test func checkerRejectsWrongExpectations() throws {
        let crops = try Self.celebrityCrops(count: 3)
        let labels = ["1", "2", "3", "4", "5"]
        let model = TrainedModel.seeded(
            .referenceSmall(classLabels: labels, inputSize: 64, channels: 3, width: 4), seed: 3)
        let result = try Self.exportAndCheck(model, crops: crops) { cases in
            // Each image's expected probabilities are moved by 0.01 (an untrained network with a normalised
            // embedding gives nearly the same output for every crop, so swapping crops would not show),
            // and the label list is reordered.
            for index in cases.cases.indices {
                cases.cases[index].probabilities[0] += 0.01
                cases.cases[index].probabilities[1] -= 0.01
            }
            cases.labels.swapAt(0, 1)
        }
        #expect(result.status == 1, "the checker should fail:\n\(result.output)")
        #expect(result.output.contains("probabilities differ"))
        #expect(result.output.contains("class_labels"))
        #expect(result.output.contains("stringClassLabels"))
    }

    /// The checker catches what Apple's validator misses: duplicate layer names, and a label list
    /// that is shorter than the softmax.
    @Test func checkerCatchesDuplicateLayerNamesAndLabelCountMismatch() throws {
        let crops = try Self.celebrityCrops(count: 2)
        let model = TrainedModel.seeded(
            .referenceSmall(classLabels: ["1", "2", "3", "4"], inputSize: 64, channels: 3, width: 4), seed: 9)

        // "4.conv2d" and "0.conv2d" have the same length, so renaming keeps every message length.
        let renamed = try Self.exportAndCheck(
            model, crops: crops,
            tamperFiles: { coreML, _ in
                var bytes = [UInt8](try Data(contentsOf: coreML))
                let field = [UInt8]([0x0A, 0x08]) + Array("4.conv2d".utf8)
                let start = try #require(
                    bytes.indices.dropLast(field.count - 1).first { bytes[$0..<$0 + field.count].elementsEqual(field) })
                bytes.replaceSubrange(start..<start + field.count, with: [0x0A, 0x08] + Array("0.conv2d".utf8))
                try Data(bytes).write(to: coreML)
            })
        #expect(renamed.status == 1, "the checker should fail:\n\(renamed.output)")
        #expect(renamed.output.contains("Core ML layer names are not unique"))

        // Drop the last Core ML label with coremltools; expect the other three everywhere else.
        let dropLabel = """
            import sys, coremltools
            spec = coremltools.utils.load_spec(sys.argv[1])
            del spec.neuralNetworkClassifier.stringClassLabels.vector[-1]
            coremltools.utils.save_spec(spec, sys.argv[1])
            """
        let shortened = try Self.exportAndCheck(model, crops: crops) { file in
            file.labels.removeLast()
        } tamperFiles: { coreML, _ in
            let edit = try PythonChecker.run(["-c", dropLabel, coreML.path])
            try #require(edit.status == 0, "coremltools could not edit the spec:\n\(edit.output)")
        }
        #expect(shortened.status == 1, "the checker should fail:\n\(shortened.output)")
        #expect(shortened.output.contains("Core ML softmax width vs number of labels: got 4, expected 3"))
    }

    // MARK: - Running the checker

    static func exportAndCheck(
        _ model: TrainedModel, crops: [FaceCrop], tamper: (inout ExportCheckFile) -> Void = { _ in },
        tamperFiles: (_ coreML: URL, _ onnx: URL) throws -> Void = { _, _ in }
    ) throws -> (status: Int32, output: String) {
        let directory = try ExportTestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let coreMLURL = directory.appendingPathComponent(CoreMLExporter.fileName)
        let onnxURL = directory.appendingPathComponent(ONNXExporter.fileName)
        try CoreMLExporter.encode(model, metadata: metadata).write(to: coreMLURL)
        try ONNXExporter.encode(model, metadata: metadata).write(to: onnxURL)
        try tamperFiles(coreMLURL, onnxURL)

        let input = model.definition.input
        var cases: [ExportCheckFile.Case] = []
        for crop in crops {
            #expect(crop.width == input.width && crop.height == input.height && crop.channels == input.channels)
            let probabilities = ReferenceForwardPass.probabilities(model, pixels: crop.pixels)
            // A clear winner, so that "same top label" is a meaningful check at float32 precision.
            let sorted = probabilities.sorted(by: >)
            #expect(sorted[0] - sorted[1] > 1e-4, "\(crop.name): top two classes are too close")
            cases.append(ExportCheckFile.Case(name: crop.name, pixels: crop.pixels, probabilities: probabilities))
        }
        var file = ExportCheckFile(
            mlmodel: coreMLURL.path, onnx: onnxURL.path, labels: model.definition.classLabels,
            input: .init(
                name: "image", width: input.width, height: input.height, channels: input.channels,
                colorSpace: input.colorSpace),
            outputs: .init(label: "classLabel", probabilities: "classProbability"),
            metadata: .init(
                version: 3, versionString: "3", shortDescription: "Office door face classifier",
                author: "facetrain tests", license: "Proprietary", userDefined: expectedUserDefined),
            onnxProducer: .init(name: "facetrain", version: FaceTrainVersion.string),
            tolerance: 1e-4, cases: cases)
        tamper(&file)
        let casesURL = directory.appendingPathComponent("cases.json")
        try JSONEncoder().encode(file).write(to: casesURL)

        let result = try PythonChecker.run([ExportTestSupport.checkScript.path, casesURL.path])
        if result.status == PythonChecker.missingModulesStatus {
            Issue.record("Python modules for the export checks are missing:\n\(result.output)")
        }
        print(result.output.split(separator: "\n").suffix(3).joined(separator: "\n"))
        return result
    }

    // MARK: - Crops

    static func celebrityNames() throws -> [String] {
        let root = ExportTestSupport.datasets.appendingPathComponent("cs131_celebrity_faces")
        return try FileManager.default.contentsOfDirectory(atPath: root.path).filter { !$0.hasPrefix(".") }.sorted()
    }

    /// The first two images (by name) of each person, in person order, up to `count`.
    static func celebrityCrops(count: Int) throws -> [FaceCrop] {
        let root = ExportTestSupport.datasets.appendingPathComponent("cs131_celebrity_faces")
        var crops: [FaceCrop] = []
        for person in try celebrityNames() where crops.count < count {
            let folder = root.appendingPathComponent(person)
            let files = try FileManager.default.contentsOfDirectory(atPath: folder.path)
                .filter { $0.hasSuffix(".jpg") }.sorted().prefix(2)
            for file in files where crops.count < count {
                crops.append(try FaceCropLoader.jpeg(folder.appendingPathComponent(file)))
            }
        }
        try #require(crops.count == count, "found only \(crops.count) CS131 crops under \(root.path)")
        return crops
    }

    /// Image 1 of the first `count` ORL subjects, halved to 46x56 by 2x2 averaging.
    static func orlCrops(count: Int) throws -> [FaceCrop] {
        let root = ExportTestSupport.datasets.appendingPathComponent("orl_faces")
        return try (1...count).map { subject in
            let url = root.appendingPathComponent(String(format: "s%02d/1.pgm", subject))
            return FaceCropLoader.downsample(try FaceCropLoader.pgm(url), by: 2)
        }
    }
}
