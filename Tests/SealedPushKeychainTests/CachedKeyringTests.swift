import Foundation
import Testing
import SealedPushCrypto
import SealedPushWire
import SystemPackage
@testable import SealedPushKeychain

/// The extension's warm key cache: answers from memory only while the store is unchanged.
@Suite("Cached device keyring")
struct CachedKeyringTests {
    /// A store opened twice on one root: `app` writes (as the app process would), `cache` reads (the extension).
    struct Rig {
        let dir: TempDirectory
        let clock = TestClock()
        let app: DeviceKeyring
        let cache: CachedDeviceKeyring
        let readerStore: KeychainStore

        init() throws {
            dir = try TempDirectory()
            app = try DeviceKeyring(root: dir.store, clock: clock.wall)
            readerStore = try KeychainStore(url: dir.store, clock: clock.wall)
            cache = CachedDeviceKeyring(keyring: DeviceKeyring(store: readerStore))
        }
    }

    static func found(_ lookup: KeyLookup) -> BoxKeyPair? { if case let .found(pair) = lookup { return pair } else { return nil } }
    static func isUnknown(_ lookup: KeyLookup) -> Bool { if case .unknown = lookup { return true } else { return false } }
    static func isLocked(_ lookup: KeyLookup) -> Bool { if case .locked = lookup { return true } else { return false } }

    @Test("a repeated lookup reads no file; the pair is the stored one and opens messages")
    func hitsReadNoFiles() throws {
        let rig = try Rig()
        let record = try rig.app.generate()
        let first = try #require(Self.found(rig.cache.lookUpKey(id: record.keyID)))
        #expect(first.publicKey == record.publicKey)
        rig.readerStore.statistics.reset()
        for _ in 0..<50 { #expect(Self.found(rig.cache.lookUpKey(id: record.keyID))?.publicKey == record.publicKey) }
        #expect(rig.readerStore.statistics.filesRead == 0)
        #expect(rig.cache.statistics == (hits: 50, misses: 1))
        let opener = MessageOpener(keys: rig.cache)
        let opened = try opener.open(encryptedData: try sealMessage(to: record, id: "m1", now: rig.clock.unix), now: rig.clock.unix)
        #expect(opened.body.id == "m1")
    }

    @Test("rotation, retirement deadline, destruction and lock-state changes by another opened store are seen at once")
    func changesAreSeen() throws {
        let rig = try Rig()
        let old = try rig.app.generate()
        #expect(Self.found(rig.cache.lookUpKey(id: old.keyID)) != nil)

        let new = try rig.app.rotate(grace: .seconds(3600))
        #expect(Self.found(rig.cache.lookUpKey(id: old.keyID)) != nil)
        #expect(Self.found(rig.cache.lookUpKey(id: new.keyID)) != nil)
        let before = rig.cache.statistics
        #expect(Self.found(rig.cache.lookUpKey(id: old.keyID)) != nil)
        #expect(rig.cache.statistics.hits == before.hits + 1)

        // The retired key's deadline is checked against the clock on every hit.
        rig.clock.advance(3601)
        #expect(Self.isUnknown(rig.cache.lookUpKey(id: old.keyID)))
        #expect(Self.found(rig.cache.lookUpKey(id: new.keyID)) != nil)

        // Destroyed through the app's store: gone from the cache too.
        try rig.app.destroy(keyID: new.keyID, force: true)
        #expect(Self.isUnknown(rig.cache.lookUpKey(id: new.keyID)))

        // A lock-state change (reboot: before first unlock) is a transaction, so the cache sees it.
        let third = try rig.app.generate()
        #expect(Self.found(rig.cache.lookUpKey(id: third.keyID)) != nil)
        try rig.app.store.reboot()
        #expect(Self.isLocked(rig.cache.lookUpKey(id: third.keyID)))
        try rig.app.store.unlock()
        #expect(Self.found(rig.cache.lookUpKey(id: third.keyID)) != nil)
    }

    @Test("unknown key ids are never cached")
    func unknownIsNotCached() throws {
        let rig = try Rig()
        _ = try rig.app.generate()
        let stranger = BoxKeyPair.generate().keyID
        for _ in 0..<3 { #expect(Self.isUnknown(rig.cache.lookUpKey(id: stranger))) }
        #expect(rig.cache.statistics == (hits: 0, misses: 3))
    }

    @Test("an odd counter (a write interrupted by a crash) turns caching off until the next transaction")
    func oddCounterDisablesCaching() throws {
        let rig = try Rig()
        let record = try rig.app.generate()
        let counter = rig.dir.store.appendingPathComponent("generation")
        var bytes = [UInt8](try Data(contentsOf: counter))
        #expect(bytes.count == 8)
        #expect(bytes[0] & 1 == 0, "a finished transaction leaves the counter even")
        bytes[0] |= 1
        try Data(bytes).write(to: counter)
        for _ in 0..<3 { #expect(Self.found(rig.cache.lookUpKey(id: record.keyID)) != nil) }
        #expect(rig.cache.statistics == (hits: 0, misses: 3))
        try rig.app.store.unlock()  // any transaction: the counter is even again
        for _ in 0..<3 { #expect(Self.found(rig.cache.lookUpKey(id: record.keyID)) != nil) }
        #expect(rig.cache.statistics == (hits: 2, misses: 4))
    }

    @Test("a store removed and made again at the same path is not answered from the old cache")
    func recreatedStore() throws {
        let rig = try Rig()
        let record = try rig.app.generate()
        #expect(Self.found(rig.cache.lookUpKey(id: record.keyID)) != nil)
        #expect(Self.found(rig.cache.lookUpKey(id: record.keyID)) != nil)
        try FileManager.default.removeItem(at: rig.dir.store)
        let other = try DeviceKeyring(root: rig.dir.store, clock: rig.clock.wall)
        _ = try other.generate()
        #expect(Self.isUnknown(rig.cache.lookUpKey(id: record.keyID)))
    }

    @Test("every transaction moves the counter: begin makes it odd, end makes it even")
    func counterMoves() throws {
        let rig = try Rig()
        _ = try rig.app.generate()
        let root = FilePath(rig.dir.store.path)
        let readCounter = { () -> GenerationStamp? in
            var reader = GenerationReader(root: root)
            return reader.current()
        }
        let start = try #require(readCounter())
        #expect(!start.isWriting)
        let seenInside = try rig.app.store.transaction { (_: KeychainStore) throws(KeychainError) -> GenerationStamp? in readCounter() }
        #expect(seenInside?.isWriting == true)
        let after = try #require(readCounter())
        #expect(after.value > start.value && !after.isWriting)
    }
}
