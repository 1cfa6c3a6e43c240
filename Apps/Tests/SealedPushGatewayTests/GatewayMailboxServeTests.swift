import Foundation
import SealedPushKeychain
import SealedPushWire
import SealedPushWebPush
import SealedPushTestSupport
import Testing

extension GatewaySuites {
    /// Mailbox mode end to end through the local FCM and Web Push services (issue #46 item 3): the gateway sends a
    /// mailbox push to `sealedpush-server fcm serve` / `webpush serve`, whose simulated Android phone / browser — its
    /// mailbox URL set with `sealedpush device config --mailbox-url` before the service started — fetches the message
    /// from the gateway by its handle, shows it and posts its receipt; the handle the push service held is then spent.
    @Suite("mailbox mode through fcm serve and webpush serve", .serialized, .timeLimit(.minutes(5)))
    struct GatewayMailboxServeTests {
        /// A message longer than FCM's and Web Push's 4 KB: only mailbox mode carries it.
        static func longSecret(_ label: String) -> String {
            "\(label)-\(UUID().uuidString) " + String(repeating: "longer than a push may carry. ", count: 160)
        }

        /// A phone (device key) in `directory` whose mailbox URL is the gateway's API on `port`.
        static func phone(in directory: URL, name: String, port: Int) throws -> Phone {
            let phone = try Phone(in: directory, name: name, token: "")
            let configured = try ChildProcess.sealedpush(["device", "config", "--mailbox-url", "http://127.0.0.1:\(port)",
                                                          "--keychain", phone.store.root.string], timeout: 60)
            try #require(configured.status == 0, "device config: \(configured.stderr)")
            return phone
        }

        /// The app's push section with the mailbox enabled.
        static func mailboxApp(_ section: JSONObject) -> JSONObject {
            var app = section
            app["mailbox"] = .object(JSONObject([("enabled", .bool(true))]))
            return app
        }

        /// After the device's receipt: the delivery is a `delivered` mailbox delivery, and `handle` answers `410 collected`.
        static func confirmSpent(_ g: GatewayHarness, messageID: String, handle: String) async throws {
            let message = try await g.waitForStates(messageID, ["delivered"]) { ($0["platform_status"]?.intValue ?? 0) != 0 }
            let delivery = try #require(message["deliveries"]?.arrayValue?.first?.objectValue)
            #expect(delivery["delivery"]?.stringValue == "mailbox", "\(delivery)")
            let again = try await g.api.call(.POST, "/v1/mailbox/fetch", key: nil, json: .object(JSONObject([("handle", .string(handle))])))
            #expect(again.status == 410 && again.json["reason"]?.stringValue == "collected", "\(again.status) \(again.text)")
        }

        @Test("fcm serve hands a mailbox push to its simulated Android phone, which fetches the message from the gateway")
        func fcmServeDeliversMailboxPushes() async throws {
            let dir = try makeScratchDirectory("mailbox-fcm-serve")
            defer { try? FileManager.default.removeItem(at: dir) }
            let port = try GatewayHarness.freePort()
            let phone = try Self.phone(in: dir, name: "android", port: port)
            let token = "mailbox-android:APA91bH-" + String(repeating: "m", count: 40)
            let capturePath = dir.appendingPathComponent("captured.jsonl").path
            let fcm = try await LocalFCMServe.start(in: dir, project: "chat-mailbox",
                                                    arguments: ["--device", "\(token)=\(phone.store.root.string)", "--capture", capturePath])
            defer { fcm.stop() }
            try await withGateway("mailbox-fcm-serve", extraApp: Self.mailboxApp(fcm.section), apiPort: port) { g in
                let registered = try await g.api.call(.PUT, "/v1/apps/chat/devices/pixel", json: GatewayFCMTests.registration(phone, token: token))
                #expect(registered.status == 201, "\(registered.text)")
                let secret = Self.longSecret("fcm-serve")
                let sent = try await g.send(JSONObject([("user_id", "u-android")]), body: secret)
                #expect(sent.status == 202, "\(sent.text)")
                let id = try #require(sent.json["message_id"]?.stringValue)
                let line = try #require(try await offPool { fcm.process.nextLine(within: .seconds(60)) },
                                        "the Android phone printed no outcome: \(fcm.process.stderrText)")
                let outcome = try #require(try JSON.parse(Array(line.utf8)).objectValue)
                #expect(outcome["outcome"]?.stringValue == "decrypted" && outcome["reason"] == .null, "\(line) \(fcm.process.stderrText)")
                let shown = try #require(try NotificationCenterStore(store: phone.store).entries().last)
                #expect(shown.body == secret)
                #expect(shown.userInfo["SEALEDPUSH_FETCH"] == nil && shown.userInfo["sealedpush_fetch"] == nil, "the handle was kept: \(shown.userInfo)")
                // What FCM saw: a data-only message whose one member is the handle, small whatever the message's size.
                let captured = try String(contentsOfFile: capturePath, encoding: .utf8).split(separator: "\n")
                let lastLine = try #require(captured.last)
                let request = try #require(try JSON.parse(Array(lastLine.utf8)).objectValue)
                let bodyText = try #require(request["body"]?.stringValue)
                #expect(bodyText.utf8.count < 1024 && !bodyText.contains("ENCRYPTED_DATA"), "\(bodyText.prefix(200))")
                let data = try #require(try JSON.parse(Array(bodyText.utf8)).objectValue?["message"]?.objectValue?["data"]?.objectValue)
                #expect(data.map(\.key) == ["sealedpush_fetch"], "\(data.map(\.key))")
                try await Self.confirmSpent(g, messageID: id, handle: try #require(data["sealedpush_fetch"]?.stringValue))
            }
        }

        @Test("webpush serve hands a mailbox push to its simulated browser, which fetches the message from the gateway")
        func webPushServeDeliversMailboxPushes() async throws {
            let dir = try makeScratchDirectory("mailbox-webpush-serve")
            defer { try? FileManager.default.removeItem(at: dir) }
            let port = try GatewayHarness.freePort()
            let phone = try Self.phone(in: dir, name: "browser", port: port)
            let keychain = phone.store.root.string
            let subscribed = try ChildProcess.sealedpush(["device", "subscribe", "--keychain", keychain, "--endpoint", "https://127.0.0.1:8443/push/browser-1"])
            try #require(subscribed.status == 0, "device subscribe: \(subscribed.stderr)")
            var subscription = try #require(try JSON.parse(subscribed.stdout).objectValue)
            let capturePath = dir.appendingPathComponent("captured.jsonl").path
            let webpush = try await LocalWebPushServe.start(in: dir, arguments: ["--subscription", "browser-1=\(keychain)", "--capture", capturePath])
            defer { webpush.stop() }
            subscription["endpoint"] = .string(webpush.origin + "/push/browser-1")
            try await withGateway("mailbox-webpush-serve", extraApp: Self.mailboxApp(webpush.section), apiPort: port) { g in
                let registered = try await g.api.call(.PUT, "/v1/apps/chat/devices/browser", json: .object(JSONObject([
                    ("user_id", "u-web"), ("platform", "webpush"), ("webpush", .object(subscription)), ("key_record", .object(phone.record)),
                ])))
                #expect(registered.status == 201, "\(registered.text)")
                let secret = Self.longSecret("webpush-serve")
                let sent = try await g.send(JSONObject([("user_id", "u-web")]), body: secret, extra: JSONObject([("collapse_id", "c-9")]))
                #expect(sent.status == 202, "\(sent.text)")
                let id = try #require(sent.json["message_id"]?.stringValue)
                let line = try #require(try await offPool { webpush.process.nextLine(within: .seconds(60)) },
                                        "the browser printed no outcome: \(webpush.process.stderrText)")
                let outcome = try #require(try JSON.parse(Array(line.utf8)).objectValue)
                #expect(outcome["outcome"]?.stringValue == "decrypted" && outcome["reason"] == .null, "\(line) \(webpush.process.stderrText)")
                let requestID = try #require(outcome["request_id"]?.stringValue)
                let shown = try #require(try NotificationCenterStore(store: phone.store).entry(requestID: requestID))
                #expect(shown.body == secret)
                #expect(shown.userInfo["SEALEDPUSH_FETCH"] == nil && shown.userInfo["sealedpush_fetch"] == nil, "the handle was kept: \(shown.userInfo)")
                // What the push service saw: an RFC 8291 body far smaller than the message.
                let captured = try String(contentsOfFile: capturePath, encoding: .utf8).split(separator: "\n")
                let lastLine = try #require(captured.last)
                let request = try #require(try JSON.parse(Array(lastLine.utf8)).objectValue)
                let body = try #require(request["body_base64url"]?.stringValue.flatMap { WebPushBase64URL.decode($0) })
                #expect(body.count < 512, "the Web Push body grows with the message: \(body.count) bytes")
                let message = try await g.waitForStates(id, ["delivered"]) { ($0["platform_status"]?.intValue ?? 0) != 0 }
                let delivery = try #require(message["deliveries"]?.arrayValue?.first?.objectValue)
                #expect(delivery["delivery"]?.stringValue == "mailbox", "\(delivery)")
                // The list (§7) holds nothing more for this browser: the one message was collected.
                let listed = try ChildProcess.sealedpush(["device", "status", "--json", "--keychain", keychain], timeout: 60)
                #expect(try JSON.parse(listed.stdout).objectValue?["handles_waiting"] == .int(0), "\(listed.stdoutText)")
            }
        }
    }
}
