import FaceTrain
import Foundation

/// `facetrain export`: writes a verified bundle's model as Core ML or ONNX, with the metadata fit used.
struct Export: Command {
    static let name = "export"
    static let abstract =
        "Write a verified bundle's model as Core ML (.mlmodel) or ONNX, identical to the bundle's own file."
    static let arguments = "<bundle>"
    static var options: [OptionSpec] {
        [
            .required("format", "coreml|onnx", "Export format."),
            .required("out", "file", "File to write (atomically); an existing folder gets the bundle's file name."),
            .option("models", "dir", "Models folder that version numbers and 'latest' refer to.", default: "models"),
        ]
    }

    let bundle: String
    let format: BundleExport.Format
    let out: URL
    let models: URL

    init(arguments: ParsedArguments) throws {
        try arguments.expectPositionals(atMost: 1)
        guard let bundle = arguments.positionals.first else {
            throw UsageError(
                message: "Missing expected argument '<bundle>' (a bundle directory, version number or 'latest')")
        }
        self.bundle = bundle
        let formatName: String = try arguments.required("format")
        guard let format = BundleExport.Format(rawValue: formatName.lowercased()) else {
            let known = BundleExport.Format.allCases.map(\.rawValue).joined(separator: ", ")
            throw UsageError(message: "Unknown export format '\(formatName)' for '--format' (known: \(known))")
        }
        self.format = format
        out = URL(fileURLWithPath: try arguments.required("out"))
        models = URL(fileURLWithPath: try arguments.required("models"))
    }

    func run() throws -> ExitCode {
        let opened = try ModelBundle.open(ModelRepository.locateBundle(bundle, modelsDirectory: models))
        let data = try BundleExport.encode(opened, format: format)
        var isDirectory: ObjCBool = false
        let target =
            FileManager.default.fileExists(atPath: out.path, isDirectory: &isDirectory) && isDirectory.boolValue
            ? out.appendingPathComponent(format.bundleFileName) : out
        let expectedExtension = URL(fileURLWithPath: format.bundleFileName).pathExtension
        if target.pathExtension.lowercased() != expectedExtension {
            printError(
                "warning: \(target.path) does not end in .\(expectedExtension), "
                    + "the usual extension of \(format.rawValue) files")
        }
        try DurableFile.write(data, to: target)
        let digest = SHA256.hash(data)
        print(
            "\(target.path): \(format.rawValue) export of version \(opened.version), \(data.count) bytes, "
                + "sha256 \(digest)")
        if let own = opened.fileEntry(format.bundleFileName), own.sha256 != digest {
            printError(
                "note: this differs from the bundle's own \(format.bundleFileName) (sha256 \(own.sha256)); "
                    + "the bundle was exported by facetrain \(opened.manifest.facetrainVersion), "
                    + "this is \(FaceTrainVersion.string)")
        }
        return .success
    }
}
