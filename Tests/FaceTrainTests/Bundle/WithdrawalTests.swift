import FaceTrainTestSupport
import Foundation
import Testing

@testable import FaceTrain

/// An erasure's withdrawal: exactly the bundles that list the person (or cannot say whom they
/// list) go, latest.json with them when it names one, and their numbers are never given out again.
@Suite("Withdrawing bundles")
struct WithdrawalTests {
    @Test func bundlesThatListThePersonOrCannotBeReadAreWithdrawn() throws {
        let models = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: models) }
        try BundleFixture.publish(in: models, users: [17, 23])  // 1: lists 23
        try BundleFixture.publish(in: models, users: [17, 31], seed: 2)  // 2: does not
        let damaged = try BundleFixture.publish(in: models, users: [17, 31], seed: 3)  // 3: unreadable manifest
        try Data("{ not json".utf8).write(to: damaged.appendingPathComponent("manifest.json"))
        let repository = ModelRepository(directory: models)
        _ = try repository.publish(version: 2, gate: PublishGate())

        let (versions, unpublished) = try repository.withdraw(trainedOn: [23])
        #expect(versions == [1, 3] && unpublished == nil)
        #expect(try repository.versions() == [2])
        #expect(try repository.latestPointer()?.version == 2, "the published version does not list them")
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: models.path).allSatisfy { !$0.hasPrefix(".withdrawn-") }
        )
        #expect(try repository.withLock { try repository.nextVersion() } == 4, "3 is never given out again")

        // Withdrawing the published version removes latest.json; a second run finds nothing.
        #expect(try repository.withdraw(trainedOn: [31]) == ([2], 2))
        #expect(try repository.latestPointer() == nil && repository.versions().isEmpty)
        #expect(try repository.withdraw(trainedOn: [31]) == ([], nil))
    }
}
