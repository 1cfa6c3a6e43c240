import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOHTTP1
@testable import SealedPushGateway
import SealedPushCrypto
import SealedPushWebPush
import SealedPushWire
import SealedPushTestSupport
import Testing

/// A resolver the tests control: each host's addresses (an unknown host has none).
struct StubResolver: GatewayAddressResolver {
    let table: [String: [[UInt8]]]
    func addresses(of host: String) async throws -> [[UInt8]] { table[host] ?? [] }
}

/// A resolver that is down: every lookup fails (#44 pilot 6: `503`, not the client's fault).
struct FailingResolver: GatewayAddressResolver {
    func addresses(of host: String) async throws -> [[UInt8]] { throw AddressResolutionUnavailable(code: -3) }
}

/// A resolver that never answers (until cancelled).
struct StallingResolver: GatewayAddressResolver {
    func addresses(of host: String) async throws -> [[UInt8]] {
        try await Task.sleep(for: .seconds(600))
        return []
    }
}

/// A push service stand-in for one platform: records every claim and answers from a script (then `accepted`).
final class CapturingSender: PlatformSender {
    let claims = NIOLockedValueBox<[ClaimedDelivery]>([])
    let script = NIOLockedValueBox<[PushAnswer]>([])
    func send(_ claim: ClaimedDelivery, now: Int64) async -> PushAnswer {
        claims.withLockedValue { $0.append(claim) }
        return script.withLockedValue { $0.isEmpty ? .accepted(status: 201, platformID: "https://push.example.net/message/\(claim.deliveryID)") : $0.removeFirst() }
    }
    func shutdown() async {}
}

/// The gateway's platforms (platforms v1 §1, §1.1, §3, §4): registration rules, one sealed envelope per device
/// whatever its platform, the Web Push body, and each platform's answers through the one state machine.
@Suite("Gateway platforms: FCM and Web Push devices", .timeLimit(.minutes(3)))
struct GatewayPlatformTests {
    static let endpoint = "https://push.example.net/wpush/v2/gAAAAABsecret-capability"

    /// A VAPID key file (0600) in a new directory, and the app section naming it.
    static func webpushApp(allowPrivate: Bool = false) throws -> (JSONObject, URL) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("vapid-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let path = directory.appendingPathComponent("vapid.p8")
        let pem = VAPIDKey.generate().pem
        try pem.withUnsafeBytes { try Data($0).write(to: path) }
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path.path)
        var section = JSONObject([("vapid_key", .string(path.path)), ("subject", "mailto:ops@example.com")])
        if allowPrivate { section["allow_private_endpoints"] = .bool(true) }
        return (JSONObject([("webpush", .object(section))]), directory)
    }

    static func options(sender: CapturingSender? = nil) -> GatewayOptions {
        var options = GatewayOptions()
        options.addressResolver = StubResolver(table: ["push.example.net": [[93, 184, 215, 14], [0x26, 0x06, 0x28, 0x00, 0x02, 0x20, 0, 1, 0x2, 0x48, 0x18, 0x93, 0x25, 0xc8, 0x19, 0x46]],
                                                       "private.example.net": [[93, 184, 215, 14], [10, 0, 0, 7]],
                                                       "mapped.example.net": [[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1]]])
        if let sender { options.makePlatformSender = { _, platform, _ in platform == .webpush ? sender : nil } }
        return options
    }

    static func registration(_ phone: Phone, endpoint: String = endpoint, keys: WebPushUserAgentKeys) -> JSONValue {
        guard case var .object(subscription) = keys.subscriptionJSON(endpoint: endpoint) else { return .null }
        subscription["expirationTime"] = .null
        return .object(JSONObject([("user_id", "u-web"), ("platform", "webpush"), ("webpush", .object(subscription)), ("key_record", .object(phone.record))]))
    }

    @Test func registrationTakesEachPlatformsMembersAndTheEndpointRules() async throws {
        let (section, vapidDirectory) = try Self.webpushApp()
        defer { try? FileManager.default.removeItem(at: vapidDirectory) }
        try await withGateway("platform-registration", options: Self.options(), extraApp: section) { g in
            let phone = try Phone(in: g.directory, name: "browser", token: "")
            let keys = WebPushUserAgentKeys.generate()
            let created = try await g.api.call(.PUT, "/v1/apps/chat/devices/browser-1", json: Self.registration(phone, keys: keys))
            #expect(created.status == 201, "\(created.text)")
            #expect(created.json["platform"]?.stringValue == "webpush")
            #expect(created.json["webpush_origin"]?.stringValue == "https://push.example.net")
            #expect(created.json["apns_token_suffix"] == nil && created.json["environment"] == nil)
            // The endpoint is a capability URL: never returned, listed or logged.
            #expect(!created.text.contains("gAAAAABsecret"))
            let listed = try await g.api.call(.GET, "/v1/apps/chat/devices")
            #expect(!listed.text.contains("gAAAAABsecret") && listed.text.contains("\"webpush_origin\""))

            // One device per endpoint: a second registration of it takes it over.
            let other = try await g.api.call(.PUT, "/v1/apps/chat/devices/browser-2", json: Self.registration(phone, keys: keys))
            #expect(other.status == 201 && other.json["token_reassigned"] == .bool(true))
            #expect(try await g.api.call(.GET, "/v1/apps/chat/devices/browser-1").status == 404)

            // Refusals, each naming its member; no path of an endpoint in any of them.
            let refusals: [(String, JSONValue, Int, String)] = [
                ("private address", Self.registration(phone, endpoint: "https://private.example.net/p/secret-1", keys: keys), 400, "/webpush/endpoint"),
                ("IPv4-mapped loopback", Self.registration(phone, endpoint: "https://mapped.example.net/p/secret-1", keys: keys), 400, "/webpush/endpoint"),
                ("unresolvable", Self.registration(phone, endpoint: "https://nowhere.example.net/p/secret-1", keys: keys), 400, "/webpush/endpoint"),
                ("IP literal", Self.registration(phone, endpoint: "https://127.0.0.1/p/secret-1", keys: keys), 400, "/webpush/endpoint"),
                ("http", Self.registration(phone, endpoint: "http://push.example.net/p/secret-1", keys: keys), 400, "/webpush/endpoint"),
                ("port", Self.registration(phone, endpoint: "https://push.example.net:8443/p/secret-1", keys: keys), 400, "/webpush/endpoint"),
            ]
            for (what, body, status, field) in refusals {
                let answer = try await g.api.call(.PUT, "/v1/apps/chat/devices/browser-3", json: body)
                #expect(answer.status == status && answer.json["field"]?.stringValue == field, "\(what): \(answer.text)")
                #expect(!answer.text.contains("secret-1"), "\(what) quotes the endpoint's path")
            }
            guard case var .object(badKey) = Self.registration(phone, keys: keys), case var .object(sub)? = badKey["webpush"],
                  case var .object(k)? = sub["keys"] else { Issue.record("no registration"); return }
            k["p256dh"] = .string(WebPushBase64URL.encode([4] + [UInt8](repeating: 1, count: 64)))
            sub["keys"] = .object(k)
            badKey["webpush"] = .object(sub)
            let notOnCurve = try await g.api.call(.PUT, "/v1/apps/chat/devices/browser-3", json: .object(badKey))
            #expect(notOnCurve.status == 400 && notOnCurve.json["field"]?.stringValue == "/webpush/keys/p256dh", "\(notOnCurve.text)")
            badKey["apns_token"] = .string(hexToken(1))
            let mixed = try await g.api.call(.PUT, "/v1/apps/chat/devices/browser-3", json: .object(badKey))
            #expect(mixed.status == 400 && mixed.json["field"]?.stringValue == "/apns_token", "\(mixed.text)")
            // #44 pilot 7: the document says platform is a string; null is refused, not taken as apns.
            let nullPlatform = try await g.api.call(.PUT, "/v1/apps/chat/devices/phone-null", json: .object(JSONObject([
                ("user_id", "u-n"), ("platform", .null), ("apns_token", .string(hexToken(2))), ("environment", "sandbox"), ("key_record", .object(phone.record)),
            ])))
            #expect(nullPlatform.status == 400 && nullPlatform.json["field"]?.stringValue == "/platform", "\(nullPlatform.text)")
            #expect(try await g.api.call(.GET, "/v1/apps/chat/devices/phone-null").status == 404)

            // A platform the app has no section for.
            let fcm = try await g.api.call(.PUT, "/v1/apps/chat/devices/android-1", json: .object(JSONObject([
                ("user_id", "u-a"), ("platform", "fcm"), ("fcm_token", "dQw4w9WgXcQ:APA91bH-token"), ("key_record", .object(phone.record)),
            ])))
            #expect(fcm.status == 422 && fcm.json["type"]?.stringValue == "urn:sealedpush:problem:platform_not_configured", "\(fcm.text)")
            let unknown = try await g.api.call(.PUT, "/v1/apps/chat/devices/x-1", json: .object(JSONObject([
                ("user_id", "u-a"), ("platform", "blackberry"), ("key_record", .object(phone.record)),
            ])))
            #expect(unknown.status == 400 && unknown.json["field"]?.stringValue == "/platform")
        }
        // A resolver that fails is not the client's fault: 503 with Retry-After, never a 400.
        var failing = Self.options()
        failing.addressResolver = FailingResolver()
        try await withGateway("platform-registration-failing", options: failing, extraApp: section) { g in
            let phone = try Phone(in: g.directory, name: "browser", token: "")
            let answer = try await g.api.call(.PUT, "/v1/apps/chat/devices/browser-8", json: Self.registration(phone, keys: WebPushUserAgentKeys.generate()))
            #expect(answer.status == 503 && answer.header("Retry-After") == "5", "\(answer.text)")
            #expect(!answer.text.contains("push.example.net"), "no part of the endpoint in the problem")
        }
        // A name whose resolver does not answer: the registration answers 503 with Retry-After within about 5 s.
        var stalled = Self.options()
        stalled.addressResolver = StallingResolver()
        try await withGateway("platform-registration-stalled", options: stalled, extraApp: section) { g in
            let phone = try Phone(in: g.directory, name: "browser", token: "")
            let started = ContinuousClock.now
            let answer = try await g.api.call(.PUT, "/v1/apps/chat/devices/browser-9", json: Self.registration(phone, keys: WebPushUserAgentKeys.generate()))
            #expect(answer.status == 503 && answer.header("Retry-After") != nil, "\(answer.text)")
            #expect(ContinuousClock.now - started < .seconds(30))
        }
    }

    /// One message to a user with an iPhone and a browser: the browser's delivery carries an RFC 8291 body that its
    /// own keys open into `{"ENCRYPTED_DATA", "sealedpush": 1}`, whose envelope the device key opens — the same
    /// sealed message the iPhone gets. The push service's answer lands through the same state machine.
    @Test func aBrowserGetsTheSameSealedMessageInAWebPushBody() async throws {
        try await Self.browserDelivery(database: "sqlite:gateway.db")
    }

    /// The browser scene on `database` (SQLite here; PostgreSQL in `GatewayPlatformPostgresTests`).
    static func browserDelivery(database: String) async throws {
        let (section, vapidDirectory) = try Self.webpushApp()
        defer { try? FileManager.default.removeItem(at: vapidDirectory) }
        let sender = CapturingSender()
        try await withGateway("platform-delivery", options: Self.options(sender: sender), extraApp: section, database: database) { g in
            let phone = try Phone(in: g.directory, name: "iphone", token: hexToken(7))
            let browser = try Phone(in: g.directory, name: "browser", token: "")
            let keys = WebPushUserAgentKeys.generate()
            #expect(try await g.register(phone, device: "iphone", user: "u-web").status == 201)
            #expect(try await g.api.call(.PUT, "/v1/apps/chat/devices/browser", json: Self.registration(browser, keys: keys)).status == 201)
            let sent = try await g.send(JSONObject([("user_id", "u-web")]), body: "meet at noon", extra: JSONObject([("collapse_id", "thread-9")]))
            #expect(sent.status == 202, "\(sent.text)")
            let id = try #require(sent.json["message_id"]?.stringValue)
            let message = try await g.waitForStates(id, ["accepted"])
            let byDevice = Dictionary(uniqueKeysWithValues: (message["deliveries"]?.arrayValue ?? []).compactMap { d -> (String, JSONObject)? in
                guard case let .object(o) = d, let device = o["device_id"]?.stringValue else { return nil }
                return (device, o)
            })
            let web = try #require(byDevice["browser"])
            #expect(web["platform"]?.stringValue == "webpush" && web["platform_status"] == .int(201) && web["apns_id"] == .null)
            #expect(web["platform_id"]?.stringValue?.hasPrefix("https://push.example.net/message/") == true)
            let ios = try #require(byDevice["iphone"])
            #expect(ios["platform"]?.stringValue == "apns" && ios["platform_id"] == ios["apns_id"] && ios["platform_status"] == .int(200))

            let claim = try #require(sender.claims.withLockedValue { $0.first })
            #expect(claim.platform == .webpush && claim.address == Self.endpoint && claim.collapseID == "thread-9")
            #expect(claim.payload.count <= 4096)
            let plaintext = try WebPushDecryptor(keys: keys).decrypt(claim.payload)
            guard case let .object(inner)? = try? JSON.parse(plaintext), let envelope = inner["ENCRYPTED_DATA"]?.stringValue else {
                Issue.record("the Web Push plaintext is not {\"ENCRYPTED_DATA\", …}")
                return
            }
            #expect(inner["sealedpush"] == .int(1) && inner.count == 2)
            // The browser's device key opens the envelope as an iPhone's does.
            let asAPNs = JSON.serialize(.object(JSONObject([
                ("aps", .object(JSONObject([("alert", .object(JSONObject([("body", "(Encrypted)")]))), ("mutable-content", .int(1))]))),
                ("ENCRYPTED_DATA", .string(envelope)),
            ])))
            let shown = await browser.open(asAPNs, transport: g.receipts)
            #expect(shown.outcome == .decrypted && shown.notification?.body == "meet at noon", "\(shown)")
            try await g.waitForStates(id, ["delivered", "accepted"])
            let metrics = try await g.admin.call(.GET, "/metrics", key: nil).text
            #expect(metrics.contains("sealedpush_push_requests_total{app=\"chat\",platform=\"webpush\",status=\"201\""), "\(metrics)")
            // #44 pilot 6: the browser's receipt is counted on its platform.
            #expect(metrics.contains(#"sealedpush_gateway_deliveries_total{app="chat",platform="webpush",state="delivered"} 1"#), "\(metrics)")
            #expect(metrics.contains(#"sealedpush_gateway_deliveries_total{app="chat",platform="apns",state="delivered"} 0"#), "\(metrics)")
        }
    }

    /// A subscription the push service says is gone ends the delivery and the device `unregistered`; a 429 waits at
    /// least its Retry-After; a refused VAPID key pauses Web Push for the app (its APNs deliveries still go).
    @Test func webPushAnswersGoThroughTheOneStateMachine() async throws {
        let (section, vapidDirectory) = try Self.webpushApp()
        defer { try? FileManager.default.removeItem(at: vapidDirectory) }
        let sender = CapturingSender()
        sender.script.withLockedValue { $0 = [.unregistered(status: 410, reason: "gone", registeredBefore: Int64.max)] }
        try await withGateway("platform-answers", options: Self.options(sender: sender), extraApp: section) { g in
            let browser = try Phone(in: g.directory, name: "browser", token: "")
            let keys = WebPushUserAgentKeys.generate()
            #expect(try await g.api.call(.PUT, "/v1/apps/chat/devices/browser", json: Self.registration(browser, keys: keys)).status == 201)
            let first = try await g.send(JSONObject([("device_ids", .array(["browser"]))]))
            let id = try #require(first.json["message_id"]?.stringValue)
            let gone = try await g.waitForStates(id, ["unregistered"])
            #expect(gone["deliveries"]?.arrayValue?.first?.objectValue?["reason"]?.stringValue == "gone")
            let device = try await g.api.call(.GET, "/v1/apps/chat/devices/browser")
            #expect(device.json["state"]?.stringValue == "unregistered")

            // Registered again. A 429 with Retry-After: 3600 is retried no sooner than an hour later (the backoff alone
            // would be about a second).
            #expect(try await g.api.call(.PUT, "/v1/apps/chat/devices/browser", json: Self.registration(browser, keys: keys)).status == 200)
            sender.script.withLockedValue { $0 = [.retry(status: 429, reason: "rate_limited", retryAfter: .seconds(3600))] }
            let limited = try await g.send(JSONObject([("device_ids", .array(["browser"]))]))
            let limitedID = try #require(limited.json["message_id"]?.stringValue)
            var waiting = JSONObject([])
            try await waitUntil("the 429 to be written", within: .seconds(30)) {
                waiting = try await g.api.call(.GET, "/v1/apps/chat/messages/\(limitedID)").json["deliveries"]?.arrayValue?.first?.objectValue ?? JSONObject([])
                return waiting["attempts"] == .int(1)
            }
            #expect(waiting["state"]?.stringValue == "queued" && waiting["reason"]?.stringValue == "rate_limited" && waiting["platform_status"] == .int(429))
            let updated = try #require(waiting["updated_at"]?.stringValue.flatMap(GatewayTime.parse))
            let next = try #require(waiting["next_attempt_at"]?.stringValue.flatMap(GatewayTime.parse))
            #expect(next - updated >= 3_599_000, "next attempt \(next - updated) ms after the 429")

            // A push service refusing the VAPID key pauses webpush only.
            sender.script.withLockedValue { $0 = [.paused(status: 403, reason: "vapid_forbidden")] }
            let second = try await g.send(JSONObject([("device_ids", .array(["browser"]))]))
            #expect(second.status == 202)
            try await waitUntil("webpush to be paused", within: .seconds(30)) {
                let ready = try await g.admin.call(.GET, "/readyz", key: nil).json
                return ready["apps"]?.arrayValue?.contains { $0.objectValue?["reason"]?.stringValue == "webpush: vapid_forbidden" } == true
            }
            let phone = try Phone(in: g.directory, name: "iphone", token: hexToken(9))
            #expect(try await g.register(phone, device: "iphone", user: "u-ios").status == 201)
            let toPhone = try await g.send(JSONObject([("user_id", "u-ios")]))
            try await g.waitForStates(try #require(toPhone.json["message_id"]?.stringValue), ["accepted", "delivered"])
        }
    }

    /// Each Web Push answer of platforms v1 §3 as the sender reads it.
    @Test func webPushAnswerTable() {
        func answer(_ status: Int, _ headers: [(String, String)] = []) -> PushAnswer {
            WebPushPlatformSender.classify(.init(status: status, headers: HTTPHeaders(headers), body: []), now: 1_000_000)
        }
        #expect(answer(201, [("Location", "https://p.example/m/1")]) == .accepted(status: 201, platformID: "https://p.example/m/1"))
        #expect(answer(202) == .accepted(status: 202, platformID: nil))
        // #44 F: a stranger's Location is kept only bounded and in URL characters.
        #expect(answer(201, [("Location", "https://p.example/m/" + String(repeating: "a", count: 600))]) == .accepted(status: 201, platformID: nil))
        #expect(answer(201, [("Location", "https://p.example/<script>alert(1)</script>")]) == .accepted(status: 201, platformID: nil))
        #expect(answer(201, [("Location", "https://p.example/m/\"onload=x")]) == .accepted(status: 201, platformID: nil))
        #expect(answer(201, [("Location", "https://fcm.googleapis.com/0:1234%7Cabc")]) == .accepted(status: 201, platformID: "https://fcm.googleapis.com/0:1234%7Cabc"))
        #expect(answer(410) == .unregistered(status: 410, reason: "gone", registeredBefore: 1_000_000))
        #expect(answer(404) == .unregistered(status: 404, reason: "not_found", registeredBefore: 1_000_000))
        #expect(answer(400) == .rejected(status: 400, reason: "bad_request", attempted: true))
        #expect(answer(413) == .rejected(status: 413, reason: "payload_too_large", attempted: true))
        // Revision 2: a refusal rejects that delivery only (WebPushRefusalTests pause an origin, never the app).
        #expect(answer(401) == .rejected(status: 401, reason: "vapid_refused", attempted: true))
        #expect(answer(403) == .rejected(status: 403, reason: "vapid_refused", attempted: true))
        #expect(answer(429, [("Retry-After", "30")]) == .retry(status: 429, reason: "rate_limited", retryAfter: .seconds(30)))
        #expect(answer(503, [("Retry-After", "Thu, 01 Jan 1970 00:17:00 GMT")]) == .retry(status: 503, reason: "server_error", retryAfter: .seconds(20)))
        #expect(answer(500) == .retry(status: 500, reason: "server_error", retryAfter: nil))
        #expect(answer(301, [("Location", "https://elsewhere.example/")]) == .rejected(status: 301, reason: "redirect_not_followed", attempted: true))
        #expect(answer(418) == .rejected(status: 418, reason: "http_418", attempted: true))
    }

    /// The endpoint rules hold at every connection, not only at registration: a name that now resolves to a private
    /// address (DNS rebinding) ends the delivery `rejected` (`endpoint_not_public`) without a connection; a name
    /// that resolves to nothing is retried.
    @Test func eachConnectionChecksTheAddressesAgain() async throws {
        let claim = ClaimedDelivery(deliveryID: "d1", app: "chat", deviceID: "b", address: "https://rebound.example.net/p/1", environment: .production,
                                    payload: [1, 2, 3], priority: 10, collapseID: "c", apnsExpiration: 99, expiresAt: 99_000, apnsID: "A",
                                    attempts: 0, generation: 1, platform: .webpush)
        func sender(_ table: [String: [[UInt8]]]) throws -> WebPushPlatformSender {
            WebPushPlatformSender(policy: WebPushEndpointPolicy(), vapid: VAPIDTokenCache(key: VAPIDKey.generate().key, subject: try VAPIDSubject("mailto:a@example.com"), clock: { 0 }),
                                  resolver: StubResolver(table: table), client: try PinnedHTTPSClient(timeout: .seconds(2)))
        }
        #expect(try await sender(["rebound.example.net": [[192, 168, 1, 20]]]).send(claim, now: 0) == .rejected(status: nil, reason: "endpoint_not_public", attempted: false))
        #expect(try await sender(["rebound.example.net": [[93, 184, 215, 14], [127, 0, 0, 1]]]).send(claim, now: 0) == .rejected(status: nil, reason: "endpoint_not_public", attempted: false))
        #expect(try await sender([:]).send(claim, now: 0) == .retry(status: nil, reason: "dns", retryAfter: nil))
        // A resolver that does not answer holds nothing longer than its limit.
        #expect(try await WebPushPlatformSender.addresses(of: "stalled.example.net", resolver: StallingResolver(), within: .milliseconds(100)) == nil)
        var literal = claim
        literal.address = "https://10.0.0.1/p/1"
        #expect(try await sender([:]).send(literal, now: 0) == .rejected(status: nil, reason: "endpoint_not_public", attempted: false))
    }

    /// End to end over loopback: the gateway delivers to `sealedpush-server webpush serve` (VAPID, `aes128gcm`,
    /// TTL, Urgency, Topic checked as a push service checks them), whose simulated browser — subscribed with
    /// `sealedpush device subscribe` — decrypts the Web Push body, opens the envelope as an iPhone would and posts
    /// its receipt: the delivery reads `delivered`, its `platform_id` the service's `Location`.
    @Test func theGatewayDeliversThroughTheLocalWebPushService() async throws {
        let dir = try makeScratchDirectory("gateway-webpush-e2e")
        defer { try? FileManager.default.removeItem(at: dir) }
        let keychain = dir.appendingPathComponent("browser").path
        let generated = try ChildProcess.sealedpush(["keys", "generate", "--keychain", keychain])
        try #require(generated.status == 0, "keys generate: \(generated.stderr)")
        let record = try #require(try JSON.parse(generated.stdout).objectValue)
        let subscribed = try ChildProcess.sealedpush(["device", "subscribe", "--keychain", keychain, "--endpoint", "https://127.0.0.1:8443/push/browser-1"])
        try #require(subscribed.status == 0, "device subscribe: \(subscribed.stderr)")
        var subscription = try #require(try JSON.parse(subscribed.stdout).objectValue)

        let capturePath = dir.appendingPathComponent("captured.jsonl").path
        let webpush = try await LocalWebPushServe.start(in: dir, arguments: ["--subscription", "browser-1=\(keychain)", "--capture", capturePath])
        defer { webpush.stop() }
        let (serve, origin) = (webpush.process, webpush.origin)
        subscription["endpoint"] = .string(origin + "/push/browser-1")

        try await withGateway("webpush-e2e", extraApp: webpush.section) { g in
            let registered = try await g.api.call(.PUT, "/v1/apps/chat/devices/browser", json: .object(JSONObject([
                ("user_id", "u-web"), ("platform", "webpush"), ("webpush", .object(subscription)), ("key_record", .object(record)),
            ])))
            #expect(registered.status == 201, "\(registered.text)")
            #expect(registered.json["webpush_origin"]?.stringValue == origin)
            let sent = try await g.send(JSONObject([("user_id", "u-web")]), body: "meet at the usual place", extra: JSONObject([("collapse_id", "c-7")]))
            #expect(sent.status == 202, "\(sent.text)")
            let id = try #require(sent.json["message_id"]?.stringValue)
            let outcomeLine = try #require(try await offPool { serve.nextLine(within: .seconds(60)) }, "the browser printed no outcome: \(serve.stderrText)")
            let outcome = try #require(try JSON.parse(Array(outcomeLine.utf8)).objectValue)
            #expect(outcome["outcome"]?.stringValue == "decrypted", "\(outcomeLine)")
            // The device's receipt can overtake the push service's answer: wait for both to be recorded.
            let message = try await g.waitForStates(id, ["delivered"]) { ($0["platform_status"]?.intValue ?? 0) != 0 }
            let delivery = try #require(message["deliveries"]?.arrayValue?.first?.objectValue)
            #expect(delivery["platform"]?.stringValue == "webpush" && delivery["platform_status"] == .int(201))
            #expect(delivery["platform_id"]?.stringValue?.hasPrefix(origin + "/message/") == true, "\(delivery)")
        }
        // #44 pilot 4: `--capture FILE` wrote the request as the push service received it, one JSON line (0600).
        let captured = try String(contentsOfFile: capturePath, encoding: .utf8).split(separator: "\n")
        try #require(captured.count == 1, "\(captured)")
        let line = try #require(try JSON.parse(Array(captured[0].utf8)).objectValue)
        #expect(line["path"]?.stringValue == "/push/browser-1")
        let headers = (line["headers"]?.arrayValue ?? []).compactMap { $0.arrayValue?.compactMap(\.stringValue) }
        #expect(headers.contains { $0.first?.lowercased() == "content-encoding" && $0.last == "aes128gcm" }, "\(headers)")
        #expect(headers.contains { $0.first?.lowercased() == "authorization" && ($0.last ?? "").hasPrefix("vapid t=") }, "\(headers)")
        let body = try #require(line["body_base64url"]?.stringValue.flatMap { WebPushBase64URL.decode($0) })
        #expect(body.count > 86 && body.count <= 4096, "an RFC 8291 body: \(body.count) bytes")
        let mode = try FileManager.default.attributesOfItem(atPath: capturePath)[.posixPermissions] as? Int
        #expect(mode.map { $0 & 0o077 } == 0, "the capture holds VAPID tokens: owner-only")
    }
}

extension GatewayPostgresSuites {
    /// The platforms' scenes on PostgreSQL: the same migration (v10) and statements as on SQLite.
    @Suite("Gateway platforms on PostgreSQL", .timeLimit(.minutes(3)))
    struct GatewayPlatformPostgresTests {
        @Test func aBrowserOnPostgreSQL() async throws {
            try await GatewayPlatformTests.browserDelivery(database: try await PostgresCluster.shared().makeDatabase())
        }

        @Test func anAndroidPhoneOnPostgreSQL() async throws {
            try await GatewayFCMTests.androidDelivery(database: try await PostgresCluster.shared().makeDatabase())
        }
    }
}
