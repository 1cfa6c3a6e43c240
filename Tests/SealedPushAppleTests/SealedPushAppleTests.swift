// SealedPushApple, compiled from its own files against the Apple stand-ins (Tests/AppleStandIns),
// exercised on Linux. On other platforms the stand-ins are empty and this file compiles to nothing.
#if os(Linux)
import Testing
import Foundation
import Dispatch
import Synchronization
import Logging
import SealedPushApple
import UserNotifications
import Security
import os
import SealedPushReceiver
import SealedPushWire
import SealedPushCrypto
import SealedPushKeyring
import SealedPushSender
import SealedPushTestSupport
@testable import SealedPushAppleExampleExtension

/// Collects what a content handler received, from any thread.
private final class Received: Sendable {
    // The stand-in UNNotificationContent is not Sendable: keep only Sendable snapshots of it.
    struct Snapshot: Sendable, Equatable {
        var title, subtitle, body, thread, category: String
        var badge: Int?
        var soundName: String?
        var soundCritical: Bool?
        var level: UInt
        var relevance: Double
        var userInfoKeys: [String]
        var data: String?
    }
    let snapshots = Mutex<[Snapshot]>([])
    var all: [Snapshot] { snapshots.withLock { $0 } }

    func handler() -> (UNNotificationContent) -> Void {
        { content in
            let snapshot = Snapshot(title: content.title, subtitle: content.subtitle, body: content.body, thread: content.threadIdentifier,
                                    category: content.categoryIdentifier, badge: content.badge?.intValue, soundName: content.sound?.standInName,
                                    soundCritical: content.sound?.standInCritical, level: content.interruptionLevel.rawValue,
                                    relevance: content.relevanceScore, userInfoKeys: content.userInfo.keys.compactMap { $0.base as? String }.sorted(),
                                    data: content.userInfo["order"] as? String)
            self.snapshots.withLock { $0.append(snapshot) }
        }
    }

    /// Waits (up to 10 s) until `count` deliveries arrived.
    func wait(for count: Int) async {
        for _ in 0..<1000 where all.count < count { try? await Task.sleep(for: .milliseconds(10)) }
    }
}

/// Keys that block every lookup until released (work still in flight when the expiry comes).
private final class GatedKeys: DeviceKeyProvider {
    let pair: BoxKeyPair
    let gate = DispatchSemaphore(value: 0)
    init(_ pair: BoxKeyPair) { self.pair = pair }
    func lookUpKey(id keyID: KeyID) -> KeyLookup {
        gate.wait()
        return keyID == pair.keyID ? .found(pair) : .unknown
    }
}

/// The extension under test with a fixed configuration.
private final class TestService: SealedPushServiceExtension {
    let make: @Sendable () -> SecretMessageExtension.Configuration
    init(_ make: @escaping @Sendable () -> SecretMessageExtension.Configuration) {
        self.make = make
        super.init()
    }
    override func configuration(for request: UNNotificationRequest) -> SecretMessageExtension.Configuration { make() }
}

/// A request as iOS makes it from a sealed push: the placeholder alert, the payload as userInfo,
/// and what iOS sets beyond the payload's text (a critical sound, time-sensitive, relevance).
private func request(for sealed: SealedNotification, identifier: String = "req-1") throws -> UNNotificationRequest {
    let content = try placeholderContent(of: sealed)
    content.sound = .criticalSoundNamed(UNNotificationSoundName("alarm.caf"))
    content.interruptionLevel = .timeSensitive
    content.relevanceScore = 0.75
    content.threadIdentifier = "chat-7"
    return UNNotificationRequest(identifier: identifier, content: content, trigger: nil)
}

private let device = BoxKeyPair.generate()

private func sealed(_ message: SecretMessage) throws -> SealedNotification {
    try NotificationSender().seal(message, to: device.publicKey)
}

@Suite("SealedPushApple against the Apple stand-ins") struct SealedPushAppleTests {
    init() { TestLogging.quiet() }

    @Test("didReceive: the content handler is called once, with the decrypted text over the request's content")
    func decrypts() async throws {
        let received = Received()
        let service = TestService { SecretMessageExtension.Configuration(keys: InMemoryKeys([device])) }
        let message = SecretMessage(title: "Lunch?", body: "At noon", badge: 3, data: ["order": .string("42")])
        service.didReceive(try request(for: try sealed(message)), withContentHandler: received.handler())
        await received.wait(for: 1)
        service.serviceExtensionTimeWillExpire()   // after the delivery: nothing more
        try await Task.sleep(for: .milliseconds(50))
        let all = received.all
        #expect(all.count == 1)
        let got = try #require(all.first)
        #expect(got.title == "Lunch?" && got.body == "At noon" && got.subtitle == "" && got.badge == 3)
        // Kept from request.content: the critical sound, interruption level, relevance and thread.
        #expect(got.soundName == "alarm.caf" && got.soundCritical == true)
        #expect(got.level == UNNotificationInterruptionLevel.timeSensitive.rawValue && got.relevance == 0.75 && got.thread == "chat-7")
        // userInfo: ENCRYPTED_DATA gone, the message's data merged in.
        #expect(!got.userInfoKeys.contains("ENCRYPTED_DATA") && got.data == "42" && got.userInfoKeys.contains("aps"))
    }

    @Test("a message's sound \"default\" becomes UNNotificationSound.default; without one the request's sound stays")
    func sounds() async throws {
        let received = Received()
        let service = TestService { SecretMessageExtension.Configuration(keys: InMemoryKeys([device])) }
        service.didReceive(try request(for: try sealed(SecretMessage(title: "a", body: "b", sound: "default"))), withContentHandler: received.handler())
        await received.wait(for: 1)
        #expect(received.all.first?.soundName == nil && received.all.first?.soundCritical == false)
    }

    @Test("expiry while the message is being opened: the timeout content, once; the late result is dropped")
    func expiryDeliversTimeoutOnce() async throws {
        let received = Received()
        let keys = GatedKeys(device)
        let service = TestService { SecretMessageExtension.Configuration(keys: keys) }
        service.didReceive(try request(for: try sealed(SecretMessage(title: "secret", body: "text"))), withContentHandler: received.handler())
        service.serviceExtensionTimeWillExpire()
        service.serviceExtensionTimeWillExpire()
        await received.wait(for: 1)
        keys.gate.signal()   // the open finishes after the expiry
        try await Task.sleep(for: .milliseconds(200))
        let all = received.all
        #expect(all.count == 1)
        #expect(all.first?.subtitle == SecretMessageExtension.placeholderText && all.first?.body == "")
        #expect(all.first?.title != "secret")
    }

    @Test("an extension that does not override configuration(for:) shows the placeholder")
    func unconfigured() async throws {
        let received = Received()
        let service = SealedPushServiceExtension()
        service.didReceive(try request(for: try sealed(SecretMessage(title: "secret", body: "text"))), withContentHandler: received.handler())
        await received.wait(for: 1)
        #expect(received.all.count == 1 && received.all.first?.body == SecretMessageExtension.placeholderText)
    }

    @Test("the extension docs/ios.md shows is a SealedPushServiceExtension with a Keychain keyring, URLSession attachments and os.Logger logging")
    func docsExample() throws {
        let service = NotificationService()
        let content = UNMutableNotificationContent()
        let configuration = service.configuration(for: UNNotificationRequest(identifier: "x", content: content, trigger: nil))
        let keys = try #require(configuration.keys as? KeychainDeviceKeyring)
        #expect(keys.lifecycle.storage.accessGroup == "ABCDE12345.com.example.shared")
        // Outside didReceive the request has no attachments directory, so no pipeline.
        #expect(configuration.attachments == nil)
    }
}

@Suite("KeychainDeviceKeys against the Security stand-in", .serialized) struct KeychainDeviceKeysTests {
    init() { StandInKeychain.reset() }

    @Test("a stored key is found; items are AfterFirstUnlockThisDeviceOnly; statuses map to locked, unavailable, unknown")
    func statuses() throws {
        let keys = KeychainDeviceKeys(accessGroup: "ABCDE12345.com.example.shared")
        let pair = BoxKeyPair.generate()
        #expect(keys.add(pair) == errSecSuccess)
        #expect(keys.add(pair) == errSecDuplicateItem)
        #expect(StandInKeychain.accessibility[pair.keyID.hex] == (kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly as String))
        guard case let .found(found) = keys.lookUpKey(id: pair.keyID) else { Issue.record("expected .found"); return }
        #expect(found.publicKey == pair.publicKey)
        guard case .unknown = keys.lookUpKey(id: BoxKeyPair.generate().keyID) else { Issue.record("expected .unknown"); return }
        guard case .unknown = KeychainDeviceKeys(accessGroup: "OTHER.group").lookUpKey(id: pair.keyID) else { Issue.record("expected .unknown"); return }
        StandInKeychain.force(errSecInteractionNotAllowed)
        guard case .locked = keys.lookUpKey(id: pair.keyID) else { Issue.record("expected .locked"); return }
        StandInKeychain.force(errSecMissingEntitlement)
        guard case .unavailable = keys.lookUpKey(id: pair.keyID) else { Issue.record("expected .unavailable"); return }
        StandInKeychain.reset()
    }
}

@Suite("Attachment options, logging, the stand-in build") struct AppleGlueTests {
    @Test("every media type of attachments v1 has a UTI type hint; thumbnail options are passed")
    func attachmentOptions() throws {
        for type in MediaType.all {
            let options = try #require(AttachmentOptions.options(for: NotificationAttachment(identifier: "a", url: "/x", type: type.mime)))
            let uti = try #require(options[UNNotificationAttachmentOptionsTypeHintKey] as? String)
            #expect(uti.contains(".") && !uti.contains("/"), "\(type.mime) → \(uti)")
        }
        let options = AttachmentOptions.options(for: NotificationAttachment(identifier: "a", url: "/x", type: "video/mp4", thumbnailHidden: true,
                                                                            thumbnailTime: 3))
        #expect(options?[UNNotificationAttachmentOptionsThumbnailHiddenKey] as? Bool == true)
        #expect(options?[UNNotificationAttachmentOptionsThumbnailTimeKey] as? Int64 == 3)
        #expect(AttachmentOptions.options(for: NotificationAttachment(identifier: "a", url: "/x")) == nil)
    }

    @Test("an attachment the system refuses is left out and its file deleted; an accepted one carries its UTI")
    func attachmentsApplied() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sealedpush-apple-\(UInt64.random(in: 0...UInt64.max))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let good = dir.appendingPathComponent("a.jpg").path
        try Data([0xFF, 0xD8, 0xFF, 0x00]).write(to: URL(fileURLWithPath: good))
        let refused = dir.appendingPathComponent("sub").path   // a directory: the stand-in refuses it
        try FileManager.default.createDirectory(atPath: refused, withIntermediateDirectories: true)
        let original = UNMutableNotificationContent()
        let converted = try #require(NotificationContent(original))
        var delivered = converted
        delivered.attachments = [NotificationAttachment(identifier: "ok", url: good, type: "image/jpeg"),
                                 NotificationAttachment(identifier: "no", url: refused, type: "image/png")]
        let apple = original.applying(delivered, over: converted, logger: Logging.Logger(label: "test"))
        #expect(apple.attachments.map(\.identifier) == ["ok"])
        #expect(apple.attachments.first?.type == "public.jpeg")
        #expect(!FileManager.default.fileExists(atPath: refused))
    }

    @Test("OSLogHandler writes the message and metadata to os.Logger with the mapped type")
    func logging() {
        let subsystem = "test.\(UInt64.random(in: 0...UInt64.max))"
        let logger = Logging.Logger.unifiedLogging(label: "sealedpush.extension", subsystem: subsystem)
        logger.notice("notification not opened", metadata: ["reason": "keychainLocked"])
        logger.critical("boom")
        let mine = StandInLog.entries.withLock { $0.filter { $0.subsystem == subsystem } }
        #expect(mine.map(\.text) == ["notification not opened reason=keychainLocked", "boom"])
        #expect(mine.map(\.type) == [.default, .fault])
        #expect(mine.allSatisfy { $0.category == "sealedpush.extension" })
    }

    @Test("every file of Sources/SealedPushApple is compiled here: Tests/AppleStandIns/SealedPushApple links each one")
    func everyFileIsTypeChecked() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let sources = root.appendingPathComponent("Sources/SealedPushApple").path
        let links = root.appendingPathComponent("Tests/AppleStandIns/SealedPushApple").path
        let files = try FileManager.default.contentsOfDirectory(atPath: sources).filter { $0.hasSuffix(".swift") }.sorted()
        #expect(!files.isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: links).sorted() == files)
        for file in files {
            let target = try FileManager.default.destinationOfSymbolicLink(atPath: links + "/" + file)
            #expect(target == "../../../Sources/SealedPushApple/" + file)
        }
    }
}
#endif

#if os(Linux)
/// An extension whose attachments root is a test directory, with an attachment pipeline per request.
private final class AttachingService: SealedPushServiceExtension {
    let root: String
    let pipelines = Mutex<[String]>([])
    init(root: String) {
        self.root = root
        super.init()
    }
    override var attachmentsRootDirectory: String { root }
    override func configuration(for request: UNNotificationRequest) -> SecretMessageExtension.Configuration {
        let pipeline = attachmentPipeline(for: request, fetcher: MemoryFetcher([:]))
        if let pipeline { pipelines.withLock { $0.append(pipeline.directory) } }
        return SecretMessageExtension.Configuration(keys: InMemoryKeys([device]), attachments: pipeline)
    }
}

@Suite("Per-request attachment directories") struct AttachmentDirectoryTests {
    @Test("each request gets a fresh private directory; what a killed extension left under the root is removed at the next start")
    func emptiedAtStart() async throws {
        let root = NSTemporaryDirectory() + "sealedpush-root-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: root) }
        // Left behind by an extension iOS killed: a request directory with a plaintext file, and a stray file.
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        try FileManager.default.createDirectory(atPath: root + "/OLD", withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        try Data([1, 2, 3]).write(to: URL(fileURLWithPath: root + "/OLD/photo.jpg"))
        try Data([4]).write(to: URL(fileURLWithPath: root + "/stray.png"))
        let service = AttachingService(root: root)
        let received = Received()
        service.didReceive(try request(for: try sealed(SecretMessage(title: "a", body: "b"))), withContentHandler: received.handler())
        await received.wait(for: 1)
        let first = try #require(service.pipelines.withLock { $0.first })
        #expect(first.hasPrefix(root + "/"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: root) == [(first as NSString).lastPathComponent])
        let mode = try #require(try FileManager.default.attributesOfItem(atPath: first)[.posixPermissions] as? Int)
        #expect(mode & 0o777 == 0o700)
        // The next request: the delivered request's directory is removed, a new one made.
        service.didReceive(try request(for: try sealed(SecretMessage(title: "c", body: "d")), identifier: "req-2"), withContentHandler: received.handler())
        await received.wait(for: 2)
        let second = try #require(service.pipelines.withLock { $0.last })
        #expect(second != first)
        #expect(try FileManager.default.contentsOfDirectory(atPath: root) == [(second as NSString).lastPathComponent])
        // Outside configuration(for:) a request has no directory.
        #expect(service.attachmentPipeline(for: UNNotificationRequest(identifier: "x", content: UNMutableNotificationContent(), trigger: nil),
                                           fetcher: MemoryFetcher([:])) == nil)
    }
}
#endif

#if os(Linux)
/// A wall clock tests move by hand.
private final class TestClock: Sendable {
    let seconds = Mutex<TimeInterval>(1_800_000_000)
    var clock: WallClock { WallClock { [self] in Date(timeIntervalSince1970: self.seconds.withLock { $0 }) } }
    func advance(_ by: TimeInterval) { seconds.withLock { $0 += by } }
}

// The key lifecycle in the Keychain: in the serialized suite of KeychainDeviceKeysTests, which resets the
// stand-ins' in-memory keychain before each test (one keychain for the whole process).
extension KeychainDeviceKeysTests {
    @Test("generate, rotate with a grace period, retire, prune: lookups follow each step; secrets are where KeychainDeviceKeys reads them")
    func lifecycle() throws {
        let time = TestClock()
        let group = "ABCDE12345.com.example.shared"
        let keyring = KeychainDeviceKeyring(accessGroup: group, clock: time.clock)
        let first = try BoxKeyPair.record(try keyring.lifecycle.generate())
        #expect(throws: KeychainError.activeKeyExists(keyID: first.keyID.hex)) { try keyring.lifecycle.generate() }
        guard case .found = keyring.lookUpKey(id: first.keyID) else { Issue.record("the active key must be found"); return }
        // The simple reader finds the same secret (same service, account and group); items are ThisDeviceOnly.
        guard case .found = KeychainDeviceKeys(accessGroup: group).lookUpKey(id: first.keyID) else { Issue.record("shared layout"); return }
        #expect(StandInKeychain.accessibility[first.keyID.hex] == (kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly as String))

        // Rotation: the old key stays usable for its grace period, then not.
        let second = try BoxKeyPair.record(try keyring.lifecycle.rotate(grace: 3600))
        #expect(try keyring.lifecycle.activeKey().keyID == second.keyID)
        guard case .found = keyring.lookUpKey(id: first.keyID) else { Issue.record("retired key within its grace"); return }
        time.advance(3601)
        guard case .unknown = keyring.lookUpKey(id: first.keyID) else { Issue.record("retired key past its deadline"); return }
        #expect(Dictionary(uniqueKeysWithValues: try keyring.lifecycle.list().map { ($0.keyID, $0.state) })
                    == [first.keyID: .retired, second.keyID: .active])

        // Prune destroys it: its secret item is deleted, a tombstone stays listed.
        #expect(try keyring.lifecycle.prune().map(\.keyID) == [first.keyID])
        #expect(!StandInKeychain.items.contains { $0.service == BoxKeyPair.service && $0.account == first.keyID.hex })
        #expect(try keyring.lifecycle.list().first { $0.keyID == first.keyID }?.state == .destroyed)

        // Stage, export and activate a next key; retire the old one at once.
        let next = try keyring.lifecycle.stageNext()
        _ = try keyring.lifecycle.exportInfo(next.keyID)
        _ = try keyring.lifecycle.activate(next.keyID, force: false, grace: 0)
        _ = try keyring.lifecycle.retire(second.keyID, grace: 0)
        time.advance(1)
        guard case .unknown = keyring.lookUpKey(id: second.keyID) else { Issue.record("retired with no grace"); return }
        guard case .found = keyring.lookUpKey(id: next.keyID) else { Issue.record("the activated key"); return }
        #expect(throws: KeychainError.self) { try keyring.lifecycle.retire(next.keyID, grace: 0) }   // the active key is refused
    }

    @Test("an interrupted rotation (pending key written, pointer not committed) is rolled back by the next writer")
    func recovery() throws {
        let keyring = KeychainDeviceKeyring(accessGroup: "G.shared")
        let first = try BoxKeyPair.record(try keyring.lifecycle.generate())
        let orphan = BoxKeyPair.generate()
        try keyring.lifecycle.storage.transaction { (tx: KeychainKeyringStorage) throws(KeychainError) in
            try keyring.lifecycle.writePointer(tx, KeyPointer(active: first.keyID, pending: orphan.keyID))
            try keyring.lifecycle.writeKey(tx, orphan)
        }
        guard case .unknown = keyring.lookUpKey(id: orphan.keyID) else { Issue.record("a pending key must not be usable"); return }
        _ = try keyring.lifecycle.rotate(grace: 0)
        #expect(!StandInKeychain.items.contains { $0.account == orphan.keyID.hex })
    }

    @Test("statuses: before first unlock .locked; a missing keychain entitlement or another error .unavailable; writes say what to do")
    func keyringStatuses() throws {
        let keyring = KeychainDeviceKeyring(accessGroup: "G.shared")
        let record = try BoxKeyPair.record(try keyring.lifecycle.generate())
        StandInKeychain.force(errSecInteractionNotAllowed)
        guard case .locked = keyring.lookUpKey(id: record.keyID) else { Issue.record("expected .locked"); return }
        StandInKeychain.force(-25291)   // errSecNotAvailable
        guard case .unavailable = keyring.lookUpKey(id: record.keyID) else { Issue.record("expected .unavailable"); return }
        #expect(throws: KeychainError.keychainStatus(operation: "SecItemCopyMatching", status: -25291)) { try keyring.lifecycle.rotate(grace: 0) }
        StandInKeychain.force(nil)
        StandInKeychain.entitle(["OTHER.group"])
        guard case .unavailable = keyring.lookUpKey(id: record.keyID) else { Issue.record("expected .unavailable"); return }
        #expect(throws: KeychainError.missingEntitlement(group: "G.shared")) { try keyring.lifecycle.rotate(grace: 0) }
        StandInKeychain.reset()
    }
}
#endif

#if os(Linux)
import UIKit
import UserNotificationsUI

/// The content extension's view controller under test: keys in memory, a lock switch, the views it was shown.
@MainActor
private final class TestReveal: SealedPushRevealViewController {
    final class Flag: Sendable { let value = Mutex(false) }
    let unlocked = Flag()
    var shown: [RevealView] = []
    override func configuration(for notification: UNNotification) -> RevealContentExtension.Configuration {
        let unlocked = self.unlocked
        return RevealContentExtension.Configuration(revealKeys: InMemoryKeys([]), deviceKeys: InMemoryKeys([device]),
                                                    protectedDataAvailable: { unlocked.value.withLock { $0 } })
    }
    override func show(_ view: RevealView) { shown.append(view) }

    func waitForShown(_ count: Int) async {
        for _ in 0..<1000 where shown.count < count { try? await Task.sleep(for: .milliseconds(10)) }
    }
}

@Suite("SealedPushRevealViewController against the stand-ins") struct RevealViewControllerTests {
    init() { TestLogging.quiet() }

    @Test("locked, then revealed when protected data becomes available while shown; nothing after the view went away")
    @MainActor func lockedThenUnlocked() async throws {
        var message = SecretMessage(title: "Agent K", body: "The eagle lands at noon.")
        message.messageID = "vc-1"
        let notification = UNNotification(standInRequest: try request(for: try sealed(message)), date: Date())
        let controller = TestReveal()
        controller.didReceive(notification)
        await controller.waitForShown(1)
        #expect(controller.shown.map(\.outcome) == [.locked])
        #expect(controller.shown.first?.body == "Unlock iPhone to read")
        controller.unlocked.value.withLock { $0 = true }
        NotificationCenter.default.post(name: UIApplication.protectedDataDidBecomeAvailableNotification, object: nil)
        await controller.waitForShown(2)
        #expect(controller.shown.map(\.outcome) == [.locked, .revealed])
        #expect(controller.shown.last?.title == "Agent K" && controller.shown.last?.body == "The eagle lands at noon.")
        controller.viewDidDisappear(false)
        #expect(controller.standInDisappearances == 1)
        NotificationCenter.default.post(name: UIApplication.protectedDataDidBecomeAvailableNotification, object: nil)
        try await Task.sleep(for: .milliseconds(200))
        #expect(controller.shown.count == 2, "a view that went away was shown again")
    }

    @Test("a subclass that does not override configuration(for:) shows Unlock iPhone to read, never the text")
    @MainActor func unconfiguredController() async throws {
        let notification = UNNotification(standInRequest: try request(for: try sealed(SecretMessage(title: "t", body: "secret"))), date: Date())
        final class Plain: SealedPushRevealViewController {
            var shown: [RevealView] = []
            override func show(_ view: RevealView) { shown.append(view) }
        }
        let controller = Plain()
        controller.didReceive(notification)
        for _ in 0..<1000 where controller.shown.isEmpty { try await Task.sleep(for: .milliseconds(10)) }
        #expect(controller.shown.map(\.outcome) == [.locked])
    }
}
#endif
