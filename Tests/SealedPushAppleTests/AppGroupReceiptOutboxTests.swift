// AppGroupReceiptOutbox (SealedPushApple) against the behaviours the Linux ReceiptOutboxStore is tested for
// (Tests/SealedPushKeychainTests/ReceiptOutboxTests.swift and the courier tests of SealedPushReceiverTests), over
// real files in a temporary directory.
#if os(Linux)
import Testing
import Foundation
import Glibc
import Synchronization
import Dispatch
@testable import SealedPushApple
import SealedPushReceiver
import SealedPushWire
import SealedPushCrypto
import SealedPushTestSupport

/// A transport that answers by the URL's host (accepting hosts it was not told about) and records every POST.
final class HostRoutingTransport: ReceiptTransport {
    let answers: Mutex<[String: ReceiptPostResult]>
    let posts = Mutex<[(url: String, body: JSONObject)]>([])

    init(_ answers: [String: ReceiptPostResult]) { self.answers = Mutex(answers) }

    func post(_ body: [UInt8], to url: String, deadline: ContinuousClock.Instant) async -> ReceiptPostResult {
        if case let .object(o)? = try? JSON.parse(body) { posts.withLock { $0.append((url, o)) } }
        let host = HTTPURL(url)?.host ?? ""
        return answers.withLock { $0[host] } ?? .accepted(status: 204)
    }

    /// The bodies posted to `host`, in order.
    func bodies(to host: String) -> [JSONObject] { posts.withLock { $0.filter { HTTPURL($0.url)?.host == host }.map(\.body) } }
}

extension AppGroupAndReceiptTests {
    @Suite("AppGroupReceiptOutbox", .timeLimit(.minutes(10))) struct AppGroupReceiptOutboxTests {
        init() { TestLogging.quiet() }
        let token = Base64.encodeURLSafeNoPadding([UInt8](repeating: 1, count: 16))
        let t0: Int64 = 1_795_000_000

        func receipt(_ n: Int) -> ReceiptMessage { .delivered(id: "m\(n)", token: token, at: Int64(n), attachments: nil) }

        func outbox(_ dir: AppGroupTempDirectory, capacity: Int = 1000, files: RecordingFiles = RecordingFiles(),
                    lockTimeout: Duration = .seconds(1)) -> AppGroupReceiptOutbox {
            AppGroupReceiptOutbox(directory: dir.url, capacity: capacity, maximumAgeSeconds: 7 * 86_400, maximumEncodedBytes: 512 * 1024,
                                  backoffBaseSeconds: 60, backoffCapSeconds: 3600, lockTimeout: lockTimeout, logger: .init(label: "test"), files: files)
        }

        @Test("bounds: beyond capacity the oldest go and are counted; entries older than 7 days go and are counted; settle subtracts what was reported")
        func bounds() throws {
            let dir = try AppGroupTempDirectory()
            let outbox = outbox(dir, capacity: 3)
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
            let defaults = AppGroupReceiptOutbox(directory: dir.url)
            #expect(defaults.capacity == 1000 && defaults.maximumAgeSeconds == 24 * 3600 && defaults.maximumEncodedBytes == 512 * 1024)
            #expect(defaults.backoffBaseSeconds == 60 && defaults.backoffCapSeconds == 3600)
        }

        @Test("receipts with 2048-byte URLs: the encoded outbox stays within its byte bound, the oldest are dropped and counted")
        func byteCap() throws {
            let dir = try AppGroupTempDirectory()
            // A 64 KiB bound (the default, 512 KiB, is checked in `bounds`): the same code, a tenth of the work in a debug build.
            let outbox = AppGroupReceiptOutbox(directory: dir.url, capacity: 1000, maximumAgeSeconds: 7 * 86_400, maximumEncodedBytes: 64 * 1024,
                                               backoffBaseSeconds: 60, backoffCapSeconds: 3600, lockTimeout: .seconds(1), logger: .init(label: "test"),
                                               files: RecordingFiles())
            let url = "https://r.example/" + String(repeating: "a", count: 2048 - 18)
            #expect(url.utf8.count == ReceiptRequest.maximumURLLength)
            // 40 such entries (about 90 KB) written at once, as an outbox with a larger bound would have left them, then five more.
            var planted = ReceiptOutboxState()
            for n in 1...40 { planted.entries.append(ReceiptOutboxEntry(sequence: UInt64(n), url: url, message: receipt(n), queuedAt: t0)) }
            planted.next = 41
            planted.origins["https://r.example:443"] = ReceiptOutboxState.Origin(touched: t0)
            try Data(planted.encoded()).write(to: dir.file(AppGroupReceiptOutbox.outboxFileName))
            #expect(try outbox.entries().entries.count == 40)
            for n in 41...45 { try outbox.enqueue(url: url, message: receipt(n), now: t0) }
            let waiting = try outbox.pending(now: t0)
            #expect(waiting.entries.count + waiting.dropped == 45)
            #expect(waiting.dropped > 0 && waiting.entries.count > 20)
            #expect(waiting.entries.last?.message == receipt(45))
            #expect(waiting.entries.first?.message == receipt(waiting.dropped + 1))
            #expect(try Data(contentsOf: dir.file(AppGroupReceiptOutbox.outboxFileName)).count <= 64 * 1024)
        }

        @Test("each entry is bounded: a URL over 2048 bytes or not a receipt URL, and a body over 4096 bytes, are refused (invalidEntry)")
        func entryBound() throws {
            let dir = try AppGroupTempDirectory()
            let outbox = outbox(dir)
            let long = "https://r.example/" + String(repeating: "a", count: 2048 - 17)
            #expect(throws: AppGroupStoreError.invalidEntry("the receipt URL is longer than 2048 bytes")) {
                try outbox.enqueue(url: long, message: receipt(1), now: 1)
            }
            #expect(throws: AppGroupStoreError.self) { try outbox.enqueue(url: "http://example.com/r", message: receipt(1), now: 1) }
            let huge = ReceiptMessage.delivered(id: String(repeating: "\u{1F600}", count: 1100), token: token, at: 1, attachments: nil)
            #expect(throws: AppGroupStoreError.self) { try outbox.enqueue(url: "https://r.example/r", message: huge, now: 1) }
            #expect(try outbox.entries().entries.isEmpty)
            #expect(AppGroupStoreError.invalidEntry("the receipt URL is longer than 2048 bytes").description.hasSuffix("it was not stored"))
        }

        @Test("an outbox over the read limit is replaced by a fresh outbox counting one lost entry; enqueue and pending work again")
        func recoverOversized() throws {
            let dir = try AppGroupTempDirectory()
            let outbox = outbox(dir)
            try Data([UInt8](repeating: 0x20, count: 1_100_000)).write(to: dir.file(AppGroupReceiptOutbox.outboxFileName))
            var waiting = try outbox.entries()
            #expect(waiting.entries.isEmpty && waiting.dropped == 1)
            try outbox.enqueue(url: "https://r.example/r", message: receipt(1), now: 10)
            waiting = try outbox.pending(now: 10)
            #expect(waiting.entries.map(\.message) == [receipt(1)] && waiting.dropped == 1)
            #expect(try Data(contentsOf: dir.file(AppGroupReceiptOutbox.outboxFileName)).count < 4096)
        }

        @Test("an outbox that is not as written is replaced by a fresh outbox that counts the lost entries when it can")
        func recoverUndecodable() throws {
            let dir = try AppGroupTempDirectory()
            let outbox = outbox(dir)
            let file = dir.file(AppGroupReceiptOutbox.outboxFileName)
            try Data(#"{"next": 9, "dropped": 2, "origins": [], "entries": [{"seq": 1, "url": "https://a.example/r"}, {"seq": 2}, 7]}"#.utf8).write(to: file)
            try outbox.enqueue(url: "https://r.example/r", message: receipt(1), now: 10)
            var waiting = try outbox.entries()
            #expect(waiting.entries.map(\.message) == [receipt(1)] && waiting.dropped == 5)
            #expect(waiting.entries.first.map { $0.sequence >= 9 } == true)
            // The entry whose URL reads is counted at its origin, to be reported there only.
            #expect(try outbox.queues(now: 10).first { $0.origin == "https://a.example:443" }?.dropped == 1)
            // Not JSON at all: the count is not knowable, so one.
            try Data("not json".utf8).write(to: file)
            waiting = try outbox.pending(now: 10)
            #expect(waiting.entries.isEmpty && waiting.dropped == 1)
        }

        @Test("protection: the outbox and tickets completeUntilFirstUserAuthentication, the report window none, lock files none; files 0600")
        func atRest() throws {
            let dir = try AppGroupTempDirectory()
            let files = RecordingFiles()
            let outbox = outbox(dir, files: files)
            try outbox.enqueue(url: "https://r.example/r", message: receipt(1), now: 1)
            _ = try outbox.noteFailure(reason: .keychainLocked, kid: nil, now: 1, window: 600)
            try outbox.keepTicket(RevealReceiptTicket(request: ReceiptRequest(url: "https://r.example/r", token: token), messageID: "m", keepUntil: 100),
                                  requestIdentifier: "req", now: 1)
            #expect(files.classes(of: AppGroupReceiptOutbox.outboxFileName) == [.completeUntilFirstUserAuthentication])
            #expect(files.classes(of: AppGroupReceiptOutbox.reportWindowFileName) == [.noProtection])
            #expect(files.classes(of: AppGroupReceiptOutbox.revealTicketsFileName) == [.completeUntilFirstUserAuthentication])
            for name in [AppGroupReceiptOutbox.outboxFileName, AppGroupReceiptOutbox.reportWindowFileName, AppGroupReceiptOutbox.revealTicketsFileName] {
                #expect(files.classes(of: name + ".lock") == [.noProtection])
                let mode = try #require(try FileManager.default.attributesOfItem(atPath: dir.file(name).path)[.posixPermissions] as? Int)
                #expect(mode & 0o777 == 0o600)
            }
            // The window holds no token, id or URL.
            let window = Array(try Data(contentsOf: dir.file(AppGroupReceiptOutbox.reportWindowFileName)))
            #expect(!contains(window, Array(token.utf8)) && !contains(window, Array("r.example".utf8)))
        }

        @Test("report window: one report per (reason, kid) per 10 minutes; failures inside it are counted into the next")
        func window() throws {
            let dir = try AppGroupTempDirectory()
            let outbox = outbox(dir)
            let kid = KeyID(hex: "e2a0cdd02cd5f429")!
            #expect(try outbox.noteFailure(reason: .unknownKey, kid: kid, now: t0, window: 600) == 1)
            #expect(try outbox.noteFailure(reason: .unknownKey, kid: kid, now: t0 + 1, window: 600) == nil)
            #expect(try outbox.noteFailure(reason: .unknownKey, kid: kid, now: t0 + 599, window: 600) == nil)
            #expect(try outbox.noteFailure(reason: .unknownKey, kid: nil, now: t0 + 2, window: 600) == 1)
            #expect(try outbox.noteFailure(reason: .keychainLocked, kid: kid, now: t0 + 3, window: 600) == 1)
            #expect(try outbox.noteFailure(reason: .unknownKey, kid: kid, now: t0 + 600, window: 600) == 3)
            #expect(try outbox.noteFailure(reason: .unknownKey, kid: kid, now: t0 + 601, window: 600) == nil)
            #expect(try outbox.noteFailure(reason: .unknownKey, kid: kid, now: t0 + 1300, window: 600) == 2)
            // A damaged window starts empty (a report may go out early) rather than ending reports for good.
            try Data("[1, 2".utf8).write(to: dir.file(AppGroupReceiptOutbox.reportWindowFileName))
            #expect(try outbox.noteFailure(reason: .unknownKey, kid: kid, now: t0 + 1301, window: 600) == 1)
            // Bounded: a flood of ever new key ids inside one window keeps the most recently reported pairs (1000 by default).
            #expect(AppGroupReceiptOutbox(directory: dir.url).reportWindowPairs == 1000)
            let small = AppGroupReceiptOutbox(directory: dir.url, capacity: 1000, maximumAgeSeconds: 7 * 86_400, maximumEncodedBytes: 512 * 1024,
                                              backoffBaseSeconds: 60, backoffCapSeconds: 3600, lockTimeout: .seconds(1), logger: .init(label: "test"),
                                              files: RecordingFiles(), reportWindowPairs: 10)
            for n in 0..<15 {
                let junk = KeyID(publicKey: [UInt8](repeating: UInt8(n), count: 32))
                #expect(try small.noteFailure(reason: .decryptionFailed, kid: junk, now: t0 + 2000 + Int64(n), window: 600) == 1)
            }
            let rows = try JSON.parse(Array(Data(contentsOf: dir.file(AppGroupReceiptOutbox.reportWindowFileName))))
            if case let .array(list) = rows {
                #expect(list.count == 10)
                #expect(list.compactMap { $0.objectValue?["last"]?.intValue }.min() == t0 + 2005)
            } else {
                Issue.record("the report window is not an array")
            }
        }

        @Test("revealed receipt tickets: taken once per message id (the other notification's ticket goes too); expired ones are not returned; bounded")
        func tickets() throws {
            let dir = try AppGroupTempDirectory()
            let outbox = outbox(dir)
            let ticket = RevealReceiptTicket(request: ReceiptRequest(url: "https://r.example/r", token: token), messageID: "m", keepUntil: 100)
            try outbox.keepTicket(ticket, requestIdentifier: "n1", now: 1)
            try outbox.keepTicket(ticket, requestIdentifier: "n2", now: 1)
            #expect(try outbox.takeTicket(requestIdentifier: "n2", now: 2) == ticket)
            #expect(try outbox.takeTicket(requestIdentifier: "n1", now: 2) == nil, "a revealed receipt goes out once per message id")
            try outbox.keepTicket(ticket, requestIdentifier: "n3", now: 1)
            #expect(try outbox.takeTicket(requestIdentifier: "n3", now: 101) == nil, "expired")
            for n in 0..<(AppGroupReceiptOutbox.maximumRevealTickets + 3) {
                let t = RevealReceiptTicket(request: ticket.request, messageID: "m\(n)", keepUntil: 1000)
                try outbox.keepTicket(t, requestIdentifier: "r\(n)", now: 1)
            }
            #expect(try outbox.takeTicket(requestIdentifier: "r0", now: 2) == nil, "the oldest went past the bound")
            #expect(try outbox.takeTicket(requestIdentifier: "r3", now: 2)?.messageID == "m3")
            // A damaged ticket file starts empty: no ticket, never an error for the message.
            try Data("{".utf8).write(to: dir.file(AppGroupReceiptOutbox.revealTicketsFileName))
            #expect(try outbox.takeTicket(requestIdentifier: "r4", now: 2) == nil)
        }

        @Test("concurrent writers (separate instances and open files, as the app and its extensions are) lose no entry")
        func concurrentWriters() throws {
            let dir = try AppGroupTempDirectory()
            let (url, token) = (dir.url, token)
            let failures = Mutex(0)
            DispatchQueue.concurrentPerform(iterations: 6) { worker in
                let outbox = AppGroupReceiptOutbox(directory: url, lockTimeout: .seconds(60))
                for i in 0..<5 {
                    do {
                        try outbox.enqueue(url: "https://w\(worker).example/r", message: .delivered(id: "\(worker)-\(i)", token: token, at: 1, attachments: nil),
                                           now: 1)
                    } catch { failures.withLock { $0 += 1 } }
                }
            }
            #expect(failures.withLock { $0 } == 0)
            let entries = try AppGroupReceiptOutbox(directory: url).entries().entries
            #expect(entries.count == 30 && Set(entries.map(\.sequence)).count == 30)
        }

        @Test("a lock held by another process: a bounded wait, then lockTimeout; nothing changed")
        func lockTimeout() throws {
            let dir = try AppGroupTempDirectory()
            let outbox = outbox(dir, lockTimeout: .milliseconds(50))
            try outbox.enqueue(url: "https://r.example/r", message: receipt(1), now: 1)
            let held = HeldLock(dir.file(AppGroupReceiptOutbox.outboxFileName + ".lock"))
            let start = ContinuousClock.now
            #expect(throws: AppGroupStoreError.lockTimeout(file: "receipt-outbox.json", milliseconds: 50)) {
                try outbox.enqueue(url: "https://r.example/r", message: receipt(2), now: 1)
            }
            #expect(ContinuousClock.now - start < .seconds(2))
            withExtendedLifetime(held) {}
            #expect(try outbox.entries().entries.map(\.message) == [receipt(1)])
        }

        @Test("an origin that black-holes or answers 3xx/401/5xx holds up no other origin's receipts, and backs off (exponential, capped, durable)",
              arguments: [ReceiptPostResult.failed, .refused(status: 302), .refused(status: 401), .refused(status: 503)])
        func originsAreIndependent(_ badAnswer: ReceiptPostResult) async throws {
            let dir = try AppGroupTempDirectory()
            let token = ReceiptRequest.makeToken()
            for (n, host) in ["bad.example", "good.example", "bad.example", "good.example"].enumerated() {
                try outbox(dir).enqueue(url: "https://\(host)/r", message: .delivered(id: "\(host)-\(n)", token: token, at: Int64(n), attachments: nil), now: t0)
            }
            let transport = HostRoutingTransport(["bad.example": badAnswer])
            // A new courier and outbox value each time (as another process would make): the backoff is on disk.
            func flush(_ now: Int64) async -> OutboxFlushSummary {
                await ReceiptCourier(transport: transport, outbox: outbox(dir), timer: ManualClock()).flush(now: now)
            }
            var summary = await flush(t0)
            #expect(transport.bodies(to: "good.example").map { $0["id"] } == [.string("good.example-1"), .string("good.example-3")])
            #expect(transport.bodies(to: "bad.example").count == 1)
            #expect(summary == OutboxFlushSummary(sent: 2, rejected: 0, remaining: 2))
            summary = await flush(t0 + 59)
            #expect(transport.bodies(to: "bad.example").count == 1)
            #expect(summary == OutboxFlushSummary(sent: 0, rejected: 0, remaining: 2))
            _ = await flush(t0 + 60)
            #expect(transport.bodies(to: "bad.example").count == 2)
            _ = await flush(t0 + 60 + 119)
            #expect(transport.bodies(to: "bad.example").count == 2)
            var now = t0 + 60 + 120
            _ = await flush(now)
            #expect(transport.bodies(to: "bad.example").count == 3)
            for round in 4...8 {
                now += 3600
                _ = await flush(now)
                #expect(transport.bodies(to: "bad.example").count == round)
            }
            // A device clock set back by a day does not strand the origin behind a retry time a day away.
            _ = await flush(now - 86_400)
            #expect(transport.bodies(to: "bad.example").count == 9)
            transport.answers.withLock { $0 = [:] }
            now += 7200
            summary = await flush(now)
            #expect(summary == OutboxFlushSummary(sent: 2, rejected: 0, remaining: 0))
            #expect(transport.bodies(to: "bad.example").suffix(2).map { $0["id"] } == [.string("bad.example-0"), .string("bad.example-2")])
            #expect(try outbox(dir).entries().entries.isEmpty)
        }

        @Test("\"dropped\" goes only to the origin whose entries were dropped, never to another sender's collector")
        func droppedPerOrigin() async throws {
            let dir = try AppGroupTempDirectory()
            let outbox = outbox(dir, capacity: 2)
            let token = ReceiptRequest.makeToken()
            for (n, host) in ["a.example", "a.example", "b.example", "b.example"].enumerated() {
                try outbox.enqueue(url: "https://\(host)/r", message: .delivered(id: "\(host)-\(n)", token: token, at: Int64(n), attachments: nil), now: t0)
            }
            #expect(try outbox.entries().dropped == 2)
            let transport = HostRoutingTransport([:])
            var summary = await ReceiptCourier(transport: transport, outbox: outbox, timer: ManualClock()).flush(now: t0)
            #expect(summary == OutboxFlushSummary(sent: 2, rejected: 0, remaining: 0))
            #expect(transport.bodies(to: "b.example").map { $0["dropped"] } == [nil, nil])
            #expect(try outbox.entries().dropped == 2)
            try outbox.enqueue(url: "https://a.example/r", message: .delivered(id: "a-9", token: token, at: 9, attachments: nil), now: t0)
            summary = await ReceiptCourier(transport: transport, outbox: outbox, timer: ManualClock()).flush(now: t0)
            #expect(summary == OutboxFlushSummary(sent: 1, rejected: 0, remaining: 0))
            #expect(transport.bodies(to: "a.example").map { $0["dropped"] } == [.int(2)])
            #expect(try outbox.entries().dropped == 0)
        }

        @Test("the courier over the app group outbox: a receipt without an answer is queued, a final refusal removed, a later flush sends the rest")
        func courier() async throws {
            let dir = try AppGroupTempDirectory()
            let outbox = outbox(dir)
            let transport = HostRoutingTransport(["down.example": .failed, "gone.example": .refused(status: 404)])
            let courier = ReceiptCourier(transport: transport, outbox: outbox, timer: ManualClock())
            let deadline = ContinuousClock.now.advanced(by: .seconds(3600))
            let token = ReceiptRequest.makeToken()
            #expect(await courier.sendReceipt(ReceiptRequest(url: "https://down.example/r", token: token), messageID: "m1", attachments: nil,
                                              now: t0, deadline: deadline) == .queued)
            #expect(await courier.sendReceipt(ReceiptRequest(url: "https://gone.example/r", token: token), messageID: "m2", attachments: nil,
                                              now: t0, deadline: deadline) == .queued)
            #expect(try outbox.entries().entries.count == 2)
            var summary = await courier.flush(now: t0)
            #expect(summary == OutboxFlushSummary(sent: 0, rejected: 1, remaining: 1))
            transport.answers.withLock { $0 = [:] }
            summary = await courier.flush(now: t0 + 60)
            #expect(summary == OutboxFlushSummary(sent: 1, rejected: 0, remaining: 0))
            #expect(transport.bodies(to: "down.example").last?["id"] == .string("m1"))
        }
    }
}
#endif
