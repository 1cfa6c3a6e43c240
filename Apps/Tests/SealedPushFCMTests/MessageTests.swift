import Foundation
import SealedPushFCM
import SealedPushWire
import Testing

@Suite("FCM message body")
struct MessageTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    let token = "dXk3:APA91bH-example_token.v1"

    func body(envelope: [UInt8] = Array("sealed envelope".utf8), priority: Int = 10, ttl: Int64 = 604_800, expiresIn: TimeInterval = 3600,
              collapseID: String? = "c-1") throws -> JSONObject {
        let bytes = try FCMMessage.body(token: token, envelope: envelope, priority: priority, messageTTL: ttl,
                                        expiresAt: now.addingTimeInterval(expiresIn), now: now, collapseID: collapseID, deliveryID: "dlv-7")
        return try #require(try JSON.parse(bytes).objectValue)
    }

    @Test("Member by member as platforms v1 §2: token, data-only, android priority/ttl/collapse_key")
    func shape() throws {
        let envelope = (0..<300).map { UInt8($0 & 0xFF) }
        let top = try body(envelope: envelope)
        #expect(top.members.map(\.key) == ["message"])
        let message = try #require(top["message"]?.objectValue)
        #expect(message.members.map(\.key) == ["token", "data", "android"])  // no "notification"
        #expect(message["token"] == .string(token))
        let data = try #require(message["data"]?.objectValue)
        #expect(data.members.map(\.key) == ["ENCRYPTED_DATA", "sealedpush"])
        #expect(data["ENCRYPTED_DATA"] == .string(Data(envelope).base64EncodedString()))  // standard base64, with + and /
        #expect(data["sealedpush"] == .string("1"))
        let android = try #require(message["android"]?.objectValue)
        #expect(android == JSONObject([("priority", .string("HIGH")), ("ttl", .string("3600s")), ("collapse_key", .string("c-1"))]))
        // The whole body, as the spec's example would be written for these values.
        let expected = JSONObject([("message", .object(JSONObject([
            ("token", .string(token)),
            ("data", .object(JSONObject([("ENCRYPTED_DATA", .string(Data(envelope).base64EncodedString())), ("sealedpush", .string("1"))]))),
            ("android", .object(JSONObject([("priority", .string("HIGH")), ("ttl", .string("3600s")), ("collapse_key", .string("c-1"))]))),
        ])))])
        #expect(top == expected)
    }

    @Test("Priority 10 → HIGH, 5 → NORMAL, anything else refused")
    func priority() throws {
        #expect(try body(priority: 5)["message"]?.objectValue?["android"]?.objectValue?["priority"] == .string("NORMAL"))
        #expect(try body(priority: 10)["message"]?.objectValue?["android"]?.objectValue?["priority"] == .string("HIGH"))
        #expect(throws: FCMMessageError.invalidPriority(7)) { try body(priority: 7) }
    }

    @Test("ttl: whole seconds left, rounded down; 0s for ttl 0; at most 28 days; expired refused")
    func ttl() throws {
        func ttl(_ messageTTL: Int64, _ expiresIn: TimeInterval) throws -> JSONValue? {
            try body(ttl: messageTTL, expiresIn: expiresIn)["message"]?.objectValue?["android"]?.objectValue?["ttl"]
        }
        #expect(try ttl(604_800, 100.9) == .string("100s"))
        #expect(try ttl(604_800, 0.4) == .string("0s"))
        #expect(try ttl(0, -5) == .string("0s"))  // ttl 0: now or never, whatever the clock says
        #expect(try ttl(0, 0) == .string("0s"))
        #expect(try ttl(60 * 86_400, 60 * 86_400) == .string("2419200s"))
        #expect(throws: FCMMessageError.expired) { try ttl(60, 0) }
        #expect(throws: FCMMessageError.expired) { try ttl(60, -1) }
    }

    @Test("collapse_key is the collapse id, else the delivery id")
    func collapseKey() throws {
        #expect(try body(collapseID: "news")["message"]?.objectValue?["android"]?.objectValue?["collapse_key"] == .string("news"))
        #expect(try body(collapseID: nil)["message"]?.objectValue?["android"]?.objectValue?["collapse_key"] == .string("dlv-7"))
    }

    @Test("The data budget: keys and values summed; exactly 4096 passes, 4097 fails")
    func dataBudget() throws {
        #expect(FCMMessage.dataSize(["a": String(repeating: "x", count: 4095)]) == 4096)
        try FCMMessage.checkDataBudget(["a": String(repeating: "x", count: 4095)])
        #expect(throws: FCMMessageError.dataTooLarge(bytes: 4097, limit: 4096)) {
            try FCMMessage.checkDataBudget(["a": String(repeating: "x", count: 4096)])
        }
        try FCMMessage.checkDataBudget(["ENCRYPTED_DATA": String(repeating: "A", count: 4068), "sealedpush": "1", "k": "xx"])
        // UTF-8 bytes, not characters.
        #expect(FCMMessage.dataSize(["é": "ü"]) == 4)
        // The envelope budget: the largest envelope fits, one byte more does not.
        #expect(FCMMessage.maximumEnvelopeBytes == 3051)
        _ = try body(envelope: [UInt8](repeating: 7, count: FCMMessage.maximumEnvelopeBytes))
        #expect(throws: FCMMessageError.dataTooLarge(bytes: 4097, limit: 4096)) {
            try body(envelope: [UInt8](repeating: 7, count: FCMMessage.maximumEnvelopeBytes + 1))
        }
    }

    @Test("Token syntax: 1–4096 of [A-Za-z0-9_:.-]")
    func tokenSyntax() throws {
        #expect(FCMMessage.isValidToken(token))
        #expect(FCMMessage.isValidToken(String(repeating: "a", count: 4096)))
        #expect(!FCMMessage.isValidToken(String(repeating: "a", count: 4097)))
        #expect(!FCMMessage.isValidToken(""))
        for bad in ["a b", "a/b", "a+b", "a=b", "tök", "a\"b", "a\nb"] { #expect(!FCMMessage.isValidToken(bad), "\(bad)") }
        #expect(throws: FCMMessageError.invalidToken(length: 3)) {
            try FCMMessage.body(token: "a b", envelope: [1], priority: 10, messageTTL: 60, expiresAt: now + 60, now: now, collapseID: nil, deliveryID: "d")
        }
        #expect(!FCMMessageError.invalidToken(length: 3).description.contains("a b"))
    }
}
