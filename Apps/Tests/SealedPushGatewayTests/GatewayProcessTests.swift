import AsyncHTTPClient
import Foundation
import SealedPushGateway
import SealedPushWire
import SealedPushTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

extension GatewaySuites {
    /// `sealedpush-server gateway` as a process: SIGKILL and restart lose nothing answered 202, SIGTERM drains and
    /// exits 0, and neither its database nor its log holds plaintext.
    @Suite("sealedpush-server gateway as a process", .serialized, .timeLimit(.minutes(10)))
    struct GatewayProcessTests {
        static func start(_ config: String, in directory: URL) async throws -> (ChildProcess, Int) {
            let process = try ChildProcess(launching: ProjectPaths.sealedpushServerBinary, ["gateway", "--config", config, "--log-level", "info"],
                                           in: directory, readLines: true)
            let listening = try await offPool { process.waitForLine(startingWith: "api listening on", within: .seconds(60)) }
            let line = try #require(listening, "the gateway printed no listening line: \(process.stderrText)")
            let port = try #require(line.split(separator: ":").last.flatMap { Int($0) })
            return (process, port)
        }

        @Test func sigkillWithDeliveriesQueuedLosesNothingAnswered202() async throws {
            // A slow APNs and two pushes in flight: most deliveries are still queued when the gateway is killed.
            let apns = try await TestAPNs(latency: .milliseconds(100))
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gateway-kill-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: directory) }
            let config = try GatewayHarness.writeConfiguration(in: directory, apns: apns, extraApp: JSONObject([("max_in_flight", .int(2))]))
            let http = HTTPClient(eventLoopGroupProvider: .singleton)
            defer { Task { try? await http.shutdown(); await apns.stop() } }
            var (process, port) = try await Self.start(config, in: directory)
            var client = GatewayClient(http: http, base: "http://127.0.0.1:\(port)")
            var tokens: [String] = []
            for n in 0..<20 {
                let phone = try Phone(in: directory, name: "phone-\(n)", token: hexToken(0x100 + n))
                tokens.append(phone.token)
                let r = try await client.call(.PUT, "/v1/apps/chat/devices/d\(n)", json: .object(JSONObject([
                    ("user_id", .string("u\(n)")), ("apns_token", .string(phone.token)), ("environment", "sandbox"), ("key_record", .object(phone.record))])))
                #expect(r.status == 201, "\(r.text)")
            }
            var messages: [String] = []
            for n in 0..<60 {
                let r = try await client.call(.POST, "/v1/apps/chat/messages", json: .object(JSONObject([
                    ("to", .object(JSONObject([("user_id", .string("u\(n % 20)"))]))), ("body", "kill test")])))
                #expect(r.status == 202)
                if let id = r.json["message_id"]?.stringValue { messages.append(id) }
            }
            let first = process
            let killed = try await offPool { first.kill() }
            #expect(killed.killed(by: SIGKILL))
            let before = apns.pushes.count
            (process, port) = try await Self.start(config, in: directory)
            defer { _ = process.terminate(grace: .seconds(30)) }  // at once when the test ended it below
            client = GatewayClient(http: http, base: "http://127.0.0.1:\(port)")
            var apnsIDs = Set<String>()
            try await waitUntil("every message answered 202 to reach APNs after the restart", within: .seconds(120)) {
                apnsIDs = []
                for id in messages {
                    let m = try await client.call(.GET, "/v1/apps/chat/messages/\(id)").json
                    for d in m["deliveries"]?.arrayValue ?? [] {
                        guard d.objectValue?["state"]?.stringValue == "accepted", let a = d.objectValue?["apns_id"]?.stringValue else { return false }
                        apnsIDs.insert(a)
                    }
                }
                return true
            }
            let received = apns.pushes
            #expect(apnsIDs.count == 60)
            #expect(apnsIDs.isSubset(of: Set(received.map(\.apnsID))))
            let restarted = process
            _ = try await offPool { restarted.terminate(grace: .seconds(30)) }
            print("gateway SIGKILL: \(before) of 60 accepted before the kill; \(received.count - 60) sent twice after the restart (same apns-id and collapse id)")
        }

        @Test func sigtermDrainsExitsZeroAndNothingHoldsPlaintext() async throws {
            let apns = try await TestAPNs()
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gateway-term-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: directory) }
            let config = try GatewayHarness.writeConfiguration(in: directory, apns: apns)
            let http = HTTPClient(eventLoopGroupProvider: .singleton)
            defer { Task { try? await http.shutdown(); await apns.stop() } }
            let (process, port) = try await Self.start(config, in: directory)
            let client = GatewayClient(http: http, base: "http://127.0.0.1:\(port)")
            let phone = try Phone(in: directory, name: "p", token: hexToken(0x77))
            _ = try await client.call(.PUT, "/v1/apps/chat/devices/d1", json: .object(JSONObject([
                ("user_id", "u1"), ("apns_token", .string(phone.token)), ("environment", "sandbox"), ("key_record", .object(phone.record))])))
            let canary = "canary-\(UUID().uuidString)"
            for _ in 0..<10 {
                let r = try await client.call(.POST, "/v1/apps/chat/messages", json: .object(JSONObject([
                    ("to", .object(JSONObject([("user_id", "u1")]))), ("title", .string(canary)), ("body", .string(canary))])))
                #expect(r.status == 202)
            }
            let result = try await offPool { process.terminate(grace: .seconds(30)) }
            #expect(result.exitedNormally && result.status == 0, "SIGTERM must exit 0: \(result.stderr)")
            #expect(!result.stderr.contains(canary) && !result.stderr.contains(phone.token) && !result.stderr.contains(Keys.all))
            #expect(result.stderr.contains("POST /v1/apps/{app}/messages 202"), "one log line per request: \(result.stderr)")
            for file in try FileManager.default.contentsOfDirectory(atPath: directory.path) where file.hasPrefix("gateway.db") {
                let bytes = try Data(contentsOf: directory.appendingPathComponent(file))
                #expect(bytes.range(of: Data(canary.utf8)) == nil, "\(file) holds plaintext")
            }
            // The database was closed, not abandoned.
            #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("gateway.db-wal").path))
        }

        @Test func aSecondInstanceOnTheSameFileIsRefused() async throws {
            let apns = try await TestAPNs()
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gateway-two-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: directory) }
            let config = try GatewayHarness.writeConfiguration(in: directory, apns: apns)
            defer { Task { await apns.stop() } }
            let (first, _) = try await Self.start(config, in: directory)
            defer { _ = first.terminate(grace: .seconds(30)) }
            let second = try await offPool { try ChildProcess.sealedpushServer(["gateway", "--config", config], in: directory, timeout: 60) }
            #expect(second.status == 1)
            #expect(second.stderr.contains("gateway.db") && second.stderr.contains("PostgreSQL"), "\(second.stderr)")
            _ = try await offPool { first.terminate(grace: .seconds(30)) }
        }

        @Test func newAPIKeyPrintsAKeyAndItsDigest() throws {
            let result = try ChildProcess.sealedpushServer(["gateway", "new-api-key", "--json"], timeout: 60)
            #expect(result.status == 0)
            let o = try #require(try JSON.parse(result.stdout).objectValue)
            let key = try #require(o["key"]?.stringValue)
            #expect(key.hasPrefix("sp_") && key.count == 43 && key.dropFirst(3).allSatisfy { $0.isLetter || $0.isNumber })
            #expect(o["sha256"]?.stringValue == Keys.sha256(key))
        }

        @Test func aBadConfigurationNamesTheMember() throws {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gateway-badconf-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            try Data(#"{"listen": "127.0.0.1:0", "admin_listen": "127.0.0.1:0", "public_url": "http://127.0.0.1:1", "database": "sqlite:g.db", "apps": [], "lisen": 1}"#.utf8)
                .write(to: directory.appendingPathComponent("g.json"))
            let result = try ChildProcess.sealedpushServer(["gateway", "--config", "g.json"], in: directory, timeout: 60)
            #expect(result.status == 1)
            #expect(result.stderr.contains("/lisen"), "\(result.stderr)")
        }

        /// `lease_seconds` sets the delivery lease (60 s when absent); outside 20–3600, or not an integer, it
        /// stops the start naming the member.
        @Test func leaseSecondsIsReadAndChecked() throws {
            let directory = try GatewayHarness.parseTestDirectory("gateway-lease")
            defer { try? FileManager.default.removeItem(at: directory) }
            func parse(_ member: String) throws(GatewayConfigurationError) -> GatewayConfiguration {
                let text = """
                    {"public_url": "https://push.example.com", "database": "sqlite:g.db", \(member) "apps": [{"id": "chat",
                     "topic": "com.example.chat", "apns": {"auth_key": "key.p8", "key_id": "KEY0000001", "team_id": "TEAM000001"},
                     "api_keys": [{"id": "k", "sha256": "\(String(repeating: "ab", count: 32))", "scopes": ["read"]}]}]}
                    """
                return try GatewayConfiguration.parse(Array(text.utf8), baseDirectory: directory.path)
            }
            #expect(try parse("").lease == .seconds(60))
            #expect(try parse(#""lease_seconds": 20,"#).lease == .seconds(20))
            #expect(try parse(#""lease_seconds": 3600,"#).lease == .seconds(3600))
            #expect(try parse(#""lease_seconds": null,"#).lease == .seconds(60))
            for bad in ["19", "3601", "20.5", #""20""#] {
                #expect {
                    _ = try parse("\"lease_seconds\": \(bad),")
                } throws: { error in
                    (error as? GatewayConfigurationError)?.member == "/lease_seconds"
                }
            }
        }
    }
}

extension GatewaySuites.GatewayProcessTests {
    /// Gateway v1 §5.1: a batch answered `202` is never lost, and a batch whose answer was lost is never stored twice.
    /// The process ends between the batch's commit and its answer (fault injection); restarted, the client's retry
    /// of the same batch (same idempotency keys) replays every message's `202` and each is delivered once. Then a
    /// `kill -9` after an answered batch: every message it answered is there after the restart, and the retry replays.
    @Test func aBatchCommittedBeforeACrashIsReplayedNotLost() async throws {
        let apns = try await TestAPNs()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gateway-batch-crash-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let config = try GatewayHarness.writeConfiguration(in: directory, apns: apns)
        let http = HTTPClient(eventLoopGroupProvider: .singleton)
        defer { Task { try? await http.shutdown(); await apns.stop() } }
        let faulty = try ChildProcess(launching: ProjectPaths.sealedpushServerBinary, ["gateway", "--config", config, "--log-level", "info"],
                                      environment: ["SEALEDPUSH_GATEWAY_FAULT": "exit-after-batch-commit"], in: directory, readLines: true)
        let listening = try #require(try await offPool { faulty.waitForLine(startingWith: "api listening on", within: .seconds(60)) })
        var client = GatewayClient(http: http, base: "http://127.0.0.1:\(try #require(listening.split(separator: ":").last.flatMap { Int($0) }))")
        let phone = try Phone(in: directory, name: "phone", token: hexToken(0x500))
        let registered = try await client.call(.PUT, "/v1/apps/chat/devices/d1", json: .object(JSONObject([
            ("user_id", "u1"), ("apns_token", .string(phone.token)), ("environment", "sandbox"), ("key_record", .object(phone.record))])))
        #expect(registered.status == 201)
        func batch(_ prefix: String) -> JSONValue {
            .object(JSONObject([("messages", .array((1...5).map { n in
                .object(JSONObject([("to", .object(JSONObject([("user_id", "u1")]))), ("body", .string("\(prefix) \(n)")),
                                    ("idempotency_key", .string("\(prefix)-\(n)"))]))
            }))]))
        }
        // The answer never comes: the process ends once the batch's transaction committed.
        await #expect(throws: (any Error).self) { _ = try await client.call(.POST, "/v1/apps/chat/messages/batch", json: batch("crash")) }
        let ended = try await offPool { try faulty.waitForExit(within: .seconds(30)) }
        #expect(ended.exitedNormally && ended.status == 75, "the fault ended the process: \(ended.stderr)")

        var (process, port) = try await Self.start(config, in: directory)
        client = GatewayClient(http: http, base: "http://127.0.0.1:\(port)")
        let retried = try await client.call(.POST, "/v1/apps/chat/messages/batch", json: batch("crash"))
        let results = (retried.json["results"]?.arrayValue ?? []).compactMap { $0.objectValue }
        #expect(results.count == 5 && results.allSatisfy { $0["status"] == .int(202) && $0["replayed"] == .bool(true) }, "\(retried.text)")
        var ids = results.compactMap { $0["message"]?.objectValue?["message_id"]?.stringValue }
        #expect(Set(ids).count == 5)

        // Killed after an answered batch: all of it is there after the restart.
        let answered = try await client.call(.POST, "/v1/apps/chat/messages/batch", json: batch("kill"))
        let answeredIDs = (answered.json["results"]?.arrayValue ?? []).compactMap { $0.objectValue?["message"]?.objectValue?["message_id"]?.stringValue }
        #expect(answeredIDs.count == 5 && answered.json["results"]?.arrayValue?.allSatisfy { $0.objectValue?["status"] == .int(202) } == true)
        let first = process
        #expect(try await offPool { first.kill() }.killed(by: SIGKILL))
        (process, port) = try await Self.start(config, in: directory)
        defer { _ = process.terminate(grace: .seconds(30)) }
        client = GatewayClient(http: http, base: "http://127.0.0.1:\(port)")
        let replay = try await client.call(.POST, "/v1/apps/chat/messages/batch", json: batch("kill"))
        let replayedIDs = (replay.json["results"]?.arrayValue ?? []).compactMap { $0.objectValue?["message"]?.objectValue?["message_id"]?.stringValue }
        #expect(replayedIDs == answeredIDs)
        ids += answeredIDs
        // Each of the ten messages reaches APNs, once per message id.
        try await waitUntil("the ten messages to be accepted", within: .seconds(60)) {
            for id in ids {
                let m = try await client.call(.GET, "/v1/apps/chat/messages/\(id)")
                guard m.status == 200, m.json["deliveries"]?.arrayValue?.first?.objectValue?["state"]?.stringValue == "accepted" else { return false }
            }
            return true
        }
        let bodies = apns.pushes.map(\.apnsID)
        #expect(Set(bodies).count == 10, "ten messages, each sent under one apns-id: \(bodies.count) pushes")
        let restarted = process
        _ = try await offPool { restarted.terminate(grace: .seconds(30)) }
    }
}
