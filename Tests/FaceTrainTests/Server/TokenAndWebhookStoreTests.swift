import FaceTrain
import Foundation
import Testing

@testable import FaceTrainServer

/// The token store and the webhook journal on their own: what survives a reopen, what a kill can
/// leave, and the HMAC against RFC 4231's vectors.
@Suite struct TokenAndWebhookStoreTests {
    static func folder() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("facetrain-tokens-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// RFC 4231, test cases 1 and 2.
    @Test func hmacMatchesRFC4231() {
        #expect(
            SHA256.hmac(key: Data(repeating: 0x0b, count: 20), message: Data("Hi There".utf8))
                == "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7")
        #expect(
            SHA256.hmac(key: Data("Jefe".utf8), message: Data("what do ya want for nothing?".utf8))
                == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }

    @Test func tokensSurviveAReopenAndLastUseIsWrittenLazily() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try TokenStore(folder: folder)
        store.lastUsedInterval = 3600
        let (kiosk, secret) = try store.create(name: " kiosk ", role: .enrol)
        let (app, _) = try store.create(name: "app", role: .app)
        #expect(kiosk.name == "kiosk" && kiosk.id == 1 && app.id == 2)
        #expect(throws: TokenStoreError.self) { try store.create(name: "bad\u{7}", role: .app) }
        #expect(store.authenticate(secret)?.id == 1)
        #expect(store.authenticate("ft_" + String(repeating: "0", count: 64)) == nil)
        // The first use is written in the background; later ones within the interval stay in memory.
        try store.flush()
        let written = try TokenStore(folder: folder).list()
        #expect(written.first?.lastUsedAt != nil && written.first?.sha256 == SHA256.hash(Data(secret.utf8)))
        try store.revoke(2)
        let reopened = try TokenStore(folder: folder)
        #expect(reopened.list().map(\.id) == [1])
        #expect(try reopened.create(name: "next", role: .admin).token.id == 3, "ids are never reused")
        #expect(throws: TokenStoreError.noSuchToken(id: 2)) { try reopened.revoke(2) }
    }

    /// The admin session key is drawn once per data folder (64 hex digits), kept across reopenings,
    /// differs between folders, and a damaged key file is replaced by a fresh key.
    @Test func theSessionKeyIsDrawnOncePerFolder() throws {
        let folder = try Self.folder()
        let other = try Self.folder()
        defer { for url in [folder, other] { try? FileManager.default.removeItem(at: url) } }
        let key = try TokenStore(folder: folder).sessionKey
        #expect(key.utf8.count == 64 && key.allSatisfy(\.isHexDigit))
        #expect(try TokenStore(folder: folder).sessionKey == key)
        #expect(try TokenStore(folder: other).sessionKey != key)
        let file = folder.appendingPathComponent(TokenStore.sessionKeyName)
        try Data("damaged".utf8).write(to: file)
        let replaced = try TokenStore(folder: folder).sessionKey
        #expect(replaced != key && replaced.utf8.count == 64)
        #expect(try String(contentsOf: file, encoding: .utf8) == replaced)
    }

    /// Without a flush, a use reaches the file by itself within the interval.
    @Test func lastUseIsWrittenInTheBackground() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try TokenStore(folder: folder)
        store.lastUsedInterval = 2
        let (_, secret) = try store.create(name: "app", role: .app)
        #expect(store.authenticate(secret) != nil)
        Thread.sleep(forTimeInterval: 0.2)
        let first = try #require(try TokenStore(folder: folder).list().first?.lastUsedAt)
        Thread.sleep(forTimeInterval: 1.1)
        #expect(store.authenticate(secret) != nil)
        #expect(try TokenStore(folder: folder).list().first?.lastUsedAt == first, "not written at once")
        Thread.sleep(forTimeInterval: 1.3)
        let second = try #require(try TokenStore(folder: folder).list().first?.lastUsedAt)
        #expect(second > first, "written within the interval")
    }

    @Test func theJournalDropsATornLastLineAndWhatIsDone() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let url = URL(string: "http://127.0.0.1:9/hook")!
        let settings = WebhookSettings(urls: [url], secret: Data("secret".utf8))
        let dispatcher = try WebhookDispatcher(settings: settings, folder: folder)
        for index in 0..<3 { dispatcher.send("test.event", ["index": .integer(index)]) }
        let journal = folder.appendingPathComponent(WebhookDispatcher.journalName)
        let lines = try WebhookDispatcher.read(journal)
        #expect(lines.count == 3)
        // Event 0 done for this URL, then a line a kill cut short.
        let done = WebhookJournalLine(
            done: .init(id: lines[0].event!.id, url: url.absoluteString, outcome: "delivered"))
        let handle = try FileHandle(forWritingTo: journal)
        handle.seekToEndOfFile()
        handle.write(try JSONText.data(done, pretty: false) + Data("\n{\"event\":{\"id\":\"to".utf8))
        try handle.close()
        let reopened = try WebhookDispatcher(settings: settings, folder: folder)
        #expect(reopened.pendingCount(url) == 2)
        let kept = try WebhookDispatcher.read(journal).compactMap(\.event?.body)
        #expect(kept.count == 2 && kept[0].contains("\"index\":1") && kept[1].contains("\"index\":2"))
        // A line in the middle that is not a record is not a torn write: it is named, not skipped.
        try Data("garbage\n".utf8 + (try Data(contentsOf: journal))).write(to: journal)
        #expect(throws: DataProblem.self) { try WebhookDispatcher(settings: settings, folder: folder) }
    }
}
