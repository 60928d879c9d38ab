// Which kind a layer is, as a type to compare and switch on, and the name each kind has in files.
// It is not the kind's definition (that is `LayerKind`, beside each layer) nor the manifest's
// coding of a layer (that is `LayerSpecification`'s, keyed by its case names).

/// The kind of a `LayerSpecification`, with the lowercase name it has in weights.h5 group names,
/// parameter keys ("0.conv2d.weight") and the export table as `rawValue`. Those names are in
/// bundles already written, so a raw value never changes.
public enum LayerKindName: String, CaseIterable, Sendable, CustomStringConvertible {
    case conv2D = "conv2d"
    case batchNorm2D = "batchnorm2d"
    case relu
    case maxPool2D = "maxpool2d"
    case globalAveragePool = "globalavgpool"
    case l2Normalize = "l2normalize"
    case linear
    case dropout
    case add
    case prelu
    case route
    case upsample

    /// The file name, so that interpolating a kind writes what the files have ("conv2d", not "conv2D").
    public var description: String { rawValue }
}
