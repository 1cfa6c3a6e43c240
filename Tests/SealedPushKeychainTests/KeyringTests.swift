import Foundation
import Testing
import SealedPushCrypto
import SealedPushWire
#if canImport(Glibc)
import Glibc
#endif
@testable import SealedPushKeychain

@Suite("Device key lifecycle")
struct DeviceKeyringTests {
    @Test("generate makes one active key and refuses a second")
    func generate() throws {
        let dir = try TempDirectory()
        let clock = TestClock()
        let keyring = try DeviceKeyring(root: dir.store, clock: clock.wall)
        #expect(caught { _ = try keyring.export() } == .noActiveKey)
        let record = try keyring.generate()
        #expect(record.createdAt == clock.current)
        #expect(caught { try keyring.generate() }?.name == "activeKeyExists")
        let list = try keyring.list()
        #expect(list.map(\.state) == [.active])
        #expect(list[0].keyID == record.keyID)
        #expect(try keyring.export() == record)
        #expect(try keyring.activeKeyPair().publicKey == record.publicKey)
    }

    @Test("a message sealed to the old key opens during the grace and is unknownKey after prune")
    func rotationGraceAndPrune() throws {
        let dir = try TempDirectory()
        let clock = TestClock()
        let keyring = try DeviceKeyring(root: dir.store, clock: clock.wall)
        let old = try keyring.generate()
        let inFlight = try sealMessage(to: old, id: "m1", now: clock.unix)
        clock.advance(60)
        let new = try keyring.rotate(grace: .seconds(3600))
        #expect(new.keyID != old.keyID)
        let states = Dictionary(uniqueKeysWithValues: try keyring.list().map { ($0.keyID, $0) })
        #expect(states[old.keyID]?.state == .retired)
        #expect(states[old.keyID]?.retireAfter == clock.current.addingTimeInterval(3600))
        #expect(states[new.keyID]?.state == .active)
        #expect(try keyring.export() == new)
        #expect(try keyring.export(keyID: old.keyID) == old)

        // During the grace: both old and new keys open.
        let opener = MessageOpener(keys: DeviceKeyring(store: try KeychainStore(url: dir.store, clock: clock.wall)))
        #expect(try opener.open(encryptedData: inFlight, now: clock.unix).body.id == "m1")
        #expect(try opener.open(encryptedData: try sealMessage(to: new, id: "m2", now: clock.unix), now: clock.unix).keyID == new.keyID)

        // Past the deadline the old key is refused even before pruning.
        clock.advance(3601)
        #expect(throws: OpenFailure(.unknownKey, "no usable device key has the envelope's key id")) {
            try opener.open(encryptedData: inFlight, now: clock.unix)
        }
        #expect(caught { _ = try keyring.export(keyID: old.keyID) }?.name == "keyNotUsable")
        let pruned = try keyring.prune()
        #expect(pruned.map(\.keyID) == [old.keyID])
        #expect(pruned.first?.state == .destroyed)
        let afterPrune = Dictionary(uniqueKeysWithValues: try keyring.list().map { ($0.keyID, $0) })
        #expect(afterPrune[old.keyID]?.state == .destroyed)
        #expect(afterPrune[old.keyID]?.destroyedAt == clock.current)
        #expect(afterPrune[old.keyID]?.destroyReason == "pruned")
        #expect(throws: OpenFailure.self) { try opener.open(encryptedData: inFlight, now: clock.unix) }
        guard case .unknown = keyring.lookUpKey(id: old.keyID) else { Issue.record("expected .unknown"); return }
        #expect(try keyring.prune().isEmpty)
    }

    @Test("destroy wipes the secret: the item file is gone and the secret bytes are nowhere in the store")
    func destroyWipes() throws {
        let dir = try TempDirectory()
        let store = try KeychainStore(url: dir.store)
        let keyring = DeviceKeyring(store: store)
        let old = try keyring.generate()
        let secretBytes = try keyring.activeKeyPair().secretKey.unsafeCopyToArray()
        try keyring.rotate()
        #expect(caught { try keyring.destroy(keyID: try keyring.export().keyID) }?.name == "activeKeyRefused")
        let info = try #require(try keyring.destroy(keyID: old.keyID))
        #expect(info.state == .destroyed && info.destroyReason == "destroyed")
        #expect(!allFiles(under: dir.store).contains { $0.lastPathComponent.contains(old.keyID.hex) && $0.lastPathComponent.hasPrefix("key@") })
        for file in allFiles(under: dir.store) {
            #expect(!contains(Array(try Data(contentsOf: file)), secretBytes), "secret bytes found in \(file.path)")
        }
        guard case .unknown = keyring.lookUpKey(id: old.keyID) else { Issue.record("expected .unknown"); return }
        // The tombstone keeps the audit trail.
        let tomb = try #require(try keyring.list().first { $0.keyID == old.keyID })
        #expect(tomb.state == .destroyed && tomb.destroyedAt != nil)
        // Destroying the active key needs force, and then generate works again.
        let active = try keyring.export().keyID
        try keyring.destroy(keyID: active, force: true)
        #expect(caught { _ = try keyring.export() } == .noActiveKey)
        try keyring.generate()
    }

    @Test("retire sets a deadline on a non-active key and refuses the active one")
    func retire() throws {
        let dir = try TempDirectory()
        let clock = TestClock()
        let keyring = try DeviceKeyring(root: dir.store, clock: clock.wall)
        let first = try keyring.generate()
        let second = try keyring.rotate(grace: .seconds(86_400))
        #expect(caught { try keyring.retire(keyID: second.keyID) }?.name == "activeKeyRefused")
        try keyring.retire(keyID: first.keyID, grace: .zero)
        clock.advance(1)
        guard case .unknown = keyring.lookUpKey(id: first.keyID) else { Issue.record("expected .unknown"); return }
    }

    @Test("100 rotations leave one active key and lookup reads the same files as with one key")
    func manyRotationsConstantLookup() throws {
        let dir = try TempDirectory()
        let clock = TestClock()
        let keyring = try DeviceKeyring(root: dir.store, clock: clock.wall)
        let first = try keyring.generate()
        func lookupCost(_ kid: KeyID) throws -> (files: Int, listings: Int) {
            // The store opened cold per notification.
            let cold = DeviceKeyring(store: try KeychainStore(url: dir.store, clock: clock.wall))
            cold.store.statistics.reset()
            guard case .found = cold.lookUpKey(id: kid) else { Issue.record("lookup of \(kid.hex) failed"); return (0, 0) }
            return (cold.store.statistics.filesRead, cold.store.statistics.directoriesListed)
        }
        let base = try lookupCost(first.keyID)
        for _ in 0..<100 { try keyring.rotate(grace: .seconds(30 * 86_400)) }
        let list = try keyring.list()
        #expect(list.count == 101)
        #expect(list.filter { $0.state == .active }.count == 1)
        #expect(list.filter { $0.state == .retired }.count == 100)
        #expect(try lookupCost(first.keyID) == base)
        #expect(try lookupCost(try keyring.export().keyID) == base)
        #expect(base.listings == 0)
        #expect(base.files <= 5)
        // An unknown key id costs no more.
        let cold = DeviceKeyring(store: try KeychainStore(url: dir.store, clock: clock.wall))
        cold.store.statistics.reset()
        guard case .unknown = cold.lookUpKey(id: KeyID(publicKey: [UInt8](repeating: 7, count: 32))) else { Issue.record("expected .unknown"); return }
        #expect(cold.store.statistics.filesRead <= base.files && cold.store.statistics.directoriesListed == 0)
    }

    @Test("a crash between the steps of a rotation leaves the previous active key (recovery rolls back)")
    func interruptedRotationRollsBack() throws {
        let dir = try TempDirectory()
        let store = try KeychainStore(url: dir.store)
        let keyring = DeviceKeyring(store: store)
        let old = try keyring.generate()
        // Simulate a rotation that wrote its pending pointer and new key, then died.
        let core = keyring.core
        let orphan = BoxKeyPair.generate()
        try store.transaction { (tx: KeychainStore) throws(KeychainError) in
            try core.writePointer(tx, KeyPointer(active: old.keyID, pending: orphan.keyID))
            try core.writeKey(tx, orphan)
            try core.writeState(tx, KeyRecordState(keyID: orphan.keyID, publicKey: orphan.publicKey.bytes, createdAt: Date()))
        }
        #expect(try keyring.list().map(\.keyID) == [old.keyID])
        guard case .unknown = keyring.lookUpKey(id: orphan.keyID) else { Issue.record("a pending key must not be usable"); return }
        try keyring.rotate()
        let ids = try keyring.list().map(\.keyID)
        #expect(ids.count == 2 && ids.contains(old.keyID) && !ids.contains(orphan.keyID))
        #expect(!allFiles(under: dir.store).contains { $0.lastPathComponent.contains(orphan.keyID.hex) })
    }
}

@Suite("Sender keys and trust")
struct SenderAndTrustTests {
    @Test("a crash in staging leaves no next key; a crash in activation leaves the old key active and the next one next")
    func interruptedStagingAndActivation() throws {
        let dir = try TempDirectory()
        let store = try KeychainStore(url: dir.store)
        let sender = SenderKeyring(store: store)
        let first = try sender.generate()
        let core = sender.core
        // Staging that wrote its pending pointer, key and state, then died before the commit.
        let orphan = SigningKeyPair.generate()
        try store.transaction { (tx: KeychainStore) throws(KeychainError) in
            try core.writePointer(tx, KeyPointer(active: first.keyID, pending: orphan.keyID))
            try core.writeKey(tx, orphan)
            try core.writeState(tx, KeyRecordState(keyID: orphan.keyID, publicKey: orphan.publicKey.bytes, createdAt: Date()))
        }
        #expect(try sender.list().map(\.keyID) == [first.keyID])
        let next = try sender.stageNext()  // recovery rolls the orphan back first
        #expect(!allFiles(under: dir.store).contains { $0.lastPathComponent.contains(orphan.keyID.hex) })
        _ = try sender.export(keyID: next.keyID)
        // Activation that wrote the old key's deadline, then died before the pointer commit.
        try store.transaction { (tx: KeychainStore) throws(KeychainError) in
            guard var old = try core.readState(tx, first.keyID) else { throw .itemNotFound("the first key's state") }
            old.retireAfter = Date().addingTimeInterval(60)
            try core.writeState(tx, old)
        }
        #expect(Dictionary(uniqueKeysWithValues: try sender.list().map { ($0.keyID, $0.state) }) == [first.keyID: .active, next.keyID: .next])
        #expect(try sender.activeSigningKey().keyID == first.keyID)
        try sender.activate(keyID: next.keyID)
        #expect(try sender.activeSigningKey().keyID == next.keyID)
    }

    @Test("staged rotation: the next key is exportable but does not sign until activate; activate wants an export")
    func stagedRotation() throws {
        let dir = try TempDirectory()
        let clock = TestClock()
        let sender = try SenderKeyring(root: dir.store, clock: clock.wall)
        #expect(caught { try sender.stageNext() } == .noActiveKey)
        let first = try sender.generate()
        let next = try sender.stageNext()
        #expect(next.state == .next && next.exportedAt == nil)
        #expect(caught { try sender.stageNext() } == .nextKeyExists(keyID: next.keyID.hex))
        #expect(caught { try sender.rotate() } == .nextKeyExists(keyID: next.keyID.hex))
        #expect(try sender.activeSigningKey().keyID == first.keyID)
        #expect(caught { try sender.activate(keyID: next.keyID) } == .nextKeyNotExported(keyID: next.keyID.hex))
        #expect(caught { try sender.activate(keyID: first.keyID) } == .notNextKey(keyID: first.keyID.hex, state: "active"))

        clock.advance(10)
        #expect(try sender.export(keyID: next.keyID).keyID == next.keyID)
        #expect(try sender.list().first { $0.keyID == next.keyID }?.exportedAt == clock.current)
        clock.advance(10)
        let active = try sender.activate(keyID: next.keyID, grace: .seconds(60))
        #expect(active.state == .active)
        #expect(try sender.activeSigningKey().keyID == next.keyID)
        let old = try #require(try sender.list().first { $0.keyID == first.keyID })
        #expect(old.state == .retired && old.retireAfter == clock.current.addingTimeInterval(60))

        // A reopened store sees the same states (the pointer carries `next`).
        let third = try sender.stageNext()
        let reopened = try SenderKeyring(root: dir.store, clock: clock.wall)
        #expect(Dictionary(uniqueKeysWithValues: try reopened.list().map { ($0.keyID, $0.state) })
                == [first.keyID: .retired, next.keyID: .active, third.keyID: .next])
        try reopened.retire(keyID: third.keyID)
        #expect(try reopened.list().first { $0.keyID == third.keyID }?.state == .retired)
        #expect(try reopened.stageNext().state == .next)
    }

    @Test("sender rotation with signed messages in flight: both verify while both are trusted")
    func senderRotation() throws {
        let deviceDir = try TempDirectory(), serverDir = try TempDirectory()
        let clock = TestClock()
        let device = try DeviceKeyring(root: deviceDir.store, clock: clock.wall)
        let deviceRecord = try device.generate()
        let sender = try SenderKeyring(root: serverDir.store, clock: clock.wall)
        let firstSender = try sender.generate()
        #expect(caught { try sender.generate() }?.name == "activeKeyExists")
        let trust = TrustStore(store: device.store)
        #expect(try trust.add(firstSender))
        #expect(try trust.add(firstSender) == false)
        try trust.setRequireSignature(true)

        let oldSigned = try sealMessage(to: deviceRecord, id: "a", now: clock.unix, signer: try sender.activeSigningKey())
        let secondSender = try sender.rotate(grace: .seconds(3600))
        #expect(try sender.activeSigningKey().keyID == secondSender.keyID)
        #expect(try sender.list().map(\.state).sorted { $0.rawValue < $1.rawValue } == [.active, .retired])
        #expect(try sender.export(keyID: firstSender.keyID) == firstSender)
        let newSigned = try sealMessage(to: deviceRecord, id: "b", now: clock.unix, signer: try sender.activeSigningKey())
        try trust.add(secondSender)
        #expect(Set(try trust.list().map(\.keyID)) == [firstSender.keyID, secondSender.keyID])

        let opener = MessageOpener(keys: device, policy: try trust.receiverPolicy())
        #expect(try opener.open(encryptedData: oldSigned, now: clock.unix).signedBy == firstSender.keyID)
        #expect(try opener.open(encryptedData: newSigned, now: clock.unix).signedBy == secondSender.keyID)

        // Removing the old sender key: its messages are now untrusted.
        try trust.remove(firstSender.keyID)
        #expect(caught { try trust.remove(firstSender.keyID) }?.name == "itemNotFound")
        let strict = MessageOpener(keys: device, policy: try trust.receiverPolicy())
        do {
            _ = try strict.open(encryptedData: oldSigned, now: clock.unix)
            Issue.record("the removed sender's message opened")
        } catch { #expect(error.reason == .untrustedSender) }
        // Unsigned messages are refused while signatures are required.
        let unsigned = try sealMessage(to: deviceRecord, id: "c", now: clock.unix)
        do {
            _ = try strict.open(encryptedData: unsigned, now: clock.unix)
            Issue.record("an unsigned message opened")
        } catch { #expect(error.reason == .signatureRequired) }
        let policy = try trust.receiverPolicy()
        #expect(policy.requireSignature && policy.clockSkewSeconds == 300 && policy.trustedSenders.count == 1)
        try trust.setRequireSignature(false)
        #expect(try trust.requireSignature() == false)

        // Sender prune after the deadline destroys the retired key.
        clock.advance(3601)
        #expect(try sender.prune().map(\.keyID) == [firstSender.keyID])
    }
}

@Suite("Replay cache")
struct ReplayCacheTests {
    let kid = KeyID(publicKey: [UInt8](repeating: 3, count: 32))

    @Test("a second delivery is refused until the entry expires; separate openings share it")
    func replay() throws {
        let dir = try TempDirectory()
        let store = try KeychainStore(url: dir.store)
        let cache = ReplayCache(store: store)
        #expect(cache.recordIfNew(messageID: "m1", keyID: kid, expiresAt: 100, now: 10))
        #expect(!cache.recordIfNew(messageID: "m1", keyID: kid, expiresAt: 100, now: 20))
        let other = ReplayCache(store: try KeychainStore(url: dir.store))
        #expect(!other.recordIfNew(messageID: "m1", keyID: kid, expiresAt: 100, now: 30))
        #expect(other.recordIfNew(messageID: "m2", keyID: kid, expiresAt: 100, now: 30))
        // After expiry the id is accepted again.
        #expect(cache.recordIfNew(messageID: "m1", keyID: kid, expiresAt: 300, now: 101))
        // Message ids are not stored in clear.
        for file in allFiles(under: dir.store) { #expect(!contains(Array(try Data(contentsOf: file)), Array("m2".utf8)) || file.pathExtension == "item") }
    }

    @Test("bounded: over capacity the oldest inserted entries are evicted, after the expired ones")
    func bounded() throws {
        let dir = try TempDirectory()
        let cache = ReplayCache(store: try KeychainStore(url: dir.store), capacity: 10)
        for i in 0..<10 { #expect(cache.recordIfNew(messageID: "m\(i)", keyID: kid, expiresAt: Int64(1000 - i), now: 1)) }
        #expect(cache.recordIfNew(messageID: "late", keyID: kid, expiresAt: 5000, now: 1))
        #expect(try cache.count(now: 1) == 10)
        #expect(cache.recordIfNew(messageID: "m0", keyID: kid, expiresAt: 1000, now: 1))  // evicted: inserted first
        #expect(!cache.recordIfNew(messageID: "m9", keyID: kid, expiresAt: 991, now: 1))  // expires soonest, kept
        #expect(!cache.recordIfNew(messageID: "late", keyID: kid, expiresAt: 5000, now: 1))
        // Expired entries make room first.
        #expect(cache.recordIfNew(messageID: "x", keyID: kid, expiresAt: 9000, now: 2000))
        #expect(try cache.count(now: 2000) == 2)
    }

    @Test("a flood of far-future entries cannot push a real id out at once (it was evicted by the next insert)")
    func floodDoesNotFlushARealID() throws {
        let dir = try TempDirectory()
        let cache = ReplayCache(store: try KeychainStore(url: dir.store), capacity: 10)
        for i in 0..<10 { #expect(cache.recordIfNew(messageID: "flood-\(i)", keyID: kid, expiresAt: .max, now: 1)) }
        #expect(cache.recordIfNew(messageID: "real", keyID: kid, expiresAt: 1000, now: 1))
        for i in 10..<19 {
            #expect(cache.recordIfNew(messageID: "flood-\(i)", keyID: kid, expiresAt: .max, now: 1))
            #expect(!cache.recordIfNew(messageID: "real", keyID: kid, expiresAt: 1000, now: 1), "the real id was flushed by \(i - 9) flood entries")
        }
    }

    @Test("an id opens again under the request identifier it was recorded under, and only that one")
    func requestIdentifierRule() throws {
        let dir = try TempDirectory()
        let cache = ReplayCache(store: try KeychainStore(url: dir.store))
        #expect(cache.recordIfNew(messageID: "m", requestIdentifier: "req-A", keyID: kid, expiresAt: 100, now: 1))
        #expect(cache.recordIfNew(messageID: "m", requestIdentifier: "req-A", keyID: kid, expiresAt: 100, now: 2))
        #expect(!cache.recordIfNew(messageID: "m", requestIdentifier: "req-B", keyID: kid, expiresAt: 100, now: 3))
        #expect(!cache.recordIfNew(messageID: "m", requestIdentifier: nil, keyID: kid, expiresAt: 100, now: 4))
        #expect(try cache.count(now: 5) == 1, "opening again adds no entry")
        // Recorded without an identifier: every later arrival is a replay.
        #expect(cache.recordIfNew(messageID: "n", requestIdentifier: nil, keyID: kid, expiresAt: 100, now: 1))
        #expect(!cache.recordIfNew(messageID: "n", requestIdentifier: nil, keyID: kid, expiresAt: 100, now: 2))
        // Request identifiers are not stored in clear either.
        for file in allFiles(under: dir.store) { #expect(!contains(Array(try Data(contentsOf: file)), Array("req-A".utf8))) }
    }

    @Test("a cache left by the previous version is imported, its ids still refused, and removed")
    func legacyCacheImported() throws {
        let dir = try TempDirectory()
        let store = try KeychainStore(url: dir.store)
        let replayDir = dir.store.appendingPathComponent("replay")
        try FileManager.default.createDirectory(at: replayDir, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        // Version 1 records: BLAKE2b-128 of the id, then the 8-byte big-endian expiry.
        func legacy(_ id: String, _ exp: UInt64) -> [UInt8] {
            ReplayCache.hash(id) + (0..<8).map { UInt8(truncatingIfNeeded: exp >> (56 - 8 * UInt64($0))) }
        }
        let old = replayDir.appendingPathComponent("replay.db")
        #expect(FileManager.default.createFile(atPath: old.path, contents: Data(legacy("seen", 100) + legacy("gone", 5)),
                                               attributes: [.posixPermissions: 0o600]))
        let cache = ReplayCache(store: store)
        #expect(!cache.recordIfNew(messageID: "seen", requestIdentifier: "any", keyID: kid, expiresAt: 100, now: 10))
        #expect(cache.recordIfNew(messageID: "gone", keyID: kid, expiresAt: 100, now: 10))
        #expect(!FileManager.default.fileExists(atPath: old.path))
        #expect(try cache.count(now: 10) == 2)
    }

    @Test("a reader of the cache waits a bounded time for a stuck lock holder, then refuses (fail closed)")
    func boundedWait() throws {
        let dir = try TempDirectory()
        let store = try KeychainStore(url: dir.store)
        let cache = ReplayCache(store: store, lockTimeout: .milliseconds(50))
        #expect(cache.recordIfNew(messageID: "a", keyID: kid, expiresAt: 100, now: 1))
        let lockPath = dir.store.appendingPathComponent("replay/replay.lock").path
        let fd = open(lockPath, O_RDWR)
        #expect(fd >= 0)
        defer { close(fd) }
        #expect(flock(fd, LOCK_EX) == 0)
        let start = ContinuousClock.now
        #expect(!cache.recordIfNew(messageID: "b", keyID: kid, expiresAt: 100, now: 1))
        #expect(ContinuousClock.now - start < .seconds(2))
        flock(fd, LOCK_UN)
        #expect(cache.recordIfNew(messageID: "b", keyID: kid, expiresAt: 100, now: 1))
    }

    @Test("bytes appended after the table are ignored; a damaged header starts a new table; a short file too")
    func damagedTable() throws {
        let dir = try TempDirectory()
        let cache = ReplayCache(store: try KeychainStore(url: dir.store))
        #expect(cache.recordIfNew(messageID: "a", keyID: kid, expiresAt: 100, now: 1))
        let db = dir.store.appendingPathComponent("replay/replay-v3.db")
        let size = try Data(contentsOf: db).count
        #expect(size == 64 + 1250 * 16 * 48)
        let handle = try FileHandle(forWritingTo: db)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data([1, 2, 3, 4, 5]))
        try handle.close()
        #expect(!cache.recordIfNew(messageID: "a", keyID: kid, expiresAt: 100, now: 2))
        #expect(cache.recordIfNew(messageID: "b", keyID: kid, expiresAt: 100, now: 2))
        // A header that is not the format's: a new, empty table (the damage already lost the history).
        var bytes = try Data(contentsOf: db)
        bytes[0] = UInt8(ascii: "X")
        try bytes.write(to: db)
        #expect(cache.recordIfNew(messageID: "a", keyID: kid, expiresAt: 100, now: 3))
        #expect(!cache.recordIfNew(messageID: "a", keyID: kid, expiresAt: 100, now: 3))
        #expect(try Data(contentsOf: db).prefix(8) == Data("SPREPLY3".utf8))
        // Cut short: likewise.
        try Data(try Data(contentsOf: db).prefix(1000)).write(to: db)
        #expect(cache.recordIfNew(messageID: "a", keyID: kid, expiresAt: 100, now: 4))
        #expect(try Data(contentsOf: db).count == size)
    }

    @Test("a push rewrites nothing: records change in place, the file keeps its inode and size past its capacity")
    func boundedWorkInPlace() throws {
        let dir = try TempDirectory()
        let cache = ReplayCache(store: try KeychainStore(url: dir.store), capacity: 200)
        #expect(cache.recordIfNew(messageID: "first", keyID: kid, expiresAt: 10_000, now: 1))
        let db = dir.store.appendingPathComponent("replay/replay-v3.db").path
        var before = stat()
        #expect(stat(db, &before) == 0)
        #expect(Int(before.st_size) == 64 + 25 * 16 * 48)
        for i in 0..<1000 { #expect(cache.recordIfNew(messageID: "m\(i)", keyID: kid, expiresAt: 10_000, now: 1)) }
        var after = stat()
        #expect(stat(db, &after) == 0)
        #expect(after.st_ino == before.st_ino && after.st_size == before.st_size)
        #expect(try cache.count(now: 1) == 400)
        // The most recent ids are still refused: each bucket evicts its oldest inserted first.
        for i in 900..<1000 { #expect(!cache.recordIfNew(messageID: "m\(i)", keyID: kid, expiresAt: 10_000, now: 1)) }
    }

    @Test("past its capacity, nearly all of the most recent `capacity` ids are still recorded")
    func capacityHolds() throws {
        let dir = try TempDirectory()
        let capacity = 1000
        let cache = ReplayCache(store: try KeychainStore(url: dir.store), capacity: capacity)
        for i in 0..<capacity { #expect(cache.recordIfNew(messageID: "old-\(i)", keyID: kid, expiresAt: 10_000, now: 1)) }
        for i in 0..<capacity { #expect(cache.recordIfNew(messageID: "new-\(i)", keyID: kid, expiresAt: 10_000, now: 1)) }
        let kept = try (0..<capacity).filter { try cache.isRecorded(messageID: "new-\($0)", now: 1) }.count
        // Buckets of 16 for twice the capacity: a bucket that got more than 16 of the newest ids evicted
        // some early (about 0.1 % of ids expected); the older ids go first everywhere else.
        #expect(kept >= capacity * 99 / 100, "only \(kept) of the last \(capacity) ids still recorded")
        #expect(try cache.count(now: 1) <= 2 * capacity)
    }

    @Test("a version 2 cache is imported with its request identifiers, and removed")
    func version2Imported() throws {
        let dir = try TempDirectory()
        let store = try KeychainStore(url: dir.store)
        let replayDir = dir.store.appendingPathComponent("replay")
        try FileManager.default.createDirectory(at: replayDir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        func v2(_ id: String, _ request: String?, _ exp: UInt64) -> [UInt8] {
            ReplayCache.hash(id) + ReplayCache.requestHash(request) + (0..<8).map { UInt8(truncatingIfNeeded: exp >> (56 - 8 * UInt64($0))) }
        }
        let old = replayDir.appendingPathComponent("replay-v2.db")
        #expect(FileManager.default.createFile(atPath: old.path, contents: Data(v2("kept", "req-1", 100) + v2("gone", nil, 5) + [9, 9]),
                                               attributes: [.posixPermissions: 0o600]))
        let cache = ReplayCache(store: store)
        #expect(cache.recordIfNew(messageID: "kept", requestIdentifier: "req-1", keyID: kid, expiresAt: 100, now: 10))
        #expect(!cache.recordIfNew(messageID: "kept", requestIdentifier: "req-2", keyID: kid, expiresAt: 100, now: 10))
        #expect(cache.recordIfNew(messageID: "gone", keyID: kid, expiresAt: 100, now: 10))
        #expect(!FileManager.default.fileExists(atPath: old.path))
        #expect(try cache.count(now: 10) == 2)
    }
}
