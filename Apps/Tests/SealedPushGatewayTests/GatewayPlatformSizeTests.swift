import Foundation
@testable import SealedPushGateway
import SealedPushTestSupport
import SealedPushWebPush
import SealedPushWire
import SealedPushKeychain
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

/// #44 pilot 2: the body budget per platform that docs/platforms.md gives is what the gateway's `413` computes: the
/// largest `body` (ASCII, no title, the receipt member the gateway adds, `public_url` `https://push.example.com`)
/// accepted for each platform, for a device key with and without a reveal key, unsigned and signed. Measured
/// through the routes (the `413` names the largest body that fits, found by sealing as the delivery would).
@Suite("Gateway platforms: the documented body budget", .serialized, .timeLimit(.minutes(5)))
struct GatewayBodyBudgetTests {
    /// One row of the table: the platform's name as the docs give it, and whether the device key has a reveal key.
    struct Row: Hashable, Comparable, CustomStringConvertible {
        let platform: String
        let reveal: Bool
        static func < (a: Row, b: Row) -> Bool { (a.reveal ? 1 : 0, a.platform) < (b.reveal ? 1 : 0, b.platform) }
        var description: String { "\(platform), reveal key \(reveal ? "yes" : "no")" }
    }

    static let platformNames: [(PushPlatform, String)] = [(.apns, "APNs (iPhone)"), (.fcm, "FCM (Android)"), (.webpush, "Web Push (browser)")]

    /// The largest body each row takes, unsigned or `signed`, through a gateway serving all three platforms.
    static func measure(signed: Bool) async throws -> [Row: Int] {
        let (webpush, vapidDirectory) = try GatewayPlatformTests.webpushApp()
        defer { try? FileManager.default.removeItem(at: vapidDirectory) }
        let (fcm, _, fcmDirectory) = try GatewayFCMTests.fcmApp()
        defer { try? FileManager.default.removeItem(at: fcmDirectory) }
        var app = webpush
        for m in fcm { app[m.key] = m.value }
        let senderDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("budget-sender-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: senderDirectory) }
        if signed {
            _ = try SenderKeyring(store: try KeychainStore(url: senderDirectory, create: true)).generate()
            app["sender_keychain"] = .string(senderDirectory.path)
        }
        var options = GatewayPlatformTests.options()
        let sender = CapturingSender()
        options.makePlatformSender = { _, platform, _ in platform == .apns ? nil : sender }
        var measured: [Row: Int] = [:]
        try await withGateway("budget", options: options, extraApp: app,
                              extraRoot: JSONObject([("public_url", "https://push.example.com")])) { g in
            for (n, (platform, name)) in platformNames.enumerated() {
                for reveal in [false, true] {
                    let device = "\(platform.rawValue)-\(reveal ? "reveal" : "plain")"
                    let phone = try Phone(in: g.directory, name: device, token: platform == .apns ? hexToken(0x40 + n * 2 + (reveal ? 1 : 0)) : "", reveal: reveal)
                    let registered: Answer
                    switch platform {
                    case .apns: registered = try await g.register(phone, device: device, user: "u-\(device)")
                    case .fcm:
                        registered = try await g.api.call(.PUT, "/v1/apps/chat/devices/\(device)", json: .object(JSONObject([
                            ("user_id", .string("u-\(device)")), ("platform", "fcm"), ("fcm_token", .string("fcm-token-\(device)")),
                            ("key_record", .object(phone.record))])))
                    case .webpush:
                        registered = try await g.api.call(.PUT, "/v1/apps/chat/devices/\(device)",
                                                          json: GatewayPlatformTests.registration(phone, endpoint: GatewayPlatformTests.endpoint + "-\(device)",
                                                                                                  keys: WebPushUserAgentKeys.generate()))
                    }
                    #expect(registered.status == 201, "\(device): \(registered.text)")
                    let to = JSONObject([("device_ids", .array([.string(device)]))])
                    let tooLarge = try await g.send(to, body: String(repeating: "x", count: 5000))
                    let detail = tooLarge.json["detail"]?.stringValue ?? ""
                    let fits = try #require(detail.components(separatedBy: "at most ").last?.split(separator: " ").first.flatMap { Int($0) },
                                            "\(device): \(tooLarge.status) \(detail)")
                    // The number is the boundary: it is accepted, one byte more is not.
                    #expect(try await g.send(to, body: String(repeating: "x", count: fits)).status == 202, "\(device) at \(fits)")
                    #expect(try await g.send(to, body: String(repeating: "x", count: fits + 1)).status == 413, "\(device) at \(fits + 1)")
                    measured[Row(platform: name, reveal: reveal)] = fits
                }
            }
        }
        return measured
    }

    /// The table under `### The body budget` in docs/platforms.md: `| platform | reveal key | unsigned | signed |`.
    static func documented() throws -> [Row: (Int, Int)] {
        let text = try String(contentsOf: ProjectPaths.root.appendingPathComponent("docs/platforms.md"), encoding: .utf8)
        let section = try #require(text.range(of: "### The body budget"), "docs/platforms.md lost its body budget section")
        var rows: [Row: (Int, Int)] = [:]
        for line in text[section.upperBound...].split(separator: "\n").drop(while: { !$0.hasPrefix("|") }).prefix(while: { $0.hasPrefix("|") }) {
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count == 4, let unsigned = Int(cells[2]), let signed = Int(cells[3]) else { continue }
            rows[Row(platform: cells[0], reveal: cells[1] == "yes")] = (unsigned, signed)
        }
        return rows
    }

    @Test func theDocumentedBudgetIsWhatTheGatewayComputes() async throws {
        let unsigned = try await Self.measure(signed: false)
        let signed = try await Self.measure(signed: true)
        let table = unsigned.keys.sorted().map { row in
            "| \(row.platform) | \(row.reveal ? "yes" : "no") | \(unsigned[row]!) | \(signed[row] ?? -1) |"
        }.joined(separator: "\n")
        let documented = try Self.documented()
        #expect(documented.count == 6, "docs/platforms.md's table should read:\n\(table)")
        for (row, fits) in unsigned {
            let doc = documented[row]
            #expect(doc?.0 == fits && doc?.1 == signed[row], "\(row): documented \(String(describing: doc)), measured \(fits) / \(signed[row] ?? -1); the table should read:\n\(table)")
        }
        // What the pilot met: a reveal key costs a browser most of its room, and signing costs every platform.
        let browser = Row(platform: "Web Push (browser)", reveal: false)
        #expect(unsigned[browser]! > unsigned[Row(platform: "Web Push (browser)", reveal: true)]!)
        #expect(signed[browser]! < unsigned[browser]!)
    }
}
