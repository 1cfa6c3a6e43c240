import Testing
import Foundation
import SealedPushCrypto
import SealedPushWire
import SealedPushTestSupport

// A catalog of hostile inputs at library level: the strict JSON parser, the envelope, the
// receiver's ordered checks (MessageOpener) and the key-record readers. Every sealed hostile body
// is built here, at test time, as a hand-made padded inner message sealed with SealedBox.seal to a
// key generated at test time. Each case states its exact outcome.

/// Text that stands for the secret: it must never appear in a refusal.
private let canary = "PLAINTEXT-CANARY-7f3a9c"

/// A device with a fresh key, trusted and untrusted senders, and helpers that seal raw bytes.
private struct Rig: Sendable {
    static let shared = Rig()

    let device = BoxKeyPair.generate()
    let other = BoxKeyPair.generate()
    let trusted = SigningKeyPair.generate()
    let untrusted = SigningKeyPair.generate()
    let now: Int64 = 1_800_000_000
    let skew = WireFormat.defaultClockSkewSeconds

    var kid: String { device.keyID.hex }

    func opener(locked: Bool = false, requireSignature: Bool = false, replay: (any ReplayGuard)? = nil) -> MessageOpener {
        MessageOpener(keys: InMemoryKeys([device], locked: locked),
                      policy: ReceiverPolicy(trustedSenders: [trusted.publicKey], requireSignature: requireSignature),
                      replayGuard: replay)
    }

    /// Seals already-padded bytes to the device; the envelope names `keyID` (default: the device's).
    func envelope(padded: [UInt8], keyID: KeyID? = nil) throws -> Envelope {
        let box = try SealedBox.seal(SecureBytes(padded), to: device.publicKey)
        return Envelope(keyID: keyID ?? device.keyID, sealedBox: box)
    }

    func seal(padded: [UInt8], keyID: KeyID? = nil) throws -> String { try envelope(padded: padded, keyID: keyID).base64 }

    /// Pads an inner message (0x80 then zeros to `paddedLength`, default inner + 1) and seals it.
    func seal(inner: [UInt8], paddedLength: Int? = nil) throws -> String {
        let padded = try ISO7816Padding.pad(SecureBytes(inner), to: paddedLength ?? inner.count + 1)
        return try seal(padded: padded.unsafeCopyToArray())
    }

    /// Frames `body` by hand: flags, a big-endian length (default: the real one), the body, an
    /// optional signature and trailing bytes.
    func seal(body: [UInt8], flags: UInt8 = 0, declaredLength: Int? = nil, signature: [UInt8]? = nil,
              trailing: [UInt8] = []) throws -> String {
        let length = declaredLength ?? body.count
        let inner = [flags, UInt8(truncatingIfNeeded: length >> 8), UInt8(truncatingIfNeeded: length)] + body
            + (signature ?? []) + trailing
        return try seal(inner: inner)
    }

    /// Frames and signs `body` the way a sender does, with `signer`.
    func sealSigned(body: [UInt8], signer: SigningKeyPair) throws -> String {
        try seal(inner: InnerMessage.frame(body: SecureBytes(body), recipient: device.keyID, signer: signer).unsafeCopyToArray())
    }

    /// A body as raw JSON text: the default members (kid, id, iat, alert holding the canary) with
    /// `changes` applied in order (a `nil` value removes the member, an unknown key is appended),
    /// then `extra` raw text inserted before the closing brace.
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
        let text = "{" + members.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + extra + "}"
        return Array(text.utf8)
    }

    /// The default body whose `id` is `"a"` followed by raw (possibly invalid UTF-8) bytes.
    func body(idBytes: [UInt8]) -> [UInt8] {
        Array(body([("id", nil)]).dropLast()) + Array(#","id":"a"#.utf8) + idBytes + Array("\"}".utf8)
    }
}

/// One descriptor's JSON with the given members (a fixed key unless `key` is given).
private func hostileDescriptor(id: String = "a", url: String = "https://media.example/o", key: String? = nil, type: String = "image/png",
                               size: String = "100", extra: String = "") -> String {
    let k = key ?? Base64.encode([UInt8](repeating: 7, count: 32))
    return #"{"id":"\#(id)","url":"\#(url)","key":"\#(k)","type":"\#(type)","size":\#(size)\#(extra)}"#
}

/// What a hostile input must lead to.
private enum Expect: Sendable, Equatable, CustomStringConvertible {
    case opened
    case refused(ReasonCode)
    var description: String {
        switch self {
        case .opened: return "opened"
        case let .refused(reason): return reason.rawValue
        }
    }
}

/// One hostile `ENCRYPTED_DATA` value and its outcome.
private struct HostileEnvelope: Sendable, CustomTestStringConvertible {
    let name: String
    let expect: Expect
    var locked = false
    var requireSignature = false
    var now: Int64?
    let make: @Sendable (Rig) throws -> String
    var testDescription: String { "\(name) → \(expect)" }

    init(_ name: String, _ expect: Expect, locked: Bool = false, requireSignature: Bool = false, now: Int64? = nil,
         _ make: @escaping @Sendable (Rig) throws -> String) {
        self.name = name
        self.expect = expect
        self.locked = locked
        self.requireSignature = requireSignature
        self.now = now
        self.make = make
    }
}

/// Opens `encryptedData` and checks the exact outcome; a refusal must not quote the canary.
private func check(_ encryptedData: String, expect: Expect, rig: Rig = .shared, locked: Bool = false,
                   requireSignature: Bool = false, now: Int64? = nil, sourceLocation: SourceLocation = #_sourceLocation) {
    let opener = rig.opener(locked: locked, requireSignature: requireSignature)
    do {
        let opened = try opener.open(encryptedData: encryptedData, now: now ?? rig.now)
        #expect(expect == .opened, "opened, expected \(expect)", sourceLocation: sourceLocation)
        #expect(opened.body.kid == rig.device.keyID, sourceLocation: sourceLocation)
    } catch {
        #expect(Expect.refused(error.reason) == expect, "refused with \(error.reason)", sourceLocation: sourceLocation)
        #expect(!error.description.contains(canary), "a refusal quotes the plaintext", sourceLocation: sourceLocation)
    }
}

private let int64Max = "9223372036854775807"
private let int64Min = "-9223372036854775808"

private let hostileEnvelopes: [HostileEnvelope] = [
    // §5 step 1: payload and envelope shape.
    .init("empty ENCRYPTED_DATA", .refused(.malformedPayload)) { _ in "" },
    .init("base64 without padding", .refused(.malformedPayload)) { r in String(try r.seal(body: r.body()).dropLast(1)) },
    .init("base64 with a newline", .refused(.malformedPayload)) { r in
        let text = try r.seal(body: r.body())
        return String(text.prefix(8)) + "\n" + String(text.dropFirst(8))
    },
    .init("URL-safe alphabet", .refused(.malformedPayload)) { _ in "AQ__-_" + String(repeating: "A", count: 78) + "==" },
    .init("NUL inside the base64", .refused(.malformedPayload)) { r in
        let text = try r.seal(body: r.body())
        return String(text.prefix(4)) + "\u{0}" + String(text.dropFirst(4))
    },
    .init("non-ASCII in the base64", .refused(.malformedPayload)) { _ in "AQÉÉ" },
    .init("envelope of 1 byte", .refused(.malformedPayload)) { _ in Base64.encode([0x01]) },
    .init("envelope of 9 bytes (header only)", .refused(.malformedPayload)) { r in Base64.encode([0x01] + r.device.keyID.bytes) },
    .init("envelope of 57 bytes (no padded byte)", .refused(.malformedPayload)) { r in
        Base64.encode(Array(try r.envelope(padded: [0x80]).bytes.prefix(57)))
    },
    .init("envelope of 58 bytes sealing only 0x80", .refused(.malformedMessage)) { r in try r.seal(padded: [0x80]) },
    .init("version 0x00", .refused(.unsupportedVersion)) { r in
        var bytes = try r.envelope(padded: Array(repeating: 0, count: 10)).bytes
        bytes[0] = 0x00
        return Base64.encode(bytes)
    },
    .init("version 0xff", .refused(.unsupportedVersion)) { r in
        var bytes = try r.envelope(padded: [0x80]).bytes
        bytes[0] = 0xff
        return Base64.encode(bytes)
    },
    // Steps 2-4: key, box, padding.
    .init("unknown key id", .refused(.unknownKey)) { r in try r.seal(body: r.body()).replacingKeyID(with: r.other.keyID) },
    .init("known key while locked", .refused(.keychainLocked), locked: true) { r in try r.seal(body: r.body()) },
    .init("sealed to another key under this key id", .refused(.decryptionFailed)) { r in
        let box = try SealedBox.seal(SecureBytes([0x80]), to: r.other.publicKey)
        return Envelope(keyID: r.device.keyID, sealedBox: box).base64
    },
    .init("one ciphertext bit flipped", .refused(.decryptionFailed)) { r in
        var bytes = try r.envelope(padded: [0x80]).bytes
        bytes[bytes.count - 1] ^= 0x01
        return Base64.encode(bytes)
    },
    .init("10 MB envelope", .refused(.decryptionFailed)) { r in
        Base64.encode([0x01] + r.device.keyID.bytes + [UInt8](repeating: 0x5a, count: 10_000_000))
    },
    .init("padded plaintext all zeros", .refused(.badPadding)) { r in try r.seal(padded: Array(repeating: 0, count: 64)) },
    .init("padding marker followed by 0x01", .refused(.badPadding)) { r in try r.seal(padded: [0x00, 0x00, 0x02, 0x7b, 0x7d, 0x80, 0x01]) },
    .init("no padding marker at all", .refused(.badPadding)) { r in try r.seal(padded: r.body()) },
    .init("two padding markers", .refused(.malformedMessage)) { r in
        // The first 0x80 is data: the inner message then ends in a stray byte.
        try r.seal(padded: [0x00, 0x00, 0x02, 0x7b, 0x7d, 0x80, 0x80, 0x00])
    },
    // Step 5: framing.
    .init("unknown flag bit 0x02", .refused(.malformedMessage)) { r in try r.seal(body: r.body(), flags: 0x02) },
    .init("all flag bits set", .refused(.malformedMessage)) { r in try r.seal(body: r.body(), flags: 0xff) },
    .init("length longer than the body", .refused(.malformedMessage)) { r in try r.seal(body: r.body(), declaredLength: 0xffff) },
    .init("length shorter than the body", .refused(.malformedMessage)) { r in try r.seal(body: r.body(), declaredLength: 3) },
    .init("length zero, body present", .refused(.malformedMessage)) { r in try r.seal(body: r.body(), declaredLength: 0) },
    .init("inner shorter than its header", .refused(.malformedMessage)) { r in try r.seal(inner: [0x00, 0x00]) },
    .init("signed flag without a signature", .refused(.malformedMessage)) { r in try r.seal(body: r.body(), flags: 0x01) },
    .init("trailing byte after the body", .refused(.malformedMessage)) { r in try r.seal(body: r.body(), trailing: [0x20]) },
    // Step 5: body JSON.
    .init("empty body", .refused(.malformedMessage)) { r in try r.seal(body: []) },
    .init("body nested 10 000 levels deep", .refused(.malformedMessage)) { r in
        try r.seal(body: r.body([("data", String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000))]))
    },
    .init("body is an array", .refused(.malformedMessage)) { r in try r.seal(body: Array("[\"\(canary)\"]".utf8)) },
    .init("body is a string", .refused(.malformedMessage)) { r in try r.seal(body: Array("\"\(canary)\"".utf8)) },
    .init("body is null", .refused(.malformedMessage)) { r in try r.seal(body: Array("null".utf8)) },
    .init("raw NUL byte in a string", .refused(.malformedMessage)) { r in
        try r.seal(body: r.body([("alert", "{\"body\":\"a\u{0}b\(canary)\"}")]))
    },
    .init("escaped NUL in the title is text", .opened) { r in try r.seal(body: r.body([("alert", #"{"title":"a\u0000b"}"#)])) },
    .init("NUL byte after the body JSON", .refused(.malformedMessage)) { r in try r.seal(body: r.body() + [0x00]) },
    .init("invalid UTF-8 byte 0xff in the body", .refused(.malformedMessage)) { r in
        var body = r.body()
        body.insert(0xff, at: body.count - 40)
        return try r.seal(body: body)
    },
    .init("overlong UTF-8 '/' (C0 AF)", .refused(.malformedMessage)) { r in
        try r.seal(body: r.body(idBytes: [0xc0, 0xaf]))
    },
    .init("overlong 3-byte NUL (E0 80 80)", .refused(.malformedMessage)) { r in
        try r.seal(body: r.body(idBytes: [0xe0, 0x80, 0x80]))
    },
    .init("UTF-8-encoded surrogate (ED A0 80)", .refused(.malformedMessage)) { r in
        try r.seal(body: r.body(idBytes: [0xed, 0xa0, 0x80]))
    },
    .init("code point above U+10FFFF (F4 90 80 80)", .refused(.malformedMessage)) { r in
        try r.seal(body: r.body(idBytes: [0xf4, 0x90, 0x80, 0x80]))
    },
    .init("lone high surrogate escape", .refused(.malformedMessage)) { r in try r.seal(body: r.body([("id", #""\ud800""#)])) },
    .init("lone low surrogate escape", .refused(.malformedMessage)) { r in try r.seal(body: r.body([("id", #""\udc00x""#)])) },
    .init("reversed surrogate pair", .refused(.malformedMessage)) { r in try r.seal(body: r.body([("id", #""\ude00\ud83d""#)])) },
    .init("valid surrogate pair", .opened) { r in try r.seal(body: r.body([("id", #""\ud83d\ude00""#)])) },
    .init("byte order mark before the body", .refused(.malformedMessage)) { r in try r.seal(body: [0xef, 0xbb, 0xbf] + r.body()) },
    .init("duplicate key id", .refused(.malformedMessage)) { r in try r.seal(body: r.body(extra: #","id":"m-2""#)) },
    .init("duplicate key kid", .refused(.malformedMessage)) { r in try r.seal(body: r.body(extra: ",\"kid\":\"\(r.other.keyID.hex)\"")) },
    .init("duplicate key spelled with an escape", .refused(.malformedMessage)) { r in try r.seal(body: r.body(extra: #","\u0069d":"m-2""#)) },
    .init("duplicate key inside alert", .refused(.malformedMessage)) { r in
        try r.seal(body: r.body([("alert", #"{"title":"x","title":"y"}"#)]))
    },
    // Step 5: members.
    .init("iat at Int64.max", .refused(.notYetValid)) { r in try r.seal(body: r.body([("iat", int64Max)])) },
    .init("iat at Int64.min", .opened) { r in try r.seal(body: r.body([("iat", int64Min)])) },
    .init("iat one past Int64.max", .refused(.malformedMessage)) { r in try r.seal(body: r.body([("iat", "9223372036854775808")])) },
    .init("iat one below Int64.min", .refused(.malformedMessage)) { r in try r.seal(body: r.body([("iat", "-9223372036854775809")])) },
    .init("iat 1e400", .refused(.malformedMessage)) { r in try r.seal(body: r.body([("iat", "1e400")])) },
    .init("iat -1e400", .refused(.malformedMessage)) { r in try r.seal(body: r.body([("iat", "-1e400")])) },
    .init("iat 1e-400 (a double)", .refused(.malformedMessage)) { r in try r.seal(body: r.body([("iat", "1e-400")])) },
    .init("iat -0 is the integer 0", .opened) { r in try r.seal(body: r.body([("iat", "-0")])) },
    .init("iat 1800000000.0", .refused(.malformedMessage)) { r in try r.seal(body: r.body([("iat", "1800000000.0")])) },
    .init("iat as a string", .refused(.malformedMessage)) { r in try r.seal(body: r.body([("iat", "\"1800000000\"")])) },
    .init("iat with a leading zero", .refused(.malformedMessage)) { r in try r.seal(body: r.body([("iat", "01800000000")])) },
    .init("iat +1", .refused(.malformedMessage)) { r in try r.seal(body: r.body([("iat", "+1")])) },
    .init("iat NaN", .refused(.malformedMessage)) { r in try r.seal(body: r.body([("iat", "NaN")])) },
    .init("exp at Int64.max (exp + skew overflows)", .opened) { r in try r.seal(body: r.body([("exp", int64Max)])) },
    .init("exp at Int64.min", .refused(.expired)) { r in try r.seal(body: r.body([("exp", int64Min)])) },
    .init("exp exactly now - skew", .opened) { r in try r.seal(body: r.body([("exp", "\(r.now - r.skew)")])) },
    .init("exp one second before now - skew", .refused(.expired)) { r in try r.seal(body: r.body([("exp", "\(r.now - r.skew - 1)")])) },
    .init("iat exactly now + skew", .opened) { r in try r.seal(body: r.body([("iat", "\(r.now + r.skew)")])) },
    .init("iat one second after now + skew", .refused(.notYetValid)) { r in try r.seal(body: r.body([("iat", "\(r.now + r.skew + 1)")])) },
    .init("now at Int64.max, iat at Int64.max", .opened, now: Int64.max) { r in try r.seal(body: r.body([("iat", int64Max)])) },
    .init("now at Int64.max, exp at Int64.max", .opened, now: Int64.max) { r in
        try r.seal(body: r.body([("iat", "0"), ("exp", int64Max)]))
    },
    .init("now at Int64.min (now + skew is clamped)", .refused(.notYetValid), now: Int64.min) { r in try r.seal(body: r.body()) },
    .init("now at Int64.min, iat at Int64.min", .opened, now: Int64.min) { r in try r.seal(body: r.body([("iat", int64Min)])) },
    .init("badge at Int64.max", .opened) { r in try r.seal(body: r.body([("badge", int64Max)])) },
    .init("badge at Int64.min", .opened) { r in try r.seal(body: r.body([("badge", int64Min)])) },
    .init("badge 1e400", .refused(.malformedMessage)) { r in try r.seal(body: r.body([("badge", "1e400")])) },
    .init("badge 1.5", .refused(.malformedMessage)) { r in try r.seal(body: r.body([("badge", "1.5")])) },
    .init("badge as a string", .refused(.malformedMessage)) { r in try r.seal(body: r.body([("badge", "\"3\"")])) },
    .init("kid in uppercase", .refused(.malformedMessage)) { r in try r.seal(body: r.body([("kid", "\"\(r.kid.uppercased())\"")])) },
    .init("kid as a number", .refused(.malformedMessage)) { r in try r.seal(body: r.body([("kid", "1234567890123456")])) },
    .init("kid of another device", .refused(.recipientMismatch)) { r in try r.seal(body: r.body([("kid", "\"\(r.other.keyID.hex)\"")])) },
    .init("kid missing", .refused(.malformedMessage)) { r in try r.seal(body: r.body([("kid", nil)])) },
    .init("id empty", .refused(.malformedMessage)) { r in try r.seal(body: r.body([("id", "\"\"")])) },
    .init("id of 65 characters", .refused(.malformedMessage)) { r in try r.seal(body: r.body([("id", "\"\(String(repeating: "a", count: 65))\"")])) },
    .init("id of 64 emoji (256 bytes: ids are counted in bytes)", .refused(.malformedMessage)) { r in try r.seal(body: r.body([("id", "\"\(String(repeating: "🔐", count: 64))\"")])) },
    .init("id as null", .refused(.malformedMessage)) { r in try r.seal(body: r.body([("id", "null")])) },
    .init("alert as a string", .refused(.malformedMessage)) { r in try r.seal(body: r.body([("alert", "\"\(canary)\"")])) },
    .init("alert with only empty strings", .refused(.malformedMessage)) { r in
        try r.seal(body: r.body([("alert", #"{"title":"","subtitle":"","body":""}"#)]))
    },
    .init("alert title as a number", .refused(.malformedMessage)) { r in try r.seal(body: r.body([("alert", #"{"title":1,"body":"x"}"#)])) },
    .init("data as an array", .refused(.malformedMessage)) { r in try r.seal(body: r.body([("data", "[1]")])) },
    .init("data holding aps", .refused(.malformedMessage)) { r in try r.seal(body: r.body([("data", #"{"aps":{"alert":"x"}}"#)])) },
    .init("thread-id as an object", .refused(.malformedMessage)) { r in try r.seal(body: r.body([("thread-id", "{}")])) },
    .init("unknown members of every type", .opened) { r in
        try r.seal(body: r.body([("x-null", "null"), ("x-big", "1e300"), ("x-neg", "-0.0"), ("x-arr", "[[],{}]")]))
    },
    // Steps 6-7: signatures and policy.
    .init("signed but no sender member", .refused(.malformedMessage)) { r in try r.sealSigned(body: r.body(), signer: r.trusted) },
    .init("signed by an untrusted sender", .refused(.untrustedSender)) { r in
        try r.sealSigned(body: r.body([("sender", "\"\(r.untrusted.keyID.hex)\"")]), signer: r.untrusted)
    },
    .init("signature of zeros", .refused(.badSignature)) { r in
        try r.seal(body: r.body([("sender", "\"\(r.trusted.keyID.hex)\"")]), flags: 0x01, signature: Array(repeating: 0, count: 64))
    },
    .init("signature of 0xff", .refused(.badSignature)) { r in
        try r.seal(body: r.body([("sender", "\"\(r.trusted.keyID.hex)\"")]), flags: 0x01, signature: Array(repeating: 0xff, count: 64))
    },
    .init("trusted signature", .opened, requireSignature: true) { r in
        try r.sealSigned(body: r.body([("sender", "\"\(r.trusted.keyID.hex)\"")]), signer: r.trusted)
    },
    .init("unsigned where signatures are required", .refused(.signatureRequired), requireSignature: true) { r in
        try r.seal(body: r.body())
    },
    .init("largest body the length field allows", .opened) { r in
        let body = r.body()
        let filler = String(repeating: " ", count: InnerMessage.maxBodyBytes - body.count)
        return try r.seal(body: Array(filler.utf8) + body)
    },
    // Attachments (attachments-v1 §1): structure is malformedMessage; what §4 checks still opens.
    .init("attachments not an array", .refused(.malformedMessage)) { r in try r.seal(body: r.body([("attachments", "{}")])) },
    .init("attachments empty", .refused(.malformedMessage)) { r in try r.seal(body: r.body([("attachments", "[]")])) },
    .init("attachments of a number", .refused(.malformedMessage)) { r in try r.seal(body: r.body([("attachments", "[7]")])) },
    .init("five descriptors", .refused(.malformedMessage)) { r in
        try r.seal(body: r.body([("attachments", "[" + (1...5).map { hostileDescriptor(id: "a\($0)") }.joined(separator: ",") + "]")]))
    },
    .init("duplicate descriptor id", .refused(.malformedMessage)) { r in
        try r.seal(body: r.body([("attachments", "[\(hostileDescriptor()),\(hostileDescriptor())]")]))
    },
    .init("descriptor key of 31 bytes", .refused(.malformedMessage)) { r in
        try r.seal(body: r.body([("attachments", "[\(hostileDescriptor(key: Base64.encode([UInt8](repeating: 1, count: 31))))]")]))
    },
    .init("descriptor key with whitespace", .refused(.malformedMessage)) { r in
        try r.seal(body: r.body([("attachments", "[\(hostileDescriptor(key: " " + Base64.encode([UInt8](repeating: 1, count: 32))))]")]))
    },
    .init("descriptor id with a slash", .refused(.malformedMessage)) { r in
        try r.seal(body: r.body([("attachments", "[\(hostileDescriptor(id: "../etc"))]")]))
    },
    .init("descriptor size 2^63-1 opens (the size limit is per attachment)", .opened) { r in
        try r.seal(body: r.body([("attachments", "[\(hostileDescriptor(size: "9223372036854775807"))]")]))
    },
    .init("descriptor size over Int64", .refused(.malformedMessage)) { r in
        try r.seal(body: r.body([("attachments", "[\(hostileDescriptor(size: "9223372036854775808"))]")]))
    },
    .init("descriptor size as a float", .refused(.malformedMessage)) { r in
        try r.seal(body: r.body([("attachments", "[\(hostileDescriptor(size: "1.0"))]")]))
    },
    .init("descriptor name with NUL", .refused(.malformedMessage)) { r in
        try r.seal(body: r.body([("attachments", "[\(hostileDescriptor(extra: #","name":"a\u0000b""#))]")]))
    },
    .init("descriptor URL over 2048 bytes", .refused(.malformedMessage)) { r in
        try r.seal(body: r.body([("attachments", "[\(hostileDescriptor(url: "https://h/" + String(repeating: "a", count: 2039)))]")]))
    },
    .init("descriptor with javascript: URL and unknown type opens (§4 fails that attachment alone)", .opened) { r in
        try r.seal(body: r.body([("attachments", "[\(hostileDescriptor(url: "javascript:alert(1)", type: "text/html"))]")]))
    },
]

@Suite("Hostile inputs (library level)") struct HostileInputTests {
    @Test("hostile ENCRYPTED_DATA", arguments: hostileEnvelopes)
    fileprivate func hostileEnvelope(_ input: HostileEnvelope) throws {
        let rig = Rig.shared
        check(try input.make(rig), expect: input.expect, locked: input.locked, requireSignature: input.requireSignature, now: input.now)
    }

    @Test func catalogIsLarge() {
        #expect(hostileEnvelopes.count >= 40)
        #expect(Set(hostileEnvelopes.map(\.name)).count == hostileEnvelopes.count)
    }

    @Test("a real envelope truncated at the named boundaries", arguments: [0, 1, 8, 9, 10, 41, 56, 57, 58, 59, 100])
    func truncatedEnvelope(length: Int) throws {
        let rig = Rig.shared
        let full = try rig.envelope(padded: try ISO7816Padding.pad(SecureBytes(rig.body()), to: 256).unsafeCopyToArray()).bytes
        let expect: Expect = length < WireFormat.minimumEnvelopeBytes ? .refused(.malformedPayload) : .refused(.decryptionFailed)
        check(Base64.encode(full.prefix(length)), expect: expect)
    }

    @Test func realEnvelopeTruncatedAtEveryLength() throws {
        let rig = Rig.shared
        let inner = InnerMessage.frame(body: SecureBytes(rig.body()), recipient: rig.device.keyID, signer: nil)
        let full = try rig.envelope(padded: try ISO7816Padding.pad(inner, to: 256).unsafeCopyToArray()).bytes
        #expect(full.count == 9 + 48 + 256)
        for length in 0...full.count {
            let expect: Expect = length == full.count ? .opened
                : length < WireFormat.minimumEnvelopeBytes ? .refused(.malformedPayload) : .refused(.decryptionFailed)
            check(Base64.encode(full.prefix(length)), expect: expect)
        }
        // Every prefix of the base64 text as well: a length that is not a multiple of 4 is not strict base64.
        let text = Array(Base64.encode(full))
        for length in stride(from: 0, to: text.count, by: 1) {
            let prefix = String(text[..<length])
            let expect: Expect = length % 4 != 0 || length / 4 * 3 < WireFormat.minimumEnvelopeBytes
                ? .refused(.malformedPayload) : .refused(.decryptionFailed)
            check(prefix, expect: expect)
        }
    }

    @Test func paddedPlaintextTruncatedAtEveryLength() throws {
        let rig = Rig.shared
        let body = rig.body()
        // The prefixes below must not end in a stray 0x80 (after zeros are stripped) by accident.
        try #require(body.count & 0xff != 0 && body.count & 0xff != 0x80 && body.count < 0x100)
        let inner = InnerMessage.frame(body: SecureBytes(body), recipient: rig.device.keyID, signer: nil).unsafeCopyToArray()
        let padded = try ISO7816Padding.pad(SecureBytes(inner), to: 256).unsafeCopyToArray()
        for length in 0...padded.count {
            let expect: Expect = length == 0 ? .refused(.malformedPayload)
                : length <= inner.count ? .refused(.badPadding) : .opened
            check(try rig.seal(padded: Array(padded.prefix(length))), expect: expect)
        }
    }

    /// A key store that cannot be asked (iOS: a missing keychain entitlement) answers `.unavailable`:
    /// the opener refuses as `keychainLocked`, never `unknownKey` (which would call the key record stale).
    @Test("a key store that cannot be read refuses the message as keychainLocked, not unknownKey")
    func unavailableKeyStoreIsKeychainLocked() throws {
        struct UnavailableKeys: DeviceKeyProvider {
            func lookUpKey(id keyID: KeyID) -> KeyLookup { .unavailable }
        }
        let rig = Rig.shared
        let opener = MessageOpener(keys: UnavailableKeys())
        let failure = #expect(throws: OpenFailure.self) { try opener.open(encryptedData: try rig.seal(body: rig.body()), now: rig.now) }
        #expect(failure?.reason == .keychainLocked)
        #expect(failure?.detail.contains("could not be read") == true)
    }

    @Test func replayedMessageIsRefusedOnlyTheSecondTime() throws {
        let rig = Rig.shared
        let opener = rig.opener(replay: InMemoryReplayGuard())
        let text = try rig.seal(body: rig.body([("exp", int64Max), ("id", "\"replay-me\"")]))
        _ = try opener.open(encryptedData: text, now: rig.now)
        let second = #expect(throws: OpenFailure.self) { try opener.open(encryptedData: text, now: rig.now) }
        #expect(second?.reason == .replayed)
    }

    /// Regression (found by FuzzOpen): a message without `exp` whose `iat` is older than the replay
    /// window was recorded with an already-past expiry, so the same envelope opened again at once.
    /// Now a message issued longer ago than the window is refused outright: the cache keeps an id
    /// only until `iat` plus the window, so it could be a replay the cache has let go.
    @Test("a message issued before the replay window is refused as replayed, even the first time",
          arguments: [Int64.min, 0, 1_800_000_000 - 40 * 24 * 3600, 1_800_000_000 - ReceiverPolicy.defaultReplayWindowSeconds - 301] as [Int64])
    func oldMessageIsRefused(issuedAt: Int64) throws {
        let rig = Rig.shared
        let opener = rig.opener(replay: InMemoryReplayGuard())
        let text = try rig.seal(body: rig.body([("iat", "\(issuedAt)"), ("id", "\"old-\(issuedAt)\"")]))
        let first = #expect(throws: OpenFailure.self) { try opener.open(encryptedData: text, now: rig.now) }
        #expect(first?.reason == .replayed)
    }

    @Test("a message without exp inside the replay window opens once and never again, before or after the window ends")
    func messageWithoutExpiryIsNeverReplayable() throws {
        let rig = Rig.shared
        let opener = rig.opener(replay: InMemoryReplayGuard())
        let issuedAt = rig.now - ReceiverPolicy.defaultReplayWindowSeconds  // at the window's edge (the skew is 300 s)
        let text = try rig.seal(body: rig.body([("iat", "\(issuedAt)"), ("id", "\"edge\"")]))
        _ = try opener.open(encryptedData: text, now: rig.now)
        for later in [rig.now, rig.now + 300, rig.now + 301, rig.now + ReceiverPolicy.defaultReplayWindowSeconds] {
            let again = #expect(throws: OpenFailure.self) { try opener.open(encryptedData: text, now: later) }
            #expect(again?.reason == .replayed, "at now + \(later - rig.now) s")
        }
    }

    @Test("a message id is counted in UTF-8 bytes: 64 characters of combining marks are refused by sealer, opener and collector")
    func messageIDCountedInBytes() throws {
        let rig = Rig.shared
        let heavy = String(repeating: "e\u{301}\u{302}\u{303}", count: 64)  // 64 characters, 448 bytes
        #expect(heavy.count == 64 && heavy.utf8.count > 64)
        let text = try rig.seal(body: rig.body([("id", "\"\(heavy)\"")]))
        let failure = #expect(throws: OpenFailure.self) { try rig.opener().open(encryptedData: text, now: rig.now) }
        #expect(failure?.reason == .malformedMessage)
        let ascii = String(repeating: "a", count: 64)
        _ = try rig.opener().open(encryptedData: try rig.seal(body: rig.body([("id", "\"\(ascii)\"")])), now: rig.now)
        let receipt = #"{"v":1,"type":"delivered","id":"ID","token":"leSLeiHU1ME6svkg7Bq3Yw","at":1}"#
        #expect(ReceiptMessage.parse(Array(receipt.replacingOccurrences(of: "ID", with: heavy).utf8)) == nil)
        #expect(ReceiptMessage.parse(Array(receipt.replacingOccurrences(of: "ID", with: ascii).utf8)) != nil)
    }

    @Test func openedHostileValuesAreKeptExactly() throws {
        let rig = Rig.shared
        let text = try rig.seal(body: rig.body([("iat", "-0"), ("badge", int64Min), ("exp", int64Max),
                                                ("alert", #"{"title":"a\u0000b","subtitle":"\ud83d\ude00"}"#)]))
        let opened = try rig.opener().open(encryptedData: text, now: rig.now)
        #expect(opened.body.issuedAt == 0)
        #expect(opened.body.badge == Int64.min)
        #expect(opened.body.expiresAt == Int64.max)
        #expect(opened.body.alert.title == "a\u{0}b")
        #expect(opened.body.alert.subtitle == "😀")
    }
}

// MARK: - The strict JSON parser on its own

/// Raw bytes and whether the strict parser accepts them.
private struct HostileJSON: Sendable, CustomTestStringConvertible {
    let name: String
    let bytes: [UInt8]
    let value: JSONValue?  // nil: must be refused
    var testDescription: String { name }
    init(_ name: String, _ bytes: [UInt8], _ value: JSONValue?) {
        self.name = name
        self.bytes = bytes
        self.value = value
    }
    init(_ name: String, _ text: String, _ value: JSONValue?) { self.init(name, Array(text.utf8), value) }
}

private let hostileJSON: [HostileJSON] = [
    .init("empty input", [], nil),
    .init("only whitespace", " \n\t\r", nil),
    .init("byte order mark", [0xef, 0xbb, 0xbf] + Array("{}".utf8), nil),
    .init("NUL before the value", [0x00] + Array("{}".utf8), nil),
    .init("NUL after the value", Array("{}".utf8) + [0x00], nil),
    .init("raw NUL in a string", [0x22, 0x00, 0x22], nil),
    .init("raw tab in a string", "\"a\tb\"", nil),
    .init("escaped NUL", #""\u0000""#, .string("\u{0}")),
    .init("10 000 nested arrays", String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000), nil),
    .init("10 000 nested objects", String(repeating: #"{"a":"#, count: 10_000) + "1" + String(repeating: "}", count: 10_000), nil),
    .init("1 000 000 unclosed arrays", String(repeating: "[", count: 1_000_000), nil),
    .init("64 nested arrays (the limit)", String(repeating: "[", count: 64) + String(repeating: "]", count: 64),
          (0..<63).reduce(JSONValue.array([])) { inner, _ in .array([inner]) }),
    .init("65 nested arrays", String(repeating: "[", count: 65) + String(repeating: "]", count: 65), nil),
    .init("Int64.max", "9223372036854775807", .int(.max)),
    .init("Int64.min", "-9223372036854775808", .int(.min)),
    .init("Int64.max + 1 is a double", "9223372036854775808", .double(9_223_372_036_854_775_808)),
    .init("huge integer is a double", "123456789012345678901234567890", .double(1.2345678901234568e29)),
    .init("1e400", "1e400", nil),
    .init("-1e400", "-1e400", nil),
    .init("1e-400 underflows to zero", "1e-400", .double(0)),
    .init("-0", "-0", .int(0)),
    .init("-0.0", "-0.0", .double(-0.0)),
    .init("leading zero", "01", nil),
    .init("bare minus", "-", nil),
    .init("trailing dot", "1.", nil),
    .init("leading dot", ".5", nil),
    .init("plus sign", "+1", nil),
    .init("NaN", "NaN", nil),
    .init("Infinity", "Infinity", nil),
    .init("hex number", "0x10", nil),
    .init("trailing comma in an array", "[1,]", nil),
    .init("trailing comma in an object", #"{"a":1,}"#, nil),
    .init("single quotes", "{'a':1}", nil),
    .init("comment", "[1/*x*/]", nil),
    .init("two values", "true false", nil),
    .init("truncated literal", "tru", nil),
    .init("duplicate keys", #"{"a":1,"a":1}"#, nil),
    .init("duplicate keys, one escaped", #"{"a":1,"\u0061":2}"#, nil),
    .init("canonically equivalent keys are duplicates", "{\"\u{e9}\":1,\"e\u{301}\":2}", nil),
    .init("invalid UTF-8 0xff", [0x22, 0xff, 0x22], nil),
    .init("truncated UTF-8 sequence", [0x22, 0xe2, 0x82, 0x22], nil),
    .init("overlong '/'", [0x22, 0xc0, 0xaf, 0x22], nil),
    .init("overlong NUL (C0 80)", [0x22, 0xc0, 0x80, 0x22], nil),
    .init("UTF-8-encoded surrogate", [0x22, 0xed, 0xa0, 0x80, 0x22], nil),
    .init("above U+10FFFF", [0x22, 0xf4, 0x90, 0x80, 0x80, 0x22], nil),
    .init("invalid UTF-8 in a key", [0x7b, 0x22, 0xfe, 0x22, 0x3a, 0x31, 0x7d], nil),
    .init("lone high surrogate", #""\ud800""#, nil),
    .init("lone low surrogate", #""\udfff""#, nil),
    .init("high surrogate then a letter", #""\ud800\u0041""#, nil),
    .init("surrogate pair", #""\ud834\udd1e""#, .string("𝄞")),
    .init("short \\u escape", #""\u12""#, nil),
    .init("invalid escape", #""\x41""#, nil),
    .init("unterminated string", #""abc"#, nil),
    .init("U+2028 raw is allowed", "\"\u{2028}\"", .string("\u{2028}")),
]

@Suite("Hostile JSON") struct HostileJSONTests {
    @Test("strict parser", arguments: hostileJSON)
    fileprivate func parse(_ input: HostileJSON) {
        let result = try? JSON.parse(input.bytes)
        #expect(result == input.value)
        // Whatever is accepted survives a round trip through the serializer.
        if let result { #expect((try? JSON.parse(JSON.serialize(result))) == result) }
    }

    @Test func errorsNeverQuoteTheInput() {
        for bytes in [Array("{\"\(canary)\":".utf8), Array("[\"\(canary)\",]".utf8), Array("\"\(canary)".utf8)] {
            #expect(throws: JSONError.self) { try JSON.parse(bytes) }
            do { _ = try JSON.parse(bytes) } catch { #expect(!error.description.contains(canary)) }
        }
    }
}

// MARK: - Key records

/// A record text (with `{KID}` and `{PK}` replaced by a real key id and key) and its outcome.
private struct HostileRecord: Sendable, CustomTestStringConvertible {
    let name: String
    let text: [UInt8]
    let device: KeyRecordError?   // nil: accepted as a device record
    let sender: KeyRecordError?   // nil: accepted as a sender record
    var testDescription: String { name }
}

private let recordKey = BoxKeyPair.generate().publicKey
private let recordKID = recordKey.keyID.hex
private let recordPK = Base64.encode(recordKey.bytes)

private func record(_ name: String, _ text: String, device: KeyRecordError?, sender: KeyRecordError?) -> HostileRecord {
    let filled = text.replacingOccurrences(of: "{KID}", with: recordKID).replacingOccurrences(of: "{PK}", with: recordPK)
    return HostileRecord(name: name, text: Array(filled.utf8), device: device, sender: sender)
}

private func rawRecord(_ name: String, _ bytes: [UInt8], device: KeyRecordError?, sender: KeyRecordError?) -> HostileRecord {
    HostileRecord(name: name, text: bytes, device: device, sender: sender)
}

private let wrongDevice = KeyRecordError.wrongType(expected: DeviceKeyRecord.type)
private let wrongSender = KeyRecordError.wrongType(expected: SenderKeyRecord.type)

private let hostileRecords: [HostileRecord] = [
    record("valid device record", #"{"type":"sealedpush-device-key","version":1,"key_id":"{KID}","public_key":"{PK}"}"#,
           device: nil, sender: wrongSender),
    record("valid sender record", #"{"type":"sealedpush-sender-key","version":1,"key_id":"{KID}","public_key":"{PK}"}"#,
           device: wrongDevice, sender: nil),
    rawRecord("empty input", [], device: .notJSON("invalid JSON at byte 0: unexpected end of input"),
              sender: .notJSON("invalid JSON at byte 0: unexpected end of input")),
    rawRecord("byte order mark", [0xef, 0xbb, 0xbf] + Array("{}".utf8), device: .notJSON("invalid JSON at byte 0: unexpected character"),
              sender: .notJSON("invalid JSON at byte 0: unexpected character")),
    record("an array", "[]", device: .notJSON("it is not an object"), sender: .notJSON("it is not an object")),
    record("10 000 nested arrays", String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000),
           device: .notJSON("invalid JSON at byte 64: nesting deeper than 64"),
           sender: .notJSON("invalid JSON at byte 64: nesting deeper than 64")),
    record("duplicate type", #"{"type":"sealedpush-device-key","type":"sealedpush-device-key","version":1}"#,
           device: .notJSON("invalid JSON at byte 32: duplicate object key"), sender: .notJSON("invalid JSON at byte 32: duplicate object key")),
    record("type with a NUL", #"{"type":"sealedpush-device-key\u0000","version":1,"key_id":"{KID}","public_key":"{PK}"}"#,
           device: wrongDevice, sender: wrongSender),
    record("version 1.0", #"{"type":"sealedpush-device-key","version":1.0,"key_id":"{KID}","public_key":"{PK}"}"#,
           device: .unsupportedVersion, sender: wrongSender),
    record("version \"1\"", #"{"type":"sealedpush-device-key","version":"1","key_id":"{KID}","public_key":"{PK}"}"#,
           device: .unsupportedVersion, sender: wrongSender),
    record("version Int64.max", #"{"type":"sealedpush-sender-key","version":9223372036854775807,"key_id":"{KID}","public_key":"{PK}"}"#,
           device: wrongDevice, sender: .unsupportedVersion),
    record("key_id uppercase", #"{"type":"sealedpush-device-key","version":1,"key_id":"\#(recordKID.uppercased())","public_key":"{PK}"}"#,
           device: .invalidMember("key_id"), sender: wrongSender),
    record("key_id of another key", #"{"type":"sealedpush-device-key","version":1,"key_id":"0000000000000000","public_key":"{PK}"}"#,
           device: .keyIDMismatch(recorded: "0000000000000000", derived: recordKID), sender: wrongSender),
    record("public_key of 31 bytes", #"{"type":"sealedpush-sender-key","version":1,"key_id":"{KID}","public_key":"\#(Base64.encode(recordKey.bytes.prefix(31)))"}"#,
           device: wrongDevice, sender: .invalidMember("public_key")),
    record("public_key with a space", #"{"type":"sealedpush-sender-key","version":1,"key_id":"{KID}","public_key":" {PK}"}"#,
           device: wrongDevice, sender: .invalidMember("public_key")),
    record("public_key as a number", #"{"type":"sealedpush-device-key","version":1,"key_id":"{KID}","public_key":1e400}"#,
           device: .notJSON("invalid JSON at byte 85: number out of range"), sender: .notJSON("invalid JSON at byte 85: number out of range")),
    record("created_at garbage", #"{"type":"sealedpush-device-key","version":1,"key_id":"{KID}","public_key":"{PK}","created_at":"yesterday"}"#,
           device: .invalidMember("created_at"), sender: wrongSender),
    record("created_at a number", #"{"type":"sealedpush-device-key","version":1,"key_id":"{KID}","public_key":"{PK}","created_at":1800000000}"#,
           device: .invalidMember("created_at"), sender: wrongSender),
]

@Suite("Hostile key records") struct HostileKeyRecordTests {
    @Test("key record readers", arguments: hostileRecords)
    fileprivate func read(_ input: HostileRecord) {
        do {
            let device = try DeviceKeyRecord(jsonBytes: input.text)
            #expect(input.device == nil, "accepted as a device record")
            #expect(device.publicKey == recordKey)
        } catch {
            #expect(error == input.device)
        }
        do {
            let sender = try SenderKeyRecord(jsonBytes: input.text)
            #expect(input.sender == nil, "accepted as a sender record")
            #expect(sender.publicKey.bytes == recordKey.bytes)
        } catch {
            #expect(error == input.sender)
        }
    }
}

extension String {
    /// The same envelope (base64) with its key id bytes replaced.
    fileprivate func replacingKeyID(with keyID: KeyID) throws -> String {
        var bytes = try Base64.decode(self)
        bytes.replaceSubrange(1..<9, with: keyID.bytes)
        return Base64.encode(bytes)
    }
}
