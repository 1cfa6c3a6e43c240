import Foundation
import NIOCore
import NIOPosix
@testable import SealedPushGateway
import ServiceLifecycle
import SealedPushTestSupport
import SealedPushWire
import Testing

/// A minimal configuration text with `members` at the top level, for `GatewayConfiguration.parse`.
func configurationText(_ members: String, app: String = "") -> String {
    """
    {"public_url": "https://push.example.com", \(members) "apps": [{"id": "chat", \(app)
     "topic": "com.example.chat", "apns": {"auth_key": "key.p8", "key_id": "KEY0000001", "team_id": "TEAM000001"},
     "api_keys": [{"id": "k", "sha256": "\(String(repeating: "ab", count: 32))", "scopes": ["read"]}]}]}
    """
}

/// Opens a TCP connection to `port` on loopback, writes `bytes`, and waits (at most `within`) for the server to
/// close it; whether it did.
func serverCloses(port: Int, after bytes: String, within: Duration) async throws -> Bool {
    let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton).connect(host: "127.0.0.1", port: port).get()
    try await channel.writeAndFlush(ByteBuffer(string: bytes))
    let closed = channel.closeFuture
    return try await withThrowingTaskGroup(of: Bool.self) { group in
        group.addTask { try await closed.get(); return true }
        group.addTask { try await Task.sleep(for: within); return false }
        let first = try await group.next()!
        group.cancelAll()
        if !first { try? await channel.close() }
        return first
    }
}

extension GatewaySuites {
    /// The security review's findings on the gateway's edges (#36): configuration, listeners, slow clients, the
    /// device endpoints' limit.
    @Suite("Gateway hardening: configuration, listeners, slow clients, device limits", .serialized, .timeLimit(.minutes(5)))
    struct GatewayHardeningTests {
        /// A PostgreSQL password is never inline; TLS is required by default for a remote database; the password
        /// file and an existing SQLite file must not be readable by others; the admin listener off loopback warns.
        @Test func theDatabaseAndAdminSettingsAreChecked() throws {
            let directory = try GatewayHarness.parseTestDirectory("gateway-hardening")
            defer { try? FileManager.default.removeItem(at: directory) }
            func parse(_ members: String, app: String = "") throws(GatewayConfigurationError) -> GatewayConfiguration {
                try GatewayConfiguration.parse(Array(configurationText(members, app: app).utf8), baseDirectory: directory.path)
            }
            func member(_ members: String) -> String? {
                do { _ = try parse(members); return nil } catch { return error.member }
            }
            #expect(member(#""database": "postgres://gw:secret@db.example.com/gw","#) == "/database")
            do { _ = try parse(#""database": "postgres://gw:secret@db.example.com/gw","#) } catch {
                #expect(!error.description.contains("secret"), "the password is never quoted: \(error)")
            }
            #expect(try parse(#""database": "postgres://gw@db.example.com:5432/gw","#).database == .postgres(url: "postgres://gw@db.example.com:5432/gw?sslmode=require"))
            #expect(try parse(#""database": "postgres://gw@10.0.0.5/gw?sslmode=disable","#).database == .postgres(url: "postgres://gw@10.0.0.5/gw?sslmode=disable"))
            #expect(try parse(#""database": "postgres://gw@127.0.0.1/gw","#).database == .postgres(url: "postgres://gw@127.0.0.1/gw"))
            #expect(try parse(#""database": "postgres://gw@localhost/gw?host=/run/postgresql","#).database
                    == .postgres(url: "postgres://gw@localhost/gw?host=/run/postgresql"))

            let password = directory.appendingPathComponent("db.password")
            try Data("hunter2-hunter2".utf8).write(to: password)
            try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: password.path)
            #expect(member(#""database": "postgres://gw@10.0.0.5/gw", "database_password_file": "db.password","#) == "/database_password_file")
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: password.path)
            #expect(try parse(#""database": "postgres://gw@10.0.0.5/gw", "database_password_file": "db.password","#).databasePasswordFile == password.path)

            let database = directory.appendingPathComponent("old.db")
            try Data().write(to: database)
            try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: database.path)
            #expect(member(#""database": "sqlite:old.db","#) == "/database")
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: database.path)
            #expect(member(#""database": "sqlite:old.db","#) == nil)

            #expect(try parse("").warnings.isEmpty)
            #expect(try parse(#""admin_listen": "0.0.0.0:9090","#).warnings.contains { $0.hasPrefix("/admin_listen") })
            #expect(try parse(#""admin_hosts": ["Metrics.Internal"],"#).adminHosts == ["metrics.internal"])
            #expect(member(#""admin_hosts": ["metrics.internal:9090"],"#) == "/admin_hosts/0")

            let limits = try parse(#""http": {"header_timeout": 3, "max_connections": 10}, "device_rate_limit": 7,"#)
            #expect(limits.http.headerTimeout == .seconds(3) && limits.http.bodyTimeout == .seconds(10) && limits.http.maxConnections == 10)
            #expect(limits.deviceRateLimit == 7)
            #expect(member(#""http": {"header_timeout": 0},"#) == "/http/header_timeout")
            #expect(member(#""http": {"headers_timeout": 5},"#) == "/http/headers_timeout")
            #expect(try parse("", app: #""max_fanout": 5,"#).apps[0].maxFanout == 5)
            #expect(try parse("").apps[0].maxFanout == 10_000)
        }

        /// #36 bug 8: a busy listen address stops the start before anything listens, naming the member and the address.
        @Test func aBusyListenAddressNamesTheMember() async throws {
            let busy = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).get()
            let port = try #require(busy.localAddress?.port)
            let apns = try await TestAPNs()
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gateway-busy-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: directory) }
            let config = try GatewayHarness.writeConfiguration(in: directory, apns: apns, listen: "127.0.0.1:\(port)")
            do {
                try await GatewayServer.checkListenAddresses(try GatewayConfiguration.load(path: config))
                Issue.record("a busy address passed the check")
            } catch {
                #expect(error.member == "/listen" && error.problem.contains("127.0.0.1:\(port)") && error.problem.contains("in use"), "\(error)")
            }
            let result = try await offPool { try ChildProcess.sealedpushServer(["gateway", "--config", config], in: directory, timeout: 60) }
            #expect(result.status == 1)
            #expect(result.stderr.contains("/listen") && result.stderr.contains("127.0.0.1:\(port)"), "\(result.stderr)")
            #expect(!result.stdoutText.contains("listening"), "nothing listened: \(result.stdoutText)")
            try await busy.close()
            await apns.stop()
        }

        /// Slowloris: a request head that never completes, and a body that stalls, are cut off at their deadlines
        /// (`http.header_timeout`, `http.body_timeout`); a connection that sends nothing too.
        @Test func slowClientsAreDisconnected() async throws {
            let limits = JSONObject([("header_timeout", .int(1)), ("body_timeout", .int(1)), ("idle_timeout", .int(1))])
            try await withGateway("slowloris", extraRoot: JSONObject([("http", .object(limits))])) { g in
                let partialHead = "GET /openapi.json HTTP/1.1\r\nHost: x\r\nX-Slow: "
                let partialBody = "POST /v1/receipts HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
                let headClosed = try await serverCloses(port: g.apiPort, after: partialHead, within: .seconds(20))
                let bodyClosed = try await serverCloses(port: g.apiPort, after: partialBody, within: .seconds(20))
                let silentClosed = try await serverCloses(port: g.adminPort, after: "", within: .seconds(20))
                #expect(headClosed, "a request head that never completes is cut off")
                #expect(bodyClosed, "a body that stalls is cut off")
                #expect(silentClosed, "a connection that sends nothing is cut off")
                // A complete request is answered as before.
                #expect(try await g.api.call(.GET, "/openapi.json", key: nil).status == 200)
            }
        }

        /// Gateway v1 §6, revision 2 (#36 bug 1): the per-source limit counts refusals, never valid receipts. A source
        /// over its budget still has its valid receipts accepted; only its refusals become `429`.
        @Test func theDeviceLimitCountsRefusalsNotReceipts() async throws {
            var options = GatewayOptions()
            options.deviceRateLimit = 2
            // The monotonic reading stands still unless the test advances it: no refill, however slow the machine.
            let frozen = SealedPushManualClock()
            options.clock = SealedPushClock(wall: SealedPushClock.system.wall, monotonic: frozen.clock.monotonic)
            try await withGateway("device-limit", options: options) { g in
                let phones = try (1...3).map { try Phone(in: g.directory, name: "p\($0)", token: hexToken($0)) }
                for (n, phone) in phones.enumerated() { try await g.register(phone, device: "d\(n)", user: "u") }
                // More valid receipts than the budget: every one is accepted.
                let sent = try await g.send(JSONObject([("user_id", "u")]))
                let id = try #require(sent.json["message_id"]?.stringValue)
                try await g.waitForStates(id, ["accepted"])
                for phone in phones {
                    let push = try #require(g.apns.pushes.first { $0.deviceToken == phone.token })
                    #expect(await phone.open(push.payload, transport: g.receipts).outcome == .decrypted)
                }
                try await g.waitForStates(id, ["delivered"])
                // Refusals spend the budget: two 404s, then 429 with Retry-After.
                let bogus = JSONValue.object(JSONObject([("v", .int(1)), ("type", "delivered"), ("id", "0123456789abUnknownMsg"),
                                                         ("token", .string(String(repeating: "A", count: 43))), ("at", .int(1_795_000_000))]))
                for _ in 1...2 {
                    let refused = try await g.api.call(.POST, "/v1/receipts", key: nil, json: bogus)
                    #expect(refused.status == 404, "\(refused.status) \(refused.text)")
                }
                let limited = try await g.api.call(.POST, "/v1/receipts", key: nil, json: bogus)
                #expect(limited.status == 429 && limited.header("Retry-After") == "1", "\(limited.text)")
                // Over its budget, the source's valid receipt still lands.
                let late = try await g.send(JSONObject([("device_ids", .array(["d0"]))]))
                let lateID = try #require(late.json["message_id"]?.stringValue)
                try await g.waitForStates(lateID, ["accepted"])
                let push = try #require(g.apns.pushes.last { $0.deviceToken == phones[0].token })
                #expect(await phones[0].open(push.payload, transport: g.receipts).outcome == .decrypted)
                try await g.waitForStates(lateID, ["delivered"], within: .seconds(30))
                #expect(try await g.api.call(.POST, "/v1/receipts", key: nil, json: bogus).status == 429)
                // The limit refills on the injected clock: 2 a second, so half a second gives back one refusal, and only one.
                frozen.advance(by: .milliseconds(500))
                #expect(try await g.api.call(.POST, "/v1/receipts", key: nil, json: bogus).status == 404)
                #expect(try await g.api.call(.POST, "/v1/receipts", key: nil, json: bogus).status == 429)
            }
        }

        /// The group owns the gateway's resources: after SIGTERM's graceful shutdown the store and the APNs clients
        /// are closed by the group itself (its first service, `GatewayResources`), and a reload's replaced clients
        /// are retired by it too, not by an unstructured task.
        @Test func theServiceGroupClosesTheStoreAndClients() async throws {
            let g = try await GatewayHarness(name: "resources")
            try await g.gateway.reload(try GatewayConfiguration.load(path: g.directory.appendingPathComponent("gateway.json").path))
            #expect(g.gateway.retired.withLockedValue { $0.count } == 2, "the replaced apps wait to be retired")
            await g.group.triggerGracefulShutdown()
            _ = try? await g.running.value
            #expect(g.gateway.closed.withLockedValue { $0 }, "the group closed the gateway")
            #expect(g.gateway.retired.withLockedValue { $0.isEmpty })
            await g.stop()
        }
    }
}
