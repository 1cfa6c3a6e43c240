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
import Logging

/// A phone with a device key and a reveal key, a sender sealing to it at a fixed time, and a shared replay cache.
struct RevealRig {
    let pair = BoxKeyPair.generate()
    let reveal = BoxKeyPair.generate()
    let signer = SigningKeyPair.generate()
    let now: Int64 = 1_800_000_000
    let replay = InMemoryReplayGuard()
    static let text = SecretMessage(title: "Agent K", subtitle: "Field report", body: "The eagle lands at noon.", threadID: "ops-7",
                                    category: "SECRET_REPLY", badge: 3, sound: "chime.caf", data: JSONObject([("conversation", .string("c-42"))]))
    /// Every secret string of `text`: none may appear in what iOS is handed.
    static let secrets = ["Agent K", "Field report", "eagle", "c-42", "conversation"]

    var record: DeviceKeyRecord { DeviceKeyRecord(publicKey: pair.publicKey, createdAt: nil, reveal: RevealKeyRecord(publicKey: reveal.publicKey)) }

    func sealed(_ message: SecretMessage = RevealRig.text, reveal: Bool = true, signed: Bool = false, at time: Int64? = nil) throws -> SealedNotification {
        var m = message
        if reveal { m.reveal = .standard }
        let sender = try NotificationSender(signer: signed ? signer : nil, clock: { [now] in time ?? now })
        return try sender.seal(m, to: record)
    }

    func request(_ sealed: SealedNotification, identifier: String = "R1") throws -> NotificationRequest {
        guard case let .object(payload) = try JSON.parse(sealed.payload) else { throw ReceiptTestError("payload") }
        return NotificationRequest(identifier: identifier, payload: payload)
    }

    func serviceExtension(keys: [BoxKeyPair]? = nil, category: String? = nil, logger: Logger? = nil) -> SecretMessageExtension {
        var configuration = SecretMessageExtension.Configuration(keys: InMemoryKeys(keys ?? [pair]),
                                                                 policy: { [signer] in ReceiverPolicy(trustedSenders: [signer.publicKey]) },
                                                                 replayGuard: replay, clock: .fixed(unixSeconds: now))
        if let category { configuration.revealCategory = category }
        if let logger { configuration.logger = logger }
        return SecretMessageExtension(configuration: configuration)
    }

    func contentExtension(revealKeys: [BoxKeyPair]? = nil, keysLocked: Bool = false, protected: @escaping @Sendable () -> Bool = { true },
                          attachments: AttachmentPipeline? = nil, logger: Logger? = nil, trusting: Bool = true,
                          replayGuard: (any ReplayGuard)? = nil) -> RevealContentExtension {
        let policy = ReceiverPolicy(trustedSenders: trusting ? [signer.publicKey] : [])
        var configuration = RevealContentExtension.Configuration(
            revealKeys: InMemoryKeys(revealKeys ?? [reveal], locked: keysLocked), deviceKeys: InMemoryKeys([pair]),
            policy: { policy }, replayGuard: replayGuard ?? replay, protectedDataAvailable: protected, attachments: attachments)
        if let logger { configuration.logger = logger }
        return RevealContentExtension(configuration: configuration)
    }

    /// The held notification as iOS keeps it after the service extension, delivered at `deliveredAt`.
    func held(_ sealed: SealedNotification, identifier: String = "R1", deliveredAt: Int64? = nil) async throws -> DeliveredNotification {
        let delivery = await serviceExtension().delivery(for: try request(sealed, identifier: identifier))
        #expect(delivery.outcome == .held)
        return DeliveredNotification(request: NotificationRequest(identifier: identifier, content: delivery.content), deliveredAt: deliveredAt ?? now)
    }
}

/// Every string in `content` as iOS would store it (text, category, thread, userInfo, attachment names).
func storedText(_ content: NotificationContent) -> String {
    [content.title, content.subtitle, content.body, content.categoryIdentifier, content.threadIdentifier, content.sound ?? "",
     String(decoding: JSON.serialize(.object(content.userInfo)), as: UTF8.self)].joined(separator: "\n")
        + content.attachments.map(\.url).joined(separator: "\n")
}

@Suite("Reveal: the service extension holds a reveal message (§3)", .timeLimit(.minutes(10)))
struct RevealServiceExtensionTests {
    @Test("held: the placeholder alert, the reveal category, the reveal envelope in userInfo, data not merged, no secret")
    func held() async throws {
        let rig = RevealRig()
        let sealed = try rig.sealed()
        let delivery = await rig.serviceExtension().delivery(for: try rig.request(sealed))
        #expect(delivery.outcome == .held)
        #expect(delivery.outcome.reason == nil)
        let c = delivery.content
        #expect(c.title == "Secret Message!" && c.subtitle == "" && c.body == "Press and hold to read")
        #expect(c.categoryIdentifier == "SEALED_REVEAL")
        #expect(c.threadIdentifier == "ops-7" && c.sound == "chime.caf" && c.badge == 3)
        #expect(c.userInfo[WireFormat.encryptedDataKey] == nil)
        let outer = try MessageOpener(keys: InMemoryKeys([rig.pair])).open(encryptedData: try #require(
            try JSON.parse(sealed.payload).objectValue?[WireFormat.encryptedDataKey]?.stringValue), now: rig.now)
        #expect(c.userInfo[RevealFormat.userInfoKey] == .string(try #require(outer.body.reveal)))
        #expect(c.userInfo["conversation"] == nil)
        #expect(c.attachments.isEmpty)
        let stored = storedText(c)
        for secret in RevealRig.secrets { #expect(!stored.contains(secret), "\(secret) handed to iOS") }
    }

    @Test("the service extension never opens the reveal envelope: it holds without the reveal key, under the app's category")
    func neverOpensReveal() async throws {
        let rig = RevealRig()
        let capture = LogCapture()
        let ext = rig.serviceExtension(keys: [rig.pair], category: "MY_REVEAL", logger: capture.logger(label: "sealedpush.extension"))
        let delivery = await ext.delivery(for: try rig.request(try rig.sealed(signed: true)))
        #expect(delivery.outcome == .held)
        #expect(delivery.content.categoryIdentifier == "MY_REVEAL")
        #expect(!capture.entries.contains { entry in RevealRig.secrets.contains { "\(entry)".contains($0) } })
    }

    @Test("the outer message is checked as any message: a replay under another notification is a fallback with no reveal envelope")
    func outerChecks() async throws {
        let rig = RevealRig()
        let sealed = try rig.sealed()
        #expect(await rig.serviceExtension().delivery(for: try rig.request(sealed, identifier: "R1")).outcome == .held)
        #expect(await rig.serviceExtension().delivery(for: try rig.request(sealed, identifier: "R1")).outcome == .held,
                "the same notification replacing itself")
        let replayed = await rig.serviceExtension().delivery(for: try rig.request(sealed, identifier: "R2"))
        #expect(replayed.outcome == .fallback(.replayed))
        #expect(replayed.content.userInfo[RevealFormat.userInfoKey] == nil)
        #expect(replayed.content.body == "(Encrypted)")
        let unknown = await rig.serviceExtension(keys: [BoxKeyPair.generate()]).delivery(for: try rig.request(try rig.sealed()))
        #expect(unknown.outcome == .fallback(.unknownKey))
    }

    @Test("the device simulator reports a reveal message as held, with nothing secret in its report")
    func simulator() async throws {
        let rig = RevealRig()
        let simulator = DeviceSimulator { rig.serviceExtension() }
        let result = await simulator.deliver(payload: try rig.sealed().payload, identifier: "R9")
        #expect(result.outcome == .held && result.reason == nil)
        #expect(result.requestID == "R9")
        let report = String(decoding: JSON.serialize(.object(result.jsonObject)), as: UTF8.self)
        #expect(report.contains(#""outcome":"held""#))
        for secret in RevealRig.secrets { #expect(!report.contains(secret)) }
    }

    @Test("held sends the delivered receipt of the outer body")
    func receipt() async throws {
        let rig = RevealRig()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("reveal-rx-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try KeychainStore(url: dir)
        let outbox = ReceiptOutboxStore(store: store)
        let transport = RecordingTransport()
        var configuration = SecretMessageExtension.Configuration(keys: InMemoryKeys([rig.pair]), replayGuard: rig.replay,
                                                                 clock: .fixed(unixSeconds: rig.now), timeBudget: .seconds(3600))
        configuration.receipts = ReceiptCourier(transport: transport, outbox: outbox, reportURL: { nil }, timeout: .seconds(2), timer: ManualClock())
        let ext = SecretMessageExtension(configuration: configuration)
        var message = RevealRig.text
        message.receiptURL = "https://receipts.example.com/r"
        let sealed = try rig.sealed(message)
        let delivery = await ext.delivery(for: try rig.request(sealed))
        await ext.finishBackgroundWork()
        #expect(delivery.outcome == .held)
        #expect(delivery.receipt == .sent)
        #expect(transport.bodies.count == 1)
        #expect(transport.bodies.first?["id"] == .string(sealed.messageID))
    }
}

/// A replay guard that counts how often it was asked to record.
final class CountingReplayGuard: ReplayGuard {
    let inner: any ReplayGuard
    let count = Mutex(0)
    init(_ inner: any ReplayGuard) { self.inner = inner }
    var calls: Int { count.withLock { $0 } }
    func recordIfNew(messageID: String, requestIdentifier: String?, keyID: KeyID, expiresAt: Int64, now: Int64) -> Bool {
        count.withLock { $0 += 1 }
        return inner.recordIfNew(messageID: messageID, requestIdentifier: requestIdentifier, keyID: keyID, expiresAt: expiresAt, now: now)
    }
}

/// A flag a test flips: the phone's protected-data state.
final class ProtectedData: Sendable {
    let available: Mutex<Bool>
    init(_ value: Bool) { available = Mutex(value) }
    var closure: @Sendable () -> Bool { { [self] in available.withLock { $0 } } }
}

@Suite("Reveal: the content extension (§4)", .timeLimit(.minutes(10)))
struct RevealContentExtensionTests {
    @Test("revealed: press and hold shows the text; twice on one notification opens twice; under another notification it is replayed")
    func revealedAndReplays() async throws {
        let rig = RevealRig()
        let sealed = try rig.sealed()
        let notification = try await rig.held(sealed)
        let ext = rig.contentExtension()
        let view = await ext.didReceive(notification)
        #expect(view.outcome == .revealed)
        #expect(view.title == "Agent K" && view.subtitle == "Field report" && view.body == "The eagle lands at noon.")
        #expect(ext.currentView == view)
        #expect(await rig.contentExtension().didReceive(notification).outcome == .revealed, "pressing and holding again")
        let elsewhere = DeliveredNotification(request: NotificationRequest(identifier: "R2", content: notification.request.content),
                                              deliveredAt: rig.now)
        let replayed = await ext.didReceive(elsewhere)
        #expect(replayed.outcome == .fallback(.replayed))
        #expect(replayed.body == "(Encrypted)" && replayed.title == "" && replayed.attachments.isEmpty)
        #expect(notification.request.content == (try await rig.held(sealed)).request.content, "nothing is written back into the notification")
    }

    @Test("expiry is judged at the notification's delivery date, not now")
    func expiryAtDeliveryDate() async throws {
        let rig = RevealRig()
        var message = RevealRig.text
        message.expiry = .after(seconds: 60)
        let sealed = try rig.sealed(message)
        // Read a day later: the notification was delivered in time, so it opens.
        let notification = try await rig.held(sealed)
        #expect(await rig.contentExtension().didReceive(notification).outcome == .revealed)
        // A notification whose delivery date is past exp + skew is expired.
        let late = DeliveredNotification(request: notification.request, deliveredAt: rig.now + 60 + 301)
        #expect(await rig.contentExtension().didReceive(late).outcome == .fallback(.expired))
    }

    @Test("locked: Unlock iPhone to read, nothing recorded, opened when the phone unlocks while the view is shown")
    func locked() async throws {
        let rig = RevealRig()
        let protected = ProtectedData(false)
        let notification = try await rig.held(try rig.sealed())
        let counting = CountingReplayGuard(rig.replay)
        let ext = rig.contentExtension(protected: protected.closure, replayGuard: counting)
        let view = await ext.didReceive(notification)
        #expect(view == RevealView(outcome: .locked, body: "Unlock iPhone to read"))
        #expect(view.outcome.reason == nil)
        #expect(counting.calls == 0, "locked records nothing in the replay cache")
        #expect(await ext.protectedDataDidBecomeAvailable()?.outcome == .locked, "still locked: shown again, still nothing recorded")
        #expect(counting.calls == 0)
        // The phone unlocks while the view is shown: it opens.
        protected.available.withLock { $0 = true }
        let retried = await ext.protectedDataDidBecomeAvailable()
        #expect(retried?.outcome == .revealed)
        #expect(retried?.body == "The eagle lands at noon.")
        #expect(counting.calls == 1)
        #expect(await ext.protectedDataDidBecomeAvailable() == nil, "nothing to retry once revealed")
    }

    @Test("a reveal key that cannot be read: locked when protected data went away meanwhile, else a keychainLocked fallback")
    func keyLockedRace() async throws {
        let rig = RevealRig()
        let notification = try await rig.held(try rig.sealed())
        let calls = Mutex(0)
        let firstOnly: @Sendable () -> Bool = { calls.withLock { $0 += 1; return $0 == 1 } }
        #expect(await rig.contentExtension(keysLocked: true, protected: firstOnly).didReceive(notification).outcome == .locked)
        #expect(await rig.contentExtension(keysLocked: true).didReceive(notification).outcome == .fallback(.keychainLocked))
    }

    @Test("fallbacks show (Encrypted) with the reason", arguments: ["unknownKey", "tampered", "notEncrypted", "notAString", "untrusted"])
    func fallbacks(_ kind: String) async throws {
        let rig = RevealRig()
        let capture = LogCapture()
        var notification = try await rig.held(try rig.sealed(signed: kind == "untrusted"))
        var userInfo = notification.request.content.userInfo
        let envelope = try #require(userInfo[RevealFormat.userInfoKey]?.stringValue)
        var ext = rig.contentExtension(logger: capture.logger())
        let expected: ReasonCode
        switch kind {
        case "unknownKey":
            ext = rig.contentExtension(revealKeys: [BoxKeyPair.generate()], logger: capture.logger())
            expected = .unknownKey
        case "tampered":
            var bytes = try Base64.decodePublic(envelope)
            bytes[bytes.count - 5] ^= 0x01
            userInfo[RevealFormat.userInfoKey] = .string(Base64.encode(bytes))
            expected = .decryptionFailed
        case "notEncrypted":
            userInfo[RevealFormat.userInfoKey] = nil
            expected = .notEncrypted
        case "notAString":
            userInfo[RevealFormat.userInfoKey] = .int(1)
            expected = .malformedPayload
        default:
            ext = rig.contentExtension(logger: capture.logger(), trusting: false)
            expected = .untrustedSender
        }
        var content = notification.request.content
        content.userInfo = userInfo
        notification = DeliveredNotification(request: NotificationRequest(identifier: "R1", content: content), deliveredAt: rig.now)
        let view = await ext.didReceive(notification)
        #expect(view == RevealView(outcome: .fallback(expected), body: "(Encrypted)"))
        #expect(capture.entries.last?.metadata["reason"] == expected.rawValue)
        #expect(!capture.entries.contains { entry in RevealRig.secrets.contains { "\(entry)".contains($0) } })
    }

    @Test("ENCRYPTED_DATA (preview policy title or none) reopens with the device key")
    func encryptedDataPath() async throws {
        let rig = RevealRig()
        let sealed = try rig.sealed(reveal: false)
        let request = try rig.request(sealed)
        #expect(await rig.serviceExtension().delivery(for: request).outcome == .decrypted)
        let notification = DeliveredNotification(request: request, deliveredAt: rig.now)
        let view = await rig.contentExtension(revealKeys: []).didReceive(notification)
        #expect(view.outcome == .revealed && view.body == "The eagle lands at noon.")
    }

    @Test("attachments go to the private temporary directory, which is emptied when the view goes and at every start")
    func attachments() async throws {
        let rig = RevealRig()
        let dir = try attachmentsDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = mediaFile(MediaType.named("image/jpeg")!, size: 3000)
        let (object, descriptor) = try mediaObject(file, type: "image/jpeg", url: "https://cdn.example/o1")
        let pipeline = try AttachmentPipeline(fetcher: MemoryFetcher(["https://cdn.example/o1": .object(object)]), directory: dir)
        var message = RevealRig.text
        message.attachments = [descriptor]
        let sealed = try rig.sealed(message)
        let notification = try await rig.held(sealed)
        #expect(notification.request.content.attachments.isEmpty, "the service extension fetches nothing")
        // A file a killed extension left behind goes at the next start.
        let leftover = dir + "/AAAAAAAAAAAAAAAA.jpg"
        #expect(FileManager.default.createFile(atPath: leftover, contents: Data([1, 2, 3])))
        let ext = rig.contentExtension(attachments: pipeline)
        #expect(!FileManager.default.fileExists(atPath: leftover))
        let view = await ext.didReceive(notification)
        #expect(view.outcome == .revealed)
        #expect(view.attachmentFailures == [])
        let attached = try #require(view.attachments.first)
        #expect(attached.identifier == "a1" && attached.size == 3000 && attached.url.hasPrefix(dir + "/"))
        #expect(try fileDigest(attached.url) == Hex.encode(SHA256Hasher.hash(file)))
        #expect(ext.viewDidDisappear() == 1)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir).isEmpty)
        #expect(ext.currentView == nil)
        #expect(await ext.protectedDataDidBecomeAvailable() == nil)
    }
}

@Suite("Reveal: preview policy (§5)", .timeLimit(.minutes(10)))
struct PreviewPolicyTests {
    func deliver(_ rig: RevealRig, _ policy: PreviewPolicy, _ sealed: SealedNotification, attachments: AttachmentPipeline? = nil,
                 revealKey: BoxPublicKey?? = nil) async throws -> ExtensionDelivery {
        var configuration = SecretMessageExtension.Configuration(keys: InMemoryKeys([rig.pair]),
                                                                 policy: { [signer = rig.signer] in ReceiverPolicy(trustedSenders: [signer.publicKey]) },
                                                                 replayGuard: rig.replay,
                                                                 clock: .fixed(unixSeconds: rig.now), attachments: attachments)
        configuration.previews = policy
        let key = revealKey ?? rig.reveal.publicKey
        configuration.revealPublicKey = { key }
        return await SecretMessageExtension(configuration: configuration).delivery(for: try rig.request(sealed))
    }

    @Test("each row of the table: title, subtitle, body, category and userInfo", arguments: PreviewPolicy.allCases)
    func rows(_ policy: PreviewPolicy) async throws {
        let rig = RevealRig()
        let sealed = try rig.sealed(reveal: false)
        let original = try rig.request(sealed).content
        let delivery = try await deliver(rig, policy, sealed)
        #expect(delivery.outcome == .decrypted)
        let c = delivery.content
        if policy == .hidden {
            // Revision 3: under `none` nothing of the sealed body reaches iOS, not the thread, badge or sound either.
            #expect(c.threadIdentifier == "" && c.sound == original.sound && c.badge == original.badge)
        } else {
            #expect(c.threadIdentifier == "ops-7" && c.sound == "chime.caf" && c.badge == 3)
        }
        switch policy {
        case .full:
            #expect(c.title == "Agent K" && c.subtitle == "Field report" && c.body == "The eagle lands at noon.")
            #expect(c.categoryIdentifier == "SECRET_REPLY")
            #expect(c.userInfo[WireFormat.encryptedDataKey] == nil && c.userInfo["conversation"] == .string("c-42"))
        case .title:
            #expect(c.title == "Agent K" && c.subtitle == "Field report" && c.body == "Press and hold to read")
            #expect(c.categoryIdentifier == "SEALED_REVEAL")
            let stored = storedText(c)
            for secret in ["eagle", "c-42", "conversation"] { #expect(!stored.contains(secret)) }
        case .hidden:
            #expect(c.title == original.title && c.subtitle == original.subtitle && c.body == "Press and hold to read")
            #expect(c.categoryIdentifier == "SEALED_REVEAL")
            let stored = storedText(c)
            for secret in RevealRig.secrets { #expect(!stored.contains(secret)) }
        }
        if policy != .full {
            // Revision 2 (§5, §5.1): ENCRYPTED_DATA removed, SEALEDPUSH_LOCAL set, nothing else of the payload's userInfo changed.
            var expected = original.userInfo
            expected[WireFormat.encryptedDataKey] = nil
            let local = try #require(c.userInfo[RevealFormat.localUserInfoKey]?.stringValue)
            expected[RevealFormat.localUserInfoKey] = .string(local)
            #expect(c.userInfo == expected, "ENCRYPTED_DATA removed, SEALEDPUSH_LOCAL set, data not merged")
            // The local envelope is sealed to the reveal key: the device key (readable after first unlock) does not open it.
            let envelope = try Envelope(base64: local)
            #expect(envelope.keyID == rig.reveal.keyID)
            #expect(throws: OpenFailure.self) { try MessageOpener(keys: InMemoryKeys([rig.pair])).open(encryptedData: local, now: rig.now) }
            // Pressing and holding opens it with the reveal key (the service extension's open does not count).
            let view = await rig.contentExtension().didReceive(DeliveredNotification(
                request: NotificationRequest(identifier: "R1", content: c), deliveredAt: rig.now))
            #expect(view.outcome == .revealed && view.body == "The eagle lands at noon.")
            // Without the reveal key it does not open (a locked phone: the reveal key is unreadable).
            let lockedView = await rig.contentExtension(keysLocked: true, protected: { false }).didReceive(DeliveredNotification(
                request: NotificationRequest(identifier: "R1", content: c), deliveredAt: rig.now))
            #expect(lockedView.outcome == .locked)
        }
    }

    @Test("§5.1: the local envelope holds the inner message byte for byte, padded as wire v1 pads; a signed message still verifies",
          arguments: [false, true])
    func localEnvelope(_ signed: Bool) async throws {
        let rig = RevealRig()
        let sealed = try rig.sealed(reveal: false, signed: signed)
        let delivery = try await deliver(rig, .hidden, sealed)
        #expect(delivery.outcome == .decrypted)
        let local = try #require(delivery.content.userInfo[RevealFormat.localUserInfoKey]?.stringValue)
        // What the sender sealed to the device key and what the device sealed to its reveal key carry the same inner message.
        let fromSender = try MessageOpener(keys: InMemoryKeys([rig.pair]), policy: ReceiverPolicy(trustedSenders: [rig.signer.publicKey])).open(encryptedData: try #require(sealed.payloadModel).encryptedData, now: rig.now)
        let policy = ReceiverPolicy(trustedSenders: [rig.signer.publicKey], requireSignature: signed)
        let fromDevice = try MessageOpener(keys: InMemoryKeys([rig.reveal]), policy: policy,
                                           recipientRule: .resealed(deviceKeys: InMemoryKeys([rig.pair]))).open(encryptedData: local, now: rig.now)
        #expect(fromDevice.innerMessage == fromSender.innerMessage)
        #expect(fromDevice.signedBy == (signed ? rig.signer.keyID : nil))
        #expect(WireFormat.paddingBuckets.contains(fromDevice.paddedLength))
        #expect(fromDevice.body.kid == rig.pair.keyID && fromDevice.keyID == rig.reveal.keyID)
        // The wire v1 rule refuses it (its kid is the device key, not the envelope's): only the resealed rule opens it.
        let asWire = #expect(throws: OpenFailure.self) {
            try MessageOpener(keys: InMemoryKeys([rig.reveal]), policy: policy).open(encryptedData: local, now: rig.now)
        }
        #expect(asWire?.reason == .recipientMismatch)
        // A kid that names no device key of this device is refused.
        let strange = #expect(throws: OpenFailure.self) {
            try MessageOpener(keys: InMemoryKeys([rig.reveal]), policy: policy,
                              recipientRule: .resealed(deviceKeys: InMemoryKeys([]))).open(encryptedData: local, now: rig.now)
        }
        #expect(strange?.reason == .recipientMismatch)
    }

    @Test("§5.1: a message sealed to the reveal key whose kid names the reveal key itself is refused by the resealed rule")
    func localNamingRevealKey() throws {
        let rig = RevealRig()
        let body = MessageBody(kid: rig.reveal.keyID, id: "m-local", issuedAt: rig.now, alert: .init(body: "x"))
        let envelope = try MessageSealer.seal(body: body, to: rig.reveal.publicKey, signer: nil, padding: .bucket, payloadOverhead: 0)
        let failure = #expect(throws: OpenFailure.self) {
            try MessageOpener(keys: InMemoryKeys([rig.reveal]),
                              recipientRule: .resealed(deviceKeys: InMemoryKeys([rig.pair, rig.reveal]))).open(encryptedData: envelope.base64, now: rig.now)
        }
        #expect(failure?.reason == .recipientMismatch)
    }

    @Test("title and none without a reveal key: (Encrypted), and nothing openable handed to iOS", arguments: [PreviewPolicy.title, .hidden])
    func noRevealKey(_ policy: PreviewPolicy) async throws {
        let rig = RevealRig()
        let delivery = try await deliver(rig, policy, try rig.sealed(reveal: false), revealKey: .some(nil))
        #expect(delivery.outcome == .fallback(.keychainLocked))
        #expect(delivery.content.body == "(Encrypted)")
        #expect(delivery.content.userInfo[WireFormat.encryptedDataKey] == nil && delivery.content.userInfo[RevealFormat.localUserInfoKey] == nil)
        let stored = storedText(delivery.content)
        for secret in RevealRig.secrets { #expect(!stored.contains(secret)) }
    }

    @Test("a reveal message is held whatever the setting", arguments: PreviewPolicy.allCases)
    func revealIsHeld(_ policy: PreviewPolicy) async throws {
        let rig = RevealRig()
        let delivery = try await deliver(rig, policy, try rig.sealed())
        #expect(delivery.outcome == .held)
        #expect(delivery.content.body == "Press and hold to read")
        #expect(delivery.content.userInfo[RevealFormat.userInfoKey] != nil)
    }

    @Test("under title and none the service extension fetches no attachment", arguments: [PreviewPolicy.title, .hidden])
    func noAttachments(_ policy: PreviewPolicy) async throws {
        let rig = RevealRig()
        let dir = try attachmentsDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (object, descriptor) = try mediaObject(mediaFile(MediaType.named("image/png")!, size: 500), type: "image/png", url: "https://cdn.example/p")
        let pipeline = try AttachmentPipeline(fetcher: MemoryFetcher(["https://cdn.example/p": .object(object)]), directory: dir)
        var message = RevealRig.text
        message.attachments = [descriptor]
        let delivery = try await deliver(rig, policy, try rig.sealed(message, reveal: false), attachments: pipeline)
        #expect(delivery.outcome == .decrypted)
        #expect(delivery.content.attachments.isEmpty && delivery.attachmentFailures == nil)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir).isEmpty)
    }
}
