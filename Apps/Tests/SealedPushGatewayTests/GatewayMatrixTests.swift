import Foundation
import NIOHTTP1
import SealedPushCrypto
import SealedPushDevice
import SealedPushDeviceHTTP
@testable import SealedPushGateway
import SealedPushTestSupport
import SealedPushWebPush
import SealedPushWire
import Testing

/// What the Matrix tests share: the app sections (APNs from the harness, FCM, Web Push and `matrix`), the
/// notification bodies a homeserver sends, and opening what was queued as each simulated device would.
enum MatrixFixture {
    static let iosApp = "im.example.ios"
    static let androidApp = "im.example.android"
    static let webApp = "im.example.web"
    static let endpoint = "https://push.example.net/wpush/v2/gAAAAABmatrix-capability"
    static let eventID = "$143273582443PhrSn:example.org"
    static let roomID = "!slw48wfj34rtnrf:example.org"
    static let sender = "@exampleuser:matrix.org"

    /// The `fcm`, `webpush` and `matrix` members of app `chat` (its `apns` comes from the harness), and the
    /// directories holding their key files.
    static func app(matrix extra: JSONObject = JSONObject([])) throws -> (JSONObject, [URL]) {
        let (fcm, _, fcmDirectory) = try GatewayFCMTests.fcmApp()
        let (web, webDirectory) = try GatewayPlatformTests.webpushApp()
        var matrix = JSONObject([("app_ids", .object(JSONObject([
            (iosApp, .object(JSONObject([("platform", "apns"), ("environment", "sandbox")]))),
            (androidApp, .object(JSONObject([("platform", "fcm")]))),
            (webApp, .object(JSONObject([("platform", "webpush")]))),
        ])))])
        for m in extra { matrix[m.key] = m.value }
        var section = fcm
        for m in web { section[m.key] = m.value }
        section["matrix"] = .object(matrix)
        return (section, [fcmDirectory, webDirectory])
    }

    /// A device of a notification: its pusher's `app_id`, `pushkey` and `data` (`sealedpush_key` given as `record`).
    static func device(_ appID: String, _ pushkey: String, record: JSONObject?, data extra: JSONObject = JSONObject([]),
                       pushkeyTS: Int64 = 1_700_000_000) -> JSONValue {
        var data = JSONObject([("format", "event_id_only")])
        if let record { data["sealedpush_key"] = .object(record) }
        for m in extra { data[m.key] = m.value }
        return .object(JSONObject([("app_id", .string(appID)), ("pushkey", .string(pushkey)), ("pushkey_ts", .int(pushkeyTS)),
                                   ("data", .object(data)), ("tweaks", .object(JSONObject([("sound", "bing")])))]))
    }

    /// A Web Push device: the pushkey is the subscription's p256dh, with `data.endpoint` and `data.auth` (as Sygnal's).
    static func webDevice(_ keys: WebPushUserAgentKeys, record: JSONObject?, endpoint: String = endpoint) -> JSONValue {
        guard case let .object(s) = keys.subscriptionJSON(endpoint: endpoint), case let .object(k)? = s["keys"],
              let p256dh = k["p256dh"]?.stringValue, let auth = k["auth"]?.stringValue else { return .null }
        return device(webApp, p256dh, record: record, data: JSONObject([("endpoint", .string(endpoint)), ("auth", .string(auth))]))
    }

    /// A notification as Synapse sends it with `format: event_id_only` (or without `event_id`: a badge update).
    static func notification(_ devices: [JSONValue], eventID: String? = eventID, unread: Int64 = 2, prio: String = "high",
                             extra: JSONObject = JSONObject([])) -> JSONValue {
        var n = JSONObject([])
        if let eventID {
            n["event_id"] = .string(eventID)
            n["room_id"] = .string(roomID)
            n["type"] = "m.room.message"
            n["sender"] = .string(sender)
            n["prio"] = .string(prio)
        }
        n["counts"] = .object(JSONObject([("unread", .int(unread)), ("missed_calls", .int(0))]))
        n["devices"] = .array(devices)
        for m in extra { n[m.key] = m.value }
        return .object(JSONObject([("notification", .object(n))]))
    }

    /// Every delivery queued for `app`, claimed from the store (no worker runs in process).
    static func queued(_ gateway: Gateway, platform: PushPlatform) async throws -> [ClaimedDelivery] {
        let now = gateway.now
        return try await gateway.store.claimDue(app: "chat", platform: platform, now: now + 86_400_000, leaseUntil: now + 86_400_000 + 60_000, limit: 1000)
    }

    /// The APNs-shaped payload of an envelope (FCM's data or Web Push's plaintext), which a phone opens.
    static func asAPNs(_ envelope: String) -> [UInt8] {
        JSON.serialize(.object(JSONObject([
            ("aps", .object(JSONObject([("alert", .object(JSONObject([("body", "(Encrypted)")]))), ("mutable-content", .int(1))]))),
            ("ENCRYPTED_DATA", .string(envelope)),
        ])))
    }

    /// What a delivery's payload is for `phone` to open: the APNs payload as it is, FCM's envelope bytes as
    /// base64, Web Push's body decrypted with the browser's keys first.
    static func openable(_ claim: ClaimedDelivery, web: WebPushUserAgentKeys? = nil) throws -> [UInt8] {
        switch claim.platform {
        case .apns: return claim.payload
        case .fcm: return asAPNs(Data(claim.payload).base64EncodedString())
        case .webpush:
            let plaintext = try WebPushDecryptor(keys: try #require(web)).decrypt(claim.payload)
            guard case let .object(inner)? = try? JSON.parse(plaintext), let envelope = inner["ENCRYPTED_DATA"]?.stringValue else {
                throw FixtureError("the Web Push plaintext is not {\"ENCRYPTED_DATA\", …}")
            }
            return asAPNs(envelope)
        }
    }

    struct FixtureError: Error, CustomStringConvertible {
        let description: String
        init(_ d: String) { description = d }
    }
}

extension GatewaySuites {
    /// The Matrix push gateway endpoint in process (matrix v1 §1–§4): a notification per platform sealed and queued,
    /// the Matrix errors, rejected pushkeys, retries answered once, badge updates, and the configuration checks.
    @Suite("Gateway Matrix push gateway (matrix v1)", .timeLimit(.minutes(3)))
    struct GatewayMatrixTests {
        static let notify = "/_matrix/push/v1/notify"

        static func with(_ name: String, matrix: JSONObject = JSONObject([]),
                         _ body: (InProcessGateway, HTTPReceiptTransport) async throws -> Void) async throws {
            let (section, directories) = try MatrixFixture.app(matrix: matrix)
            defer { for d in directories { try? FileManager.default.removeItem(at: d) } }
            let transport = HTTPReceiptTransport()
            do { try await InProcessGateway.with(name, options: GatewayPlatformTests.options(), extraApp: section) { try await body($0, transport) } } catch {
                await transport.shutdown()
                throw error
            }
            await transport.shutdown()
        }

        @Test func eachPlatformsDeviceGetsTheNotificationSealedAndThePushServiceSeesNoMatrixId() async throws {
            try await Self.with("matrix-happy") { g, transport in
                let iphone = try Phone(in: g.directory, name: "iphone", token: hexToken(0x4d))
                let android = try Phone(in: g.directory, name: "android", token: "")
                let browser = try Phone(in: g.directory, name: "browser", token: "")
                let webKeys = WebPushUserAgentKeys.generate()
                let fcmToken = "dQw4w9WgXcQ:APA91bH-matrix-token"
                let body = MatrixFixture.notification([
                    MatrixFixture.device(MatrixFixture.iosApp, iphone.token, record: iphone.record),
                    MatrixFixture.device(MatrixFixture.androidApp, fcmToken, record: android.record),
                    MatrixFixture.webDevice(webKeys, record: browser.record),
                ], prio: "low")
                let answer = try await g.api.call(.POST, Self.notify, key: nil, json: body)
                #expect(answer.status == 200 && answer.json["rejected"] == .array([]), "\(answer.text)")
                #expect(answer.header("Content-Type") == "application/json")

                // Each Matrix device is a device of the app, shown as others are.
                let iosID = Gateway.matrixDeviceID(appID: MatrixFixture.iosApp, pushkey: iphone.token)
                #expect(iosID.hasPrefix("mx-") && iosID.count == 35)
                let shown = try await g.api.call(.GET, "/v1/apps/chat/devices/\(iosID)")
                #expect(shown.status == 200 && shown.json["user_id"]?.stringValue == iosID && shown.json["platform"]?.stringValue == "apns"
                        && shown.json["environment"]?.stringValue == "sandbox", "\(shown.text)")

                let opened: [(Phone, ClaimedDelivery)] = [
                    (iphone, try #require(try await MatrixFixture.queued(g.gateway, platform: .apns).first)),
                    (android, try #require(try await MatrixFixture.queued(g.gateway, platform: .fcm).first)),
                    (browser, try #require(try await MatrixFixture.queued(g.gateway, platform: .webpush).first)),
                ]
                for (phone, claim) in opened {
                    // prio low: APNs priority 5, FCM normal, Web Push Urgency normal.
                    #expect(claim.priority == 5, "\(claim.platform)")
                    let visible = String(decoding: claim.payload, as: UTF8.self)
                    for secret in [MatrixFixture.eventID, MatrixFixture.roomID, MatrixFixture.sender, "example.org", "unread"] {
                        #expect(!visible.contains(secret), "\(claim.platform) payload shows \(secret)")
                    }
                    let result = await phone.open(try MatrixFixture.openable(claim, web: webKeys), transport: transport)
                    #expect(result.outcome == .decrypted, "\(claim.platform): \(result)")
                    let content = try #require(result.notification)
                    #expect(content.body == "New message" && content.title == "" && content.badge == 2 && content.threadIdentifier == MatrixFixture.roomID)
                    let matrix = try #require(content.userInfo["matrix"]?.objectValue, "\(content.userInfo)")
                    #expect(matrix["event_id"]?.stringValue == MatrixFixture.eventID && matrix["room_id"]?.stringValue == MatrixFixture.roomID
                            && matrix["sender"]?.stringValue == MatrixFixture.sender && matrix["prio"]?.stringValue == "low")
                }
                let metrics = String(decoding: g.gateway.metrics.render(), as: UTF8.self)
                for platform in ["apns", "fcm", "webpush"] {
                    #expect(metrics.contains("sealedpush_matrix_notifies_total{app=\"chat\",platform=\"\(platform)\"} 1"), "\(metrics)")
                }
                #expect(metrics.contains("sealedpush_gateway_messages_total{app=\"chat\"} 1"), "one message per notification")
            }
        }

        @Test func contentIsSealedAndALongBodyIsCut() async throws {
            try await Self.with("matrix-content") { g, transport in
                let iphone = try Phone(in: g.directory, name: "iphone", token: hexToken(0x51))
                var device = MatrixFixture.device(MatrixFixture.iosApp, iphone.token, record: iphone.record)
                if case var .object(d) = device, case var .object(data)? = d["data"] {
                    data["format"] = nil
                    d["data"] = .object(data)
                    device = .object(d)
                }
                let long = String(repeating: "é", count: 3000)
                let body = MatrixFixture.notification([device], extra: JSONObject([
                    ("room_name", "Mission Control"), ("content", .object(JSONObject([("msgtype", "m.text"), ("body", .string(long))]))),
                ]))
                let answer = try await g.api.call(.POST, Self.notify, key: nil, json: body)
                #expect(answer.status == 200 && answer.json["rejected"] == .array([]), "\(answer.text)")
                let claim = try #require(try await MatrixFixture.queued(g.gateway, platform: .apns).first)
                #expect(!String(decoding: claim.payload, as: UTF8.self).contains("Mission"))
                let result = await iphone.open(claim.payload, transport: transport)
                let content = try #require(result.notification, "\(result)")
                #expect(content.title == "Mission Control" && content.body.hasPrefix("éé") && content.body.hasSuffix("…")
                        && content.body.utf8.count <= Gateway.matrixBodyBytes)
            }
        }

        @Test func aRetryOfTheSameNotificationIsQueuedOnceAndAnsweredAsTheFirst() async throws {
            try await Self.with("matrix-retry") { g, transport in
                let iphone = try Phone(in: g.directory, name: "iphone", token: hexToken(0x52))
                let body = MatrixFixture.notification([
                    MatrixFixture.device(MatrixFixture.iosApp, iphone.token, record: iphone.record),
                    MatrixFixture.device("im.example.unknown", "abc", record: iphone.record),
                ])
                let first = try await g.api.call(.POST, Self.notify, key: nil, json: body)
                let again = try await g.api.call(.POST, Self.notify, key: nil, json: body)
                #expect(first.status == 200 && again.status == 200)
                #expect(first.json["rejected"] == .array(["abc"]) && again.json["rejected"] == first.json["rejected"], "\(again.text)")
                #expect(try await MatrixFixture.queued(g.gateway, platform: .apns).count == 1, "the repeat queued nothing")
                // Another event for the same device is a new notification.
                let next = MatrixFixture.notification([MatrixFixture.device(MatrixFixture.iosApp, iphone.token, record: iphone.record)],
                                                      eventID: "$another:example.org")
                #expect(try await g.api.call(.POST, Self.notify, key: nil, json: next).status == 200)
                #expect(try await MatrixFixture.queued(g.gateway, platform: .apns).count == 1, "claimed deliveries stay claimed; one new")
                let metrics = String(decoding: g.gateway.metrics.render(), as: UTF8.self)
                #expect(metrics.contains("sealedpush_matrix_retries_total{app=\"chat\",platform=\"apns\"} 1"), "\(metrics)")
                #expect(metrics.contains("sealedpush_matrix_rejected_pushkeys_total{app=\"unknown\",platform=\"unknown\",reason=\"app_id_not_configured\"} 2"))
            }
        }

        @Test func aPushkeyIsRejectedOnlyWhenItCanNeverBeDelivered() async throws {
            try await Self.with("matrix-rejected") { g, transport in
                let iphone = try Phone(in: g.directory, name: "iphone", token: hexToken(0x53))
                let other = try Phone(in: g.directory, name: "other", token: hexToken(0x54))
                var wrongType = iphone.record
                wrongType["type"] = "sealedpush-sender-key"
                var wrongKeyID = iphone.record
                wrongKeyID["key_id"] = other.record["key_id"]
                let lowOrder = DeviceKeyRecord(publicKey: try BoxPublicKey(bytes: [UInt8](repeating: 0, count: 32)), createdAt: nil).jsonObject
                let webKeys = WebPushUserAgentKeys.generate()
                let cases: [(String, JSONValue, String)] = [
                    ("unknown app_id", MatrixFixture.device("im.example.nope", hexToken(1), record: iphone.record), "app_id_not_configured"),
                    ("no key record", MatrixFixture.device(MatrixFixture.iosApp, hexToken(2), record: nil), "bad_key_record"),
                    ("key record of the wrong type", MatrixFixture.device(MatrixFixture.iosApp, hexToken(3), record: wrongType), "bad_key_record"),
                    ("key id mismatch", MatrixFixture.device(MatrixFixture.iosApp, hexToken(4), record: wrongKeyID), "bad_key_record"),
                    ("low-order key", MatrixFixture.device(MatrixFixture.iosApp, hexToken(5), record: lowOrder), "low_order_key"),
                    ("not an APNs token", MatrixFixture.device(MatrixFixture.iosApp, "not a token", record: iphone.record), "bad_pushkey"),
                    ("not an FCM token", MatrixFixture.device(MatrixFixture.androidApp, "bad token!", record: iphone.record), "bad_pushkey"),
                    ("endpoint at a private address", MatrixFixture.webDevice(webKeys, record: iphone.record, endpoint: "https://private.example.net/p/secret-1"), "endpoint_not_public"),
                    ("endpoint as an IP literal", MatrixFixture.webDevice(webKeys, record: iphone.record, endpoint: "https://127.0.0.1/p/secret-1"), "endpoint_not_public"),
                    ("endpoint over http", MatrixFixture.webDevice(webKeys, record: iphone.record, endpoint: "http://push.example.net/p/secret-1"), "endpoint_not_public"),
                    ("endpoint on another port", MatrixFixture.webDevice(webKeys, record: iphone.record, endpoint: "https://push.example.net:8443/p/secret-1"), "endpoint_not_public"),
                ]
                for (what, device, _) in cases {
                    let answer = try await g.api.call(.POST, Self.notify, key: nil, json: MatrixFixture.notification([device]))
                    let pushkey = device.objectValue?["pushkey"] ?? .null
                    #expect(answer.status == 200 && answer.json["rejected"] == .array([pushkey]), "\(what): \(answer.text)")
                    #expect(!answer.text.contains("secret-1"), "\(what) quotes the endpoint")
                }
                for platform in PushPlatform.allCases {
                    #expect(try await MatrixFixture.queued(g.gateway, platform: platform).isEmpty, "nothing queued on \(platform)")
                }
                let listed = try await g.api.call(.GET, "/v1/apps/chat/devices")
                #expect(listed.json["devices"] == .array([]), "no device made for a rejected pushkey: \(listed.text)")
                let metrics = String(decoding: g.gateway.metrics.render(), as: UTF8.self)
                for reason in Set(cases.map(\.2)) {
                    #expect(metrics.contains("reason=\"\(reason)\""), "\(reason) counted")
                }

                // A token the push service said is gone, at or after pushkey_ts, is rejected; a pusher set again later is not.
                let device = MatrixFixture.device(MatrixFixture.iosApp, iphone.token, record: iphone.record, pushkeyTS: 1_700_000_000)
                #expect(try await g.api.call(.POST, Self.notify, key: nil, json: MatrixFixture.notification([device])).json["rejected"] == .array([]))
                let claim = try #require(try await MatrixFixture.queued(g.gateway, platform: .apns).first)
                let goneAt = g.gateway.now + 1000
                _ = try await g.gateway.store.completeAttempt(claim, outcome: .final(.unregistered, status: 410, reason: "Unregistered", attempted: true),
                                                              unregisteredAt: goneAt, now: goneAt)
                let later = MatrixFixture.notification([device], eventID: "$later:example.org")
                let gone = try await g.api.call(.POST, Self.notify, key: nil, json: later)
                #expect(gone.json["rejected"] == .array([.string(iphone.token)]), "\(gone.text)")
                let reset = MatrixFixture.device(MatrixFixture.iosApp, iphone.token, record: iphone.record, pushkeyTS: goneAt / 1000 + 1)
                let back = try await g.api.call(.POST, Self.notify, key: nil, json: MatrixFixture.notification([reset], eventID: "$back:example.org"))
                #expect(back.json["rejected"] == .array([]), "a pusher set after the 410 is taken: \(back.text)")
                #expect(try await MatrixFixture.queued(g.gateway, platform: .apns).count == 1)
            }
        }

        @Test func badRequestsGetMatrixErrorsAndQueueNothing() async throws {
            try await Self.with("matrix-bad") { g, transport in
                let iphone = try Phone(in: g.directory, name: "iphone", token: hexToken(0x55))
                let good = MatrixFixture.device(MatrixFixture.iosApp, iphone.token, record: iphone.record)
                let tooMany = MatrixFixture.notification((0..<51).map { MatrixFixture.device(MatrixFixture.iosApp, hexToken(0x1000 + $0), record: iphone.record) })
                let huge = MatrixFixture.notification([good], extra: JSONObject([("content", .object(JSONObject([("body", .string(String(repeating: "x", count: 70_000)))])))]))
                let cases: [(String, [UInt8], Int, String)] = [
                    ("not JSON", Array("{\"notification\": ".utf8), 400, "M_NOT_JSON"),
                    ("not an object", Array("[1, 2]".utf8), 400, "M_BAD_JSON"),
                    ("no notification", JSON.serialize(.object(JSONObject([("devices", .array([good]))]))), 400, "M_BAD_JSON"),
                    ("devices not an array", JSON.serialize(.object(JSONObject([("notification", .object(JSONObject([("devices", good)])))]))), 400, "M_BAD_JSON"),
                    ("a device without pushkey", JSON.serialize(MatrixFixture.notification([.object(JSONObject([("app_id", .string(MatrixFixture.iosApp))]))])), 400, "M_BAD_JSON"),
                    ("counts of the wrong type", JSON.serialize(MatrixFixture.notification([good], extra: JSONObject([("counts", .object(JSONObject([("unread", "2")])))]))), 400, "M_BAD_JSON"),
                    ("prio unknown", JSON.serialize(MatrixFixture.notification([good], prio: "urgent")), 400, "M_BAD_JSON"),
                    ("51 devices", JSON.serialize(tooMany), 400, "M_BAD_JSON"),
                    ("over 64 KiB", JSON.serialize(huge), 413, "M_TOO_LARGE"),
                ]
                for (what, bytes, status, errcode) in cases {
                    let answer = try await g.api.call(.POST, Self.notify, key: nil, raw: bytes)
                    #expect(answer.status == status && answer.json["errcode"]?.stringValue == errcode, "\(what): \(answer.text)")
                    #expect(answer.json["error"]?.stringValue?.isEmpty == false && answer.json["type"] == nil, "\(what): a Matrix error, not RFC 9457")
                    #expect(answer.header("Content-Type") == "application/json", "\(what)")
                }
                #expect(try await MatrixFixture.queued(g.gateway, platform: .apns).isEmpty, "nothing queued")
                #expect(try await g.api.call(.GET, "/v1/apps/chat/devices").json["devices"] == .array([]), "no device made")

                // Unknown paths under /_matrix/ and wrong methods are M_UNRECOGNIZED.
                let unknown = try await g.api.call(.POST, "/_matrix/push/v1/other", key: nil, json: MatrixFixture.notification([good]))
                #expect(unknown.status == 404 && unknown.json["errcode"]?.stringValue == "M_UNRECOGNIZED", "\(unknown.text)")
                let get = try await g.api.call(.GET, Self.notify, key: nil)
                #expect(get.status == 405 && get.json["errcode"]?.stringValue == "M_UNRECOGNIZED", "\(get.text)")
                // The gateway's own routes keep their RFC 9457 problems.
                let own = try await g.api.call(.GET, "/v1/nothing-here")
                #expect(own.status == 404 && own.json["type"] != nil)
            }
        }

        @Test func aSourceOutsideAllowedSourcesIsForbidden() async throws {
            // In process the peer is unknown, so it is in no network.
            try await Self.with("matrix-sources", matrix: JSONObject([("allowed_sources", .array(["203.0.113.0/24"]))])) { g, transport in
                let iphone = try Phone(in: g.directory, name: "iphone", token: hexToken(0x56))
                let answer = try await g.api.call(.POST, Self.notify, key: nil,
                                                  json: MatrixFixture.notification([MatrixFixture.device(MatrixFixture.iosApp, iphone.token, record: iphone.record)]))
                #expect(answer.status == 403 && answer.json["errcode"]?.stringValue == "M_FORBIDDEN", "\(answer.text)")
                #expect(try await MatrixFixture.queued(g.gateway, platform: .apns).isEmpty)
            }
        }

        @Test func badgeUpdatesShowTheCountToAPNsOnlyAndAreSealedElsewhere() async throws {
            try await Self.with("matrix-badge") { g, transport in
                let iphone = try Phone(in: g.directory, name: "iphone", token: hexToken(0x57))
                let android = try Phone(in: g.directory, name: "android", token: "")
                let body = MatrixFixture.notification([
                    MatrixFixture.device(MatrixFixture.iosApp, iphone.token, record: iphone.record),
                    MatrixFixture.device(MatrixFixture.androidApp, "fcm-token-badge", record: android.record),
                ], eventID: nil, unread: 7)
                let answer = try await g.api.call(.POST, Self.notify, key: nil, json: body)
                #expect(answer.status == 200 && answer.json["rejected"] == .array([]), "\(answer.text)")
                let apns = try #require(try await MatrixFixture.queued(g.gateway, platform: .apns).first)
                #expect(try JSON.parse(apns.payload) == .object(JSONObject([("aps", .object(JSONObject([("badge", .int(7))])))])),
                        "\(String(decoding: apns.payload, as: UTF8.self))")
                let fcm = try #require(try await MatrixFixture.queued(g.gateway, platform: .fcm).first)
                let opened = await android.open(try MatrixFixture.openable(fcm), transport: transport)
                let content = try #require(opened.notification, "\(opened)")
                #expect(content.badge == 7 && content.userInfo["matrix"]?.objectValue?["badge_only"] == .bool(true))
            }
            try await Self.with("matrix-badge-drop", matrix: JSONObject([("counts_only", "drop")])) { g, transport in
                let iphone = try Phone(in: g.directory, name: "iphone", token: hexToken(0x58))
                let body = MatrixFixture.notification([MatrixFixture.device(MatrixFixture.iosApp, iphone.token, record: iphone.record)], eventID: nil)
                let answer = try await g.api.call(.POST, Self.notify, key: nil, json: body)
                #expect(answer.status == 200 && answer.json["rejected"] == .array([]), "\(answer.text)")
                #expect(try await MatrixFixture.queued(g.gateway, platform: .apns).isEmpty, "dropped")
            }
        }

        @Test func configurationChecksNameTheMember() throws {
            let directory = try GatewayHarness.parseTestDirectory("matrix-config")
            defer { try? FileManager.default.removeItem(at: directory) }
            func app(_ id: String, _ matrix: JSONValue) -> JSONValue {
                .object(JSONObject([
                    ("id", .string(id)), ("topic", "com.example.chat"),
                    ("apns", .object(JSONObject([("auth_key", "key.p8"), ("key_id", "KEY0000001"), ("team_id", "TEAM000001")]))),
                    // Each app its own key: one key hash in two apps is refused on its own (#44).
                    ("api_keys", .array([.object(JSONObject([("id", "k"), ("sha256", .string(Digests.sha256(Array(id.utf8)).map { String(format: "%02x", $0) }.joined())), ("scopes", .array(["send"]))]))])),
                    ("matrix", matrix),
                ]))
            }
            func parse(_ apps: [JSONValue]) throws(GatewayConfigurationError) -> GatewayConfiguration {
                try GatewayConfiguration.parse(JSON.serialize(.object(JSONObject([("public_url", "https://push.example.com"), ("apps", .array(apps))]))),
                                               baseDirectory: directory.path)
            }
            let ios = JSONValue.object(JSONObject([("app_ids", .object(JSONObject([("im.example.ios", .object(JSONObject([("platform", "apns")])))])))]))
            let parsed = try parse([app("chat", ios)])
            #expect(parsed.apps[0].matrix?.appIDs["im.example.ios"]?.platform == .apns && parsed.apps[0].matrix?.countsOnly == .badge)
            #expect(parsed.apps[0].matrix?.allowedSources == nil)
            do throws(GatewayConfigurationError) {
                _ = try parse([app("chat", ios), app("other", ios)])
                Issue.record("an app_id in two apps was taken")
            } catch {
                #expect(error.member == "/apps/other/matrix/app_ids/im.example.ios" && error.problem.contains("\"chat\"") && error.problem.contains("\"other\""), "\(error)")
            }
            let refusals: [(JSONValue, String)] = [
                (.object(JSONObject([("app_ids", .object(JSONObject([("im.example.web", .object(JSONObject([("platform", "webpush")])))])))])), "/apps/chat/matrix/app_ids/im.example.web/platform"),
                (.object(JSONObject([("app_ids", .object(JSONObject([("im.x", .object(JSONObject([("platform", "apns")])))]))), ("allowed_sources", .array(["10.0.0.0/33"]))])), "/apps/chat/matrix/allowed_sources/0"),
                (.object(JSONObject([("app_ids", .object(JSONObject([("im.x", .object(JSONObject([("platform", "apns")])))]))), ("counts_only", "show")])), "/apps/chat/matrix/counts_only"),
                (.object(JSONObject([("app_ids", .object(JSONObject([])))])), "/apps/chat/matrix/app_ids"),
                (.object(JSONObject([("app_ids", .object(JSONObject([("im.x", .object(JSONObject([("platform", "apns")])))]))), ("format", "full")])), "/apps/chat/matrix/format"),
            ]
            for (matrix, member) in refusals {
                do throws(GatewayConfigurationError) {
                    _ = try parse([app("chat", matrix)])
                    Issue.record("\(member): taken")
                } catch { #expect(error.member == member, "\(error)") }
            }
        }

        @Test func allowedSourcesMatchNetworksOfBothFamilies() throws {
            func address(_ text: String) throws -> [UInt8] { try #require(IPNetwork.address(text), "\(text)") }
            let v4 = try #require(IPNetwork("203.0.113.0/24"))
            let (inside, outside, mapped) = (try address("203.0.113.77"), try address("203.0.114.1"), try address("::ffff:203.0.113.9"))
            #expect(v4.contains(inside) && !v4.contains(outside))
            #expect(v4.contains(mapped), "an IPv4-mapped address is its IPv4 address")
            let v6 = try #require(IPNetwork("2001:db8::/32"))
            let (inside6, outside6) = (try address("2001:db8:0:1::5"), try address("2001:db9::1"))
            #expect(v6.contains(inside6) && !v6.contains(outside6))
            #expect(IPNetwork("10.0.0.1/33") == nil && IPNetwork("1.2.3") == nil && IPNetwork("::1::2") == nil && IPNetwork("256.0.0.1") == nil)
            let loopback = try #require(IPNetwork("::1"))
            let settings = MatrixAppSettings(appIDs: [:], allowedSources: [v4, loopback], countsOnly: .badge)
            #expect(settings.allows(source: "203.0.113.5") && settings.allows(source: "::1") && !settings.allows(source: "127.0.0.1")
                    && !settings.allows(source: "unknown"))
        }
    }
}
