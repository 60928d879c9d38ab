import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Downloading the published Core ML file: conditional (ETag), resumable (Range into a `.part`
/// file) and checked against the SHA-256 `GET /v1/model` announced. Compiling and loading the
/// model is the app's (`MLModel.compileModel(at:)`): this file only gets the bytes right.
@available(iOS 16.0, macOS 13.0, tvOS 16.0, watchOS 9.0, *)
extension FaceTrainClient {
    /// What a download did.
    public struct ModelDownload: Sendable, Equatable {
        public enum Outcome: Sendable, Equatable {
            /// The file at the destination already was this version's (the server answered 304).
            case alreadyCurrent
            case downloaded
            /// A `.part` file left by an interrupted download was completed from this byte on.
            case resumed(from: Int)
        }

        public var file: URL
        public var model: ModelInfo
        public var outcome: Outcome
    }

    /// The partial file a download writes before it is checked and renamed.
    public static func partialFile(for destination: URL) -> URL {
        destination.appendingPathExtension("part")
    }

    /// Makes `destination` the published Core ML file of `model` (asked with `model()` when nil).
    /// A file already there with the announced hash costs one 304; a `.part` file beside it is
    /// resumed with `Range`/`If-Range`. A complete file whose SHA-256 is not the announced one is
    /// deleted and `.checksumMismatch` thrown, so the next call starts over.
    public func downloadModel(to destination: URL, model known: ModelInfo? = nil) async throws -> ModelDownload {
        let model: ModelInfo
        if let known { model = known } else { model = try await self.model() }
        let etag = "\"\(model.sha256)\""
        let partial = Self.partialFile(for: destination)
        guard let url = URL(string: model.url, relativeTo: baseURL)?.absoluteURL else {
            throw FaceTrainClientError.unexpectedAnswer("the model's url '\(model.url)' is not a URL")
        }
        var request = request("GET", model.url, url: url)
        // The ETag is the file's SHA-256, so the file on disk names itself.
        if FileManager.default.fileExists(atPath: destination.path),
            let current = try? ClientSHA256.hash(fileAt: destination), current == model.sha256
        {
            request.setValue("\"\(current)\"", forHTTPHeaderField: "If-None-Match")
        }
        let offset = (try? FileManager.default.attributesOfItem(atPath: partial.path)[.size] as? Int) ?? 0
        if offset > 0 {
            request.setValue("bytes=\(offset)-", forHTTPHeaderField: "Range")
            request.setValue(etag, forHTTPHeaderField: "If-Range")
        }
        let (data, response) = try await exchange(request)
        let outcome: ModelDownload.Outcome
        switch response.statusCode {
        case 304:
            return ModelDownload(file: destination, model: model, outcome: .alreadyCurrent)
        case 206:
            let handle = try FileHandle(forWritingTo: partial)
            try handle.seekToEnd()
            try handle.write(contentsOf: data)
            try handle.close()
            outcome = .resumed(from: offset)
        case 200:
            try data.write(to: partial)
            outcome = .downloaded
        case 416:
            // The part is as long as the file or longer: it is not a prefix of this version, start over.
            try? FileManager.default.removeItem(at: partial)
            return try await downloadModel(to: destination, model: model)
        default:
            throw FaceTrainClientError(status: response.statusCode, body: data)
        }
        let actual = try ClientSHA256.hash(fileAt: partial)
        guard actual == model.sha256 else {
            try? FileManager.default.removeItem(at: partial)
            throw FaceTrainClientError.checksumMismatch(expected: model.sha256, actual: actual)
        }
        _ = try? FileManager.default.removeItem(at: destination)
        try FileManager.default.moveItem(at: partial, to: destination)
        return ModelDownload(file: destination, model: model, outcome: outcome)
    }
}
