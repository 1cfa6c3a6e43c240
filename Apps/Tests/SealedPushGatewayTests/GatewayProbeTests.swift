import Foundation
import SealedPushTestSupport
import Testing

/// #44 pilot 8: `sealedpush-server gateway probe`, the built binary, against a running gateway's admin listener: what
/// deploy/Containerfile's HEALTHCHECK runs (the image has no curl).
@Suite("gateway probe (the built binary)", .serialized, .timeLimit(.minutes(3)))
struct GatewayProbeTests {
    static func probe(_ arguments: [String]) throws -> ChildProcess.Result {
        try ChildProcess.sealedpushServer(["gateway", "probe"] + arguments, timeout: 60)
    }

    @Test func exitsZeroOnlyWhenTheGatewayAnswers200() async throws {
        try await withGateway("probe") { g in
            // A generous --timeout: under ThreadSanitizer with every suite running, an answer took longer than the
            // default 5 s once (the deadline itself is tested below).
            let ready = try await offPool { try Self.probe(["--url", "http://127.0.0.1:\(g.adminPort)/readyz", "--timeout", "45"]) }
            #expect(ready.status == 0 && ready.stdout.isEmpty && ready.stderr.isEmpty, "\(ready.status) \(ready.stderr)")
            let healthy = try await offPool { try Self.probe(["--url", "http://127.0.0.1:\(g.adminPort)/healthz", "--timeout", "45"]) }
            #expect(healthy.status == 0, "\(healthy.stderr)")
            // Any other answer is unhealthy, with the status on stderr.
            let missing = try await offPool { try Self.probe(["--url", "http://127.0.0.1:\(g.adminPort)/no-such-route", "--timeout", "45"]) }
            #expect(missing.status == 1 && missing.stderr.contains("answered 404"), "\(missing.status) \(missing.stderr)")
        }
    }

    @Test func noAnswerIsUnhealthyWithinItsDeadline() async throws {
        // Nothing listens: refused at once.
        let closed = try RefusingPort()
        let refused = try await offPool { try Self.probe(["--url", "http://127.0.0.1:\(closed.port)/readyz"]) }
        withExtendedLifetime(closed) {}
        #expect(refused.status == 1 && refused.stderr.contains("no answer"), "\(refused.status) \(refused.stderr)")
        // A listener that never accepts nor answers (the kernel completes the handshake into its backlog): the probe's
        // own deadline ends it (the child's 60 s bound would fail the test instead).
        let (fd, port) = try GatewayHarness.silentListener()
        defer { close(fd) }
        let silent = try await offPool { try Self.probe(["--url", "http://127.0.0.1:\(port)/readyz", "--timeout", "1"]) }
        #expect(silent.status == 1 && silent.stderr.contains("not ready"), "\(silent.status) \(silent.stderr)")
    }

    @Test func aBadURLIsAUsageError() throws {
        let bad = try Self.probe(["--url", "ftp://127.0.0.1/readyz"])
        #expect(bad.status == 64 && bad.stderr.contains("--url"), "\(bad.status) \(bad.stderr)")
        let slow = try Self.probe(["--url", "http://127.0.0.1:1/readyz", "--timeout", "600"])
        #expect(slow.status == 64 && slow.stderr.contains("--timeout"), "\(slow.status) \(slow.stderr)")
    }
}
