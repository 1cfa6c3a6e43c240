import Foundation
import SealedPushCrypto
import SealedPushDevice
@testable import SealedPushGateway
import SealedPushKeychain
import SealedPushReceiver
import SealedPushTestSupport
import SealedPushWebPush
import SealedPushWire
import Testing

extension GatewaySuites {
    /// Matrix notifications to an app in mailbox mode (matrix v1 §4, mailbox v1 §1–§4), in process: each push carries
    /// only a handle, the envelope waits at the gateway for one device's fetch, opens to the Matrix ids, and is gone
    /// once its receipt came.
    @Suite("Gateway Matrix push gateway in mailbox mode (matrix v1 §4, mailbox v1)", .timeLimit(.minutes(3)))
    struct GatewayMatrixMailboxTests {
        static let notify = "/_matrix/push/v1/notify"

        /// Runs `body` with app `chat` serving the three Matrix app ids with its mailbox enabled (`mailbox` members added).
        static func with(_ name: String, mailbox extra: JSONObject = JSONObject([]), _ body: (InProcessGateway) async throws -> Void) async throws {
            var (section, directories) = try MatrixFixture.app()
            defer { for d in directories { try? FileManager.default.removeItem(at: d) } }
            var mailbox = JSONObject([("enabled", true), ("fetch_grace", 60)])
            for m in extra { mailbox[m.key] = m.value }
            section["mailbox"] = .object(mailbox)
            try await InProcessGateway.with(name, options: GatewayPlatformTests.options(), extraApp: section, body)
        }

        /// The handle a queued delivery's push carries, checking that the push carries nothing else: APNs's payload
        /// holds only the placeholder and `SEALEDPUSH_FETCH`, FCM's stored payload is the handle alone (its request's
        /// `data` becomes `{"sealedpush_fetch": handle}`), Web Push's plaintext is `{"sealedpush_fetch": handle}`.
        static func handle(of claim: ClaimedDelivery, web: WebPushUserAgentKeys) throws -> String {
            switch claim.platform {
            case .apns:
                let root = try #require(try JSON.parse(claim.payload).objectValue)
                #expect(Set(root.map(\.key)) == ["aps", "SEALEDPUSH_FETCH"], "\(root)")
                #expect(root["ENCRYPTED_DATA"] == nil)
                let aps = try #require(root["aps"]?.objectValue)
                #expect(Set(aps.map(\.key)) == ["alert", "mutable-content"], "no badge, thread or sound in the clear: \(aps)")
                #expect(aps["alert"]?.objectValue?["body"]?.stringValue == "(Encrypted)")
                return try #require(root["SEALEDPUSH_FETCH"]?.stringValue)
            case .fcm:
                #expect(MailboxPush.isHandle(claim.payload), "the FCM payload is not a handle")
                return String(decoding: claim.payload, as: UTF8.self)
            case .webpush:
                let plaintext = try WebPushDecryptor(keys: web).decrypt(claim.payload)
                let root = try #require(try JSON.parse(plaintext).objectValue)
                #expect(Set(root.map(\.key)) == ["sealedpush_fetch"], "\(root)")
                return try #require(root["sealedpush_fetch"]?.stringValue)
            }
        }

        static func fetch(_ g: InProcessGateway, _ handle: String) async throws -> Answer {
            try await g.api.call(.POST, "/v1/mailbox/fetch", key: nil, json: .object(JSONObject([("handle", .string(handle))])))
        }

        /// Opens a fetched envelope with `phone`'s device key, checking the body names the handle's delivery (`dlv`).
        static func open(_ answer: Answer, phone: Phone, handle: String) throws -> OpenedMessage {
            let keyPair = try DeviceKeys(store: phone.store).device.activeKeyPair()
            let opened = try MessageOpener(keys: InMemoryKeys([keyPair]))
                .open(encryptedData: try #require(answer.json["envelope"]?.stringValue), now: Int64(Date().timeIntervalSince1970))
            #expect(mailboxBodyMatches(opened.rawBody, handle: try #require(MailboxHandle(handle))), "dlv is not the handle's delivery")
            return opened
        }

        @Test func eachPlatformsPushCarriesOnlyAHandleAndTheFetchOpensOnceToTheMatrixIds() async throws {
            try await Self.with("matrix-mailbox") { g in
                let iphone = try Phone(in: g.directory, name: "iphone", token: hexToken(0x6d))
                let android = try Phone(in: g.directory, name: "android", token: "")
                let browser = try Phone(in: g.directory, name: "browser", token: "")
                let webKeys = WebPushUserAgentKeys.generate()
                let body = MatrixFixture.notification([
                    MatrixFixture.device(MatrixFixture.iosApp, iphone.token, record: iphone.record),
                    MatrixFixture.device(MatrixFixture.androidApp, "dQw4w9WgXcQ:APA91bH-matrix-mailbox", record: android.record),
                    MatrixFixture.webDevice(webKeys, record: browser.record),
                ])
                let answer = try await g.api.call(.POST, Self.notify, key: nil, json: body)
                #expect(answer.status == 200 && answer.json["rejected"] == .array([]), "\(answer.text)")

                let queued: [(Phone, ClaimedDelivery)] = [
                    (iphone, try #require(try await MatrixFixture.queued(g.gateway, platform: .apns).first)),
                    (android, try #require(try await MatrixFixture.queued(g.gateway, platform: .fcm).first)),
                    (browser, try #require(try await MatrixFixture.queued(g.gateway, platform: .webpush).first)),
                ]
                var messageID: String?
                for (phone, claim) in queued {
                    // What the push service would see: the handle and nothing of the notification.
                    let visible = String(decoding: claim.payload, as: UTF8.self)
                    for secret in [MatrixFixture.eventID, MatrixFixture.roomID, MatrixFixture.sender, "example.org", "unread", "ENCRYPTED_DATA"] {
                        #expect(!visible.contains(secret), "\(claim.platform) payload shows \(secret)")
                    }
                    let handle = try Self.handle(of: claim, web: webKeys)
                    #expect(MailboxHandle(handle)?.deliveryID == claim.deliveryID, "\(claim.platform)")
                    for secret in [MatrixFixture.eventID, MatrixFixture.roomID, MatrixFixture.sender] { #expect(!handle.contains(secret)) }

                    // The fetch hands the envelope, which the device key opens to the Matrix ids.
                    let first = try await Self.fetch(g, handle)
                    #expect(first.status == 200 && first.header("Cache-Control") == "no-store", "\(claim.platform): \(first.status) \(first.text)")
                    let opened = try Self.open(first, phone: phone, handle: handle)
                    let matrix = try #require(opened.body.data?["matrix"]?.objectValue, "\(claim.platform): \(opened.rawBody)")
                    #expect(matrix["event_id"]?.stringValue == MatrixFixture.eventID && matrix["room_id"]?.stringValue == MatrixFixture.roomID
                            && matrix["sender"]?.stringValue == MatrixFixture.sender, "\(claim.platform): \(matrix)")
                    #expect(opened.body.alert.body == "New message" && opened.body.badge == 2 && opened.body.threadID == MatrixFixture.roomID)
                    #expect(first.json["message_id"]?.stringValue == opened.body.id)
                    messageID = opened.body.id

                    // Its receipt confirms it: the same handle then answers 410 collected, the envelope deleted.
                    let receipt = try #require(opened.body.receipt, "a Matrix message asks for its receipt")
                    let posted = try await g.api.call(.POST, "/v1/receipts", key: nil, json: .object(JSONObject([
                        ("v", .int(1)), ("type", "delivered"), ("id", .string(opened.body.id)), ("token", .string(receipt.token)),
                        ("at", .int(Int64(Date().timeIntervalSince1970))),
                    ])))
                    #expect(posted.status == 204, "\(claim.platform): \(posted.text)")
                    let second = try await Self.fetch(g, handle)
                    #expect(second.status == 410 && second.json["reason"]?.stringValue == "collected", "\(claim.platform): \(second.status) \(second.text)")
                    #expect(second.json["envelope"] == nil)
                }
                // One message, each of its deliveries in mailbox mode, as GET …/messages/{id} shows them.
                let id = try #require(messageID)
                let shown = try await g.api.call(.GET, "/v1/apps/chat/messages/\(id)")
                let deliveries = shown.json["deliveries"]?.arrayValue ?? []
                #expect(deliveries.count == 3 && deliveries.allSatisfy { $0.objectValue?["delivery"]?.stringValue == "mailbox" }, "\(shown.text)")
                let metrics = String(decoding: g.gateway.metrics.render(), as: UTF8.self)
                for platform in ["apns", "fcm", "webpush"] {
                    #expect(metrics.contains("sealedpush_matrix_notifies_total{app=\"chat\",platform=\"\(platform)\"} 1"), "\(metrics)")
                }
            }
        }

        @Test func aRetryIsQueuedOnceAndAWrongHandleFetchesNothing() async throws {
            try await Self.with("matrix-mailbox-retry") { g in
                let iphone = try Phone(in: g.directory, name: "iphone", token: hexToken(0x6e))
                let body = MatrixFixture.notification([MatrixFixture.device(MatrixFixture.iosApp, iphone.token, record: iphone.record)])
                for _ in 0..<2 {
                    let answer = try await g.api.call(.POST, Self.notify, key: nil, json: body)
                    #expect(answer.status == 200 && answer.json["rejected"] == .array([]), "\(answer.text)")
                }
                let claims = try await MatrixFixture.queued(g.gateway, platform: .apns)
                #expect(claims.count == 1, "the homeserver's retry queued a second mailbox delivery")
                let handle = try Self.handle(of: try #require(claims.first), web: WebPushUserAgentKeys.generate())
                let parsed = try #require(MailboxHandle(handle))
                let wrong = try #require(MailboxHandle.make(deliveryID: parsed.deliveryID)).description
                let refused = try await Self.fetch(g, wrong)
                #expect(refused.status == 404 && refused.code == "unknown_handle", "\(refused.text)")
                #expect(try await Self.fetch(g, handle).status == 200, "a wrong handle cost the right one its message")
            }
        }

        @Test func contentTooLargeForTheMailboxGoesAsThePlaceholder() async throws {
            // The smallest mailbox (4096 bytes): a room name and a body (cut at 1024 bytes) that together do not fit.
            // As in push mode, the notification goes with the placeholder text, sealed, never refused.
            try await Self.with("matrix-mailbox-large", mailbox: JSONObject([("max_message_bytes", .int(4096))])) { g in
                let iphone = try Phone(in: g.directory, name: "iphone", token: hexToken(0x6f))
                var device = MatrixFixture.device(MatrixFixture.iosApp, iphone.token, record: iphone.record)
                if case var .object(d) = device, case var .object(data)? = d["data"] {
                    data["format"] = nil
                    d["data"] = .object(data)
                    device = .object(d)
                }
                // One character of 4001 bytes (a letter and 2000 combining accents): the title keeps 256 characters,
                // so all of it, and with the body cut at 1024 bytes the message is over 4096 bytes.
                let roomName = "a" + String(repeating: "\u{0301}", count: 2000)
                let body = MatrixFixture.notification([device], extra: JSONObject([
                    ("room_name", .string(roomName)),
                    ("content", .object(JSONObject([("msgtype", "m.text"), ("body", .string(String(repeating: "\u{1F512}", count: 1000)))]))),
                ]))
                let answer = try await g.api.call(.POST, Self.notify, key: nil, json: body)
                #expect(answer.status == 200 && answer.json["rejected"] == .array([]), "\(answer.text)")
                let claim = try #require(try await MatrixFixture.queued(g.gateway, platform: .apns).first)
                let handle = try Self.handle(of: claim, web: WebPushUserAgentKeys.generate())
                let fetched = try await Self.fetch(g, handle)
                #expect(fetched.status == 200, "\(fetched.text)")
                let opened = try Self.open(fetched, phone: iphone, handle: handle)
                #expect(opened.body.alert.body == "New message" && opened.body.alert.title == nil, "\(opened.body.alert)")
                #expect(opened.body.data?["matrix"]?.objectValue?["event_id"]?.stringValue == MatrixFixture.eventID)
            }
        }
    }
}
