import Foundation
@testable import SealedPushGateway
import SealedPushWebPush
import SealedPushWire
import SealedPushTestSupport
import Testing

/// #44 pilot 6: the delivery counters, the queue depth gauge and the paused gauge carry a `platform` label (their
/// names unchanged), read through `/metrics` of a gateway in-process.
@Suite("Gateway metrics by platform", .timeLimit(.minutes(3)))
struct GatewayPlatformMetricsTests {
    @Test func deliveriesQueueAndPauseAreCountedPerPlatform() async throws {
        let (section, vapidDirectory) = try GatewayPlatformTests.webpushApp()
        defer { try? FileManager.default.removeItem(at: vapidDirectory) }
        let sender = CapturingSender()
        // The push service refuses the VAPID key: Web Push pauses, the browser's delivery stays queued.
        sender.script.withLockedValue { $0 = [.paused(status: 403, reason: "vapid_forbidden")] }
        try await withGateway("platform-metrics", options: GatewayPlatformTests.options(sender: sender), extraApp: section) { g in
            // From the start: one paused series per platform the app serves, at 0.
            let start = try await g.admin.call(.GET, "/metrics", key: nil).text
            #expect(start.contains(#"sealedpush_gateway_app_paused{app="chat",platform="apns"} 0"#), "\(start)")
            #expect(start.contains(#"sealedpush_gateway_app_paused{app="chat",platform="webpush"} 0"#), "\(start)")
            #expect(!start.contains(#"sealedpush_gateway_app_paused{app="chat"}"#), "\(start)")
            #expect(start.contains(#"sealedpush_gateway_deliveries_total{app="chat",platform="webpush",state="accepted"} 0"#), "\(start)")

            let phone = try Phone(in: g.directory, name: "iphone", token: hexToken(11))
            let browser = try Phone(in: g.directory, name: "browser", token: "")
            #expect(try await g.register(phone, device: "iphone", user: "u-web").status == 201)
            let keys = WebPushUserAgentKeys.generate()
            #expect(try await g.api.call(.PUT, "/v1/apps/chat/devices/browser",
                                         json: GatewayPlatformTests.registration(browser, keys: keys)).status == 201)
            let sent = try await g.send(JSONObject([("user_id", "u-web")]))
            #expect(sent.status == 202, "\(sent.text)")
            let id = try #require(sent.json["message_id"]?.stringValue)
            try await waitUntil("webpush to be paused", within: .seconds(30)) {
                try await g.admin.call(.GET, "/metrics", key: nil).text
                    .contains(#"sealedpush_gateway_app_paused{app="chat",platform="webpush"} 1"#)
            }
            try await g.waitForStates(id, ["accepted", "queued"])
            // The queue gauge runs once a second: wait for the count of after the APNs push.
            var metrics = ""
            try await waitUntil("the queue depth per platform", within: .seconds(30)) {
                metrics = try await g.admin.call(.GET, "/metrics", key: nil).text
                return metrics.contains(#"sealedpush_gateway_queue_depth{app="chat",platform="webpush"} 1"#)
                    && metrics.contains(#"sealedpush_gateway_queue_depth{app="chat",platform="apns"} 0"#)
            }
            #expect(!metrics.contains(#"sealedpush_gateway_queue_depth{app="chat"}"#), "\(metrics)")
            #expect(metrics.contains(#"sealedpush_gateway_app_paused{app="chat",platform="apns"} 0"#), "\(metrics)")
            #expect(metrics.contains(#"sealedpush_gateway_deliveries_total{app="chat",platform="apns",state="queued"} 1"#), "\(metrics)")
            #expect(metrics.contains(#"sealedpush_gateway_deliveries_total{app="chat",platform="webpush",state="queued"} 1"#), "\(metrics)")
            #expect(metrics.contains(#"sealedpush_gateway_deliveries_total{app="chat",platform="apns",state="accepted"} 1"#), "\(metrics)")
            #expect(metrics.contains(#"sealedpush_gateway_deliveries_total{app="chat",platform="webpush",state="accepted"} 0"#), "\(metrics)")
            // The store's count behind the gauge, on its own.
            #expect(try await g.gateway.store.queued(app: "chat", platform: .webpush) == 1)
            #expect(try await g.gateway.store.queued(app: "chat", platform: .fcm) == 0)
        }
    }
}
