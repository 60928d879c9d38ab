import FaceTrainTestSupport
import Foundation
import Testing

@testable import FaceTrain

@Suite("Bundle verification")
struct VerificationTests {
    /// Opening must fail and the problems must name `file`.
    func expectRefused(_ url: URL, naming file: String, sourceLocation: SourceLocation = #_sourceLocation) {
        do {
            _ = try ModelBundle.open(url)
            Issue.record("a damaged bundle opened", sourceLocation: sourceLocation)
        } catch let BundleError.verificationFailed(_, problems) {
            #expect(problems.contains { $0.file == file }, "\(problems)", sourceLocation: sourceLocation)
        } catch {
            Issue.record("unexpected error \(error)", sourceLocation: sourceLocation)
        }
    }

    @Test(arguments: [
        ("weights.h5", 0), ("weights.h5", 5000), ("weights.h5", -1), ("manifest.json", 200), ("manifest.json", -3),
        ("metrics.json", 10), ("FaceClassifier.mlmodel", -2), ("model.onnx", 4), ("SHA256SUMS", 5), ("SHA256SUMS", 70),
    ])
    func flippedByteIsRefusedNamingTheFile(file: String, offset: Int) throws {
        let models = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: models) }
        let url = try BundleFixture.publish(in: models)
        #expect(BundleVerifier.verify(url).isValid)
        try BundleFixture.flipByte(in: url.appendingPathComponent(file), at: offset)
        expectRefused(url, naming: file)
    }

    @Test func everySHA256SUMSByteIsCovered() throws {
        let models = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: models) }
        let url = try BundleFixture.publish(in: models)
        let sums = url.appendingPathComponent("SHA256SUMS")
        let original = try Data(contentsOf: sums)
        for offset in stride(from: 0, to: original.count, by: 7) {
            try BundleFixture.flipByte(in: sums, at: offset)
            #expect(!BundleVerifier.verify(url).isValid, "flip at \(offset) went unnoticed")
            #expect(
                BundleVerifier.verify(url).problems.contains { $0.file == "SHA256SUMS" || $0.file == "manifest.json" })
            try original.write(to: sums)
        }
        #expect(BundleVerifier.verify(url).isValid)
    }

    /// Rewrites the manifest with `edit` and a matching SHA256SUMS, as an attacker or a careless
    /// script would, so only the path checks can catch it.
    func rewriteManifest(_ url: URL, _ edit: (inout Manifest) -> Void) throws {
        let manifestURL = url.appendingPathComponent("manifest.json")
        var manifest = try Manifest.decode(Data(contentsOf: manifestURL))
        edit(&manifest)
        let data = try manifest.encoded()
        chmod(manifestURL.path, 0o644)
        try data.write(to: manifestURL)
        let sums = ChecksumList.render(
            manifest.files.map { ($0.path, $0.sha256) } + [("manifest.json", SHA256.hash(data))])
        chmod(url.appendingPathComponent("SHA256SUMS").path, 0o644)
        try Data(sums.utf8).write(to: url.appendingPathComponent("SHA256SUMS"))
    }

    @Test(arguments: ["../x", "/etc/passwd", "a/../../x", "./weights.h5", ""])
    func escapingPathsAreRefused(path: String) throws {
        let models = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: models) }
        try Data("secret".utf8).write(to: models.appendingPathComponent("x"))
        let url = try BundleFixture.publish(in: models)
        try rewriteManifest(url) { manifest in
            let digest = SHA256.hash(Data("secret".utf8))
            manifest.files.append(Manifest.FileEntry(path: path, sha256: digest, size: 6))
        }
        let problems = BundleVerifier.verify(url).problems
        #expect(problems.contains { $0.file == "manifest.json" && $0.message.contains("'\(path)'") }, "\(problems)")
        expectRefused(url, naming: "manifest.json")
    }

    @Test func symlinkedFileIsRefused() throws {
        let models = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: models) }
        let url = try BundleFixture.publish(in: models)
        // Replace metrics.json by a link to an identical copy outside: same bytes, still refused.
        let outside = models.appendingPathComponent("metrics-copy.json")
        try FileManager.default.copyItem(at: url.appendingPathComponent("metrics.json"), to: outside)
        try FileManager.default.removeItem(at: url.appendingPathComponent("metrics.json"))
        try FileManager.default.createSymbolicLink(
            at: url.appendingPathComponent("metrics.json"), withDestinationURL: outside)
        expectRefused(url, naming: "metrics.json")
        #expect(BundleVerifier.verify(url).problems.contains { $0.message.contains("symbolic link") })
    }

    @Test func unlistedAndMissingFilesAreReported() throws {
        let models = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: models) }
        let url = try BundleFixture.publish(in: models)
        try Data("extra".utf8).write(to: url.appendingPathComponent("notes.txt"))
        expectRefused(url, naming: "notes.txt")
        try FileManager.default.removeItem(at: url.appendingPathComponent("notes.txt"))
        try FileManager.default.removeItem(at: url.appendingPathComponent("model.onnx"))
        let problems = BundleVerifier.verify(url).problems
        #expect(problems == [BundleProblem(file: "model.onnx", message: "is missing")])
    }

    @Test func classesMustMatchTheClassifierWidth() throws {
        let models = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: models) }
        let url = try BundleFixture.publish(in: models)
        try rewriteManifest(url) { manifest in
            manifest.classes.append(.user(Manifest.UserEntry(id: 31, name: "New")))
            manifest.users.append(Manifest.UserEntry(id: 31, name: "New"))
        }
        let problems = BundleVerifier.verify(url).problems
        #expect(problems.contains { $0.file == "weights.h5" && $0.message.contains("4 outputs") }, "\(problems)")
        #expect(problems.contains { $0.file == "FaceClassifier.mlmodel" && $0.message.contains("class labels") })
        #expect(problems.contains { $0.file == "model.onnx" })
    }

    /// A class's kind and id follow from its label: a manifest that calls user 17 negative, or
    /// gives user 23 another id, is refused.
    @Test func aClassWhoseKindOrIdContradictsItsLabelIsRefused() throws {
        let models = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: models) }
        let url = try BundleFixture.publish(in: models)
        try rewriteManifest(url) { manifest in
            manifest.classes[2].kind = "negative"
            manifest.classes[3].id = 99
        }
        let problems = BundleVerifier.verify(url).problems.filter { $0.file == "manifest.json" }.map(\.message)
        #expect(problems.contains { $0.hasPrefix("class '17' is of kind 'negative'") }, "\(problems)")
        #expect(problems.contains("user class '23' does not carry its id as its label"), "\(problems)")
    }

    @Test func copiedVersionDirectoryIsRefused() throws {
        let models = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: models) }
        let url = try BundleFixture.publish(in: models)
        let copy = models.appendingPathComponent("9")
        try FileManager.default.copyItem(at: url, to: copy)
        expectRefused(copy, naming: "manifest.json")
    }

    @Test func openingAPlainDirectorySaysItIsNotABundle() throws {
        let directory = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        #expect(throws: BundleError.notABundle(path: directory.path)) { try ModelBundle.open(directory) }
    }

    @Test func exportEmbeddingAnotherManifestHashIsRefused() throws {
        let models = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: models) }
        let staging = try BundleStaging(modelsDirectory: models)
        let model = BundleFixture.model()
        try staging.writeWeights(model)
        let manifest = Manifest(
            version: staging.version, definition: model.definition, users: BundleFixture.users([17, 23]),
            training: [:], seed: 1, dataFingerprint: "x", gitCommit: nil)
        let stale = String(repeating: "ab", count: 32)
        try staging.write(
            BundleFixture.coreML(labels: model.definition.classLabels, manifestSHA256: stale),
            named: "FaceClassifier.mlmodel")
        #expect {
            try staging.publishVersion(manifest: manifest)
        } throws: { error in
            "\(error)".contains("FaceClassifier.mlmodel: embeds manifest SHA-256 \(stale)")
        }
        #expect(try ModelRepository(directory: models).versions().isEmpty)
    }
}
