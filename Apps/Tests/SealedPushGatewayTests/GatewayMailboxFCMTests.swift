import Foundation
@testable import SealedPushGateway
import SealedPushCrypto
import SealedPushFCM
import SealedPushKeychain
import SealedPushWire
import SealedPushTestSupport
import Testing

/// Mailbox v1 §2 for an Android phone: FCM sees a data-only message whose one data member is the handle, and the
/// handle fetches the envelope the device key opens.
@Suite("Gateway mailbox through FCM", .timeLimit(.minutes(3)))
struct GatewayMailboxFCMTests {
    @Test func fcmSeesOnlyTheHandleAndTheHandleFetchesTheEnvelope() async throws {
        let (section, account, directory) = try GatewayFCMTests.fcmApp()
        defer { try? FileManager.default.removeItem(at: directory) }
        var app = section
        app["mailbox"] = .object(JSONObject([("enabled", true)]))
        let fcm = ScriptedFCM()
        try await withGateway("mailbox-fcm", options: GatewayFCMTests.options(fcm, account: account), extraApp: app) { g in
            let phone = try Phone(in: g.directory, name: "android", token: "")
            let token = "dQw4w9WgXcQ:APA91bH-" + String(repeating: "x", count: 140) + "tail1234"
            let created = try await g.api.call(.PUT, "/v1/apps/chat/devices/pixel", json: GatewayFCMTests.registration(phone, token: token))
            #expect(created.status == 201, "\(created.text)")
            let text = String(repeating: "longer than FCM's 4096 bytes of data. ", count: 200)
            let sent = try await g.send(JSONObject([("user_id", "u-android")]), body: text, extra: JSONObject([("collapse_id", "thread-9")]))
            #expect(sent.status == 202, "\(sent.text)")
            let id = try #require(sent.json["message_id"]?.stringValue)
            try await g.waitForStates(id, ["accepted"])
            let request = try #require(fcm.sent.withLockedValue { $0.first })
            let message = try #require(try JSON.parse(request.body).objectValue?["message"]?.objectValue)
            let data = try #require(message["data"]?.objectValue)
            #expect(data.map(\.key) == ["sealedpush_fetch"])
            #expect(message["android"]?.objectValue?["collapse_key"]?.stringValue == "thread-9")
            #expect(request.body.count < 1024, "the FCM message grows with the message: \(request.body.count) bytes")
            let handle = try #require(data["sealedpush_fetch"]?.stringValue)
            let fetched = try await g.api.call(.POST, "/v1/mailbox/fetch", key: nil, json: .object(JSONObject([("handle", .string(handle))])))
            #expect(fetched.status == 200, "\(fetched.text)")
            let keyPair = try DeviceKeys(store: phone.store).device.activeKeyPair()
            let opened = try MessageOpener(keys: InMemoryKeys([keyPair]))
                .open(encryptedData: try #require(fetched.json["envelope"]?.stringValue), now: Int64(Date().timeIntervalSince1970))
            #expect(opened.body.alert.body == text && opened.rawBody["dlv"]?.stringValue == MailboxHandle(handle)?.deliveryID)
        }
    }
}
