import Foundation
import SealedPushDeviceHTTP
import SealedPushKeychain
import SealedPushDevice
import SealedPushReceiver
import SealedPushTestSupport
import SealedPushWire
import Testing

/// #44 pilot 5: a simulated device whose receipt POST finds nothing listening (a gateway restarting) tries again
/// after 2 s, doubling, not after the minute that other failures wait. The device time is injected (`flush(now:)`);
/// the connection is really refused, on loopback.
@Suite("Receipts: the backoff after a refused connection", .timeLimit(.minutes(2)))
struct RefusedConnectionBackoffTests {
    @Test func aRefusedReceiptOriginIsTriedAgainAfterTwoSecondsDoubling() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("refused-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try KeychainStore(url: directory.appendingPathComponent("device"))
        // Bound and never listening, for the whole test: refused every time (a port closed again could be taken by
        // another test's listener meanwhile, which once made this test see no refusal at all).
        let refusing = try RefusingPort()
        let url = "http://127.0.0.1:\(refusing.port)/v1/receipts"
        let t0: Int64 = 1_790_000_000
        try ReceiptOutboxStore(store: store).enqueue(url: url, message: .delivered(id: "m1", token: ReceiptRequest.makeToken(), at: t0,
                                                                                      attachments: nil), now: t0)
        let transport = HTTPReceiptTransport()
        func flush(_ now: Int64) async -> OutboxFlushSummary {
            // The device's flush after a delivery: origins backing off are skipped.
            await ReceiptCourier(transport: transport, outbox: ReceiptOutboxStore(store: store), timer: ManualClock())
                .flush(now: now, ignoringBackoff: false)
        }
        func retryAt(_ now: Int64) throws -> Int64? { try ReceiptOutboxStore(store: store).queues(now: now).first?.retryAt }

        #expect(await flush(t0) == OutboxFlushSummary(sent: 0, rejected: 0, remaining: 1))
        #expect(try retryAt(t0) == t0 + 2, "the first wait after a refused connection")
        #expect(await flush(t0 + 1) == OutboxFlushSummary(sent: 0, rejected: 0, remaining: 1))
        #expect(try retryAt(t0 + 1) == t0 + 2, "not tried again before its backoff ends")
        _ = await flush(t0 + 2)
        #expect(try retryAt(t0 + 2) == t0 + 2 + 4, "doubling")
        _ = await flush(t0 + 6)
        #expect(try retryAt(t0 + 6) == t0 + 6 + 8)
        await transport.shutdown()
        withExtendedLifetime(refusing) {}
    }

    @Test func otherFailuresKeepTheMinute() {
        let limits = ReceiptOutboxLimits()
        #expect(limits.refusedBackoffBaseSeconds == 2)
        #expect(limits.backoff(afterFailures: 1) == 60 && limits.backoff(afterFailures: 2) == 120)
        #expect(limits.backoff(afterFailures: 1, connectionRefused: true) == 2)
        #expect(limits.backoff(afterFailures: 3, connectionRefused: true) == 8)
        #expect(limits.backoff(afterFailures: 40, connectionRefused: true) == 3600, "capped as every backoff")
        // The refused base is never longer than the usual one.
        #expect(ReceiptOutboxLimits(backoffBaseSeconds: 1).refusedBackoffBaseSeconds == 1)

        var state = ReceiptOutboxState()
        state.settle(origin: "https://c.example:443", removing: [], droppedReported: 0, failed: true, now: 100, limits: limits)
        #expect(state.origins["https://c.example:443"]?.retryAt == 160)
        state.settle(origin: "https://d.example:443", removing: [], droppedReported: 0, failed: true, connectionRefused: true, now: 100, limits: limits)
        #expect(state.origins["https://d.example:443"]?.retryAt == 102)
    }
}
