import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOConcurrencyHelpers
import Testing
import SealedPushWire
import SealedPushTestSupport

/// A collector stand-in on loopback that answers its first `limited` POSTs `429` with `Retry-After: 1` (as the
/// gateway's device endpoints do past a source's budget, gateway v1 §6) and `204` afterwards, counting them.
final class RateLimitedCollector: Sendable {
    let posts: NIOLockedValueBox<Int>
    let task: Task<Void, any Error>
    let port: Int

    init(limited: Int) async throws {
        let posts = NIOLockedValueBox(0)
        self.posts = posts
        let router = Router()
        router.post("r") { request, _ -> Response in
            _ = try await request.body.collect(upTo: 8192)
            let n = posts.withLockedValue { n in
                n += 1
                return n
            }
            guard n > limited else { return Response(status: .tooManyRequests, headers: [.retryAfter: "1"]) }
            return Response(status: .noContent)
        }
        var logger = Logger(label: "rate-limited-collector")
        logger.logLevel = .critical
        let (ports, continuation) = AsyncStream<Int>.makeStream()
        let application = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                                      onServerRunning: { channel in continuation.yield(channel.localAddress?.port ?? 0) }, logger: logger)
        let task = Task {
            defer { continuation.finish() }
            try await application.runService(gracefulShutdownSignals: [])
        }
        self.task = task
        port = try await boundPort(ports, of: task)
    }

    var count: Int { posts.withLockedValue { $0 } }

    func stop() async {
        task.cancel()
        _ = try? await task.value
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
        let keys = try ChildProcess.sealedpush(["keys", "generate", "--keychain", "dev"], in: directory)
        try #require(keys.status == 0, "\(keys.stderr)")
        try keys.stdoutText.write(to: directory.appendingPathComponent("device.json"), atomically: true, encoding: .utf8)
        let collector = try await RateLimitedCollector(limited: 1)
        let sealed = try ChildProcess.sealedpush(["seal", "--to", "device.json", "--body", "x", "--receipt-url",
                                                  "http://127.0.0.1:\(collector.port)/r", "--receipts-db", "r.sqlite"], in: directory)
        try #require(sealed.status == 0, "\(sealed.stderr)")
        try sealed.stdoutText.write(to: directory.appendingPathComponent("p.json"), atomically: true, encoding: .utf8)

        let now = Int64(Date().timeIntervalSince1970)
        let pushed = try ChildProcess.sealedpush(["device", "push", "--keychain", "dev", "--json", "--clock", "\(now)", "p.json"], in: directory)
        guard case let .object(shown)? = try? JSON.parse(Array(pushed.stdoutText.utf8)) else {
            Issue.record("device push: \(pushed.stdoutText) \(pushed.stderr)")
            await collector.stop()
            return
        }
        #expect(shown["receipt"] == .string("queued"), "\(shown)")
        #expect(collector.count == 1, "the receipt's own POST, refused; the delivery's flush skipped the collector")
        let early = try ChildProcess.sealedpush(["device", "flush", "--keychain", "dev", "--respect-backoff", "--clock", "\(now)"], in: directory)
        #expect(early.stdoutText.contains("sent 0, rejected 0, remaining 1"), "\(early.stdoutText)")
        #expect(collector.count == 1, "tried before its Retry-After")
        let flushed = try ChildProcess.sealedpush(["device", "flush", "--keychain", "dev", "--respect-backoff", "--clock", "\(now + 1)"], in: directory)
        #expect(flushed.status == 0 && flushed.stdoutText.contains("sent 1, rejected 0, remaining 0"), "\(flushed.stdoutText)\(flushed.stderr)")
        #expect(collector.count == 2)
        await collector.stop()
    }
}
