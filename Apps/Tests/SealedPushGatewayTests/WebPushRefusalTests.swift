import Foundation
import NIOConcurrencyHelpers
@testable import SealedPushGateway
import SealedPushAPNsServer
import SealedPushTestSupport
import SealedPushWebPush
import SealedPushWire
import Testing

/// Platforms v1 §3, revision 2: a Web Push `401`/`403` rejects that delivery only; the app's Web Push to one origin
/// is paused only when 5 distinct subscriptions there refuse within 10 minutes and none there accepts.
@Suite("Web Push refusals pause one origin, never the app", .timeLimit(.minutes(3)))
struct WebPushRefusalTests {
    @Test func fiveDistinctSubscriptionsWithinTheWindowPauseTheirOriginOnly() {
        let refusals = WebPushRefusals()
        let origin = "https://push.example.net"
        // One subscription refusing again and again is one refusal.
        for n in 0..<10 { #expect(!refusals.refused(origin: origin, endpoint: origin + "/evil/1", now: Int64(n))) }
        for n in 2...4 { #expect(!refusals.refused(origin: origin, endpoint: origin + "/evil/\(n)", now: 1000)) }
        #expect(!refusals.isPaused(origin))
        // Refusals older than 10 minutes no longer count: at 601 005 ms all four above are past the window.
        #expect(!refusals.refused(origin: origin, endpoint: origin + "/evil/5", now: 601_005))
        #expect(!refusals.isPaused(origin))
        for n in 6...8 { #expect(!refusals.refused(origin: origin, endpoint: origin + "/evil/\(n)", now: 601_100)) }
        #expect(refusals.refused(origin: origin, endpoint: origin + "/evil/9", now: 601_100), "the fifth distinct subscription pauses")
        #expect(refusals.isPaused(origin))
        #expect(refusals.pausedOrigins == [origin])
        #expect(!refusals.isPaused("https://other.example.net"))
        #expect(refusals.takeChanges().map(\.paused) == [true])
        // Paused, deliveries there wait — but one every 5 minutes goes through, so that the origin can come back.
        #expect(refusals.holds(origin, now: 601_200))
        #expect(!refusals.holds(origin, now: 601_100 + 300_000), "the probe after 5 minutes")
        #expect(refusals.holds(origin, now: 601_100 + 300_001), "one probe, then waiting again")
        #expect(!refusals.holds("https://other.example.net", now: 601_200))
        // A delivery there that succeeds resumes it, and its refusals start afresh.
        refusals.accepted(origin: origin)
        #expect(!refusals.isPaused(origin))
        #expect(refusals.takeChanges().map(\.paused) == [false])
        for n in 0..<4 { refusals.refused(origin: origin, endpoint: origin + "/evil/\(n)", now: 700_000) }
        #expect(!refusals.isPaused(origin))
    }

    @Test func aRefusalRejectsThatDeliveryAndFiveOfThemHoldTheOrigin() async throws {
        let authority = try LocalCertificateAuthority.make(caName: "SealedPush test refusing CA")
        let requests = NIOLockedValueBox(0)
        let service = try await Tarpit.refusing(authority, requests: requests)
        defer { Task { await service.close() } }
        let origin = "https://127.0.0.1:\(service.port)"
        let sender = WebPushPlatformSender(
            policy: WebPushEndpointPolicy(allowPrivateEndpoints: true),
            vapid: VAPIDTokenCache(key: VAPIDKey.generate().key, subject: try VAPIDSubject("mailto:ops@example.com"), clock: { Int64(Date().timeIntervalSince1970) }),
            resolver: StubResolver(table: ["127.0.0.1": [[127, 0, 0, 1]]]),
            client: try PinnedHTTPSClient(additionalRootsPEM: Array(authority.caPEM.utf8), timeout: .seconds(60)))
        func claim(_ path: String) -> ClaimedDelivery {
            ClaimedDelivery(deliveryID: path, app: "chat", deviceID: "b", address: origin + path, environment: .production, payload: [1, 2, 3],
                            priority: 10, collapseID: "c", apnsExpiration: 99, expiresAt: Int64.max, apnsID: "A", attempts: 0, generation: 1, platform: .webpush)
        }
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        for n in 0..<4 {
            #expect(await sender.send(claim("/push/evil-\(n)"), now: now) == .rejected(status: 401, reason: "vapid_refused", attempted: true))
        }
        // Four refusing subscriptions: the origin still sends.
        guard case .accepted(201, _) = await sender.send(claim("/push/good-1"), now: now) else {
            Issue.record("a good subscription at the origin was not delivered after four refusals")
            return
        }
        // The acceptance forgot them: five more distinct refusals are needed, and then the origin is held.
        for n in 4..<9 { _ = await sender.send(claim("/push/evil-\(n)"), now: now) }
        let before = requests.withLockedValue { $0 }
        #expect(await sender.send(claim("/push/good-2"), now: now) == .held(reason: "credentials_paused", retryAfter: WebPushPlatformSender.pausedOriginRecheck))
        #expect(requests.withLockedValue { $0 } == before, "a held delivery makes no request")
        #expect(sender.refusals.pausedOrigins == [origin])
        await sender.shutdown()
    }

    /// Through the gateway: one subscription answering `401` leaves every other browser of the app delivered; five
    /// pause that origin alone, named on `/readyz` and in the metrics, while an iPhone still gets its messages.
    @Test func oneRefusingSubscriptionNeverStopsTheAppsOtherBrowsers() async throws {
        let scene = try await WebPushDeadlineTests.Scene()
        let requests = NIOLockedValueBox(0)
        let service = try await Tarpit.refusing(scene.authority, requests: requests)
        let origin = "https://127.0.0.1:\(service.port)"
        do {
            try await withGateway("webpush-refusals", options: scene.options(.seconds(10)), extraApp: scene.section) { g in
                func register(_ device: String) async throws {
                    let phone = try Phone(in: g.directory, name: device, token: "")
                    let answer = try await g.api.call(.PUT, "/v1/apps/chat/devices/\(device)",
                                                      json: GatewayPlatformTests.registration(phone, endpoint: "\(origin)/push/\(device)", keys: WebPushUserAgentKeys.generate()))
                    #expect(answer.status == 201, "\(device): \(answer.text)")
                }
                for device in ["evil-0", "good-0"] { try await register(device) }
                let first = try await g.send(JSONObject([("device_ids", .array(["evil-0", "good-0"]))]))
                let firstID = try #require(first.json["message_id"]?.stringValue)
                let settled = try await g.waitForStates(firstID, ["rejected", "accepted"])
                for case let .object(d) in settled["deliveries"]?.arrayValue ?? [] {
                    if d["device_id"]?.stringValue == "evil-0" {
                        #expect(d["state"]?.stringValue == "rejected" && d["reason"]?.stringValue == "vapid_refused" && d["platform_status"] == .int(401), "\(d)")
                    } else {
                        #expect(d["state"]?.stringValue == "accepted", "\(d)")
                    }
                }
                let ready = try await g.admin.call(.GET, "/readyz", key: nil).json
                #expect(ready["apps"]?.arrayValue?.contains { $0.objectValue?["state"]?.stringValue == "paused" } == false, "\(ready)")

                // Five distinct refusing subscriptions pause that origin: the next delivery there waits, named.
                for n in 1...5 { try await register("evil-\(n)") }
                let evil = try await g.send(JSONObject([("device_ids", .array((1...5).map { .string("evil-\($0)") }))]))
                let evilID = try #require(evil.json["message_id"]?.stringValue)
                // With evil-0's refusal still counted (when good-0 was accepted before it), the fifth refusal may come
                // from evil-4 and evil-5 is then held: each is rejected, or held at the paused origin.
                try await waitUntil("the origin to be paused", within: .seconds(60)) {
                    g.gateway.apps["chat"]?.webpushRefusals.pausedOrigins == [origin]
                }
                try await g.waitForStates(evilID, ["rejected", "queued"]) {
                    ($0["state"]?.stringValue == "rejected" && $0["reason"]?.stringValue == "vapid_refused")
                        || ($0["state"]?.stringValue == "queued" && $0["reason"]?.stringValue == "credentials_paused")
                }
                try await register("good-1")
                let held = try await g.send(JSONObject([("device_ids", .array(["good-1"]))]))
                let heldID = try #require(held.json["message_id"]?.stringValue)
                try await waitUntil("the delivery to the paused origin to be held", within: .seconds(60)) {
                    let d = try await g.api.call(.GET, "/v1/apps/chat/messages/\(heldID)").json["deliveries"]?.arrayValue?.first?.objectValue
                    return d?["state"]?.stringValue == "queued" && d?["reason"]?.stringValue == "credentials_paused" && d?["attempts"] == .int(0)
                }
                let paused = try await g.admin.call(.GET, "/readyz", key: nil).json
                #expect(paused["apps"]?.arrayValue?.contains { ($0.objectValue?["reason"]?.stringValue ?? "").contains(origin) } == true, "\(paused)")
                let metrics = try await g.admin.call(.GET, "/metrics", key: nil).text
                #expect(metrics.contains("sealedpush_webpush_origin_paused{app=\"chat\",origin=\"\(origin)\"} 1"), "\(metrics.split(separator: "\n").filter { $0.contains("origin_paused") })")
                // Other platforms of the app are untouched.
                let phone = try Phone(in: g.directory, name: "iphone", token: hexToken(3))
                #expect(try await g.register(phone, device: "iphone", user: "u-ios").status == 201)
                let toPhone = try await g.send(JSONObject([("user_id", "u-ios")]))
                try await g.waitForStates(try #require(toPhone.json["message_id"]?.stringValue), ["accepted", "delivered"])
            }
        } catch {
            await service.close()
            await scene.close()
            throw error
        }
        await service.close()
        await scene.close()
    }
}
