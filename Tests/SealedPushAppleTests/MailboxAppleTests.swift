// Mailbox v1 §5 on iOS's rules (the stand-ins): before the first unlock a mailbox push is not fetched and leaves no
// file behind; the gateway is the queue. In the serialized suite of KeychainDeviceKeysTests (one in-memory keychain).
#if os(Linux)
import Testing
import Foundation
import Security
import Synchronization
import FoundationNetworking
import UserNotifications
import SealedPushApple
import SealedPushReceiver
import SealedPushWire
import SealedPushCrypto
import SealedPushSender
import SealedPushKeyring
import SealedPushTestSupport

private let mailboxKeychainGroup = "ABCDE12345.com.example.mailbox"
private let mailboxAppGroup = "group.com.example.mailbox"

/// Counts fetches; answers `.failed` (nothing to open).
private final class CountingFetcher: MailboxFetcher {
    let calls = Mutex(0)
    func fetch(_ handle: MailboxHandle, deadlineSeconds: Double) async -> MailboxFetchResult {
        calls.withLock { $0 += 1 }
        return .failed("the test gateway answers nothing")
    }
}

/// Every regular file under `url`, with its size.
private func files(under url: URL) -> [String: Int] {
    var out: [String: Int] = [:]
    guard let walker = FileManager.default.enumerator(atPath: url.path) else { return out }
    while let name = walker.nextObject() as? String {
        let path = url.path + "/" + name
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue {
            out[name] = ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? -1
        }
    }
    return out
}

extension KeychainDeviceKeysTests {
    @Test("before the first unlock a mailbox push is neither fetched nor queued: no file written, the handle kept, (Encrypted)")
    func mailboxBeforeFirstUnlock() async throws {
        TestLogging.quiet()
        let directory = try AppGroupTempDirectory()
        StandInAppGroups.register(mailboxAppGroup, at: directory.url)
        defer { StandInAppGroups.unregister(mailboxAppGroup); StandInKeychain.setLockState(.unlocked) }
        var settings = SealedPushSettings(keychainAccessGroup: mailboxKeychainGroup, appGroup: mailboxAppGroup, logSubsystem: "com.example.tests")
        settings.signatures = .notRequired(reason: "a test of the mailbox's lock rule")
        let keys = KeychainDeviceKeySet(accessGroup: mailboxKeychainGroup)
        let record = try keys.generate()
        let handle = try #require(MailboxHandle.make(deliveryID: "d_bfu"))
        let aps: JSONValue = .object(JSONObject([("alert", .object(JSONObject([("title", "New message"), ("body", "(Encrypted)")]))),
                                                 ("mutable-content", .int(1))]))
        let push = NotificationRequest(identifier: "REQ-BFU", payload: JSONObject([("aps", aps), (MailboxHandle.apnsKey, .string(handle.description))]))

        func deliver(_ request: NotificationRequest, _ fetcher: CountingFetcher) async -> ExtensionDelivery {
            var configuration = settings.serviceConfiguration(receiptTransport: nil)
            configuration.mailboxFetcher = fetcher
            let receiver = SecretMessageExtension(configuration: configuration)
            let delivery = await receiver.delivery(for: request)
            await receiver.finishBackgroundWork()
            return delivery
        }

        let device = StandInDevice(lock: .beforeFirstUnlock)
        StandInKeychain.setLockState(.beforeFirstUnlock)
        try await StandInDevice.$current.withValue(device) {
            let fetcher = CountingFetcher()
            _ = settings.serviceConfiguration(receiptTransport: nil)  // whatever making the configuration sets up
            let before = files(under: directory.url)
            let delivery = await deliver(push, fetcher)
            #expect(fetcher.calls.withLock { $0 } == 0, "no fetch before the first unlock")
            #expect(files(under: directory.url) == before, "nothing written: the gateway is the queue")
            #expect(try AppGroupPendingQueue(appGroup: mailboxAppGroup).status().pending == 0)
            #expect(delivery.outcome == .fallback(.keychainLocked))
            #expect(delivery.content.body == "(Encrypted)")
            #expect(delivery.content.userInfo[MailboxHandle.apnsKey] == .string(handle.description), "the handle waits in the notification")
            #expect(delivery.content.userInfo[RevealFormat.pendingUserInfoKey] == nil)

            // The control: a push-mode message at the same moment is queued (a write this test sees).
            var message = SecretMessage(title: "Agent K", body: "The eagle lands at noon.")
            message.messageID = "m-push"
            let sealed = try NotificationSender().seal(message, to: record)
            guard case let .object(payload) = try JSON.parse(sealed.payload) else { Issue.record("payload"); return }
            _ = await deliver(NotificationRequest(identifier: "REQ-PUSH", payload: payload), fetcher)
            #expect(files(under: directory.url) != before, "a push-mode message before the first unlock does write the pending queue")
        }

        // Unlocked once: the same push is fetched.
        StandInKeychain.setLockState(.unlocked)
        let fetcher = CountingFetcher()
        let unlocked = await deliver(push, fetcher)
        #expect(fetcher.calls.withLock { $0 } == 1)
        #expect(unlocked.outcome == .fallback(.fetchFailed))
    }

    @Test("SealedPushSettings.mailboxURL: the standard configuration fetches over URLSession and opens the message; a non-https URL is refused")
    func settingsFetchOverURLSession() async throws {
        TestLogging.quiet()
        let directory = try AppGroupTempDirectory()
        StandInAppGroups.register(mailboxAppGroup, at: directory.url)
        defer { StandInAppGroups.unregister(mailboxAppGroup) }
        StandInKeychain.setLockState(.unlocked)
        var settings = SealedPushSettings(keychainAccessGroup: mailboxKeychainGroup, appGroup: mailboxAppGroup, logSubsystem: "com.example.tests")
        settings.signatures = .notRequired(reason: "a test of the mailbox fetch")
        try KeychainTrustStore(accessGroup: mailboxKeychainGroup).setPreviews(.full)
        let record = try KeychainDeviceKeySet(accessGroup: mailboxKeychainGroup).generate()
        let now = Int64(Date().timeIntervalSince1970)
        let body = MessageBody(kid: record.keyID, id: "m-mbx-\(UUID().uuidString.prefix(8))", issuedAt: now, alert: .init(title: "Agent K", body: "The eagle lands at noon."))
        let envelope = try MailboxSealing.seal(inner: InnerMessage.frame(body: try MailboxSealing.bodyBytes(body, deliveryID: "d_url"), recipient: record.keyID,
                                                                         signer: nil), to: record.publicKey, maxMessageBytes: 32768)
        let base = "https://gateway-\(UUID().uuidString.lowercased()).example"
        StandInURLServer.serveData(base + "/v1/mailbox/fetch", .status(200, body: JSON.serialize(.object(JSONObject([
            ("envelope", .string(Base64.encode(envelope))), ("message_id", .string(body.id)), ("expires_at", "2030-01-01T00:00:00Z")])))))
        let handle = try #require(MailboxHandle.make(deliveryID: "d_url"))
        let aps: JSONValue = .object(JSONObject([("alert", .object(JSONObject([("title", "New message"), ("body", "(Encrypted)")]))),
                                                 ("mutable-content", .int(1))]))
        let push = NotificationRequest(identifier: "REQ-URL", payload: JSONObject([("aps", aps), (MailboxHandle.apnsKey, .string(handle.description))]))

        settings.mailboxURL = base
        let receiver = SecretMessageExtension(configuration: settings.serviceConfiguration(receiptTransport: nil))
        let delivery = await receiver.delivery(for: push)
        await receiver.finishBackgroundWork()
        #expect(delivery.outcome == .decrypted && delivery.content.body == "The eagle lands at noon.")
        #expect(delivery.content.userInfo[MailboxHandle.apnsKey] == nil && delivery.content.userInfo[WireFormat.encryptedDataKey] == nil)

        settings.mailboxURL = "http://gateway.example"
        let refused = await SecretMessageExtension(configuration: settings.serviceConfiguration(receiptTransport: nil)).delivery(for: push)
        #expect(refused.outcome == .fallback(.malformedPayload) && refused.content.body == "(Encrypted)")
    }
}
#endif

#if os(Linux)
extension KeychainDeviceKeysTests {
    @Test("didLaunch fetches the handle a delivered notification kept (before the first unlock) and replaces it with the message")
    func launchFetchesKeptHandles() async throws {
        TestLogging.quiet()
        let directory = try AppGroupTempDirectory()
        StandInAppGroups.register(mailboxAppGroup, at: directory.url)
        defer { StandInAppGroups.unregister(mailboxAppGroup) }
        StandInKeychain.setLockState(.unlocked)
        UNUserNotificationCenter.current().standInReset()
        var settings = SealedPushSettings(keychainAccessGroup: mailboxKeychainGroup, appGroup: mailboxAppGroup, logSubsystem: "com.example.tests")
        settings.signatures = .notRequired(reason: "a test of the mailbox's later fetch")
        try KeychainTrustStore(accessGroup: mailboxKeychainGroup).setPreviews(.full)
        let record = try KeychainDeviceKeySet(accessGroup: mailboxKeychainGroup).generate()
        let now = Int64(Date().timeIntervalSince1970)
        let body = MessageBody(kid: record.keyID, id: "m-later-\(UUID().uuidString.prefix(8))", issuedAt: now,
                               alert: .init(title: "Agent K", body: "The eagle lands at noon."))
        let envelope = try MailboxSealing.seal(inner: InnerMessage.frame(body: try MailboxSealing.bodyBytes(body, deliveryID: "d_later"),
                                                                         recipient: record.keyID, signer: nil),
                                               to: record.publicKey, maxMessageBytes: 32768)
        let base = "https://gateway-\(UUID().uuidString.lowercased()).example"
        StandInURLServer.serveData(base + "/v1/mailbox/fetch", .status(200, body: JSON.serialize(.object(JSONObject([
            ("envelope", .string(Base64.encode(envelope))), ("message_id", .string(body.id)), ("expires_at", "2030-01-01T00:00:00Z")])))))
        settings.mailboxURL = base
        let handle = try #require(MailboxHandle.make(deliveryID: "d_later")).description
        // What the extension handed iOS before the first unlock: the placeholder with the handle kept.
        let placeholder = UNMutableNotificationContent()
        placeholder.title = "New message"
        placeholder.body = "(Encrypted)"
        placeholder.userInfo = [MailboxHandle.apnsKey: handle]
        UNUserNotificationCenter.current().add(UNNotificationRequest(identifier: "REQ-LATER", content: placeholder, trigger: nil))

        let summary = await SealedPushApp.didLaunch(settings: settings, receiptTransport: nil)
        #expect(summary.mailbox.replaced == 1 && summary.mailbox.remaining == 0)
        let shown = try #require(UNUserNotificationCenter.current().standInDelivered.first { $0.identifier == "REQ-LATER" })
        #expect(shown.content.body == "The eagle lands at noon.")
        #expect(shown.content.userInfo[MailboxHandle.apnsKey] == nil && shown.content.userInfo[WireFormat.encryptedDataKey] == nil)
        #expect(UNUserNotificationCenter.current().standInDelivered.count == 1, "replaced, not added beside it")
        UNUserNotificationCenter.current().standInReset()
    }

    @Test("NotificationCenterReplacer removes exactly the delivered notifications that hold the retracted handle")
    func removesHoldersOnly() async throws {
        TestLogging.quiet()
        let handle = try #require(MailboxHandle.make(deliveryID: "d_r")).description
        let other = try #require(MailboxHandle.make(deliveryID: "d_o")).description
        let tag = UUID().uuidString
        for (identifier, held) in [("A" + tag, handle), ("B" + tag, other), ("C" + tag, handle)] {
            let content = UNMutableNotificationContent()
            content.body = "(Encrypted)"
            content.userInfo = [MailboxHandle.apnsKey: held]
            UNUserNotificationCenter.current().add(UNNotificationRequest(identifier: identifier, content: content, trigger: nil))
        }
        let plain = UNMutableNotificationContent()
        plain.body = "shown"
        UNUserNotificationCenter.current().add(UNNotificationRequest(identifier: "D" + tag, content: plain, trigger: nil))
        #expect(await NotificationCenterReplacer().removeDelivered(holdingHandle: handle) == 2)
        let left = UNUserNotificationCenter.current().standInDelivered.map(\.identifier).filter { $0.hasSuffix(tag) }.sorted()
        #expect(left == ["B" + tag, "D" + tag])
    }
}
#endif
