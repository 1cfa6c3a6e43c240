import Foundation
import SealedPushAPNs
import SealedPushAPNsCore
@testable import SealedPushGateway
import AsyncHTTPClient
import Crypto
import NIOCore
import SealedPushWire
import SealedPushCrypto
import SealedPushTestSupport
import Testing

extension GatewaySuites {
    /// Webhooks (gateway v1 §8) against an independent receiver on loopback that checks every signature.
    @Suite("Gateway webhooks: signed events, retries, catching up", .serialized, .timeLimit(.minutes(10)))
    struct GatewayWebhookTests {
        /// Every event type the gateway makes reaches the receiver signed and fresh; each event is written in the
        /// transaction of its change (listed as soon as the API shows the change); the listing, paged with
        /// `after`, holds exactly the events the receiver acknowledged, in the order they were written.
        @Test func everyEventTypeArrivesSignedAndTheListingMatches() async throws {
            let apns = ScriptedAPNs()
            let (file, secret) = try WebhookReceiver.writeSecret()
            let receiver = try await WebhookReceiver(secret: secret)
            defer { try? FileManager.default.removeItem(at: file.deletingLastPathComponent()) }
            try await withGateway("webhooks", options: webhookOptions(apns),
                                  extraApp: WebhookReceiver.appMembers(port: receiver.port, secretFile: file)) { g in
                let phones = try (0..<5).map { n in try Phone(in: g.directory, name: "p\(n)", token: hexToken(0x100 + n)) }
                for (n, phone) in phones.enumerated() { try await g.register(phone, device: "d\(n)", user: "u\(n)") }
                apns.answer(phones[1].token, with: [rejection(400, .badTopic)])
                apns.answer(phones[2].token, with: [rejection(410, .unregistered)])
                apns.answer(phones[3].token, with: [rejection(503, .serviceUnavailable)])

                // accepted, then delivered (the phone opens it and posts its receipt).
                let first = try #require(try await g.send(JSONObject([("user_id", "u0")])).json["message_id"]?.stringValue)
                try await g.waitForStates(first, ["accepted"])
                let push = try #require(apns.pushes(to: phones[0].token).last)
                #expect(await phones[0].open(push.payload, transport: g.receipts).outcome == .decrypted)
                let delivered = try await g.waitForStates(first, ["delivered"])
                // Written in the transaction that made it delivered: listed as soon as the API shows it.
                let deliveredDelivery = try #require(delivered["deliveries"]?.arrayValue?.first?.objectValue)
                let listed = try await g.allEvents(pageSize: 1000)
                let deliveredEvent = try #require(listed.first {
                    $0["type"]?.stringValue == "delivery.delivered"
                        && $0["data"]?.objectValue?["delivery"]?.objectValue?["delivery_id"] == deliveredDelivery["delivery_id"]
                }, "the delivered event is in the listing as soon as the API shows the delivery delivered")
                #expect(deliveredEvent["data"]?.objectValue?["delivery"]?.objectValue?["seq"] == deliveredDelivery["seq"])
                #expect(deliveredEvent["data"]?.objectValue?["message_id"]?.stringValue == first)
                #expect(deliveredEvent["app"]?.stringValue == "chat")

                // rejected, unregistered (+ device.unregistered), expired (ttl 0 and a 503).
                for (user, state, extra) in [("u1", "rejected", JSONObject([])), ("u2", "unregistered", JSONObject([])),
                                             ("u3", "expired", JSONObject([("ttl", .int(0))]))] {
                    let id = try #require(try await g.send(JSONObject([("user_id", .string(user))]), extra: extra).json["message_id"]?.stringValue)
                    try await g.waitForStates(id, [state])
                }
                // cancelled: deleted while its attempt is in flight (APNs slow); the push ends as APNs answers (gateway v1 §5,
                // revision 2), a 503 here, so the delete applies then (or at once, had the attempt not started yet).
                apns.delay.withLockedValue { $0 = .seconds(2) }
                apns.answer(phones[4].token, with: [rejection(503, .serviceUnavailable)])
                let slow = try #require(try await g.send(JSONObject([("user_id", "u4")])).json["message_id"]?.stringValue)
                #expect(try await g.api.call(.DELETE, "/v1/apps/chat/messages/\(slow)").status == 204)
                try await g.waitForStates(slow, ["cancelled"])
                apns.delay.withLockedValue { $0 = .zero }

                let types: Set<String> = ["delivery.accepted", "delivery.delivered", "delivery.rejected", "delivery.unregistered",
                                          "delivery.expired", "delivery.cancelled", "device.unregistered"]
                try await waitUntil("every event type to reach the receiver", within: .seconds(60)) {
                    types.isSubset(of: Set(receiver.all.filter { $0.status == 200 }.map(\.type)))
                }
                // The listing, two at a time, holds exactly what the receiver acknowledged, in order.
                var events: [JSONObject] = []
                try await waitUntil("the receiver to acknowledge every listed event", within: .seconds(60)) {
                    events = try await g.allEvents(pageSize: 2)
                    return Set(events.compactMap { $0["id"]?.stringValue }) == receiver.acknowledged
                }
                let ids = events.compactMap { $0["id"]?.stringValue }
                #expect(Set(ids).count == ids.count, "event ids are unique")
                #expect(ids.allSatisfy { $0.hasPrefix("evt_") && $0.utf8.count == 36 })
                let times = events.compactMap { $0["created_at"]?.stringValue.flatMap(GatewayTime.parse) }
                #expect(times.count == events.count && times == times.sorted(), "listed in the order they were written")
                #expect(Set(events.compactMap { $0["type"]?.stringValue }) == types)
                let device = try #require(events.first { $0["type"]?.stringValue == "device.unregistered" }?["data"]?.objectValue)
                #expect(device["device_id"]?.stringValue == "d2" && device["state"]?.stringValue == "unregistered")
                #expect(device["apns_token_suffix"]?.stringValue == String(phones[2].token.suffix(8)))
                // What was POSTed is byte for byte what is listed, and every arrival was signed and fresh.
                for arrival in receiver.all {
                    #expect(arrival.signatureValid, "event \(arrival.id): the signature does not match")
                    #expect(arrival.fresh, "event \(arrival.id): t is not within 5 minutes")
                }
                let listedBodies = Dictionary(uniqueKeysWithValues: events.map { ($0["id"]?.stringValue ?? "", JSON.serialize(.object($0))) })
                for arrival in receiver.all where arrival.status == 200 {
                    #expect(JSON.serialize(.object(arrival.json)) == listedBodies[arrival.id])
                }
                // An unknown `after` is gone (410), a malformed one 400; the read scope suffices, send alone does not.
                #expect(try await g.api.call(.GET, "/v1/apps/chat/events?after=evt_" + String(repeating: "0", count: 32)).status == 410)
                #expect(try await g.api.call(.GET, "/v1/apps/chat/events?after=nope").status == 400)
                #expect(try await g.api.call(.GET, "/v1/apps/chat/events", key: Keys.sendOnly).status == 403)
                #expect(try await g.api.call(.GET, "/v1/apps/chat/events?limit=0").status == 400)
            }
            await receiver.stop()
        }

        /// A receiver that answers 500 twice: the same event id arrives three times, each signed afresh (a later
        /// `t`, another signature), and is acknowledged by the third.
        @Test func failuresAreRetriedWithTheSameIDSignedAfresh() async throws {
            let apns = ScriptedAPNs()
            let (file, secret) = try WebhookReceiver.writeSecret()
            let receiver = try await WebhookReceiver(secret: secret, failFirst: 2)
            defer { try? FileManager.default.removeItem(at: file.deletingLastPathComponent()) }
            // Retries at least 1.1 s apart, so each attempt has its own `t`.
            try await withGateway("webhook-retries", options: webhookOptions(apns, base: .milliseconds(2200)),
                                  extraApp: WebhookReceiver.appMembers(port: receiver.port, secretFile: file)) { g in
                let phone = try Phone(in: g.directory, name: "p", token: hexToken(0x200))
                try await g.register(phone, device: "d", user: "u")
                let id = try #require(try await g.send(JSONObject([("user_id", "u")])).json["message_id"]?.stringValue)
                try await g.waitForStates(id, ["accepted"])
                try await waitUntil("the event to be acknowledged on its third attempt", within: .seconds(60)) { !receiver.acknowledged.isEmpty }
                let arrivals = receiver.all
                #expect(arrivals.map(\.status) == [500, 500, 200])
                #expect(Set(arrivals.map(\.id)).count == 1, "one event id on every attempt")
                #expect(arrivals.allSatisfy { $0.signatureValid && $0.fresh })
                #expect(arrivals[0].t < arrivals[1].t && arrivals[1].t < arrivals[2].t, "each attempt has its own t")
                #expect(Set(arrivals.map(\.v1)).count == 3, "each attempt is signed afresh")
                #expect(Set(arrivals.map(\.body)).count == 1, "the body is the same on every attempt")
                // The verification snippets of docs/gateway.md accept every attempt as sent, and refuse a changed body.
                try await checkDocumentedVerifiers(secret: secret, arrivals: arrivals)
                let metrics = try await g.admin.call(.GET, "/metrics", key: nil).text
                #expect(metrics.contains(#"sealedpush_gateway_webhook_requests_total{app="chat",status="500"} 2"#), "\(metrics)")
                #expect(metrics.contains(#"sealedpush_gateway_webhook_requests_total{app="chat",status="200"} 1"#))
            }
            await receiver.stop()
        }

        /// Webhooks in parallel (#47): one POST the receiver holds unanswered holds one slot, not the app's webhook:
        /// events made after it are POSTed and acknowledged while it still waits (a loop that waited for its whole
        /// claim before claiming again kept them behind it), and the held one is acknowledged once answered.
        @Test func aSlowAnswerHoldsOneSlotNotTheEventsBehindIt() async throws {
            let apns = ScriptedAPNs()
            let (file, secret) = try WebhookReceiver.writeSecret()
            let receiver = try await WebhookReceiver(secret: secret, holdFirst: true)
            defer { try? FileManager.default.removeItem(at: file.deletingLastPathComponent()) }
            // The gateway waits for an answer longer than the test waits for the others: only a loop that claims past
            // the held POST gets them acknowledged in time.
            var options = webhookOptions(apns)
            options.webhookTimeout = .seconds(60)
            try await withGateway("webhook-parallel", options: options,
                                  extraApp: WebhookReceiver.appMembers(port: receiver.port, secretFile: file)) { g in
                let phone = try Phone(in: g.directory, name: "p", token: hexToken(0x210))
                try await g.register(phone, device: "d", user: "u")
                _ = try await g.send(JSONObject([("user_id", "u")]))
                try await waitUntil("the first POST to be held", within: .seconds(20)) { receiver.holding.withLockedValue { $0 } }
                let held = try #require(receiver.all.first?.id)
                for _ in 0..<3 { _ = try await g.send(JSONObject([("user_id", "u")])) }
                try await waitUntil("three more events acknowledged while the first is held", within: .seconds(15)) {
                    receiver.acknowledged.subtracting([held]).count >= 3
                }
                #expect(receiver.holding.withLockedValue { $0 }, "the first POST was still unanswered when the others were acknowledged")
                receiver.releaseFirst()
                try await waitUntil("the held event acknowledged once answered", within: .seconds(20)) {
                    receiver.all.filter { $0.id == held }.count >= 1 && !receiver.holding.withLockedValue { $0 }
                }
            }
            await receiver.stop()
        }

        /// A webhook's `concurrency` is a whole number from 1 to 64; absent, the gateway's default (8) applies.
        @Test func theWebhookConcurrencyMemberIsChecked() throws {
            let directory = try GatewayHarness.parseTestDirectory("webhook-concurrency")
            defer { try? FileManager.default.removeItem(at: directory) }
            let secretFile = directory.appendingPathComponent("good.secret")
            try Data(String(repeating: "x", count: 40).utf8).write(to: secretFile)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: secretFile.path)
            func parse(_ concurrency: String?) throws -> GatewayConfiguration {
                let member = concurrency.map { #", "concurrency": \#($0)"# } ?? ""
                let text = """
                    {"public_url": "https://push.example.com", "database": "sqlite:g.db", "apps": [{"id": "chat", "topic": "com.example.chat",
                     "apns": {"auth_key": "key.p8", "key_id": "KEY0000001", "team_id": "TEAM000001"},
                     "api_keys": [{"id": "k", "sha256": "\(String(repeating: "ab", count: 32))", "scopes": ["read"]}],
                     "webhook": {"url": "https://backend.example.com/hook", "secret_file": "good.secret"\(member)}}]}
                    """
                return try GatewayConfiguration.parse(Array(text.utf8), baseDirectory: directory.path)
            }
            #expect(try parse(nil).apps[0].webhook?.concurrency == nil)
            #expect(try parse("3").apps[0].webhook?.concurrency == 3)
            for bad in ["0", "65", "2.5", #""8""#] {
                #expect(throws: GatewayConfigurationError.self, "concurrency \(bad)") { try parse(bad) }
            }
        }

        /// Events made while the receiver is down survive a restart of the gateway and all arrive once it is up.
        @Test func aReceiverDownThenUpAcrossARestartLosesNothing() async throws {
            let apns = ScriptedAPNs()
            let (file, secret) = try WebhookReceiver.writeSecret()
            defer { try? FileManager.default.removeItem(at: file.deletingLastPathComponent()) }
            let port = try GatewayHarness.freePort()  // nothing listens there yet
            let members = WebhookReceiver.appMembers(port: port, secretFile: file)
            let first = try await GatewayHarness(name: "webhook-down", options: webhookOptions(apns), extraApp: members)
            var listed: Set<String> = []
            do {
                let phone = try Phone(in: first.directory, name: "p", token: hexToken(0x300))
                try await first.register(phone, device: "d", user: "u")
                for _ in 0..<3 {
                    let id = try #require(try await first.send(JSONObject([("user_id", "u")])).json["message_id"]?.stringValue)
                    try await first.waitForStates(id, ["accepted"])
                }
                listed = Set(try await first.allEvents().compactMap { $0["id"]?.stringValue })
                #expect(listed.count == 3)
                try await waitUntil("a failed attempt (nobody listening)", within: .seconds(30)) {
                    try await first.admin.call(.GET, "/metrics", key: nil).text
                        .contains(#"sealedpush_gateway_webhook_requests_total{app="chat",status="none"}"#)
                }
            } catch {
                await first.stop()
                throw error
            }
            await first.stop(keepFiles: true)
            // The receiver comes up, and the gateway restarts on the same database.
            let receiver = try await WebhookReceiver(secret: secret, port: port)
            let second = try await GatewayHarness(name: "webhook-up", options: webhookOptions(apns), extraApp: members, directory: first.directory)
            do {
                try await waitUntil("every event made while the receiver was down to arrive", within: .seconds(60)) {
                    listed.isSubset(of: receiver.acknowledged)
                }
                #expect(receiver.all.allSatisfy { $0.signatureValid && $0.fresh })
                #expect(Set(try await second.allEvents().compactMap { $0["id"]?.stringValue }) == listed)
            } catch {
                await second.stop()
                await receiver.stop()
                throw error
            }
            await second.stop()
            await receiver.stop()
        }

        /// An event never acknowledged within the retry window is dropped and counted, and stays listed.
        @Test func anEventUnacknowledgedForTheWindowIsDroppedAndCounted() async throws {
            let apns = ScriptedAPNs()
            let (file, secret) = try WebhookReceiver.writeSecret()
            let receiver = try await WebhookReceiver(secret: secret, failFirst: Int.max)
            defer { try? FileManager.default.removeItem(at: file.deletingLastPathComponent()) }
            try await withGateway("webhook-dropped", options: webhookOptions(apns, window: .seconds(2)),
                                  extraApp: WebhookReceiver.appMembers(port: receiver.port, secretFile: file)) { g in
                let phone = try Phone(in: g.directory, name: "p", token: hexToken(0x400))
                try await g.register(phone, device: "d", user: "u")
                let id = try #require(try await g.send(JSONObject([("user_id", "u")])).json["message_id"]?.stringValue)
                try await g.waitForStates(id, ["accepted"])
                try await waitUntil("the event to be dropped", within: .seconds(30)) {
                    try await g.admin.call(.GET, "/metrics", key: nil).text.contains(#"sealedpush_gateway_webhook_dropped_total{app="chat"} 1"#)
                }
                #expect(receiver.all.count >= 1 && receiver.acknowledged.isEmpty)
                #expect(try await g.allEvents().count == 1, "a dropped event is still listed")
                let page = try await g.admin.call(.GET, "/", key: nil).text
                #expect(metric(page, "chat.events.dropped") == "1")
            }
            await receiver.stop()
        }

        /// The `webhook` member is checked like the rest of the configuration: each fault names its member, and
        /// neither an error nor the configuration's description holds the secret.
        @Test func theWebhookMemberIsChecked() throws {
            let directory = try GatewayHarness.parseTestDirectory("webhook-config")
            defer { try? FileManager.default.removeItem(at: directory) }
            let secret = "s3cr3t-" + String(repeating: "x", count: 30)
            func write(_ name: String, _ text: String, mode: Int) throws {
                let url = directory.appendingPathComponent(name)
                try Data(text.utf8).write(to: url)
                try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: url.path)
            }
            try write("good.secret", "  \(secret)\n", mode: 0o600)
            try write("open.secret", secret, mode: 0o644)
            try write("short.secret", "tooshort", mode: 0o600)
            func parse(_ webhook: String) throws(GatewayConfigurationError) -> GatewayConfiguration {
                let text = """
                    {"public_url": "https://push.example.com", "database": "sqlite:g.db", "apps": [{"id": "chat", "topic": "com.example.chat",
                     "apns": {"auth_key": "key.p8", "key_id": "KEY0000001", "team_id": "TEAM000001"},
                     "api_keys": [{"id": "k", "sha256": "\(String(repeating: "ab", count: 32))", "scopes": ["read"]}],
                     "webhook": \(webhook)}]}
                    """
                return try GatewayConfiguration.parse(Array(text.utf8), baseDirectory: directory.path)
            }
            let good = try parse(#"{"url": "https://backend.example.com/hooks/sealedpush?token=abc", "secret_file": "good.secret"}"#)
            let webhook = try #require(good.apps[0].webhook)
            #expect(webhook.url == "https://backend.example.com/hooks/sealedpush?token=abc")
            #expect(webhook.secretPath == directory.appendingPathComponent("good.secret").path)
            #expect(!"\(webhook)".contains(secret) && !"\(webhook)".contains("token=abc"), "\(webhook)")
            #expect(try parse("null").apps[0].webhook == nil)
            #expect(try parse(#"{"url": "http://127.0.0.1:9999/hook", "secret_file": "good.secret"}"#).apps[0].webhook != nil, "http to loopback is allowed")
            // A rotation: the previous secret signs too; the same secret twice is a mistake.
            try write("old.secret", "old-" + String(repeating: "y", count: 30), mode: 0o600)
            let rotating = try #require(try parse(#"{"url": "https://backend.example.com/hook", "secret_file": "good.secret", "previous_secret_file": "old.secret"}"#).apps[0].webhook)
            #expect(rotating.previousSecretPath == directory.appendingPathComponent("old.secret").path)
            #expect(rotating.signingSecrets.map { String(decoding: $0, as: UTF8.self) } == [secret, "old-" + String(repeating: "y", count: 30)])
            #expect(!"\(rotating)".contains("old-yyy"))
            #expect(try parse(#"{"url": "https://backend.example.com/hook", "secret_file": "good.secret", "previous_secret_file": null}"#).apps[0].webhook?.signingSecrets.count == 1)
            let refused: [(String, String)] = [
                (#"{"url": "https://backend.example.com/hook", "secret_file": "good.secret", "previous_secret_file": "good.secret"}"#, "/apps/chat/webhook/previous_secret_file"),
                (#"{"url": "https://backend.example.com/hook", "secret_file": "good.secret", "previous_secret_file": "open.secret"}"#, "/apps/chat/webhook/previous_secret_file"),
                (#"{"url": "https://backend.example.com/hook", "secret_file": "good.secret", "previous_secret_file": "short.secret"}"#, "/apps/chat/webhook/previous_secret_file"),
                (#"{"url": "https://backend.example.com/hook", "secret_file": "good.secret", "previous_secret_file": 7}"#, "/apps/chat/webhook/previous_secret_file"),
                (#""https://x.example""#, "/apps/chat/webhook"),
                (#"{"url": "http://backend.example.com/hook", "secret_file": "good.secret"}"#, "/apps/chat/webhook/url"),
                (#"{"url": "ftp://backend.example.com/hook", "secret_file": "good.secret"}"#, "/apps/chat/webhook/url"),
                (#"{"secret_file": "good.secret"}"#, "/apps/chat/webhook/url"),
                (#"{"url": "https://backend.example.com/hook"}"#, "/apps/chat/webhook/secret_file"),
                (#"{"url": "https://backend.example.com/hook", "secret_file": "missing.secret"}"#, "/apps/chat/webhook/secret_file"),
                (#"{"url": "https://backend.example.com/hook", "secret_file": "open.secret"}"#, "/apps/chat/webhook/secret_file"),
                (#"{"url": "https://backend.example.com/hook", "secret_file": "short.secret"}"#, "/apps/chat/webhook/secret_file"),
                (#"{"url": "https://backend.example.com/hook", "secret_file": "good.secret", "events": []}"#, "/apps/chat/webhook/events"),
            ]
            for (webhook, member) in refused {
                #expect {
                    _ = try parse(webhook)
                } throws: { error in
                    guard let error = error as? GatewayConfigurationError else { return false }
                    return error.member == member && !error.description.contains(secret) && !error.description.contains("tooshort")
                }
            }
        }

        /// A secret rotation (`previous_secret_file`): each attempt carries two `v1=`, the new secret's first, so a
        /// receiver verifies with either secret (the documented verifiers too); a reload without the member signs
        /// with the new secret alone.
        @Test func duringARotationEachAttemptIsSignedWithBothSecrets() async throws {
            let apns = ScriptedAPNs()
            let (file, secret) = try WebhookReceiver.writeSecret()
            let (oldFile, oldSecret) = try WebhookReceiver.writeSecret()
            defer {
                try? FileManager.default.removeItem(at: file.deletingLastPathComponent())
                try? FileManager.default.removeItem(at: oldFile.deletingLastPathComponent())
            }
            // The receiver still holds the old secret.
            let receiver = try await WebhookReceiver(secret: oldSecret)
            var members = WebhookReceiver.appMembers(port: receiver.port, secretFile: file)
            var webhook = try #require(members["webhook"]?.objectValue)
            webhook["previous_secret_file"] = .string(oldFile.path)
            members["webhook"] = .object(webhook)
            try await withGateway("webhook-rotation", options: webhookOptions(apns), extraApp: members) { g in
                let phone = try Phone(in: g.directory, name: "p", token: hexToken(0x500))
                try await g.register(phone, device: "d", user: "u")
                let id = try #require(try await g.send(JSONObject([("user_id", "u")])).json["message_id"]?.stringValue)
                try await g.waitForStates(id, ["accepted"])
                try await waitUntil("the event to be acknowledged", within: .seconds(30)) { !receiver.acknowledged.isEmpty }
                let arrivals = receiver.all
                let first = try #require(arrivals.first)
                #expect(first.v1s.count == 2, "\(first.header)")
                #expect(first.signatureValid, "the old secret verifies")
                let underNew = HMAC<SHA256>.authenticationCode(for: Array("\(first.t).".utf8) + first.body, using: SymmetricKey(data: secret))
                #expect(first.v1s.first == Hex.encode(Array(underNew)), "the new secret's signature comes first")
                try await checkDocumentedVerifiers(secret: secret, arrivals: arrivals)
                try await checkDocumentedVerifiers(secret: oldSecret, arrivals: arrivals)
                try await checkDocumentedVerifiers(secret: Array("neither-of-the-two-secrets-0123456789".utf8), arrivals: arrivals, signedBySecret: false)

                // The rotation ends: the member is removed and the configuration reloaded.
                let path = g.directory.appendingPathComponent("gateway.json").path
                guard case var .object(configuration) = try JSON.parse(Array(try Data(contentsOf: URL(fileURLWithPath: path)))),
                      case var .array(apps)? = configuration["apps"], case var .object(app)? = apps.first,
                      case var .object(hook)? = app["webhook"] else {
                    Issue.record("gateway.json is not as the harness writes it")
                    return
                }
                hook["previous_secret_file"] = nil
                app["webhook"] = .object(hook)
                apps[0] = .object(app)
                configuration["apps"] = .array(apps)
                try Data(JSON.serialize(.object(configuration))).write(to: URL(fileURLWithPath: path))
                try await g.gateway.reload(try GatewayConfiguration.load(path: path))
                let second = try #require(try await g.send(JSONObject([("user_id", "u")])).json["message_id"]?.stringValue)
                try await g.waitForStates(second, ["accepted"])
                try await waitUntil("an attempt signed after the reload", within: .seconds(30)) { receiver.all.contains { $0.v1s.count == 1 } }
                let after = try #require(receiver.all.first { $0.v1s.count == 1 })
                #expect(!after.signatureValid, "the old secret no longer signs")
                let expected = HMAC<SHA256>.authenticationCode(for: Array("\(after.t).".utf8) + after.body, using: SymmetricKey(data: secret))
                #expect(after.v1 == Hex.encode(Array(expected)))
            }
            await receiver.stop()
        }

        /// Issue #36, bug 7. An attempt to a receiver that is down fails at once with the refusal (the worker's own
        /// backoff then schedules the next), instead of AsyncHTTPClient's pool retrying the connect on a backoff of
        /// its own and holding the attempt until its deadline (after a 22 s outage, attempts made once the receiver
        /// was back still waited out their 10 s); the first attempt once it is back is answered.
        @Test func anAttemptToAReceiverThatIsDownFailsAtOnceAndTheFirstOnceItIsBackIsAnswered() async throws {
            let port = try GatewayHarness.freePort()  // nothing listens there yet
            let client = WebhookWorker.makeClient(timeout: .seconds(5), concurrency: 16)
            func post() async -> WebhookAnswer {
                var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/hook")
                request.method = .POST
                request.body = .bytes(ByteBuffer(string: #"{"id": "evt_0"}"#))
                return await WebhookWorker.post(request, client: client, timeout: .seconds(5))
            }
            for _ in 0..<3 {
                #expect(await post() == .noAnswer("connection refused"), "the refusal itself, not a wait in the client's pool")
            }
            let receiver = try await WebhookReceiver(secret: Array("unused".utf8), port: port)
            #expect(await post() == .status(200))
            await receiver.stop()
            try await client.shutdown()
        }

        /// A receiver that is down, then up, within one run: once it listens, at most the attempt already under way
        /// fails, and the event is acknowledged at the next retry.
        @Test func aReceiverDownThenUpIsCaughtUpWithinARetryInterval() async throws {
            let apns = ScriptedAPNs()
            let (file, secret) = try WebhookReceiver.writeSecret()
            defer { try? FileManager.default.removeItem(at: file.deletingLastPathComponent()) }
            let port = try GatewayHarness.freePort()
            try await withGateway("webhook-outage", options: webhookOptions(apns),
                                  extraApp: WebhookReceiver.appMembers(port: port, secretFile: file)) { g in
                let phone = try Phone(in: g.directory, name: "p", token: hexToken(0x600))
                try await g.register(phone, device: "d", user: "u")
                let id = try #require(try await g.send(JSONObject([("user_id", "u")])).json["message_id"]?.stringValue)
                try await g.waitForStates(id, ["accepted"])
                func failed() async throws -> Int {
                    let page = try await g.admin.call(.GET, "/metrics", key: nil).text
                    let line = page.split(separator: "\n").first { $0.hasPrefix(#"sealedpush_gateway_webhook_requests_total{app="chat",status="none"}"#) }
                    return line.flatMap { Int($0.split(separator: " ").last ?? "") } ?? 0
                }
                try await waitUntil("three failed attempts (nobody listening)", within: .seconds(30)) { try await failed() >= 3 }
                let receiver = try await WebhookReceiver(secret: secret, port: port)
                let before = try await failed()
                try await waitUntil("the event to be acknowledged", within: .seconds(30)) { !receiver.acknowledged.isEmpty }
                #expect(try await failed() <= before + 1, "attempts made once the receiver listened failed")
                #expect(receiver.all.allSatisfy { $0.signatureValid && $0.fresh })
                await receiver.stop()
            }
        }

        /// The deadline covers the whole answer: a receiver that sends `200` and its headers, then stalls its body,
        /// has not answered (before, the deadline ended with the headers and such an answer acknowledged the event).
        @Test func theDeadlineCoversTheAnswersBody() async throws {
            let receiver = try await WebhookReceiver(secret: Array("unused".utf8), stallBody: true)
            let client = WebhookWorker.makeClient(timeout: .milliseconds(500), concurrency: 16)
            var request = HTTPClientRequest(url: "http://127.0.0.1:\(receiver.port)/hook")
            request.method = .POST
            request.body = .bytes(ByteBuffer(string: #"{"id": "evt_1"}"#))
            let answer = await WebhookWorker.post(request, client: client, timeout: .milliseconds(500))
            #expect(receiver.all.count == 1, "the request arrived")
            guard case let .noAnswer(why) = answer else {
                Issue.record("a body that never ended was taken as an answer: \(answer)")
                await receiver.stop()
                try await client.shutdown()
                return
            }
            #expect(why.contains("within"), "\(why)")
            await receiver.stop()
            try await client.shutdown()
        }
    }
}

/// Runs the Python and Node verification snippets of docs/gateway.md (as written there) on `arrivals` as
/// received (their whole `SealedPush-Signature` header, two `v1=` during a rotation), and on each with one byte of
/// its body changed: `signedBySecret` for the first (true: `secret` signed them), false for the second.
/// Python is required (`$SEALEDPUSH_PYTHON`, else `python3`); Node is run when `node` is installed.
func checkDocumentedVerifiers(secret: [UInt8], arrivals: [WebhookReceiver.Arrival], signedBySecret: Bool = true) async throws {
    let docs = try String(contentsOf: ProjectPaths.root.appendingPathComponent("docs/gateway.md"), encoding: .utf8)
    func snippet(_ fence: String) throws -> String {
        let start = try #require(docs.range(of: "```\(fence)\n"), "docs/gateway.md has no ```\(fence) block")
        let end = try #require(docs[start.upperBound...].range(of: "```"))
        return String(docs[start.upperBound..<end.lowerBound])
    }
    var cases: [JSONValue] = []
    for arrival in arrivals {
        var changed = arrival.body
        changed[changed.count / 2] ^= 0x01
        for (body, expected) in [(arrival.body, signedBySecret), (changed, false)] {
            cases.append(.object(JSONObject([("secret", .string(String(decoding: secret, as: UTF8.self))),
                                             ("header", .string(arrival.header)),
                                             ("body", .string(Data(body).base64EncodedString())), ("expected", .bool(expected))])))
        }
    }
    let input = JSON.serialize(.array(cases))
    let expected = cases.map { $0.objectValue?["expected"] == .bool(true) ? "true" : "false" }
    let environment = ProcessInfo.processInfo.environment
    let python = environment["SEALEDPUSH_PYTHON"] ?? (["/usr/bin/python3", "/usr/local/bin/python3"].first { FileManager.default.isExecutableFile(atPath: $0) } ?? "")
    try #require(FileManager.default.isExecutableFile(atPath: python), "no python3 to run the documented verifier; set SEALEDPUSH_PYTHON")
    let pythonProgram = try snippet("python") + """

        import base64, json, sys
        for c in json.load(sys.stdin):
            print(str(verify(c["secret"].encode(), c["header"], base64.b64decode(c["body"]))).lower())
        """
    let py = try await offPool { try ChildProcess.run(URL(fileURLWithPath: python), ["-c", pythonProgram], stdin: input, timeout: 60) }
    #expect(py.status == 0 && py.stdoutLines == expected, "the Python snippet: \(py.stdoutText) \(py.stderr)")
    guard let node = ["/usr/bin/node", "/usr/local/bin/node"].first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
        print("node is not installed: the Node snippet of docs/gateway.md was not run")
        return
    }
    let nodeProgram = try snippet("javascript") + """

        const cases = JSON.parse(require("node:fs").readFileSync(0, "utf8"));
        for (const c of cases) console.log(String(verify(c.secret, c.header, Buffer.from(c.body, "base64"))));
        """
    let js = try await offPool { try ChildProcess.run(URL(fileURLWithPath: node), ["-e", nodeProgram], stdin: input, timeout: 60) }
    #expect(js.status == 0 && js.stdoutLines == expected, "the Node snippet: \(js.stdoutText) \(js.stderr)")
}

/// The number a dashboard page shows under `data-metric="<name>"`, or nil.
func metric(_ page: String, _ name: String) -> String? { dashboardMetrics(page)[name] }

/// Every `data-metric="<name>"` of a dashboard page (server HTML or a browser's DOM dump) with its cell text.
func dashboardMetrics(_ page: String) -> [String: String] {
    var out: [String: String] = [:]
    var rest = Substring(page)
    while let start = rest.range(of: "data-metric=\"") {
        rest = rest[start.upperBound...]
        guard let close = rest.firstIndex(of: "\""), let gt = rest[close...].firstIndex(of: ">") else { break }
        let name = String(rest[..<close])
        let text = rest[rest.index(after: gt)...]
        guard let lt = text.firstIndex(of: "<") else { break }
        out[name] = String(text[..<lt]).trimmingCharacters(in: .whitespaces)
        rest = text[lt...]
    }
    return out
}
