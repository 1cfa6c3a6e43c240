// Issue 35 item 3 against the stand-ins: what an app gets from `SealedPushSettings` — signatures required once a
// sender is trusted, replays refused, a replay suppressed with the filtering entitlement, the pending queue in the
// app group replaced through Notification Center, receipts never holding the content handler. In the serialized
// suite of KeychainDeviceKeysTests (the Security stand-in is one in-memory keychain, reset before each test).
#if os(Linux)
import Testing
import Foundation
import Security
import FoundationNetworking
import UserNotifications
import SealedPushApple
import SealedPushReceiver
import SealedPushWire
import SealedPushCrypto
import SealedPushKeyring
import SealedPushSender
import SealedPushTestSupport
import Synchronization

private let keychainGroup = "ABCDE12345.com.example.shared"
private let appGroup = "group.com.example.safe-defaults"

/// An app's settings over a fresh app group container; the container is removed when the value goes.
private final class SafeApp {
    let directory: AppGroupTempDirectory
    var settings: SealedPushSettings
    let keys = KeychainDeviceKeySet(accessGroup: keychainGroup)
    let signer = SigningKeyPair.generate()

    init() throws {
        TestLogging.quiet()
        directory = try AppGroupTempDirectory()
        StandInAppGroups.register(appGroup, at: directory.url)
        settings = SealedPushSettings(keychainAccessGroup: keychainGroup, appGroup: appGroup, logSubsystem: "com.example.tests")
        // These tests exercise the trust store's own rule; StrictDefaultsTests the default `.required`.
        settings.signatures = .notRequired(reason: "tests of the trust store's rule")
        UNUserNotificationCenter.current().standInReset()
    }
    deinit { StandInAppGroups.unregister(appGroup) }

    func request(_ record: DeviceKeyRecord, id: String, signed: Bool = false, identifier: String, body: String = "The eagle lands at noon.") throws
        -> SealedPushReceiver.NotificationRequest {
        var message = SecretMessage(title: "Agent K", body: body)
        message.messageID = id
        let sealed = try NotificationSender(signer: signed ? signer : nil).seal(message, to: record)
        guard case let .object(payload) = try JSON.parse(sealed.payload) else { throw KeychainError.param("payload") }
        return SealedPushReceiver.NotificationRequest(identifier: identifier, payload: payload)
    }

    func deliver(_ request: SealedPushReceiver.NotificationRequest, _ configure: (inout SecretMessageExtension.Configuration) -> Void = { _ in })
        async -> ExtensionDelivery {
        var configuration = settings.serviceConfiguration(receiptTransport: nil)
        configure(&configuration)
        let receiver = SecretMessageExtension(configuration: configuration)
        let delivery = await receiver.delivery(for: request)
        await receiver.finishBackgroundWork()
        return delivery
    }
}

/// Records every receipt POST and accepts it.
private final class AcceptingTransport: ReceiptTransport {
    let posts = Mutex<[String]>([])
    func post(_ body: [UInt8], to url: String, deadline: ContinuousClock.Instant) async -> ReceiptPostResult {
        posts.withLock { $0.append(url) }
        return .accepted(status: 204)
    }
}

/// The one-file extension of docs/ios.md §2 over `settings`, with a receipt transport the test sees.
private final class StandardService: SealedPushServiceExtension {
    let settings: SealedPushSettings
    let transport: AcceptingTransport
    init(settings: SealedPushSettings, transport: AcceptingTransport) {
        self.settings = settings
        self.transport = transport
        super.init()
    }
    override func configuration(for request: UNNotificationRequest) -> SecretMessageExtension.Configuration {
        standardConfiguration(for: request, settings: settings, fetcher: nil, receiptTransport: transport)
    }
}

extension KeychainDeviceKeysTests {
    @Test("the next extension run sends what an earlier one queued: the app group outbox is flushed after the content handler")
    func nextRunFlushesTheOutbox() async throws {
        let app = try SafeApp()
        let record = try app.keys.generate()
        let outbox = try AppGroupReceiptOutbox(appGroup: appGroup)
        let now = Int64(Date().timeIntervalSince1970)
        try outbox.enqueue(url: "https://push.example.com/earlier",
                           message: .delivered(id: "m-earlier", token: "leSLeiHU1ME6svkg7Bq3Yw", at: now, attachments: nil), now: now)
        let transport = AcceptingTransport()
        let service = StandardService(settings: app.settings, transport: transport)
        let payload = try NotificationSender().seal(SecretMessage(title: "Agent K", body: "Now."), to: record).payload
        let userInfo = try #require(try JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any])
        let content = UNMutableNotificationContent()
        content.body = "(Encrypted)"
        content.userInfo = userInfo
        let shown = Mutex<String?>(nil)
        service.didReceive(UNNotificationRequest(identifier: "REQ-N", content: content, trigger: nil)) { c in shown.withLock { $0 = c.body } }
        // The POST is recorded before the flush settles the outbox: wait for all three (at most 10 s).
        for _ in 0..<1000 where transport.posts.withLock({ $0.isEmpty }) || shown.withLock({ $0 }) == nil
            || !((try? outbox.entries().entries.isEmpty) ?? false) {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(shown.withLock { $0 } == "Now.")
        #expect(transport.posts.withLock { $0 } == ["https://push.example.com/earlier"])
        #expect(try outbox.entries().entries.isEmpty)
    }

    @Test("trust store: no sender → unsigned accepted; a trusted sender makes signatures required; optional only when set; a misfiled record is refused")
    func trustStoreDefaults() throws {
        let trust = KeychainTrustStore(accessGroup: keychainGroup)
        #expect(try trust.receiverPolicy().requireSignature == false)
        let signer = SigningKeyPair.generate()
        try trust.trust(SenderKeyRecord(publicKey: signer.publicKey))
        let policy = try trust.receiverPolicy()
        #expect(policy.requireSignature && policy.trustedSenders[signer.keyID] != nil)
        try trust.setSignatures(.optional)
        #expect(try trust.receiverPolicy().requireSignature == false)
        try trust.setSignatures(nil)
        #expect(try trust.receiverPolicy().requireSignature)
        #expect(try trust.previews() == .full)
        try trust.setPreviews(.hidden)
        #expect(try trust.previews() == .hidden)
        // A record filed under another key id is refused, and so the policy cannot be read (keychainLocked, not trust).
        let other = SigningKeyPair.generate()
        let misfiled: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "sealedpush.trusted-sender",
                                       kSecAttrAccount as String: other.keyID.hex, kSecAttrAccessGroup as String: keychainGroup,
                                       kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly,
                                       kSecValueData as String: Data(SenderKeyRecord(publicKey: signer.publicKey).jsonBytes)]
        #expect(SecItemAdd(misfiled as CFDictionary, nil) == errSecSuccess)
        let failure = #expect(throws: OpenFailure.self) { try trust.receiverPolicy() }
        #expect(failure?.reason == .keychainLocked)
        // Trust items are after-first-unlock (readable by the extension on a locked phone) and never synchronizable.
        let item = try #require(StandInKeychain.item(service: "sealedpush.trusted-sender", account: signer.keyID.hex))
        #expect(item.accessible == (kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly as String) && !item.synchronizable)
    }

    @Test("safe by default: an unsigned message is refused once a sender is trusted; a replay under another notification is refused")
    func signaturesAndReplays() async throws {
        let app = try SafeApp()
        let record = try app.keys.generate()
        try KeychainTrustStore(accessGroup: keychainGroup).trust(SenderKeyRecord(publicKey: app.signer.publicKey))
        let unsigned = await app.deliver(try app.request(record, id: "m-unsigned", identifier: "R0"))
        #expect(unsigned.outcome == .fallback(.signatureRequired))
        let signed = try app.request(record, id: "m-1", signed: true, identifier: "R1")
        #expect(await app.deliver(signed).outcome == .decrypted)
        #expect(await app.deliver(signed).outcome == .decrypted, "the same notification opens again")
        let replay = SealedPushReceiver.NotificationRequest(identifier: "R2", content: signed.content)
        let refused = await app.deliver(replay)
        #expect(refused.outcome == .fallback(.replayed) && refused.content.body == "(Encrypted)")
        #expect(refused.content.userInfo[WireFormat.encryptedDataKey] == nil)
        // With the filtering entitlement the replay is not shown at all (no alert text).
        app.settings.hasFilteringEntitlement = true
        let suppressed = await app.deliver(replay)
        #expect(suppressed.outcome == .fallback(.replayed) && !suppressed.content.hasAlertText)
        // Turned off explicitly: no replay guard (and the docs say what that costs).
        app.settings.guardsReplays = false
        #expect(app.settings.serviceConfiguration(receiptTransport: nil).replayGuard == nil)
    }

    @Test("without the App Groups capability the replay guard fails closed: every message is refused")
    func noAppGroup() async throws {
        let app = try SafeApp()
        let record = try app.keys.generate()
        app.settings.appGroup = "group.com.example.not-entitled"
        let delivery = await app.deliver(try app.request(record, id: "m-x", identifier: "RX"))
        #expect(delivery.outcome == .fallback(.replayed))
    }

    @Test("before first unlock: the message waits in the app group's pending queue; didLaunch replaces its notification in Notification Center")
    func pendingQueueOnIOS() async throws {
        let app = try SafeApp()
        try app.keys.generate()
        let record = try app.keys.export()
        try KeychainTrustStore(accessGroup: keychainGroup).setPreviews(.hidden)
        StandInKeychain.setLockState(.beforeFirstUnlock)
        let request = try app.request(record, id: "m-bfu", identifier: "REQ-BFU")
        let delivery = await app.deliver(request)
        #expect(delivery.outcome == .fallback(.keychainLocked))
        #expect(delivery.content.userInfo[WireFormat.encryptedDataKey] == nil)
        #expect(delivery.content.userInfo[RevealFormat.pendingUserInfoKey] == .string("REQ-BFU"))
        let queue = try AppGroupPendingQueue(appGroup: appGroup)
        #expect(try queue.status().pending == 1)
        // iOS shows the placeholder under the request identifier.
        let placeholder = UNMutableNotificationContent()
        placeholder.body = "(Encrypted)"
        UNUserNotificationCenter.current().add(UNNotificationRequest(identifier: "REQ-BFU", content: placeholder, trigger: nil))
        // Still before first unlock: nothing changes.
        #expect(await SealedPushApp.didLaunch(settings: app.settings, receiptTransport: nil).pending.remaining == 1)
        StandInKeychain.setLockState(.unlocked)
        let launched = await SealedPushApp.didLaunch(settings: app.settings, receiptTransport: nil)
        #expect(launched.pending.replaced == 1 && launched.pending.remaining == 0)
        #expect(try queue.status().pending == 0)
        let shown = try #require(UNUserNotificationCenter.current().standInDelivered.first { $0.identifier == "REQ-BFU" })
        #expect(shown.content.body == "Press and hold to read")
        #expect(shown.content.userInfo[WireFormat.encryptedDataKey] == nil && shown.content.userInfo[RevealFormat.localUserInfoKey] != nil)
        #expect(UNUserNotificationCenter.current().standInDelivered.count == 1, "replaced, not added beside it")
    }

    @Test("previews none on iOS: SEALEDPUSH_LOCAL sealed to the reveal public key read on a locked phone; the content extension opens it only unlocked")
    func localSealOnIOS() async throws {
        let app = try SafeApp()
        let record = try app.keys.generate()
        try KeychainTrustStore(accessGroup: keychainGroup).setPreviews(.hidden)
        StandInKeychain.setLockState(.locked)
        let delivery = await app.deliver(try app.request(record, id: "m-local", identifier: "REQ-L"))
        #expect(delivery.outcome == .decrypted && delivery.content.body == "Press and hold to read")
        let local = try #require(delivery.content.userInfo[RevealFormat.localUserInfoKey]?.stringValue)
        #expect(try Envelope(base64: local).keyID == record.reveal?.keyID)
        let notification = DeliveredNotification(request: SealedPushReceiver.NotificationRequest(identifier: "REQ-L", content: delivery.content),
                                                 deliveredAt: Int64(Date().timeIntervalSince1970))
        #expect(await RevealContentExtension(configuration: app.settings.revealConfiguration(receiptTransport: nil)).didReceive(notification).outcome == .locked)
        StandInKeychain.setLockState(.unlocked)
        let view = await RevealContentExtension(configuration: app.settings.revealConfiguration(receiptTransport: nil)).didReceive(notification)
        #expect(view.outcome == .revealed && view.body == "The eagle lands at noon.")
    }
}
#endif

#if os(Linux)
extension KeychainDeviceKeysTests {
    @Test("first launch after an install wipes every SealedPush item of the access group once (keychain items survive an uninstall)")
    func wipeAfterInstall() throws {
        let settings = SealedPushSettings(keychainAccessGroup: keychainGroup, appGroup: appGroup, logSubsystem: "t")
        let defaults = try #require(UserDefaults(suiteName: "sealedpush-tests-\(UUID().uuidString)"))
        let keys = KeychainDeviceKeySet(accessGroup: keychainGroup)
        _ = try keys.generate()
        try KeychainTrustStore(accessGroup: keychainGroup).trust(SenderKeyRecord(publicKey: SigningKeyPair.generate().publicKey))
        // An item of another app in the same group is not SealedPush's and stays.
        let foreign: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "com.example.other",
                                      kSecAttrAccount as String: "x", kSecAttrAccessGroup as String: keychainGroup,
                                      kSecValueData as String: Data([1])]
        #expect(SecItemAdd(foreign as CFDictionary, nil) == errSecSuccess)
        #expect(!StandInKeychain.items.filter { $0.service.hasPrefix("sealedpush.") }.isEmpty)
        #expect(SealedPushApp.wipeKeychainAfterInstall(settings: settings, defaults: defaults))
        #expect(StandInKeychain.items.map(\.service) == ["com.example.other"])
        // Not again on the next launch: the keys made now stay.
        let record = try keys.generate()
        #expect(!SealedPushApp.wipeKeychainAfterInstall(settings: settings, defaults: defaults))
        #expect(try keys.export() == record)
    }
}
#endif
