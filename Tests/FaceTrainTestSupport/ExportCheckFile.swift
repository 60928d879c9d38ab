import FaceTrain

/// The JSON file Tests/Scripts/check_exports.py reads (see its docstring); check_predictions.py
/// reads the same file. Property names are the JSON keys.
public struct ExportCheckFile: Codable {
    /// One image and the probabilities both exports must give for it.
    public struct Case: Codable {
        public var name: String
        /// The image file, for check_predictions.py's independent decoding; left out of the JSON when nil.
        public var file: String?
        /// 8-bit pixels, HWC, in the model's channel order.
        public var pixels: [UInt8]
        /// Expected probabilities in label order.
        public var probabilities: [Double]

        public init(name: String, file: String? = nil, pixels: [UInt8], probabilities: [Double]) {
            self.name = name
            self.file = file
            self.pixels = pixels
            self.probabilities = probabilities
        }
    }

    public struct Input: Codable {
        public var name: String
        public var width: Int
        public var height: Int
        public var channels: Int
        /// "RGB" or "GRAY".
        public var colorSpace: String

        public init(name: String, width: Int, height: Int, channels: Int, colorSpace: String) {
            self.name = name
            self.width = width
            self.height = height
            self.channels = channels
            self.colorSpace = colorSpace
        }
    }

    /// The names of the two model outputs.
    public struct Outputs: Codable {
        public var label: String
        public var probabilities: String

        public init(label: String, probabilities: String) {
            self.label = label
            self.probabilities = probabilities
        }
    }

    public struct Metadata: Codable {
        public var version: Int
        public var versionString: String
        public var shortDescription: String
        public var author: String
        public var license: String
        public var userDefined: [String: String]

        public init(
            version: Int, versionString: String, shortDescription: String, author: String, license: String,
            userDefined: [String: String]
        ) {
            self.version = version
            self.versionString = versionString
            self.shortDescription = shortDescription
            self.author = author
            self.license = license
            self.userDefined = userDefined
        }
    }

    public struct Producer: Codable {
        public var name: String
        public var version: String

        public init(name: String, version: String) {
            self.name = name
            self.version = version
        }
    }

    public var mlmodel: String
    public var onnx: String
    public var labels: [String]
    public var input: Input
    public var outputs: Outputs
    public var metadata: Metadata
    public var onnxProducer: Producer
    /// The largest difference allowed between a probability and its expected value.
    public var tolerance: Double
    public var cases: [Case]
    /// What each layer kind exports as (`ExportFormTable`): the only list of kinds the script knows.
    public var operations: [String: [ExportFormTable.Entry]]

    public init(
        mlmodel: String, onnx: String, labels: [String], input: Input, outputs: Outputs, metadata: Metadata,
        onnxProducer: Producer, tolerance: Double, cases: [Case],
        operations: [String: [ExportFormTable.Entry]] = ExportFormTable.entries
    ) {
        self.mlmodel = mlmodel
        self.onnx = onnx
        self.labels = labels
        self.input = input
        self.outputs = outputs
        self.metadata = metadata
        self.onnxProducer = onnxProducer
        self.tolerance = tolerance
        self.cases = cases
        self.operations = operations
    }
}
