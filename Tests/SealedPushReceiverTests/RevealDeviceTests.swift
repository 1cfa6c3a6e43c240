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

/// A simulated iPhone in a temporary directory with a device key and a reveal key, on a clock moved by hand.
final class RevealPhone: Sendable {
    let directory: URL
    let time = TestTime()
    let store: KeychainStore
    let record: DeviceKeyRecord

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("reveal-dev-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        time.value.withLock { $0 = 1_800_000_000 }
        store = try KeychainStore(url: directory.appendingPathComponent("dev"), clock: WallClock { [time] in
            Date(timeIntervalSince1970: Double(time.value.withLock { $0 }))
        })
        record = try DeviceKeys(store: store).generate()
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    var now: Int64 { time.value.withLock { $0 } }
    var device: SimulatedDevice { SimulatedDevice(store: store) }

    func payload(reveal: Bool = true, id: String? = nil, expiry: Expiry? = nil, receiptURL: String? = nil) throws -> [UInt8] {
        var message = RevealRig.text
        message.messageID = id
        message.expiry = expiry
        message.receiptURL = receiptURL
        if reveal { message.reveal = .standard }
        let now = self.now
        return try NotificationSender(clock: { now }).seal(message, to: record).payload
    }

    /// The notification store's file, as bytes: what a forensic tool would read.
    var storeFile: String {
        (try? String(contentsOf: directory.appendingPathComponent("dev").appendingPathComponent(NotificationCenterStore.fileName),
                     encoding: .utf8)) ?? ""
    }

    func expectNoSecretStored(_ comment: Comment? = nil, sourceLocation: SourceLocation = #_sourceLocation) {
        let stored = storeFile
        for secret in RevealRig.secrets { #expect(!stored.contains(secret), comment, sourceLocation: sourceLocation) }
    }
}

@Suite("Reveal: the simulated device's notification store and press and hold (§7)", .timeLimit(.minutes(10)))
struct RevealDeviceTests {
    @Test("revealed receipt (§6): delivered from the service extension, revealed once from the content extension; never on a locked press; the token never in the notification store")
    func revealedReceipt() async throws {
        let phone = try RevealPhone()
        let transport = RecordingTransport()
        let courier = phone.device.receiptCourier(transport: transport)
        let result = await phone.device.deliver(try phone.payload(id: "msg-rv-1", receiptURL: "https://push.example.com/r"),
                                                requestIdentifier: "REQ-R", receipts: courier)
        // A receipt is queued instead of sent when its 2-second bound passes first (a loaded sanitizer run):
        // the outbox then sends it, so what reaches the collector is the same either way.
        #expect(result.outcome == .held && result.receipt != nil)
        if result.receipt == .queued { _ = await phone.device.flushReceipts(transport: transport) }
        #expect(transport.bodies.map { $0["type"] } == [.string("delivered")])
        let token = transport.bodies.first?["token"]?.stringValue ?? ""
        #expect(!token.isEmpty && !phone.storeFile.contains(token), "the receipt token reached the notification store")

        _ = try phone.store.lock()
        #expect(try await phone.device.expand(requestID: "REQ-R", receipts: courier).outcome == .locked)
        #expect(transport.bodies.count == 1, "a locked press sent a receipt")

        _ = try phone.store.unlock()
        #expect(try await phone.device.expand(requestID: "REQ-R", receipts: courier).outcome == .revealed)
        _ = await phone.device.flushReceipts(transport: transport)
        #expect(try await phone.device.expand(requestID: "REQ-R", receipts: courier).outcome == .revealed)
        _ = await phone.device.flushReceipts(transport: transport)
        #expect(transport.bodies.map { $0["type"] } == [.string("delivered"), .string("revealed")], "revealed goes out once per message")
        let revealed = transport.bodies[1]
        #expect(revealed["id"] == .string("msg-rv-1") && revealed["token"] == .string(token) && revealed["at"] == .int(phone.now))
        #expect(transport.posts.withLock { $0.map(\.url) } == ["https://push.example.com/r", "https://push.example.com/r"])
        // A collector reads it back as the revealed receipt.
        #expect(ReceiptMessage.parse(transport.raw.withLock { $0[1] })?.message == .revealed(id: "msg-rv-1", token: token, at: phone.now, attachments: nil))
    }

    @Test("the view comes back before the revealed receipt: a slow collector never holds the text back")
    func viewBeforeReceipt() async throws {
        let phone = try RevealPhone()
        let delivered = RecordingTransport()
        _ = await phone.device.deliver(try phone.payload(id: "msg-rv-4", receiptURL: "https://push.example.com/r"),
                                       requestIdentifier: "REQ-S", receipts: phone.device.receiptCourier(transport: delivered))
        let gate = GatedTransport()
        let store = phone.store
        var configuration = RevealContentExtension.Configuration(
            revealKeys: RevealKeyring(store: store), deviceKeys: DeviceKeyring(store: store),
            protectedDataAvailable: { true })
        configuration.receipts = phone.device.receiptCourier(transport: gate)
        configuration.receiptBudget = .seconds(60)
        let contentExtension = RevealContentExtension(configuration: configuration)
        let stored = try #require(try NotificationCenterStore(store: store).entry(requestID: "REQ-S"))
        let content = NotificationContent(title: stored.title, subtitle: stored.subtitle, body: stored.body, threadIdentifier: stored.thread,
                                          categoryIdentifier: stored.category, userInfo: stored.userInfo)
        let view = await contentExtension.didReceive(DeliveredNotification(
            request: NotificationRequest(identifier: "REQ-S", content: content), deliveredAt: stored.deliveredAt))
        #expect(view.outcome == .revealed)
        // The gate holds the POST for up to 20 s: a view that waited for the receipt would come back after it.
        #expect(!gate.finished, "the view waited for the revealed receipt")
        gate.open()
        await contentExtension.finishBackgroundWork()
        #expect(gate.finished)
        #expect(gate.types == [.string("revealed")])
    }

    @Test("revealed receipt queued when the collector is down, and no ticket for a message without a receipt")
    func revealedReceiptQueued() async throws {
        let phone = try RevealPhone()
        let down = RecordingTransport(answer: .failed)
        let courier = phone.device.receiptCourier(transport: down)
        _ = await phone.device.deliver(try phone.payload(id: "msg-rv-2", receiptURL: "https://push.example.com/r"), requestIdentifier: "REQ-Q",
                                       receipts: courier)
        #expect(try await phone.device.expand(requestID: "REQ-Q", receipts: courier).outcome == .revealed)
        let queued = try ReceiptOutboxStore(store: phone.store).entries().entries.map(\.message)
        #expect(queued.count == 2)
        if case .revealed(let id, _, _, _)? = queued.last { #expect(id == "msg-rv-2") } else { Issue.record("no revealed receipt queued: \(queued)") }
        // Without a receipt URL nothing is kept or sent.
        let up = RecordingTransport()
        _ = await phone.device.deliver(try phone.payload(id: "msg-rv-3"), requestIdentifier: "REQ-N", receipts: phone.device.receiptCourier(transport: up))
        #expect(try await phone.device.expand(requestID: "REQ-N", receipts: phone.device.receiptCourier(transport: up)).outcome == .revealed)
        #expect(up.bodies.isEmpty)
    }

    @Test("held, stored without the secret; locked, then revealed after unlock, twice; the store never gains the text")
    func pressAndHold() async throws {
        let phone = try RevealPhone()
        let result = await phone.device.deliver(try phone.payload(), requestIdentifier: "REQ-1")
        #expect(result.outcome == .held && result.requestID == "REQ-1")
        let entries = try NotificationCenterStore(store: phone.store).entries()
        #expect(entries.map(\.requestID) == ["REQ-1"])
        #expect(entries.first?.body == "Press and hold to read" && entries.first?.category == "SEALED_REVEAL")
        #expect(entries.first?.userInfo[RevealFormat.userInfoKey] != nil)
        #expect(!phone.storeFile.isEmpty)
        phone.expectNoSecretStored("after delivery")

        _ = try phone.store.lock()
        let locked = try await phone.device.expand(requestID: "REQ-1")
        #expect(locked.outcome == .locked && locked.body == "Unlock iPhone to read")
        phone.expectNoSecretStored("after a locked press")

        _ = try phone.store.unlock()
        phone.time.value.withLock { $0 += 86_400 }  // read a day later
        let view = try await phone.device.expand(requestID: "REQ-1")
        #expect(view.outcome == .revealed && view.title == "Agent K" && view.body == "The eagle lands at noon.")
        let json = String(decoding: JSON.serialize(.object(view.jsonObject)), as: UTF8.self)
        #expect(json.hasPrefix(#"{"outcome":"revealed","reason":null,"view":{"title":"Agent K""#))
        #expect(try await phone.device.expand(requestID: "REQ-1").outcome == .revealed, "pressing and holding twice")
        phone.expectNoSecretStored("after revealing")
        #expect(try NotificationCenterStore(store: phone.store).entries() == entries, "nothing shown is written to the store")
    }

    @Test("the same request delivered twice replaces its entry; an ordinary message under previews none keeps its text out too")
    func replacementAndPreviews() async throws {
        let phone = try RevealPhone()
        let payload = try phone.payload()
        #expect(await phone.device.deliver(payload, requestIdentifier: "REQ-1").outcome == .held)
        #expect(await phone.device.deliver(payload, requestIdentifier: "REQ-1").outcome == .held)
        #expect(try NotificationCenterStore(store: phone.store).entries().count == 1)

        let ordinary = await phone.device.deliver(try phone.payload(reveal: false), requestIdentifier: "REQ-2", previews: .hidden)
        #expect(ordinary.outcome == .decrypted && ordinary.notification?.body == "Press and hold to read")
        phone.expectNoSecretStored("previews none")
        let view = try await phone.device.expand(requestID: "REQ-2")
        #expect(view.outcome == .revealed && view.body == "The eagle lands at noon.")

        // Previews full (the default) stores the text, as iOS keeps it today: what reveal on demand avoids.
        #expect(await phone.device.deliver(try phone.payload(reveal: false), requestIdentifier: "REQ-3").outcome == .decrypted)
        #expect(phone.storeFile.contains("eagle"))
    }

    @Test("the device's preview setting: full by default, stored, applied to deliveries; an unreadable one hands over no text")
    func previewSetting() async throws {
        let phone = try RevealPhone()
        #expect(try phone.device.previews() == .full)
        try phone.device.setPreviews(.title)
        #expect(try phone.device.previews() == .title)
        let shown = await phone.device.deliver(try phone.payload(reveal: false), requestIdentifier: "REQ-1")
        #expect(shown.notification?.title == "Agent K" && shown.notification?.body == "Press and hold to read")
        try phone.device.setPreviews(.hidden)
        #expect(PreviewPolicy.hidden.rawValue == "none" && PreviewPolicy(rawValue: "none") == .hidden)
        try phone.store.modify(itemClass: .genericPassword, service: "sealedpush.policy", account: "previews",
                               accessGroup: phone.store.accessGroups[0], accessibility: .alwaysThisDeviceOnly) { _ in SecureBytes(Array("some".utf8)) }
        #expect(throws: KeychainError.self) { try phone.device.previews() }
        let guarded = await phone.device.deliver(try phone.payload(reveal: false), requestIdentifier: "REQ-2")
        #expect(guarded.notification?.body == "Press and hold to read" && guarded.notification?.title == "Secret Message!")
        let kept = try #require(try NotificationCenterStore(store: phone.store).entry(requestID: "REQ-2"))
        let text = String(decoding: JSON.serialize(.object(kept.jsonObject)), as: UTF8.self)
        for secret in RevealRig.secrets { #expect(!text.contains(secret), "an unreadable setting") }
    }

    @Test("hostile inputs to expand: an unknown id, a store that is not JSON, a tampered envelope, an entry moved to another id")
    func hostile() async throws {
        let phone = try RevealPhone()
        #expect(await phone.device.deliver(try phone.payload(id: "m-1"), requestIdentifier: "REQ-1").outcome == .held)
        await #expect(throws: ExpandError.unknownRequest("NOPE")) { try await phone.device.expand(requestID: "NOPE") }
        #expect(ExpandError.unknownRequest("NOPE").description.contains("device notifications"))

        let file = phone.directory.appendingPathComponent("dev").appendingPathComponent(NotificationCenterStore.fileName)
        let original = try Data(contentsOf: file)
        guard case var .array(items) = try JSON.parse([UInt8](original)), case var .object(entry)? = items.first,
              case var .object(userInfo)? = entry["userInfo"], case let .string(envelope)? = userInfo[RevealFormat.userInfoKey] else {
            Issue.record("store shape"); return
        }
        // A tampered envelope: a defined fallback, nothing shown.
        var bytes = try Base64.decodePublic(envelope)
        bytes[bytes.count - 3] ^= 0x40
        userInfo[RevealFormat.userInfoKey] = .string(Base64.encode(bytes))
        entry["userInfo"] = .object(userInfo)
        items[0] = .object(entry)
        try Data(JSON.serialize(.array(items))).write(to: file)
        #expect(try await phone.device.expand(requestID: "REQ-1") == RevealView(outcome: .fallback(.decryptionFailed), body: "(Encrypted)"))

        // The entry moved to another request id: the message under another notification is a replay.
        try original.write(to: file)
        guard case let .array(originalItems) = try JSON.parse([UInt8](original)), case let .object(first)? = originalItems.first else {
            Issue.record("store shape"); return
        }
        entry = first
        entry["request_id"] = .string("REQ-OTHER")
        try Data(JSON.serialize(.array([.object(entry)]))).write(to: file)
        #expect(try await phone.device.expand(requestID: "REQ-OTHER").outcome == .fallback(.replayed))

        // A store that is not JSON: a typed error naming the file.
        try Data("not json".utf8).write(to: file)
        await #expect {
            try await phone.device.expand(requestID: "REQ-1")
        } throws: { error in
            guard case let .storeUnreadable(.decode(path, _))? = error as? ExpandError else { return false }
            return path.hasSuffix(NotificationCenterStore.fileName)
        }
        // A delivery still stands when the store cannot be read; the file is left for the user to remove.
        #expect(await phone.device.deliver(try phone.payload(id: "m-2"), requestIdentifier: "REQ-2").outcome == .held)
    }

    @Test("the reveal key rotated with a message in flight: it opens during the grace, then is unknownKey after prune")
    func rotationInFlight() async throws {
        let phone = try RevealPhone()
        #expect(await phone.device.deliver(try phone.payload(expiry: .after(seconds: 30 * 86_400)), requestIdentifier: "REQ-1").outcome == .held)
        let keys = DeviceKeys(store: phone.store)
        let rotated = try keys.rotateReveal(grace: .seconds(3600))
        #expect(rotated.reveal?.keyID != phone.record.reveal?.keyID)
        #expect(try await phone.device.expand(requestID: "REQ-1").outcome == .revealed)
        phone.time.value.withLock { $0 += 3601 }
        #expect(try keys.prune().map(\.kind) == [.reveal])
        #expect(try await phone.device.expand(requestID: "REQ-1").outcome == .fallback(.unknownKey))
        phone.expectNoSecretStored()
    }
}

@Suite("Reveal: the notification store's bound", .timeLimit(.minutes(10)))
struct NotificationStoreBoundTests {
    @Test("the oldest entries are dropped beyond the capacity; a request id delivered again moves to the end")
    func bound() throws {
        let phone = try RevealPhone()
        let store = NotificationCenterStore(store: phone.store, capacity: 3)
        func entry(_ id: String) -> StoredNotification {
            StoredNotification(requestID: id, deliveredAt: phone.now, title: "t", subtitle: "", body: "b", category: "", thread: "",
                               userInfo: JSONObject(), attachments: [])
        }
        for id in ["a", "b", "c", "d"] { try store.append(entry(id)) }
        #expect(try store.entries().map(\.requestID) == ["b", "c", "d"])
        try store.append(entry("b"))
        #expect(try store.entries().map(\.requestID) == ["c", "d", "b"])
        #expect(try store.entry(requestID: "a") == nil)
    }
}

/// A receipt transport that holds each POST until `open()` (or 20 s pass), recording what was posted.
final class GatedTransport: ReceiptTransport {
    private let state = Mutex((open: false, finished: false, types: [JSONValue?]()))

    func post(_ body: [UInt8], to url: String, deadline: ContinuousClock.Instant) async -> ReceiptPostResult {
        let type: JSONValue? = if case let .object(o)? = try? JSON.parse(body) { o["type"] } else { nil }
        let bound = ContinuousClock.now + .seconds(20)
        while !state.withLock({ $0.open }), ContinuousClock.now < bound { try? await Task.sleep(for: .milliseconds(5)) }
        state.withLock { $0.finished = true; $0.types.append(type) }
        return .accepted(status: 204)
    }

    func open() { state.withLock { $0.open = true } }
    var finished: Bool { state.withLock { $0.finished } }
    var types: [JSONValue?] { state.withLock { $0.types } }
}
