import Foundation
import GRDB
import Logging
import SealedPushCrypto
@testable import SealedPushGateway
import SealedPushWire
import Testing

/// Mailbox fixtures: a message whose deliveries keep an envelope (random bytes the tests look for) and a handle.
enum MailboxFixtures {
    /// A mailbox message of `devices` created at `t`, expiring an hour later; each delivery's handle token and envelope.
    static func message(_ id: String, devices: [DeviceRecord], at t: Int64 = 1000, app: String = "chat", envelopeBytes: Int = 3000)
        -> (message: NewMessage, handles: [MailboxHandle], envelopes: [[UInt8]]) {
        var message = StoreFixtures.message(id, devices: devices, at: t, app: app)
        var handles: [MailboxHandle] = []
        var envelopes: [[UInt8]] = []
        for i in message.deliveries.indices {
            let deliveryID = message.deliveries[i].deliveryID.replacingOccurrences(of: ".", with: "_")
            message.deliveries[i].deliveryID = deliveryID
            let handle = MailboxHandle.make(deliveryID: deliveryID)!
            let envelope = [1] + CryptoLibrary.randomBytes(count: envelopeBytes)
            message.deliveries[i].mailbox = NewMailboxEntry(handleSHA256: SHA256Hasher.hash(Array(handle.token.utf8)), envelope: envelope,
                                                            expiresAt: message.expiresAt)
            handles.append(handle)
            envelopes.append(envelope)
        }
        return (message, handles, envelopes)
    }

    static func hash(_ handle: MailboxHandle) -> [UInt8] { SHA256Hasher.hash(Array(handle.token.utf8)) }
    static func wrongToken(_ handle: MailboxHandle) -> [UInt8] { SHA256Hasher.hash(Array(MailboxHandle.make(deliveryID: handle.deliveryID)!.token.utf8)) }
}

extension GatewayPostgresSuites {
    /// Mailbox v1's store side, the same on SQLite and on PostgreSQL.
    @Suite("Gateway mailbox store (SQLite and PostgreSQL)", .serialized, .timeLimit(.minutes(10)))
    struct GatewayMailboxStoreTests {
        typealias F = StoreFixtures
        typealias M = MailboxFixtures
        static let graces = ["chat": Int64(60_000)]

        func mailbox(_ store: any GatewayStore) throws -> any GatewayMailboxStore {
            try #require(store as? any GatewayMailboxStore)
        }

        @Test(arguments: StoreBackend.allCases)
        func aFetchHandsTheEnvelopeWithinItsGraceThenCollectsIt(_ backend: StoreBackend) async throws {
            try await withStore(backend) { store in
                let box = try mailbox(store)
                _ = try await store.putDevice(F.device("a", user: "u", token: 1), maxDevicesPerUser: 10)
                let m = M.message("m1", devices: [F.device("a", user: "u", token: 1)])
                try await store.insertMessage(m.message, idempotency: nil)
                let id = m.handles[0].deliveryID
                // A wrong token and an unknown id get the same answer.
                #expect(try await box.mailboxFetch(deliveryID: id, tokenSHA256: M.wrongToken(m.handles[0]), now: 2000, graces: Self.graces) == .unknown)
                #expect(try await box.mailboxFetch(deliveryID: "d_nothing", tokenSHA256: M.hash(m.handles[0]), now: 2000, graces: Self.graces) == .unknown)
                let first = try await box.mailboxFetch(deliveryID: id, tokenSHA256: M.hash(m.handles[0]), now: 2000, graces: Self.graces)
                #expect(first == .envelope(m.envelopes[0], messageID: "m1", expiresAt: 1000 + 3_600_000, app: "chat", first: true))
                let delivery = try #require(try await store.message(app: "chat", messageID: "m1")?.deliveries.first)
                #expect(delivery.state == .fetched)
                // Within the grace: again, not first.
                let second = try await box.mailboxFetch(deliveryID: id, tokenSHA256: M.hash(m.handles[0]), now: 30_000, graces: Self.graces)
                #expect(second == .envelope(m.envelopes[0], messageID: "m1", expiresAt: 1000 + 3_600_000, app: "chat", first: false))
                // The grace over: collected, and it stays so.
                #expect(try await box.mailboxFetch(deliveryID: id, tokenSHA256: M.hash(m.handles[0]), now: 62_000, graces: Self.graces) == .gone(.collected))
                #expect(try await box.mailboxFetch(deliveryID: id, tokenSHA256: M.hash(m.handles[0]), now: 63_000, graces: Self.graces) == .gone(.collected))
                // The wrong token still learns nothing.
                #expect(try await box.mailboxFetch(deliveryID: id, tokenSHA256: M.wrongToken(m.handles[0]), now: 63_000, graces: Self.graces) == .unknown)
                // The delivered/fetched event was written.
                let events = try #require(try await store.events(app: "chat", after: nil, since: 0, limit: 100))
                #expect(events.contains { $0.type == .deliveryFetched })
            }
        }

        @Test(arguments: StoreBackend.allCases)
        func theSixthFetchIsCollectedAndAReceiptCollectsAtOnce(_ backend: StoreBackend) async throws {
            try await withStore(backend) { store in
                let box = try mailbox(store)
                let m = M.message("m2", devices: [F.device("a", user: "u", token: 1), F.device("b", user: "u", token: 2)])
                try await store.insertMessage(m.message, idempotency: nil)
                let (a, b) = (m.handles[0], m.handles[1])
                for n in 0..<5 {
                    guard case .envelope = try await box.mailboxFetch(deliveryID: a.deliveryID, tokenSHA256: M.hash(a), now: 2000 + Int64(n), graces: Self.graces) else {
                        Issue.record("fetch \(n + 1) was not handed the envelope")
                        return
                    }
                }
                #expect(try await box.mailboxFetch(deliveryID: a.deliveryID, tokenSHA256: M.hash(a), now: 2010, graces: Self.graces) == .gone(.collected))
                // b's receipt: delivered, and its envelope is gone at once.
                _ = try await box.mailboxFetch(deliveryID: b.deliveryID, tokenSHA256: M.hash(b), now: 2000, graces: Self.graces)
                let receipt = try await store.recordReceipt(messageID: "m2", tokenSHA256: SHA256Hasher.hash(Array("r-\(b.deliveryID)".utf8)),
                                                            revealed: false, now: 2100)
                #expect(receipt == .matched(app: "chat", changed: true))
                #expect(try await box.mailboxFetch(deliveryID: b.deliveryID, tokenSHA256: M.hash(b), now: 2200, graces: Self.graces) == .gone(.collected))
                let states = try #require(try await store.message(app: "chat", messageID: "m2")).deliveries.map(\.state)
                #expect(Set(states) == [.fetched, .delivered])
            }
        }

        @Test(arguments: StoreBackend.allCases)
        func retractionAndExpiryAnswerGoneWithTheirReason(_ backend: StoreBackend) async throws {
            try await withStore(backend) { store in
                let box = try mailbox(store)
                let m = M.message("m3", devices: [F.device("a", user: "u", token: 1)])
                let e = M.message("m4", devices: [F.device("a", user: "u", token: 1)])
                try await store.insertMessage(m.message, idempotency: nil)
                try await store.insertMessage(e.message, idempotency: nil)
                // Another app cannot retract it.
                #expect(try await box.mailboxRetract(app: "other", messageID: "m3", now: 1500).isEmpty)
                let retracted = try await box.mailboxRetract(app: "chat", messageID: "m3", now: 1500)
                #expect(retracted == [MailboxRetraction(deliveryID: m.handles[0].deliveryID, pushAccepted: false)])
                #expect(try await box.mailboxRetract(app: "chat", messageID: "m3", now: 1600).isEmpty)
                #expect(try await box.mailboxFetch(deliveryID: m.handles[0].deliveryID, tokenSHA256: M.hash(m.handles[0]), now: 2000,
                                                   graces: Self.graces) == .gone(.retracted))
                let expiry = e.message.expiresAt
                #expect(try await box.mailboxFetch(deliveryID: e.handles[0].deliveryID, tokenSHA256: M.hash(e.handles[0]), now: expiry,
                                                   graces: Self.graces) == .gone(.expired))
                // A retraction after expiry changes nothing: it stays expired.
                #expect(try await box.mailboxRetract(app: "chat", messageID: "m4", now: expiry + 1).isEmpty)
            }
        }

        @Test(arguments: StoreBackend.allCases)
        func theListAnswersOnceWithFreshHandlesOldestFirst(_ backend: StoreBackend) async throws {
            try await withStore(backend) { store in
                let box = try mailbox(store)
                let d = F.device("a", user: "u", token: 1)
                let older = M.message("m5", devices: [d], at: 1000)
                let newer = M.message("m6", devices: [d], at: 2000)
                let elsewhere = M.message("m7", devices: [F.device("b", user: "u", token: 2)], at: 1500)
                for m in [newer, older, elsewhere] { try await store.insertMessage(m.message, idempotency: nil) }
                let answer = CryptoLibrary.randomBytes(count: 32)
                try await box.putMailboxChallenge(id: "ch_1", app: "chat", deviceID: "a", answerSHA256: SHA256Hasher.hash(answer), expiresAt: 70_000)
                try await box.putMailboxChallenge(id: "ch_2", app: "chat", deviceID: "a", answerSHA256: SHA256Hasher.hash(answer), expiresAt: 70_000)
                // A wrong answer spends its challenge: the right one after it fails too.
                #expect(try await box.mailboxList(challengeID: "ch_2", answerSHA256: SHA256Hasher.hash([0]), now: 3000, graces: Self.graces, limit: 100) == nil)
                #expect(try await box.mailboxList(challengeID: "ch_2", answerSHA256: SHA256Hasher.hash(answer), now: 3000, graces: Self.graces, limit: 100) == nil)
                let listed = try #require(try await box.mailboxList(challengeID: "ch_1", answerSHA256: SHA256Hasher.hash(answer), now: 3000,
                                                                    graces: Self.graces, limit: 100))
                #expect(listed.map(\.messageID) == ["m5", "m6"])
                // Replayed: refused.
                #expect(try await box.mailboxList(challengeID: "ch_1", answerSHA256: SHA256Hasher.hash(answer), now: 3000, graces: Self.graces, limit: 100) == nil)
                // The old handle is worthless now; the listed one fetches.
                #expect(try await box.mailboxFetch(deliveryID: older.handles[0].deliveryID, tokenSHA256: M.hash(older.handles[0]), now: 3000,
                                                   graces: Self.graces) == .unknown)
                let fresh = try #require(MailboxHandle(listed[0].handle))
                #expect(fresh.deliveryID == older.handles[0].deliveryID)
                #expect(try await box.mailboxFetch(deliveryID: fresh.deliveryID, tokenSHA256: M.hash(fresh), now: 3000, graces: Self.graces)
                        == .envelope(older.envelopes[0], messageID: "m5", expiresAt: older.message.expiresAt, app: "chat", first: true))
                // An expired challenge answers nothing.
                try await box.putMailboxChallenge(id: "ch_3", app: "chat", deviceID: "a", answerSHA256: SHA256Hasher.hash(answer), expiresAt: 4000)
                #expect(try await box.mailboxList(challengeID: "ch_3", answerSHA256: SHA256Hasher.hash(answer), now: 4000, graces: Self.graces, limit: 100) == nil)
            }
        }

        @Test(arguments: StoreBackend.allCases)
        func theSweepDeletesExpiredAndCollectedEnvelopes(_ backend: StoreBackend) async throws {
            try await withStore(backend) { store in
                let box = try mailbox(store)
                let m = M.message("m8", devices: [F.device("a", user: "u", token: 1), F.device("b", user: "u", token: 2)])
                try await store.insertMessage(m.message, idempotency: nil)
                _ = try await box.mailboxFetch(deliveryID: m.handles[0].deliveryID, tokenSHA256: M.hash(m.handles[0]), now: 2000, graces: Self.graces)
                // Nothing is due within the grace.
                #expect(try await box.mailboxSweep(now: 3000, graces: Self.graces, rowsBefore: 0) == 0)
                #expect(try await box.mailboxSweep(now: 62_000, graces: Self.graces, rowsBefore: 0) == 1)
                #expect(try await box.mailboxSweep(now: m.message.expiresAt, graces: Self.graces, rowsBefore: 0) == 1)
                #expect(try await box.mailboxFetch(deliveryID: m.handles[1].deliveryID, tokenSHA256: M.hash(m.handles[1]), now: m.message.expiresAt,
                                                   graces: Self.graces) == .gone(.expired))
                // Rows past their keeping time go too: then the handle is unknown.
                _ = try await box.mailboxSweep(now: m.message.expiresAt + 1, graces: Self.graces, rowsBefore: m.message.expiresAt + 1)
                #expect(try await box.mailboxFetch(deliveryID: m.handles[1].deliveryID, tokenSHA256: M.hash(m.handles[1]), now: m.message.expiresAt + 2,
                                                   graces: Self.graces) == .unknown)
            }
        }
    }
}

extension GatewaySuites {
    /// The bytes of a collected envelope are gone from the SQLite database file, its WAL and a backup taken afterwards.
    /// (Checked to fail with `PRAGMA secure_delete = OFF` on the writer: the freed pages then keep the bytes.)
    @Suite("Gateway mailbox deletion on disk (SQLite)", .serialized, .timeLimit(.minutes(5)))
    struct GatewayMailboxDiskTests {
        /// Whether `haystack` holds any 32-byte window of `needle` taken at 16 places.
        static func holdsPartOf(_ needle: [UInt8], in haystack: [UInt8]) -> Bool {
            guard haystack.count >= 32 else { return false }
            let data = Data(haystack)
            for start in stride(from: 1, to: needle.count - 32, by: max(1, (needle.count - 33) / 16)) {
                if data.range(of: Data(needle[start..<start + 32])) != nil { return true }
            }
            return false
        }

        static func fileBytes(_ path: String) -> [UInt8] { (FileManager.default.contents(atPath: path)).map { Array($0) } ?? [] }

        @Test(arguments: ["receipt", "grace", "retraction", "expiry"])
        func aCollectedEnvelopeIsGoneFromTheFileTheWALAndABackup(_ how: String) async throws {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gateway-mailbox-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let path = directory.appendingPathComponent("g.db").path
            let store = try await SQLiteGatewayStore.open(path: path, logger: Logger(label: "test"))
            let graces = ["chat": Int64(60_000)]
            let m = MailboxFixtures.message("m1", devices: [StoreFixtures.device("a", user: "u", token: 1)], envelopeBytes: 20_000)
            let (handle, envelope) = (m.handles[0], m.envelopes[0])
            try await store.insertMessage(m.message, idempotency: nil)
            // Checkpointed once, so the envelope's pages are in the database file itself before it is deleted.
            try await store.truncateWAL()
            let before = Self.holdsPartOf(envelope, in: Self.fileBytes(path))
            #expect(before, "the control: the envelope is in the file before deletion")
            guard case .envelope = try await store.mailboxFetch(deliveryID: handle.deliveryID, tokenSHA256: MailboxFixtures.hash(handle), now: 2000,
                                                                graces: graces) else {
                Issue.record("the first fetch was not handed the envelope")
                return
            }
            var now: Int64 = 3000
            switch how {
            case "receipt":
                _ = try await store.recordReceipt(messageID: "m1", tokenSHA256: SHA256Hasher.hash(Array("r-\(handle.deliveryID)".utf8)), revealed: false, now: now)
            case "grace":
                now = 62_000
            case "retraction":
                _ = try await store.mailboxRetract(app: "chat", messageID: "m1", now: now)
            default:
                now = m.message.expiresAt
            }
            _ = try await store.mailboxSweep(now: now, graces: graces, rowsBefore: 0)
            try await store.truncateWAL()
            let inFile = Self.holdsPartOf(envelope, in: Self.fileBytes(path))
            let inWAL = Self.holdsPartOf(envelope, in: Self.fileBytes(path + "-wal"))
            #expect(!inFile, "the envelope's bytes are still in the database file")
            #expect(!inWAL, "the envelope's bytes are still in the WAL")
            let backup = directory.appendingPathComponent("backup.db").path
            var configuration = Configuration()
            configuration.readonly = true
            let source = try DatabaseQueue(path: path, configuration: configuration)
            try source.inDatabase { db in try db.execute(sql: "VACUUM INTO ?", arguments: [backup]) }
            try source.close()
            #expect(!Self.fileBytes(backup).isEmpty)
            let inBackup = Self.holdsPartOf(envelope, in: Self.fileBytes(backup))
            #expect(!inBackup, "the envelope's bytes are in a backup taken afterwards")
            await store.close()
        }
    }
}
