import FaceTrain
import Foundation
import Testing

@testable import FaceTrainServer

/// A deletion that cannot finish (users.json cannot be written: a full disk) leaves the person as
/// they were, crops in view, instead of hiding them behind an error.
@Suite("user store deletion")
struct UserStoreDeletionTests {
    @Test func aDeletionThatCannotWriteUsersJSONPutsTheCropsBack() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("facetrain-store-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let store = try UserStore(root: root)
        let user = try store.create(name: "Ada", position: nil)
        let pixels = (0..<(32 * 32 * 3)).map { UInt8($0 % 251) }
        let crop = try JPEGWriter.encode(rgb: pixels, width: 32, height: 32, quality: 90)
        let outcomes = try store.addPhotos(user.id, files: [FormFile(field: "photos", fileName: "a.jpg", data: crop)])
        #expect(outcomes.map(\.result) == ["stored"])

        // users.json replaced by a folder: the rename that would write it fails, as on a full disk.
        let usersJSON = root.appendingPathComponent("users.json")
        let saved = try Data(contentsOf: usersJSON)
        try FileManager.default.removeItem(at: usersJSON)
        try FileManager.default.createDirectory(
            at: usersJSON.appendingPathComponent("blocker"), withIntermediateDirectories: true)
        #expect(throws: (any Error).self) { try store.delete(user.id) }
        #expect(store.user(user.id)?.crops == 1)
        #expect(try store.storedCrops(user.id).count == 1)
        let folder = root.appendingPathComponent(String(user.id))
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).count == 1)
        #expect(!FileManager.default.fileExists(atPath: root.appendingPathComponent(".deleted-\(user.id)").path))

        // With the disk back, the deletion goes through, and a new store agrees.
        try FileManager.default.removeItem(at: usersJSON)
        try saved.write(to: usersJSON)
        try store.delete(user.id)
        #expect(store.user(user.id) == nil && !FileManager.default.fileExists(atPath: folder.path))
        #expect(try UserStore(root: root).list().isEmpty)
    }
}
