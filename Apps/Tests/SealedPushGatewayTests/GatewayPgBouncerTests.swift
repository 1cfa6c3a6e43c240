import Foundation
@testable import SealedPushGateway
import SealedPushTestSupport
import SealedPushWire
import Testing

/// Debian's PgBouncer in front of the test cluster, in transaction mode (each transaction may run on another server
/// connection: no session state survives between them), started and stopped by the test like the cluster.
final class PgBouncer: Sendable {
    static let binary = "/usr/sbin/pgbouncer"
    let directory: String
    let port: Int
    let cluster: PostgresCluster

    private init(directory: String, port: Int, cluster: PostgresCluster) {
        self.directory = directory
        self.port = port
        self.cluster = cluster
    }

    /// Starts PgBouncer (as `postgres`: it refuses to run as root) on a free loopback port, in front of `cluster`.
    static func start(cluster: PostgresCluster) async throws -> PgBouncer {
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            throw PostgresClusterError(description: "PgBouncer is not installed (\(binary)); the PgBouncer test needs it: apt-get install pgbouncer")
        }
        let directory = "/tmp/sealedpush-pgbouncer-\(UUID().uuidString.prefix(8))"
        let port = try GatewayHarness.freePort()
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let ini = """
            [databases]
            * = host=127.0.0.1 port=\(cluster.port)

            [pgbouncer]
            listen_addr = 127.0.0.1
            listen_port = \(port)
            unix_socket_dir =
            auth_type = trust
            auth_file = \(directory)/users.txt
            admin_users = postgres
            pool_mode = transaction
            max_client_conn = 200
            default_pool_size = 8
            server_reset_query =
            logfile = \(directory)/pgbouncer.log
            pidfile = \(directory)/pgbouncer.pid

            """
        try ini.write(toFile: directory + "/pgbouncer.ini", atomically: true, encoding: .utf8)
        try "\"postgres\" \"\"\n".write(toFile: directory + "/users.txt", atomically: true, encoding: .utf8)
        try PostgresCluster.run(["/bin/chown", "-R", "postgres:postgres", directory])
        try PostgresCluster.run(["/bin/chmod", "700", directory])
        // -d: PgBouncer forks into the background and writes its pidfile; stop() and the watchdog use it.
        try PostgresCluster.run(["/usr/sbin/runuser", "-u", "postgres", "--", binary, "-d", directory + "/pgbouncer.ini"], in: directory)
        let bouncer = PgBouncer(directory: directory, port: port, cluster: cluster)
        _ = try? PostgresCluster.spawn(["/bin/sh", "-c", """
            while kill -0 \(getpid()) 2>/dev/null; do sleep 1; done
            kill -9 "$(cat '\(directory)/pgbouncer.pid' 2>/dev/null)" 2>/dev/null; sleep 1; rm -rf '\(directory)'
            """], in: "/", output: "/dev/null")
        try await waitUntil("PgBouncer answers", within: .seconds(20)) { (try? await bouncer.admin("SHOW VERSION")) != nil }
        return bouncer
    }

    /// `url` (a database of the cluster) reached through PgBouncer instead.
    func url(for url: String) -> String { url.replacingOccurrences(of: ":\(cluster.port)/", with: ":\(port)/") }

    /// The rows of a command of PgBouncer's admin console (`SHOW STATS`, …), each a list of columns.
    func admin(_ command: String) async throws -> [[String]] {
        let text = try await offPool { [self] in
            try PostgresCluster.run(["/usr/sbin/runuser", "-u", "postgres", "--", "\(cluster.bin)/psql", "-h", "127.0.0.1", "-p", "\(port)",
                                     "-U", "postgres", "-d", "pgbouncer", "-At", "-F", "\t", "-c", command], in: directory)
        }
        return text.split(separator: "\n").map { $0.split(separator: "\t", omittingEmptySubsequences: false).map(String.init) }
    }

    /// The end of PgBouncer's log (for a failure's message).
    var logTail: String {
        String(((try? String(contentsOfFile: directory + "/pgbouncer.log", encoding: .utf8)) ?? "(no log)").suffix(3000))
    }

    /// Stops PgBouncer and removes its directory.
    func stop() {
        if let text = try? String(contentsOfFile: directory + "/pgbouncer.pid", encoding: .utf8), let pid = pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines)) {
            // SIGKILL: Debian's PgBouncer 1.18 stayed up after SIGTERM, SIGINT and SIGQUIT here (it holds nothing the
            // test needs: the cluster is the one that keeps data).
            kill(pid, SIGKILL)
        }
        try? FileManager.default.removeItem(atPath: directory)
    }
}

extension GatewayPostgresSuites {
    /// #47: the gateway through PgBouncer in transaction mode, `listen_notify: false` (a pooled connection cannot hold
    /// a `LISTEN`) and `session_parameters: false` (PgBouncer refuses `statement_timeout` and the like at connect, and
    /// the gateway never started: "unsupported startup parameter"): migrations, registration, single messages and a
    /// batch, every one delivered, the workers polling.
    @Suite("Gateway on PostgreSQL through PgBouncer (transaction mode)", .serialized, .timeLimit(.minutes(5)))
    struct GatewayPgBouncerTests {
        @Test func everyMessageIsDeliveredThroughPgBouncerInTransactionMode() async throws {
            let cluster = try await PostgresCluster.shared()
            let direct = try await cluster.makeDatabase()
            let bouncer = try await PgBouncer.start(cluster: cluster)
            defer { bouncer.stop() }
            let pools = try await bouncer.admin("SHOW CONFIG").filter { $0.first == "pool_mode" }
            #expect(pools.first?.dropFirst().first == "transaction", "PgBouncer runs in transaction mode: \(pools)")
            do { try await throughPgBouncer(cluster, direct, bouncer) } catch {
                Issue.record("PgBouncer's log: \(bouncer.logTail)")
                throw error
            }
        }

        func throughPgBouncer(_ cluster: PostgresCluster, _ direct: String, _ bouncer: PgBouncer) async throws {
            try await withGateway("pg-bouncer", extraRoot: JSONObject([("listen_notify", false), ("session_parameters", false)]), database: bouncer.url(for: direct)) { g in
                try await g.register(try Phone(in: g.directory, name: "p", token: hexToken(0x530)), device: "p", user: "u")
                var ids: [String] = []
                for n in 0..<10 {
                    let answer = try await g.send(JSONObject([("user_id", "u")]), body: "through the pooler \(n)")
                    try #require(answer.status == 202, "\(answer.status) \(answer.text)")
                    ids.append(try #require(answer.json["message_id"]?.stringValue))
                }
                let messages: [JSONValue] = (0..<20).map { n in
                    .object(JSONObject([("to", .object(JSONObject([("user_id", "u")]))), ("body", .string("batch \(n)"))]))
                }
                let batch = try await g.api.call(.POST, "/v1/apps/chat/messages/batch", json: .object(JSONObject([("messages", .array(messages))])))
                try #require(batch.status == 200, "\(batch.status) \(batch.text)")
                for result in batch.json["results"]?.arrayValue ?? [] {
                    let o = result.objectValue
                    #expect(o?["status"]?.intValue == 202, "\(result)")
                    if let id = o?["message"]?.objectValue?["message_id"]?.stringValue { ids.append(id) }
                }
                #expect(ids.count == 30)
                for id in ids { try await g.waitForStates(id, ["accepted"], within: .seconds(60)) }
                #expect(try await g.admin.call(.GET, "/readyz", key: nil).status == 200)
                // Everything went through the pooler: its counters saw the gateway's transactions on this database.
                let name = String(direct.split(separator: "?").first!.split(separator: "/").last!)
                let stats = try await bouncer.admin("SHOW STATS").first { $0.first == name }
                #expect(Int(stats?.dropFirst().first ?? "") ?? 0 > 30, "PgBouncer counted the gateway's transactions: \(String(describing: stats))")
                // And no connection listens: nothing of the session outlives a transaction here.
                let listeners = try await cluster.query(direct, "SELECT count(*) FROM pg_stat_activity WHERE query ILIKE 'LISTEN%'")
                #expect(listeners.first?.first == "0")
            }
        }
    }
}
