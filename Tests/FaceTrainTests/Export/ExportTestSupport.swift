import CTurboJPEG
import FaceTrainTestSupport
import Foundation
import Testing

@testable import FaceTrain
@testable import FaceTrainEngine

/// Paths, seeded models, real face crops and an independent forward pass for the export tests.
enum ExportTestSupport {
    /// The package root, found from this file's path (Tests/FaceTrainTests/Export/…).
    static let packageRoot: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// `../shared` beside the package, where the datasets and the format reference live.
    static let sharedDirectory = packageRoot.deletingLastPathComponent().appendingPathComponent("shared")
    static let formatsReference = sharedDirectory.appendingPathComponent("docs/formats-ref")
    static let datasets = sharedDirectory.appendingPathComponent("datasets")
    static let checkScript = packageRoot.appendingPathComponent("Tests/Scripts/check_exports.py")

    /// True on CI, where missing data or Python modules must fail tests instead of disabling them.
    static var isCI: Bool { ProcessInfo.processInfo.environment["CI"] == "true" }

    static func exists(_ url: URL) -> Bool { FileManager.default.fileExists(atPath: url.path) }

    /// A fresh temporary directory for one test.
    static func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory
            .appendingPathComponent("facetrain-export-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }
}

// MARK: - The smallest complete model

extension ModelDefinition {
    /// gen_reference.py's network (../shared/docs/formats-ref): a 3x3 convolution to 4 channels, batch norm,
    /// ReLU, 2x2 max pooling, global average pooling and a linear layer: every exported layer kind.
    static func tinyClassifier(
        input: InputSpecification, outputFeatures: Int, classLabels: [String]
    ) -> ModelDefinition {
        ModelDefinition(
            input: input,
            layers: [
                .conv2D(inputChannels: input.channels, outputChannels: 4, kernelSize: 3, stride: 1, padding: 1),
                .batchNorm2D(channels: 4, epsilon: 1e-5, momentum: 0.1),
                .relu,
                .maxPool2D(size: 2, stride: 2),
                .globalAveragePool,
                .linear(inputFeatures: 4, outputFeatures: outputFeatures),
            ],
            classLabels: classLabels)
    }
}

// MARK: - Seeded weights

/// SplitMix64: small, fast and the same on every platform.
struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A standard normal sample (Box-Muller).
    mutating func normal() -> Double {
        let u1 = Double.random(in: Double.ulpOfOne..<1, using: &self)
        let u2 = Double.random(in: 0..<1, using: &self)
        return (-2 * log(u1)).squareRoot() * cos(2 * Double.pi * u2)
    }
}

extension TrainedModel {
    /// A model with He-initialised, seeded weights and non-trivial batch-norm statistics; the last
    /// linear layer is scaled up so that the classes are well separated (clear top labels).
    static func seeded(_ definition: ModelDefinition, seed: UInt64, logitScale: Double = 4) -> TrainedModel {
        var generator = SeededGenerator(seed: seed)
        let lastLinear = definition.layers.lastIndex { if case .linear = $0 { true } else { false } }
        var weights: [LayerWeights] = []
        for (index, layer) in definition.layers.enumerated() {
            var tensors: [NamedTensor] = []
            for (name, shape) in layer.parameterShapes {
                let count = shape.reduce(1, *)
                let values: [Float]
                switch (layer, name) {
                case (.batchNorm2D, "weight"):
                    values = (0..<count).map { _ in Float.random(in: 0.5...1.5, using: &generator) }
                case (.batchNorm2D, "running_var"):
                    values = (0..<count).map { _ in Float.random(in: 0.3...2.0, using: &generator) }
                case (.batchNorm2D, _):
                    values = (0..<count).map { _ in Float(0.3 * generator.normal()) }
                case (.prelu, _):
                    values = (0..<count).map { _ in Float.random(in: 0.05...0.5, using: &generator) }
                case (_, "bias"):
                    values = (0..<count).map { _ in Float(0.1 * generator.normal()) }
                default:
                    let fanIn = shape.dropFirst().reduce(1, *)
                    let scale = (2 / Double(fanIn)).squareRoot() * (index == lastLinear ? logitScale : 1)
                    values = (0..<count).map { _ in Float(scale * generator.normal()) }
                }
                tensors.append(NamedTensor(name: name, tensor: Tensor(shape: shape, scalars: values)))
            }
            weights.append(LayerWeights(name: definition.layerNames[index], tensors: tensors))
        }
        return TrainedModel(definition: definition, weights: weights)
    }
}

// MARK: - Independent forward pass

/// A straightforward double-precision forward pass over a `TrainedModel`, written from the layer
/// definitions alone (not from the exporters), used as the oracle for both exported files.
enum ReferenceForwardPass {
    /// Class probabilities for one image given as 8-bit pixels, HWC, in the model's channel order.
    static func probabilities(_ model: TrainedModel, pixels: [UInt8]) -> [Double] {
        let input = model.definition.input
        var channels = input.channels
        var height = input.height
        var width = input.width
        precondition(pixels.count == channels * height * width, "test image has the wrong size")
        var data = [Double](repeating: 0, count: pixels.count)
        for c in 0..<channels {
            for y in 0..<height {
                for x in 0..<width {
                    let pixel = Double(pixels[(y * width + x) * channels + c])
                    data[(c * height + y) * width + x] = pixel * Double(input.scale) + Double(input.bias[c])
                }
            }
        }
        // The input's crop: the first layer sees the centre, `crop` pixels in from every edge.
        if input.crop > 0 {
            let (top, innerHeight, innerWidth) = (input.crop, height - 2 * input.crop, width - 2 * input.crop)
            data = (0..<(channels * innerHeight * innerWidth)).map { index in
                let (c, y, x) = (
                    index / (innerHeight * innerWidth), index / innerWidth % innerHeight, index % innerWidth
                )
                return data[(c * height + y + top) * width + x + top]
            }
            (height, width) = (innerHeight, innerWidth)
        }
        // Every layer's output (values, channels, height, width), for residual adds.
        var outputs: [([Double], Int, Int, Int)] = []
        for (layer, weights) in zip(model.definition.layers, model.weights) {
            defer { outputs.append((data, channels, height, width)) }
            func parameter(_ name: String) -> [Double] {
                weights.tensors.first { $0.name == name }!.tensor.scalars.map(Double.init)
            }
            switch layer {
            case .conv2D(let inputChannels, let outputChannels, let kernel, let stride, let padding, let groups):
                // Output channel o of group g = o / (outputChannels / groups) sees input channels g·cg ..< (g+1)·cg.
                let (groupInputs, groupOutputs) = (inputChannels / groups, outputChannels / groups)
                let weight = parameter("weight")
                let bias = parameter("bias")
                let outHeight = (height + 2 * padding - kernel) / stride + 1
                let outWidth = (width + 2 * padding - kernel) / stride + 1
                var output = [Double](repeating: 0, count: outputChannels * outHeight * outWidth)
                // Unchecked pointers keep this oracle quick in debug builds; the loops are the definition.
                output.withUnsafeMutableBufferPointer { out in
                    data.withUnsafeBufferPointer { image in
                        for o in 0..<outputChannels {
                            let plane = o * outHeight * outWidth
                            for index in plane..<plane + outHeight * outWidth { out[index] = bias[o] }
                            let firstInput = (o / groupOutputs) * groupInputs
                            for i in firstInput..<(firstInput + groupInputs) {
                                for ky in 0..<kernel {
                                    for kx in 0..<kernel {
                                        let w = weight[((o * groupInputs + i - firstInput) * kernel + ky) * kernel + kx]
                                        for oy in 0..<outHeight {
                                            let y = oy * stride + ky - padding
                                            guard y >= 0, y < height else { continue }
                                            let row = (i * height + y) * width
                                            let outRow = plane + oy * outWidth
                                            for ox in 0..<outWidth {
                                                let x = ox * stride + kx - padding
                                                guard x >= 0, x < width else { continue }
                                                out[outRow + ox] += w * image[row + x]
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
                (data, channels, height, width) = (output, outputChannels, outHeight, outWidth)
            case .batchNorm2D(let count, let epsilon, _):
                let (gamma, beta) = (parameter("weight"), parameter("bias"))
                let (mean, variance) = (parameter("running_mean"), parameter("running_var"))
                let plane = data.count / count
                for c in 0..<count {
                    let factor = gamma[c] / (variance[c] + Double(epsilon)).squareRoot()
                    for index in c * plane..<(c + 1) * plane {
                        data[index] = (data[index] - mean[c]) * factor + beta[c]
                    }
                }
            case .relu:
                data = data.map { max($0, 0) }
            case .l2Normalize(let scale):
                let norm = max(data.reduce(0) { $0 + $1 * $1 }.squareRoot(), 1e-6)
                data = data.map { $0 * Double(scale) / norm }
            case .maxPool2D(let size, let stride):
                let outHeight = (height - size) / stride + 1
                let outWidth = (width - size) / stride + 1
                var output = [Double](repeating: 0, count: channels * outHeight * outWidth)
                for c in 0..<channels {
                    for oy in 0..<outHeight {
                        for ox in 0..<outWidth {
                            var best = -Double.infinity
                            for ky in 0..<size {
                                for kx in 0..<size {
                                    best = max(best, data[(c * height + oy * stride + ky) * width + ox * stride + kx])
                                }
                            }
                            output[(c * outHeight + oy) * outWidth + ox] = best
                        }
                    }
                }
                (data, height, width) = (output, outHeight, outWidth)
            case .globalAveragePool:
                let plane = height * width
                data = (0..<channels).map { c in data[c * plane..<(c + 1) * plane].reduce(0, +) / Double(plane) }
                (height, width) = (1, 1)
            case .linear(let inputFeatures, let outputFeatures):
                let weight = parameter("weight")
                let bias = parameter("bias")
                precondition(data.count == inputFeatures, "linear layer gets \(data.count) features")
                data = (0..<outputFeatures).map { o in
                    (0..<inputFeatures).reduce(bias[o]) { $0 + weight[o * inputFeatures + $1] * data[$1] }
                }
                (channels, height, width) = (outputFeatures, 1, 1)
            case .dropout:
                break
            case .prelu(let count):
                let slopes = parameter("weight")
                let plane = data.count / count
                for index in data.indices where data[index] <= 0 { data[index] *= slopes[index / plane] }
            case .add(let source):
                let shortcut = outputs[source]
                precondition(shortcut.0.count == data.count, "residual add of different shapes")
                data = zip(data, shortcut.0).map { $0 + $1 }
            case .route(let source):
                (data, channels, height, width) = outputs[source]
            case .upsample(let factor):
                // Output (y, x) is input (y / factor, x / factor).
                let (outHeight, outWidth) = (height * factor, width * factor)
                data = (0..<(channels * outHeight * outWidth)).map { index in
                    let (c, y, x) = (index / (outHeight * outWidth), index / outWidth % outHeight, index % outWidth)
                    return data[(c * height + y / factor) * width + x / factor]
                }
                (height, width) = (outHeight, outWidth)
            }
        }
        let largest = data.max() ?? 0
        let exponentials = data.map { exp($0 - largest) }
        let total = exponentials.reduce(0, +)
        return exponentials.map { $0 / total }
    }
}

// MARK: - Real face crops

/// 8-bit pixels of one image, HWC.
struct FaceCrop {
    var name: String
    var width: Int
    var height: Int
    var channels: Int
    var pixels: [UInt8]
}

enum FaceCropLoader {
    /// A binary (P5) PGM file without comments, as the ORL files are.
    static func pgm(_ url: URL) throws -> FaceCrop {
        let bytes = [UInt8](try Data(contentsOf: url))
        var fields: [String] = []
        var offset = 0
        var current = ""
        while fields.count < 4, offset < bytes.count {
            let byte = bytes[offset]
            offset += 1
            if byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 {
                if !current.isEmpty { fields.append(current) }
                current = ""
            } else {
                current.append(Character(UnicodeScalar(byte)))
            }
        }
        guard fields.count == 4, fields[0] == "P5", let width = Int(fields[1]), let height = Int(fields[2]),
            fields[3] == "255", bytes.count - offset >= width * height
        else { throw CropError.unreadable(url.path) }
        return FaceCrop(
            name: url.path, width: width, height: height, channels: 1,
            pixels: Array(bytes[offset..<offset + width * height]))
    }

    /// A JPEG decoded to RGB with libjpeg-turbo.
    static func jpeg(_ url: URL) throws -> FaceCrop {
        let data = [UInt8](try Data(contentsOf: url))
        guard let handle = tjInitDecompress() else { throw CropError.unreadable(url.path) }
        defer { tjDestroy(handle) }
        var width: Int32 = 0
        var height: Int32 = 0
        var subsampling: Int32 = 0
        var colorspace: Int32 = 0
        guard
            tjDecompressHeader3(
                handle, data, UInt(data.count), &width, &height, &subsampling, &colorspace) == 0
        else { throw CropError.unreadable(url.path) }
        var pixels = [UInt8](repeating: 0, count: Int(width) * Int(height) * 3)
        guard
            tjDecompress2(
                handle, data, UInt(data.count), &pixels, width, 0, height, Int32(TJPF_RGB.rawValue),
                Int32(TJFLAG_ACCURATEDCT)) == 0
        else { throw CropError.unreadable(url.path) }
        return FaceCrop(name: url.path, width: Int(width), height: Int(height), channels: 3, pixels: pixels)
    }

    /// The crop shrunk by an integer factor, averaging each block (rounded).
    static func downsample(_ crop: FaceCrop, by factor: Int) -> FaceCrop {
        let width = crop.width / factor
        let height = crop.height / factor
        var pixels = [UInt8](repeating: 0, count: width * height * crop.channels)
        for y in 0..<height {
            for x in 0..<width {
                for c in 0..<crop.channels {
                    var sum = 0
                    for dy in 0..<factor {
                        for dx in 0..<factor {
                            sum += Int(
                                crop.pixels[((y * factor + dy) * crop.width + x * factor + dx) * crop.channels + c])
                        }
                    }
                    let area = factor * factor
                    pixels[(y * width + x) * crop.channels + c] = UInt8((sum + area / 2) / area)
                }
            }
        }
        return FaceCrop(name: crop.name, width: width, height: height, channels: crop.channels, pixels: pixels)
    }

    enum CropError: Error, CustomStringConvertible {
        case unreadable(String)
        var description: String { "cannot decode face crop \(self)" }
    }
}

// MARK: - The Python checker

/// Runs Tests/Scripts/check_exports.py with python3.
enum PythonChecker {
    static let modules = ["numpy", "onnx", "onnxruntime", "coremltools"]
    /// Exit status of the script when a Python module is missing.
    static let missingModulesStatus: Int32 = 3

    /// Whether the consumer checks should run: always on CI (and fail there if Python lacks a
    /// module), elsewhere only when the modules are installed.
    static var shouldRun: Bool {
        if ExportTestSupport.isCI { return true }
        let probe =
            "import importlib.util, sys; sys.exit(0 if all(importlib.util.find_spec(m) for m in "
            + "[\(modules.map { "'\($0)'" }.joined(separator: ", "))]) else 3)"
        return (try? run(["-c", probe]).status) == 0
    }

    /// Runs python3 with the arguments; returns the exit status and the combined output.
    static func run(_ arguments: [String]) throws -> (status: Int32, output: String) {
        try ProcessRunner.python(arguments)
    }
}
