import Testing
import Foundation
import Synchronization
import SealedPushCrypto
import SealedPushWire
import SealedPushDevice
import SealedPushReceiver
import SealedPushTestSupport

/// A device with one key, a trusted and an untrusted sender, and a replay cache.
struct TestDevice {
    let key = BoxKeyPair.generate()
    let trusted = SigningKeyPair.generate()
    let untrusted = SigningKeyPair.generate()
    let now: Int64 = 1_800_000_000
    var locked = false
    var requireSignature = false
    /// The extension stalls until the expiry callback.
    var stalled = false
    let replay = InMemoryReplayGuard()

    func simulator(_ options: DeviceSimulator.Options = .init(), clock: any Clock<Duration> = ContinuousClock()) -> DeviceSimulator {
        let keys = InMemoryKeys([key], locked: locked)
        let policy = ReceiverPolicy(trustedSenders: [trusted.publicKey], requireSignature: requireSignature)
        let now = self.now, replay = self.replay, stalled = self.stalled
        return DeviceSimulator(options: options, clock: clock) {
            let ext = SecretMessageExtension(configuration: .init(keys: keys, policy: { policy }, replayGuard: replay,
                                                                  clock: .fixed(unixSeconds: now)))
            return stalled ? StalledExtension(ext, delay: nil) : ext
        }
    }

    func payload(signer: SigningKeyPair? = nil, expiresAt: Int64? = nil, issuedAt: Int64? = nil) throws -> [UInt8] {
        let body = TestPayloads.body(to: key.publicKey, now: issuedAt ?? now, expiresAt: expiresAt, sender: signer?.keyID)
        return try TestPayloads.payload(body: body, to: key.publicKey, signer: signer)
    }
}

private func json(_ text: String) -> [UInt8] { Array(text.utf8) }

/// Everything a content handler was given, in order.
final class Shown: Sendable {
    private let items = Mutex<[NotificationContent]>([])
    func append(_ content: NotificationContent) { items.withLock { $0.append(content) } }
    var all: [NotificationContent] { items.withLock { $0 } }
}

@Suite("Receiver", .timeLimit(.minutes(10))) struct ReceiverTests {
    @Suite("Content handler") struct HandlerTests {
        @Test func takesEffectOnceUnderConcurrentCalls() async {
            let count = Mutex(0)
            let once = ContentHandlerOnce { _ in count.withLock { $0 += 1 } }
            await withTaskGroup(of: Void.self) { group in
                for i in 0..<200 { group.addTask { once(NotificationContent(body: "\(i)")) } }
            }
            #expect(count.withLock { $0 } == 1)
            #expect(once.hasDelivered)
            #expect(once(NotificationContent()) == false)
        }

        @Test func asyncFormReturnsDecryptedContent() async throws {
            let device = TestDevice()
            let ext = SecretMessageExtension(configuration: .init(keys: InMemoryKeys([device.key]), clock: .fixed(unixSeconds: device.now)))
            guard case let .object(payload) = try JSON.parse(try device.payload()) else { Issue.record("payload"); return }
            let delivery = await ext.delivery(for: NotificationRequest(identifier: "x", payload: payload))
            #expect(delivery.outcome == .decrypted)
            let content = delivery.content
            #expect(content.title == "Agent K")
            #expect(content.body == "The eagle lands at noon.")
            #expect(content.userInfo["ENCRYPTED_DATA"] == nil)
        }

        /// Logs are captured where a test asserts on them (issue #15 item 10): the outcome's reason code, never the text.
        @Test func logsReasonCodesOnly() async throws {
            let device = TestDevice()
            let capture = LogCapture()
            let ext = SecretMessageExtension(configuration: .init(keys: InMemoryKeys([device.key]), clock: .fixed(unixSeconds: device.now),
                                                                  logger: capture.logger(label: "sealedpush.extension")))
            guard case let .object(payload) = try JSON.parse(try device.payload()) else { Issue.record("payload"); return }
            #expect(await ext.delivery(for: NotificationRequest(identifier: "x", payload: payload)).outcome == .decrypted)
            let other = SecretMessageExtension(configuration: .init(keys: InMemoryKeys([BoxKeyPair.generate()]),
                                                                    clock: .fixed(unixSeconds: device.now),
                                                                    logger: capture.logger(label: "sealedpush.extension")))
            #expect(await other.delivery(for: NotificationRequest(identifier: "y", payload: payload)).outcome == .fallback(.unknownKey))
            let entries = capture.entries
            #expect(entries.map(\.message) == ["notification opened", "notification not opened"])
            #expect(entries.last?.level == .notice)
            #expect(entries.last?.metadata["reason"] == "unknownKey")
            #expect(!entries.contains { "\($0)".contains("eagle") || "\($0)".contains("Agent K") })
        }
    }

    @Suite("Device rules") struct RuleTests {
        @Test func decryptsAndShowsEveryMember() async throws {
            let device = TestDevice()
            var body = TestPayloads.body(to: device.key.publicKey, now: device.now)
            body.alert.subtitle = "Field report"
            body.threadID = "ops-7"
            body.category = "SECRET_REPLY"
            body.badge = 3
            body.sound = "default"
            body.data = JSONObject([("conversation", .string("c-42"))])
            let result = await device.simulator().deliver(payload: try TestPayloads.payload(body: body, to: device.key.publicKey))
            #expect(result.outcome == .decrypted)
            #expect(result.reason == nil)
            let n = try #require(result.notification)
            #expect(n.title == "Agent K" && n.subtitle == "Field report" && n.body == "The eagle lands at noon.")
            #expect(n.threadIdentifier == "ops-7" && n.categoryIdentifier == "SECRET_REPLY")
            #expect(n.badge == 3 && n.sound == "default")
            #expect(n.userInfo["conversation"] == .string("c-42"))
            #expect(n.userInfo["ENCRYPTED_DATA"] == nil)
        }

        @Test("refused payloads", arguments: [
            ("not json", ReasonCode.invalidPayload), ("[1,2]", .invalidPayload), ("{\"a\":1}", .invalidPayload),
            ("{\"aps\":\"x\"}", .invalidPayload), ("", .invalidPayload), ("{\"aps\":{}} trailing", .invalidPayload),
        ])
        func rejected(text: String, reason: ReasonCode) async {
            let result = await TestDevice().simulator().deliver(payload: json(text))
            #expect(result.outcome == .rejected)
            #expect(result.reason == reason)
            #expect(result.notification == nil)
            #expect(result.isRejection)
        }

        @Test func payloadOver4096IsRejected() async {
            let filler = String(repeating: "x", count: 4096)
            let result = await TestDevice().simulator().deliver(payload: json("{\"aps\":{\"alert\":\"hi\"},\"pad\":\"\(filler)\"}"))
            #expect(result.outcome == .rejected)
            #expect(result.reason == .payloadTooLarge)
        }

        @Test func payloadOfExactly4096IsAccepted() async {
            let head = "{\"aps\":{\"alert\":\"hi\"},\"pad\":\""
            let filler = String(repeating: "x", count: 4096 - head.utf8.count - 2)
            let bytes = json(head + filler + "\"}")
            #expect(bytes.count == 4096)
            let result = await TestDevice().simulator().deliver(payload: bytes)
            #expect(result.outcome == .original)
            #expect(result.reason == .notMutable)
        }

        @Test("mutable-content must be the integer 1", arguments: ["", ",\"mutable-content\":\"1\"", ",\"mutable-content\":true",
                                                                  ",\"mutable-content\":2", ",\"mutable-content\":1.0"])
        func notMutable(member: String) async {
            let result = await TestDevice().simulator().deliver(payload: json("{\"aps\":{\"alert\":{\"title\":\"Hi\"}\(member)},\"ENCRYPTED_DATA\":\"AA==\"}"))
            #expect(result.outcome == .original)
            #expect(result.reason == .notMutable)
            #expect(result.notification?.title == "Hi")
        }

        @Test("no visible alert", arguments: ["{\"aps\":{\"mutable-content\":1}}", "{\"aps\":{\"mutable-content\":1,\"alert\":{\"title\":\"\"}}}",
                                               "{\"aps\":{\"mutable-content\":1,\"alert\":\"\"}}", "{\"aps\":{\"mutable-content\":1,\"alert\":7}}"])
        func noAlert(text: String) async {
            let result = await TestDevice().simulator().deliver(payload: json(text))
            #expect(result.outcome == .original)
            #expect(result.reason == .noAlert)
            #expect(result.notification?.hasAlertText == false)
        }

        @Test func crashedExtensionShowsOriginal() async throws {
            let device = TestDevice()
            let result = await device.simulator(.init(extensionCrash: true)).deliver(payload: try device.payload())
            #expect(result.outcome == .original)
            #expect(result.reason == .extensionCrashed)
            #expect(result.notification?.body == "(Encrypted)")
            #expect(result.notification?.title == "Secret Message!")
        }

        @Test func payloadWithoutEncryptedDataPassesThrough() async {
            let result = await TestDevice().simulator().deliver(payload: json("{\"aps\":{\"mutable-content\":1,\"alert\":{\"title\":\"Plain\",\"body\":\"hello\"}}}"))
            #expect(result.outcome == .original)
            #expect(result.reason == .notEncrypted)
            #expect(result.notification?.body == "hello")
        }

        @Test("ENCRYPTED_DATA of the wrong type", arguments: ["1", "null", "{}", "[\"AQ==\"]", "true"])
        func encryptedDataWrongType(value: String) async {
            let result = await TestDevice().simulator().deliver(payload: json("{\"aps\":{\"mutable-content\":1,\"alert\":{\"title\":\"T\",\"body\":\"(Encrypted)\"}},\"ENCRYPTED_DATA\":\(value)}"))
            #expect(result.outcome == .fallback)
            #expect(result.reason == .malformedPayload)
            #expect(result.notification?.body == "(Encrypted)")
        }

        @Test func lockedKeychainFallsBack() async throws {
            var device = TestDevice()
            device.locked = true
            let result = await device.simulator().deliver(payload: try device.payload())
            #expect(result.outcome == .fallback)
            #expect(result.reason == .keychainLocked)
            #expect(result.notification?.body == "(Encrypted)")
            #expect(result.notification?.title == "Secret Message!")
        }

        @Test func replayIsRefused() async throws {
            let device = TestDevice()
            let payload = try device.payload()
            let simulator = device.simulator()
            #expect(await simulator.deliver(payload: payload).outcome == .decrypted)
            let second = await simulator.deliver(payload: payload)
            #expect(second.outcome == .fallback)
            #expect(second.reason == .replayed)
        }

        @Test("Replays: the same message under the same request identifier opens again, under another it is replayed")
        func replayUnderTheSameRequestIdentifierOpensAgain() async throws {
            let device = TestDevice()
            let payload = try device.payload()
            let simulator = device.simulator()
            let first = await simulator.deliver(payload: payload, identifier: "collapse-1")
            #expect(first.outcome == .decrypted)
            #expect(first.requestID == "collapse-1")
            // A retry of the same push (same apns-collapse-id) replaces its own notification, same content.
            let retry = await simulator.deliver(payload: payload, identifier: "collapse-1")
            #expect(retry.outcome == .decrypted)
            #expect(retry.notification == first.notification)
            #expect(retry.jsonObject["request_id"] == .string("collapse-1"))
            // The same message as another notification, or with no identifier given, is a replay.
            #expect(await simulator.deliver(payload: payload, identifier: "collapse-2").reason == .replayed)
            let fresh = await simulator.deliver(payload: payload)
            #expect(fresh.reason == .replayed)
            #expect(fresh.requestID != nil && fresh.requestID != "collapse-1", "a delivery without an identifier draws a new one")
        }

        @Test("a message issued longer ago than the replay window is refused as replayed, even with a later exp")
        func messageOlderThanTheReplayWindowIsRefused() async throws {
            let device = TestDevice()
            let window = ReceiverPolicy.defaultReplayWindowSeconds, skew = WireFormat.defaultClockSkewSeconds
            let old = try device.payload(expiresAt: device.now + 3600, issuedAt: device.now - window - skew - 1)
            let result = await device.simulator().deliver(payload: old)
            #expect(result.outcome == .fallback)
            #expect(result.reason == .replayed)
            // At the window's edge it still opens.
            let edge = try device.payload(expiresAt: device.now + 3600, issuedAt: device.now - window - skew)
            #expect(await device.simulator().deliver(payload: edge).outcome == .decrypted)
        }

        @Test func signedByTrustedAndUntrustedSenders() async throws {
            var device = TestDevice()
            device.requireSignature = true
            let simulator = device.simulator()
            #expect(await simulator.deliver(payload: try device.payload(signer: device.trusted)).outcome == .decrypted)
            let untrusted = await simulator.deliver(payload: try device.payload(signer: device.untrusted))
            #expect(untrusted.reason == .untrustedSender)
            let unsigned = await simulator.deliver(payload: try device.payload())
            #expect(unsigned.reason == .signatureRequired)
        }

        @Test func expiredAndNotYetValid() async throws {
            let device = TestDevice()
            let simulator = device.simulator()
            #expect(await simulator.deliver(payload: try device.payload(expiresAt: device.now - 301)).reason == .expired)
            #expect(await simulator.deliver(payload: try device.payload(issuedAt: device.now + 301)).reason == .notYetValid)
            #expect(await simulator.deliver(payload: try device.payload(expiresAt: device.now - 299)).outcome == .decrypted)
        }

        /// A delivery to an extension stalled until expiry, on a manual clock, with the device already
        /// waiting out its 30-second time limit.
        static func stalledDelivery() async throws -> (clock: ManualClock, delivery: Task<DeliveryResult, Never>) {
            var device = TestDevice()
            device.stalled = true
            let clock = ManualClock()
            let simulator = device.simulator(.init(timeLimit: .seconds(30), expiryGrace: .seconds(1)), clock: clock)
            let payload = try device.payload()
            let delivery = Task { await simulator.deliver(payload: payload) }
            try await clock.waitForSleepers(1)
            return (clock, delivery)
        }

        @Test("an extension stalled past the time limit shows the timeout content (device timer on a manual clock)")
        func stalledExtensionTimesOut() async throws {
            let (clock, delivery) = try await Self.stalledDelivery()
            clock.advance(by: .seconds(30))
            let result = await delivery.value
            #expect(result.outcome == .timeout)
            #expect(result.reason == .timeExpired)
            #expect(result.notification?.subtitle == "(Encrypted)")
            #expect(result.notification?.body == "")
            #expect(result.notification?.title == "Secret Message!")
        }

        @Test("the time limit is not reached one nanosecond early: the device is still waiting")
        func timeLimitIsExact() async throws {
            let (clock, delivery) = try await Self.stalledDelivery()
            clock.advance(by: .seconds(30) - .nanoseconds(1))
            #expect(clock.sleeperCount == 1)
            clock.advance(by: .nanoseconds(1))
            #expect(await delivery.value.outcome == .timeout)
        }

        @Test("expiry before didReceive started: the timeout content, delivered once, with a matching outcome")
        func expiryBeforeDidReceive() async throws {
            let device = TestDevice()
            let ext = SecretMessageExtension(configuration: .init(keys: InMemoryKeys([device.key]), clock: .fixed(unixSeconds: device.now)))
            guard case let .object(payload) = try JSON.parse(try device.payload()) else { Issue.record("payload"); return }
            ext.serviceExtensionTimeWillExpire()
            let shown = Mutex<[ExtensionDelivery]>([])
            ext.didReceive(NotificationRequest(identifier: "x", payload: payload)) { (d: ExtensionDelivery) in shown.withLock { $0.append(d) } }
            ext.serviceExtensionTimeWillExpire()
            let delivered = shown.withLock { $0 }
            #expect(delivered.count == 1)
            #expect(delivered.first?.content.subtitle == "(Encrypted)" && delivered.first?.content.body == "")
            #expect(delivered.first?.outcome == .timeExpired)
        }

        @Test("expiry after the message opened delivers the decrypted best attempt, not the timeout content")
        func expiryAfterOpenDeliversBestAttempt() async throws {
            let device = TestDevice()
            let ext = SecretMessageExtension(configuration: .init(keys: InMemoryKeys([device.key]), clock: .fixed(unixSeconds: device.now)))
            guard case let .object(payload) = try JSON.parse(try device.payload()) else { Issue.record("payload"); return }
            let delivery = await ext.delivery(for: NotificationRequest(identifier: "x", payload: payload))
            ext.serviceExtensionTimeWillExpire()  // after delivery: nothing changes
            #expect(delivery.outcome == .decrypted && delivery.content.body == "The eagle lands at noon.")
        }

        @Test("expiry racing the extension's own answer: the outcome always describes what was shown")
        func expiryRacesDidReceive() async throws {
            let device = TestDevice()
            guard case let .object(payload) = try JSON.parse(try device.payload()) else { Issue.record("payload"); return }
            let now = device.now, key = device.key
            for _ in 0..<300 {
                let ext = SecretMessageExtension(configuration: .init(keys: InMemoryKeys([key]), clock: .fixed(unixSeconds: now)))
                let request = NotificationRequest(identifier: "x", payload: payload)
                let shown = Mutex<[ExtensionDelivery]>([])
                await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                    ext.didReceive(request) { (d: ExtensionDelivery) in
                        let first = shown.withLock { s -> Bool in s.append(d); return s.count == 1 }
                        if first { done.resume() }
                    }
                    ext.serviceExtensionTimeWillExpire()
                }
                try await Task.sleep(for: .milliseconds(1))  // a second delivery would land here
                let all = shown.withLock { $0 }
                #expect(all.count == 1)
                switch all.first?.outcome {
                case .decrypted?: #expect(all.first?.content.body == "The eagle lands at noon.")
                case .timeExpired?: #expect(all.first?.content.subtitle == "(Encrypted)" && all.first?.content.body == "")
                default: Issue.record("unexpected outcome \(String(describing: all.first?.outcome))")
                }
            }
        }

        @Test("a stall shorter than the time limit only delays the decrypted message")
        func shortStallStillDecrypts() async throws {
            let device = TestDevice()
            let keys = InMemoryKeys([device.key])
            let now = device.now
            let simulator = DeviceSimulator(options: .init(timeLimit: .seconds(20))) {
                StalledExtension(SecretMessageExtension(configuration: .init(keys: keys, clock: .fixed(unixSeconds: now))),
                                 delay: .milliseconds(20))
            }
            #expect(await simulator.deliver(payload: try device.payload()).outcome == .decrypted)
        }

        @Test func hungExtensionShowsOriginalAfterGrace() async throws {
            let device = TestDevice()
            let clock = ManualClock()
            let simulator = DeviceSimulator(options: .init(timeLimit: .seconds(30), expiryGrace: .seconds(1)), clock: clock) { HungExtension() }
            let payload = try device.payload()
            let delivery = Task { await simulator.deliver(payload: payload) }
            try await clock.waitForSleepers(1)
            clock.advance(by: .seconds(30))  // the time limit: the expiry callback, then the grace
            try await clock.waitForSleepers(1)
            clock.advance(by: .seconds(1))
            let result = await delivery.value
            #expect(result.outcome == .original)
            #expect(result.reason == .timeExpired)
            #expect(result.notification?.body == "(Encrypted)")
        }

        @Test func emptyContentIsAlertRemovedOrSuppressed() async throws {
            let device = TestDevice()
            let plain = DeviceSimulator { BlankingExtension() }
            let shown = await plain.deliver(payload: try device.payload())
            #expect(shown.outcome == .original)
            #expect(shown.reason == .alertRemoved)
            #expect(shown.notification?.title == "Secret Message!")
            let filtering = DeviceSimulator(options: .init(filtering: true)) { BlankingExtension() }
            let suppressed = await filtering.deliver(payload: try device.payload())
            #expect(suppressed.outcome == .suppressed)
            #expect(suppressed.reason == .alertRemoved)
            #expect(suppressed.notification == nil)
        }
    }

    @Suite("Shared vectors through the simulator") struct VectorDelivery {
        static let file = SharedVectors.required

        @Test(arguments: VectorDelivery.file.vectors.map(\.name))
        func vector(name: String) async throws {
            let file = Self.file
            let vector = try #require(file.vectors.first { $0.name == name })
            let keys = InMemoryKeys(file.deviceKeys.map(\.keyPair))
            let policy = ReceiverPolicy(trustedSenders: file.trustedSenders, clockSkewSeconds: file.skewSeconds)
            let simulator = DeviceSimulator {
                SecretMessageExtension(configuration: .init(keys: keys, policy: { policy }, replayGuard: InMemoryReplayGuard(),
                                                            clock: .fixed(unixSeconds: file.now)))
            }
            let result = await simulator.deliver(payload: TestPayloads.wrap(encryptedData: vector.encryptedData))
            #expect(result.outcome.rawValue == vector.outcome)
            if vector.outcome == "decrypted" {
                let alert = try #require(vector.body?["alert"]?.objectValue)
                #expect(result.notification?.title == alert["title"]?.stringValue ?? "")
                #expect(result.notification?.body == alert["body"]?.stringValue ?? "")
            } else {
                #expect(result.reason?.rawValue == vector.reason)
                #expect(result.notification?.body == "(Encrypted)")
            }
        }
    }
}

/// Never delivers, not even on expiry.
final class HungExtension: NotificationServiceExtension {
    func didReceive(_ request: NotificationRequest, withContentHandler contentHandler: @escaping @Sendable (NotificationContent) -> Void) {}
    func serviceExtensionTimeWillExpire() {}
}

/// Delivers content without any alert text.
final class BlankingExtension: NotificationServiceExtension {
    func didReceive(_ request: NotificationRequest, withContentHandler contentHandler: @escaping @Sendable (NotificationContent) -> Void) {
        var content = request.content
        content.title = ""
        content.subtitle = ""
        content.body = ""
        contentHandler(content)
    }
    func serviceExtensionTimeWillExpire() {}
}
