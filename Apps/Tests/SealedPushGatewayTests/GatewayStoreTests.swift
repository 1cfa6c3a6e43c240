import Foundation
import Logging
import SealedPushCrypto
@testable import SealedPushGateway
import Testing

/// A store backend the storage tests run against.
enum StoreBackend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite
    case postgres

    var testDescription: String { rawValue }

    /// A fresh, empty store of this backend, and what removes it afterwards.
    func make() async throws -> (store: any GatewayStore, cleanup: @Sendable () -> Void) {
        var logger = Logger(label: "store-test")
        logger.logLevel = .warning
        switch self {
        case .sqlite:
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gateway-store-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let store = try await SQLiteGatewayStore.open(path: directory.appendingPathComponent("g.db").path, logger: logger)
            return (store, { try? FileManager.default.removeItem(at: directory) })
        case .postgres:
            let url = try await PostgresCluster.shared().makeDatabase()
            return (try await PostgresGatewayStore.open(url: url, options: .forTests, logger: logger), {})
        }
    }
}

/// Runs `body` with a fresh store of `backend`, closing it afterwards whatever happens.
func withStore(_ backend: StoreBackend, _ body: (any GatewayStore) async throws -> Void) async throws {
    let (store, cleanup) = try await backend.make()
    do { try await body(store) } catch {
        await store.close()
        cleanup()
        throw error
    }
    await store.close()
    cleanup()
}

enum StoreFixtures {
    static func device(_ id: String, user: String, token: Int, app: String = "chat", at t: Int64 = 1, kid: String = "0000000000000000") -> DeviceRecord {
        DeviceRecord(app: app, deviceID: id, userID: user, address: hexToken(token), environment: .production,
                     keyRecord: Array(#"{"k":1}"#.utf8), keyID: kid, state: .active, createdAt: t, updatedAt: t, registeredAt: t,
                     unregisteredAt: nil, unregisteredReason: nil, tokenReassigned: false, lastReport: nil)
    }

    /// A message of `devices` created at `t`, expiring an hour later; each delivery asks for a receipt whose token is "r-<delivery id>".
    static func message(_ id: String, devices: [DeviceRecord], at t: Int64 = 1000, app: String = "chat") -> NewMessage {
        NewMessage(app: app, messageID: id, createdAt: t, expiresAt: t + 3_600_000, deliveries: devices.map { d in
            let deliveryID = "d-\(id)-\(d.deviceID)"
            return NewDelivery(deliveryID: deliveryID, deviceID: d.deviceID, address: d.address, environment: d.environment,
                               payload: Array("sealed-\(deliveryID)".utf8), receiptTokenSHA256: SHA256Hasher.hash(Array("r-\(deliveryID)".utf8)),
                               priority: 10, collapseID: deliveryID, apnsExpiration: (t + 3_600_000) / 1000, apnsID: UUID().uuidString.lowercased())
        })
    }
}

extension GatewayPostgresSuites {
    /// The storage protocol's behaviour, the same on SQLite and on PostgreSQL (a throwaway cluster the tests start).
    @Suite("Gateway store behaviour (SQLite and PostgreSQL)", .serialized, .timeLimit(.minutes(10)))
    struct GatewayStoreTests {
        typealias F = StoreFixtures

        /// Messages of every size the store writes differently on PostgreSQL (#47): none of its deliveries (every
        /// recipient skipped), one, the most one statement takes (200), and more (several statements in a
        /// transaction); each reads back whole.
        @Test(arguments: StoreBackend.allCases)
        func messagesOfNoneOneAndManyDeliveriesAreStoredWhole(_ backend: StoreBackend) async throws {
            try await withStore(backend) { store in
                let devices = (0..<201).map { F.device("d\($0)", user: "u\($0)", token: $0 + 1) }
                for d in devices { _ = try await store.putDevice(d, maxDevicesPerUser: 10) }
                for (id, count) in [("none", 0), ("one", 1), ("most", 200), ("more", 201)] {
                    try await store.insertMessage(F.message(id, devices: Array(devices.prefix(count))), idempotency: nil)
                    let stored = try #require(try await store.message(app: "chat", messageID: id), "\(id)")
                    #expect(stored.deliveries.count == count && stored.deliveries.allSatisfy { $0.state == .queued }, "\(id)")
                    #expect(stored.expiresAt == 1000 + 3_600_000)
                }
            }
        }

        @Test(arguments: StoreBackend.allCases)
        func devicesArePutReplacedListedAndDeleted(_ backend: StoreBackend) async throws {
            try await withStore(backend) { store in
                let first = try await store.putDevice(F.device("a", user: "u1", token: 1, at: 10), maxDevicesPerUser: 2)
                #expect(first.created && first.cancelled == 0 && first.device.state == .active)
                // Replaced: not created, created_at kept.
                var again = F.device("a", user: "u1", token: 2, at: 20)
                again.keyID = "1111111111111111"
                let replaced = try await store.putDevice(again, maxDevicesPerUser: 2)
                #expect(!replaced.created && replaced.device.createdAt == 10 && replaced.device.updatedAt == 20)
                #expect(try await store.device(app: "chat", deviceID: "a")?.address == hexToken(2))
                _ = try await store.putDevice(F.device("b", user: "u1", token: 3, at: 30), maxDevicesPerUser: 2)
                // A third device for u1 is refused.
                await #expect(throws: DeviceRegistrationRefusal.tooManyDevices(limit: 2)) {
                    _ = try await store.putDevice(F.device("c", user: "u1", token: 4, at: 40), maxDevicesPerUser: 2)
                }
                #expect(try await store.userDevices(app: "chat", userID: "u1").map(\.deviceID) == ["a", "b"])
                #expect(try await store.userIsKnown(app: "chat", userID: "u1"))
                #expect(try await !store.userIsKnown(app: "chat", userID: "nobody"))
                // Another app is separate.
                _ = try await store.putDevice(F.device("a", user: "u1", token: 1, app: "other"), maxDevicesPerUser: 2)
                #expect(try await store.userDevices(app: "chat", userID: "u1").count == 2)
                // Token reassignment: device d takes b's token; b is deleted and its unsent delivery cancelled.
                try await store.insertMessage(F.message("m1", devices: [try #require(await store.device(app: "chat", deviceID: "b"))]), idempotency: nil)
                let taken = try await store.putDevice(F.device("d", user: "u2", token: 3, at: 50), maxDevicesPerUser: 2)
                #expect(taken.created && taken.cancelled == 1 && taken.device.tokenReassigned)
                #expect(try await store.device(app: "chat", deviceID: "b") == nil)
                #expect(try await store.message(app: "chat", messageID: "m1")?.deliveries.first?.state == .cancelled)
                #expect(try await store.message(app: "chat", messageID: "m1")?.deliveries.first?.reason == "token_reassigned")
                // Listing in (updated_at, device_id) order, with a cursor and a since.
                for n in 0..<5 { _ = try await store.putDevice(F.device("l\(n)", user: "u-l\(n)", token: 100 + n, at: 100), maxDevicesPerUser: 2) }
                let page1 = try await store.listDevices(app: "chat", state: nil, since: 100, after: nil, limit: 3)
                #expect(page1.map(\.deviceID) == ["l0", "l1", "l2"])
                let page2 = try await store.listDevices(app: "chat", state: .active, since: 100, after: (100, "l2"), limit: 3)
                #expect(page2.map(\.deviceID) == ["l3", "l4"])
                #expect(try await store.listDevices(app: "chat", state: .unregistered, since: nil, after: nil, limit: 10).isEmpty)
                #expect(Set(try await store.devices(app: "chat", ids: ["l1", "l3", "nope"]).map(\.deviceID)) == ["l1", "l3"])
                // Deletion.
                #expect(try await store.deleteDevice(app: "chat", deviceID: "nope", now: 60) == nil)
                #expect(try await store.deleteDevice(app: "chat", deviceID: "d", now: 60) == 0)
                let gone = try await store.deleteUserDevices(app: "chat", userID: "u1", now: 70)
                #expect(gone.devices == 1 && gone.cancelled == 0)
                #expect(try await store.userIsKnown(app: "chat", userID: "u1"), "a user stays known after their devices are gone")
            }
        }

        @Test(arguments: StoreBackend.allCases)
        func messagesDeliveriesAndTheQueue(_ backend: StoreBackend) async throws {
            try await withStore(backend) { store in
                let devices = [F.device("a", user: "u", token: 1), F.device("b", user: "u", token: 2), F.device("c", user: "v", token: 3)]
                for d in devices { _ = try await store.putDevice(d, maxDevicesPerUser: 10) }
                try await store.insertMessage(F.message("m1", devices: devices, at: 1000), idempotency: nil)
                try await store.insertMessage(F.message("m2", devices: [devices[0]], at: 2000, app: "chat"), idempotency: nil)
                let m1 = try #require(try await store.message(app: "chat", messageID: "m1"))
                #expect(m1.createdAt == 1000 && m1.expiresAt == 3_601_000)
                #expect(m1.deliveries.map(\.deviceID) == ["a", "b", "c"])
                #expect(m1.deliveries.allSatisfy { $0.state == .queued && $0.attempts == 0 && $0.seq == 1 && $0.nextAttemptAt == 1000 })
                #expect(try await store.message(app: "other", messageID: "m1") == nil)
                let depths = try await store.queueDepths()
                #expect(depths.count == 1 && depths["chat"]?.queued == 4 && depths["chat"]?.oldestCreatedAt == 1000)
                #expect(try await store.nextDue(app: "chat", platform: .apns) == 1000)
                #expect(try await store.nextDue(app: "other", platform: .apns) == nil)
                // Cancelling a message cancels its unsent deliveries only.
                #expect(try await store.cancelMessage(app: "chat", messageID: "nope", now: 3000) == nil)
                #expect(try await store.cancelMessage(app: "chat", messageID: "m2", now: 3000) == 1)
                #expect(try await store.cancelMessage(app: "chat", messageID: "m2", now: 3001) == 0)
                let m2 = try #require(try await store.message(app: "chat", messageID: "m2"))
                #expect(m2.deliveries.first?.state == .cancelled && m2.deliveries.first?.reason == "message_deleted" && m2.deliveries.first?.seq == 2)
                #expect(try await store.queueDepths()["chat"]?.queued == 3)
                // Deleting a device cancels its unsent deliveries.
                #expect(try await store.deleteDevice(app: "chat", deviceID: "c", now: 3000) == 1)
                #expect(try await store.queueDepths()["chat"]?.queued == 2)
                // Pruning deletes messages expired before the cut, with their deliveries.
                #expect(try await store.prune(messagesExpiredBefore: 3_601_500, idempotencyBefore: 0, eventsBefore: 0, limit: 10) == 1)
                #expect(try await store.message(app: "chat", messageID: "m1") == nil)
                #expect(try await store.message(app: "chat", messageID: "m2") != nil)
                #expect(try await store.queueDepths().isEmpty)
            }
        }

        @Test(arguments: StoreBackend.allCases)
        func claimsHoldALeaseAndOutcomesNeedTheirGeneration(_ backend: StoreBackend) async throws {
            try await withStore(backend) { store in
                let devices = (0..<3).map { F.device("p\($0)", user: "u\($0)", token: 10 + $0) }
                for d in devices { _ = try await store.putDevice(d, maxDevicesPerUser: 10) }
                try await store.insertMessage(F.message("m", devices: devices, at: 1000), idempotency: nil)
                #expect(try await store.claimDue(app: "chat", platform: .apns, now: 999, leaseUntil: 2000, limit: 10).isEmpty, "not due yet")
                let claims = try await store.claimDue(app: "chat", platform: .apns, now: 1000, leaseUntil: 2000, limit: 10)
                #expect(claims.count == 3)
                #expect(claims.allSatisfy { $0.attempts == 0 && $0.generation >= 1 && $0.payload == Array("sealed-\($0.deliveryID)".utf8) })
                // Leased: nobody else claims them until the lease lapses.
                #expect(try await store.claimDue(app: "chat", platform: .apns, now: 1500, leaseUntil: 2500, limit: 10).isEmpty)
                let byDevice = Dictionary(uniqueKeysWithValues: claims.map { ($0.deviceID, $0) })
                let p0 = try #require(byDevice["p0"]), p1 = try #require(byDevice["p1"]), p2 = try #require(byDevice["p2"])
                // p0 accepted under its lease.
                #expect(try await store.complete(p0, outcome: .accepted(status: 200), unregisteredAt: nil, now: 1100))
                // p1's lease lapses; another claim takes it with a newer generation; the stale claim writes nothing.
                let retaken = try await store.claimDue(app: "chat", platform: .apns, now: 2001, leaseUntil: 3000, limit: 10)
                #expect(Set(retaken.map(\.deviceID)) == ["p1", "p2"])
                let p1b = try #require(retaken.first { $0.deviceID == "p1" })
                #expect(p1b.generation > p1.generation && p1b.apnsID == p1.apnsID)
                #expect(try await !store.complete(p1, outcome: .final(.rejected, status: 400, reason: "BadPriority", attempted: true),
                                                  unregisteredAt: nil, now: 2002))
                #expect(try await store.complete(p1b, outcome: .retry(at: 5000, status: 503, reason: "ServiceUnavailable"), unregisteredAt: nil, now: 2003))
                // p2: handed back (not counted), then claimed again and unregistered (410 after its registration).
                let p2b = try #require(retaken.first { $0.deviceID == "p2" })
                #expect(try await !store.complete(p2, outcome: .handBack, unregisteredAt: nil, now: 2004), "the old generation hands back nothing")
                #expect(try await store.complete(p2b, outcome: .handBack, unregisteredAt: nil, now: 2004))
                let p2c = try #require(try await store.claimDue(app: "chat", platform: .apns, now: 2005, leaseUntil: 3000, limit: 10).first)
                #expect(p2c.deviceID == "p2" && p2c.attempts == 0)
                #expect(try await store.complete(p2c, outcome: .final(.unregistered, status: 410, reason: "Unregistered", attempted: true),
                                                 unregisteredAt: 1500, now: 2006))
                #expect(try await store.device(app: "chat", deviceID: "p2")?.state == .unregistered)
                let m = try #require(try await store.message(app: "chat", messageID: "m"))
                let states = Dictionary(uniqueKeysWithValues: m.deliveries.map { ($0.deviceID, $0) })
                #expect(states["p0"]?.state == .accepted && states["p0"]?.attempts == 1 && states["p0"]?.apnsStatus == 200 && states["p0"]?.acceptedAt == 1100)
                #expect(states["p1"]?.state == .queued && states["p1"]?.attempts == 1 && states["p1"]?.nextAttemptAt == 5000
                        && states["p1"]?.reason == "ServiceUnavailable" && states["p1"]?.apnsStatus == 503)
                #expect(states["p2"]?.state == .unregistered && states["p2"]?.attempts == 1)
                // The retry is due at 5000, not before.
                #expect(try await store.nextDue(app: "chat", platform: .apns) == 5000)
                #expect(try await store.claimDue(app: "chat", platform: .apns, now: 4999, leaseUntil: 9000, limit: 10).isEmpty)
                let p1c = try #require(try await store.claimDue(app: "chat", platform: .apns, now: 5000, leaseUntil: 9000, limit: 10).first)
                #expect(p1c.attempts == 1)
                // Credentials refused: paused, and the app's queued deliveries say why.
                #expect(try await store.complete(p1c, outcome: .paused(status: 403, reason: "InvalidProviderToken"), unregisteredAt: nil, now: 5001))
                let paused = try #require(try await store.message(app: "chat", messageID: "m")?.deliveries.first { $0.deviceID == "p1" })
                #expect(paused.state == .queued && paused.reason == "credentials_paused" && paused.attempts == 1)
            }
        }

        /// A credential refusal pauses one platform: the app's other queued deliveries to that platform wait as
        /// `credentials_paused`, those to another platform are untouched (their loop still sends them).
        @Test(arguments: StoreBackend.allCases)
        func aPauseMarksOnlyItsPlatformsDeliveries(_ backend: StoreBackend) async throws {
            try await withStore(backend) { store in
                let devices = [F.device("a", user: "u", token: 1), F.device("b", user: "u", token: 2), F.device("c", user: "u", token: 3)]
                for d in devices { _ = try await store.putDevice(d, maxDevicesPerUser: 10) }
                var message = F.message("m", devices: devices)
                message.deliveries[1].platform = .fcm
                message.deliveries[2].platform = .fcm
                try await store.insertMessage(message, idempotency: nil)
                let claim = try #require(try await store.claimDue(app: "chat", platform: .fcm, now: 1000, leaseUntil: 5000, limit: 1).first)
                #expect(try await store.completeAttempt(claim, outcome: .paused(status: 403, reason: "PERMISSION_DENIED"), unregisteredAt: nil, now: 1001) == .queued)
                let reasons = Dictionary(uniqueKeysWithValues: try #require(try await store.message(app: "chat", messageID: "m")).deliveries.map { ($0.deviceID, $0.reason) })
                let other = claim.deviceID == "b" ? "c" : "b"
                #expect(reasons[claim.deviceID] == "credentials_paused" && reasons[other] == "credentials_paused", "\(reasons)")
                #expect(reasons["a"] == .some(nil), "the APNs delivery is not paused: \(reasons)")
            }
        }

        /// Outcomes written at once (the writer groups them into shared transactions: SQLite's commit queue,
        /// PostgreSQL's outcome queue) each land on their own row, and one written under an old lease lands nowhere
        /// while the others in its transaction do.
        @Test(arguments: StoreBackend.allCases)
        func outcomesWrittenAtOnceEachLand(_ backend: StoreBackend) async throws {
            try await withStore(backend) { store in
                let devices = (0..<40).map { F.device("d\($0)", user: "u\($0)", token: $0 + 1) }
                for d in devices { _ = try await store.putDevice(d, maxDevicesPerUser: 10) }
                try await store.insertMessage(F.message("m", devices: devices), idempotency: nil)
                var claims = try await store.claimDue(app: "chat", platform: .apns, now: 1000, leaseUntil: 2000, limit: 100)
                #expect(claims.count == 40)
                claims.sort { $0.deliveryID < $1.deliveryID }
                var stale = claims[7]
                stale.generation -= 1
                claims[7] = stale
                let landed = try await withThrowingTaskGroup(of: (String, DeliveryState?).self) { group in
                    for (n, claim) in claims.enumerated() {
                        group.addTask {
                            let outcome: AttemptOutcome = n % 2 == 0 ? .accepted(status: 200, platformID: nil) : .retry(at: 9000, status: 503, reason: "server_error")
                            return (claim.deliveryID, try await store.completeAttempt(claim, outcome: outcome, unregisteredAt: nil, now: 1001))
                        }
                    }
                    return try await group.reduce(into: [String: DeliveryState?]()) { $0[$1.0] = $1.1 }
                }
                let states = Dictionary(uniqueKeysWithValues: try #require(try await store.message(app: "chat", messageID: "m")).deliveries.map { ($0.deliveryID, $0.state) })
                for (n, claim) in claims.enumerated() {
                    if n == 7 {
                        #expect(landed[claim.deliveryID] == .some(nil), "the old lease's outcome landed")
                        #expect(states[claim.deliveryID] == .queued)
                    } else {
                        let expected: DeliveryState = n % 2 == 0 ? .accepted : .queued
                        #expect(landed[claim.deliveryID] == .some(expected) && states[claim.deliveryID] == expected, "\(claim.deliveryID)")
                    }
                }
            }
        }

        /// The devices of many users in one read (a batch's, gateway v1 §5.1) are each user's `userDevices`, in the same
        /// order, and only this app's; a user without devices is absent.
        @Test(arguments: StoreBackend.allCases)
        func usersDevicesInOneReadAreEachUsersDevices(_ backend: StoreBackend) async throws {
            try await withStore(backend) { store in
                let devices = [F.device("a2", user: "u1", token: 1, at: 5), F.device("a1", user: "u1", token: 2, at: 5), F.device("z", user: "u1", token: 3, at: 2),
                               F.device("b", user: "u2", token: 4), F.device("other-app", user: "u1", token: 5, app: "mail")]
                for d in devices { _ = try await store.putDevice(d, maxDevicesPerUser: 10) }
                let found = try await store.usersDevices(app: "chat", userIDs: ["u1", "u2", "u1", "nobody"])
                #expect(Set(found.keys) == ["u1", "u2"])
                #expect(found["u1"]?.map(\.deviceID) == ["z", "a1", "a2"])
                #expect(found["u1"]?.map(\.deviceID) == (try await store.userDevices(app: "chat", userID: "u1")).map(\.deviceID))
                #expect(found["u2"]?.map(\.deviceID) == ["b"])
                #expect(try await store.usersDevices(app: "chat", userIDs: []).isEmpty)
                // More users than one statement binds (SQLite reads them 500 at a time).
                let many = (0..<1200).map { "x\($0)" } + ["u2"]
                #expect(try await store.usersDevices(app: "chat", userIDs: many).keys.sorted() == ["u2"])
            }
        }

        /// Id lists longer than one SQLite statement binds (`SQLDialect.sqliteListLimit`): `devices(app:ids:)` finds each
        /// of the app's devices once, whatever the duplicates and unknown ids, and `usersDevices` each user's devices in order.
        @Test(arguments: StoreBackend.allCases)
        func idListsLongerThanOneStatementFindEveryDeviceOnce(_ backend: StoreBackend) async throws {
            try await withStore(backend) { store in
                let count = SQLDialect.sqliteListLimit + 20
                let devices = (0..<count).map { n in F.device("d\(n)", user: "u\(n / 2)", token: n + 1, at: Int64(100 - n % 2)) }
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for d in devices + [F.device("d0", user: "u0", token: 9_999, app: "mail")] {
                        group.addTask { _ = try await store.putDevice(d, maxDevicesPerUser: 10) }
                    }
                    try await group.waitForAll()
                }
                let ids = devices.map(\.deviceID)
                // Every id, some of them twice, and unknown ids.
                let asked = ids + ["d1", "d\(count - 1)", "nope", "also-nope"] + ids.prefix(3)
                let found = try await store.devices(app: "chat", ids: asked)
                #expect(found.count == count)
                #expect(found.map(\.deviceID).sorted() == ids.sorted())
                #expect(found.allSatisfy { $0.app == "chat" })
                #expect(try await store.devices(app: "chat", ids: []).isEmpty)
                #expect(try await store.devices(app: "mail", ids: asked).map(\.address) == [hexToken(9_999)])

                let users = (0..<(count / 2)).map { "u\($0)" }
                let byUser = try await store.usersDevices(app: "chat", userIDs: users.reversed() + ["nobody"])
                #expect(byUser.count == count / 2)
                // Each user's two devices in (updated_at, device_id) order: the odd one was updated first.
                #expect(users.allSatisfy { u in
                    let n = Int(u.dropFirst())!
                    return byUser[u]?.map(\.deviceID) == ["d\(2 * n + 1)", "d\(2 * n)"]
                })
            }
        }

        /// An id list's predicate: one array on PostgreSQL, whatever its length; on SQLite `IN` lists of at most
        /// `sqliteListLimit` values, which together bind each distinct value once, in order.
        @Test func anIdListIsOneArrayOnPostgresAndChunksOnSQLite() {
            let values = (0..<(2 * SQLDialect.sqliteListLimit + 1)).map { "v\($0)" }
            let postgres = SQLDialect.postgres.among("device_id", values + ["v0"])
            #expect(postgres.count == 1)
            #expect(postgres.first?.predicate == "device_id = ANY(?::text[])" && postgres.first?.binds == [.texts(values)])
            let sqlite = SQLDialect.sqlite.among("device_id", values + ["v0"])
            #expect(sqlite.map(\.binds.count) == [SQLDialect.sqliteListLimit, SQLDialect.sqliteListLimit, 1])
            #expect(sqlite.flatMap(\.binds) == values.map { SQLValue.text($0) })
            #expect(sqlite.last?.predicate == "device_id IN (?)")
            #expect(sqlite.allSatisfy { $0.predicate.filter { $0 == "?" }.count == $0.binds.count })
            #expect(SQLDialect.sqlite.among("device_id", []).isEmpty && SQLDialect.postgres.among("device_id", []).isEmpty)
            // Rendered after the app's `?`: PostgreSQL's array is `$2`.
            let statements = StoreQueries.devices(.postgres, app: "chat", ids: ["a", "b"])
            #expect(statements.count == 1 && statements[0].sql.hasSuffix("WHERE app = $1 AND device_id = ANY($2::text[])"))
            #expect(statements[0].binds == [.text("chat"), .texts(["a", "b"])])
        }

        /// Pruning deletes at most `limit` messages (the earliest expired first, with their deliveries) and at most
        /// `limit` events (the oldest first), and counts what it deleted; nothing at or after its cuts.
        @Test(arguments: StoreBackend.allCases)
        func pruneStopsAtItsLimitOldestFirst(_ backend: StoreBackend) async throws {
            try await withStore(backend) { store in
                let device = F.device("a", user: "u", token: 1)
                _ = try await store.putDevice(device, maxDevicesPerUser: 10)
                for n in 0..<5 {
                    try await store.insertMessage(F.message("m\(n)", devices: [device], at: 1000 + Int64(n) * 100), idempotency: nil)
                }
                // Three cancelled deliveries: three events, written at 10_000, 10_001 and 10_002.
                for n in 2..<5 { #expect(try await store.cancelMessage(app: "chat", messageID: "m\(n)", now: 10_000 + Int64(n) - 2) == 1) }
                #expect(try await store.events(app: "chat", after: nil, since: 0, limit: 10)?.count == 3)

                // m0 to m3 expired before the cut (m4 expires at 3_601_400), events at 10_000 and 10_001 before theirs.
                let cut: Int64 = 3_601_350
                #expect(try await store.prune(messagesExpiredBefore: cut, idempotencyBefore: 0, eventsBefore: 10_002, limit: 1) == 2)
                #expect(try await store.message(app: "chat", messageID: "m0") == nil)
                #expect(try await store.message(app: "chat", messageID: "m1") != nil)
                #expect(try await store.queueDepths()["chat"]?.queued == 1, "m0's delivery went with it; m1's is queued, m2–m4's cancelled")
                let left = try #require(try await store.events(app: "chat", after: nil, since: 0, limit: 10))
                #expect(left.map(\.createdAt) == [10_001, 10_002])

                #expect(try await store.prune(messagesExpiredBefore: cut, idempotencyBefore: 0, eventsBefore: 10_002, limit: 2) == 3)
                #expect(try await store.message(app: "chat", messageID: "m1") == nil)
                #expect(try await store.message(app: "chat", messageID: "m2") == nil)
                #expect(try await store.message(app: "chat", messageID: "m3") != nil)
                #expect(try await store.queueDepths().isEmpty)
                #expect(try await store.events(app: "chat", after: nil, since: 0, limit: 10)?.map(\.createdAt) == [10_002])

                #expect(try await store.prune(messagesExpiredBefore: cut, idempotencyBefore: 0, eventsBefore: 10_002, limit: 10) == 1)
                #expect(try await store.prune(messagesExpiredBefore: cut, idempotencyBefore: 0, eventsBefore: 10_002, limit: 10) == 0)
                #expect(try await store.message(app: "chat", messageID: "m3") == nil)
                #expect(try await store.message(app: "chat", messageID: "m4")?.deliveries.count == 1)
                #expect(try await store.events(app: "chat", after: nil, since: 0, limit: 10)?.count == 1)
            }
        }

        /// A key's answer, kept again: on PostgreSQL the first answer stands (instances may answer one key at once, and
        /// a repeat replays the answer kept) until it is older than the idempotency window; SQLite's one instance keeps
        /// its latest answer. Either way only the key's own row changes.
        @Test(arguments: StoreBackend.allCases)
        func idempotencyAnswersKeptAgain(_ backend: StoreBackend) async throws {
            try await withStore(backend) { store in
                func answer(_ n: UInt8, at t: Int64) -> IdempotentAnswer {
                    IdempotentAnswer(bodyHMAC: Array(repeating: n, count: 32), status: 400 + Int(n), body: Array("{\"n\":\(n)}".utf8), createdAt: t)
                }
                let first = answer(1, at: 1000), second = answer(2, at: 1001), other = answer(3, at: 1000)
                try await store.storeIdempotentAnswer(app: "chat", key: "k", answer: first)
                try await store.storeIdempotentAnswer(app: "mail", key: "k", answer: other)
                try await store.storeIdempotentAnswer(app: "chat", key: "k", answer: second)
                switch backend {
                case .postgres: #expect(try await store.idempotentAnswer(app: "chat", key: "k") == first, "first answer wins")
                case .sqlite: #expect(try await store.idempotentAnswer(app: "chat", key: "k") == second, "the latest answer replaces")
                }
                #expect(try await store.idempotentAnswer(app: "mail", key: "k") == other)

                // An answer given a window after the kept one replaces it on both.
                let later = answer(4, at: 1000 + Gateway.idempotencyWindow)
                try await store.storeIdempotentAnswer(app: "chat", key: "k", answer: later)
                #expect(try await store.idempotentAnswer(app: "chat", key: "k") == later)

                // A message under a key kept within the window: PostgreSQL writes nothing and answers 409; SQLite keeps it.
                let device = F.device("a", user: "u", token: 1)
                _ = try await store.putDevice(device, maxDevicesPerUser: 10)
                let accepted = IdempotentAnswer(bodyHMAC: Array(repeating: 9, count: 32), status: 202, body: Array("{}".utf8), createdAt: later.createdAt + 1)
                switch backend {
                case .postgres:
                    await #expect(throws: GatewayError.self) {
                        try await store.insertMessage(F.message("m", devices: [device]), idempotency: ("k", accepted))
                    }
                    #expect(try await store.message(app: "chat", messageID: "m") == nil)
                    #expect(try await store.idempotentAnswer(app: "chat", key: "k") == later)
                case .sqlite:
                    try await store.insertMessage(F.message("m", devices: [device]), idempotency: ("k", accepted))
                    #expect(try await store.idempotentAnswer(app: "chat", key: "k") == accepted)
                }
            }
        }

        /// A batch (gateway v1 §5.1) is one transaction: every message kept, or none when one fails. On PostgreSQL a
        /// key another instance answered meanwhile is not kept, and nothing of its message is written; the others are.
        @Test(arguments: StoreBackend.allCases)
        func aBatchIsOneTransaction(_ backend: StoreBackend) async throws {
            try await withStore(backend) { store in
                let devices = [F.device("a", user: "u", token: 1), F.device("b", user: "u", token: 2)]
                for d in devices { _ = try await store.putDevice(d, maxDevicesPerUser: 10) }
                let answer = IdempotentAnswer(bodyHMAC: Array(repeating: 7, count: 32), status: 202, body: Array(#"{"message_id":"b1"}"#.utf8), createdAt: 1000)
                let kept = try await store.insertMessages([(F.message("b1", devices: devices), ("bk-1", answer)), (F.message("b2", devices: [devices[0]]), nil)])
                #expect(kept == [true, true])
                #expect(try await store.message(app: "chat", messageID: "b1")?.deliveries.count == 2)
                #expect(try await store.message(app: "chat", messageID: "b2")?.deliveries.count == 1)
                #expect(try await store.idempotentAnswer(app: "chat", key: "bk-1") == answer)

                // One message that cannot be written (its id is taken) fails the batch: nothing of it is kept.
                await #expect(throws: (any Error).self) {
                    _ = try await store.insertMessages([(F.message("b3", devices: devices), nil), (F.message("b1", devices: devices), nil)])
                }
                #expect(try await store.message(app: "chat", messageID: "b3") == nil)
                #expect(try await store.queueDepths()["chat"]?.queued == 3)

                let again = IdempotentAnswer(bodyHMAC: Array(repeating: 9, count: 32), status: 202, body: Array(#"{"message_id":"b4"}"#.utf8), createdAt: 1001)
                let second = try await store.insertMessages([(F.message("b4", devices: devices), ("bk-1", again)), (F.message("b5", devices: devices), nil)])
                switch backend {
                case .postgres:
                    // Another instance's answer for bk-1 stands: b4 is not written, b5 is.
                    #expect(second == [false, true])
                    #expect(try await store.message(app: "chat", messageID: "b4") == nil)
                    #expect(try await store.idempotentAnswer(app: "chat", key: "bk-1") == answer)
                case .sqlite:
                    // One instance: its in-flight slots keep a key from being written twice, so the store keeps each.
                    #expect(second == [true, true])
                }
                #expect(try await store.message(app: "chat", messageID: "b5")?.deliveries.count == 2)
            }
        }

        @Test(arguments: StoreBackend.allCases)
        func idempotencyAnswersReceiptsAndReports(_ backend: StoreBackend) async throws {
            try await withStore(backend) { store in
                let secret = try await store.idempotencySecret()
                #expect(secret.count == 32)
                #expect(try await store.idempotencySecret() == secret)
                let devices = [F.device("a", user: "u", token: 1, kid: "abcdefabcdefabcd"), F.device("b", user: "u", token: 2)]
                for d in devices { _ = try await store.putDevice(d, maxDevicesPerUser: 10) }
                let answer = IdempotentAnswer(bodyHMAC: Array(repeating: 7, count: 32), status: 202, body: Array(#"{"message_id":"m"}"#.utf8), createdAt: 1000)
                try await store.insertMessage(F.message("m", devices: devices), idempotency: ("key-1", answer))
                #expect(try await store.idempotentAnswer(app: "chat", key: "key-1") == answer)
                #expect(try await store.idempotentAnswer(app: "other", key: "key-1") == nil)
                let refused = IdempotentAnswer(bodyHMAC: Array(repeating: 8, count: 32), status: 422, body: Array("{}".utf8), createdAt: 1100)
                try await store.storeIdempotentAnswer(app: "chat", key: "key-2", answer: refused)
                #expect(try await store.idempotentAnswer(app: "chat", key: "key-2") == refused)
                // Answers older than the cut are pruned.
                _ = try await store.prune(messagesExpiredBefore: 0, idempotencyBefore: 1050, eventsBefore: 0, limit: 10)
                #expect(try await store.idempotentAnswer(app: "chat", key: "key-1") == nil)
                #expect(try await store.idempotentAnswer(app: "chat", key: "key-2") != nil)

                // Receipts name their delivery by (message id, SHA-256 of its token).
                let token = SHA256Hasher.hash(Array("r-d-m-a".utf8))
                #expect(try await store.recordReceipt(messageID: "nope", tokenSHA256: token, revealed: false, now: 2000) == .unknownID)
                #expect(try await store.recordReceipt(messageID: "m", tokenSHA256: SHA256Hasher.hash(Array("wrong".utf8)), revealed: false, now: 2000) == .wrongToken)
                #expect(try await store.recordReceipt(messageID: "m", tokenSHA256: token, revealed: false, now: 2000) == .matched(app: "chat", changed: true))
                #expect(try await store.recordReceipt(messageID: "m", tokenSHA256: token, revealed: false, now: 2001) == .matched(app: "chat", changed: false))
                let a = try #require(try await store.message(app: "chat", messageID: "m")?.deliveries.first { $0.deviceID == "a" })
                #expect(a.state == .delivered && a.deliveredAt == 2000)
                // A delivered delivery is not claimed, and a late APNs answer only sets apns_status.
                let claims = try await store.claimDue(app: "chat", platform: .apns, now: 3000, leaseUntil: 4000, limit: 10)
                #expect(claims.map(\.deviceID) == ["b"])
                _ = try await store.recordReceipt(messageID: "m", tokenSHA256: SHA256Hasher.hash(Array("r-d-m-b".utf8)), revealed: false, now: 3001)
                #expect(try await !store.complete(claims[0], outcome: .accepted(status: 200), unregisteredAt: nil, now: 3002))
                let b = try #require(try await store.message(app: "chat", messageID: "m")?.deliveries.first { $0.deviceID == "b" })
                #expect(b.state == .delivered && b.apnsStatus == 200)

                // Failure reports land on the devices of their key id, in the app they name only.
                #expect(try await store.recordReport(app: "other", kid: "abcdefabcdefabcd", reason: "decrypt_failed", count: 1, now: 3999).isEmpty)
                #expect(try await store.device(app: "chat", deviceID: "a")?.lastReport == nil, "a report to another app never reaches this one")
                #expect(try await store.recordReport(app: "chat", kid: nil, reason: "decrypt_failed", count: 1, now: 4000).isEmpty)
                #expect(try await store.recordReport(app: "chat", kid: "ffffffffffffffff", reason: "decrypt_failed", count: 1, now: 4000).isEmpty)
                #expect(try await store.recordReport(app: "chat", kid: "abcdefabcdefabcd", reason: "decrypt_failed", count: 3, now: 4000) == ["chat"])
                let report = try #require(try await store.device(app: "chat", deviceID: "a")?.lastReport)
                #expect(report.reason == "decrypt_failed" && report.kid == "abcdefabcdefabcd" && report.count == 3 && report.at == 4000)
                #expect(try await store.device(app: "chat", deviceID: "b")?.lastReport == nil)
            }
        }
    }
}
