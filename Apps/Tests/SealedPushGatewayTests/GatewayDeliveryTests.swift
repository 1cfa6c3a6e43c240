import Foundation
import Logging
import NIOConcurrencyHelpers
import SealedPushAPNs
import SealedPushAPNsCore
@testable import SealedPushGateway
import SealedPushWire
import SealedPushTestSupport
import Testing

/// An APNs stand-in answering from a script per device token (then 200), recording every push.
final class ScriptedAPNs: APNsSending {
    let script = NIOLockedValueBox<[String: [APNsError]]>([:])
    let seen = NIOLockedValueBox<[APNsPush]>([])
    /// How long each answer takes.
    let delay = NIOLockedValueBox<Duration>(.zero)
    /// How long answers to particular device tokens take instead.
    let tokenDelays = NIOLockedValueBox<[String: Duration]>([:])

    func answer(_ token: String, with errors: [APNsError]) { script.withLockedValue { $0[token, default: []] += errors } }

    func send(_ push: APNsPush) async throws(APNsError) -> APNsAcceptance {
        seen.withLockedValue { $0.append(push) }
        let wait = tokenDelays.withLockedValue { $0[push.deviceToken] } ?? delay.withLockedValue { $0 }
        if wait > .zero { try? await Task.sleep(for: wait) }
        let next = script.withLockedValue { s -> APNsError? in
            guard var queue = s[push.deviceToken], !queue.isEmpty else { return nil }
            let first = queue.removeFirst()
            s[push.deviceToken] = queue
            return first
        }
        if let next { throw next }
        return APNsAcceptance(apnsID: push.apnsID, uniqueID: nil, tries: 1)
    }

    func pushes(to token: String) -> [APNsPush] { seen.withLockedValue { $0.filter { $0.deviceToken == token } } }
}

/// Options with the scripted APNs and short retry delays.
func scriptedOptions(_ apns: ScriptedAPNs) -> GatewayOptions {
    var options = GatewayOptions()
    options.makeAPNsClient = { _, _, _ in apns }
    options.baseRetryDelay = .milliseconds(20)
    options.maxRetryDelay = .milliseconds(100)
    return options
}

func rejection(_ status: Int, _ reason: APNsReason, timestamp: Int64? = nil) -> APNsError {
    .rejected(APNsRejection(status: status, reason: reason, timestamp: timestamp))
}

func state(of delivery: JSONValue?) -> String? { delivery?.objectValue?["state"]?.stringValue }
extension GatewaySuites {

    @Suite("Gateway delivery: phones, states and retries", .serialized, .timeLimit(.minutes(10)))
    struct GatewayDeliveryTests {
        /// A user with two phones: the message opens on both, each with its own key, and reads `delivered` for both
        /// once their receipts arrive; an unregistered phone is skipped by the next send.
        @Test func aMessageOpensOnBothPhonesAndReadsDelivered() async throws {
            try await withGateway("two-phones") { g in
                let a = try Phone(in: g.directory, name: "a", token: hexToken(0xa))
                let b = try Phone(in: g.directory, name: "b", token: hexToken(0xb))
                try await g.register(a, device: "phone-a", user: "u-42")
                try await g.register(b, device: "phone-b", user: "u-42")
                let sent = try await g.send(JSONObject([("user_id", "u-42")]), body: "meet at noon", extra: JSONObject([("title", "Ana")]))
                #expect(sent.status == 202, "\(sent.text)")
                let id = try #require(sent.json["message_id"]?.stringValue)
                try await g.waitForStates(id, ["accepted"])
                let pushes = g.apns.pushes
                #expect(pushes.count == 2)
                for (phone, device) in [(a, "phone-a"), (b, "phone-b")] {
                    let push = try #require(pushes.first { $0.deviceToken == phone.token })
                    #expect(String(decoding: push.payload, as: UTF8.self).range(of: "meet at noon") == nil, "Apple sees no plaintext")
                    let shown = await phone.open(push.payload, transport: g.receipts)
                    #expect(shown.outcome == .decrypted, "\(device): \(shown)")
                    #expect(shown.notification?.body == "meet at noon" && shown.notification?.title == "Ana")
                }
                // The other phone's key cannot open it.
                let forA = try #require(pushes.first { $0.deviceToken == a.token })
                #expect(await b.open(forA.payload, transport: g.receipts).outcome != .decrypted)
                let message = try await g.waitForStates(id, ["delivered"])
                for d in message["deliveries"]?.arrayValue ?? [] {
                    #expect(d.objectValue?["attempts"] == .int(1))
                    #expect(d.objectValue?["delivered_at"]?.stringValue != nil)
                }
                // Phone b is unregistered (APNs 410): the next message skips it.
                g.apns.server.rules.unregister(b.token)
                let second = try await g.send(JSONObject([("user_id", "u-42")]))
                let secondID = try #require(second.json["message_id"]?.stringValue)
                let settled = try await g.waitForStates(secondID, ["accepted", "unregistered"])
                #expect(Set((settled["deliveries"]?.arrayValue ?? []).compactMap(state)) == ["accepted", "unregistered"])
                #expect(try await g.api.call(.GET, "/v1/apps/chat/devices/phone-b").json["state"]?.stringValue == "unregistered")
                let third = try await g.send(JSONObject([("user_id", "u-42")]))
                #expect(third.json["deliveries"]?.arrayValue?.count == 1)
                #expect(third.json["skipped"]?.arrayValue?.first?.objectValue?["reason"]?.stringValue == "unregistered")
                let metrics = try await g.admin.call(.GET, "/metrics", key: nil).text
                #expect(metrics.contains(#"sealedpush_gateway_deliveries_total{app="chat",platform="apns",state="delivered"} 2"#), "\(metrics)")
                #expect(metrics.contains("sealedpush_receipts_total"))
                // #36 bug 6: every metric docs/gateway.md documents is served (the webhook request counter, whose
                // status label comes from the receiver, is checked where a webhook is configured: GatewayWebhookTests).
                let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                    .deletingLastPathComponent().deletingLastPathComponent()
                let docs = try String(contentsOf: root.appendingPathComponent("docs/gateway.md"), encoding: .utf8)
                let documented = Set(docs.split(separator: "\n").filter { $0.hasPrefix("| `sealedpush_") }.flatMap { line in
                    line.split(separator: "|")[0].split(separator: "`").filter { $0.hasPrefix("sealedpush_") }.map(String.init)
                })
                #expect(documented.count >= 12, "the metrics table of docs/gateway.md: \(documented)")
                // The per-origin paused gauge has a series only for an origin that was paused (WebPushRefusalTests); the
                // listener's two only on PostgreSQL, which listens (GatewayPostgresListenTests).
                let elsewhere: Set = ["sealedpush_gateway_webhook_requests_total", "sealedpush_webpush_origin_paused",
                                      "sealedpush_gateway_listener_connected", "sealedpush_gateway_listener_lost_total"]
                for name in documented.subtracting(elsewhere).sorted() {
                    #expect(metrics.contains("# TYPE \(name) "), "documented but not on /metrics: \(name)")
                }
                #expect(metrics.contains(#"sealedpush_gateway_webhook_dropped_total{app="chat"} 0"#), "declared at zero from the start")
            }
        }

        @Test func retriesKeepOneAPNsIDAndTTLZeroExpiresUnder503() async throws {
            let apns = ScriptedAPNs()
            try await withGateway("retries", options: scriptedOptions(apns)) { g in
                let p = try Phone(in: g.directory, name: "p", token: hexToken(1))
                let q = try Phone(in: g.directory, name: "q", token: hexToken(2))
                try await g.register(p, device: "p", user: "u1")
                try await g.register(q, device: "q", user: "u2")
                apns.answer(p.token, with: [rejection(503, .serviceUnavailable), .timedOut(tries: 1), rejection(429, .tooManyRequests)])
                let sent = try await g.send(JSONObject([("user_id", "u1")]), extra: JSONObject([("collapse_id", "c-1")]))
                let id = try #require(sent.json["message_id"]?.stringValue)
                let message = try await g.waitForStates(id, ["accepted"])
                let delivery = try #require(message["deliveries"]?.arrayValue?.first?.objectValue)
                #expect(delivery["attempts"] == .int(4))
                let tries = apns.pushes(to: p.token)
                #expect(tries.count == 4 && Set(tries.map(\.apnsID)).count == 1, "one apns-id on every attempt")
                #expect(delivery["apns_id"]?.stringValue == tries.first?.apnsID)
                #expect(tries.allSatisfy { $0.collapseID == "c-1" && $0.priority == 10 && $0.topic == TestAPNs.topic })

                // ttl 0: tried once; a 503 ends it `expired`.
                apns.answer(q.token, with: [rejection(503, .serviceUnavailable)])
                let now = try await g.send(JSONObject([("user_id", "u2")]), extra: JSONObject([("ttl", .int(0))]))
                let nowID = try #require(now.json["message_id"]?.stringValue)
                let expired = try await g.waitForStates(nowID, ["expired"])
                #expect(expired["deliveries"]?.arrayValue?.first?.objectValue?["reason"]?.stringValue == "ttl_expired")
                #expect(apns.pushes(to: q.token).count == 1)
                #expect(apns.pushes(to: q.token).first?.expiration == 0)
                // The default collapse id is the delivery id.
                let d = try #require(expired["deliveries"]?.arrayValue?.first?.objectValue)
                #expect(apns.pushes(to: q.token).first?.collapseID == d["delivery_id"]?.stringValue)
            }
        }

        @Test func finalAnswersAndTheTimestampRule() async throws {
            let apns = ScriptedAPNs()
            try await withGateway("finals", options: scriptedOptions(apns)) { g in
                let gone = try Phone(in: g.directory, name: "gone", token: hexToken(0x10))
                let stale = try Phone(in: g.directory, name: "stale", token: hexToken(0x11))
                let bad = try Phone(in: g.directory, name: "bad", token: hexToken(0x12))
                let refused = try Phone(in: g.directory, name: "refused", token: hexToken(0x13))
                for (phone, id) in [(gone, "gone"), (stale, "stale"), (bad, "bad"), (refused, "refused")] {
                    try await g.register(phone, device: id, user: id)
                }
                let later = Int64(Date().timeIntervalSince1970 * 1000) + 60_000
                apns.answer(gone.token, with: [rejection(410, .unregistered, timestamp: later)])
                apns.answer(stale.token, with: [rejection(410, .unregistered, timestamp: 1_000)])  // before its registration
                apns.answer(bad.token, with: [rejection(400, .badDeviceToken)])
                apns.answer(refused.token, with: [rejection(400, .badCollapseID)])
                var ids: [String: String] = [:]
                for user in ["gone", "stale", "bad", "refused"] {
                    ids[user] = try #require(try await g.send(JSONObject([("user_id", .string(user))])).json["message_id"]?.stringValue)
                }
                for user in ["gone", "stale", "bad"] { try await g.waitForStates(ids[user]!, ["unregistered"]) }
                let r = try await g.waitForStates(ids["refused"]!, ["rejected"])
                #expect(r["deliveries"]?.arrayValue?.first?.objectValue?["reason"]?.stringValue == "BadCollapseId")
                #expect(r["deliveries"]?.arrayValue?.first?.objectValue?["apns_status"] == .int(400))
                func deviceState(_ id: String) async throws -> String? { try await g.api.call(.GET, "/v1/apps/chat/devices/\(id)").json["state"]?.stringValue }
                #expect(try await deviceState("gone") == "unregistered")
                #expect(try await deviceState("stale") == "active", "a stale 410 never kills a re-registered token")
                #expect(try await deviceState("bad") == "unregistered")
                #expect(try await deviceState("refused") == "active")
                let device = try await g.api.call(.GET, "/v1/apps/chat/devices/gone").json
                #expect(device["unregistered_reason"]?.stringValue == "Unregistered")
                // Listed as unregistered; a re-registration makes it active again and it is sent to.
                let listed = try await g.api.call(.GET, "/v1/apps/chat/devices?state=unregistered").json["devices"]?.arrayValue ?? []
                #expect(Set(listed.compactMap { $0.objectValue?["device_id"]?.stringValue }) == ["gone", "bad"])
                #expect(try await g.register(gone, device: "gone", user: "gone").json["state"]?.stringValue == "active")
                let again = try await g.send(JSONObject([("user_id", "gone")]))
                try await g.waitForStates(try #require(again.json["message_id"]?.stringValue), ["accepted"])
            }
        }

        @Test func credentialAnswersPauseTheAppUntilReload() async throws {
            let apns = ScriptedAPNs()
            try await withGateway("paused", options: scriptedOptions(apns)) { g in
                let p = try Phone(in: g.directory, name: "p", token: hexToken(0x20))
                try await g.register(p, device: "p", user: "u")
                apns.answer(p.token, with: [rejection(403, .invalidProviderToken)])
                let id = try #require(try await g.send(JSONObject([("user_id", "u")])).json["message_id"]?.stringValue)
                try await waitUntil("the app to pause", within: .seconds(30)) {
                    let ready = try await g.admin.call(.GET, "/readyz", key: nil).json
                    return (ready["apps"]?.arrayValue ?? []).contains { $0.objectValue?["state"]?.stringValue == "paused" }
                }
                // The pause is visible (readiness, metrics) as the worker hands the delivery back: wait for that write too.
                try await waitUntil("the delivery to be handed back as credentials_paused", within: .seconds(30)) {
                    let message = try await g.api.call(.GET, "/v1/apps/chat/messages/\(id)").json
                    return message["deliveries"]?.arrayValue?.first?.objectValue?["reason"]?.stringValue == "credentials_paused"
                }
                let message = try await g.api.call(.GET, "/v1/apps/chat/messages/\(id)").json
                let d = try #require(message["deliveries"]?.arrayValue?.first?.objectValue)
                #expect(d["state"]?.stringValue == "queued" && d["reason"]?.stringValue == "credentials_paused" && d["attempts"] == .int(0))
                #expect(try await g.admin.call(.GET, "/readyz", key: nil).status == 200, "a paused app does not fail readiness")
                #expect(try await g.admin.call(.GET, "/metrics", key: nil).text.contains(#"sealedpush_gateway_app_paused{app="chat",platform="apns"} 1"#))
                // The configuration is fixed and reloaded: sending resumes.
                try await g.gateway.reload(try GatewayConfiguration.load(path: g.directory.appendingPathComponent("gateway.json").path))
                try await g.waitForStates(id, ["accepted"])
                let admin = try await g.admin.call(.GET, "/metrics", key: nil)
                #expect(admin.text.contains(#"sealedpush_gateway_app_paused{app="chat",platform="apns"} 0"#))
                #expect(admin.header("Request-Id") != nil)
            }
        }

        @Test func cancelledExpiredAndDeliveredByReceipt() async throws {
            let apns = ScriptedAPNs()
            let clock = NIOLockedValueBox(Int64(Date().timeIntervalSince1970 * 1000))
            var options = scriptedOptions(apns)
            options.clock = SealedPushClock(wall: { UnixMilliseconds(clock.withLockedValue { $0 }) }, monotonic: { ContinuousClock.now })
            try await withGateway("cancel", options: options) { g in
                let p = try Phone(in: g.directory, name: "p", token: hexToken(0x30))
                try await g.register(p, device: "p", user: "u")
                // Held by retries, then deleted: cancelled.
                apns.answer(p.token, with: Array(repeating: rejection(500, .internalServerError), count: 50))
                let first = try #require(try await g.send(JSONObject([("user_id", "u")])).json["message_id"]?.stringValue)
                try await waitUntil("a first attempt", within: .seconds(30)) { !apns.pushes(to: p.token).isEmpty }
                #expect(try await g.api.call(.DELETE, "/v1/apps/chat/messages/\(first)").status == 204)
                let cancelled = try await g.waitForStates(first, ["cancelled"])
                #expect(cancelled["deliveries"]?.arrayValue?.first?.objectValue?["reason"]?.stringValue == "message_deleted")
                #expect(try await g.admin.call(.GET, "/metrics", key: nil).text
                    .contains(#"sealedpush_gateway_deliveries_total{app="chat",platform="",state="cancelled"} 1"#))
                // Its ttl runs out between retries: expired, never sent past it.
                let second = try #require(try await g.send(JSONObject([("user_id", "u")]), extra: JSONObject([("ttl", .int(60))])).json["message_id"]?.stringValue)
                try await waitUntil("an attempt of the second message", within: .seconds(30)) { apns.pushes(to: p.token).count >= 2 }
                clock.withLockedValue { $0 += 120_000 }
                let expired = try await g.waitForStates(second, ["expired"])
                #expect(expired["deliveries"]?.arrayValue?.first?.objectValue?["reason"]?.stringValue == "ttl_expired")
                // A receipt turns even an expired delivery into delivered: the phone opened it.
                let push = try #require(apns.pushes(to: p.token).last)
                let shown = await p.open(push.payload, transport: g.receipts)
                #expect(shown.outcome == .decrypted, "\(shown)")
                try await g.waitForStates(second, ["delivered"])
            }
        }

        /// Messages and deliveries are kept `ttl` + 7 days, then deleted; idempotency answers 24 hours.
        @Test func oldRecordsArePruned() async throws {
            let apns = ScriptedAPNs()
            let clock = NIOLockedValueBox(Int64(Date().timeIntervalSince1970 * 1000))
            var options = scriptedOptions(apns)
            options.clock = SealedPushClock(wall: { UnixMilliseconds(clock.withLockedValue { $0 }) }, monotonic: { ContinuousClock.now })
            options.pruneInterval = .milliseconds(50)
            try await withGateway("prune", options: options) { g in
                let p = try Phone(in: g.directory, name: "p", token: hexToken(0x40))
                try await g.register(p, device: "p", user: "u")
                let sent = try await g.send(JSONObject([("user_id", "u")]), extra: JSONObject([("ttl", .int(3600))]), headers: [("Idempotency-Key", "k1")])
                let id = try #require(sent.json["message_id"]?.stringValue)
                try await g.waitForStates(id, ["accepted"])
                clock.withLockedValue { $0 += 6 * 86_400_000 }
                try await Task.sleep(for: .milliseconds(300))
                #expect(try await g.api.call(.GET, "/v1/apps/chat/messages/\(id)").status == 200, "kept ttl + 7 days")
                #expect(try await g.send(JSONObject([("user_id", "u")]), extra: JSONObject([("ttl", .int(3600))]),
                                         headers: [("Idempotency-Key", "k1")]).header("Idempotent-Replayed") == nil, "an answer is replayed for 24 hours only")
                clock.withLockedValue { $0 += 2 * 86_400_000 }
                try await waitUntil("the message to be pruned", within: .seconds(30)) {
                    try await g.api.call(.GET, "/v1/apps/chat/messages/\(id)").status == 404
                }
            }
        }

        /// The worker reads the injected clock (#36), not the machine's: with `pruneInterval` an hour and a clock that
        /// stands still, nothing is pruned however long the test takes; once the injected clock moves 8 days (its
        /// monotonic reading past the interval, its wall reading past `ttl` + 7 days), the message is pruned.
        @Test func theWorkerPrunesOnTheInjectedClock() async throws {
            let apns = ScriptedAPNs()
            let clock = SealedPushManualClock()
            var options = scriptedOptions(apns)
            options.clock = clock.clock
            options.pruneInterval = .seconds(3600)
            try await withGateway("prune-clock", options: options) { g in
                let p = try Phone(in: g.directory, name: "p", token: hexToken(0x41))
                try await g.register(p, device: "p", user: "u")
                let sent = try await g.send(JSONObject([("user_id", "u")]), extra: JSONObject([("ttl", .int(3600))]))
                let id = try #require(sent.json["message_id"]?.stringValue)
                let accepted = try await g.waitForStates(id, ["accepted"])
                // Stored on the injected wall clock.
                #expect(accepted["created_at"]?.stringValue == GatewayTime.format(clock.wall.milliseconds), "\(accepted)")
                clock.advance(by: .seconds(8 * 86_400))
                try await waitUntil("the message to be pruned", within: .seconds(30)) {
                    try await g.api.call(.GET, "/v1/apps/chat/messages/\(id)").status == 404
                }
            }
        }

        /// SIGTERM's graceful shutdown: new messages get 503 while the attempt in flight finishes, then it stops.
        /// While a slow APNs holds most of the in-flight slots, the worker does not wait for a batch's worth
        /// of free slots (a quarter of its share) longer than `claimDelay`: a new message leaves at once.
        @Test func aSlowAPNsDoesNotHoldNewMessagesBack() async throws {
            let apns = ScriptedAPNs()
            var options = scriptedOptions(apns)
            options.claimDelay = .milliseconds(20)
            let g = try await GatewayHarness(name: "slow-apns", options: options, extraApp: JSONObject([("max_in_flight", 8)]))
            var slow: [Phone] = []
            for n in 0..<7 {
                let phone = try Phone(in: g.directory, name: "s\(n)", token: hexToken(0x700 + n))
                apns.tokenDelays.withLockedValue { $0[phone.token] = .seconds(6) }
                try await g.register(phone, device: "s\(n)", user: "slow-\(n)")
                slow.append(phone)
            }
            let fast = try Phone(in: g.directory, name: "f", token: hexToken(0x7ff))
            try await g.register(fast, device: "f", user: "fast")
            for n in 0..<7 { #expect(try await g.send(JSONObject([("user_id", .string("slow-\(n)"))])).status == 202) }
            try await waitUntil("the seven slow attempts to start", within: .seconds(30)) {
                slow.allSatisfy { !apns.pushes(to: $0.token).isEmpty }
            }
            // Seven of eight slots are held for 6 s; one is free, under the batch of two.
            let posted = ContinuousClock.now
            #expect(try await g.send(JSONObject([("user_id", "fast")])).status == 202)
            try await waitUntil("the new message's attempt", within: .seconds(30)) { !apns.pushes(to: fast.token).isEmpty }
            let waited = posted.duration(to: .now)
            #expect(waited < .seconds(3), "the new message waited \(waited) for the slow attempts")
            #expect(slow.allSatisfy { apns.pushes(to: $0.token).count == 1 })
            await g.stop()
        }

        /// The claim rule: a batch's worth free, nothing in flight, or the delay passed — and always a free slot.
        @Test func claimRule() {
            let d = Duration.milliseconds(20)
            #expect(DeliveryWorker.shouldClaim(free: 25, held: 75, batch: 25, waited: .zero, delay: d))
            #expect(!DeliveryWorker.shouldClaim(free: 1, held: 99, batch: 25, waited: .milliseconds(5), delay: d))
            #expect(DeliveryWorker.shouldClaim(free: 1, held: 99, batch: 25, waited: .milliseconds(20), delay: d))
            #expect(DeliveryWorker.shouldClaim(free: 1, held: 0, batch: 25, waited: .zero, delay: d))
            #expect(!DeliveryWorker.shouldClaim(free: 0, held: 100, batch: 25, waited: .seconds(5), delay: d))
        }

        @Test func gracefulShutdownAnswers503AndFinishesTheAttemptInFlight() async throws {
            let apns = ScriptedAPNs()
            apns.delay.withLockedValue { $0 = .seconds(2) }
            let g = try await GatewayHarness(name: "drain", options: scriptedOptions(apns))
            let p = try Phone(in: g.directory, name: "p", token: hexToken(0x50))
            try await g.register(p, device: "p", user: "u")
            let id = try #require(try await g.send(JSONObject([("user_id", "u")])).json["message_id"]?.stringValue)
            try await waitUntil("the attempt to start", within: .seconds(30)) { !apns.pushes(to: p.token).isEmpty }
            let stopping = Task { await g.group.triggerGracefulShutdown() }
            var refused: Answer?
            try await waitUntil("a send to be refused while draining", within: .seconds(30)) {
                let a = try await g.send(JSONObject([("user_id", "u")]))
                if a.status == 503 { refused = a }
                return a.status == 503
            }
            #expect(refused?.code == "unavailable" && refused?.header("Retry-After") != nil)
            #expect(try await g.admin.call(.GET, "/readyz", key: nil).status == 503)
            let message = try await g.api.call(.GET, "/v1/apps/chat/messages/\(id)").json
            #expect(message["deliveries"]?.arrayValue?.first?.objectValue?["state"]?.stringValue != nil)
            await stopping.value
            _ = try? await g.running.value
            // The attempt in flight finished and was written before the worker returned (the group then closed the
            // store: it is opened again to read it).
            #expect(g.gateway.closed.withLockedValue { $0 })
            let store = try await SQLiteGatewayStore.open(path: g.directory.appendingPathComponent("gateway.db").path, logger: Logger(label: "drain-test"))
            let after = try await store.message(app: "chat", messageID: id)
            await store.close()
            #expect(after?.deliveries.first?.state == .accepted)
            await g.stop()
        }
    }
}
