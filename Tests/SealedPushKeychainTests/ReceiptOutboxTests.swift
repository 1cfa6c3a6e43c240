import Foundation
import Testing
import SealedPushCrypto
import SealedPushTestSupport
import SealedPushWire
@testable import SealedPushKeychain
#if canImport(Glibc)
import Glibc
#endif

/// The receipt outbox and failure-report window in the store (receipts v1 §2, §3).
@Suite("Receipt outbox", .serialized, .timeLimit(.minutes(10)))
struct ReceiptOutboxTests {
    let token = Base64.encodeURLSafeNoPadding([UInt8](repeating: 1, count: 16))

    func receipt(_ n: Int) -> ReceiptMessage { .delivered(id: "m\(n)", token: token, at: Int64(n), attachments: nil) }

    @Test("an entry whose body would not read back (a padded base64 token) is refused, and the entries already queued stay")
    func malformedEntryRefused() throws {
        let dir = try TempDirectory()
        let outbox = ReceiptOutboxStore(store: try KeychainStore(url: dir.store))
        let t0: Int64 = 1_795_000_000
        for n in 1...3 { try outbox.enqueue(url: "https://r.example/r", message: receipt(n), now: t0) }
        let padded = Base64.encode([UInt8](repeating: 7, count: 32))   // '=' padding: not a receipts v1 token
        #expect(padded.hasSuffix("="))
        do {
            try outbox.enqueue(url: "https://r.example/r", message: .delivered(id: "m9", token: padded, at: t0, attachments: nil), now: t0)
            Issue.record("a receipt with a padded token was queued")
        } catch {
            #expect("\(error)".contains("token must be base64url"), "\(error)")
            #expect(!"\(error)".contains(padded), "the token is not in the message")
        }
        let waiting = try outbox.pending(now: t0)
        #expect(waiting.entries.map(\.message) == (1...3).map(receipt), "the three entries before it are still there")
        #expect(waiting.dropped == 0, "nothing was lost")
    }

    @Test("bounds: beyond capacity the oldest go and are counted; entries older than 7 days go and are counted; settle subtracts what was reported")
    func bounds() throws {
        let dir = try TempDirectory()
        let outbox = ReceiptOutboxStore(store: try KeychainStore(url: dir.store), capacity: 3)
        let t0: Int64 = 1_795_000_000
        for n in 1...5 { try outbox.enqueue(url: "https://r.example/r", message: receipt(n), now: t0 + Int64(n)) }
        var waiting = try outbox.pending(now: t0 + 10)
        #expect(waiting.entries.map(\.message) == [receipt(3), receipt(4), receipt(5)])
        #expect(waiting.entries.map(\.sequence) == [3, 4, 5])
        #expect(waiting.dropped == 2)
        // Exactly 7 days old stays; older goes.
        waiting = try outbox.pending(now: t0 + 3 + 7 * 86_400)
        #expect(waiting.entries.count == 3 && waiting.dropped == 2)
        waiting = try outbox.pending(now: t0 + 4 + 7 * 86_400)
        #expect(waiting.entries.map(\.message) == [receipt(4), receipt(5)])
        #expect(waiting.dropped == 3)
        try outbox.settle(origin: "https://r.example:443", removing: [4], droppedReported: 3, failed: false, now: t0 + 4 + 7 * 86_400)
        waiting = try outbox.pending(now: t0 + 4 + 7 * 86_400)
        #expect(waiting.entries.map(\.message) == [receipt(5)] && waiting.dropped == 0)
        // The default capacity is the spec's 1000 and the age 7 days.
        let defaults = ReceiptOutboxStore(store: try KeychainStore(url: dir.store))
        #expect(defaults.capacity == 1000 && defaults.maximumAgeSeconds == 7 * 86_400)
    }

    /// Writes `bytes` as the outbox item's secret, as a damaged or oversized outbox would hold.
    func plantOutbox(_ store: KeychainStore, _ bytes: [UInt8]) throws {
        try store.modify(itemClass: .genericPassword, service: "sealedpush.receipts", account: "outbox", accessGroup: store.accessGroups[0],
                         accessibility: .alwaysThisDeviceOnly) { _ in SecureBytes(bytes) }
    }

    /// The size of the outbox item's file on disk.
    func outboxFileSize(_ store: KeychainStore) throws -> Int {
        let files = try store.allFiles().filter { $0.string.contains("sealedpush.receipts@outbox") }
        try #require(files.count == 1)
        var st = stat()
        #expect(lstat(files[0].string, &st) == 0)
        return Int(st.st_size)
    }

    @Test("#22: receipts with 2048-byte URLs: every enqueue succeeds, the outbox stays well under the 1 MiB read limit, the oldest are dropped and counted")
    func byteCap() throws {
        let dir = try TempDirectory()
        let store = try KeychainStore(url: dir.store)
        let outbox = ReceiptOutboxStore(store: store)
        let url = "https://r.example/" + String(repeating: "a", count: 2048 - 18)
        #expect(url.utf8.count == ReceiptRequest.maximumURLLength)
        let t0: Int64 = 1_795_000_000
        // 340 such entries as the outbox held them before #22 (one write: 340 enqueues take a minute in a debug
        // build), still readable; a few more made the item too large to read again.
        let planted: [JSONValue] = (1...340).map { n in
            .object(JSONObject([("seq", .int(Int64(n))), ("url", .string(url)), ("queued_at", .int(t0)), ("body", .object(receipt(n).jsonObject()))]))
        }
        try plantOutbox(store, JSON.serialize(.object(JSONObject([("next", .int(341)), ("dropped", .int(0)), ("entries", .array(planted))]))))
        // Ten enqueues past the cap (each rewrites the whole outbox: about half a second apiece in a debug build,
        // three times that under AddressSanitizer).
        for n in 341...350 { try outbox.enqueue(url: url, message: receipt(n), now: t0) }
        let waiting = try outbox.pending(now: t0)
        #expect(waiting.entries.count + waiting.dropped == 350)
        #expect(waiting.dropped > 0 && waiting.entries.count > 100)
        #expect(waiting.entries.last?.message == receipt(350))
        #expect(waiting.entries.first?.message == receipt(waiting.dropped + 1))
        // The encoded outbox is capped at 512 KiB, so its file (base64 of the sealed bytes) stays under 1 MiB.
        let item = try store.read(itemClass: .genericPassword, service: "sealedpush.receipts", account: "outbox", accessGroup: store.accessGroups[0])
        #expect((item.data?.count ?? .max) <= 512 * 1024)
        #expect(try outboxFileSize(store) < 800 * 1024)
    }

    @Test("#22: each entry is bounded: a URL over 2048 bytes or not a receipt URL, and a body over 4096 bytes, are refused")
    func entryBound() throws {
        let dir = try TempDirectory()
        let outbox = ReceiptOutboxStore(store: try KeychainStore(url: dir.store))
        let long = "https://r.example/" + String(repeating: "a", count: 2048 - 17)
        #expect(throws: KeychainError.self) { try outbox.enqueue(url: long, message: receipt(1), now: 1) }
        #expect(throws: KeychainError.self) { try outbox.enqueue(url: "http://example.com/r", message: receipt(1), now: 1) }
        let huge = ReceiptMessage.delivered(id: String(repeating: "\u{1F600}", count: 1100), token: token, at: 1, attachments: nil)
        #expect(throws: KeychainError.self) { try outbox.enqueue(url: "https://r.example/r", message: huge, now: 1) }
        #expect(try outbox.entries().entries.isEmpty)
    }

    @Test("#22: an outbox item over the read limit is replaced by a fresh outbox that counts one lost entry; status, enqueue and pending work again")
    func recoverOversized() throws {
        let dir = try TempDirectory()
        let store = try KeychainStore(url: dir.store)
        let outbox = ReceiptOutboxStore(store: store)
        try plantOutbox(store, [UInt8](repeating: 0x20, count: 1_100_000))
        #expect(try outboxFileSize(store) > 1 << 20)
        var waiting = try outbox.entries()
        #expect(waiting.entries.isEmpty && waiting.dropped == 1)
        try outbox.enqueue(url: "https://r.example/r", message: receipt(1), now: 10)
        waiting = try outbox.pending(now: 10)
        #expect(waiting.entries.map(\.message) == [receipt(1)] && waiting.dropped == 1)
        #expect(try outboxFileSize(store) < 4096)
    }

    @Test("#22: an outbox item that is not as written is replaced by a fresh outbox that counts the lost entries when it can")
    func recoverUndecodable() throws {
        let dir = try TempDirectory()
        let store = try KeychainStore(url: dir.store)
        let outbox = ReceiptOutboxStore(store: store)
        // Readable JSON, entries not as written: 3 entries lost plus the 2 already counted.
        try plantOutbox(store, Array(#"{"next": 9, "dropped": 2, "entries": [{"seq": 1, "url": "https://a.example/r"}, {"seq": 2}, 7]}"#.utf8))
        try outbox.enqueue(url: "https://r.example/r", message: receipt(1), now: 10)
        var waiting = try outbox.entries()
        #expect(waiting.entries.map(\.message) == [receipt(1)] && waiting.dropped == 5)
        #expect(waiting.entries.first.map { $0.sequence >= 9 } == true)
        // Not JSON at all: the count is not knowable, so one.
        try plantOutbox(store, Array("not json".utf8))
        waiting = try outbox.pending(now: 10)
        #expect(waiting.entries.isEmpty && waiting.dropped == 1)
    }

    @Test("the outbox file is an item sealed under the store key: 0600, no token in clear")
    func atRest() throws {
        let dir = try TempDirectory()
        let store = try KeychainStore(url: dir.store)
        try ReceiptOutboxStore(store: store).enqueue(url: "https://r.example/r", message: receipt(1), now: 1)
        let files = try store.allFiles().filter { $0.string.contains("sealedpush.receipts@outbox") }
        #expect(files.count == 1)
        for file in files {
            var st = stat()
            #expect(lstat(file.string, &st) == 0)
            #expect(st.st_mode & 0o777 == 0o600)
            let bytes = try Data(contentsOf: URL(fileURLWithPath: file.string))
            #expect(bytes.range(of: Data(token.utf8)) == nil)
        }
    }

    @Test("report window: one report per (reason, kid) per 10 minutes; failures inside it are counted into the next")
    func window() throws {
        let dir = try TempDirectory()
        let outbox = ReceiptOutboxStore(store: try KeychainStore(url: dir.store))
        let kid = KeyID(hex: "e2a0cdd02cd5f429")!
        let t0: Int64 = 1_795_000_000
        #expect(try outbox.noteFailure(reason: .unknownKey, kid: kid, now: t0, window: 600) == 1)
        #expect(try outbox.noteFailure(reason: .unknownKey, kid: kid, now: t0 + 1, window: 600) == nil)
        #expect(try outbox.noteFailure(reason: .unknownKey, kid: kid, now: t0 + 599, window: 600) == nil)
        // Another pair has its own window.
        #expect(try outbox.noteFailure(reason: .unknownKey, kid: nil, now: t0 + 2, window: 600) == 1)
        #expect(try outbox.noteFailure(reason: .keychainLocked, kid: kid, now: t0 + 3, window: 600) == 1)
        // At 600 s the window is over: this report stands for itself and the two suppressed.
        #expect(try outbox.noteFailure(reason: .unknownKey, kid: kid, now: t0 + 600, window: 600) == 3)
        #expect(try outbox.noteFailure(reason: .unknownKey, kid: kid, now: t0 + 601, window: 600) == nil)
        #expect(try outbox.noteFailure(reason: .unknownKey, kid: kid, now: t0 + 1300, window: 600) == 2)
    }

    @Test("report URL: kept in the store, https or loopback http only, removable")
    func reportURL() throws {
        let dir = try TempDirectory()
        let outbox = ReceiptOutboxStore(store: try KeychainStore(url: dir.store))
        #expect(try outbox.reportURL() == nil)
        try outbox.setReportURL("http://127.0.0.1:8089/reports")
        #expect(try outbox.reportURL() == "http://127.0.0.1:8089/reports")
        #expect(throws: KeychainError.self) { try outbox.setReportURL("http://example.com/reports") }
        try outbox.setReportURL(nil)
        #expect(try outbox.reportURL() == nil)
    }
}
