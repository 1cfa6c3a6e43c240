import Foundation
import Logging
@testable import SealedPushGateway
import GRDB
import Testing

extension GatewaySuites {
    /// The SQLite store's group commit: concurrent transactions share a commit, and one that fails neither
    /// undoes nor fails the others.
    @Suite("Gateway SQLite store", .serialized, .timeLimit(.minutes(5)))
    struct SQLiteStoreTests {
        static func device(_ id: String, user: String, token: Int) -> DeviceRecord {
            DeviceRecord(app: "chat", deviceID: id, userID: user, address: String(format: "%064x", token), environment: .production,
                         keyRecord: Array("{}".utf8), keyID: "0000000000000000", state: .active, createdAt: 1, updatedAt: 1, registeredAt: 1,
                         unregisteredAt: nil, unregisteredReason: nil, tokenReassigned: false, lastReport: nil)
        }

        @Test func concurrentTransactionsCommitTogetherAndAFailureStaysItsOwn() async throws {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gateway-store-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let store = try await SQLiteGatewayStore.open(path: directory.appendingPathComponent("g.db").path, logger: Logger(label: "test"))
            // 30 registrations for one user allowed 10 devices, mixed with 30 for other users, all at once.
            let outcomes = await withTaskGroup(of: (String, Bool).self) { group in
                for n in 0..<30 {
                    group.addTask {
                        do {
                            _ = try await store.putDevice(Self.device("full-\(n)", user: "crowded", token: n), maxDevicesPerUser: 10)
                            return ("crowded", true)
                        } catch { return ("crowded", false) }
                    }
                    group.addTask {
                        do {
                            _ = try await store.putDevice(Self.device("other-\(n)", user: "user-\(n)", token: 1000 + n), maxDevicesPerUser: 10)
                            return ("other", true)
                        } catch { return ("other", false) }
                    }
                }
                var all: [(String, Bool)] = []
                for await outcome in group { all.append(outcome) }
                return all
            }
            #expect(outcomes.filter { $0.0 == "crowded" && $0.1 }.count == 10)
            #expect(outcomes.filter { $0.0 == "other" && $0.1 }.count == 30)
            #expect(try await store.userDevices(app: "chat", userID: "crowded").count == 10)
            for n in 0..<30 { #expect(try await store.device(app: "chat", deviceID: "other-\(n)") != nil) }
            await store.close()
            // Reopened, everything answered as written is there.
            let again = try await SQLiteGatewayStore.open(path: directory.appendingPathComponent("g.db").path, logger: Logger(label: "test"))
            #expect(try await again.listDevices(app: "chat", state: nil, since: nil, after: nil, limit: 1000).count == 40)
            await again.close()
        }

        /// The statements every message runs stay on their indexes whatever the table sizes (without
        /// statistics SQLite once read a user's devices by scanning every device of the app).
        @Test func hotStatementsSearchTheirIndexes() async throws {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gateway-store-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let store = try await SQLiteGatewayStore.open(path: directory.appendingPathComponent("g.db").path, logger: Logger(label: "test"))
            for n in 0..<200 { _ = try await store.putDevice(Self.device("d\(n)", user: "u\(n % 100)", token: n), maxDevicesPerUser: 10) }
            let plans: [(String, [SQLiteValue], String)] = [
                (SQLiteGatewayStore.userDevicesSQL, [.text("chat"), .text("u1")], "SEARCH devices USING INDEX devices_user (app=? AND user_id=?)"),
                (SQLiteGatewayStore.claimSQL, [.text("chat"), .text("apns"), .integer(5), .integer(5), .integer(10)],
                 "SEARCH deliveries USING COVERING INDEX deliveries_due (app=? AND platform=? AND state=? AND next_attempt_at<?)"),
                // The queued rows' partial index only. SQLite 3.40 (Debian 12's, which the store links through GRDB) reads
                // each row's `state` from the table (USING INDEX); later versions see the index's WHERE implies it
                // (USING COVERING INDEX). Either visits the queued rows alone, once a second.
                (SQLiteGatewayStore.queueDepthsSQL, [], "INDEX deliveries_queued"),
                // The per-platform queue depth gauge: the claim's index, the queued rows of one app and platform.
                (SQLiteGatewayStore.queuedOnPlatformSQL, [.text("chat"), .text("fcm")],
                 "SEARCH deliveries USING COVERING INDEX deliveries_due (app=? AND platform=? AND state=?)"),
                // A receipt reads the one delivery it names, not every delivery of its message.
                (SQLiteGatewayStore.receiptSQL, [.text("m"), .blob([1, 2, 3])], "INDEX deliveries_receipt (message_id=? AND receipt_sha256=?)"),
                (SQLiteGatewayStore.cancelUnsentSQL, [.integer(5), .text("chat"), .text("d1"), .integer(5)],
                 "SEARCH deliveries USING INDEX deliveries_device (app=? AND device_id=?)"),
            ]
            for (sql, binds, expected) in plans {
                let plan = try await store.queryPlan(sql, binds)
                #expect(plan.contains { $0.contains(expected) }, "\(sql): \(plan)")
                // No full scan of a table, nor of an index other than the queued rows' partial one.
                #expect(plan.allSatisfy { !$0.hasPrefix("SCAN") || $0.hasSuffix("deliveries_queued") }, "\(sql): \(plan)")
                #expect(plan.allSatisfy { !$0.contains("TEMP B-TREE") }, "\(sql) sorts: \(plan)")
            }
            await store.close()
        }

        /// The writer connection commits with synchronous=FULL (GRDB opens a WAL pool with NORMAL): a 202 is on
        /// disk before it is answered.
        @Test func commitsAreDurable() async throws {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gateway-store-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let store = try await SQLiteGatewayStore.open(path: directory.appendingPathComponent("g.db").path, logger: Logger(label: "test"))
            #expect(try await store.writerSynchronous() == 2)
            await store.close()
        }

        /// A database file at schema version 3, 5 and 6 (the last the SQLite store reached before the two stores'
        /// migration lists became one), as the earlier builds of the store wrote them (over sqlite-nio: one plain connection, WAL, the same migrations, each recorded in
        /// `schema_migrations`): the store opens it, applies what is missing, and reads, claims and completes
        /// what it holds.
        @Test(arguments: [3, 5, 6]) func opensAFileWrittenAtAnEarlierSchemaVersion(version: Int) async throws {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gateway-store-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let path = directory.appendingPathComponent("g.db").path
            let old = try DatabaseQueue(path: path)
            try await old.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA journal_mode = WAL")
                try db.execute(sql: "PRAGMA synchronous = FULL")
                try db.execute(sql: "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY NOT NULL, applied_at INTEGER NOT NULL)")
                for migration in SQLiteGatewayStore.migrations where migration.version <= version {
                    try db.inTransaction(.immediate) {
                        for statement in migration.statements { try db.execute(sql: statement) }
                        try db.execute(sql: "INSERT INTO schema_migrations (version, applied_at) VALUES (?, 1)", arguments: [migration.version])
                        return .commit
                    }
                }
                try db.execute(sql: "INSERT INTO settings (name, value) VALUES ('idempotency_secret', ?)", arguments: [Data(repeating: 7, count: 32)])
                try db.execute(sql: """
                    INSERT INTO devices (app, device_id, user_id, apns_token, environment, key_record, key_id, state, created_at, updated_at,
                        registered_at, unregistered_at, unregistered_reason, token_reassigned, report_reason, report_kid, report_count,
                        report_at) VALUES ('chat', 'd1', 'u1', ?, 'production', '{}', '0000000000000000', 'active',
                        1, 1, 1, NULL, NULL, 0, NULL, NULL, NULL, NULL)
                    """, arguments: [String(repeating: "a", count: 64)])
                try db.execute(sql: "INSERT INTO known_users (app, user_id) VALUES ('chat', 'u1')")
                try db.execute(sql: "INSERT INTO messages (message_id, app, created_at, expires_at) VALUES ('m1', 'chat', 1, 9999999999999)")
                try db.execute(sql: """
                    INSERT INTO deliveries (delivery_id, app, message_id, device_id, apns_token, environment, payload, receipt_sha256, priority,
                        collapse_id, apns_expiration, expires_at, apns_id, state, attempts, created_at, updated_at, next_attempt_at, seq)
                    VALUES ('x1', 'chat', 'm1', 'd1', ?, 'production', ?, NULL, 10, 'c1', 0, 9999999999999, 'A-1', 'queued', 0, 1, 1, 1, 1)
                    """, arguments: [String(repeating: "a", count: 64), Data([1, 2, 3])])
            }
            try old.close()

            let store = try await SQLiteGatewayStore.open(path: path, logger: Logger(label: "test"))
            #expect(try await store.idempotencySecret() == [UInt8](repeating: 7, count: 32))
            #expect(try await store.userDevices(app: "chat", userID: "u1").map(\.deviceID) == ["d1"])
            #expect(try await store.userIsKnown(app: "chat", userID: "u1"))
            let claimed = try await store.claimDue(app: "chat", platform: .apns, now: 10, leaseUntil: 1000, limit: 10)
            #expect(claimed.map(\.deliveryID) == ["x1"])
            #expect(claimed.first?.payload == [1, 2, 3])
            let claim = try #require(claimed.first)
            #expect(try await store.complete(claim, outcome: .accepted(status: 200), unregisteredAt: nil, now: 20))
            #expect(try await store.message(app: "chat", messageID: "m1")?.deliveries.first?.state == .accepted)
            #expect(try await store.events(app: "chat", after: nil, since: 0, limit: 10)?.count == 1)
            await store.close()
            // Every migration is recorded once.
            let check = try DatabaseQueue(path: path)
            let versions = try await check.read { db in try Int.fetchAll(db, sql: "SELECT version FROM schema_migrations ORDER BY version") }
            #expect(versions == SQLiteGatewayStore.migrations.map(\.version))
            try check.close()
        }
    }
}
