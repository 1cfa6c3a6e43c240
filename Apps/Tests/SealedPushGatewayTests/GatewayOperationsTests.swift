import AsyncHTTPClient
import Foundation
import NIOConcurrencyHelpers
import SealedPushGateway
import SealedPushWire
import SealedPushTestSupport
import Testing

extension GatewaySuites {
    /// What operators run beside the gateway: `gateway backup` of a live database (taken while a gateway process
    /// sends, opened by a second gateway), its refusals, and a client generated from the OpenAPI document.
    @Suite("Gateway operations: backup, generated client", .serialized, .timeLimit(.minutes(10)))
    struct GatewayOperationsTests {
        @Test("a backup taken while the gateway sends opens as a gateway database holding every message answered 202 before it")
        func backupWhileSending() async throws {
            // A little latency keeps attempts in flight, so the worker writes outcomes while the copy is read.
            let apns = try await TestAPNs(latency: .milliseconds(5))
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gateway-backup-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: directory) }
            let config = try GatewayHarness.writeConfiguration(in: directory, apns: apns)
            let http = HTTPClient(eventLoopGroupProvider: .singleton)
            defer { Task { try? await http.shutdown(); await apns.stop() } }
            let (process, port) = try await GatewayProcessTests.start(config, in: directory)
            defer { _ = process.terminate(grace: .seconds(30)) }
            let client = GatewayClient(http: http, base: "http://127.0.0.1:\(port)")
            for n in 0..<5 {
                let phone = try Phone(in: directory, name: "phone-\(n)", token: hexToken(0x500 + n))
                let r = try await client.call(.PUT, "/v1/apps/chat/devices/d\(n)", json: .object(JSONObject([
                    ("user_id", .string("u\(n)")), ("apns_token", .string(phone.token)), ("environment", "sandbox"), ("key_record", .object(phone.record))])))
                #expect(r.status == 201, "\(r.text)")
            }
            // A sender that keeps going until told to stop: the ids answered 202, in order.
            let answered = NIOLockedValueBox<[String]>([])
            let stop = NIOLockedValueBox(false)
            let sender = Task {
                var n = 0
                while !stop.withLockedValue({ $0 }) {
                    let r = try await client.call(.POST, "/v1/apps/chat/messages", json: .object(JSONObject([
                        ("to", .object(JSONObject([("user_id", .string("u\(n % 5)"))]))), ("body", "backup test")])))
                    guard r.status == 202, let id = r.json["message_id"]?.stringValue else { throw CLIFailure("POST answered \(r.status): \(r.text)") }
                    answered.withLockedValue { $0.append(id) }
                    n += 1
                }
            }
            try await waitUntil("40 messages answered 202", within: .seconds(60)) { answered.withLockedValue { $0.count } >= 40 }
            let before = answered.withLockedValue { $0 }
            let backup = directory.appendingPathComponent("backup").appendingPathComponent("gateway-backup.db")
            try FileManager.default.createDirectory(at: backup.deletingLastPathComponent(), withIntermediateDirectories: true)
            let result = try await offPool {
                try ChildProcess.sealedpushServer(["gateway", "backup", "--config", config, "--to", backup.path, "--json"], in: directory, timeout: 120)
            }
            let during = answered.withLockedValue { $0.count } - before.count
            stop.withLockedValue { $0 = true }
            try await sender.value
            #expect(result.status == 0, "backup failed: \(result.stderr)")
            let summary = try #require(try JSON.parse(result.stdout).objectValue, "backup --json printed \(result.stdoutText)")
            #expect(Int(summary["messages"]?.intValue ?? 0) >= before.count)
            #expect(summary["devices"]?.intValue == 5)
            let mode = try #require(try FileManager.default.attributesOfItem(atPath: backup.path)[.posixPermissions] as? Int)
            #expect(mode == 0o600, "the backup's mode is \(String(mode, radix: 8))")
            #expect(!FileManager.default.fileExists(atPath: backup.path + "-wal"), "the check left a -wal beside the backup")

            // Never over an existing file: the second run fails and leaves the first backup as it was.
            let size = try #require(try FileManager.default.attributesOfItem(atPath: backup.path)[.size] as? Int)
            let again = try ChildProcess.sealedpushServer(["gateway", "backup", "--config", config, "--to", backup.path], in: directory, timeout: 60)
            #expect(again.status == 1)
            #expect(again.stderr.contains("exists") && again.stderr.contains("--to"), "\(again.stderr)")
            #expect(try FileManager.default.attributesOfItem(atPath: backup.path)[.size] as? Int == size)
            _ = try await offPool { process.terminate(grace: .seconds(30)) }

            // A second gateway on the backup (as after a restore) answers every message answered 202 before it began.
            let restored = directory.appendingPathComponent("restored")
            let restoredConfig = try GatewayHarness.writeConfiguration(in: restored, apns: apns, database: "sqlite:\(backup.path)")
            let (second, secondPort) = try await GatewayProcessTests.start(restoredConfig, in: restored)
            defer { _ = second.terminate(grace: .seconds(30)) }
            let restoredClient = GatewayClient(http: http, base: "http://127.0.0.1:\(secondPort)")
            var missing: [String] = []
            for id in before {
                let r = try await restoredClient.call(.GET, "/v1/apps/chat/messages/\(id)")
                if r.status != 200 || (r.json["deliveries"]?.arrayValue ?? []).isEmpty { missing.append(id) }
            }
            #expect(missing.isEmpty, "messages answered 202 before the backup are missing from it: \(missing.prefix(5))")
            #expect(try await restoredClient.call(.GET, "/v1/apps/chat/devices/d0").status == 200)
            _ = try await offPool { second.terminate(grace: .seconds(30)) }
            print("gateway backup: \(before.count) messages answered before it, \(during) more answered while it ran; \(String(decoding: JSON.serialize(.object(summary)), as: UTF8.self))")
        }

        @Test("backup refuses PostgreSQL (use pg_dump), a missing database, and a --to it cannot create")
        func backupRefusals() throws {
            let directory = try GatewayHarness.parseTestDirectory("gateway-backup-refusals")
            defer { try? FileManager.default.removeItem(at: directory) }
            func config(_ database: String) throws -> String {
                let text = """
                    {"public_url": "https://push.example.com", "database": "\(database)", "apps": [{"id": "chat",
                     "topic": "com.example.chat", "apns": {"auth_key": "key.p8", "key_id": "KEY0000001", "team_id": "TEAM000001"},
                     "api_keys": [{"id": "k", "sha256": "\(String(repeating: "ab", count: 32))", "scopes": ["read"]}]}]}
                    """
                let path = directory.appendingPathComponent("g-\(UUID().uuidString).json")
                try Data(text.utf8).write(to: path)
                return path.path
            }
            let target = directory.appendingPathComponent("b.db").path
            let pg = try ChildProcess.sealedpushServer(["gateway", "backup", "--config", try config("postgres://gw@127.0.0.1:5432/gw"), "--to", target],
                                                       timeout: 60)
            #expect(pg.status == 1)
            #expect(pg.stderr.contains("pg_dump") && pg.stderr.contains("PostgreSQL"), "\(pg.stderr)")
            #expect(!FileManager.default.fileExists(atPath: target))

            let none = try ChildProcess.sealedpushServer(["gateway", "backup", "--config", try config("sqlite:nothing-here.db"), "--to", target],
                                                         timeout: 60)
            #expect(none.status == 1)
            #expect(none.stderr.contains("no database at") && none.stderr.contains("nothing-here.db"), "\(none.stderr)")
            #expect(!FileManager.default.fileExists(atPath: target))

            try Data("x".utf8).write(to: directory.appendingPathComponent("present.db"))
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: directory.appendingPathComponent("present.db").path)
            let nowhere = try ChildProcess.sealedpushServer(["gateway", "backup", "--config", try config("sqlite:present.db"),
                                                             "--to", directory.appendingPathComponent("no/such/dir/b.db").path], timeout: 60)
            #expect(nowhere.status == 1)
            #expect(nowhere.stderr.contains("cannot create") && nowhere.stderr.contains("--to"), "\(nowhere.stderr)")
        }

        /// `$SEALEDPUSH_PYTHON`'s directory holds `openapi-python-client` (`make pydeps`).
        static var generator: URL { GatewaySchemathesisTests.python.deletingLastPathComponent().appendingPathComponent("openapi-python-client") }

        /// Checks run by the generated client against the live gateway: every problem status has its model,
        /// and the operations' parsing returns them (and the success models).
        static let clientCheck = #"""
            import sys
            base, key = sys.argv[1], sys.argv[2]
            from sealedpush_client import AuthenticatedClient, Client, models
            from sealedpush_client.api.default import get_device, get_message, list_devices, post_receipt, post_report, send_message, send_messages
            missing = [n for n in (400, 401, 403, 404, 409, 413, 415, 422, 429, 500, 503) if not hasattr(models, f"Problem{n}")]
            assert not missing, f"the generated models lost the problems {missing}"
            for name in ("Receipt", "FailureReport", "ReceiptAttachments"):
                assert hasattr(models, name), f"no model {name}"
            client = AuthenticatedClient(base_url=base, token=key)
            anonymous = Client(base_url=base)
            def expect(response, status, kind):
                assert int(response.status_code) == status, f"{status} expected, got {int(response.status_code)}: {response.content!r}"
                assert isinstance(response.parsed, kind), f"{status} parsed as {type(response.parsed).__name__}, not {kind.__name__}"
                return response.parsed
            p = expect(get_message.sync_detailed(app="chat", message_id="01a0000000000AAAAAAAAAAAAA", client=client), 404, models.Problem404)
            assert p.type_ == "urn:sealedpush:problem:not_found" and p.status == 404 and p.detail
            expect(get_message.sync_detailed(app="chat", message_id="x", client=AuthenticatedClient(base_url=base, token="sp_" + "Z" * 40)), 401, models.Problem401)
            p = expect(get_device.sync_detailed(app="chat", device_id="-bad", client=client), 400, models.Problem400)
            assert p.type_.value == "urn:sealedpush:problem:invalid_field", p.type_
            expect(send_message.sync_detailed(app="chat", client=client,
                   body=models.MessageRequest.from_dict({"to": {"user_id": "never-registered"}, "body": "hi"})), 404, models.Problem404)
            expect(post_receipt.sync_detailed(client=anonymous, body=models.Receipt.from_dict(
                   {"v": 1, "type": "delivered", "id": "01a0000000000AAAAAAAAAAAAA", "token": "A" * 22, "at": 1795000000})), 404, models.Problem404)
            r = post_report.sync_detailed(client=anonymous, body=models.FailureReport.from_dict(
                {"v": 1, "type": "failed", "reason": "unknownKey", "kid": "0123456789abcdef", "at": 1795000000, "count": 1}))
            assert int(r.status_code) == 202, r.content
            expect(list_devices.sync_detailed(app="chat", client=client), 200, models.DevicePage)
            # A batch's problems are typed per status too (#44 pilot 7), not a generic Problem.
            batch = expect(send_messages.sync_detailed(app="chat", client=client, body=models.BatchRequest.from_dict({"messages": [
                {"to": {"user_id": "never-registered"}, "body": "hi"}, {"to": {"user_id": "u"}, "body": "hi", "collapse_id": ""}]})),
                200, models.BatchResponse)
            kinds = [(type(r).__name__, type(r.problem).__name__) for r in batch.results]
            assert kinds == [("BatchProblem404", "Problem404"), ("BatchProblem400", "Problem400")], kinds
            print("generated client: every problem model present, parsed problems and successes as typed")
            """#

        @Test("openapi-python-client keeps a model per problem and the operations parse them")
        func generatedClientKeepsProblems() async throws {
            try #require(FileManager.default.isExecutableFile(atPath: Self.generator.path),
                         "no \(Self.generator.path): run `make pydeps` (openapi-python-client), or set SEALEDPUSH_PYTHON to that venv's python")
            try await withGateway("openapi-client") { g in
                let directory = try makeScratchDirectory("openapi-client")
                defer { try? FileManager.default.removeItem(at: directory) }
                let served = try await g.api.call(.GET, "/openapi.json", key: nil)
                #expect(served.status == 200)
                try Data(served.body).write(to: directory.appendingPathComponent("openapi.json"))
                let venv = Self.generator.deletingLastPathComponent().path
                let environment = ["PATH": venv + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")]
                let generated = try await offPool {
                    try ChildProcess.run(Self.generator, ["generate", "--path", "openapi.json", "--meta", "none", "--output-path", "sealedpush_client"],
                                         environment: environment, in: directory, timeout: 300)
                }
                let report = generated.stdoutText + generated.stderr
                #expect(generated.status == 0, Comment(rawValue: report))
                for dropped in ["Unable to process schema", "removal of", "Unsupported content_type", "Cannot parse response"] {
                    #expect(!report.contains(dropped), Comment(rawValue: "openapi-python-client dropped part of the document:\n\(report)"))
                }
                let python = GatewaySchemathesisTests.python
                let check = try await offPool {
                    try ChildProcess.run(python, ["-c", Self.clientCheck, "http://127.0.0.1:\(g.apiPort)", Keys.all],
                                         environment: environment, in: directory, timeout: 120)
                }
                #expect(check.status == 0, Comment(rawValue: "the generated client: \(check.stdoutText)\n\(check.stderr)"))
            }
        }
    }
}

/// A failure of the test's own sender task.
struct CLIFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
