import Foundation
import Testing
import SealedPushWire
import SealedPushTestSupport

/// A collector stand-in, a Python process of its own (so a busy test process cannot make it late): it answers its
/// first `limited` POSTs `429` with `Retry-After: 1` (as the gateway's device endpoints do past a source's budget,
/// gateway v1 §6) and `204` afterwards, and writes how many it got to `count` after each.
struct RateLimitedCollector {
    static let script = """
        import http.server, sys
        limited, count_file = int(sys.argv[1]), sys.argv[2]
        posts = 0
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                global posts
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                posts += 1
                with open(count_file, "w") as f:
                    f.write(str(posts))
                if posts <= limited:
                    self.send_response(429)
                    self.send_header("Retry-After", "1")
                else:
                    self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()
            def log_message(self, *args):
                pass
        server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        print(server.server_address[1], flush=True)
        server.serve_forever()
        """
    let process: ChildProcess
    let port: Int
    let countFile: URL

    init(limited: Int, in directory: URL) throws {
        countFile = directory.appendingPathComponent("collector-posts")
        process = try ChildProcess(launching: ReceiptCLITests.python, ["-c", Self.script, "\(limited)", countFile.path], in: directory,
                                   readLines: true)
        guard let port = process.nextLine(within: .seconds(60)).flatMap({ Int($0) }) else {
            process.kill()
            throw CLITestError("the Python collector printed no port: \(process.stderrText)")
        }
        self.port = port
    }

    /// The POSTs it got so far.
    var count: Int { (try? String(contentsOf: countFile, encoding: .utf8)).flatMap { Int($0) } ?? 0 }

    func stop() { process.kill() }  // SIGKILL: a Python child may inherit SIGTERM blocked from the test runner
}

/// Runs the `sealedpush` CLI on a thread of its own: its wait must not hold one of the few threads of Swift's
/// concurrency pool, which the collector in this process needs to answer it (on a 2-core machine, beside other
/// suites blocking theirs, the collector never ran and every POST timed out).
private func sealedpush(_ arguments: [String], in directory: URL) async throws -> ChildProcess.Result {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try ChildProcess.sealedpush(arguments, in: directory) }) }.start()
    }
}

@Suite("Receipts: the device outbox honours Retry-After (issue #36, bug 1)", .serialized, .timeLimit(.minutes(5)))
struct RetryAfterCLITests {
    /// A receipt refused `429` with `Retry-After: 1` is queued and its collector is not tried again before that
    /// second (the delivery's own flush and `device flush --respect-backoff` skip it), then the next flush sends it,
    /// one second later rather than the minute of the fixed backoff. The device clock is given on each command, so
    /// no test waits on the wall clock.
    @Test func aReceiptRefused429WithRetryAfterIsSentByTheFlushAfterThatSecond() async throws {
        TestLogging.quiet()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("retry-after-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let keys = try await sealedpush(["keys", "generate", "--keychain", "dev"], in: directory)
        try #require(keys.status == 0, "\(keys.stderr)")
        try keys.stdoutText.write(to: directory.appendingPathComponent("device.json"), atomically: true, encoding: .utf8)
        try #require(FileManager.default.isExecutableFile(atPath: ReceiptCLITests.python.path),
                     "no Python at \(ReceiptCLITests.python.path): run `make test` (or `make pydeps`), or set SEALEDPUSH_PYTHON")
        let collector = try RateLimitedCollector(limited: 1, in: directory)
        defer { collector.stop() }
        let sealed = try await sealedpush(["seal", "--to", "device.json", "--body", "x", "--receipt-url",
                                                  "http://127.0.0.1:\(collector.port)/r", "--receipts-db", "r.sqlite"], in: directory)
        try #require(sealed.status == 0, "\(sealed.stderr)")
        try sealed.stdoutText.write(to: directory.appendingPathComponent("p.json"), atomically: true, encoding: .utf8)

        let now = Int64(Date().timeIntervalSince1970)
        let pushed = try await sealedpush(["device", "push", "--keychain", "dev", "--json", "--clock", "\(now)", "p.json"], in: directory)
        guard case let .object(shown)? = try? JSON.parse(Array(pushed.stdoutText.utf8)) else {
            Issue.record("device push: \(pushed.stdoutText) \(pushed.stderr)")
            return
        }
        #expect(shown["receipt"] == .string("queued"), "\(shown)")
        #expect(collector.count == 1, "the receipt's own POST, refused; the delivery's flush skipped the collector")
        let early = try await sealedpush(["device", "flush", "--keychain", "dev", "--respect-backoff", "--clock", "\(now)"], in: directory)
        #expect(early.stdoutText.contains("sent 0, rejected 0, remaining 1"), "\(early.stdoutText)")
        #expect(collector.count == 1, "tried before its Retry-After")
        let flushed = try await sealedpush(["device", "flush", "--keychain", "dev", "--respect-backoff", "--clock", "\(now + 1)"], in: directory)
        #expect(flushed.status == 0 && flushed.stdoutText.contains("sent 1, rejected 0, remaining 0"), "\(flushed.stdoutText)\(flushed.stderr)")
        #expect(collector.count == 2)
    }
}
