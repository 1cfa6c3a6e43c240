// The reveal key in the iOS Keychain (reveal v1 §1) against the Security stand-in, which models the lock
// states: in the serialized suite of KeychainDeviceKeysTests, which resets the stand-ins' one in-memory
// keychain (and unlocks it) before each test.
#if os(Linux)
import Testing
import Foundation
import Logging
import Synchronization
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
@testable import SealedPushAppleExampleApp
@testable import SealedPushAppleExampleContentExtension

private let group = "ABCDE12345.com.example.shared"

/// The stored item of `service`/`account`, or a recorded issue.
private func stored(_ service: String, _ account: String) throws -> StandInKeychain.StoredItem {
    try #require(StandInKeychain.item(service: service, account: account), "no item \(service)/\(account)")
}

/// A content extension over `keys` for reveal messages, with the lock probe of the reveal keyring.
private func contentExtension(_ keys: KeychainDeviceKeySet) -> RevealContentExtension {
    RevealContentExtension(configuration: RevealContentExtension.Configuration(
        revealKeys: keys.reveal, deviceKeys: keys.device, protectedDataAvailable: { keys.reveal.isReadable() }))
}

/// A reveal message to `record`, as iOS keeps it after the service extension held it (outcome `held`).
private func revealNotification(_ keys: KeychainDeviceKeySet, _ record: DeviceKeyRecord, id: String) async throws -> DeliveredNotification {
    var message = SecretMessage(title: "Agent K", body: "The eagle lands at noon.")
    message.reveal = .standard
    message.messageID = id
    let sealed = try NotificationSender().seal(message, to: record)
    guard case let .object(payload) = try JSON.parse(sealed.payload) else { throw KeychainError.param("payload") }
    let request = NotificationRequest(identifier: "req-\(id)", payload: payload)
    let delivery = await SecretMessageExtension(configuration: SecretMessageExtension.Configuration(keys: keys.device)).delivery(for: request)
    #expect(delivery.outcome == .held)
    return DeliveredNotification(request: NotificationRequest(identifier: request.identifier, content: delivery.content),
                                 deliveredAt: Int64(Date().timeIntervalSince1970))
}

extension KeychainDeviceKeysTests {
    @Test("the reveal key: secrets WhenUnlockedThisDeviceOnly, records AfterFirstUnlockThisDeviceOnly, none synchronizable; the record carries reveal")
    func revealKeyClasses() throws {
        let keys = KeychainDeviceKeySet(accessGroup: group)
        let record = try keys.generate()
        let reveal = try #require(record.reveal)
        #expect(try keys.export() == record)
        #expect(try keys.reveal.activeRevealPublicKey() == reveal.publicKey)
        #expect(try stored(RevealKeyPair.service, reveal.keyID.hex).accessible == (kSecAttrAccessibleWhenUnlockedThisDeviceOnly as String))
        #expect(try stored(RevealKeyPair.service + ".state", reveal.keyID.hex).accessible == (kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly as String))
        #expect(try stored(RevealKeyPair.service + ".active", "pointer").accessible == (kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly as String))
        #expect(try stored(BoxKeyPair.service, record.keyID.hex).accessible == (kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly as String))
        for item in StandInKeychain.items {
            #expect(try stored(item.service, item.account).synchronizable == false, "\(item.service)/\(item.account)")
        }
        guard case .found = keys.reveal.lookUpKey(id: reveal.keyID) else { Issue.record("the reveal key must be found"); return }
        guard case .found = keys.device.lookUpKey(id: record.keyID) else { Issue.record("the device key must be found"); return }
        // The kinds do not mix: a device key id is not a reveal key, and the reverse.
        guard case .unknown = keys.reveal.lookUpKey(id: record.keyID) else { Issue.record("a device key is no reveal key"); return }
        guard case .unknown = keys.device.lookUpKey(id: reveal.keyID) else { Issue.record("a reveal key is no device key"); return }
        #expect(throws: KeychainError.activeKeyExists(keyID: record.keyID.hex)) { try keys.generate() }
        // The record the app registers parses back with its reveal member.
        #expect(try DeviceKeyRecord(jsonBytes: record.jsonBytes).reveal == reveal)
    }

    @Test("rotate the reveal key with grace, retire, destroy, prune: lookups follow; the device key is untouched")
    func revealKeyLifecycle() throws {
        let time = TestClock()
        let keys = KeychainDeviceKeySet(accessGroup: group, clock: time.clock)
        let first = try keys.generate()
        let old = try #require(first.reveal)
        let second = try keys.rotateReveal(grace: 3600)
        let new = try #require(second.reveal)
        #expect(new.keyID != old.keyID && second.keyID == first.keyID)
        #expect(try keys.export().reveal == new)
        guard case .found = keys.reveal.lookUpKey(id: old.keyID) else { Issue.record("the old reveal key opens during its grace"); return }
        time.advance(3601)
        guard case .unknown = keys.reveal.lookUpKey(id: old.keyID) else { Issue.record("not after it"); return }
        #expect(try keys.prune().map(\.keyID) == [old.keyID])
        #expect(StandInKeychain.item(service: RevealKeyPair.service, account: old.keyID.hex) == nil)
        // Stage, export, activate; retire the previous at once; destroy it.
        let staged = try keys.reveal.lifecycle.stageNext()
        _ = try keys.reveal.lifecycle.exportInfo(staged.keyID)
        _ = try keys.reveal.lifecycle.activate(staged.keyID, force: false, grace: 0)
        _ = try keys.reveal.lifecycle.retire(new.keyID, grace: 0)
        _ = try keys.reveal.lifecycle.destroy([new.keyID], force: false, reason: "destroyed")
        guard case .unknown = keys.reveal.lookUpKey(id: new.keyID) else { Issue.record("destroyed"); return }
        #expect(try keys.export().reveal?.keyID == staged.keyID)
        guard case .found = keys.device.lookUpKey(id: first.keyID) else { Issue.record("the device key is untouched"); return }
        // A device with its reveal key destroyed exports no reveal member; addReveal makes one.
        _ = try keys.reveal.lifecycle.destroy([staged.keyID], force: true, reason: "forced")
        #expect(try keys.export().reveal == nil)
        #expect(try keys.addReveal().reveal != nil)
    }

    @Test("a locked phone (after first unlock) reads the device key and the reveal public key, not the reveal key; before first unlock neither")
    func lockStates() throws {
        let keys = KeychainDeviceKeySet(accessGroup: group)
        let record = try keys.generate()
        let reveal = try #require(record.reveal)

        StandInKeychain.setLockState(.locked)
        guard case .found = keys.device.lookUpKey(id: record.keyID) else { Issue.record("the device key reads while locked"); return }
        guard case .locked = keys.reveal.lookUpKey(id: reveal.keyID) else { Issue.record("the reveal key must not read while locked"); return }
        #expect(keys.device.isReadable())
        #expect(!keys.reveal.isReadable())
        #expect(try keys.reveal.activeRevealPublicKey() == reveal.publicKey)   // what the service extension seals to (§5.1)
        #expect(try keys.export() == record)                                  // the record is readable too
        // The simple reader in the reveal key's class answers the same.
        let simple = KeychainDeviceKeys(accessGroup: group, service: RevealKeyPair.service, accessibility: .whenUnlockedThisDeviceOnly)
        guard case .locked = simple.lookUpKey(id: reveal.keyID) else { Issue.record("KeychainDeviceKeys: locked"); return }
        #expect(!simple.isReadable())
        // A reveal key cannot be written while locked; the half-made rotation is undone by the next writer.
        #expect(throws: KeychainError.self) { try keys.rotateReveal(grace: 0) }
        #expect(try keys.export().reveal == reveal)

        StandInKeychain.setLockState(.beforeFirstUnlock)
        guard case .locked = keys.device.lookUpKey(id: record.keyID) else { Issue.record("no device key before first unlock"); return }
        guard case .locked = keys.reveal.lookUpKey(id: reveal.keyID) else { Issue.record("no reveal key before first unlock"); return }
        #expect(!keys.device.isReadable() && !keys.reveal.isReadable())
        do {
            _ = try keys.reveal.activeRevealPublicKey()
            Issue.record("the records are AfterFirstUnlock: unreadable before the first unlock")
        } catch {
            guard case .interactionNotAllowed = error else { Issue.record("expected interactionNotAllowed, got \(error)"); return }
        }

        StandInKeychain.setLockState(.unlocked)
        guard case .found = keys.reveal.lookUpKey(id: reveal.keyID) else { Issue.record("unlocked: the reveal key reads"); return }
        let rotated = try keys.rotateReveal(grace: 0)
        #expect(rotated.reveal != reveal)
        #expect(try keys.reveal.lifecycle.list().count == 2)   // the interrupted rotation left nothing behind
    }

    @Test("a reveal key item that reads back in another class is refused (fail closed), the class named in the log, never the key")
    func wrongClassRefused() throws {
        let subsystem = "test.\(UInt64.random(in: 0...UInt64.max))"
        let logger = Logging.Logger.unifiedLogging(label: "sealedpush.keychain", subsystem: subsystem)
        let keys = KeychainDeviceKeySet(accessGroup: group, logger: logger)
        let record = try keys.generate()
        let reveal = try #require(record.reveal)
        let secret = try keys.reveal.lifecycle.activeKey().storedSecret.unsafeCopyToArray()
        // Planted: the same secret under the same name, in a class readable while locked.
        let query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: RevealKeyPair.service,
                                    kSecAttrAccount as String: reveal.keyID.hex, kSecAttrAccessGroup as String: group]
        #expect(SecItemDelete(query as CFDictionary) == errSecSuccess)
        var planted = query
        planted[kSecAttrAccessible as String] = kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly
        planted[kSecValueData as String] = Data(secret)
        #expect(SecItemAdd(planted as CFDictionary, nil) == errSecSuccess)

        for lock in [StandInKeychain.LockState.unlocked, .locked] {
            StandInKeychain.setLockState(lock)
            guard case .unknown = keys.reveal.lookUpKey(id: reveal.keyID) else { Issue.record("\(lock): the planted item must be refused"); return }
            let simple = KeychainDeviceKeys(accessGroup: group, service: RevealKeyPair.service, accessibility: .whenUnlockedThisDeviceOnly, logger: logger)
            guard case .unknown = simple.lookUpKey(id: reveal.keyID) else { Issue.record("\(lock): KeychainDeviceKeys must refuse it"); return }
        }
        #expect(throws: KeychainError.self) { try keys.reveal.lifecycle.activeKey() }
        let refusals = StandInLog.entries.withLock { $0.filter { $0.subsystem == subsystem && $0.text.contains("refused") } }
        #expect(refusals.count >= 3)
        for entry in refusals {
            #expect(entry.text.contains("kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly"), "the class is named: \(entry.text)")
            let everything = entry.text + entry.arguments.map(\.value).joined()
            #expect(!everything.contains(Base64.encode(secret)) && !everything.contains(Hex.encode(secret)))
        }
        // The device key's own class is not checked: it still reads.
        guard case .found = keys.device.lookUpKey(id: record.keyID) else { Issue.record("the device key reads"); return }
    }

    @Test("the content extension on a locked phone: Unlock iPhone to read; unlocked: the text; a planted item in the wrong class: (Encrypted)")
    func contentExtensionLockStates() async throws {
        let keys = KeychainDeviceKeySet(accessGroup: group)
        let record = try keys.generate()
        let notification = try await revealNotification(keys, record, id: "k-1")
        StandInKeychain.setLockState(.locked)
        let locked = await contentExtension(keys).didReceive(notification)
        #expect(locked.outcome == .locked && locked.body == "Unlock iPhone to read")
        StandInKeychain.setLockState(.unlocked)
        let revealed = await contentExtension(keys).didReceive(notification)
        #expect(revealed.outcome == .revealed && revealed.body == "The eagle lands at noon.")

        // The same key planted AfterFirstUnlock: the probe says readable while locked, the read refuses it.
        let reveal = try #require(record.reveal)
        let secret = try keys.reveal.lifecycle.activeKey().storedSecret.unsafeCopyToArray()
        let query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: RevealKeyPair.service,
                                    kSecAttrAccount as String: reveal.keyID.hex, kSecAttrAccessGroup as String: group]
        _ = SecItemDelete(query as CFDictionary)
        var planted = query
        planted[kSecAttrAccessible as String] = kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly
        planted[kSecValueData as String] = Data(secret)
        #expect(SecItemAdd(planted as CFDictionary, nil) == errSecSuccess)
        StandInKeychain.setLockState(.locked)
        let second = try await revealNotification(keys, record, id: "k-2")
        let refused = await contentExtension(keys).didReceive(second)
        #expect(refused.outcome != .revealed && refused.body == SecretMessageExtension.placeholderText)
    }

    @Test("the example content extension: protectedDataAvailable is false on a locked phone, true unlocked; the app code registers a record with reveal")
    @MainActor func exampleLockProbe() throws {
        let record = try setUpDeviceKeys()   // Tests/AppleStandIns/ExampleApp/AppKeys.swift
        #expect(record.reveal != nil)
        let controller = NotificationViewController()
        let content = UNMutableNotificationContent()
        let configuration = controller.configuration(for: UNNotification(standInRequest: UNNotificationRequest(identifier: "x", content: content,
                                                                                                                   trigger: nil), date: Date()))
        #expect(configuration.revealKeys is KeychainRevealKeyring)
        #expect(configuration.protectedDataAvailable())
        StandInKeychain.setLockState(.locked)
        #expect(!configuration.protectedDataAvailable())
        StandInKeychain.setLockState(.unlocked)
    }
}

/// A wall clock tests move by hand.
private final class TestClock: Sendable {
    let seconds = Mutex<TimeInterval>(1_800_000_000)
    var clock: WallClock { WallClock { [self] in Date(timeIntervalSince1970: self.seconds.withLock { $0 }) } }
    func advance(_ by: TimeInterval) { seconds.withLock { $0 += by } }
}
#endif
