import Foundation
import GRDB
import Logging
import PostgresNIO
import SealedPushCrypto
@testable import SealedPushGateway
import Testing

/// Runs `sql` on `store`'s database behind its back (a test that corrupts a row, or holds a lock).
func executeBehindTheStore(_ store: any GatewayStore, _ sql: String) async throws {
    if let sqlite = store as? SQLiteGatewayStore {
        try await sqlite.pool.write { db in try db.execute(sql: sql) }
    } else if let postgres = store as? PostgresGatewayStore {
        try await postgres.client.rows(PostgresQuery(unsafeSQL: sql), logger: postgres.logger)
    }
}

extension GatewayPostgresSuites {
    /// Rows as the stores read them: a receipt touches its one delivery, and a row that cannot be read is never
    /// leased and left unsent.
    @Suite("Gateway store: receipts and unreadable rows (SQLite and PostgreSQL)", .serialized, .timeLimit(.minutes(10)))
    struct GatewayStoreRowTests {
        typealias F = StoreFixtures

        /// A delivery whose row no longer reads (here an `environment` no build knows) ends `rejected`, reason
        /// `undecodable_record`, with its event, in the claim that found it; the rest of the batch is claimed
        /// and sent, and it is never claimed again. Before, the claim leased it and dropped it, again at every
        /// lapse of its lease, and it stayed `queued` for ever.
        @Test(arguments: StoreBackend.allCases)
        func aRowThatCannotBeReadEndsRejectedAndTheBatchGoesOn(_ backend: StoreBackend) async throws {
            try await withStore(backend) { store in
                let devices = [F.device("a", user: "u", token: 1), F.device("b", user: "u", token: 2), F.device("c", user: "u", token: 3)]
                for d in devices { _ = try await store.putDevice(d, maxDevicesPerUser: 10) }
                try await store.insertMessage(F.message("m", devices: devices, at: 1000), idempotency: nil)
                try await executeBehindTheStore(store, "UPDATE deliveries SET environment = 'bogus' WHERE delivery_id = 'd-m-b'")
                let claims = try await store.claimDue(app: "chat", platform: .apns, now: 1000, leaseUntil: 5000, limit: 10)
                #expect(claims.map(\.deviceID).sorted() == ["a", "c"])
                let b = try #require(try await store.message(app: "chat", messageID: "m")?.deliveries.first { $0.deviceID == "b" })
                #expect(b.state == .rejected && b.reason == "undecodable_record" && b.attempts == 0 && b.nextAttemptAt == nil)
                let events = try #require(try await store.events(app: "chat", after: nil, since: 0, limit: 10))
                #expect(events.map(\.type) == [.deliveryRejected])
                for claim in claims { #expect(try await store.complete(claim, outcome: .accepted(status: 200), unregisteredAt: nil, now: 1100)) }
                // Long after every lease would have lapsed, nothing is due.
                #expect(try await store.claimDue(app: "chat", platform: .apns, now: 100_000, leaseUntil: 200_000, limit: 10).isEmpty)
            }
        }

        /// Failure reports add up per app, key id and reason (the shared upsert: `MIN` on SQLite, `LEAST` on PostgreSQL).
        @Test(arguments: StoreBackend.allCases)
        func failureReportsAddUpPerAppKeyAndReason(_ backend: StoreBackend) async throws {
            try await withStore(backend) { store in
                _ = try await store.putDevice(F.device("a", user: "u", token: 1, kid: "abcdefabcdefabcd"), maxDevicesPerUser: 10)
                #expect(try await store.recordReport(app: "chat", kid: "abcdefabcdefabcd", reason: "decrypt_failed", count: 2, now: 1000) == ["chat"])
                #expect(try await store.recordReport(app: "chat", kid: "abcdefabcdefabcd", reason: "decrypt_failed", count: 3, now: 2000) == ["chat"])
                let reports = try await store.dashboard(now: 3000).apps["chat"]?.reports ?? []
                #expect(reports.map(\.count) == [5] && reports.first?.lastAt == 2000)
                #expect(try await store.device(app: "chat", deviceID: "a")?.lastReport?.count == 3)
            }
        }

        /// A receipt reads and locks the one delivery it names: another transaction holding a lock on another
        /// delivery of the same message does not hold it up. Before, it read every delivery of the message
        /// `FOR UPDATE` and waited for that lock until `lock_timeout` failed it.
        @Test func aReceiptLocksItsOwnDeliveryOnly() async throws {
            var logger = Logger(label: "store-test")
            logger.logLevel = .warning
            var options = PostgresGatewayStore.Options()
            options.lockTimeout = .seconds(1)
            let store = try await PostgresGatewayStore.open(url: try await PostgresCluster.shared().makeDatabase(), options: options, logger: logger)
            do {
                let devices = [F.device("a", user: "u", token: 1), F.device("b", user: "u", token: 2)]
                for d in devices { _ = try await store.putDevice(d, maxDevicesPerUser: 10) }
                try await store.insertMessage(F.message("m", devices: devices, at: 1000), idempotency: nil)
                let (matched, wrong) = try await store.client.withConnection { conn in
                    try await conn.rows("BEGIN", logger: logger)
                    try await conn.rows("SELECT 1 AS k FROM deliveries WHERE delivery_id = 'd-m-b' FOR UPDATE", logger: logger)
                    do {
                        let matched = try await store.recordReceipt(messageID: "m", tokenSHA256: SHA256Hasher.hash(Array("r-d-m-a".utf8)),
                                                                    revealed: false, now: 2000)
                        let wrong = try await store.recordReceipt(messageID: "m", tokenSHA256: SHA256Hasher.hash(Array("nope".utf8)),
                                                                  revealed: false, now: 2000)
                        try await conn.rows("ROLLBACK", logger: logger)
                        return (matched, wrong)
                    } catch {
                        _ = try? await conn.rows("ROLLBACK", logger: logger)
                        throw error
                    }
                }
                #expect(matched == .matched(app: "chat", changed: true))
                #expect(wrong == .wrongToken)
                #expect(try await store.message(app: "chat", messageID: "m")?.deliveries.map(\.state) == [.delivered, .queued])
            } catch {
                await store.close()
                throw error
            }
            await store.close()
        }
    }
}
