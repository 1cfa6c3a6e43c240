// Issue 45 item 1: the extension run by iOS's rules (Tests/AppleStandIns/UserNotifications/StandInProcess.swift):
// one process with several instances and parallel requests, expiry per instance, suspension once the content
// handler was called, data protection classes by lock state, UserDefaults before the first unlock, and the
// filtering entitlement's empty content. Each test failed against the code before issue 45.
#if os(Linux)
import Testing
import Foundation
import Dispatch
import Synchronization
import Logging
@testable import SealedPushApple
import UserNotifications
import Security
import FoundationNetworking
import SealedPushReceiver
import SealedPushWire
import SealedPushCrypto
import SealedPushKeyring
import SealedPushSender
import SealedPushTestSupport

private let deviceKey = BoxKeyPair.generate()

/// Keys that block every lookup of a gated key id until released (a request kept in flight).
private final class HeldKeys: DeviceKeyProvider {
    let pair: BoxKeyPair
    let gate = DispatchSemaphore(value: 0)
    init(_ pair: BoxKeyPair) { self.pair = pair }
    func lookUpKey(id keyID: KeyID) -> KeyLookup {
        gate.wait()
        return keyID == pair.keyID ? .found(pair) : .unknown
    }
}

/// A replay guard that has seen every message.
private struct SeenEverything: ReplayGuard {
    func recordIfNew(messageID: String, requestIdentifier: String?, keyID: KeyID, expiresAt: Int64, now: Int64) -> Bool { false }
}

/// Accepts every receipt POST.
private final class Accepting: ReceiptTransport {
    let posts = Mutex(0)
    func post(_ body: [UInt8], to url: String, deadline: ContinuousClock.Instant) async -> ReceiptPostResult {
        posts.withLock { $0 += 1 }
        return .accepted(status: 204)
    }
}

/// An extension whose configuration is made per request by `make` (given the request and the instance, for the
/// attachment pipeline), under a test's attachments root.
private final class RuleService: SealedPushServiceExtension {
    let root: String
    let make: @Sendable (UNNotificationRequest, RuleService) -> SecretMessageExtension.Configuration
    init(root: String, _ make: @escaping @Sendable (UNNotificationRequest, RuleService) -> SecretMessageExtension.Configuration) {
        self.root = root
        self.make = make
        super.init()
    }
    override var attachmentsRootDirectory: String { root }
    override func configuration(for request: UNNotificationRequest) -> SecretMessageExtension.Configuration { make(request, self) }
}

/// A temporary directory, removed at the end.
private final class TempDirectory: Sendable {
    let path: String
    init() throws {
        path = NSTemporaryDirectory() + "sealedpush-rules-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}

private func push(_ message: SecretMessage, identifier: String) throws -> UNNotificationRequest {
    let content = try placeholderContent(of: try NotificationSender().seal(message, to: deviceKey.publicKey))
    content.sound = .default
    content.threadIdentifier = "outer-thread"
    return UNNotificationRequest(identifier: identifier, content: content, trigger: nil)
}

/// A media file of `type` and its encrypted object and descriptor.
private func attachment(url: String) throws -> ([UInt8], AttachmentDescriptor) {
    let file: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + CryptoLibrary.randomBytes(count: 200)
    let key = SecretStream.generateKey()
    let encryptor = try MediaObjectEncryptor(key: key, size: file.count, type: "image/png")
    var object: [UInt8] = []
    try encryptor.update(file) { object += $0 }
    try encryptor.finish { object += $0 }
    return (object, AttachmentDescriptor(id: "a1", url: url, key: key, type: "image/png", size: file.count))
}

@Suite("iOS's rules for the service extension (issue 45)", .timeLimit(.minutes(5))) struct IOSRulesTests {
    init() { TestLogging.quiet() }

    @Test("two instances in one process: a request starting on one does not remove the attachments of a request in flight on the other")
    func parallelInstancesShareTheAttachmentsRoot() async throws {
        let temp = try TempDirectory()
        let root = temp.path + "/attachments"
        let keys = HeldKeys(deviceKey)
        let directories = Mutex<[String: String]>([:])
        let device = StandInDevice()
        let process = StandInExtensionProcess(device: device) {
            RuleService(root: root) { request, service in
                let pipeline = service.attachmentPipeline(for: request, fetcher: MemoryFetcher([:]))
                directories.withLock { $0[request.identifier] = pipeline?.directory }
                return SecretMessageExtension.Configuration(keys: keys, attachments: pipeline)
            }
        }
        process.deliver(try push(SecretMessage(title: "A", body: "a"), identifier: "A"), to: 0)
        let dirA = try #require(directories.withLock { $0["A"] })
        // Request A's attachment being written while it waits for its key.
        try Data([1, 2, 3]).write(to: URL(fileURLWithPath: dirA + "/photo.png"))
        process.deliver(try push(SecretMessage(title: "B", body: "b"), identifier: "B"), to: 1)
        #expect(FileManager.default.fileExists(atPath: dirA + "/photo.png"), "request B's start removed request A's attachment in flight")
        keys.gate.signal()
        keys.gate.signal()
        await process.wait(for: ["A", "B"])
        #expect(process.delivered["A"]?.first?.title == "A" && process.delivered["B"]?.first?.title == "B")
        #expect(device.violations.isEmpty, "\(device.violations)")
    }

    @Test("one instance given two requests at once, then expiry per instance: only the expired instance's request gets the timeout content")
    func expiryPerInstance() async throws {
        let temp = try TempDirectory()
        let keys = HeldKeys(deviceKey)
        let process = StandInExtensionProcess(device: StandInDevice()) {
            RuleService(root: temp.path + "/a") { _, _ in SecretMessageExtension.Configuration(keys: keys) }
        }
        process.deliver(try push(SecretMessage(title: "one", body: "1"), identifier: "r1"), to: 0)
        process.deliver(try push(SecretMessage(title: "two", body: "2"), identifier: "r2"), to: 0)
        process.deliver(try push(SecretMessage(title: "three", body: "3"), identifier: "r3"), to: 1)
        process.expire(instance: 0)
        await process.wait(for: ["r1", "r2"])
        for id in ["r1", "r2"] {
            #expect(process.delivered[id]?.first?.subtitle == SecretMessageExtension.placeholderText)
        }
        #expect(process.delivered["r3"] == nil, "instance 1 was not expired")
        for _ in 0..<3 { keys.gate.signal() }
        await process.wait(for: ["r3"])
        #expect(process.delivered["r3"]?.first?.title == "three")
        #expect(process.delivered.values.allSatisfy { $0.count == 1 })
    }

    @Test("nothing after the content handler: the outbox is flushed before it, and no file lock or write comes once it was called")
    func nothingAfterTheHandler() async throws {
        let temp = try TempDirectory()
        let group = "group.com.example.rules-\(UUID().uuidString)"
        StandInAppGroups.register(group, at: URL(fileURLWithPath: temp.path + "/container"))
        defer { StandInAppGroups.unregister(group) }
        let outbox = try AppGroupReceiptOutbox(appGroup: group)
        // A receipt an earlier run could not send.
        try outbox.enqueue(url: "https://r.example/r", message: .delivered(id: "old", token: Base64.encodeURLSafeNoPadding([UInt8](repeating: 1, count: 16)),
                                                                           at: 1, attachments: nil), now: Int64(Date().timeIntervalSince1970))
        let transport = Accepting()
        let device = StandInDevice()
        let process = StandInExtensionProcess(device: device) {
            RuleService(root: temp.path + "/a") { _, _ in
                var configuration = SecretMessageExtension.Configuration(keys: InMemoryKeys([deviceKey]))
                configuration.receipts = ReceiptCourier(transport: transport, outbox: outbox)
                configuration.maintenanceBudget = .seconds(30)   // the order is under test, not the 2 s default (a loaded machine)
                return configuration
            }
        }
        process.deliver(try push(SecretMessage(title: "hi", body: "there"), identifier: "r1"))
        await process.wait(for: ["r1"])
        try await Task.sleep(for: .milliseconds(300))   // anything the extension still does after the handler
        #expect(device.violations.isEmpty, "\(device.violations)")
        #expect(transport.posts.withLock { $0 } == 1, "the waiting receipt went out before the handler")
        #expect(try outbox.queues(now: Int64(Date().timeIntervalSince1970)).allSatisfy { $0.entries.isEmpty })
    }

    @Test("the filtering entitlement: a replay is handed over as UNNotificationContent() with nothing set")
    func filteringHandsEmptyContent() async throws {
        let temp = try TempDirectory()
        let device = StandInDevice()
        let process = StandInExtensionProcess(device: device, filteringEntitlement: true) {
            RuleService(root: temp.path + "/a") { _, _ in
                var configuration = SecretMessageExtension.Configuration(keys: InMemoryKeys([deviceKey]), replayGuard: SeenEverything())
                configuration.suppressesReplays = true
                return configuration
            }
        }
        process.deliver(try push(SecretMessage(title: "again", body: "replayed"), identifier: "r1"))
        await process.wait(for: ["r1"])
        let got = try #require(process.delivered["r1"]?.first)
        #expect(got.isEmpty, "sound, badge, thread or userInfo were left in suppressed content")
        #expect(device.violations.isEmpty, "\(device.violations)")
    }

    @Test("data protection: with default-data-protection = complete, an attachment is still handed over on a locked phone (class C explicitly)")
    func attachmentsAreClassC() async throws {
        let temp = try TempDirectory()
        let (object, descriptor) = try attachment(url: "https://cdn.example/p")
        let device = StandInDevice(lock: .locked, defaultProtection: .complete)
        let process = StandInExtensionProcess(device: device) {
            RuleService(root: temp.path + "/attachments") { request, service in
                SecretMessageExtension.Configuration(
                    keys: InMemoryKeys([deviceKey]),
                    attachments: service.attachmentPipeline(for: request, fetcher: MemoryFetcher([descriptor.url: .object(object)])))
            }
        }
        var message = SecretMessage(title: "photo", body: "see")
        message.attachments = [descriptor]
        process.deliver(try push(message, identifier: "r1"))
        await process.wait(for: ["r1"])
        let got = try #require(process.delivered["r1"]?.first)
        #expect(got.title == "photo")
        #expect(got.attachmentFiles.count == 1, "the locked phone could not read the attachment")
        #expect(device.violations.isEmpty, "\(device.violations)")
    }

    @Test("data protection: before the first unlock class C files neither open nor can be made; class D ones can")
    func classCBeforeFirstUnlock() throws {
        let temp = try TempDirectory()
        let device = StandInDevice(lock: .beforeFirstUnlock)
        let url = URL(fileURLWithPath: temp.path + "/SealedPush")
        try StandInDevice.$current.withValue(device) {
            let outbox = AppGroupReceiptOutbox(directory: url)
            let refused = #expect(throws: AppGroupStoreError.self) {
                try outbox.enqueue(url: "https://r.example/r", message: .delivered(id: "m", token: "AQEBAQEBAQEBAQEBAQEBAQ", at: 1, attachments: nil),
                                   now: 1)
            }
            if case .protectedDataUnavailable? = refused {} else { Issue.record("expected protectedDataUnavailable, got \(String(describing: refused))") }
            let queue = AppGroupPendingQueue(directory: url)
            try queue.append(PendingMessage(requestID: "r", thread: "", receivedAt: 1, payload: JSONObject([])))
            #expect(try queue.entries().count == 1)
        }
    }

    @Test("replacements after the unlock are passive and silent; more than three get one summary alert")
    func silentReplacements() async throws {
        let center = UNUserNotificationCenter.current()
        let ids = (1...5).map { "silent-\(UUID().uuidString)-\($0)" }
        for id in ids {
            let shown = UNMutableNotificationContent()
            shown.body = SecretMessageExtension.placeholderText
            shown.sound = .default
            center.add(UNNotificationRequest(identifier: id, content: shown, trigger: nil))
        }
        defer { center.removeDeliveredNotifications(withIdentifiers: ids + [NotificationCenterReplacer.summaryIdentifier]) }
        /// A replacer counting what it was asked, over the real one.
        final class Counting: DeliveredNotificationReplacer {
            let real = NotificationCenterReplacer()
            let summaries = Mutex<[Int]>([])
            func replaceDelivered(_ request: SealedPushReceiver.NotificationRequest) async -> Bool { await real.replaceDelivered(request) }
            func summarize(replaced count: Int) async {
                summaries.withLock { $0.append(count) }
                await real.summarize(replaced: count)
            }
        }
        let replacer = Counting()
        for id in ids {
            #expect(await replacer.replaceDelivered(.init(identifier: id, content: NotificationContent(title: "t", body: "b", sound: "default"))))
        }
        let replaced = center.standInDelivered.filter { ids.contains($0.identifier) }
        #expect(replaced.count == 5)
        #expect(replaced.allSatisfy { $0.content.interruptionLevel == .passive && $0.content.sound == nil })
        await replacer.summarize(replaced: 5)
        let summary = try #require(center.standInDelivered.first { $0.identifier == NotificationCenterReplacer.summaryIdentifier })
        #expect(summary.content.sound != nil && summary.content.interruptionLevel == .active && summary.content.body.contains("5"))
    }

    @Test("the phone's receipt outbox keeps an entry (a bearer token readable after the first unlock) at most 24 hours or the message's ttl")
    func outboxKeepsADay() throws {
        let temp = try TempDirectory()
        let outbox = AppGroupReceiptOutbox(directory: URL(fileURLWithPath: temp.path + "/SealedPush"))
        #expect(outbox.maximumAgeSeconds == 24 * 3600)
        let t0: Int64 = 1_800_000_000
        try outbox.enqueue(url: "https://r.example/r", message: .delivered(id: "m", token: "AQEBAQEBAQEBAQEBAQEBAQ", at: t0, attachments: nil), now: t0)
        #expect(try outbox.queues(now: t0 + 23 * 3600).flatMap(\.entries).count == 1)
        #expect(try outbox.queues(now: t0 + 25 * 3600).flatMap(\.entries).isEmpty)
        // A message that expires sooner: its receipt goes with it (the shorter of 24 hours and the message's ttl).
        try outbox.enqueue(url: "https://r.example/r", message: .delivered(id: "n", token: "AQEBAQEBAQEBAQEBAQEBAQ", at: t0, attachments: nil),
                           now: t0, expiresAt: t0 + 600)
        #expect(try outbox.queues(now: t0 + 599).flatMap(\.entries).count == 1)
        #expect(try outbox.queues(now: t0 + 601).flatMap(\.entries).isEmpty)
    }

    @Test("content(for:): an app's own extension gets the content and the outcome; the final-content hook changes presentation only")
    func entryPointAndFinalContentHook() async throws {
        /// A subclass whose hook sets presentation and tries to put text back.
        final class Hooked: SealedPushServiceExtension {
            let root: String
            let keys: [BoxKeyPair]
            init(root: String, keys: [BoxKeyPair]) {
                self.root = root
                self.keys = keys
                super.init()
            }
            override var attachmentsRootDirectory: String { root }
            override func configuration(for request: UNNotificationRequest) -> SecretMessageExtension.Configuration {
                SecretMessageExtension.Configuration(keys: InMemoryKeys(keys))
            }
            override func finalContent(_ content: UNMutableNotificationContent, for delivery: ExtensionDelivery) -> UNNotificationContent {
                content.categoryIdentifier = "APP_CATEGORY"
                content.interruptionLevel = .timeSensitive
                content.relevanceScore = 0.9
                content.title = "from the hook"
                content.body = "The eagle lands at noon."
                content.userInfo["leak"] = "yes"
                return content
            }
        }
        let temp = try TempDirectory()
        let opens = Hooked(root: temp.path + "/a", keys: [deviceKey])
        let (content, outcome) = await opens.content(for: try push(SecretMessage(title: "Lunch?", body: "At noon"), identifier: "r1"))
        #expect(outcome == .decrypted)
        #expect(content.title == "Lunch?" && content.body == "At noon", "the hook changed the message's text")
        #expect(content.categoryIdentifier == "APP_CATEGORY" && content.interruptionLevel == .timeSensitive && content.relevanceScore == 0.9)
        #expect(content.userInfo["leak"] == nil)
        // A message that cannot be opened: the hook cannot put text back.
        let locked = Hooked(root: temp.path + "/b", keys: [])
        let (fallback, why) = await locked.content(for: try push(SecretMessage(title: "secret", body: "text"), identifier: "r2"))
        #expect(why == .fallback(.unknownKey))
        #expect(fallback.body == SecretMessageExtension.placeholderText && fallback.title != "from the hook")
        #expect(!fallback.userInfo.keys.contains { ($0.base as? String) == WireFormat.encryptedDataKey })
    }

    @Test("no path hands iOS ENCRYPTED_DATA: a request whose userInfo is not JSON gets the placeholder without it")
    func nonJSONUserInfoNeverPassesThePayload() async throws {
        let temp = try TempDirectory()
        let process = StandInExtensionProcess(device: StandInDevice()) {
            RuleService(root: temp.path + "/a") { _, _ in SecretMessageExtension.Configuration(keys: InMemoryKeys([deviceKey])) }
        }
        let content = try placeholderContent(of: try NotificationSender().seal(SecretMessage(title: "t", body: "b"), to: deviceKey.publicKey))
        content.userInfo["when"] = Date()   // not JSON
        process.deliver(UNNotificationRequest(identifier: "r1", content: content, trigger: nil))
        await process.wait(for: ["r1"])
        let got = try #require(process.delivered["r1"]?.first)
        #expect(!got.userInfoKeys.contains(WireFormat.encryptedDataKey))
        #expect(got.body == SecretMessageExtension.placeholderText)
    }
}
#endif

#if os(Linux)
/// An app with the default settings over a fresh app group container and keychain access group.
private final class StrictApp {
    let temp: TempDirectory
    let group = "group.com.example.strict-\(UUID().uuidString)"
    let access = "TEAM.strict-\(UUID().uuidString)"
    var settings: SealedPushSettings
    let signer = SigningKeyPair.generate()
    let record: DeviceKeyRecord

    init() throws {
        temp = try TempDirectory()
        StandInAppGroups.register(group, at: URL(fileURLWithPath: temp.path + "/container"))
        settings = SealedPushSettings(keychainAccessGroup: access, appGroup: group, logSubsystem: "t")
        record = try KeychainDeviceKeySet(accessGroup: access).generate()
    }
    deinit { StandInAppGroups.unregister(group) }

    func deliver(signed: Bool = true, id: String = UUID().uuidString) async throws -> ExtensionDelivery {
        var message = SecretMessage(title: "Agent K", body: "The eagle lands at noon.")
        message.messageID = id
        let sealed = try NotificationSender(signer: signed ? signer : nil).seal(message, to: record)
        guard case let .object(payload) = try JSON.parse(sealed.payload) else { throw KeychainError.param("payload") }
        return await deliver(SealedPushReceiver.NotificationRequest(identifier: id, payload: payload))
    }

    func deliver(_ request: SealedPushReceiver.NotificationRequest) async -> ExtensionDelivery {
        await SecretMessageExtension(configuration: settings.serviceConfiguration(receiptTransport: nil)).delivery(for: request)
    }

    func plaintextPush() -> SealedPushReceiver.NotificationRequest {
        SealedPushReceiver.NotificationRequest(identifier: "plain", payload: JSONObject([
            ("aps", .object(JSONObject([("alert", .object(JSONObject([("title", .string("Bank")), ("body", .string("Send your PIN"))]))),
                                        ("mutable-content", .int(1)), ("sound", .string("default"))]))),
        ]))
    }
}

// The keychain stand-in is one process-wide store: these run inside the serialized keychain suite.
extension KeychainDeviceKeysTests {
@Suite("Strict by default (issue 45 item 3), and the first-launch wipe before the first unlock", .timeLimit(.minutes(5))) struct StrictDefaultsTests {
    init() { TestLogging.quiet() }

    @Test("UserDefaults reads as empty before the first unlock: the first-launch wipe does nothing then")
    func wipeWaitsForTheFirstUnlock() throws {
        let temp = try TempDirectory()
        let group = "group.com.example.wipe-\(UUID().uuidString)"
        StandInAppGroups.register(group, at: URL(fileURLWithPath: temp.path + "/container"))
        defer { StandInAppGroups.unregister(group) }
        let access = "TEAM.wipe-\(UUID().uuidString)"
        let settings = SealedPushSettings(keychainAccessGroup: access, appGroup: group, logSubsystem: "t")
        let item: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: BoxKeyPair.service,
                                   kSecAttrAccount as String: "k", kSecAttrAccessGroup as String: access, kSecValueData as String: Data([1])]
        #expect(SecItemAdd(item as CFDictionary, nil) == errSecSuccess)
        // The app has run before (the marker is set), but before the first unlock iOS shows it empty defaults.
        let empty = try #require(UserDefaults(suiteName: "sealedpush-rules-\(UUID().uuidString)"))
        let device = StandInDevice(lock: .beforeFirstUnlock)
        let wiped = StandInDevice.$current.withValue(device) { SealedPushApp.wipeKeychainAfterInstall(settings: settings, defaults: empty) }
        #expect(!wiped)
        #expect(StandInKeychain.items.contains { $0.service == BoxKeyPair.service && $0.account == "k" }, "the keys of this installation were wiped")
        // Once unlocked, a real first launch (empty defaults) does wipe.
        device.lockState = .unlocked
        #expect(StandInDevice.$current.withValue(device) { SealedPushApp.wipeKeychainAfterInstall(settings: settings, defaults: empty) })
    }


    @Test("signatures .required (the default): with no trusted sender every message fails signatureRequired, signed or not")
    func requiredWithoutTrustedSender() async throws {
        let app = try StrictApp()
        #expect(app.settings.signatures == .required)
        #expect(try await app.deliver(signed: true).outcome == .fallback(.signatureRequired))
        #expect(try await app.deliver(signed: false).outcome == .fallback(.signatureRequired))
        #expect(SealedPushSettings.noTrustedSenderAdvice.contains("KeychainTrustStore.trust"))
        // Trusted: signed opens, unsigned is refused.
        try KeychainTrustStore(accessGroup: app.access).trust(SenderKeyRecord(publicKey: app.signer.publicKey))
        #expect(try await app.deliver(signed: true).outcome == .decrypted)
        #expect(try await app.deliver(signed: false).outcome == .fallback(.signatureRequired))
        // Even if the trust store's own setting says optional, `.required` wins.
        try KeychainTrustStore(accessGroup: app.access).setSignatures(.optional)
        #expect(try await app.deliver(signed: false).outcome == .fallback(.signatureRequired))
    }

    @Test("KeychainDeviceKeys for the reveal service is whenUnlockedThisDeviceOnly and checks the class it reads back")
    func revealServiceIsAlwaysWhenUnlocked() throws {
        let access = "TEAM.reveal-\(UUID().uuidString)"
        let keys = KeychainDeviceKeys(accessGroup: access, service: RevealKeyPair.service)
        #expect(keys.accessibility == .whenUnlockedThisDeviceOnly)
        // An item of the reveal service added after-first-unlock (another library, an older version) is refused.
        let pair = BoxKeyPair.generate()
        let item: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: RevealKeyPair.service,
                                   kSecAttrAccount as String: pair.keyID.hex, kSecAttrAccessGroup as String: access,
                                   kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly,
                                   kSecUseDataProtectionKeychain as String: true,
                                   kSecValueData as String: Data(pair.secretKey.unsafeCopyToArray())]
        #expect(SecItemAdd(item as CFDictionary, nil) == errSecSuccess)
        guard case .unknown = keys.lookUpKey(id: pair.keyID) else {
            Issue.record("a reveal key readable after the first unlock was used")
            return
        }
    }

    @Test("signatures .notRequired(reason:): the trust store's rule (unsigned accepted until a sender is trusted)")
    func notRequired() async throws {
        let app = try StrictApp()
        app.settings.signatures = .notRequired(reason: "a test of the opt-out")
        #expect(try await app.deliver(signed: false).outcome == .decrypted)
    }

    @Test("a push without ENCRYPTED_DATA is refused by default: (Encrypted) without its text, suppressed with the filtering entitlement, shown only when allowed")
    func plaintextRefused() async throws {
        let app = try StrictApp()
        let refused = await app.deliver(app.plaintextPush())
        #expect(refused.outcome == .notEncrypted)
        #expect(refused.content.title == "" && refused.content.body == SecretMessageExtension.placeholderText)
        app.settings.hasFilteringEntitlement = true
        let suppressed = await app.deliver(app.plaintextPush())
        #expect(suppressed.outcome == .notEncrypted && suppressed.suppressed && suppressed.content == NotificationContent())
        app.settings.plaintext = .show(reason: "a test of the opt-out")
        let shown = await app.deliver(app.plaintextPush())
        #expect(shown.outcome == .notEncrypted && shown.content.body == "Send your PIN")
    }
}
}
#endif
