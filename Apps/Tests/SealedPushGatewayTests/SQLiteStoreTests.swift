import Foundation
import Logging
@testable import SealedPushGateway
import SQLiteNIO
import Testing

extension GatewaySuites {
    /// The SQLite store's group commit: concurrent transactions share a commit, and one that fails neither
    /// undoes nor fails the others.
    @Suite("Gateway SQLite store", .serialized, .timeLimit(.minutes(5)))
    struct SQLiteStoreTests {
        static func device(_ id: String, user: String, token: Int) -> DeviceRecord {
            DeviceRecord(app: "chat", deviceID: id, userID: user, apnsToken: String(format: "%064x", token), environment: .production,
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
            let plans: [(String, [SQLiteData], String)] = [
                (SQLiteGatewayStore.userDevicesSQL, [.text("chat"), .text("u1")], "SEARCH devices USING INDEX devices_user (app=? AND user_id=?)"),
                (SQLiteGatewayStore.claimSQL, [.integer(9), .text("chat"), .integer(5), .integer(5), .integer(10)],
                 "SEARCH deliveries USING COVERING INDEX deliveries_due (app=? AND state=? AND next_attempt_at<?)"),
                (SQLiteGatewayStore.queueDepthsSQL, [], "SCAN deliveries USING COVERING INDEX deliveries_queued"),
            ]
            for (sql, binds, expected) in plans {
                let plan = try await store.queryPlan(sql, binds)
                #expect(plan.contains(expected), "\(sql): \(plan)")
                // No full scan of a table, nor of an index other than the queued rows' partial one.
                #expect(plan.allSatisfy { !$0.hasPrefix("SCAN") || $0.hasSuffix("deliveries_queued") }, "\(sql): \(plan)")
                #expect(plan.allSatisfy { !$0.contains("TEMP B-TREE") }, "\(sql) sorts: \(plan)")
            }
            await store.close()
        }
    }
}
