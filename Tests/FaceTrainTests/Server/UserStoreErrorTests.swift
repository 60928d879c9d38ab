import Foundation
import Testing

@testable import FaceTrainServer

/// The user store refuses in its own words, without HTTP; the routes alone choose the status.
@Suite struct UserStoreErrorTests {
    @Test func theStoreRefusesWithDomainErrors() {
        #expect(throws: UserStoreError.invalidField(field: "name", reason: "is empty; give the person's name")) {
            try UserStore.validate(name: "  ", position: nil)
        }
        let tooLong = UserStoreError.invalidField(
            field: "position", reason: "is longer than 200 characters (Unicode code points)")
        #expect(throws: tooLong) { try UserStore.validate(name: "Ada", position: String(repeating: "x", count: 201)) }
        // 100 letters with one accent each: 100 characters but 200 code points, as JSON Schema counts.
        #expect(throws: Never.self) {
            try UserStore.validate(name: "Ada", position: String(repeating: "e\u{301}", count: 100))
        }
        #expect(throws: tooLong) {
            try UserStore.validate(name: "Ada", position: String(repeating: "e\u{301}", count: 100) + "x")
        }
        #expect(throws: UserStoreError.self) { try UserStore.validate(name: "A\u{202E}da", position: nil) }
    }

    /// Invisible characters (word joiner, invisible times, a tag, Hangul fillers, a blank Braille
    /// pattern) and a letter under 10,000 combining marks are refused; names in many scripts, with
    /// joiners, soft hyphens, the Mongolian vowel separator, accents and emoji sequences, pass.
    @Test func namesMustShowAsTheyAre() throws {
        let hidden = ["\u{2060}", "\u{2062}", "\u{E0041}", "\u{3164}", "\u{115F}", "\u{2800}", "\u{FEFF}"]
        for scalar in hidden {
            #expect(throws: UserStoreError.self, "\(scalar.unicodeScalars.first!.value)") {
                try UserStore.validate(name: "Ada\(scalar)Lovelace", position: nil)
            }
        }
        let pile = "Z" + String(repeating: "\u{0301}", count: 10_000)
        #expect(pile.count == 1, "one character: the 200-character limit alone lets it through")
        #expect(throws: UserStoreError.self) { try UserStore.validate(name: pile, position: nil) }
        #expect(throws: UserStoreError.self) { try UserStore.validate(name: "Ada", position: pile) }
        let names = [
            "Zoë Ñúñez", "Nguyễn Thị Minh Khai", "مریم\u{200C}زاده", "Bar\u{00AD}bara", "李小龍", "Ольга",
            "👩\u{1F3FD}\u{200D}👩\u{1F3FB}\u{200D}👧\u{1F3FE}\u{200D}👦\u{1F3FF}", "हिन्दी नाम", "ཀྲྀ", "ᠨᠠᠷ\u{180E}ᠠ",
        ]
        for name in names { try UserStore.validate(name: name, position: nil) }
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
