import FaceTrainEngine
import Foundation

/// `weights.h5`: every parameter and BatchNorm running statistic of a model, in HDF5.
///
/// Layout (this comment defines it; it follows the Keras style of per-layer groups with
/// `weight_names`): the root group's attributes describe the model (`format`,
/// `format_version`, `layer_names` in forward order, `class_labels`, `input_shape_chw`,
/// `color_space`, `preprocess_scale`, `preprocess_bias`, `weight_layout`); one group per layer
/// named "<index>.<kind>" ("0.conv2d") with a `type` attribute, the layer's hyper-parameters and
/// a Keras-style `weight_names` attribute (empty for layers without parameters), holding one
/// float32 dataset per parameter: conv2d `weight` [out,in/groups,kh,kw] and `bias` (a `groups`
/// attribute when grouped); add has a `source` attribute (the layer index whose output it adds); batchnorm2d
/// `weight` (gamma), `bias` (beta), `running_mean`, `running_var`; linear `weight` [out,in] and
/// `bias`. Row-major, little-endian, contiguous, uncompressed, no timestamps: the same model
/// always gives the same bytes.
public enum WeightsFile {
    /// Written into the `format` attribute.
    public static let formatName = "facetrain.weights"
    /// Written into the `format_version` attribute; readers refuse newer files.
    public static let formatVersion: Int32 = 1

    /// Writes `model` to a new file at `url` (which must not exist), fsynced.
    public static func write(_ model: TrainedModel, to url: URL) throws {
        try FileSystem.writeNewFile(try encode(model, fileName: url.lastPathComponent), to: url)
    }

    /// The bytes of weights.h5 for `model`; the same model always gives the same bytes.
    public static func encode(_ model: TrainedModel, fileName: String = "weights.h5") throws -> Data {
        let definition = model.definition
        let tensorsByLayer = try orderedTensors(of: model, file: fileName)
        do {
            return try HDF5File.withLibrary {
                let file = try HDF5File.createInMemory()
                let root = file.root
                try root.writeString("format", formatName)
                try root.writeInt32s("format_version", [formatVersion], scalar: true)
                try root.writeStrings("layer_names", definition.layerNames)
                try root.writeStrings("class_labels", definition.classLabels)
                let input = definition.input
                try root.writeInt32s("input_shape_chw", [input.channels, input.height, input.width].map { Int32($0) })
                try root.writeString("color_space", input.colorSpace)
                try root.writeFloats("preprocess_scale", [input.scale], scalar: true)
                try root.writeFloats("preprocess_bias", input.bias)
                try root.writeString("weight_layout", "conv2d weight [out,in,kh,kw]; linear weight [out,in]; row-major")
                for (index, layer) in definition.layers.enumerated() {
                    let group = try root.createGroup(definition.layerNames[index])
                    try writeLayerAttributes(layer, to: group)
                    let tensors = tensorsByLayer[index]
                    try group.writeStrings("weight_names", tensors.map(\.name))
                    for tensor in tensors {
                        try group.writeDataset(tensor.name, shape: tensor.tensor.shape, scalars: tensor.tensor.scalars)
                    }
                }
                let image = try file.image()
                try file.close()
                return image
            }
        } catch let failure as HDF5File.Failure {
            throw WeightsFileError.library(file: fileName, detail: failure.description)
        }
    }

    /// Reads the weights of `definition` from `url`: one `LayerWeights` per layer, in layer
    /// order, empty for layers without parameters. Every tensor must exist with its shape.
    public static func read(from url: URL, definition: ModelDefinition) throws -> [LayerWeights] {
        let name = url.lastPathComponent
        do {
            return try HDF5File.withLibrary {
                let file = try HDF5File.open(at: url.path)
                let root = file.root
                guard root.hasAttribute("format_version"), root.hasAttribute("layer_names") else {
                    throw WeightsFileError.notWeightsFile(
                        file: name, detail: "it has no format_version or layer_names attribute")
                }
                let layerNames = try root.readStrings("layer_names")
                guard layerNames == definition.layerNames else {
                    throw WeightsFileError.architectureMismatch(
                        file: name, expected: definition.layerNames, found: layerNames)
                }
                var result: [LayerWeights] = []
                for (index, layer) in definition.layers.enumerated() {
                    let layerName = definition.layerNames[index]
                    guard root.contains(layerName) else {
                        throw WeightsFileError.missingLayer(file: name, layer: layerName)
                    }
                    let group = try root.openGroup(layerName)
                    var tensors: [NamedTensor] = []
                    for (tensorName, shape) in layer.parameterShapes {
                        guard group.contains(tensorName) else {
                            throw WeightsFileError.missingTensor(file: name, layer: layerName, tensor: tensorName)
                        }
                        let (foundShape, scalars) = try group.readDataset(tensorName)
                        guard foundShape == shape else {
                            throw WeightsFileError.shapeMismatch(
                                file: name, tensor: "\(layerName)/\(tensorName)", expected: shape, found: foundShape)
                        }
                        tensors.append(NamedTensor(name: tensorName, tensor: Tensor(shape: shape, scalars: scalars)))
                    }
                    result.append(LayerWeights(name: layerName, tensors: tensors))
                }
                try file.close()
                return result
            }
        } catch let failure as HDF5File.Failure {
            throw WeightsFileError.library(file: name, detail: failure.description)
        }
    }

    /// The out-features of the last linear layer as stored in the file (the classifier width).
    public static func outputWidth(of url: URL, definition: ModelDefinition) throws -> Int? {
        guard let index = definition.layers.lastIndex(where: { if case .linear = $0 { true } else { false } }) else {
            return nil
        }
        let layerName = definition.layerNames[index]
        do {
            return try HDF5File.withLibrary {
                let file = try HDF5File.open(at: url.path)
                guard file.root.contains(layerName) else {
                    throw WeightsFileError.missingLayer(file: url.lastPathComponent, layer: layerName)
                }
                let group = try file.root.openGroup(layerName)
                guard group.contains("weight") else {
                    throw WeightsFileError.missingTensor(
                        file: url.lastPathComponent, layer: layerName, tensor: "weight")
                }
                let shape = try group.readDataset("weight").shape
                try file.close()
                return shape.first
            }
        } catch let failure as HDF5File.Failure {
            throw WeightsFileError.library(file: url.lastPathComponent, detail: failure.description)
        }
    }

    /// The model's tensors per layer, checked against the definition's names and shapes.
    ///
    /// `model.weights` may list every layer or only those with parameters; it is matched by name.
    private static func orderedTensors(of model: TrainedModel, file: String) throws -> [[NamedTensor]] {
        let definition = model.definition
        let byName = Dictionary(model.weights.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        let known = Set(definition.layerNames)
        if let stray = model.weights.first(where: { !known.contains($0.name) && !$0.tensors.isEmpty }) {
            throw WeightsFileError.modelMismatch(
                reason: "weights for '\(stray.name)', which the definition does not have")
        }
        return try definition.layers.enumerated().map { index, layer in
            let layerName = definition.layerNames[index]
            let expected = layer.parameterShapes
            let tensors = byName[layerName]?.tensors ?? []
            guard tensors.map(\.name) == expected.map(\.name) else {
                throw WeightsFileError.modelMismatch(
                    reason: "layer \(layerName) has tensors \(tensors.map(\.name)), expected \(expected.map(\.name))")
            }
            for (tensor, (tensorName, shape)) in zip(tensors, expected) where tensor.tensor.shape != shape {
                throw WeightsFileError.shapeMismatch(
                    file: file, tensor: "\(layerName)/\(tensorName)", expected: shape, found: tensor.tensor.shape)
            }
            return tensors
        }
    }

    private static func writeLayerAttributes(_ layer: LayerSpecification, to group: HDF5File.Group) throws {
        try group.writeString("type", layer.kind.rawValue)
        for attribute in layer.layerKind.weightsFileAttributes {
            switch attribute {
            case .integers(let name, let values, let scalar):
                try group.writeInt32s(name, values.map { Int32($0) }, scalar: scalar)
            case .floats(let name, let values, let scalar):
                try group.writeFloats(name, values, scalar: scalar)
            }
        }
    }
}

/// Why weights.h5 could not be written or read.
public enum WeightsFileError: Error, CustomStringConvertible, Equatable {
    case library(file: String, detail: String)
    case notWeightsFile(file: String, detail: String)
    case architectureMismatch(file: String, expected: [String], found: [String])
    case missingLayer(file: String, layer: String)
    case missingTensor(file: String, layer: String, tensor: String)
    case shapeMismatch(file: String, tensor: String, expected: [Int], found: [Int])
    case modelMismatch(reason: String)

    public var description: String {
        switch self {
        case .library(let file, let detail):
            return "\(file): libhdf5 could not read or write it: \(detail)"
        case .notWeightsFile(let file, let detail):
            return "\(file) is not a facetrain weights file: \(detail)"
        case .architectureMismatch(let file, let expected, let found):
            return "\(file) holds layers \(found) but the manifest describes \(expected)\n"
                + "HINT: the weights belong to another architecture; retrain or restore the matching weights.h5."
        case .missingLayer(let file, let layer):
            return "\(file) has no group for layer '\(layer)'"
        case .missingTensor(let file, let layer, let tensor):
            return "\(file) has no dataset '\(tensor)' in layer '\(layer)'"
        case .shapeMismatch(let file, let tensor, let expected, let found):
            return "\(file): dataset '\(tensor)' has shape \(found), expected \(expected)"
        case .modelMismatch(let reason):
            return "the trained model does not match its definition: \(reason)"
        }
    }
}
