import Foundation
import SealedPushDevice
import SealedPushGateway
import SealedPushKeychain
import SealedPushWire
import SealedPushTestSupport
import Testing

extension GatewaySuites {
    /// `"reveal": true` on `POST /messages` and `reveal_key_id` on the device (reveal v1 §8).
    @Suite("Gateway: reveal messages", .serialized, .timeLimit(.minutes(10)))
    struct GatewayRevealTests {
        @Test("a reveal message reaches the phone with a reveal key (held, then revealed on a press and hold); the other is skipped no_reveal_key")
        func revealMessageToAUserWithAndWithoutRevealKey() async throws {
            try await withGateway("reveal") { g in
                let withKey = try Phone(in: g.directory, name: "r", token: hexToken(0x51), reveal: true)
                let without = try Phone(in: g.directory, name: "n", token: hexToken(0x52))
                let registered = try await g.register(withKey, device: "phone-r", user: "u-7")
                #expect(registered.status == 201, "\(registered.text)")
                let revealID = try #require(withKey.record["reveal"]?.objectValue?["key_id"]?.stringValue)
                #expect(registered.json["reveal_key_id"] == .string(revealID))
                let plain = try await g.register(without, device: "phone-n", user: "u-7")
                #expect(plain.json["reveal_key_id"] == .null)
                let listed = try await g.api.call(.GET, "/v1/apps/chat/users/u-7/devices")
                let byID = (listed.json["devices"]?.arrayValue ?? []).compactMap(\.objectValue)
                    .reduce(into: [String: JSONValue]()) { $0[$1["device_id"]?.stringValue ?? ""] = $1["reveal_key_id"] }
                #expect(byID == ["phone-r": .string(revealID), "phone-n": .null])

                let sent = try await g.send(JSONObject([("user_id", "u-7")]), body: "the vault code is 0451",
                                            extra: JSONObject([("title", "Ana"), ("reveal", true)]))
                #expect(sent.status == 202, "\(sent.text)")
                #expect(sent.json["deliveries"]?.arrayValue?.compactMap { $0.objectValue?["device_id"]?.stringValue } == ["phone-r"])
                #expect(sent.json["skipped"] == .array([.object(JSONObject([("device_id", "phone-n"), ("reason", "no_reveal_key")]))]))
                let id = try #require(sent.json["message_id"]?.stringValue)
                try await g.waitForStates(id, ["accepted"])
                let push = try #require(g.apns.pushes.first { $0.deviceToken == withKey.token })
                #expect(String(decoding: push.payload, as: UTF8.self).range(of: "0451") == nil, "Apple sees no plaintext")
                let shown = await withKey.open(push.payload, transport: g.receipts)
                #expect(shown.outcome == .held, "\(shown)")
                #expect(shown.notification?.body == "Press and hold to read")
                let requestID = try #require(shown.requestID)
                let stored = try NotificationCenterStore(store: withKey.store).entries()
                #expect(!stored.isEmpty && stored.allSatisfy { !String(decoding: JSON.serialize(.object($0.jsonObject)), as: UTF8.self).contains("0451") })
                // The held message sent its delivered receipt (or queued it, under load: flushed here): delivered, not yet revealed.
                _ = await SimulatedDevice(store: withKey.store).flushReceipts(transport: g.receipts)
                try await g.waitForStates(id, ["delivered"])
                var message = try await g.api.call(.GET, "/v1/apps/chat/messages/\(id)")
                #expect(message.json["deliveries"]?.arrayValue?.first?.objectValue?["revealed_at"] == .null)
                // Pressed and held: the revealed receipt sets revealed_at once and writes delivery.revealed (reveal v1 §6, §8).
                let device = SimulatedDevice(store: withKey.store)
                let view = try await device.expand(requestID: requestID, receipts: device.receiptCourier(transport: g.receipts))
                #expect(view.outcome == .revealed && view.body == "the vault code is 0451" && view.title == "Ana")
                // Queued instead of sent when its 2-second bound passed first (a loaded sanitizer run): flushed here.
                _ = await device.flushReceipts(transport: g.receipts)
                message = try await g.api.call(.GET, "/v1/apps/chat/messages/\(id)")
                let delivery = try #require(message.json["deliveries"]?.arrayValue?.first?.objectValue)
                #expect(delivery["state"] == "delivered" && delivery["revealed_at"] != .null, "\(message.text)")
                _ = try await device.expand(requestID: requestID, receipts: device.receiptCourier(transport: g.receipts))
                _ = await device.flushReceipts(transport: g.receipts)
                let events = try await g.api.call(.GET, "/v1/apps/chat/events?limit=100")
                let types = (events.json["events"]?.arrayValue ?? []).compactMap { $0.objectValue?["type"]?.stringValue }
                #expect(types.filter { $0 == "delivery.revealed" }.count == 1, "\(types)")

                // Without "reveal" both phones get the message; "reveal" must be a boolean.
                let ordinary = try await g.send(JSONObject([("user_id", "u-7")]))
                #expect(ordinary.json["deliveries"]?.arrayValue?.count == 2 && ordinary.json["skipped"] == .array([]))
                let bad = try await g.send(JSONObject([("user_id", "u-7")]), extra: JSONObject([("reveal", "yes")]))
                #expect(bad.status == 400 && bad.code == "invalid_field", "\(bad.text)")
                // Too large for a reveal message: 413 naming how much text fits.
                let large = try await g.send(JSONObject([("device_ids", .array(["phone-r"]))]), body: String(repeating: "a", count: 3800),
                                             extra: JSONObject([("reveal", true)]))
                #expect(large.status == 413 && large.text.contains("at most"), "\(large.text)")
            }
        }
    }
}
