import Testing
import SealedPushCrypto
import SealedPushWire

/// The body member `receipt` (receipts v1 §1) and the receipt/report bodies (§2, §3).
@Suite("Receipt wire format")
struct ReceiptWireTests {
    let kid = KeyID(hex: "e2a0cdd02cd5f429")!

    func body(receipt: JSONValue) -> JSONObject {
        JSONObject([("kid", .string(kid.hex)), ("id", .string("m1")), ("iat", .int(1)), ("alert", .object(JSONObject([("body", .string("x"))]))),
                    ("receipt", receipt)])
    }

    func token(_ n: Int) -> String { Base64.encodeURLSafeNoPadding([UInt8](repeating: 0xfb, count: n)) }

    @Test("a valid receipt member parses and round-trips through jsonObject and Codable-free serialization")
    func valid() throws {
        for url in ["https://push.example.com/r", "http://localhost:8089/r", "http://127.1.2.3/r?x=1", "http://[::1]:80/r", "HTTPS://Example.com"] {
            for n in [16, 32, 64] {
                let parsed = try MessageBody(validating: body(receipt: .object(ReceiptRequest(url: url, token: token(n)).jsonObject)))
                #expect(parsed.receipt == ReceiptRequest(url: url, token: token(n)))
                #expect(try MessageBody(validating: parsed.jsonObject) == parsed)
            }
        }
    }

    @Test("a malformed receipt member is malformedMessage, and the error never quotes the token")
    func malformed() {
        let good = token(16)
        let cases: [JSONValue] = [
            .string("https://push.example.com/r"), .array([]), .null,
            .object(JSONObject([("token", .string(good))])),
            .object(JSONObject([("url", .string("https://push.example.com/r"))])),
            .object(JSONObject([("url", .int(1)), ("token", .string(good))])),
            .object(JSONObject([("url", .string("https://push.example.com/r")), ("token", .int(1))])),
            .object(JSONObject([("url", .string("http://example.com/r")), ("token", .string(good))])),
            .object(JSONObject([("url", .string("http://128.0.0.1/r")), ("token", .string(good))])),
            .object(JSONObject([("url", .string("ftp://localhost/r")), ("token", .string(good))])),
            .object(JSONObject([("url", .string("https://push.example.com/r#f")), ("token", .string(good))])),
            .object(JSONObject([("url", .string("https://user@push.example.com/r")), ("token", .string(good))])),
            .object(JSONObject([("url", .string("https:///r")), ("token", .string(good))])),
            .object(JSONObject([("url", .string("https://push.example.com/ r")), ("token", .string(good))])),
            .object(JSONObject([("url", .string("https://push.example.com/" + String(repeating: "a", count: 2030))), ("token", .string(good))])),
            .object(JSONObject([("url", .string("https://push.example.com/r")), ("token", .string(token(15)))])),
            .object(JSONObject([("url", .string("https://push.example.com/r")), ("token", .string(token(65)))])),
            .object(JSONObject([("url", .string("https://push.example.com/r")), ("token", .string(Base64.encode([UInt8](repeating: 0xfb, count: 16))))])),
            .object(JSONObject([("url", .string("https://push.example.com/r")), ("token", .string(good + "="))])),
        ]
        for (index, value) in cases.enumerated() {
            #expect(throws: OpenFailure.self, "case \(index)") { try MessageBody(validating: body(receipt: value)) }
            do { _ = try MessageBody(validating: body(receipt: value)) } catch {
                #expect(error.reason == .malformedMessage, "case \(index)")
                #expect(!error.detail.contains(good), "case \(index)")
            }
        }
    }

    @Test("receipt and report bodies: exactly the §2 and §3 members; parse refuses anything else")
    func messages() {
        let t = token(16)
        let delivered = ReceiptMessage.delivered(id: "m1", token: t, at: 5, attachments: nil)
        #expect(String(decoding: JSON.serialize(.object(delivered.jsonObject())), as: UTF8.self)
                == #"{"v":1,"type":"delivered","id":"m1","token":"\#(t)","at":5}"#)
        let failed = ReceiptMessage.failed(reason: .unknownKey, kid: nil, at: 6, count: 2)
        #expect(String(decoding: JSON.serialize(.object(failed.jsonObject(dropped: 3))), as: UTF8.self)
                == #"{"v":1,"type":"failed","reason":"unknownKey","kid":null,"at":6,"count":2,"dropped":3}"#)
        #expect(ReceiptMessage.parse(JSON.serialize(.object(delivered.jsonObject())))?.message == delivered)
        #expect(ReceiptMessage.parse(JSON.serialize(.object(failed.jsonObject(dropped: 3))))?.dropped == 3)
        var extra = delivered.jsonObject()
        extra["title"] = .string("secret")
        #expect(ReceiptMessage.parse(JSON.serialize(.object(extra))) == nil)
        #expect(ReceiptMessage.parse(JSON.serialize(.object(ReceiptMessage.failed(reason: .replayed, kid: kid, at: 1, count: 1).jsonObject()))) == nil)
        #expect(ReceiptMessage.parse(JSON.serialize(.object(ReceiptMessage.failed(reason: .notEncrypted, kid: kid, at: 1, count: 1).jsonObject()))) == nil)
        var zero = failed.jsonObject()
        zero["count"] = .int(0)
        #expect(ReceiptMessage.parse(JSON.serialize(.object(zero))) == nil)
        #expect(ReceiptMessage.parse([UInt8](repeating: 0x20, count: 4097)) == nil)
    }

    @Test("#22: a collector accepts a body padded with trailing JSON whitespace up to 4096 bytes, and refuses one over it")
    func paddedBodiesParse() throws {
        let message = ReceiptMessage.delivered(id: "m1", token: token(16), at: 1, attachments: nil)
        let bare = JSON.serialize(.object(message.jsonObject(dropped: 3)))
        for pad in [[UInt8](repeating: 0x20, count: 512 - bare.count), [0x0a, 0x09, 0x0d, 0x20], [UInt8](repeating: 0x20, count: 4096 - bare.count)] {
            let parsed = try #require(ReceiptMessage.parse(bare + pad))
            #expect(parsed.message == message && parsed.dropped == 3)
        }
        #expect(ReceiptMessage.parse(bare + [UInt8](repeating: 0x20, count: 4097 - bare.count)) == nil)
    }
}
