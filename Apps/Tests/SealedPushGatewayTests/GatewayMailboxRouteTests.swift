import Foundation
import Hummingbird
import Logging
import NIOConcurrencyHelpers
import NIOCore
import ServiceLifecycle
import SealedPushCrypto
import SealedPushDevice
import SealedPushDeviceHTTP
import SealedPushReceiver
import SealedPushGateway
import SealedPushKeychain
import SealedPushTestSupport
import SealedPushWire
import Testing

extension GatewaySuites {
    /// Mailbox v1 over HTTP against a gateway on loopback: the push holds only the handle, the fetch hands the
    /// envelope once, and every wrong handle gets one `404`.
    @Suite("Gateway mailbox routes", .serialized, .timeLimit(.minutes(10)))
    struct GatewayMailboxRouteTests {
        static let mailboxOn = JSONObject([("mailbox", .object(JSONObject([("enabled", true), ("fetch_grace", 5)])))])

        /// The handle in an accepted APNs push to `phone`, checking that the push carries nothing else of the message.
        static func handle(in g: GatewayHarness, for phone: Phone) throws -> String {
            let push = try #require(g.apns.pushes.last { $0.deviceToken == phone.token })
            let root = try #require(try JSON.parse(push.payload).objectValue)
            #expect(root["ENCRYPTED_DATA"] == nil)
            #expect(Set(root.map(\.key)) == ["aps", "SEALEDPUSH_FETCH"])
            let aps = try #require(root["aps"]?.objectValue)
            #expect(aps["mutable-content"] == .int(1))
            #expect(aps["alert"]?.objectValue?["body"]?.stringValue == "(Encrypted)")
            #expect(push.payload.count < 400, "the push grows with the message: \(push.payload.count) bytes")
            return try #require(root["SEALEDPUSH_FETCH"]?.stringValue)
        }

        static func fetch(_ g: GatewayHarness, _ handle: String) async throws -> Answer {
            try await g.api.call(.POST, "/v1/mailbox/fetch", key: nil, json: .object(JSONObject([("handle", .string(handle))])))
        }

        @Test func aMailboxMessageIsFetchedOnceConfirmedAndThenGone() async throws {
            try await withGateway("mailbox-flow", extraApp: Self.mailboxOn) { g in
                let phone = try Phone(in: g.directory, name: "p", token: hexToken(1))
                try await g.register(phone, device: "d1", user: "u")
                let text = String(repeating: "a long secret line. ", count: 1000)  // 20 KB: push mode refuses it
                let sent = try await g.send(JSONObject([("user_id", "u")]), body: text)
                #expect(sent.status == 202, "\(sent.text)")
                #expect(sent.json["deliveries"]?.arrayValue?.first?.objectValue?["delivery"]?.stringValue == "mailbox")
                let id = try #require(sent.json["message_id"]?.stringValue)
                try await g.waitForStates(id, ["accepted"])
                let handle = try Self.handle(in: g, for: phone)
                let first = try await Self.fetch(g, handle)
                #expect(first.status == 200 && first.header("Cache-Control") == "no-store", "\(first.status) \(first.text)")
                #expect(first.json["message_id"]?.stringValue == id)
                let message = try await g.api.call(.GET, "/v1/apps/chat/messages/\(id)").json
                let delivery = try #require(message["deliveries"]?.arrayValue?.first?.objectValue)
                #expect(delivery["state"]?.stringValue == "fetched" && delivery["delivery"]?.stringValue == "mailbox")
                #expect(delivery["fetched_at"]?.stringValue != nil)
                // The device key opens it (wire v1 §5's checks), its body names the delivery (`dlv`), and its receipt
                // confirms it: then the handle answers 410 collected.
                let keyPair = try DeviceKeys(store: phone.store).device.activeKeyPair()
                let opened = try MessageOpener(keys: InMemoryKeys([keyPair]))
                    .open(encryptedData: try #require(first.json["envelope"]?.stringValue), now: Int64(Date().timeIntervalSince1970))
                #expect(opened.body.alert.body == text)
                #expect(mailboxBodyMatches(opened.rawBody, handle: try #require(MailboxHandle(handle))))
                let receipt = try #require(opened.body.receipt)
                let posted = try await g.api.call(.POST, "/v1/receipts", key: nil, json: .object(JSONObject([
                    ("v", .int(1)), ("type", "delivered"), ("id", .string(id)), ("token", .string(receipt.token)),
                    ("at", .int(Int64(Date().timeIntervalSince1970))),
                ])))
                #expect(posted.status == 204, "\(posted.text)")
                try await g.waitForStates(id, ["delivered"])
                let after = try await Self.fetch(g, handle)
                #expect(after.status == 410 && after.json["reason"]?.stringValue == "collected", "\(after.status) \(after.text)")
                #expect(after.code == "gone")
                // The webhook event listing holds delivery.fetched.
                let events = try await g.api.call(.GET, "/v1/apps/chat/events").json["events"]?.arrayValue ?? []
                #expect(events.contains { $0.objectValue?["type"]?.stringValue == "delivery.fetched" })
                // The same 20 KB in push mode does not fit.
                let push = try await g.send(JSONObject([("user_id", "u")]), body: text, extra: JSONObject([("delivery", "push")]))
                #expect(push.status == 413, "\(push.status) \(push.text)")
            }
        }

        @Test func everyWrongHandleGetsTheSameNotFoundAndBadBodiesAClearError() async throws {
            try await withGateway("mailbox-bad", extraApp: Self.mailboxOn) { g in
                let phone = try Phone(in: g.directory, name: "p", token: hexToken(1))
                try await g.register(phone, device: "d1", user: "u")
                let sent = try await g.send(JSONObject([("user_id", "u")]))
                let id = try #require(sent.json["message_id"]?.stringValue)
                try await g.waitForStates(id, ["accepted"])
                let handle = try Self.handle(in: g, for: phone)
                let parsed = try #require(MailboxHandle(handle))
                let wrongToken = MailboxHandle.make(deliveryID: parsed.deliveryID)!.description
                let unknownDelivery = MailboxHandle(deliveryID: "d_unknown", token: parsed.token)!.description
                let cases = [wrongToken, unknownDelivery, String(handle.dropLast()), handle + "A", "2" + String(handle.dropFirst()), "", "1..",
                             String(repeating: "x", count: 900), handle.replacingOccurrences(of: ".", with: "-")]
                var bodies = Set<String>()
                for bad in cases {
                    let answer = try await Self.fetch(g, bad)
                    #expect(answer.status == 404 && answer.code == "unknown_handle", "\(bad.prefix(20)): \(answer.status) \(answer.text)")
                    bodies.insert(answer.text)
                }
                #expect(bodies.count == 1, "the 404s differ: \(bodies)")
                // Not JSON, another member, a body over 1 KiB, no Content-Type: clear errors.
                #expect(try await g.api.call(.POST, "/v1/mailbox/fetch", key: nil, raw: Array("handle".utf8)).status == 400)
                #expect(try await g.api.call(.POST, "/v1/mailbox/fetch", key: nil,
                                             json: .object(JSONObject([("handle", .string(handle)), ("app", "chat")]))).status == 400)
                let big = try await g.api.call(.POST, "/v1/mailbox/fetch", key: nil,
                                               json: .object(JSONObject([("handle", .string(handle + String(repeating: "A", count: 1100)))])))
                #expect(big.status == 413, "\(big.text)")
                #expect(try await g.api.call(.POST, "/v1/mailbox/fetch", key: nil, raw: Array("{}".utf8), contentType: nil).status == 415)
                // None of this cost the message: the right handle still fetches it.
                #expect(try await Self.fetch(g, handle).status == 200)
                // Mailbox asked of an app without it: 422 mailbox_disabled, before anything is looked up.
                let refused = try await g.api.call(.POST, "/v1/apps/other/messages", key: Keys.otherApp, json: .object(JSONObject([
                    ("to", .object(JSONObject([("user_id", "nobody")]))), ("body", "x"), ("delivery", "mailbox"),
                ])))
                #expect(refused.status == 422 && refused.code == "mailbox_disabled", "\(refused.text)")
                let typo = try await g.send(JSONObject([("user_id", "u")]), extra: JSONObject([("delivery", "mail")]))
                #expect(typo.status == 400 && typo.json["field"]?.stringValue == "/delivery")
            }
        }

        @Test func aRetractedMessageAnswersGoneRetracted() async throws {
            try await withGateway("mailbox-retract", extraApp: Self.mailboxOn) { g in
                let phone = try Phone(in: g.directory, name: "p", token: hexToken(1))
                try await g.register(phone, device: "d1", user: "u")
                let sent = try await g.send(JSONObject([("user_id", "u")]))
                let id = try #require(sent.json["message_id"]?.stringValue)
                try await g.waitForStates(id, ["accepted"])
                let handle = try Self.handle(in: g, for: phone)
                #expect(try await g.api.call(.DELETE, "/v1/apps/chat/messages/\(id)").status == 204)
                let gone = try await Self.fetch(g, handle)
                #expect(gone.status == 410 && gone.json["reason"]?.stringValue == "retracted", "\(gone.text)")
                #expect(try await Self.fetch(g, handle).json["reason"]?.stringValue == "retracted")
                // retract takes only shown.
                #expect(try await g.api.call(.DELETE, "/v1/apps/chat/messages/\(id)?retract=other").status == 400)
            }
        }

        @Test func retractShownSendsAPushThatReplacesTheShownOne() async throws {
            try await withGateway("mailbox-retract-shown", extraApp: Self.mailboxOn) { g in
                let phone = try Phone(in: g.directory, name: "p", token: hexToken(1))
                try await g.register(phone, device: "d1", user: "u")
                let sent = try await g.send(JSONObject([("user_id", "u")]), extra: JSONObject([("collapse_id", "chat-7")]))
                let id = try #require(sent.json["message_id"]?.stringValue)
                try await g.waitForStates(id, ["accepted"])
                let first = try Self.handle(in: g, for: phone)
                let answer = try await g.api.call(.DELETE, "/v1/apps/chat/messages/\(id)?retract=shown")
                #expect(answer.status == 200, "\(answer.text)")
                let listed = answer.json["deliveries"]?.arrayValue?.compactMap(\.objectValue) ?? []
                #expect(listed.map { $0["retraction"]?.stringValue } == ["sent"])
                try await waitUntil("the retraction push", within: .seconds(60)) { g.apns.pushes.count == 2 }
                let pushes = g.apns.pushes
                #expect(pushes.map(\.collapseID) == ["chat-7", "chat-7"])
                let second = try Self.handle(in: g, for: phone)
                #expect(second != first && MailboxHandle(second)?.deliveryID == MailboxHandle(first)?.deliveryID)
                for handle in [first, second] {
                    let gone = try await Self.fetch(g, handle)
                    #expect(gone.status == 410 && gone.json["reason"]?.stringValue == "retracted", "\(gone.text)")
                }
            }
        }

        @Test func theListNeedsTheDeviceKeyAndAnswersEachChallengeOnce() async throws {
            try await withGateway("mailbox-list", extraApp: Self.mailboxOn) { g in
                let phone = try Phone(in: g.directory, name: "p", token: hexToken(1))
                try await g.register(phone, device: "d1", user: "u")
                var ids: [String] = []
                for n in 0..<3 {
                    let sent = try await g.send(JSONObject([("user_id", "u")]), body: "message \(n)")
                    ids.append(try #require(sent.json["message_id"]?.stringValue))
                }
                let keyPair = try DeviceKeys(store: phone.store).device.activeKeyPair()
                func challenge(_ device: String = "d1", app: String = "chat") async throws -> Answer {
                    try await g.api.call(.POST, "/v1/mailbox/challenge", key: nil,
                                         json: .object(JSONObject([("app", .string(app)), ("device_id", .string(device))])))
                }
                let c = try await challenge()
                #expect(c.status == 200 && c.json["expires_in"] == .int(60), "\(c.text)")
                let sealed = try #require(c.json["sealed"]?.stringValue)
                let answer = try #require(MailboxChallenge.answer(sealed: sealed, with: keyPair))
                let body = JSONValue.object(JSONObject([("challenge_id", c.json["challenge_id"]!), ("answer", .string(answer))]))
                let listed = try await g.api.call(.POST, "/v1/mailbox/list", key: nil, json: body)
                #expect(listed.status == 200, "\(listed.text)")
                let handles = listed.json["handles"]?.arrayValue?.compactMap(\.objectValue) ?? []
                #expect(handles.compactMap { $0["message_id"]?.stringValue } == ids)
                // Replayed: 403 wrong_answer.
                let replay = try await g.api.call(.POST, "/v1/mailbox/list", key: nil, json: body)
                #expect(replay.status == 403 && replay.code == "wrong_answer")
                // Each listed handle fetches.
                for h in handles {
                    #expect(try await Self.fetch(g, try #require(h["handle"]?.stringValue)).status == 200)
                }
                // An unknown device gets a challenge all the same, which no key it could hold opens.
                let unknown = try await challenge("nobody")
                #expect(unknown.status == 200)
                #expect(MailboxChallenge.answer(sealed: unknown.json["sealed"]?.stringValue ?? "", with: keyPair) == nil)
                // Nor does a device of one app named under another.
                let otherApp = try await challenge("d1", app: "other")
                #expect(otherApp.status == 200)
                #expect(MailboxChallenge.answer(sealed: otherApp.json["sealed"]?.stringValue ?? "", with: keyPair) == nil)
                // A wrong answer: 403, and the challenge is spent.
                let other = try await challenge()
                let wrong = try await g.api.call(.POST, "/v1/mailbox/list", key: nil, json: .object(JSONObject([
                    ("challenge_id", other.json["challenge_id"]!), ("answer", .string(Base64.encodeURLSafeNoPadding([UInt8](repeating: 7, count: 32)))),
                ])))
                #expect(wrong.status == 403 && wrong.code == "wrong_answer")
            }
        }

        @Test func refusedFetchesSpendTheSourceBudgetButAFoundMessageIsAnswered() async throws {
            var options = GatewayOptions()
            options.deviceRateLimit = 2
            let frozen = SealedPushManualClock()
            options.clock = SealedPushClock(wall: SealedPushClock.system.wall, monotonic: frozen.clock.monotonic)
            try await withGateway("mailbox-limit", options: options, extraApp: Self.mailboxOn) { g in
                let phone = try Phone(in: g.directory, name: "p", token: hexToken(1))
                try await g.register(phone, device: "d1", user: "u")
                let sent = try await g.send(JSONObject([("user_id", "u")]))
                let id = try #require(sent.json["message_id"]?.stringValue)
                try await g.waitForStates(id, ["accepted"])
                let handle = try Self.handle(in: g, for: phone)
                let wrong = MailboxHandle.make(deliveryID: "d_x")!.description
                #expect(try await Self.fetch(g, wrong).status == 404)
                #expect(try await Self.fetch(g, wrong).status == 404)
                let limited = try await Self.fetch(g, wrong)
                #expect(limited.status == 429 && limited.header("Retry-After") == "1")
                #expect(try await Self.fetch(g, handle).status == 200)
                let metrics = try await g.admin.call(.GET, "/metrics", key: nil).text
                #expect(metrics.contains(#"sealedpush_mailbox_requests_total{route="fetch",answer="unknown_handle"} 2"#), "\(metrics)")
                #expect(metrics.contains(#"sealedpush_mailbox_requests_total{route="fetch",answer="rate_limited"} 1"#))
                #expect(metrics.contains(#"sealedpush_mailbox_requests_total{route="fetch",answer="ok"} 1"#))
            }
        }

        @Test("a handle of another app: the phone it reaches opens nothing (no text, no receipt) and its owner still gets the message")
        func aHandleOfAnotherAppOpensNothingAndCostsItsOwnerNothing() async throws {
            let graceful = JSONObject([("mailbox", .object(JSONObject([("enabled", true), ("fetch_grace", 60)])))])
            try await withGateway("mailbox-other-app", extraApp: graceful, otherApp: graceful) { g in
                let mine = try Phone(in: g.directory, name: "mine", token: hexToken(1))
                try await g.register(mine, device: "d1", user: "u")
                let theirs = try Phone(in: g.directory, name: "theirs", token: hexToken(2))
                let registered = try await g.api.call(.PUT, "/v1/apps/other/devices/o1", key: Keys.otherApp, json: .object(JSONObject([
                    ("user_id", "v"), ("apns_token", .string(theirs.token)), ("environment", "sandbox"), ("key_record", .object(theirs.record))])))
                #expect(registered.status == 201, "\(registered.text)")
                let secret = "other-app-\(UUID().uuidString)"
                let sent = try await g.api.call(.POST, "/v1/apps/other/messages", key: Keys.otherApp, json: .object(JSONObject([
                    ("to", .object(JSONObject([("user_id", "v")]))), ("title", "Agent K"), ("body", .string(secret))])))
                #expect(sent.status == 202, "\(sent.text)")
                let id = try #require(sent.json["message_id"]?.stringValue)
                try await waitUntil("the other app's push to reach the local APNs", within: .seconds(60)) {
                    g.apns.pushes.contains { $0.deviceToken == theirs.token }
                }
                let push = try #require(g.apns.pushes.last { $0.deviceToken == theirs.token })
                _ = try Self.handle(in: g, for: theirs)
                let fetcher = try HTTPMailboxFetcher(mailboxURL: "http://127.0.0.1:\(g.apiPort)")
                // The other app's push (its handle) handed to this app's phone: the envelope is sealed to another key.
                let wrong = await SimulatedDevice(store: mine.store).deliver(push.payload, receipts: SimulatedDevice(store: mine.store).receiptCourier(transport: g.receipts),
                                                                             mailbox: fetcher)
                #expect(wrong.outcome != .decrypted, "\(wrong)")
                #expect(wrong.notification?.body != secret && wrong.notification?.title != "Agent K", "\(String(describing: wrong.notification))")
                #expect(try NotificationCenterStore(store: mine.store).entries().allSatisfy { !$0.body.contains(secret) })
                let state = try await g.api.call(.GET, "/v1/apps/other/messages/\(id)", key: Keys.otherApp).json
                #expect(state["deliveries"]?.arrayValue?.first?.objectValue?["state"]?.stringValue != "delivered", "\(state)")
                // Nothing lost: the phone it was for fetches and opens it, and its receipt confirms it.
                let right = await SimulatedDevice(store: theirs.store).deliver(push.payload, receipts: SimulatedDevice(store: theirs.store).receiptCourier(transport: g.receipts),
                                                                               mailbox: fetcher)
                #expect(right.outcome == .decrypted && right.notification?.body == secret, "\(right)")
                try await waitUntil("the owner's receipt to confirm the delivery", within: .seconds(30)) {
                    let m = try await g.api.call(.GET, "/v1/apps/other/messages/\(id)", key: Keys.otherApp).json
                    return m["deliveries"]?.arrayValue?.first?.objectValue?["state"]?.stringValue == "delivered"
                }
                // And this app's list never names the other app's delivery.
                let keyPair = try DeviceKeys(store: mine.store).device.activeKeyPair()
                let c = try await g.api.call(.POST, "/v1/mailbox/challenge", key: nil, json: .object(JSONObject([("app", "chat"), ("device_id", "d1")])))
                let sealed = try #require(c.json["sealed"]?.stringValue)
                let answer = try #require(MailboxChallenge.answer(sealed: sealed, with: keyPair))
                let listed = try await g.api.call(.POST, "/v1/mailbox/list", key: nil, json: .object(JSONObject([
                    ("challenge_id", c.json["challenge_id"] ?? .null), ("answer", .string(answer))])))
                #expect(listed.status == 200 && listed.json["handles"]?.arrayValue?.isEmpty == true, "\(listed.text)")
                await fetcher.shutdown()
            }
        }

        @Test("the device's fetcher and list: an answer over the limit fails, a hanging gateway ends at the deadline")
        func theDevicesFetcherRefusesOverlongAnswersAndHangingLists() async throws {
            let stub = try await MailboxStubGateway()
            let fetcher = try HTTPMailboxFetcher(mailboxURL: "http://127.0.0.1:\(stub.port)")
            let handle = MailboxHandle.make(deliveryID: "d_1")!
            let fetched = await fetcher.fetch(handle, deadlineSeconds: 5)
            guard case let .failed(why) = fetched else {
                Issue.record("an answer over \(HTTPMailboxFetcher.maximumResponseBytes) bytes was taken: \(fetched)")
                await fetcher.shutdown(); await stub.stop(); return
            }
            #expect(why.contains("larger"), "\(why)")
            let listed = await fetcher.list(app: "chat", deviceID: "d1", deadlineSeconds: 5) { _ in "answer" }
            guard case .failed = listed else {
                Issue.record("a list answer over \(HTTPMailboxFetcher.maximumListResponseBytes) bytes was taken: \(listed)")
                await fetcher.shutdown(); await stub.stop(); return
            }
            #expect(stub.listAsked.withLockedValue { $0 } == 1, "the list was asked once, after the challenge")
            await fetcher.shutdown()
            await stub.stop()
            // A gateway that takes the connection and never answers: the list's deadline ends it.
            let (fd, port) = try GatewayHarness.silentListener()
            defer { close(fd) }
            let hanging = try HTTPMailboxFetcher(mailboxURL: "http://127.0.0.1:\(port)")
            let clock = ContinuousClock()
            let start = clock.now
            let result = await hanging.list(app: "chat", deviceID: "d1", deadlineSeconds: 0.5) { _ in "answer" }
            await hanging.shutdown()
            guard case .failed = result else { Issue.record("a hanging gateway answered the list: \(result)"); return }
            #expect(clock.now - start < .seconds(9), "the list outlived its deadline")
        }

        @Test func theDevicesFetcherReadsEachAnswerAndKeepsItsDeadline() async throws {
            // Not https (and not loopback): refused before anything is sent.
            #expect(throws: MailboxURLError.self) { try HTTPMailboxFetcher(mailboxURL: "http://push.example.com") }
            try await withGateway("mailbox-fetcher", extraApp: Self.mailboxOn) { g in
                let phone = try Phone(in: g.directory, name: "p", token: hexToken(1))
                try await g.register(phone, device: "d1", user: "u")
                let sent = try await g.send(JSONObject([("user_id", "u")]))
                let id = try #require(sent.json["message_id"]?.stringValue)
                try await g.waitForStates(id, ["accepted"])
                let handle = try #require(MailboxHandle(try Self.handle(in: g, for: phone)))
                let fetcher = try HTTPMailboxFetcher(mailboxURL: "http://127.0.0.1:\(g.apiPort)/")
                guard case let .envelope(bytes, messageID) = await fetcher.fetch(handle, deadlineSeconds: 10) else {
                    Issue.record("the fetcher was not handed the envelope")
                    await fetcher.shutdown()
                    return
                }
                #expect(messageID == id && bytes.first == 1)
                let wrong = MailboxHandle(deliveryID: handle.deliveryID, token: MailboxHandle.make(deliveryID: "x")!.token)!
                guard case .failed = await fetcher.fetch(wrong, deadlineSeconds: 10) else {
                    Issue.record("a wrong handle did not fail")
                    await fetcher.shutdown()
                    return
                }
                _ = try await g.api.call(.DELETE, "/v1/apps/chat/messages/\(id)")
                #expect(await fetcher.fetch(handle, deadlineSeconds: 10) == .retracted)
                await fetcher.shutdown()
            }
            // A gateway that takes the connection and never answers: the deadline ends the fetch.
            let (fd, port) = try GatewayHarness.silentListener()
            defer { close(fd) }
            let hanging = try HTTPMailboxFetcher(mailboxURL: "http://127.0.0.1:\(port)")
            let result = await hanging.fetch(MailboxHandle.make(deliveryID: "d_1")!, deadlineSeconds: 0.5)
            guard case .failed = result else {
                Issue.record("a hanging gateway answered \(result)")
                await hanging.shutdown()
                return
            }
            await hanging.shutdown()
        }
    }
}

/// A gateway stand-in on loopback whose mailbox answers are too large: the fetch answers 200 with a body over
/// `HTTPMailboxFetcher.maximumResponseBytes`, the challenge a valid challenge, the list 200 with a body over
/// `maximumListResponseBytes` (counting the lists asked).
final class MailboxStubGateway: Sendable {
    let port: Int
    let listAsked = NIOLockedValueBox(0)
    let group: ServiceGroup
    let task: Task<Void, any Error>

    init() async throws {
        let router = Router()
        let listAsked = self.listAsked
        router.post("v1/mailbox/fetch") { _, _ -> Response in
            Response(status: .ok, headers: [.contentType: "application/json"],
                     body: ResponseBody(byteBuffer: MailboxStubGateway.padded(HTTPMailboxFetcher.maximumResponseBytes + 1024)))
        }
        router.post("v1/mailbox/challenge") { _, _ -> Response in
            Response(status: .ok, headers: [.contentType: "application/json"],
                     body: ResponseBody(byteBuffer: ByteBuffer(string: #"{"challenge_id":"c1","sealed":"AAAA","expires_in":60}"#)))
        }
        router.post("v1/mailbox/list") { _, _ -> Response in
            listAsked.withLockedValue { $0 += 1 }
            return Response(status: .ok, headers: [.contentType: "application/json"],
                            body: ResponseBody(byteBuffer: MailboxStubGateway.padded(HTTPMailboxFetcher.maximumListResponseBytes + 1024)))
        }
        var logger = Logger(label: "mailbox-stub")
        logger.logLevel = .critical
        let (ports, continuation) = AsyncStream<Int>.makeStream()
        let application = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                                      onServerRunning: { channel in continuation.yield(channel.localAddress?.port ?? 0) }, logger: logger)
        // Stopped by a graceful shutdown, never by cancelling the server's task (swift-nio #2637).
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(services: [application], logger: logger))
        self.group = group
        let task = Task {
            defer { continuation.finish() }
            try await group.run()
        }
        self.task = task
        port = try await boundPort(ports, of: task)
    }

    /// A JSON answer of a little over `size` bytes.
    static func padded(_ size: Int) -> ByteBuffer {
        ByteBuffer(string: #"{"envelope":""# + String(repeating: "A", count: size) + #"","message_id":"m"}"#)
    }

    func stop() async {
        await group.triggerGracefulShutdown()
        _ = try? await task.value
    }
}
