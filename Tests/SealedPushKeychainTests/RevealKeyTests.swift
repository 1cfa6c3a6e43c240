import Foundation
import Testing
import SealedPushCrypto
import SealedPushWire
@testable import SealedPushKeychain

@Suite("Reveal key lifecycle", .timeLimit(.minutes(10)))
struct RevealKeyTests {
    @Test("generate makes a device key and a reveal key; the record carries reveal; list tells them apart")
    func generateBoth() throws {
        let dir = try TempDirectory()
        let clock = TestClock()
        let keys = DeviceKeys(store: try KeychainStore(url: dir.store, clock: clock.wall))
        let record = try keys.generate()
        let reveal = try #require(record.reveal)
        #expect(reveal.keyID != record.keyID)
        #expect(try keys.export() == record)
        #expect(try DeviceKeyRecord(jsonBytes: record.jsonBytes) == record)
        let listed = try keys.list()
        #expect(listed.map(\.kind) == [.device, .reveal])
        #expect(listed.map(\.info.state) == [.active, .active])
        #expect(listed.map(\.info.keyID) == [record.keyID, reveal.keyID])
        // The reveal key's item is whenUnlockedThisDeviceOnly; the device key's afterFirstUnlockThisDeviceOnly.
        let items = try keys.device.store.copyMatching(KeychainQuery(itemClass: .key, accessGroup: keys.device.store.accessGroups[0],
                                                                     limit: .all, returnData: false))
        let byService = Dictionary(uniqueKeysWithValues: items.map { ($0.service, $0.accessibility) })
        #expect(byService["sealedpush.reveal-key"] == .whenUnlockedThisDeviceOnly)
        #expect(byService["sealedpush.device-key"] == .afterFirstUnlockThisDeviceOnly)
        #expect(caught { try keys.generate() }?.name == "activeKeyExists")
    }

    @Test("the reveal key cannot be read while locked; the device key can")
    func lockedLookups() throws {
        let dir = try TempDirectory()
        let store = try KeychainStore(url: dir.store, clock: TestClock().wall)
        let keys = DeviceKeys(store: store)
        let record = try keys.generate()
        try store.lock()
        guard case .locked = keys.reveal.lookUpKey(id: record.reveal!.keyID) else { Issue.record("reveal key readable while locked"); return }
        guard case .found = keys.device.lookUpKey(id: record.keyID) else { Issue.record("device key unreadable while locked"); return }
        #expect(try keys.export() == record, "export works while locked")
        _ = try store.unlock()
        guard case let .found(pair) = keys.reveal.lookUpKey(id: record.reveal!.keyID) else { Issue.record("reveal key not found"); return }
        #expect(pair.publicKey == record.reveal!.publicKey)
        // A device key id is not a reveal key and the other way round.
        guard case .unknown = keys.reveal.lookUpKey(id: record.keyID) else { Issue.record("device key found as a reveal key"); return }
    }

    @Test("generate refuses, changing nothing, while the phone is locked; --no-reveal works locked and addReveal adds one later")
    func lockedGenerateAndNoReveal() throws {
        let dir = try TempDirectory()
        let store = try KeychainStore(url: dir.store, clock: TestClock().wall)
        let keys = DeviceKeys(store: store)
        try store.lock()
        #expect(caught { try keys.generate() }?.name == "interactionNotAllowed")
        #expect(try keys.list().isEmpty, "nothing was made")
        let plain = try keys.generate(reveal: false)
        #expect(plain.reveal == nil)
        #expect(try keys.export().reveal == nil)
        #expect(caught { try keys.addReveal() }?.name == "interactionNotAllowed")
        _ = try store.unlock()
        let added = try keys.addReveal()
        #expect(added.keyID == plain.keyID)
        #expect(added.reveal != nil)
        #expect(try keys.export() == added)
    }

    @Test("rotating the reveal key with a message in flight: the old key opens during its grace, then is unknown and pruned")
    func rotationWithMessageInFlight() throws {
        let dir = try TempDirectory()
        let clock = TestClock()
        let store = try KeychainStore(url: dir.store, clock: clock.wall)
        let keys = DeviceKeys(store: store)
        let first = try keys.generate()
        let oldReveal = try #require(first.reveal)
        // A reveal envelope sealed to the reveal key, waiting in Notification Center.
        let inFlight = try sealMessage(to: DeviceKeyRecord(publicKey: oldReveal.publicKey, createdAt: nil), id: "r1", now: clock.unix)
        clock.advance(60)
        let second = try keys.rotateReveal(grace: .seconds(3600))
        #expect(second.keyID == first.keyID, "the device key is untouched")
        #expect(second.reveal != nil && second.reveal != oldReveal)
        #expect(try keys.export() == second)
        let states = Dictionary(uniqueKeysWithValues: try keys.reveal.list().map { ($0.keyID, $0.state) })
        #expect(states[oldReveal.keyID] == .retired)
        #expect(states[second.reveal!.keyID] == .active)

        let opener = MessageOpener(keys: RevealKeyring(store: store))
        #expect(try opener.open(encryptedData: inFlight, now: clock.unix).body.id == "r1")
        clock.advance(3601)
        #expect(throws: OpenFailure(.unknownKey, "no usable device key has the envelope's key id")) {
            try opener.open(encryptedData: inFlight, now: clock.unix)
        }
        let pruned = try keys.prune()
        #expect(pruned.map(\.kind) == [.reveal])
        #expect(pruned.map(\.info.keyID) == [oldReveal.keyID])
        #expect(try keys.list().filter { $0.info.state == .destroyed }.map(\.info.keyID) == [oldReveal.keyID])
    }

    @Test("retire and destroy cover reveal keys; a device whose reveal key is destroyed exports no reveal member")
    func retireAndDestroy() throws {
        let dir = try TempDirectory()
        let clock = TestClock()
        let keys = DeviceKeys(store: try KeychainStore(url: dir.store, clock: clock.wall))
        let first = try keys.generate()
        let old = try #require(first.reveal)
        let second = try keys.rotateReveal(grace: .seconds(7 * 86_400))
        #expect(caught { try keys.reveal.retire(keyID: second.reveal!.keyID) }?.name == "activeKeyRefused")
        try keys.reveal.retire(keyID: old.keyID)  // grace 0: unusable from the next second
        clock.advance(1)
        guard case .unknown = keys.reveal.lookUpKey(id: old.keyID) else { Issue.record("retired reveal key still usable"); return }
        #expect(caught { try keys.reveal.destroy(keyID: second.reveal!.keyID) }?.name == "activeKeyRefused")
        try keys.reveal.destroy(keyID: second.reveal!.keyID, force: true)
        let record = try keys.export()
        #expect(record.keyID == first.keyID)
        #expect(record.reveal == nil, "no active reveal key: the record cannot receive reveal messages")
        #expect(try keys.device.list().map(\.state) == [.active], "the device key is untouched")
    }
}
