import Foundation
import Testing
import SealedPushWire
import SealedPushTestSupport
#if canImport(Glibc)
import Glibc
#endif


@Suite("Receipts end to end: seal, device push, collector, flush, stats", .serialized, .timeLimit(.minutes(10)))
struct ReceiptCLITests {
    let directory: URL

    init() throws {
        TestLogging.quiet()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("receipts-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let keys = try ChildProcess.sealedpush(["keys", "generate", "--keychain", "dev"], in: directory)
        try #require(keys.status == 0, "\(keys.stderr)")
        try keys.stdoutText.write(to: directory.appendingPathComponent("device.json"), atomically: true, encoding: .utf8)
    }

    static var python: URL {
        if let env = ProcessInfo.processInfo.environment["SEALEDPUSH_PYTHON"], !env.isEmpty { return URL(fileURLWithPath: env) }
        return ProjectPaths.root.appendingPathComponent(".build/pyenv/bin/python")
    }

    func push(_ payload: String) throws -> JSONObject {
        let result = try ChildProcess.sealedpush(["device", "push", "--keychain", "dev", "--json", payload], in: directory)
        guard case let .object(o) = try JSON.parse(Array(result.stdoutText.utf8)) else { throw CLITestError("not an object: \(result.stdoutText)") }
        return o
    }

    func seal(_ url: String, body: String, to file: String) throws {
        let sealed = try ChildProcess.sealedpush(["seal", "--to", "device.json", "--title", "Agent K", "--body", body, "--receipt-url", url,
                                     "--receipts-db", "r.sqlite"], in: directory)
        try #require(sealed.status == 0, "\(sealed.stderr)")
        try sealed.stdoutText.write(to: directory.appendingPathComponent(file), atomically: true, encoding: .utf8)
    }

    @Test("the receipt as an independent reader (Python http.server) sees it: exactly the §2 members, the recorded id and token")
    func independentReader() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.python.path),
                     "no Python at \(Self.python.path): run `make test` (or `make pydeps`), or set SEALEDPUSH_PYTHON")
        let verdicts = directory.appendingPathComponent("verdicts.jsonl")
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("receipt_endpoint.py")  // beside this file
        let server = try ChildProcess(launching: Self.python, [script.path, verdicts.path], in: directory, readLines: true)
        defer { server.kill() }  // SIGKILL: a Python child may inherit SIGTERM blocked from the test runner
        let port = try #require(server.nextLine(within: .seconds(60)).flatMap { Int($0) }, "the Python endpoint printed no port: \(server.stderrText)")
        try seal("http://127.0.0.1:\(port)/receipt", body: "The eagle lands at noon.", to: "p.json")
        let before = Int64(Date().timeIntervalSince1970)
        let shown = try push("p.json")
        #expect(shown["outcome"] == .string("decrypted"))
        #expect(shown["receipt"] == .string("sent"))
        let lines = try String(contentsOf: verdicts, encoding: .utf8).split(separator: "\n")
        try #require(lines.count == 1)
        guard case let .object(verdict) = try JSON.parse(Array(lines[0].utf8)) else { Issue.record("verdict"); return }
        #expect(verdict["ok"] == .bool(true), "\(verdict)")
        #expect(verdict["path"] == .string("/receipt"))
        let fields = try #require(verdict["fields"]?.objectValue)
        #expect(Set(fields.map(\.key)) == ["v", "type", "id", "token", "at"])
        let at = try #require(fields["at"]?.intValue)
        #expect(at >= before - 1 && at <= Int64(Date().timeIntervalSince1970) + 1)
        let text = String(decoding: JSON.serialize(.object(fields)), as: UTF8.self)
        #expect(!text.contains("eagle") && !text.contains("Agent K"))
    }

    @Test("collector down: queued; up: device flush sends it, stats count it once; a failure report arrives")
    func downThenUp() async throws {
        let db = directory.appendingPathComponent("r.sqlite").path
        // A port that was just free: a collector started and stopped there.
        let probe = try await RunningCollector.start(path: db)
        let port = probe.port
        await probe.stop()
        try seal("http://127.0.0.1:\(port)/r", body: "first", to: "p1.json")
        let first = try push("p1.json")
        #expect(first["outcome"] == .string("decrypted") && first["receipt"] == .string("queued"))
        #expect(try ChildProcess.sealedpush(["device", "status", "--keychain", "dev"], in: directory).stdoutText.contains("receipt outbox: 1 waiting"))
        let down = try ChildProcess.sealedpush(["device", "flush", "--keychain", "dev"], in: directory)
        #expect(down.status != 0 && down.stdoutText.contains("sent 0, rejected 0, remaining 1"))

        let server = try ChildProcess(launching: ProjectPaths.sealedpushServerBinary,
                                      ["receipts", "serve", "--db", db, "--listen", "127.0.0.1:\(port)"], in: directory, readLines: true)
        defer { server.terminate() }
        try #require(server.nextLine(within: .seconds(60)) == "listening on 127.0.0.1:\(port)", "receipts serve did not start: \(server.stderrText)")
        let flushed = try ChildProcess.sealedpush(["device", "flush", "--keychain", "dev"], in: directory)
        #expect(flushed.status == 0 && flushed.stdoutText.contains("sent 1, rejected 0, remaining 0"), "\(flushed.stdoutText)\(flushed.stderr)")
        #expect(try ChildProcess.sealedpush(["device", "flush", "--keychain", "dev"], in: directory).stdoutText.contains("sent 0, rejected 0, remaining 0"))

        // A second message is sent at once; its replay sends nothing.
        try seal("http://127.0.0.1:\(port)/r", body: "second", to: "p2.json")
        #expect(try push("p2.json")["receipt"] == .string("sent"))
        let replay = try push("p2.json")
        #expect(replay["reason"] == .string("replayed") && replay["receipt"] == nil && replay["report"] == nil)

        // A locked device with a report URL: keychainLocked, reported once, then suppressed.
        #expect(try ChildProcess.sealedpush(["device", "config", "--keychain", "dev", "--report-url", "http://127.0.0.1:\(port)/reports"], in: directory).status == 0)
        try seal("http://127.0.0.1:\(port)/r", body: "third", to: "p3.json")
        _ = try ChildProcess.sealedpush(["device", "reboot", "--keychain", "dev"], in: directory)
        let locked = try push("p3.json")
        #expect(locked["reason"] == .string("keychainLocked") && locked["report"] == .string("sent") && locked["receipt"] == nil)
        #expect(try push("p3.json")["report"] == .string("suppressed"))

        let stats = try ChildProcess.sealedpushServer(["receipts", "stats", "--db", db, "--json"], in: directory)
        guard case let .object(o) = try JSON.parse(Array(stats.stdoutText.utf8)) else { Issue.record("stats: \(stats.stdoutText)"); return }
        #expect(o["sent"] == .int(3) && o["delivered"] == .int(2) && o["pending"] == .int(1))
        #expect(o["failureReportsByReason"] == .object(JSONObject([("keychainLocked", .int(1))])))
        let human = try ChildProcess.sealedpushServer(["receipts", "stats", "--db", db], in: directory)
        #expect(human.stdoutText.contains("3 sent, 2 delivered, 1 pending"))
    }

    @Test("seal refuses a receipt URL it may not use, and --receipt-url without --receipts-db")
    func sealRefusals() throws {
        let plainHTTP = try ChildProcess.sealedpush(["seal", "--to", "device.json", "--body", "x", "--receipt-url", "http://example.com/r",
                                        "--receipts-db", "r.sqlite"], in: directory)
        #expect(plainHTTP.status != 0 && plainHTTP.stderr.contains("--receipt-url"))
        let noDB = try ChildProcess.sealedpush(["seal", "--to", "device.json", "--body", "x", "--receipt-url", "https://example.com/r"], in: directory)
        #expect(noDB.status != 0 && noDB.stderr.contains("--receipts-db"))
    }
}

/// A test precondition that did not hold.
struct CLITestError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
