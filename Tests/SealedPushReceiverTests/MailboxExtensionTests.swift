import Testing
import Synchronization
import SealedPushCrypto
import SealedPushWire
import SealedPushReceiver
import SealedPushTestSupport

/// A fetcher that answers what it is told and counts its calls; `hangs` never answers (nor honours cancellation
/// quickly), as a gateway that stalls.
final class ScriptedMailboxFetcher: MailboxFetcher {
    let answer: MailboxFetchResult
    let hangs: Bool
    private let state = Mutex<(calls: Int, deadlines: [Double], handles: [String])>((0, [], []))

    init(_ answer: MailboxFetchResult, hangs: Bool = false) {
        self.answer = answer
        self.hangs = hangs
    }

    var calls: Int { state.withLock { $0.calls } }
    var deadlines: [Double] { state.withLock { $0.deadlines } }

    func fetch(_ handle: MailboxHandle, deadlineSeconds: Double) async -> MailboxFetchResult {
        state.withLock {
            $0.calls += 1
            $0.deadlines.append(deadlineSeconds)
            $0.handles.append(handle.description)
        }
        if hangs {
            // Ignores its deadline and cancellation for an hour.
            let _: Void = await withCheckedContinuation { c in
                Task.detached {
                    try? await Task.sleep(for: .seconds(3600))
                    c.resume()
                }
            }
        }
        return answer
    }
}

/// A pending queue in memory that records appends.
final class RecordingPendingQueue: PendingQueue {
    let appended = Mutex<[PendingMessage]>([])
    func append(_ message: PendingMessage) throws { appended.withLock { $0.append(message) } }
    func entries() throws -> [PendingMessage] { appended.withLock { $0 } }
    func remove(requestIDs: [String]) throws { appended.withLock { $0.removeAll { requestIDs.contains($0.requestID) } } }
    func status() throws -> PendingQueueStatus { PendingQueueStatus(pending: appended.withLock { $0.count }, dropped: 0) }
}

/// Records the handles whose notifications it was asked to remove.
final class RecordingReplacer: DeliveredNotificationReplacer {
    let removed = Mutex<[String]>([])
    func replaceDelivered(_ request: NotificationRequest) async -> Bool { false }
    func removeDelivered(holdingHandle handle: String) async -> Int {
        removed.withLock { $0.append(handle) }
        return 1
    }
}

/// Answers by delivery id; counts fetches.
final class MapFetcher: MailboxFetcher {
    let answers: [String: MailboxFetchResult]
    let calls = Mutex(0)
    init(_ answers: [String: MailboxFetchResult]) { self.answers = answers }
    func fetch(_ handle: MailboxHandle, deadlineSeconds: Double) async -> MailboxFetchResult {
        calls.withLock { $0 += 1 }
        return answers[handle.deliveryID] ?? .failed("no such delivery")
    }
}

/// Notification Center in memory: what is shown, replaced and removed.
final class MemoryCenter: DeliveredNotificationReplacer {
    let shown: Mutex<[NotificationRequest]>
    init(_ shown: [NotificationRequest]) { self.shown = Mutex(shown) }
    func replaceDelivered(_ request: NotificationRequest) async -> Bool {
        shown.withLock { s in
            guard let i = s.firstIndex(where: { $0.identifier == request.identifier }) else { return false }
            s[i] = request
            return true
        }
    }
    func removeDelivered(holdingHandle handle: String) async -> Int {
        shown.withLock { s in
            let before = s.count
            s.removeAll { $0.content.userInfo[MailboxHandle.apnsKey]?.stringValue == handle }
            return before - s.count
        }
    }
    func deliveredHoldingHandles() async -> [NotificationRequest] {
        shown.withLock { $0.filter { $0.content.userInfo[MailboxHandle.apnsKey] != nil } }
    }
    func content(_ identifier: String) -> NotificationContent? { shown.withLock { $0.first { $0.identifier == identifier }?.content } }
}

/// Mailbox v1 §5: the extension fetches by handle, checks `dlv` and opens the envelope as an `ENCRYPTED_DATA` message.
@Suite("Mailbox: the extension fetches by handle (mailbox v1 §5)", .timeLimit(.minutes(2)))
struct MailboxExtensionTests {
    static let now: Int64 = 1_795_000_000
    let device = BoxKeyPair.generate()

    /// The envelope the gateway seals for delivery `deliveryID` (mailbox v1 §4).
    func envelope(id: String = "m-1", deliveryID: String, body: String = "The eagle lands at noon.", exp: Int64? = nil) throws -> [UInt8] {
        var message = MessageBody(kid: device.keyID, id: id, issuedAt: Self.now, alert: .init(title: "Agent K", body: body))
        message.expiresAt = exp
        let bytes = try MailboxSealing.bodyBytes(message, deliveryID: deliveryID)
        return try MailboxSealing.seal(inner: InnerMessage.frame(body: bytes, recipient: device.keyID, signer: nil), to: device.publicKey,
                                       maxMessageBytes: 32768)
    }

    /// The APNs push of mailbox v1 §2 for `handle`.
    static func push(_ handle: String, extra: [(String, JSONValue)] = []) -> NotificationRequest {
        let aps: JSONValue = .object(JSONObject([("alert", .object(JSONObject([("title", "New message"), ("body", "(Encrypted)")]))),
                                                 ("mutable-content", .int(1))]))
        return NotificationRequest(identifier: "REQ-1", payload: JSONObject([("aps", aps), (MailboxHandle.apnsKey, .string(handle))] + extra))
    }

    func configuration(_ fetcher: (any MailboxFetcher)?, replay: (any ReplayGuard)? = nil) -> SecretMessageExtension.Configuration {
        var c = SecretMessageExtension.Configuration(keys: InMemoryKeys([device]), replayGuard: replay, clock: .fixed(unixSeconds: Self.now),
                                                     timeBudget: .seconds(3600))   // the fetch budget (10 s) is what these tests bound, not a starved CI machine's 30 s
        c.mailboxFetcher = fetcher
        return c
    }

    static func expectNothingOfThePush(_ content: NotificationContent, _ handle: MailboxHandle, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(content.userInfo[MailboxHandle.apnsKey] == nil, "the handle is not handed to iOS", sourceLocation: sourceLocation)
        #expect(content.userInfo[WireFormat.encryptedDataKey] == nil, "no envelope is handed to iOS", sourceLocation: sourceLocation)
        #expect(!"\(content.userInfo)".contains(handle.token), "the token is nowhere in userInfo", sourceLocation: sourceLocation)
    }

    @Test("200: the fetched envelope opens as an ENCRYPTED_DATA message; nothing of the push or the envelope reaches iOS")
    func fetchesAndOpens() async throws {
        let handle = try #require(MailboxHandle.make(deliveryID: "d_1"))
        let fetcher = ScriptedMailboxFetcher(.envelope(try envelope(deliveryID: "d_1"), messageID: "m-1"))
        let ext = SecretMessageExtension(configuration: configuration(fetcher, replay: InMemoryReplayGuard()))
        let delivery = await ext.delivery(for: Self.push(handle.description))
        #expect(delivery.outcome == .decrypted)
        #expect(delivery.content.title == "Agent K" && delivery.content.body == "The eagle lands at noon.")
        #expect(fetcher.calls == 1)
        #expect(fetcher.deadlines.allSatisfy { $0 > 0 && $0 <= 10 }, "the fetch deadline is at most 10 s")
        Self.expectNothingOfThePush(delivery.content, handle)
    }

    @Test("dlv naming another delivery (or none) is handleMismatch, (Encrypted), the id not recorded as seen")
    func dlvMismatch() async throws {
        let handle = try #require(MailboxHandle.make(deliveryID: "d_1"))
        let replay = InMemoryReplayGuard()
        let ext = SecretMessageExtension(configuration: configuration(ScriptedMailboxFetcher(.envelope(try envelope(deliveryID: "d_2"), messageID: "m-1")),
                                                                      replay: replay))
        let delivery = await ext.delivery(for: Self.push(handle.description))
        #expect(delivery.outcome == .fallback(.handleMismatch))
        #expect(delivery.content.body == "(Encrypted)" && delivery.content.title == "New message")
        Self.expectNothingOfThePush(delivery.content, handle)
        // The same message fetched under its own handle still opens (the mismatch did not mark it replayed).
        let right = SecretMessageExtension(configuration: configuration(ScriptedMailboxFetcher(.envelope(try envelope(deliveryID: "d_1"), messageID: "m-1")),
                                                                        replay: replay))
        #expect(await right.delivery(for: Self.push(handle.description)).outcome == .decrypted)

        // A push-mode envelope (no dlv at all) fetched by a handle is a mismatch too.
        let plain = try MessageSealer.seal(body: MessageBody(kid: device.keyID, id: "m-2", issuedAt: Self.now, alert: .init(title: "x", body: "y")),
                                           to: device.publicKey, signer: nil, padding: .bucket, payloadOverhead: 0)
        let noDlv = SecretMessageExtension(configuration: configuration(ScriptedMailboxFetcher(.envelope(plain.bytes, messageID: "m-2"))))
        #expect(await noDlv.delivery(for: Self.push(handle.description)).outcome == .fallback(.handleMismatch))
    }

    @Test("every check of wire v1 §5 still applies to a fetched envelope: an unknown key, an expired message, garbage")
    func wireChecksApply() async throws {
        let handle = try #require(MailboxHandle.make(deliveryID: "d_1"))
        let other = SecretMessageExtension(configuration: {
            var c = configuration(ScriptedMailboxFetcher(.envelope(try! envelope(deliveryID: "d_1"), messageID: "m-1")))
            c.keys = InMemoryKeys([BoxKeyPair.generate()])
            return c
        }())
        #expect(await other.delivery(for: Self.push(handle.description)).outcome == .fallback(.unknownKey))
        let expired = SecretMessageExtension(configuration: configuration(
            ScriptedMailboxFetcher(.envelope(try envelope(deliveryID: "d_1", exp: Self.now - 3600), messageID: "m-1"))))
        #expect(await expired.delivery(for: Self.push(handle.description)).outcome == .fallback(.expired))
        let garbage = SecretMessageExtension(configuration: configuration(ScriptedMailboxFetcher(.envelope([1, 2, 3], messageID: "m-1"))))
        let g = await garbage.delivery(for: Self.push(handle.description))
        #expect(g.outcome == .fallback(.malformedPayload) && g.content.body == "(Encrypted)")
        Self.expectNothingOfThePush(g.content, handle)
    }

    @Test("404, a network failure or an answer over the limit: fetchFailed, (Encrypted), the handle kept to fetch later")
    func fetchFailedKeepsTheHandle() async throws {
        let handle = try #require(MailboxHandle.make(deliveryID: "d_1"))
        for answer in [MailboxFetchResult.from(status: 404, body: Array(#"{"type":"unknown_handle"}"#.utf8)), .failed("connection refused"),
                       .failed("the answer is over 262144 bytes")] {
            let ext = SecretMessageExtension(configuration: configuration(ScriptedMailboxFetcher(answer)))
            let delivery = await ext.delivery(for: Self.push(handle.description, extra: [("secret_hint", "do not show")]))
            #expect(delivery.outcome == .fallback(.fetchFailed))
            #expect(delivery.content.body == "(Encrypted)")
            #expect(delivery.content.userInfo[MailboxHandle.apnsKey] == .string(handle.description))
        }
    }

    @Test("410 collected is replayed, 410 expired is expired: (Encrypted), the worthless handle dropped")
    func goneAnswers() async throws {
        let handle = try #require(MailboxHandle.make(deliveryID: "d_1"))
        for (answer, reason) in [(MailboxFetchResult.collected, ReasonCode.replayed), (.expired, .expired)] {
            let ext = SecretMessageExtension(configuration: configuration(ScriptedMailboxFetcher(answer)))
            let delivery = await ext.delivery(for: Self.push(handle.description))
            #expect(delivery.outcome == .fallback(reason))
            #expect(delivery.content.body == "(Encrypted)")
            Self.expectNothingOfThePush(delivery.content, handle)
        }
        // With the filtering entitlement a collected message is a replay: suppressed, as wire v1 replays are.
        var c = configuration(ScriptedMailboxFetcher(.collected))
        c.suppressesReplays = true
        let suppressed = await SecretMessageExtension(configuration: c).delivery(for: Self.push(handle.description))
        #expect(suppressed.suppressed && suppressed.content == NotificationContent())
    }

    @Test("a push with both SEALEDPUSH_FETCH and ENCRYPTED_DATA is refused: malformedPayload, nothing fetched or opened")
    func bothMembersRefused() async throws {
        let handle = try #require(MailboxHandle.make(deliveryID: "d_1"))
        let fetcher = ScriptedMailboxFetcher(.envelope(try envelope(deliveryID: "d_1"), messageID: "m-1"))
        let sealed = try MessageSealer.seal(body: MessageBody(kid: device.keyID, id: "m-2", issuedAt: Self.now, alert: .init(title: "Hidden", body: "text")),
                                            to: device.publicKey, signer: nil, padding: .bucket, payloadOverhead: 0)
        let ext = SecretMessageExtension(configuration: configuration(fetcher))
        let delivery = await ext.delivery(for: Self.push(handle.description, extra: [(WireFormat.encryptedDataKey, .string(sealed.base64))]))
        #expect(delivery.outcome == .fallback(.malformedPayload))
        #expect(delivery.content.body == "(Encrypted)" && delivery.content.title == "New message")
        #expect(fetcher.calls == 0)
        Self.expectNothingOfThePush(delivery.content, handle)
    }

    @Test("a malformed handle, or no mailbox URL configured: malformedPayload without a fetch")
    func malformedOrUnconfigured() async throws {
        let fetcher = ScriptedMailboxFetcher(.collected)
        for bad in ["1.d_1.short", "2.d_1." + String(repeating: "A", count: 43), String(repeating: "x", count: 500)] {
            let d = await SecretMessageExtension(configuration: configuration(fetcher)).delivery(for: Self.push(bad))
            #expect(d.outcome == .fallback(.malformedPayload) && d.content.userInfo[MailboxHandle.apnsKey] == nil)
        }
        #expect(fetcher.calls == 0)
        let handle = try #require(MailboxHandle.make(deliveryID: "d_1"))
        let d = await SecretMessageExtension(configuration: configuration(nil)).delivery(for: Self.push(handle.description))
        #expect(d.outcome == .fallback(.malformedPayload) && d.content.body == "(Encrypted)")
    }

    @Test("the device key unreadable (before the first unlock): no fetch, no pending-queue entry, the handle kept, keychainLocked")
    func lockedNoFetchNoQueue() async throws {
        let handle = try #require(MailboxHandle.make(deliveryID: "d_1"))
        let fetcher = ScriptedMailboxFetcher(.envelope(try envelope(deliveryID: "d_1"), messageID: "m-1"))
        let queue = RecordingPendingQueue()
        var c = configuration(fetcher)
        c.keys = InMemoryKeys([device], locked: true)
        c.pendingQueue = queue
        c.deviceKeysReadable = { false }
        let delivery = await SecretMessageExtension(configuration: c).delivery(for: Self.push(handle.description))
        #expect(fetcher.calls == 0)
        #expect(queue.appended.withLock { $0.isEmpty }, "the gateway is the queue")
        #expect(delivery.outcome == .fallback(.keychainLocked) && delivery.content.body == "(Encrypted)")
        #expect(delivery.content.userInfo[MailboxHandle.apnsKey] == .string(handle.description))
        #expect(delivery.content.userInfo[RevealFormat.pendingUserInfoKey] == nil)
        // Locked between the probe and the open: the fetched envelope is not queued either, and the handle stays.
        c.deviceKeysReadable = { true }
        let raced = await SecretMessageExtension(configuration: c).delivery(for: Self.push(handle.description))
        #expect(fetcher.calls == 1 && queue.appended.withLock { $0.isEmpty })
        #expect(raced.outcome == .fallback(.keychainLocked) && raced.content.userInfo[MailboxHandle.apnsKey] == .string(handle.description))
        #expect(raced.content.userInfo[WireFormat.encryptedDataKey] == nil)
    }

    @Test("410 retracted without the filtering entitlement: the placeholder's title, body (Deleted), outcome retracted; the handle's notifications removed")
    func retractedDeleted() async throws {
        let handle = try #require(MailboxHandle.make(deliveryID: "d_1"))
        let replacer = RecordingReplacer()
        var c = configuration(ScriptedMailboxFetcher(.retracted))
        c.notificationReplacer = replacer
        let delivery = await SecretMessageExtension(configuration: c).delivery(for: Self.push(handle.description))
        #expect(delivery.outcome == .retracted && delivery.outcome.reason == .retracted)
        #expect(delivery.content.title == "New message" && delivery.content.body == "(Deleted)" && !delivery.suppressed)
        Self.expectNothingOfThePush(delivery.content, handle)
        #expect(replacer.removed.withLock { $0 } == [handle.description])
    }

    @Test("410 retracted with the filtering entitlement: empty content, nothing shown")
    func retractedFiltered() async throws {
        let handle = try #require(MailboxHandle.make(deliveryID: "d_1"))
        var c = configuration(ScriptedMailboxFetcher(.retracted))
        c.suppressesReplays = true
        let delivery = await SecretMessageExtension(configuration: c).delivery(for: Self.push(handle.description))
        #expect(delivery.outcome == .retracted && delivery.suppressed)
        #expect(delivery.content == NotificationContent())
    }

    @Test("later (the app's launch): each delivered notification that holds a handle is fetched and replaced; a failed fetch keeps it")
    func laterReplacesKeptHandles() async throws {
        let handles = try ["d_ok", "d_ret", "d_fail", "d_gone"].map { try #require(MailboxHandle.make(deliveryID: $0)) }
        func kept(_ id: String, _ handle: MailboxHandle) -> NotificationRequest {
            var content = Self.push(handle.description).content
            content.body = "(Encrypted)"
            return NotificationRequest(identifier: id, content: content)
        }
        let center = MemoryCenter([kept("R-OK", handles[0]), kept("R-RET", handles[1]), kept("R-FAIL", handles[2]), kept("R-GONE", handles[3]),
                                   NotificationRequest(identifier: "R-PLAIN", payload: JSONObject([("aps", .object(JSONObject([])))]))])
        let fetcher = MapFetcher(["d_ok": .envelope(try envelope(deliveryID: "d_ok"), messageID: "m-1"), "d_ret": .retracted,
                                  "d_fail": .failed("connection refused"), "d_gone": .collected])
        let receiver = SecretMessageExtension(configuration: configuration(fetcher, replay: InMemoryReplayGuard()))
        let summary = await receiver.processKeptHandles(replacer: center)
        #expect(summary.replaced == 1 && summary.retracted == 1 && summary.failed == 1 && summary.remaining == 1)
        #expect(fetcher.calls.withLock { $0 } == 4, "only notifications that hold a handle are fetched")
        let opened = try #require(center.content("R-OK"))
        #expect(opened.body == "The eagle lands at noon." && opened.userInfo[MailboxHandle.apnsKey] == nil)
        #expect(center.content("R-RET")?.body == "(Deleted)" && center.content("R-RET")?.userInfo[MailboxHandle.apnsKey] == nil)
        #expect(center.content("R-FAIL")?.userInfo[MailboxHandle.apnsKey] == .string(handles[2].description), "kept to try again")
        #expect(center.content("R-GONE")?.body == "(Encrypted)" && center.content("R-GONE")?.userInfo[MailboxHandle.apnsKey] == nil)
        // A second pass fetches only what is still kept.
        #expect(await receiver.processKeptHandles(replacer: center).remaining == 1)
        #expect(fetcher.calls.withLock { $0 } == 5)

        // With the filtering entitlement a retracted one is removed.
        var c = configuration(MapFetcher(["d_ret": .retracted]))
        c.suppressesReplays = true
        let filtered = MemoryCenter([kept("R-RET", handles[1])])
        #expect(await SecretMessageExtension(configuration: c).processKeptHandles(replacer: filtered).retracted == 1)
        #expect(filtered.shown.withLock { $0.isEmpty })
    }

    @Test("the synchronous open(_:) cannot fetch: fetchFailed, the handle kept, nothing of the push's text")
    func synchronousOpenKeepsTheHandle() throws {
        let handle = try #require(MailboxHandle.make(deliveryID: "d_1"))
        let fetcher = ScriptedMailboxFetcher(.collected)
        let delivery = SecretMessageExtension(configuration: configuration(fetcher)).open(Self.push(handle.description))
        #expect(delivery.outcome == .fallback(.fetchFailed) && delivery.content.body == "(Encrypted)")
        #expect(delivery.content.userInfo[MailboxHandle.apnsKey] == .string(handle.description))
        #expect(fetcher.calls == 0)
    }

    @Test("a gateway that never answers: the fetch deadline holds and the outcome is fetchFailed")
    func hangingGateway() async throws {
        let handle = try #require(MailboxHandle.make(deliveryID: "d_1"))
        var c = configuration(ScriptedMailboxFetcher(.collected, hangs: true))
        c.mailboxFetchBudget = .milliseconds(200)
        let delivery = await SecretMessageExtension(configuration: c).delivery(for: Self.push(handle.description))
        #expect(delivery.outcome == .fallback(.fetchFailed))
        #expect(delivery.content.userInfo[MailboxHandle.apnsKey] == .string(handle.description))
    }

    @Test("the extension's expiry during a hanging fetch delivers the timeout content at once")
    func expiryDuringFetch() async throws {
        let handle = try #require(MailboxHandle.make(deliveryID: "d_1"))
        let ext = SecretMessageExtension(configuration: configuration(ScriptedMailboxFetcher(.collected, hangs: true)))
        let shown = Mutex<[ExtensionDelivery]>([])
        let delivered: ExtensionDelivery = await withCheckedContinuation { done in
            ext.didReceive(Self.push(handle.description)) { d in
                if shown.withLock({ s -> Bool in s.append(d); return s.count == 1 }) { done.resume(returning: d) }
            }
            Task {
                try? await Task.sleep(for: .milliseconds(50))
                ext.serviceExtensionTimeWillExpire()
            }
        }
        #expect(delivered.outcome == .timeExpired && delivered.content.subtitle == "(Encrypted)")
        #expect(delivered.content.userInfo[WireFormat.encryptedDataKey] == nil)
    }
}
