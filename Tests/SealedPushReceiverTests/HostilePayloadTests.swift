import Testing
import Foundation
import SealedPushCrypto
import SealedPushWire
import SealedPushDevice
import SealedPushReceiver
import SealedPushTestSupport

// A catalog of hostile APNs payloads delivered to the device simulator: each states the exact
// outcome and reason of shared/spec/device-outcomes.md, and no fallback may show any plaintext.
// Sealed hostile bodies are built here, at test time, by sealing a hand-made padded inner message
// to a device key generated at test time.

/// Text that stands for the secret: it must never appear in a refusal or a fallback.
private let canary = "PLAINTEXT-CANARY-4be1d2"

private struct PayloadRig: Sendable {
    static let shared = PayloadRig()

    let device = BoxKeyPair.generate()
    let now: Int64 = 1_800_000_000
    let placeholderTitle = "Secret Message!"

    var kid: String { device.keyID.hex }

    func simulator() -> DeviceSimulator {
        let keys = InMemoryKeys([device])
        let now = self.now
        return DeviceSimulator(options: .init(timeLimit: .seconds(20))) {
            SecretMessageExtension(configuration: .init(keys: keys, clock: .fixed(unixSeconds: now)))
        }
    }

    /// A body as raw JSON text: kid, id, iat and an alert holding the canary, with `changes` applied
    /// (a `nil` value removes the member, an unknown key is appended) and `extra` raw text at the end.
    func body(_ changes: [(String, String?)] = [], extra: String = "") -> [UInt8] {
        var members: [(String, String)] = [
            ("kid", "\"\(kid)\""), ("id", "\"m-1\""), ("iat", "\(now)"),
            ("alert", #"{"title":"Agent K","body":"\#(canary)"}"#),
        ]
        for (key, value) in changes {
            if let index = members.firstIndex(where: { $0.0 == key }) {
                if let value { members[index].1 = value } else { members.remove(at: index) }
            } else if let value {
                members.append((key, value))
            }
        }
        return Array(("{" + members.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + extra + "}").utf8)
    }

    /// `ENCRYPTED_DATA` for `body` framed by hand (unsigned), padded to inner + 1 and sealed.
    func encryptedData(body: [UInt8]) throws -> String {
        let inner = [0x00, UInt8(body.count >> 8), UInt8(body.count & 0xff)] + body
        let padded = try ISO7816Padding.pad(SecureBytes(inner), to: inner.count + 1)
        return Envelope(keyID: device.keyID, sealedBox: try SealedBox.seal(padded, to: device.publicKey)).base64
    }

    /// The default placeholder payload around a sealed `body`.
    func payload(body: [UInt8]) throws -> [UInt8] {
        TestPayloads.wrap(encryptedData: try encryptedData(body: body), title: placeholderTitle)
    }

    /// A payload as raw text around `ENCRYPTED_DATA` (written raw, so it can be any JSON value).
    func raw(aps: String = #"{"alert":{"title":"Secret Message!","body":"(Encrypted)"},"mutable-content":1}"#,
             encryptedData: String?) -> [UInt8] {
        var text = #"{"aps":\#(aps)"#
        if let encryptedData { text += #","ENCRYPTED_DATA":\#(encryptedData)"# }
        return Array((text + "}").utf8)
    }

    /// A payload whose ENCRYPTED_DATA holds the first `count` bytes of a real envelope.
    func truncatedEnvelope(_ count: Int) throws -> [UInt8] {
        let full = try Base64.decode(try encryptedData(body: body()))
        return TestPayloads.wrap(encryptedData: Base64.encode(full.prefix(count)), title: placeholderTitle)
    }

    /// `bytes` (a JSON object) grown to exactly `size` bytes with a custom string member.
    func grow(_ bytes: [UInt8], to size: Int) -> [UInt8] {
        let filler = size - bytes.count - #","pad":"""#.utf8.count
        precondition(filler >= 0, "the payload is already larger than \(size) bytes")
        return Array(bytes.dropLast()) + Array(#","pad":""#.utf8) + Array(repeating: UInt8(ascii: "x"), count: filler)
            + Array("\"}".utf8)
    }
}

private struct HostilePayload: Sendable, CustomTestStringConvertible {
    let name: String
    let outcome: DeliveryResult.Outcome
    let reason: ReasonCode?
    let make: @Sendable (PayloadRig) throws -> [UInt8]
    var testDescription: String { "\(name) → \(outcome.rawValue)/\(reason?.rawValue ?? "-")" }

    init(_ name: String, _ outcome: DeliveryResult.Outcome, _ reason: ReasonCode?, _ make: @escaping @Sendable (PayloadRig) throws -> [UInt8]) {
        self.name = name
        self.outcome = outcome
        self.reason = reason
        self.make = make
    }
}

private let int64Max = "9223372036854775807"
private let int64Min = "-9223372036854775808"
private let tenThousandDeep = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)

private let hostilePayloads: [HostilePayload] = [
    // The control case.
    .init("valid sealed payload", .decrypted, nil) { r in try r.payload(body: r.body()) },
    // Not a UTF-8 JSON object with an aps object: rejected/invalidPayload.
    .init("empty input", .rejected, .invalidPayload) { _ in [] },
    .init("whitespace only", .rejected, .invalidPayload) { _ in Array(" \r\n\t".utf8) },
    .init("byte order mark", .rejected, .invalidPayload) { r in [0xef, 0xbb, 0xbf] + (try r.payload(body: r.body())) },
    .init("NUL byte after the object", .rejected, .invalidPayload) { r in try r.payload(body: r.body()) + [0x00] },
    .init("raw NUL in the alert", .rejected, .invalidPayload) { r in
        r.raw(aps: "{\"alert\":\"a\u{0}b\",\"mutable-content\":1}", encryptedData: "\"AQ==\"")
    },
    .init("invalid UTF-8 in the alert", .rejected, .invalidPayload) { r in
        Array(#"{"aps":{"alert":""#.utf8) + [0xff, 0xfe] + Array(#"","mutable-content":1}}"#.utf8)
    },
    .init("overlong UTF-8 in the alert", .rejected, .invalidPayload) { r in
        Array(#"{"aps":{"alert":""#.utf8) + [0xc1, 0x81] + Array(#"","mutable-content":1}}"#.utf8)
    },
    .init("UTF-8-encoded surrogate in a key", .rejected, .invalidPayload) { r in
        Array(#"{"aps":{"alert":"x","mutable-content":1},""#.utf8) + [0xed, 0xb0, 0x80] + Array(#"":1}"#.utf8)
    },
    .init("lone surrogate escape in the alert", .rejected, .invalidPayload) { r in
        r.raw(aps: #"{"alert":"\udbff","mutable-content":1}"#, encryptedData: nil)
    },
    .init("duplicate aps", .rejected, .invalidPayload) { r in
        Array(#"{"aps":{"alert":"x","mutable-content":1},"aps":{"alert":"y","mutable-content":1}}"#.utf8)
    },
    .init("duplicate ENCRYPTED_DATA", .rejected, .invalidPayload) { r in
        let valid = try r.encryptedData(body: r.body())
        return r.raw(encryptedData: "\"\(valid)\",\"ENCRYPTED_DATA\":\"\(valid)\"")
    },
    .init("duplicate mutable-content", .rejected, .invalidPayload) { r in
        r.raw(aps: #"{"alert":"x","mutable-content":0,"mutable-content":1}"#, encryptedData: nil)
    },
    .init("10 000 nested arrays in a custom key", .rejected, .invalidPayload) { r in
        r.raw(encryptedData: "\"AQ==\",\"deep\":\(tenThousandDeep)")
    },
    .init("top-level array", .rejected, .invalidPayload) { _ in Array(#"[{"aps":{"alert":"x","mutable-content":1}}]"#.utf8) },
    .init("aps is a string", .rejected, .invalidPayload) { r in r.raw(aps: #""alert""#, encryptedData: "\"AQ==\"") },
    .init("aps is null", .rejected, .invalidPayload) { r in r.raw(aps: "null", encryptedData: "\"AQ==\"") },
    .init("no aps", .rejected, .invalidPayload) { _ in Array(#"{"ENCRYPTED_DATA":"AQ=="}"#.utf8) },
    .init("mutable-content 1e400", .rejected, .invalidPayload) { r in
        r.raw(aps: #"{"alert":"x","mutable-content":1e400}"#, encryptedData: nil)
    },
    .init("10 MB of garbage", .rejected, .invalidPayload) { _ in [UInt8](repeating: 0xa5, count: 10_000_000) },
    // Over 4096 bytes: rejected/payloadTooLarge.
    .init("4097-byte payload", .rejected, .payloadTooLarge) { r in r.grow(try r.payload(body: r.body()), to: 4097) },
    .init("10 MB JSON payload", .rejected, .payloadTooLarge) { r in r.grow(try r.payload(body: r.body()), to: 10_000_000) },
    .init("4096-byte payload (the limit)", .decrypted, nil) { r in r.grow(try r.payload(body: r.body()), to: 4096) },
    // mutable-content must be the integer 1: original/notMutable.
    .init("mutable-content \"1\"", .original, .notMutable) { r in
        r.raw(aps: #"{"alert":"x","mutable-content":"1"}"#, encryptedData: "\"AQ==\"")
    },
    .init("mutable-content 1.0", .original, .notMutable) { r in
        r.raw(aps: #"{"alert":"x","mutable-content":1.0}"#, encryptedData: "\"AQ==\"")
    },
    .init("mutable-content true", .original, .notMutable) { r in
        r.raw(aps: #"{"alert":"x","mutable-content":true}"#, encryptedData: "\"AQ==\"")
    },
    .init("mutable-content 2", .original, .notMutable) { r in
        r.raw(aps: #"{"alert":"x","mutable-content":2}"#, encryptedData: "\"AQ==\"")
    },
    .init("mutable-content -0", .original, .notMutable) { r in
        r.raw(aps: #"{"alert":"x","mutable-content":-0}"#, encryptedData: "\"AQ==\"")
    },
    .init("mutable-content Int64.max", .original, .notMutable) { r in
        r.raw(aps: #"{"alert":"x","mutable-content":\#(int64Max)}"#, encryptedData: "\"AQ==\"")
    },
    .init("mutable-content missing", .original, .notMutable) { r in r.raw(aps: #"{"alert":"x"}"#, encryptedData: "\"AQ==\"") },
    // No visible alert: original/noAlert.
    .init("alert missing", .original, .noAlert) { r in r.raw(aps: #"{"mutable-content":1}"#, encryptedData: "\"AQ==\"") },
    .init("alert with only empty strings", .original, .noAlert) { r in
        r.raw(aps: #"{"alert":{"title":"","subtitle":"","body":""},"mutable-content":1}"#, encryptedData: "\"AQ==\"")
    },
    .init("alert is a number", .original, .noAlert) { r in r.raw(aps: #"{"alert":1,"mutable-content":1}"#, encryptedData: "\"AQ==\"") },
    // ENCRYPTED_DATA of the wrong type or shape: fallback/malformedPayload.
    .init("ENCRYPTED_DATA is a number", .fallback, .malformedPayload) { r in r.raw(encryptedData: "12345") },
    .init("ENCRYPTED_DATA is null", .fallback, .malformedPayload) { r in r.raw(encryptedData: "null") },
    .init("ENCRYPTED_DATA is true", .fallback, .malformedPayload) { r in r.raw(encryptedData: "true") },
    .init("ENCRYPTED_DATA is an object", .fallback, .malformedPayload) { r in
        r.raw(encryptedData: "{\"value\":\"\(try r.encryptedData(body: r.body()))\"}")
    },
    .init("ENCRYPTED_DATA is an array", .fallback, .malformedPayload) { r in
        r.raw(encryptedData: "[\"\(try r.encryptedData(body: r.body()))\"]")
    },
    .init("ENCRYPTED_DATA is an empty string", .fallback, .malformedPayload) { r in r.raw(encryptedData: "\"\"") },
    .init("ENCRYPTED_DATA with an escaped newline", .fallback, .malformedPayload) { r in
        r.raw(encryptedData: "\"\(try r.encryptedData(body: r.body()))\\n\"")
    },
    .init("ENCRYPTED_DATA with an escaped NUL", .fallback, .malformedPayload) { r in
        r.raw(encryptedData: "\"\\u0000\(try r.encryptedData(body: r.body()))\"")
    },
    .init("envelope of 1 byte", .fallback, .malformedPayload) { r in try r.truncatedEnvelope(1) },
    .init("envelope of 9 bytes", .fallback, .malformedPayload) { r in try r.truncatedEnvelope(9) },
    .init("envelope of 57 bytes", .fallback, .malformedPayload) { r in try r.truncatedEnvelope(57) },
    .init("envelope of 58 bytes", .fallback, .decryptionFailed) { r in try r.truncatedEnvelope(58) },
    .init("envelope missing its last byte", .fallback, .decryptionFailed) { r in
        let full = try Base64.decode(try r.encryptedData(body: r.body()))
        return try r.truncatedEnvelope(full.count - 1)
    },
    // JSON escapes inside ENCRYPTED_DATA decode to the same string: still the same envelope.
    .init("ENCRYPTED_DATA written with \\/ and \\u escapes", .decrypted, nil) { r in
        let text = try r.encryptedData(body: r.body())
        let escaped = text.map { $0 == "/" ? "\\/" : $0 == "A" ? "\\u0041" : String($0) }.joined()
        return r.raw(encryptedData: "\"\(escaped)\"")
    },
    // Hostile sealed bodies: fallback with the §5 reason.
    .init("sealed body with duplicate id", .fallback, .malformedMessage) { r in try r.payload(body: r.body(extra: #","id":"m-2""#)) },
    .init("sealed body with invalid UTF-8", .fallback, .malformedMessage) { r in
        try r.payload(body: Array(r.body([("id", nil)]).dropLast()) + Array(#","id":""#.utf8) + [0xf8, 0x88, 0x80, 0x80, 0x80] + Array("\"}".utf8))
    },
    .init("sealed body with overlong UTF-8", .fallback, .malformedMessage) { r in
        try r.payload(body: Array(r.body([("id", nil)]).dropLast()) + Array(#","id":""#.utf8) + [0xc0, 0x80] + Array("\"}".utf8))
    },
    .init("sealed body with a lone surrogate", .fallback, .malformedMessage) { r in try r.payload(body: r.body([("id", #""\udc00""#)])) },
    .init("sealed body with a raw NUL", .fallback, .malformedMessage) { r in try r.payload(body: r.body([("id", "\"\u{0}\"")])) },
    .init("sealed body with a BOM", .fallback, .malformedMessage) { r in try r.payload(body: [0xef, 0xbb, 0xbf] + r.body()) },
    .init("sealed body nested 100 levels", .fallback, .malformedMessage) { r in
        try r.payload(body: r.body([("data", #"{"a":"# + String(repeating: "[", count: 100) + String(repeating: "]", count: 100) + "}")]))
    },
    .init("sealed body with iat at Int64.max", .fallback, .notYetValid) { r in try r.payload(body: r.body([("iat", int64Max)])) },
    .init("sealed body with exp at Int64.min", .fallback, .expired) { r in try r.payload(body: r.body([("exp", int64Min)])) },
    .init("sealed body with iat 1e400", .fallback, .malformedMessage) { r in try r.payload(body: r.body([("iat", "1e400")])) },
    .init("sealed body with badge 1e400", .fallback, .malformedMessage) { r in try r.payload(body: r.body([("badge", "1e400")])) },
    .init("sealed body with mutable-content-like data.aps", .fallback, .malformedMessage) { r in
        try r.payload(body: r.body([("data", #"{"aps":{"mutable-content":1}}"#)]))
    },
    .init("sealed body addressed to another key", .fallback, .recipientMismatch) { r in
        try r.payload(body: r.body([("kid", "\"\(BoxKeyPair.generate().keyID.hex)\"")]))
    },
    .init("sealed body with badge Int64.min", .decrypted, nil) { r in try r.payload(body: r.body([("badge", int64Min)])) },
    .init("sealed body with exp at Int64.max", .decrypted, nil) { r in try r.payload(body: r.body([("exp", int64Max)])) },
]

@Suite("Hostile payloads (device simulator)") struct HostilePayloadTests {
    @Test("hostile payload", arguments: hostilePayloads)
    fileprivate func deliver(_ input: HostilePayload) async throws {
        let rig = PayloadRig.shared
        let bytes = try input.make(rig)
        let result = await rig.simulator().deliver(payload: bytes)
        #expect(result.outcome == input.outcome)
        #expect(result.reason == input.reason)
        switch result.outcome {
        case .rejected, .suppressed:
            #expect(result.notification == nil)
        case .fallback:
            let shown = try #require(result.notification)
            #expect(shown.body == SecretMessageExtension.placeholderText)
            #expect(shown.title == rig.placeholderTitle)
            #expect(shown.subtitle == "")
        case .decrypted:
            let shown = try #require(result.notification)
            #expect(shown.title == "Agent K")
            #expect(shown.body == canary)
            #expect(shown.userInfo[WireFormat.encryptedDataKey] == nil)
        case .original, .timeout, .held:
            #expect(result.notification != nil)
        }
        // Nothing but a decrypted message shows the plaintext, anywhere in what is reported.
        if result.outcome != .decrypted {
            let reported = String(decoding: JSON.serialize(.object(result.jsonObject)), as: UTF8.self)
            #expect(!reported.contains(canary))
        }
    }

    @Test func catalogIsLarge() {
        #expect(hostilePayloads.count >= 40)
        #expect(Set(hostilePayloads.map(\.name)).count == hostilePayloads.count)
    }

    @Test func decryptedHostileValuesAreShownExactly() async throws {
        let rig = PayloadRig.shared
        let body = rig.body([("badge", int64Min), ("alert", #"{"title":"a\u0000b","subtitle":"\ud83d\ude00","body":"x"}"#),
                             ("data", #"{"n":-0,"deep":[[[]]]}"#)])
        let result = await rig.simulator().deliver(payload: try rig.payload(body: body))
        #expect(result.outcome == .decrypted)
        let shown = try #require(result.notification)
        #expect(shown.badge == Int64.min)
        #expect(shown.title == "a\u{0}b")
        #expect(shown.subtitle == "😀")
        #expect(shown.userInfo["n"] == .int(0))
        #expect(shown.userInfo["deep"] == .array([.array([.array([])])]))
        #expect(shown.userInfo[WireFormat.encryptedDataKey] == nil)
    }
}
