import Foundation
import SealedPushAPNs
import SealedPushAPNsCore
import SealedPushGateway
import SealedPushWire
import SealedPushTestSupport
import Testing

extension GatewaySuites {
    /// The dashboard on `admin_listen` at `/`: its numbers are the API's, it shows no identifier or body, and
    /// it renders in a real browser (headless Chromium) at a desktop and a phone's width.
    @Suite("Gateway dashboard", .serialized, .timeLimit(.minutes(10)))
    struct GatewayDashboardTests {
        /// What the scenario leaves behind, as the API reports it.
        struct Scenario {
            /// Deliveries by state, from `GET …/messages/{id}`.
            var states: [String: Int] = [:]
            /// Deliveries APNs accepted (`accepted_at` set), from the API.
            var accepted = 0
            /// Devices by state, from `GET …/devices`.
            var devices: [String: Int] = [:]
            /// What must never appear on the page.
            var secrets: [String] = []
        }

        static let body = "body-only-the-phone-sees-7c1e"

        /// Three users, five phones: deliveries end delivered, accepted, rejected, unregistered, expired and
        /// cancelled; one device is unregistered. The expected numbers come from the API, not from the store.
        static func play(_ g: GatewayHarness, _ apns: ScriptedAPNs) async throws -> Scenario {
            var scenario = Scenario()
            let users = ["usr-4kq9xz", "usr-8mw2pt", "usr-3hd7vc"]
            let deviceIDs = ["dev-a9f3k2", "dev-b8e4m1", "dev-c7d5n0", "dev-d6c6p9", "dev-e5b7q8"]
            let phones = try deviceIDs.enumerated().map { n, id in try Phone(in: g.directory, name: id, token: hexToken(0xfeed_0000 + n * 0x1111)) }
            let owners = [users[0], users[0], users[1], users[2], users[2]]
            for (n, phone) in phones.enumerated() { try await g.register(phone, device: deviceIDs[n], user: owners[n]) }
            apns.answer(phones[2].token, with: [rejection(410, .unregistered)])
            apns.answer(phones[3].token, with: [rejection(400, .badTopic)])
            var messages: [String] = []
            // Two phones of users[0]: both accepted, one opened (delivered).
            let m0 = try #require(try await g.send(JSONObject([("user_id", .string(users[0]))]), body: body).json["message_id"]?.stringValue)
            try await g.waitForStates(m0, ["accepted"])
            let push = try #require(apns.pushes(to: phones[0].token).last)
            #expect(await phones[0].open(push.payload, transport: g.receipts).outcome == .decrypted)
            try await waitUntil("the receipt to arrive", within: .seconds(30)) {
                // Under ThreadSanitizer the receipt's POST once missed its 2 s deadline and stayed queued: the
                // phone sends its outbox again, as it would at its next delivery.
                await phones[0].flushReceipts(transport: g.receipts)
                let d = try await g.api.call(.GET, "/v1/apps/chat/messages/\(m0)").json["deliveries"]?.arrayValue ?? []
                return d.contains { state(of: $0) == "delivered" }
            }
            messages.append(m0)
            // users[1]'s phone: unregistered (410).
            let m1 = try #require(try await g.send(JSONObject([("user_id", .string(users[1]))]), body: body).json["message_id"]?.stringValue)
            try await g.waitForStates(m1, ["unregistered"])
            messages.append(m1)
            // users[2]: one rejected, one expired (ttl 0 and a 503).
            apns.answer(phones[4].token, with: [rejection(503, .serviceUnavailable)])
            let m2 = try #require(try await g.send(JSONObject([("user_id", .string(users[2]))]), body: body,
                                                   extra: JSONObject([("ttl", .int(0))])).json["message_id"]?.stringValue)
            try await g.waitForStates(m2, ["rejected", "expired"])
            messages.append(m2)
            // One cancelled: deleted while APNs is slow.
            apns.delay.withLockedValue { $0 = .seconds(2) }
            let m3 = try #require(try await g.send(JSONObject([("device_ids", .array([.string(deviceIDs[1])]))]), body: body).json["message_id"]?.stringValue)
            #expect(try await g.api.call(.DELETE, "/v1/apps/chat/messages/\(m3)").status == 204)
            messages.append(m3)
            try await Task.sleep(for: .milliseconds(2500))  // the slow answer lands (it only sets apns_status)
            apns.delay.withLockedValue { $0 = .zero }

            for id in messages {
                for d in try await g.api.call(.GET, "/v1/apps/chat/messages/\(id)").json["deliveries"]?.arrayValue ?? [] {
                    scenario.states[state(of: d) ?? "?", default: 0] += 1
                    if d.objectValue?["accepted_at"]?.stringValue != nil { scenario.accepted += 1 }
                }
            }
            for d in try await g.api.call(.GET, "/v1/apps/chat/devices?limit=1000").json["devices"]?.arrayValue ?? [] {
                scenario.devices[d.objectValue?["state"]?.stringValue ?? "?", default: 0] += 1
            }
            scenario.secrets = users + deviceIDs + phones.map(\.token) + phones.map { String($0.token.suffix(8)) } + [body] + messages
            return scenario
        }

        /// The page's numbers against the scenario's (from the API), and nothing identifying on it.
        static func check(_ page: String, against scenario: Scenario, source: String) {
            let metrics = dashboardMetrics(page)
            for state in ["queued", "accepted", "delivered", "rejected", "unregistered", "expired", "cancelled"] {
                let expected = String(scenario.states[state] ?? 0)
                #expect(metrics["chat.hour.\(state)"] == expected, "\(source): chat.hour.\(state)")
                #expect(metrics["chat.day.\(state)"] == expected, "\(source): chat.day.\(state)")
            }
            let total = String(scenario.states.values.reduce(0, +))
            #expect(metrics["chat.day.total"] == total && metrics["chat.hour.total"] == total, "\(source): totals")
            #expect(metrics["chat.accepted"] == String(scenario.accepted), "\(source): accepted")
            #expect(metrics["chat.delivered"] == String(scenario.states["delivered"] ?? 0), "\(source): delivered")
            #expect(metrics["chat.devices.active"] == String(scenario.devices["active"] ?? 0), "\(source): devices active")
            #expect(metrics["chat.devices.unregistered"] == String(scenario.devices["unregistered"] ?? 0), "\(source): devices unregistered")
            #expect(metrics["chat.queued"] == "0" && metrics["chat.leased"] == "0", "\(source): queue")
            #expect(metrics["chat.apns.410.Unregistered"] == "1", "\(source): APNs answers \(metrics)")
            #expect(metrics["chat.apns.400.BadTopic"] == "1", "\(source): APNs answers")
            #expect(metrics["other.day.total"] == "0", "\(source): the other app is listed, empty")
            for secret in scenario.secrets {
                #expect(!page.contains(secret), "\(source): the page shows \(secret)")
            }
        }

        @Test func theDashboardShowsTheAPIsNumbersAndNoIdentifiers() async throws {
            let apns = ScriptedAPNs()
            try await withGateway("dashboard", options: scriptedOptions(apns)) { g in
                let scenario = try await Self.play(g, apns)
                let answer = try await g.admin.call(.GET, "/", key: nil)
                #expect(answer.status == 200)
                #expect(answer.header("Content-Type")?.hasPrefix("text/html") == true)
                let page = answer.text
                Self.check(page, against: scenario, source: "HTTP")
                #expect(page.contains(#"<meta http-equiv="refresh" content="10">"#))
                #expect(page.contains("<caption>") && page.contains(#"scope="col""#) && page.contains("<svg"))
                #expect(!page.contains("<script") && !page.contains("src="), "no script, no external resource")
            }
        }

        /// Headless Chromium loads the page: the DOM's numbers are the API's, and screenshots at 1280×800 and
        /// at 390 px wide are kept under `.build/test-artifacts/`.
        @Test func theDashboardRendersInHeadlessChromium() async throws {
            let chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"]
                .first { FileManager.default.isExecutableFile(atPath: $0) }
            try #require(chromium != nil, "Chromium is not installed: run `apt-get install -y chromium` (Debian's package; .ci/run installs it)")
            let browser = URL(fileURLWithPath: chromium!)
            let apns = ScriptedAPNs()
            try await withGateway("dashboard-chromium", options: scriptedOptions(apns)) { g in
                let scenario = try await Self.play(g, apns)
                let url = "http://127.0.0.1:\(g.adminPort)/"
                let profile = g.directory.appendingPathComponent("chromium-profile")
                let common = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
                              "--user-data-dir=\(profile.path)"]
                let dump = try ChildProcess(launching: browser, common + ["--dump-dom", url])
                let dumped = try await offPool { try dump.waitForExit(within: .seconds(120)) }
                #expect(dumped.status == 0, "chromium --dump-dom failed: \(dumped.stderr.suffix(2000))")
                let dom = dumped.stdoutText
                #expect(dom.contains("SealedPush gateway"), "\(dom.prefix(500))")
                Self.check(dom, against: scenario, source: "Chromium DOM")

                let artifacts = ProjectPaths.root.appendingPathComponent(".build/test-artifacts")
                try FileManager.default.createDirectory(at: artifacts, withIntermediateDirectories: true)
                for (width, height) in [(1280, 800), (390, 844)] {
                    let file = artifacts.appendingPathComponent("dashboard-\(width)x\(height).png")
                    try? FileManager.default.removeItem(at: file)
                    let shot = try ChildProcess(launching: browser, common + ["--hide-scrollbars", "--window-size=\(width),\(height)",
                                                                              "--screenshot=\(file.path)", url])
                    let result = try await offPool { try shot.waitForExit(within: .seconds(120)) }
                    #expect(result.status == 0, "chromium --screenshot failed: \(result.stderr.suffix(2000))")
                    let png = try Data(contentsOf: file)
                    #expect(png.count > 10_000 && png.prefix(4) == Data([0x89, 0x50, 0x4e, 0x47]), "a PNG screenshot at \(file.path)")
                    print("dashboard screenshot: \(file.path)")
                }
            }
        }
    }
}
