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
@Suite("Receipt outbox", .serialized)
struct ReceiptOutboxTests {
    let token = Base64.encodeURLSafeNoPadding([UInt8](repeating: 1, count: 16))

    func receipt(_ n: Int) -> ReceiptMessage { .delivered(id: "m\(n)", token: token, at: Int64(n), attachments: nil) }

    @Test("bounds: beyond capacity the oldest go and are counted; entries older than 7 days go and are counted; remove subtracts what was reported")
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
        try outbox.remove(sequences: [4], droppedReported: 3)
        waiting = try outbox.pending(now: t0 + 4 + 7 * 86_400)
        #expect(waiting.entries.map(\.message) == [receipt(5)] && waiting.dropped == 0)
        // The default capacity is the spec's 1000 and the age 7 days.
        let defaults = ReceiptOutboxStore(store: try KeychainStore(url: dir.store))
        #expect(defaults.capacity == 1000 && defaults.maximumAgeSeconds == 7 * 86_400)
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
