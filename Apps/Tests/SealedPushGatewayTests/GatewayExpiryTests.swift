import Foundation
import NIOConcurrencyHelpers
import SealedPushAPNs
import SealedPushAPNsCore
@testable import SealedPushGateway
import SealedPushWire
import SealedPushTestSupport
import Testing

extension GatewaySuites {
    /// The two expiry checks of gateway v1 §6, each on its own (each once covered for the other: removing
    /// either failed no test). Both run on a frozen clock the test moves.
    @Suite("Gateway delivery: expiry checks", .serialized, .timeLimit(.minutes(5)))
    struct GatewayExpiryTests {
        /// The message's delivery, or nil when the answer has none (a refusal under load: the wait reads again).
        static func delivery(_ g: GatewayHarness, _ id: String) async throws -> JSONObject? {
            let message = try await g.api.call(.GET, "/v1/apps/chat/messages/\(id)").json
            return message["deliveries"]?.arrayValue?.first?.objectValue
        }

        /// The check at claim time: a retry due before `expires_at` whose claim comes after it (the worker or the
        /// clock was late) is never sent: APNs sees no push after `expires_at`, and the delivery ends `expired`.
        @Test func noPushLeavesAfterExpiresAtEvenWhenTheLastFailureLeftItQueued() async throws {
            let apns = ScriptedAPNs()
            let clock = NIOLockedValueBox(Int64(Date().timeIntervalSince1970 * 1000))
            var options = scriptedOptions(apns)
            options.clock = SealedPushClock(wall: { UnixMilliseconds(clock.withLockedValue { $0 }) }, monotonic: { ContinuousClock.now })
            try await withGateway("expiry-claim", options: options) { g in
                let p = try Phone(in: g.directory, name: "p", token: hexToken(0x40))
                try await g.register(p, device: "p", user: "u")
                apns.answer(p.token, with: [rejection(503, .serviceUnavailable)])
                let id = try #require(try await g.send(JSONObject([("user_id", "u")]), extra: JSONObject([("ttl", .int(60))])).json["message_id"]?.stringValue)
                // The first attempt fails; its retry (tens of milliseconds later on the frozen clock) is before expires_at.
                try await waitUntil("the failed attempt to be written", within: .seconds(30)) {
                    try await Self.delivery(g, id)?["attempts"] == .int(1)
                }
                #expect(try await Self.delivery(g, id)?["state"]?.stringValue == "queued")
                // The clock passes expires_at: the retry is due, and past it.
                clock.withLockedValue { $0 += 120_000 }
                let expired = try await g.waitForStates(id, ["expired"], within: .seconds(30))
                let d = try #require(expired["deliveries"]?.arrayValue?.first?.objectValue)
                #expect(d["reason"]?.stringValue == "ttl_expired" && d["attempts"] == .int(1))
                #expect(apns.pushes(to: p.token).count == 1, "no push after expires_at")
            }
        }

        /// The check when a failed attempt is written: a retry that would be at or past `expires_at` ends the
        /// delivery `expired` in that write, with no later claim (the clock does not move here, so none could
        /// find it due).
        @Test func theLastFailedAttemptIsWrittenExpired() async throws {
            let apns = ScriptedAPNs()
            let clock = NIOLockedValueBox(Int64(Date().timeIntervalSince1970 * 1000))
            var options = scriptedOptions(apns)
            options.clock = SealedPushClock(wall: { UnixMilliseconds(clock.withLockedValue { $0 }) }, monotonic: { ContinuousClock.now })
            options.baseRetryDelay = .seconds(10)
            options.maxRetryDelay = .seconds(10)
            try await withGateway("expiry-write", options: options) { g in
                let p = try Phone(in: g.directory, name: "p", token: hexToken(0x41))
                try await g.register(p, device: "p", user: "u")
                apns.answer(p.token, with: [rejection(503, .serviceUnavailable)])
                // ttl 1 s: the retry (5–10 s later) would be past expires_at.
                let id = try #require(try await g.send(JSONObject([("user_id", "u")]), extra: JSONObject([("ttl", .int(1))])).json["message_id"]?.stringValue)
                try await waitUntil("the failed attempt to be written", within: .seconds(30)) {
                    try await Self.delivery(g, id)?["attempts"] == .int(1)
                }
                let d = try #require(try await Self.delivery(g, id))
                #expect(d["state"]?.stringValue == "expired" && d["reason"]?.stringValue == "ttl_expired" && d["apns_status"] == .int(503))
                #expect(d["next_attempt_at"] == .null)
                #expect(apns.pushes(to: p.token).count == 1)
                #expect(try await g.admin.call(.GET, "/metrics", key: nil).text
                    .contains(#"sealedpush_gateway_deliveries_total{app="chat",platform="apns",state="expired"} 1"#))
            }
        }
    }
}
