import Foundation
import Logging
import NIOConcurrencyHelpers
@testable import SealedPushGateway
import SealedPushCrypto
import SealedPushFCM
import SealedPushWire
import SealedPushTestSupport
import Testing

/// FCM as a transport stand-in: the token endpoint answers a token; `messages:send` records each request and
/// answers from a script per registration token (then `200 {"name"}`).
final class ScriptedFCM: FCMTransport {
    let sent = NIOLockedValueBox<[FCMHTTPRequest]>([])
    let exchanges = NIOLockedValueBox(0)
    let script = NIOLockedValueBox<[String: [FCMHTTPResponse]]>([:])

    func post(_ request: FCMHTTPRequest) async throws(FCMTransportError) -> FCMHTTPResponse {
        if request.url.hasSuffix("/token") {
            exchanges.withLockedValue { $0 += 1 }
            return FCMHTTPResponse(status: 200, body: Array(#"{"access_token":"ya29.test-token","expires_in":3600,"token_type":"Bearer"}"#.utf8))
        }
        sent.withLockedValue { $0.append(request) }
        guard case let .object(root)? = try? JSON.parse(request.body), case let .object(message)? = root["message"],
              let token = message["token"]?.stringValue else { return FCMHTTPResponse(status: 400) }
        if let next = script.withLockedValue({ $0[token]?.isEmpty == false ? $0[token]!.removeFirst() : nil }) { return next }
        return FCMHTTPResponse(status: 200, body: Array(#"{"name":"projects/chat-test/messages/0:1700000000000000%abc"}"#.utf8))
    }
}

/// Android devices through FCM (platforms v1 §1, §2, §4): registration, the data-only message of §2 compared
/// member by member, the envelope the device key opens, and FCM's answers through the one state machine.
@Suite("Gateway platforms: FCM", .timeLimit(.minutes(3)))
struct GatewayFCMTests {
    /// A service account file (0600) and the app's fcm section naming it.
    static func fcmApp() throws -> (JSONObject, FCMServiceAccount, URL) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("fcm-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let path = directory.appendingPathComponent("sa.json")
        let (account, json) = try FCMServiceAccount.generate(project: "chat-test", tokenURI: "https://oauth2.example.test/token")
        try json.withUnsafeBytes { try Data($0).write(to: path) }
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path.path)
        // The account's token_uri is not Google's, so the section names it explicitly (#44 E).
        return (JSONObject([("fcm", .object(JSONObject([("service_account", .string(path.path)),
                                                          ("token_url", .string("https://oauth2.example.test/token"))])))]), account, directory)
    }

    static func options(_ fcm: ScriptedFCM, account: FCMServiceAccount) -> GatewayOptions {
        var options = GatewayOptions()
        options.makePlatformSender = { _, platform, _ in
            guard platform == .fcm else { return nil }
            let configuration = try FCMClientConfiguration(serviceAccount: account, tokenURL: account.tokenURI)
            return FCMPlatformSender(client: FCMClient(configuration: configuration, serviceAccount: account, transport: fcm))
        }
        return options
    }

    static func registration(_ phone: Phone, token: String) -> JSONValue {
        .object(JSONObject([("user_id", "u-android"), ("platform", "fcm"), ("fcm_token", .string(token)), ("key_record", .object(phone.record))]))
    }

    @Test func anAndroidPhoneGetsTheDataOnlyMessageOfSection2() async throws {
        try await Self.androidDelivery(database: "sqlite:gateway.db")
    }

    /// The Android scene on `database` (SQLite here; PostgreSQL in `GatewayPlatformPostgresTests`).
    static func androidDelivery(database: String) async throws {
        let (section, account, directory) = try Self.fcmApp()
        defer { try? FileManager.default.removeItem(at: directory) }
        let fcm = ScriptedFCM()
        try await withGateway("fcm-delivery", options: Self.options(fcm, account: account), extraApp: section, database: database) { g in
            let phone = try Phone(in: g.directory, name: "android", token: "")
            let token = "dQw4w9WgXcQ:APA91bH-" + String(repeating: "x", count: 140) + "tail1234"
            let created = try await g.api.call(.PUT, "/v1/apps/chat/devices/pixel", json: Self.registration(phone, token: token))
            #expect(created.status == 201, "\(created.text)")
            #expect(created.json["platform"]?.stringValue == "fcm" && created.json["fcm_token_suffix"]?.stringValue == "tail1234")
            #expect(!created.text.contains("APA91bH") && created.json["environment"] == nil)
            // Bad tokens and another platform's members are refused, naming the member.
            let bad = try await g.api.call(.PUT, "/v1/apps/chat/devices/pixel-2", json: Self.registration(phone, token: "has space"))
            #expect(bad.status == 400 && bad.json["field"]?.stringValue == "/fcm_token")
            guard case var .object(withEnv) = Self.registration(phone, token: token) else { return }
            withEnv["environment"] = "production"
            let mixed = try await g.api.call(.PUT, "/v1/apps/chat/devices/pixel-2", json: .object(withEnv))
            #expect(mixed.status == 400 && mixed.json["field"]?.stringValue == "/environment")

            let sent = try await g.send(JSONObject([("user_id", "u-android")]), body: "the eagle has landed",
                                        extra: JSONObject([("ttl", .int(600)), ("priority", .int(5))]))
            #expect(sent.status == 202, "\(sent.text)")
            let id = try #require(sent.json["message_id"]?.stringValue)
            let message = try await g.waitForStates(id, ["accepted"])
            let delivery = try #require(message["deliveries"]?.arrayValue?.first?.objectValue)
            #expect(delivery["platform"]?.stringValue == "fcm" && delivery["platform_status"] == .int(200) && delivery["apns_status"] == .null)
            #expect(delivery["platform_id"]?.stringValue == "projects/chat-test/messages/0:1700000000000000%abc")

            let request = try #require(fcm.sent.withLockedValue { $0.first })
            #expect(request.url == "https://fcm.googleapis.com/v1/projects/chat-test/messages:send")
            #expect(request.headers["authorization"] == "Bearer ya29.test-token")
            guard case let .object(root)? = try? JSON.parse(request.body), root.count == 1, case let .object(m)? = root["message"] else {
                Issue.record("the body is not {\"message\": {…}}")
                return
            }
            #expect(m.map(\.key).sorted() == ["android", "data", "token"], "no notification block: \(m.map(\.key))")
            #expect(m["token"]?.stringValue == token)
            let data = try #require(m["data"]?.objectValue)
            #expect(data.map(\.key).sorted() == ["ENCRYPTED_DATA", "sealedpush"] && data["sealedpush"] == .string("1"))
            let android = try #require(m["android"]?.objectValue)
            #expect(android["priority"] == .string("NORMAL") && android["collapse_key"]?.stringValue == delivery["delivery_id"]?.stringValue)
            let ttl = try #require(android["ttl"]?.stringValue)
            #expect(ttl.hasSuffix("s") && (590...600).contains(Int(ttl.dropLast()) ?? -1), "ttl \(ttl)")
            // The same sealed envelope an iPhone gets: the phone's device key opens it.
            let envelope = try #require(data["ENCRYPTED_DATA"]?.stringValue)
            let asAPNs = JSON.serialize(.object(JSONObject([
                ("aps", .object(JSONObject([("alert", .object(JSONObject([("body", "(Encrypted)")]))), ("mutable-content", .int(1))]))),
                ("ENCRYPTED_DATA", .string(envelope)),
            ])))
            let shown = await phone.open(asAPNs, transport: g.receipts)
            #expect(shown.outcome == .decrypted && shown.notification?.body == "the eagle has landed", "\(shown)")

            // UNREGISTERED ends the delivery and the device; the next send skips it.
            fcm.script.withLockedValue { $0[token] = [FCMHTTPResponse(status: 404, body: Array(#"{"error":{"code":404,"status":"NOT_FOUND","message":"Requested entity was not found.","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"UNREGISTERED"}]}}"#.utf8))] }
            let second = try await g.send(JSONObject([("user_id", "u-android")]))
            let gone = try await g.waitForStates(try #require(second.json["message_id"]?.stringValue), ["unregistered"])
            #expect(gone["deliveries"]?.arrayValue?.first?.objectValue?["reason"]?.stringValue == "UNREGISTERED")
            #expect(try await g.api.call(.GET, "/v1/apps/chat/devices/pixel").json["state"]?.stringValue == "unregistered")
            let third = try await g.send(JSONObject([("user_id", "u-android")]))
            #expect(third.json["skipped"]?.arrayValue?.first?.objectValue?["reason"]?.stringValue == "unregistered")
            #expect(fcm.exchanges.withLockedValue { $0 } == 1, "one access token for every send")
        }
    }

    /// FCM's other answers (§2's table): 400 other than the token is `rejected`; 503 with Retry-After is retried no
    /// sooner; 401 twice pauses FCM for the app (APNs still sends).
    @Test func fcmAnswersGoThroughTheOneStateMachine() async throws {
        let (section, account, directory) = try Self.fcmApp()
        defer { try? FileManager.default.removeItem(at: directory) }
        let fcm = ScriptedFCM()
        try await withGateway("fcm-answers", options: Self.options(fcm, account: account), extraApp: section) { g in
            let phone = try Phone(in: g.directory, name: "android", token: "")
            let token = "tok-rejected"
            #expect(try await g.api.call(.PUT, "/v1/apps/chat/devices/a1", json: Self.registration(phone, token: token)).status == 201)
            fcm.script.withLockedValue { $0[token] = [FCMHTTPResponse(status: 400, body: Array(#"{"error":{"code":400,"status":"INVALID_ARGUMENT","message":"Invalid value at 'message.android.ttl'","details":[{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"message.android.ttl","description":"bad"}]}]}}"#.utf8))] }
            let first = try await g.send(JSONObject([("device_ids", .array(["a1"]))]))
            let rejected = try await g.waitForStates(try #require(first.json["message_id"]?.stringValue), ["rejected"])
            #expect(rejected["deliveries"]?.arrayValue?.first?.objectValue?["reason"]?.stringValue == "INVALID_ARGUMENT")
            #expect(try await g.api.call(.GET, "/v1/apps/chat/devices/a1").json["state"]?.stringValue == "active")

            let unauthorized = FCMHTTPResponse(status: 401, body: Array(#"{"error":{"code":401,"status":"UNAUTHENTICATED","message":"no"}}"#.utf8))
            fcm.script.withLockedValue { $0[token] = [unauthorized, unauthorized] }
            let second = try await g.send(JSONObject([("device_ids", .array(["a1"]))]))
            #expect(second.status == 202)
            try await waitUntil("fcm to be paused", within: .seconds(30)) {
                let ready = try await g.admin.call(.GET, "/readyz", key: nil).json
                return ready["apps"]?.arrayValue?.contains { $0.objectValue?["reason"]?.stringValue?.hasPrefix("fcm: ") == true } == true
            }
            #expect(fcm.exchanges.withLockedValue { $0 } == 2, "the 401 renewed the access token once")
            let iphone = try Phone(in: g.directory, name: "iphone", token: hexToken(3))
            #expect(try await g.register(iphone, device: "iphone", user: "u-ios").status == 201)
            let toPhone = try await g.send(JSONObject([("user_id", "u-ios")]))
            try await g.waitForStates(try #require(toPhone.json["message_id"]?.stringValue), ["accepted", "delivered"])
        }
    }

    /// End to end over loopback: the gateway's real FCM client (its service account, an RS256 assertion, a token
    /// from the token endpoint) delivers to `sealedpush-server fcm serve`, which checks the message as FCM would and
    /// hands it to its simulated Android device; the device opens it and posts its receipt: `delivered`, with FCM's
    /// message `name` as `platform_id`.
    @Test func theGatewayDeliversThroughTheLocalFCM() async throws {
        let dir = try makeScratchDirectory("gateway-fcm-e2e")
        defer { try? FileManager.default.removeItem(at: dir) }
        let keychain = dir.appendingPathComponent("android").path
        let generated = try ChildProcess.sealedpush(["keys", "generate", "--keychain", keychain])
        try #require(generated.status == 0, "keys generate: \(generated.stderr)")
        let record = try #require(try JSON.parse(generated.stdout).objectValue)
        let token = "e2e-device:APA91bH-" + String(repeating: "t", count: 40)
        let capturePath = dir.appendingPathComponent("captured.jsonl").path
        let fcm = try await LocalFCMServe.start(in: dir, project: "chat-e2e", arguments: ["--device", "\(token)=\(keychain)", "--capture", capturePath])
        defer { fcm.stop() }
        let serve = fcm.process
        try await withGateway("fcm-e2e", extraApp: fcm.section) { g in
            let registered = try await g.api.call(.PUT, "/v1/apps/chat/devices/pixel", json: .object(JSONObject([
                ("user_id", "u-android"), ("platform", "fcm"), ("fcm_token", .string(token)), ("key_record", .object(record)),
            ])))
            #expect(registered.status == 201, "\(registered.text)")
            let sent = try await g.send(JSONObject([("user_id", "u-android")]), body: "the eagle has landed")
            #expect(sent.status == 202, "\(sent.text)")
            let id = try #require(sent.json["message_id"]?.stringValue)
            let line = try #require(try await offPool { serve.nextLine(within: .seconds(60)) }, "the Android device printed no outcome: \(serve.stderrText)")
            let outcome = try #require(try JSON.parse(Array(line.utf8)).objectValue)
            #expect(outcome["outcome"]?.stringValue == "decrypted" && !line.contains(token), "\(line)")
            // The device's receipt can overtake the push service's answer: wait for both to be recorded.
            let message = try await g.waitForStates(id, ["delivered"]) { ($0["platform_status"]?.intValue ?? 0) != 0 }
            let delivery = try #require(message["deliveries"]?.arrayValue?.first?.objectValue)
            #expect(delivery["platform"]?.stringValue == "fcm" && delivery["platform_status"] == .int(200))
            #expect(delivery["platform_id"]?.stringValue?.hasPrefix("projects/chat-e2e/messages/") == true, "\(delivery)")
        }
        // #44 pilot 4: `--capture FILE` wrote the messages:send request as received, one JSON line (0600).
        let captured = try String(contentsOfFile: capturePath, encoding: .utf8).split(separator: "\n")
        try #require(captured.count == 1, "\(captured)")
        let line = try #require(try JSON.parse(Array(captured[0].utf8)).objectValue)
        #expect(line["path"]?.stringValue == "/v1/projects/chat-e2e/messages:send")
        let body = try #require(line["body"]?.stringValue.flatMap { try? JSON.parse(Array($0.utf8)).objectValue })
        let message = try #require(body["message"]?.objectValue)
        #expect(message["token"]?.stringValue == token && message["data"]?.objectValue?["ENCRYPTED_DATA"] != nil && message["notification"] == nil)
        let mode = try FileManager.default.attributesOfItem(atPath: capturePath)[.posixPermissions] as? Int
        #expect(mode.map { $0 & 0o077 } == 0, "the capture holds bearer tokens: owner-only")
    }
}
