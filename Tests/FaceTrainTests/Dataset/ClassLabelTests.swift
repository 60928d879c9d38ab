import Foundation
import Testing

@testable import FaceTrain

/// The class rule lives in `ClassLabel`: "1" is not a face, "2" an unknown person, any other id a
/// user; labels read and write as the same strings, so the app's contract and old files hold.
@Suite struct ClassLabelTests {
    @Test func labelsParseFromAndPrintAsTheSameStrings() throws {
        #expect(ClassLabel("1") == .notAFace)
        #expect(ClassLabel("2") == .unknownPerson)
        #expect(ClassLabel("17") == .user(17))
        for text in ["1", "2", "3", "17", "1000000"] {
            #expect(try #require(ClassLabel(text)).description == text)
        }
    }

    /// A string that would print back differently, or names no class, is no label.
    @Test(arguments: ["", "0", "-3", "017", "+17", " 17", "17 ", "1.0", "x", "user 17"])
    func otherStringsAreNoLabels(_ text: String) {
        #expect(ClassLabel(text) == nil)
        #expect(throws: ClassLabelError(label: text)) { try ClassLabel.parse(["1", "2", text]) }
    }

    /// Data-folder ids: 1 and 2 are the negative classes, 3 and up users, and the negative numbers
    /// `eval` gives folders not named by an id are neither.
    @Test func idsOfDataFolders() {
        #expect(ClassLabel(id: 1) == .notAFace && ClassLabel(id: 2) == .unknownPerson && ClassLabel(id: 3) == .user(3))
        #expect(ClassLabel(id: 0) == nil && ClassLabel(id: -1) == nil)
        #expect([-1, 0, 1, 2, 3, 40].filter(ClassLabel.isUser(id:)) == [3, 40])
        #expect([-1, 0, 1, 2, 3, 40].filter(ClassLabel.isNegative(id:)) == [1, 2])
        #expect(ClassLabel.negatives.map(\.id) == [1, 2])
        #expect(ClassLabel.negatives.map(\.kindName) == ["negative", "negative"])
        #expect(ClassLabel.user(5).kindName == "user")
        #expect(ClassLabel.negatives.map(\.negativeName) == ["not a face", "unknown person"])
        #expect(ClassLabel.user(5).negativeName == nil)
    }

    @Test func labelsAreJSONStrings() throws {
        let labels: [ClassLabel] = [.notAFace, .unknownPerson, .user(17)]
        let data = try JSONEncoder().encode(labels)
        #expect(String(decoding: data, as: UTF8.self) == #"["1","2","17"]"#)
        #expect(try JSONDecoder().decode([ClassLabel].self, from: data) == labels)
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode([ClassLabel].self, from: Data(#"["017"]"#.utf8))
        }
        #expect(throws: DecodingError.self) { try JSONDecoder().decode([ClassLabel].self, from: Data("[17]".utf8)) }
    }

    /// Every manifest in the fixtures, written by earlier versions, reads with typed classes and
    /// writes back byte for byte.
    @Test func manifestsAlreadyWrittenReadAndWriteTheSameBytes() throws {
        let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Fixtures")
        let manifests = ["golden-0.1.0/models/1", "golden-0.1.0/models/2", "format1-bundle/1"].map {
            fixtures.appendingPathComponent($0).appendingPathComponent("manifest.json")
        }
        for url in manifests {
            let data = try Data(contentsOf: url)
            let manifest = try Manifest.decode(data)
            #expect(try manifest.encoded() == data, "\(url.path)")
            #expect(Array(manifest.classes.map(\.label).prefix(2)) == ClassLabel.negatives, "\(url.path)")
            #expect(manifest.classes.dropFirst(2).allSatisfy { $0.label.isUser && $0.id == $0.label.id })
            #expect(manifest.definition.classLabels == manifest.classes.map(\.label.description))
        }
    }

    /// The rule decides: a user below the threshold becomes an unknown person; a negative class
    /// never does, however unsure.
    @Test func theDecisionRuleActsOnUsersOnly() {
        let rule = DecisionRule(classLabels: [.notAFace, .unknownPerson, .user(3)], threshold: 0.5)
        #expect(rule.decide([0.1, 0.1, 0.8]).label == .user(3))
        #expect(rule.decide([0.3, 0.3, 0.4]).label == .unknownPerson)
        #expect(rule.decide([0.4, 0.3, 0.3]).label == .notAFace)
        #expect(DecisionRule.isUser("3") && !DecisionRule.isUser("1") && !DecisionRule.isUser("2"))
    }
}
