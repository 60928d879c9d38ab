import FaceTrain
import FaceTrainClient
import Foundation
import Testing

@testable import FaceTrainClient

/// FaceTrainClient against a live `facetrain serve` on loopback: every call of the client, its
/// typed errors, and the download's ETag, resume and checksum paths. Also its SHA-256 against the
/// standard's vectors, and GET /openapi.json (open, and the bytes of docs/openapi.json).
@Suite("serve client", .serialized)
struct ServeClientTests {
    @Test func theClientDrivesTheAppsWholeFlow() async throws {
        let (synth, data, models) = try ServeCommandTests.folders(users: 3, perUser: 10)
        let root = data.deletingLastPathComponent()
        defer { try? FileManager.default.removeItem(at: root) }
        let server = try ServeCommandTests.Server(data: data, models: models)
        defer { server.kill() }
        let client = FaceTrainClient(baseURL: URL(string: server.origin)!, token: ServeCommandTests.token)

        // The server's JSON errors arrive typed, with its message.
        let stranger = FaceTrainClient(baseURL: client.baseURL, token: "not-the-token-0123456789")
        let refused = await #expect(throws: FaceTrainClientError.self) { try await stranger.people() }
        #expect(refused?.status == 401 && "\(refused.map { "\($0)" } ?? "")".contains("--token-file"))
        let unpublished = await #expect(throws: FaceTrainClientError.self) { try await client.model() }
        guard case .server(404, let message)? = unpublished else {
            throw ServeCommandTests.TestFailure("\(String(describing: unpublished))")
        }
        #expect(message.contains("POST /v1/training"), "\(message)")

        var people: [Person] = []
        for index in 0..<3 {
            let person = try await client.registerPerson(name: "Person \(index)", position: index == 0 ? "CTO" : nil)
            #expect(person.id == 3 + index && person.crops == 0 && person.position == (index == 0 ? "CTO" : nil))
            let crops = try ServeCommandTests.crops(synth, user: 3 + index).map { try UploadFile(contentsOf: $0) }
            let uploaded = try await client.uploadCrops(personID: person.id, crops)
            #expect(uploaded.stored == 10 && uploaded.crops == 10 && uploaded.files.count == 10, "\(uploaded)")
            people.append(person)
        }
        #expect(try await client.people().map(\.id) == [3, 4, 5])
        #expect(try await client.people().map(\.crops) == [10, 10, 10])
        // Per-file results: a duplicate and a file that is not an image, in the order sent.
        let first = try UploadFile(contentsOf: try ServeCommandTests.crops(synth, user: 3)[0])
        let mixed = try await client.uploadCrops(
            personID: 3, [first, UploadFile(fileName: "notes.jpg", data: Data("not an image".utf8))])
        #expect(mixed.files.map(\.result) == ["duplicate", "rejected"] && mixed.files[1].reason != nil, "\(mixed)")
        let none = try await client.uploadCrops(personID: 3, [UploadFile(fileName: "x.jpg", data: Data([0xFF]))])
        #expect(none.stored == 0 && none.error != nil, "\(none)")
        await #expect(
            throws: FaceTrainClientError.server(
                status: 404, message: "there is no user 99; GET /v1/users lists the registered users")
        ) {
            try await client.uploadCrops(personID: 99, [first])
        }

        let queued = try await client.startTraining()
        #expect(queued.state == .queued || queued.state == .running)
        #expect(try await client.training(job: queued.job).job == queued.job)
        let done = try await client.waitForTraining(job: queued.job, every: .milliseconds(300))
        #expect(done.state == .succeeded && done.version == 1 && done.published == true, "\(done)")

        let model = try await client.model()
        #expect(model.version == 1 && model.users.map(\.id) == [3, 4, 5] && model.users[0].position == "CTO")
        try await Self.downloads(client, model, into: root)

        let photo = try UploadFile(contentsOf: try ServeCommandTests.crops(synth, user: 4)[0])
        let recognition = try await client.recognize(photo)
        #expect(recognition.version == 1 && recognition.faces.count == 1, "\(recognition)")
        #expect(recognition.faces.first?.wholeImage == true && recognition.faces.first?.crop != nil)
        #expect(try await client.recognize(photo, version: 1).faces.first?.label == recognition.faces.first?.label)
        let verification = try await client.verify(personID: 4, photo)
        #expect(verification.user == 4 && verification.version == 1 && verification.probability != nil)
        #expect(verification.verified == (verification.face.decision == "4"), "\(verification)")
        await #expect(throws: FaceTrainClientError.self) { try await client.recognize(photo, version: 9) }

        let open = try server.curl("GET", "/openapi.json", authorized: false)
        #expect(open.status == 200 && open.headers["content-type"] == "application/json")
        #expect(open.body == (try Data(contentsOf: Self.repository.appendingPathComponent("docs/openapi.json"))))
    }

    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// A fresh download, a 304 for the same file, a resumed `.part`, a corrupted one refused, and
    /// a `.part` longer than the file started over.
    static func downloads(_ client: FaceTrainClient, _ model: ModelInfo, into root: URL) async throws {
        let destination = root.appendingPathComponent("FaceClassifier.mlmodel")
        let partial = FaceTrainClient.partialFile(for: destination)
        let fresh = try await client.downloadModel(to: destination)
        #expect(fresh.outcome == .downloaded && fresh.model == model)
        let bytes = try Data(contentsOf: destination)
        #expect(bytes.count == model.size && ClientSHA256.hash(bytes) == model.sha256)
        #expect(try await client.downloadModel(to: destination, model: model).outcome == .alreadyCurrent)

        try FileManager.default.removeItem(at: destination)
        let half = bytes.count / 2
        try bytes.prefix(half).write(to: partial)
        #expect(try await client.downloadModel(to: destination, model: model).outcome == .resumed(from: half))
        #expect(try Data(contentsOf: destination) == bytes)
        #expect(!FileManager.default.fileExists(atPath: partial.path))

        try FileManager.default.removeItem(at: destination)
        try Data(repeating: 7, count: half).write(to: partial)
        await #expect(throws: FaceTrainClientError.self) {
            try await client.downloadModel(to: destination, model: model)
        }
        #expect(
            !FileManager.default.fileExists(atPath: partial.path)
                && !FileManager.default.fileExists(atPath: destination.path))

        try Data(count: bytes.count + 10).write(to: partial)
        #expect(try await client.downloadModel(to: destination, model: model).outcome == .downloaded)
        #expect(try Data(contentsOf: destination) == bytes)
    }

    /// FIPS 180-4's examples, the million-'a' vector, and every padding length around a block's end.
    @Test func sha256MatchesTheStandardsVectors() {
        #expect(ClientSHA256.hash(Data()) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(
            ClientSHA256.hash(Data("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(
            ClientSHA256.hash(Data("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8))
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        var hasher = ClientSHA256()
        for _ in 0..<1000 { hasher.update(Data(repeating: UInt8(ascii: "a"), count: 1000)) }
        #expect(hasher.finalize() == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
        // Around every padding boundary, whole and fed in uneven pieces, against FaceTrain's (OpenSSL's).
        for length in [1, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 200] {
            let bytes = Data((0..<length).map { UInt8(truncatingIfNeeded: $0 * 7) })
            var pieces = ClientSHA256()
            for start in stride(from: 0, to: length, by: 37) { pieces.update(bytes[start..<min(start + 37, length)]) }
            #expect(ClientSHA256.hash(bytes) == FaceTrain.SHA256.hash(bytes), "\(length) bytes")
            #expect(pieces.finalize() == FaceTrain.SHA256.hash(bytes), "\(length) bytes in pieces")
        }
    }
}
