import Foundation

/// A multipart/form-data body of files (RFC 7578), as the upload, recognise and verify routes
/// read them. Not a general encoder: files only, no text fields.
struct MultipartForm {
    let boundary = "facetrain-\(UUID().uuidString)"
    let files: [(field: String, file: UploadFile)]

    var contentType: String { "multipart/form-data; boundary=\(boundary)" }

    var body: Data {
        var data = Data()
        for (field, file) in files {
            // Quotes and line breaks would end the header early: the server only shows the name.
            let name = file.fileName.filter { $0 != "\"" && $0 != "\r" && $0 != "\n" }
            data += Data(
                ("--\(boundary)\r\nContent-Disposition: form-data; name=\"\(field)\"; filename=\"\(name)\"\r\n"
                    + "Content-Type: \(file.contentType)\r\n\r\n").utf8)
            data += file.data
            data += Data("\r\n".utf8)
        }
        data += Data("--\(boundary)--\r\n".utf8)
        return data
    }
}
