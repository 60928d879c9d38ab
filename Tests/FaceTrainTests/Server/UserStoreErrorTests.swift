import Foundation
import Testing

@testable import FaceTrainServer

/// The user store refuses in its own words, without HTTP; the routes alone choose the status.
@Suite struct UserStoreErrorTests {
    @Test func theStoreRefusesWithDomainErrors() {
        #expect(throws: UserStoreError.invalidField(field: "name", reason: "is empty; give the person's name")) {
            try UserStore.validate(name: "  ", position: nil)
        }
        #expect(throws: UserStoreError.invalidField(field: "position", reason: "is longer than 200 characters")) {
            try UserStore.validate(name: "Ada", position: String(repeating: "x", count: 201))
        }
        #expect(throws: UserStoreError.self) { try UserStore.validate(name: "A\u{202E}da", position: nil) }
    }

    @Test func theRoutesGiveEachRefusalItsStatus() {
        let cases: [(UserStoreError, Int)] = [
            (.noSuchUser(id: 7), 404), (.invalidField(field: "name", reason: "is empty"), 400),
            (.tooManyCrops(id: 7, existing: 199, adding: 2, limit: 200), 409),
        ]
        for (error, status) in cases {
            let client = ClientError(error)
            #expect(client.status == status, "\(error)")
            #expect(client.message == error.description)
        }
        #expect(UserStoreError.noSuchUser(id: 7).description.contains("GET /v1/users"))
    }
}
