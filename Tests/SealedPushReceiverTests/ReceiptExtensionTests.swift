import Testing
import Foundation
import Synchronization
import SealedPushCrypto
import SealedPushWire
import SealedPushKeychain
import SealedPushDevice
import SealedPushReceiver
import SealedPushSender
import SealedPushTestSupport

/// The injected device time (Unix seconds), moved by hand.
final class TestTime: Sendable {
    let value = Mutex<Int64>(0)
}

/// A test precondition that did not hold.
struct ReceiptTestError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A transport that records what it was asked to POST and answers as told.
final class RecordingTransport: ReceiptTransport {
    let posts = Mutex<[(url: String, body: JSONObject)]>([])
    /// Every body as sent, bytes and all (padding included).
    let raw = Mutex<[[UInt8]]>([])
    let answer: Mutex<ReceiptPostResult>
    let hang: Bool

    init(answer: ReceiptPostResult = .accepted(status: 204), hang: Bool = false) {
        self.answer = Mutex(answer)
        self.hang = hang
    }

    func post(_ body: [UInt8], to url: String, deadline: ContinuousClock.Instant) async -> ReceiptPostResult {
        raw.withLock { $0.append(body) }
        if case let .object(o)? = try? JSON.parse(body) { posts.withLock { $0.append((url, o)) } }
        if hang {
            try? await Task.sleep(for: .seconds(30))
            return .failed
        }
        return answer.withLock { $0 }
    }

    var bodies: [JSONObject] { posts.withLock { $0.map(\.body) } }
}

/// A transport whose first POST waits until `release()`; records the ids it was given, in order.
final class HeldFirstTransport: ReceiptTransport {
    private let state = Mutex<(ids: [String], waiter: CheckedContinuation<Void, Never>?, released: Bool)>(([], nil, false))

    var ids: [String] { state.withLock { $0.ids } }

    func post(_ body: [UInt8], to url: String, deadline: ContinuousClock.Instant) async -> ReceiptPostResult {
        let id = (try? JSON.parse(body))?.objectValue?["id"]?.stringValue ?? "?"
        let isFirst = state.withLock { s -> Bool in
            s.ids.append(id)
            return s.ids.count == 1 && !s.released
        }
        if isFirst {
            await withCheckedContinuation { continuation in
                let resumeNow = state.withLock { s -> Bool in
                    if s.released { return true }
                    s.waiter = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        }
        return .accepted(status: 202)
    }

    /// Waits (bounded) until the first POST arrived.
    func waitForFirstPost(within limit: Duration) async throws {
        let end = ContinuousClock.now.advanced(by: limit)
        while state.withLock({ $0.ids.isEmpty }) {
            guard ContinuousClock.now < end else { throw CancellationError() }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Lets the held POST answer.
    func release() {
        let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
            s.released = true
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume()
    }
}

/// A transport that answers by the URL's host (accepting hosts it was not told about) and records every POST.
final class RoutingTransport: ReceiptTransport {
    let answers: Mutex<[String: ReceiptPostResult]>
    let posts = Mutex<[(url: String, body: JSONObject)]>([])

    init(_ answers: [String: ReceiptPostResult]) { self.answers = Mutex(answers) }

    func post(_ body: [UInt8], to url: String, deadline: ContinuousClock.Instant) async -> ReceiptPostResult {
        if case let .object(o)? = try? JSON.parse(body) { posts.withLock { $0.append((url, o)) } }
        let host = HTTPURLHost(url)
        return answers.withLock { $0[host] } ?? .accepted(status: 204)
    }

    /// The bodies posted to `host`, in order.
    func bodies(to host: String) -> [JSONObject] { posts.withLock { $0.filter { HTTPURLHost($0.url) == host }.map(\.body) } }
}

/// The host of a test URL (`https://host/...`).
func HTTPURLHost(_ url: String) -> String { String(url.dropFirst("https://".count).prefix { $0 != "/" && $0 != ":" }) }

/// The extension's receipts and failure reports (receipts v1 §2, §3) over the device's real outbox.
@Suite("Receipts in the extension", .timeLimit(.minutes(10)))
struct ReceiptExtensionTests {
    let store: KeychainStore
    let directory: URL
    let time = TestTime()
    let vectors: JSONObject
    let vectorKey: BoxKeyPair
    let vectorNow: Int64

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("rx-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let file = ProjectPaths.shared.appendingPathComponent("vectors/attachments-v1.json")
        guard case let .object(root) = try JSON.parse([UInt8](try Data(contentsOf: file))) else { throw ReceiptTestError("root") }
        vectors = root
        guard case let .array(keys)? = root["device_keys"], let first = keys.first?.objectValue,
              let secret = first["secret_key"]?.stringValue, let now = root["now"]?.intValue else { throw ReceiptTestError("keys") }
        vectorKey = try BoxKeyPair(secretKey: SecureBytes(try Base64.decode(secret)))
        vectorNow = now
        store = try KeychainStore(url: directory.appendingPathComponent("dev"))
        time.value.withLock { $0 = now }
    }

    /// A request carrying `encrypted` as ENCRYPTED_DATA.
    func request(_ encrypted: String, identifier: String = "t") -> NotificationRequest {
        NotificationRequest(identifier: identifier, payload: JSONObject([
            ("aps", .object(JSONObject([("alert", .object(JSONObject([("title", .string("Secret Message!")), ("body", .string("(Encrypted)"))]))),
                                        ("mutable-content", .int(1))]))),
            (WireFormat.encryptedDataKey, .string(encrypted)),
        ]))
    }

    func vector(_ name: String) throws -> String {
        guard case let .array(list)? = vectors["messages"],
              let v = list.compactMap(\.objectValue).first(where: { $0["name"] == .string(name) }),
              let data = v["encrypted_data"]?.stringValue else { throw ReceiptTestError("no vector \(name)") }
        return data
    }

    func makeExtension(_ transport: (any ReceiptTransport)?, keys: [BoxKeyPair]? = nil, timeout: Duration = .seconds(2),
                       replay: InMemoryReplayGuard = InMemoryReplayGuard(), flushes: Bool = true) -> SecretMessageExtension {
        let outbox = ReceiptOutboxStore(store: store)
        let clock = WallClock { [time] in Date(timeIntervalSince1970: Double(time.value.withLock { $0 })) }
        // The full 2-second budget: a timer that never fires and a delivery deadline an hour away, so a loaded
        // machine (sanitizers, 60 s per test) cannot make an answered POST look late; a shorter budget runs on
        // the real clock (the hanging-transport test).
        let patient = timeout >= .seconds(2)
        var configuration = SecretMessageExtension.Configuration(keys: InMemoryKeys(keys ?? [vectorKey]), replayGuard: replay, clock: clock,
                                                                 timeBudget: patient ? .seconds(3600) : .seconds(30))
        let timer: any Clock<Duration> = patient ? ManualClock() : ContinuousClock()
        configuration.receipts = ReceiptCourier(transport: transport, outbox: outbox, reportURL: { try? outbox.reportURL() }, timeout: timeout,
                                                timer: timer)
        configuration.flushesOutboxAfterDelivery = flushes
        return SecretMessageExtension(configuration: configuration)
    }

    func deliver(_ ext: SecretMessageExtension, _ encrypted: String, identifier: String = "t") async -> ExtensionDelivery {
        let delivery = await ext.delivery(for: request(encrypted, identifier: identifier))
        await ext.finishBackgroundWork()
        return delivery
    }

    @Test("the receipt vector: sent after the open, before the handler, exactly the §2 members; its replay sends nothing")
    func receiptOnlyAfterOpen() async throws {
        let transport = RecordingTransport()
        try ReceiptOutboxStore(store: store).setReportURL("https://push.example.com/reports")
        let replay = InMemoryReplayGuard()
        let first = await deliver(makeExtension(transport, replay: replay), try vector("receipt"))
        #expect(first.outcome == .decrypted)
        #expect(first.receipt == .sent)
        #expect(first.report == nil)
        let posts = transport.posts.withLock { $0 }
        try #require(posts.count == 1)
        #expect(posts[0].url == "https://push.example.com/r")
        #expect(posts[0].body == JSONObject([("v", .int(1)), ("type", .string("delivered")), ("id", .string("KtvVMSI4I-dcQiaBW7ctpw")),
                                             ("token", .string("leSLeiHU1ME6svkg7Bq3Yw")), ("at", .int(vectorNow))]))
        // The same message again, as another notification, is a replay: no receipt, and `replayed` is never reported.
        let again = await deliver(makeExtension(transport, replay: replay), try vector("receipt"), identifier: "t2")
        #expect(again.outcome == .fallback(.replayed))
        #expect(again.receipt == nil && again.report == nil)
        #expect(transport.posts.withLock { $0.count } == 1)
    }

    @Test("a malformed receipt member is malformedMessage: no receipt; the failure report carries no message id and no plaintext")
    func malformedReceiptIsReported() async throws {
        let transport = RecordingTransport(answer: .accepted(status: 202))
        try ReceiptOutboxStore(store: store).setReportURL("https://push.example.com/reports")
        for (round, name) in ["receipt-token-short", "receipt-not-object"].enumerated() {
            time.value.withLock { $0 = vectorNow + Int64(round) * 700 }  // a new report window each time
            let delivery = await deliver(makeExtension(transport), try vector(name))
            #expect(delivery.outcome == .fallback(.malformedMessage), "\(name)")
            #expect(delivery.receipt == nil)
            #expect(delivery.report == .sent)
        }
        let posts = transport.posts.withLock { $0 }
        try #require(posts.count == 2)
        for (round, post) in posts.enumerated() {
            #expect(post.url == "https://push.example.com/reports")
            #expect(post.body == JSONObject([("v", .int(1)), ("type", .string("failed")), ("reason", .string("malformedMessage")),
                                             ("kid", .string("e2a0cdd02cd5f429")), ("at", .int(vectorNow + Int64(round) * 700)), ("count", .int(1))]))
            let text = String(decoding: JSON.serialize(.object(post.body)), as: UTF8.self)
            #expect(!text.contains("Agent K") && !text.contains("Photo"))
        }
    }

    @Test("without a report URL nothing is reported; a payload with no readable envelope reports kid null")
    func reportNeedsURL() async throws {
        let transport = RecordingTransport()
        let none = await deliver(makeExtension(transport), "not base64!")
        #expect(none.outcome == .fallback(.malformedPayload) && none.report == nil)
        #expect(transport.posts.withLock { $0.isEmpty })
        try ReceiptOutboxStore(store: store).setReportURL("http://127.0.0.1:9/reports")
        let reported = await deliver(makeExtension(transport), "not base64!")
        #expect(reported.report == .sent)
        #expect(transport.bodies.first?["kid"] == .null)
        #expect(transport.bodies.first?["reason"] == .string("malformedPayload"))
    }

    @Test("the report window on the injected clock: sent, suppressed, then one report counting the suppressed ones")
    func reportWindow() async throws {
        let transport = RecordingTransport()
        try ReceiptOutboxStore(store: store).setReportURL("https://push.example.com/reports")
        let stranger = BoxKeyPair.generate()  // messages sealed to a key this device does not hold: unknownKey
        let sender = try NotificationSender(clock: { [time] in time.value.withLock { $0 } })
        func unknownKeyMessage() throws -> String {
            let sealed = try sender.seal(SecretMessage(title: "Agent K", body: "secret text"), to: stranger.publicKey)
            guard case let .object(o) = try JSON.parse(sealed.payload), let data = o[WireFormat.encryptedDataKey]?.stringValue else {
                throw ReceiptTestError("payload")
            }
            return data
        }
        var statuses: [ReportStatus?] = []
        for offset: Int64 in [0, 1, 300, 599, 600, 601] {
            time.value.withLock { $0 = vectorNow + offset }
            statuses.append(await deliver(makeExtension(transport), try unknownKeyMessage()).report)
        }
        #expect(statuses == [.sent, .suppressed, .suppressed, .suppressed, .sent, .suppressed])
        #expect(transport.bodies.map { $0["count"] } == [.int(1), .int(4)])
        #expect(transport.bodies.allSatisfy { $0["kid"] == .string(stranger.publicKey.keyID.hex) && $0["reason"] == .string("unknownKey") })
    }

    @Test("no 2xx in time: the receipt is queued (0600 item in the store), and sent after a later delivery's content was handed over")
    func queuedThenFlushed() async throws {
        let down = RecordingTransport(answer: .failed)
        let delivery = await deliver(makeExtension(down), try vector("receipt"))
        #expect(delivery.outcome == .decrypted && delivery.receipt == .queued)
        #expect(try ReceiptOutboxStore(store: store).entries().entries.count == 1)
        // A transport that never answers: the receipt's own deadline queues it (sub-second budget here).
        let hanging = RecordingTransport(hang: true)
        let stranger = BoxKeyPair.generate()
        var asking = SecretMessage(title: "x", body: "y")
        asking.receiptURL = "https://push.example.com/r"
        let sealed = try NotificationSender(clock: { [vectorNow] in vectorNow }).seal(asking, to: stranger.publicKey)
        guard case let .object(o) = try JSON.parse(sealed.payload), let data = o[WireFormat.encryptedDataKey]?.stringValue else { return }
        let slow = await deliver(makeExtension(hanging, keys: [stranger], timeout: .milliseconds(100)), data)
        #expect(slow.outcome == .decrypted && slow.receipt == .queued)
        #expect(try ReceiptOutboxStore(store: store).entries().entries.count == 2)
        // The first delivery's flush found the origin down, so it backs off a minute: the second delivery's flush
        // did not try it (only its own receipt was posted).
        #expect(hanging.posts.withLock { $0.count } == 1)
        // Up again, a minute later: the next delivery (a message without a receipt) flushes both after its content.
        time.value.withLock { $0 = vectorNow + 60 }
        let up = RecordingTransport()
        let plain = try NotificationSender(clock: { [vectorNow] in vectorNow }).seal(SecretMessage(title: "a", body: "b"), to: stranger.publicKey)
        guard case let .object(p) = try JSON.parse(plain.payload), let plainData = p[WireFormat.encryptedDataKey]?.stringValue else { return }
        let later = await deliver(makeExtension(up, keys: [stranger]), plainData)
        #expect(later.outcome == .decrypted && later.receipt == nil)
        #expect(up.bodies.map { $0["id"] } == [.string("KtvVMSI4I-dcQiaBW7ctpw"), .string(sealed.messageID)])
        #expect(up.bodies.last?["token"] == .string(sealed.receipt!.token))
        #expect(try ReceiptOutboxStore(store: store).entries().entries.isEmpty)
    }

    @Test("with flushesOutboxAfterDelivery off (the iOS base class), a delivery sends its own receipt and leaves the outbox alone")
    func noFlushAfterDelivery() async throws {
        let down = RecordingTransport(answer: .failed)
        #expect(await deliver(makeExtension(down), try vector("receipt")).receipt == .queued)
        time.value.withLock { $0 = vectorNow + 3600 }
        let stranger = BoxKeyPair.generate()
        let plain = try NotificationSender(clock: { [vectorNow] in vectorNow }).seal(SecretMessage(title: "a", body: "b"), to: stranger.publicKey)
        guard case let .object(p) = try JSON.parse(plain.payload), let plainData = p[WireFormat.encryptedDataKey]?.stringValue else { return }
        let up = RecordingTransport()
        let later = await deliver(makeExtension(up, keys: [stranger], flushes: false), plainData)
        #expect(later.outcome == .decrypted)
        #expect(up.posts.withLock { $0.count } == 0, "the outbox was flushed after the content")
        #expect(try ReceiptOutboxStore(store: store).entries().entries.count == 1)
    }

    @Test("two flushes at once sharing a ReceiptFlushGate (two extension instances in one process) send each entry once")
    func concurrentFlushesShareTheGate() async throws {
        let outbox = ReceiptOutboxStore(store: store)
        let token = ReceiptRequest.makeToken()
        for n in 1...3 {
            try outbox.enqueue(url: "https://r.example/r", message: .delivered(id: "m\(n)", token: token, at: Int64(n), attachments: nil), now: vectorNow)
        }
        let held = HeldFirstTransport()
        // One gate per outbox in the process: the same path gives the same gate, another path (another device's
        // outbox in this test process) its own.
        #expect(ReceiptFlushGate.forOutbox(at: "/a/outbox") === ReceiptFlushGate.forOutbox(at: "/a/outbox"))
        #expect(ReceiptFlushGate.forOutbox(at: "/a/outbox") !== ReceiptFlushGate.forOutbox(at: "/b/outbox"))
        let gate = ReceiptFlushGate.forOutbox(at: store.root.string)
        var first = ReceiptCourier(transport: held, outbox: outbox, timer: ManualClock())
        first.flushGate = gate
        var second = ReceiptCourier(transport: held, outbox: outbox, timer: ManualClock())
        second.flushGate = gate
        let a = Task { await first.flush(now: vectorNow) }
        // The first flush is sending its first entry (held there); the second one starts now, and finishes first.
        try await held.waitForFirstPost(within: .seconds(120))   // bounded; a starved test pool can take long to start the task
        let b = await second.flush(now: vectorNow)
        #expect(b == OutboxFlushSummary(sent: 0, rejected: 0, remaining: 3), "the second flush left the origin to the first")
        held.release()
        #expect(await a.value == OutboxFlushSummary(sent: 3, rejected: 0, remaining: 0))
        #expect(held.ids == ["m1", "m2", "m3"], "each entry posted once: \(held.ids)")
        // Released: the next flush may take the origin again.
        try outbox.enqueue(url: "https://r.example/r", message: .delivered(id: "m4", token: token, at: 4, attachments: nil), now: vectorNow)
        #expect(await second.flush(now: vectorNow) == OutboxFlushSummary(sent: 1, rejected: 0, remaining: 0))
    }

    @Test("the first entry sent after drops carries \"dropped\"; entries refused for good are removed, a server down keeps them")
    func droppedIsReported() async throws {
        let outbox = ReceiptOutboxStore(store: store, capacity: 2)
        let token = ReceiptRequest.makeToken()
        for n in 1...4 {
            try outbox.enqueue(url: "https://r.example/r", message: .delivered(id: "m\(n)", token: token, at: Int64(n), attachments: nil), now: vectorNow)
        }
        let down = RecordingTransport(answer: .failed)
        var summary = await ReceiptCourier(transport: down, outbox: outbox, timer: ManualClock()).flush(now: vectorNow)
        #expect(summary == OutboxFlushSummary(sent: 0, rejected: 0, remaining: 2))
        #expect(down.bodies.count == 1 && down.bodies[0]["dropped"] == .int(2))
        let up = RecordingTransport()
        // The origin backs off a minute after it failed.
        summary = await ReceiptCourier(transport: up, outbox: outbox, timer: ManualClock()).flush(now: vectorNow + 59)
        #expect(summary == OutboxFlushSummary(sent: 0, rejected: 0, remaining: 2) && up.bodies.isEmpty)
        summary = await ReceiptCourier(transport: up, outbox: outbox, timer: ManualClock()).flush(now: vectorNow + 60)
        #expect(summary == OutboxFlushSummary(sent: 2, rejected: 0, remaining: 0))
        #expect(up.bodies.map { $0["dropped"] } == [.int(2), nil])
        #expect(try outbox.entries().dropped == 0)
        try outbox.enqueue(url: "https://r.example/r", message: .delivered(id: "gone", token: token, at: 1, attachments: nil), now: vectorNow)
        summary = await ReceiptCourier(transport: RecordingTransport(answer: .refused(status: 404)), outbox: outbox, timer: ManualClock()).flush(now: vectorNow + 60)
        #expect(summary == OutboxFlushSummary(sent: 0, rejected: 1, remaining: 0))
        #expect(try outbox.entries().entries.isEmpty)
    }

    @Test("issue #36: a 429 or 503 with Retry-After defers the origin that long (at most the backoff cap), not the minute of the backoff",
          arguments: [429, 503])
    func retryAfterIsHonoured(_ status: Int) async throws {
        let outbox = ReceiptOutboxStore(store: store)
        let token = ReceiptRequest.makeToken()
        let request = ReceiptRequest(url: "https://c.example/r", token: token)
        let limited = RecordingTransport(answer: .refused(status: status, retryAfter: 1))
        let courier = ReceiptCourier(transport: limited, outbox: outbox, timer: ManualClock())
        // The receipt's own POST is refused: it is queued, and its origin is not tried before Retry-After says.
        let deadline = ContinuousClock.now.advanced(by: .seconds(30))
        #expect(await courier.sendReceipt(request, messageID: "m1", attachments: nil, now: vectorNow, deadline: deadline) == .queued)
        #expect(try outbox.queues(now: vectorNow).first?.retryAt == vectorNow + 1)
        let up = RecordingTransport()
        func flush(_ now: Int64) async -> OutboxFlushSummary {
            await ReceiptCourier(transport: up, outbox: outbox, timer: ManualClock()).flush(now: now)
        }
        #expect(await flush(vectorNow) == OutboxFlushSummary(sent: 0, rejected: 0, remaining: 1))
        #expect(up.bodies.isEmpty, "tried before its Retry-After")
        #expect(await flush(vectorNow + 1) == OutboxFlushSummary(sent: 1, rejected: 0, remaining: 0))
        // A flush refused the same way defers the origin by the header too (5 s here, not the 60 s of the backoff).
        try outbox.enqueue(url: request.url, message: .delivered(id: "m2", token: token, at: 2, attachments: nil), now: vectorNow)
        limited.answer.withLock { $0 = .refused(status: status, retryAfter: 5) }
        _ = await ReceiptCourier(transport: limited, outbox: outbox, timer: ManualClock()).flush(now: vectorNow + 10)
        #expect(try outbox.queues(now: vectorNow + 10).first?.retryAt == vectorNow + 15)
        // A Retry-After longer than the backoff cap (an hour) waits the cap.
        limited.answer.withLock { $0 = .refused(status: status, retryAfter: 86_400) }
        _ = await ReceiptCourier(transport: limited, outbox: outbox, timer: ManualClock()).flush(now: vectorNow + 20)
        #expect(try outbox.queues(now: vectorNow + 20).first?.retryAt == vectorNow + 20 + 3600)
        // Another status with a Retry-After backs off as usual (the third failure in a row: 4 minutes).
        limited.answer.withLock { $0 = .refused(status: 500, retryAfter: 1) }
        _ = await ReceiptCourier(transport: limited, outbox: outbox, timer: ManualClock()).flush(now: vectorNow + 30, ignoringBackoff: true)
        #expect(try outbox.queues(now: vectorNow + 30).first?.retryAt == vectorNow + 30 + 240)
    }

    @Test("Retry-After: delay-seconds, or an HTTP-date as the seconds until it (0 once past); anything else is ignored")
    func retryAfterParsing() {
        #expect(RetryAfter.seconds("1", now: 0) == 1)
        #expect(RetryAfter.seconds(" 120 ", now: 0) == 120)
        // 784111777 is Sun, 06 Nov 1994 08:49:37 GMT (RFC 9110's example).
        #expect(RetryAfter.seconds("Sun, 06 Nov 1994 08:49:37 GMT", now: 784_111_777 - 30) == 30)
        #expect(RetryAfter.seconds("Sun, 06 Nov 1994 08:49:37 GMT", now: 784_111_777 + 30) == 0)
        #expect(RetryAfter.seconds("Thu, 26 Nov 2026 00:00:00 GMT", now: 1_795_651_200 - 1) == 1)
        for bad in ["", "-1", "1.5", "soon", "Sun, 06 Nov 1994 08:49:37 PST", "Sunday, 06-Nov-94 08:49:37 GMT", "99999999999999999999"] {
            #expect(RetryAfter.seconds(bad, now: 0) == nil, "\(bad)")
        }
        #expect(ReceiptPostResult.refused(status: 429, retryAfter: 3).retryAfter == 3)
        #expect(ReceiptPostResult.refused(status: 503, retryAfter: 3).retryAfter == 3)
        #expect(ReceiptPostResult.refused(status: 500, retryAfter: 3).retryAfter == nil)
        #expect(ReceiptPostResult.failed.retryAfter == nil)
    }

    func receiptTo(_ host: String, _ n: Int, token: String) -> (url: String, message: ReceiptMessage) {
        ("https://\(host)/r", .delivered(id: "\(host)-\(n)", token: token, at: Int64(n), attachments: nil))
    }

    @Test("#22: an origin that black-holes or answers 3xx/401/5xx holds up no other origin's receipts, and backs off (exponential, capped, durable)",
          arguments: [ReceiptPostResult.failed, .refused(status: 302), .refused(status: 401), .refused(status: 503)])
    func originsAreIndependent(_ badAnswer: ReceiptPostResult) async throws {
        let store = try KeychainStore(url: directory.appendingPathComponent("origins"))
        let token = ReceiptRequest.makeToken()
        let t0 = vectorNow
        for (n, host) in ["bad.example", "good.example", "bad.example", "good.example"].enumerated() {
            let r = receiptTo(host, n, token: token)
            try ReceiptOutboxStore(store: store).enqueue(url: r.url, message: r.message, now: t0)
        }
        let transport = RoutingTransport(["bad.example": badAnswer])
        // A new courier and outbox value each time: the backoff is in the store, not in memory.
        func flush(_ now: Int64) async -> OutboxFlushSummary {
            await ReceiptCourier(transport: transport, outbox: ReceiptOutboxStore(store: store), timer: ManualClock()).flush(now: now)
        }
        var summary = await flush(t0)
        #expect(transport.bodies(to: "good.example").map { $0["id"] } == [.string("good.example-1"), .string("good.example-3")])
        #expect(transport.bodies(to: "bad.example").count == 1)
        #expect(summary == OutboxFlushSummary(sent: 2, rejected: 0, remaining: 2))
        // Backing off at once: not retried by the next flush, nor before a minute has passed.
        summary = await flush(t0 + 1)
        summary = await flush(t0 + 59)
        #expect(transport.bodies(to: "bad.example").count == 1)
        #expect(summary == OutboxFlushSummary(sent: 0, rejected: 0, remaining: 2))
        _ = await flush(t0 + 60)
        #expect(transport.bodies(to: "bad.example").count == 2)
        // Then two minutes, …
        _ = await flush(t0 + 60 + 119)
        #expect(transport.bodies(to: "bad.example").count == 2)
        var now = t0 + 60 + 120
        _ = await flush(now)
        #expect(transport.bodies(to: "bad.example").count == 3)
        // … doubling up to an hour, never more.
        for round in 4...12 {
            now += 3600
            _ = await flush(now)
            #expect(transport.bodies(to: "bad.example").count == round)
        }
        // A device clock set back by a day does not strand the origin behind a retry time a day away.
        _ = await flush(now - 86_400)
        #expect(transport.bodies(to: "bad.example").count == 13)
        now += 3600
        // Up again: both of its entries go, oldest first.
        transport.answers.withLock { $0 = [:] }
        now += 3600
        summary = await flush(now)
        #expect(summary == OutboxFlushSummary(sent: 2, rejected: 0, remaining: 0))
        #expect(transport.bodies(to: "bad.example").suffix(2).map { $0["id"] } == [.string("bad.example-0"), .string("bad.example-2")])
        #expect(try ReceiptOutboxStore(store: store).entries().entries.isEmpty)
    }

    @Test("#22: \"dropped\" goes only to the origin whose entries were dropped, never to another sender's collector")
    func droppedPerOrigin() async throws {
        let outbox = ReceiptOutboxStore(store: store, capacity: 2)
        let token = ReceiptRequest.makeToken()
        for (n, host) in ["a.example", "a.example", "b.example", "b.example"].enumerated() {
            let r = receiptTo(host, n, token: token)
            try outbox.enqueue(url: r.url, message: r.message, now: vectorNow)
        }
        #expect(try outbox.entries().dropped == 2)
        let transport = RoutingTransport([:])
        var summary = await ReceiptCourier(transport: transport, outbox: outbox, timer: ManualClock()).flush(now: vectorNow)
        #expect(summary == OutboxFlushSummary(sent: 2, rejected: 0, remaining: 0))
        #expect(transport.bodies(to: "b.example").map { $0["dropped"] } == [nil, nil])
        #expect(transport.bodies(to: "a.example").isEmpty)
        #expect(try outbox.entries().dropped == 2)
        // a.example's next receipt carries the count of its own dropped entries.
        let r = receiptTo("a.example", 9, token: token)
        try outbox.enqueue(url: r.url, message: r.message, now: vectorNow)
        summary = await ReceiptCourier(transport: transport, outbox: outbox, timer: ManualClock()).flush(now: vectorNow)
        #expect(summary == OutboxFlushSummary(sent: 1, rejected: 0, remaining: 0))
        #expect(transport.bodies(to: "a.example").map { $0["dropped"] } == [.int(2)])
        #expect(try outbox.entries().dropped == 0)
    }

    @Test("#22: every receipt and failure report the courier posts is padded with trailing spaces to 512 bytes, and still parses")
    func bodiesArePadded() async throws {
        let transport = RecordingTransport()
        let outbox = ReceiptOutboxStore(store: store)
        try outbox.setReportURL("https://push.example.com/reports")
        let courier = ReceiptCourier(transport: transport, outbox: outbox, reportURL: { "https://push.example.com/reports" }, timer: ManualClock())
        let deadline = ContinuousClock.now.advanced(by: .seconds(3600))
        let request = ReceiptRequest(url: "https://push.example.com/r", token: ReceiptRequest.makeToken(byteCount: 64))
        #expect(await courier.sendReceipt(request, messageID: "m", attachments: nil, now: vectorNow, deadline: deadline) == .sent)
        #expect(await courier.sendReceipt(request, messageID: String(repeating: "x", count: 64),
                                          attachments: ReceiptAttachmentCounts(attached: 1, failed: ["attachmentTooLarge": 1, "attachmentCorrupt": 2]),
                                          now: vectorNow, deadline: deadline) == .sent)
        #expect(await courier.reportFailure(reason: .unknownKey, kid: nil, now: vectorNow, deadline: deadline) == .sent)
        // From the outbox, with a dropped count.
        let small = ReceiptOutboxStore(store: store, capacity: 1)
        try small.enqueue(url: request.url, message: .delivered(id: "q1", token: request.token, at: 1, attachments: nil), now: vectorNow)
        try small.enqueue(url: request.url, message: .delivered(id: "q2", token: request.token, at: 2, attachments: nil), now: vectorNow)
        #expect(await ReceiptCourier(transport: transport, outbox: small, timer: ManualClock()).flush(now: vectorNow).sent == 1)
        let raw = transport.raw.withLock { $0 }
        try #require(raw.count == 4)
        #expect(transport.bodies.last?["dropped"] == .int(1))
        for body in raw {
            #expect(body.count == 512)
            #expect(body.last == 0x20)
            #expect(ReceiptMessage.parse(body) != nil)
        }
    }
}

/// A collector that never answers: its POST waits until it is cancelled.
private struct SilentCollector: ReceiptTransport {
    func post(_ body: [UInt8], to url: String, deadline: ContinuousClock.Instant) async -> ReceiptPostResult {
        try? await Task.sleep(for: .seconds(3600))
        return .failed
    }
}

extension ReceiptExtensionTests {
    @Test("the content handler is held at most receiptHold (300 ms) for a receipt, not the courier's 2 s: past it the receipt is queued")
    func receiptHoldsTheHandlerAtMost300ms() async throws {
        let transport = SilentCollector()
        let outbox = ReceiptOutboxStore(store: store)
        let clock = WallClock { [time] in Date(timeIntervalSince1970: Double(time.value.withLock { $0 })) }
        let timer = ManualClock()
        var configuration = SecretMessageExtension.Configuration(keys: InMemoryKeys([vectorKey]), replayGuard: InMemoryReplayGuard(), clock: clock,
                                                                 timeBudget: .seconds(3600))
        configuration.receipts = ReceiptCourier(transport: transport, outbox: outbox, timeout: .seconds(2), timer: timer)
        configuration.flushesOutboxAfterDelivery = false
        #expect(configuration.receiptHold == .milliseconds(300))
        let ext = SecretMessageExtension(configuration: configuration)
        let done = Mutex<ExtensionDelivery?>(nil)
        ext.didReceive(request(try vector("receipt"), identifier: "hold")) { delivery in done.withLock { $0 = delivery } }
        // The POST hangs; its wait on the timer is what is left of the hold (≤ 300 ms), so 300 ms on the timer lets the
        // handler go. On a loaded machine (sanitizers) the hold may already be over when the POST starts: then it
        // does not wait at all, and the handler goes without the timer. With the courier's 2 s instead, one
        // advance of 300 ms fires nothing and the handler never comes. The one advance is made once the POST waits on
        // the timer, however late a loaded machine gets there.
        var advanced = false
        let deadline = ContinuousClock.now.advanced(by: .seconds(60))
        while done.withLock({ $0 }) == nil, ContinuousClock.now < deadline {
            if !advanced, timer.sleeperCount > 0 {
                timer.advance(by: .milliseconds(300))
                advanced = true
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        let delivery = try #require(done.withLock { $0 }, "the handler waited past the 300 ms hold")
        #expect(delivery.outcome == .decrypted && delivery.receipt == .queued)
        #expect(try outbox.entries().entries.count == 1, "the receipt went to the outbox for the next flush")
    }
}
