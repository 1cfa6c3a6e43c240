import Foundation
@testable import SealedPushGateway
import SealedPushFCM
import SealedPushWire
import Testing

extension GatewaySuites {
    /// What each push service sees of a mailbox message (mailbox v1 §2): the handle and nothing else.
    @Suite("Gateway mailbox pushes")
    struct GatewayMailboxPushTests {
        @Test func theAPNsPushHoldsOnlyThePlaceholderAndTheHandle() throws {
            let handle = try #require(MailboxHandle.make(deliveryID: "d_0123456789ab"))
            let payload = MailboxPush.apnsPayload(handle: handle, title: "Secret Message!")
            let root = try #require(try JSON.parse(payload).objectValue)
            #expect(Set(root.map(\.key)) == ["aps", "SEALEDPUSH_FETCH"])
            #expect(root["SEALEDPUSH_FETCH"]?.stringValue == handle.description)
            let aps = try #require(root["aps"]?.objectValue)
            #expect(Set(aps.map(\.key)) == ["alert", "mutable-content"])
            #expect(aps["alert"]?.objectValue?["title"]?.stringValue == "Secret Message!")
            #expect(aps["alert"]?.objectValue?["body"]?.stringValue == "(Encrypted)")
            // Without a placeholder title, no title member.
            let untitled = try #require(try JSON.parse(MailboxPush.apnsPayload(handle: handle, title: nil)).objectValue)
            #expect(untitled["aps"]?.objectValue?["alert"]?.objectValue?["title"] == nil)
        }

        @Test func theFCMMessageCarriesTheHandleAsItsOnlyDataAndKeepsItsAndroidSettings() throws {
            let handle = try #require(MailboxHandle.make(deliveryID: "d_0123456789ab"))
            let stored = Array(handle.description.utf8)
            #expect(MailboxPush.isHandle(stored))
            #expect(!MailboxPush.isHandle([1, 0x2e, 3]))  // an envelope starts with its version byte
            #expect(!MailboxPush.isHandle([]))
            let now = Date(timeIntervalSince1970: 1_795_000_000)
            let made = try FCMMessage.body(token: String(repeating: "t", count: 152), envelope: stored, priority: 10, messageTTL: 1,
                                           expiresAt: now.addingTimeInterval(3600), now: now, collapseID: "c-1", deliveryID: "d_0123456789ab")
            let body = try #require(MailboxPush.fcmBody(replacingDataOf: made, handle: handle.description))
            let message = try #require(try JSON.parse(body).objectValue?["message"]?.objectValue)
            #expect(message["data"] == .object(JSONObject([("sealedpush_fetch", .string(handle.description))])))
            let android = try #require(message["android"]?.objectValue)
            #expect(android["collapse_key"]?.stringValue == "c-1" && android["priority"]?.stringValue == "HIGH")
            #expect(MailboxPush.fcmBody(replacingDataOf: Array("nope".utf8), handle: handle.description) == nil)
        }

        @Test func theWebPushPlaintextIsTheHandleAlone() throws {
            let handle = try #require(MailboxHandle.make(deliveryID: "d_1"))
            let plaintext = try #require(try JSON.parse(MailboxPush.webPushPlaintext(handle: handle)).objectValue)
            #expect(plaintext == JSONObject([("sealedpush_fetch", .string(handle.description))]))
        }
    }
}
