import Foundation
@testable import SealedPushGateway
import SealedPushTestSupport
import SealedPushWebPush
import SealedPushWire
import Testing

/// #44 pilot 2: a message too large for a browser's Web Push body is `413` naming Web Push's limit and the largest
/// body that fits — and that body is accepted, one byte more refused with the same numbers.
@Suite("Gateway platforms: the size budget per platform", .timeLimit(.minutes(3)))
struct GatewayPlatformSizeTests {
    @Test func theWebPush413NamesItsLimitAndTheBodyThatFits() async throws {
        let (section, vapidDirectory) = try GatewayPlatformTests.webpushApp()
        defer { try? FileManager.default.removeItem(at: vapidDirectory) }
        try await withGateway("platform-size", options: GatewayPlatformTests.options(sender: CapturingSender()), extraApp: section) { g in
            let browser = try Phone(in: g.directory, name: "browser", token: "")
            #expect(try await g.api.call(.PUT, "/v1/apps/chat/devices/browser", json: GatewayPlatformTests.registration(browser, keys: WebPushUserAgentKeys.generate())).status == 201)
            func largest(_ answer: Answer) -> Int? {
                (answer.json["detail"]?.stringValue ?? "").components(separatedBy: "at most ").last?.split(separator: " ").first.flatMap { Int($0) }
            }
            let tooLarge = try await g.send(JSONObject([("user_id", "u-web")]), body: String(repeating: "x", count: 5000))
            #expect(tooLarge.status == 413 && tooLarge.json["field"]?.stringValue == "/body", "\(tooLarge.text)")
            let detail = tooLarge.json["detail"]?.stringValue ?? ""
            #expect(detail.contains("Web Push's 4096-byte encrypted body") && detail.contains("webpush device") && !detail.contains("APNs"), "\(detail)")
            let fits = try #require(largest(tooLarge), "the 413 says the largest body: \(detail)")
            #expect(try await g.send(JSONObject([("user_id", "u-web")]), body: String(repeating: "x", count: fits)).status == 202)
            let over = try await g.send(JSONObject([("user_id", "u-web")]), body: String(repeating: "x", count: fits + 1))
            #expect(over.status == 413 && largest(over) == fits, "one byte more names the same limit: \(over.text)")
        }
    }
}
