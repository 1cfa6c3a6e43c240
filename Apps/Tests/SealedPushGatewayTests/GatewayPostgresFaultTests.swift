import Foundation
import NIOConcurrencyHelpers
@testable import SealedPushGateway
import SealedPushTestSupport
import SealedPushWire
import Testing

extension GatewayPostgresSuites {
    /// Faults on a real PostgreSQL (#47), besides the restart of `GatewayPostgresTests`: the gateway answers `503`
    /// with `Retry-After` while the database cannot take writes (never `500`), recovers by itself, and delivers every
    /// message it answered `202`.
    @Suite("Gateway on PostgreSQL: faults", .serialized, .timeLimit(.minutes(5)))
    struct GatewayPostgresFaultTests {
        /// The URL of the cluster's maintenance database beside `url`'s (settings of a database are changed from there,
        /// where they do not apply).
        static func maintenance(_ url: String) -> String {
            var parts = url.split(separator: "?", maxSplits: 1).map(String.init)
            if let slash = parts[0].lastIndex(of: "/") { parts[0] = String(parts[0][..<slash]) + "/postgres" }
            return parts.joined(separator: "?")
        }

        static func databaseName(_ url: String) -> String {
            String(url.split(separator: "?").first!.split(separator: "/").last!)
        }

        /// Ends every connection the gateway holds to `url`'s database (not the caller's own).
        static func terminateConnections(_ url: String) async throws {
            _ = try await PostgresCluster.shared().query(maintenance(url), """
                SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '\(databaseName(url))' AND pid <> pg_backend_pid()
                """)
        }

        /// The database made read-only (`default_transaction_read_only`, as during maintenance or on a standby): a send
        /// is `503 unavailable` with `Retry-After`, never `500`; once writable again the gateway takes and delivers
        /// messages without a restart.
        @Test func aReadOnlyDatabaseIs503WithRetryAfterUntilWritable() async throws {
            let cluster = try await PostgresCluster.shared()
            let url = try await cluster.makeDatabase()
            let name = Self.databaseName(url)
            try await withGateway("pg-readonly", database: url) { g in
                try await g.register(try Phone(in: g.directory, name: "p", token: hexToken(0x510)), device: "p", user: "u")
                _ = try await cluster.query(Self.maintenance(url), "ALTER DATABASE \"\(name)\" SET default_transaction_read_only = on")
                try await Self.terminateConnections(url)
                var refused: Answer?
                try await waitUntil("a send refused while read-only", within: .seconds(30)) {
                    let answer = try await g.send(JSONObject([("user_id", "u")]), body: "read-only")
                    #expect(answer.status != 500, "\(answer.text)")
                    if answer.status == 503 { refused = answer }
                    return refused != nil
                }
                let answer = try #require(refused)
                #expect(answer.code == "unavailable", "\(answer.text)")
                #expect(Int(answer.header("Retry-After") ?? "") ?? 0 > 0, "Retry-After tells the sender when to come back")
                _ = try await cluster.query(Self.maintenance(url), "ALTER DATABASE \"\(name)\" RESET default_transaction_read_only")
                try await Self.terminateConnections(url)
                var id: String?
                try await waitUntil("a send accepted once writable", within: .seconds(30)) {
                    let answer = try await g.send(JSONObject([("user_id", "u")]), body: "writable")
                    #expect(answer.status != 500, "\(answer.text)")
                    id = answer.status == 202 ? answer.json["message_id"]?.stringValue : nil
                    return id != nil
                }
                try await g.waitForStates(try #require(id), ["accepted"], within: .seconds(60))
            }
        }

        /// The disk full: PostgreSQL refuses every write with SQLSTATE 53100 (`disk_full`, "could not extend file … No
        /// space left on device"). Filling a real disk needs a filesystem of its own (a mount this test cannot make), so
        /// statement triggers raise that same error on every write to the queue's tables. A send and a batch are `503`
        /// with `Retry-After` (never `500`); a message answered `202` just before is delivered once space is back,
        /// and so is one sent after, without a restart.
        @Test func aFullDiskIs503WithRetryAfterAndLosesNothing() async throws {
            let cluster = try await PostgresCluster.shared()
            let url = try await cluster.makeDatabase()
            var options = GatewayOptions()
            options.lease = .seconds(5)
            let tables = ["messages", "deliveries", "events"]
            let fill = ["""
                CREATE FUNCTION sp_disk_full() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN RAISE EXCEPTION 'could not extend file "base/1/2": No space left on device' USING ERRCODE = 'disk_full'; END $$
                """] + tables.map { "CREATE TRIGGER sp_full BEFORE INSERT OR UPDATE OR DELETE ON \($0) FOR EACH STATEMENT EXECUTE FUNCTION sp_disk_full()" }
            let free = tables.map { "DROP TRIGGER sp_full ON \($0)" } + ["DROP FUNCTION sp_disk_full()"]
            try await withGateway("pg-disk-full", options: options, database: url) { g in
                try await g.register(try Phone(in: g.directory, name: "p", token: hexToken(0x540)), device: "p", user: "u")
                let before = try await g.send(JSONObject([("user_id", "u")]), body: "just before the disk filled")
                try #require(before.status == 202, "\(before.text)")
                for sql in fill { _ = try await cluster.query(url, sql) }
                let refused = try await g.send(JSONObject([("user_id", "u")]), body: "while full")
                #expect(refused.status == 503, "\(refused.status) \(refused.text)")
                #expect(refused.code == "unavailable", "\(refused.text)")
                #expect(Int(refused.header("Retry-After") ?? "") ?? 0 > 0, "Retry-After tells the sender when to come back")
                let batch = try await g.api.call(.POST, "/v1/apps/chat/messages/batch", json: .object(JSONObject([("messages", .array([
                    .object(JSONObject([("to", .object(JSONObject([("user_id", "u")]))), ("body", "batch while full")])),
                ]))])))
                #expect(batch.status == 503 || batch.json["results"]?.arrayValue?.allSatisfy { $0.objectValue?["status"]?.intValue == 503 } == true,
                        "\(batch.status) \(batch.text)")
                #expect(batch.status != 500)
                // The workers meet the full disk too (claims and outcomes are writes); they go on trying.
                try await Task.sleep(for: .seconds(2))
                #expect(try await g.admin.call(.GET, "/healthz", key: nil).status == 200, "the gateway is still up")
                for sql in free { _ = try await cluster.query(url, sql) }
                let after = try await g.send(JSONObject([("user_id", "u")]), body: "space is back")
                try #require(after.status == 202, "\(after.text)")
                for answer in [before, after] {
                    try await g.waitForStates(try #require(answer.json["message_id"]?.stringValue), ["accepted"], within: .seconds(60))
                }
            }
        }

        /// Every connection of the gateway's killed (`pg_terminate_backend`) again and again while batches are
        /// written: each batch is answered `200` with per-message results, or `503` as a whole, never `500`; every
        /// message answered `202` is delivered.
        @Test func connectionsKilledDuringBatchesLoseNoAcceptedMessage() async throws {
            let url = try await PostgresCluster.shared().makeDatabase()
            var options = GatewayOptions()
            options.lease = .seconds(5)
            try await withGateway("pg-kill-batch", options: options, database: url) { g in
                try await g.register(try Phone(in: g.directory, name: "p", token: hexToken(0x520)), device: "p", user: "u")
                let accepted = NIOLockedValueBox<[String]>([])
                let done = NIOLockedValueBox(false)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        defer { done.withLockedValue { $0 = true } }
                        for round in 0..<6 {
                            let messages: [JSONValue] = (0..<20).map { n in
                                .object(JSONObject([("to", .object(JSONObject([("user_id", "u")]))), ("body", .string("r\(round)-\(n)"))]))
                            }
                            let answer = try await g.api.call(.POST, "/v1/apps/chat/messages/batch",
                                                              json: .object(JSONObject([("messages", .array(messages))])))
                            #expect(answer.status == 200 || answer.status == 503, "\(answer.status) \(answer.text)")
                            for result in answer.json["results"]?.arrayValue ?? [] {
                                let o = result.objectValue
                                let status = o?["status"]?.intValue
                                #expect(status == 202 || status == 503, "\(result)")
                                if status == 202, let id = o?["message"]?.objectValue?["message_id"]?.stringValue {
                                    accepted.withLockedValue { $0.append(id) }
                                }
                            }
                        }
                    }
                    group.addTask {
                        while !done.withLockedValue({ $0 }) {
                            try await Self.terminateConnections(url)
                            try await Task.sleep(for: .milliseconds(150))
                        }
                    }
                    try await group.waitForAll()
                }
                let ids = accepted.withLockedValue { $0 }
                #expect(!ids.isEmpty, "some batches were accepted between the kills")
                for id in ids { try await g.waitForStates(id, ["accepted"], within: .seconds(120)) }
                #expect(try await g.admin.call(.GET, "/readyz", key: nil).status == 200)
            }
        }
    }
}
