import CFuzzDriver
import FuzzSupport
import SealedPushCrypto
import SealedPushWire

// FuzzOpen: the whole receiver open path (MessageOpener) with real keys, so that most inputs are
// sealed to the fixed device key and the fuzzer explores unpadding, framing, the body JSON, member
// validation, signatures, policy, time and replay rather than bouncing off the sealed box.
//
// Input layout: byte 0 is a control byte, the rest is the payload of the selected mode.
//   bits 0-1  mode: 0 = padded inner plaintext (sealed as is)
//                   1 = inner message (flags || L || body || sig?), padded by the harness
//                   2 = body JSON, framed (and maybe signed) and padded by the harness
//                   3 = raw envelope bytes (base64-encoded by the harness, nothing sealed)
//   bit 2     mode 2: sign with the trusted sender key
//   bit 3     mode 2: sign with the untrusted sender key (wins over bit 2)
//   bit 4     the policy requires signatures
//   bit 5     a fresh replay cache: the message is opened twice, the second must be `replayed`; the
//             first is refused as `replayed` only when issued longer ago than the replay window
//   bit 6     the device key is locked
//   bit 7     modes 0-2: the envelope names a key id the device does not have

struct Control {
    let mode: Int
    let signTrusted: Bool
    let signUntrusted: Bool
    let requireSignature: Bool
    let replay: Bool
    let locked: Bool
    let strangerKeyID: Bool

    init(_ byte: UInt8) {
        mode = Int(byte & 0x03)
        signTrusted = byte & 0x04 != 0
        signUntrusted = byte & 0x08 != 0
        requireSignature = byte & 0x10 != 0
        replay = byte & 0x20 != 0
        locked = byte & 0x40 != 0
        strangerKeyID = byte & 0x80 != 0
    }
}

struct FixedKeys: DeviceKeyProvider {
    let locked: Bool
    func lookUpKey(id keyID: KeyID) -> KeyLookup {
        guard keyID == FuzzFixture.deviceKey.keyID else { return .unknown }
        return locked ? .locked : .found(FuzzFixture.deviceKey)
    }
}

final class OnceReplayGuard: ReplayGuard, @unchecked Sendable {
    // Used by one fuzzing thread only, for one input; never shared between threads.
    private var seen: [String: Int64] = [:]
    func recordIfNew(messageID: String, requestIdentifier: String?, keyID: KeyID, expiresAt: Int64, now: Int64) -> Bool {
        if let until = seen[messageID], until >= now { return false }
        seen[messageID] = expiresAt
        return true
    }
}

let trustedPolicy = ReceiverPolicy(trustedSenders: [FuzzFixture.trustedSender.publicKey])

func pad(_ inner: [UInt8]) -> SecureBytes {
    let length = WireFormat.paddingBuckets.first { $0 > inner.count } ?? inner.count + 1
    return try! ISO7816Padding.pad(SecureBytes(inner), to: length)  // length > inner.count by construction
}

func fuzzOne(_ input: [UInt8]) {
    guard let first = input.first else { return }
    let control = Control(first)
    let rest = Array(input.dropFirst())

    // Build the ENCRYPTED_DATA value for the selected mode.
    let padded: SecureBytes?
    switch control.mode {
    case 0: padded = SecureBytes(rest)
    case 1: padded = pad(rest)
    case 2:
        let body = SecureBytes(rest.prefix(InnerMessage.maxBodyBytes))
        let signer = control.signUntrusted ? FuzzFixture.untrustedSender : (control.signTrusted ? FuzzFixture.trustedSender : nil)
        padded = pad(InnerMessage.frame(body: body, recipient: FuzzFixture.deviceKey.keyID, signer: signer).unsafeCopyToArray())
    default: padded = nil
    }
    let encryptedData: String
    if let padded {
        // libsodium's own crypto_box_seal: the open path is under test, and the Swift fast-ephemeral-key
        // path is slow in a debug build with coverage (it is covered by the crypto tests).
        let box = try! SealedBox.sealReference(padded, to: FuzzFixture.deviceKey.publicKey)  // a valid point
        let keyID = control.strangerKeyID ? FuzzFixture.strangerKeyID : FuzzFixture.deviceKey.keyID
        encryptedData = Envelope(keyID: keyID, sealedBox: box).base64
    } else {
        encryptedData = Base64.encode(rest)
    }

    var policy = trustedPolicy
    policy.requireSignature = control.requireSignature
    let replayGuard = control.replay ? OnceReplayGuard() : nil
    let opener = MessageOpener(keys: FixedKeys(locked: control.locked), policy: policy, replayGuard: replayGuard)

    do {
        let opened = try opener.open(encryptedData: encryptedData, now: FuzzFixture.now)
        checkOpened(opened, control: control, policy: policy)
        if control.replay {
            do {
                _ = try opener.open(encryptedData: encryptedData, now: FuzzFixture.now)
                FuzzFixture.check(false, "a message opened twice with one replay cache")
            } catch {
                FuzzFixture.check(error.reason == .replayed, "the second opening is refused as replayed")
            }
        }
    } catch {
        checkFailure(error, control: control, padded: padded)
        if control.replay && error.reason == .replayed {
            // On first use the only replay refusal is the window rule: without the cache the message
            // opens, and it was issued longer ago than the replay window (plus the skew).
            let unguarded = MessageOpener(keys: FixedKeys(locked: control.locked), policy: policy)
            let opened = try? unguarded.open(encryptedData: encryptedData, now: FuzzFixture.now)
            FuzzFixture.check(opened != nil, "a first-use replay refusal opens without the replay cache")
            if let opened {
                let windowEnd = opened.body.issuedAt.addingReportingOverflow(policy.replayWindowSeconds + policy.clockSkewSeconds)
                FuzzFixture.check(!windowEnd.overflow && windowEnd.partialValue < FuzzFixture.now,
                                  "a fresh replay cache refuses on first use only a message older than the replay window")
            }
        }
    }
}

/// A decrypted message re-validates: its raw body parses back to itself and validates to the same
/// body; it is addressed to this device; its signature and time fit the policy; sealed again it
/// opens to the same body.
func checkOpened(_ opened: OpenedMessage, control: Control, policy: ReceiverPolicy) {
    let device = FuzzFixture.deviceKey.keyID
    FuzzFixture.check(!control.locked && !(control.strangerKeyID && control.mode != 3), "no message opens with a locked or absent key")
    FuzzFixture.check(opened.keyID == device && opened.body.kid == device, "an opened message is addressed to this device")
    FuzzFixture.check((try? MessageBody(validating: opened.rawBody)) == opened.body, "the raw body re-validates to the same body")
    let reparsed = try? JSON.parse(JSON.serialize(.object(opened.rawBody)))
    FuzzFixture.check(reparsed == .object(opened.rawBody), "the raw body survives serialize and parse")
    FuzzFixture.check(opened.signedBy == nil || opened.signedBy == opened.body.sender, "signedBy names the body's sender")
    if let signer = opened.signedBy { FuzzFixture.check(policy.trustedSenders[signer] != nil, "only trusted senders sign") }
    if control.mode == 2 && control.signUntrusted { FuzzFixture.check(false, "an untrusted signature never opens") }
    if control.requireSignature { FuzzFixture.check(opened.signedBy != nil, "a required signature is present") }
    let body = opened.body
    if let exp = body.expiresAt { FuzzFixture.check(exp >= FuzzFixture.now - FuzzFixture.skew, "not expired") }
    FuzzFixture.check(body.issuedAt <= FuzzFixture.now + FuzzFixture.skew, "not issued in the future")
    FuzzFixture.check(body.alert.hasVisibleText, "an opened message has visible text")
    FuzzFixture.check(body.data?["aps"] == nil, "data never holds aps")
    // Sealed again through the sender path (when it fits a payload), it opens to the same body.
    if let envelope = try? MessageSealer.seal(body: body, to: FuzzFixture.deviceKey.publicKey, signer: nil, padding: .none,
                                              payloadOverhead: 120) {
        let again = try? MessageOpener(keys: FixedKeys(locked: false), policy: trustedPolicy)
            .open(encryptedData: envelope.base64, now: FuzzFixture.now)
        FuzzFixture.check(again?.body == body, "a re-sealed body opens to the same body")
    }
}

/// A refusal carries the reason the mode makes possible.
func checkFailure(_ failure: OpenFailure, control: Control, padded: SecureBytes?) {
    let reason = failure.reason
    guard let padded else {
        // Mode 3: arbitrary envelope bytes; nothing can open with a random box except by accident.
        // (An unmodified seed envelope sealed to this device opens, and can then only fail the policy.)
        FuzzFixture.check([.malformedPayload, .unsupportedVersion, .unknownKey, .keychainLocked, .decryptionFailed,
                           .signatureRequired].contains(reason), "envelope failures are shape, key or box failures")
        return
    }
    if padded.count == 0 {
        FuzzFixture.check(reason == .malformedPayload, "an empty padded inner gives a too-short envelope")
        return
    }
    if control.strangerKeyID { FuzzFixture.check(reason == .unknownKey, "a stranger key id is unknownKey"); return }
    if control.locked { FuzzFixture.check(reason == .keychainLocked, "a locked key is keychainLocked"); return }
    FuzzFixture.check(![.malformedPayload, .unsupportedVersion, .unknownKey, .decryptionFailed, .keychainLocked].contains(reason),
                      "a box sealed to this device passes the envelope, key and box checks")
    if control.mode >= 1 { FuzzFixture.check(reason != .badPadding, "harness padding is valid") }
    // (A body signed by the untrusted key may still name the trusted sender: that is badSignature.)
    if control.mode == 2 && (control.signTrusted || control.signUntrusted) {
        FuzzFixture.check(reason != .signatureRequired, "a signed message never lacks a signature")
    }
    FuzzFixture.check(!failure.detail.isEmpty, "every failure explains itself")
}

func seeds() -> [[UInt8]] {
    var out: [[UInt8]] = []
    let now = FuzzFixture.now
    let trusted = FuzzFixture.trustedSender
    let bodies: [MessageBody] = [
        FuzzFixture.body(),
        FuzzFixture.body(expiresAt: now + 3600),
        FuzzFixture.body(issuedAt: now - 100_000, expiresAt: now - 1000),
        FuzzFixture.body(issuedAt: now + 10_000),
        FuzzFixture.body(sender: trusted.keyID),
        FuzzFixture.body(title: "", text: "ünïcødé 🔐 \u{0}"),
        FuzzFixture.bodyWithAttachments(["image/jpeg"]),
        FuzzFixture.bodyWithAttachments(["image/png", "audio/mpeg", "video/mp4", "image/webp"]),
        MessageBody(kid: FuzzFixture.deviceKey.keyID, id: "x", issuedAt: now, expiresAt: now + 60,
                    alert: .init(title: "t", subtitle: "s", body: "b"), threadID: "thread", category: "SECRET", sound: "default",
                    badge: 3, data: JSONObject([("k", .array([.int(1), .double(2.5), .null, .bool(true)]))]), sender: trusted.keyID),
    ]
    for body in bodies {
        let json = JSON.serialize(.object(body.jsonObject))
        out.append([0x02] + json)                                    // unsigned body
        out.append([0x06] + json)                                    // signed by the trusted key
        out.append([0x16] + json)                                    // signature required
        out.append([0x22] + json)                                    // replay cache
        out.append([0x01] + SeedCorpus.inner(body, signer: nil))    // framed inner
        out.append([0x01] + SeedCorpus.inner(body, signer: trusted))
        out.append([0x00] + SeedCorpus.paddedInner(body, signer: nil))
        out.append([0x00] + SeedCorpus.paddedInner(body, signer: trusted, paddedLength: 512))
    }
    // Descriptors the parser must refuse as malformedMessage.
    for json in FuzzFixture.hostileAttachmentBodies() { out.append([0x02] + json) }
    // Raw envelopes: the shared vectors (sealed to other keys) and one sealed to this device.
    for text in (try? SeedCorpus.vectorEncryptedData()) ?? [] {
        if let raw = try? Base64.decode(text) { out.append([0x03] + raw) }
    }
    if let envelope = try? MessageSealer.seal(body: bodies[0], to: FuzzFixture.deviceKey.publicKey, signer: nil, padding: .bucket,
                                              payloadOverhead: 120) {
        out.append([0x03] + envelope.bytes)
    }
    // A few hand-made bodies at the edges of the member rules.
    let kid = FuzzFixture.deviceKey.keyID.hex
    for text in [
        #"{"kid":"\#(kid)","id":"a","iat":9223372036854775807,"exp":-9223372036854775808,"alert":{"body":"x"}}"#,
        #"{"kid":"\#(kid)","id":"a","iat":1800000000,"alert":{"body":"x"},"badge":1e400}"#,
        #"{"kid":"\#(kid)","id":"a","iat":1800000000,"alert":{"body":"x"},"data":{"aps":{}}}"#,
        #"{"kid":"\#(kid)","id":"a","id":"b","iat":1800000000,"alert":{"body":"x"}}"#,
        #"{"kid":"\#(kid)","id":"\ud800","iat":1800000000,"alert":{"title":"\u0000"}}"#,
        #"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"#,
    ] {
        out.append([0x02] + Array(text.utf8))
    }
    return out
}

@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: OpaquePointer?, _ argv: OpaquePointer?) -> CInt {
    // argc/argv are not read (opaque); this hook only writes the seed corpus when asked.
    SeedCorpus.generateIfAsked { seeds() }
    _ = FuzzFixture.deviceKey  // derive the keys before the first input
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    // libFuzzer hands the input over as a raw pointer and length. It is copied into a [UInt8] at
    // once; this (and the other harnesses' identical line) is the only pointer use outside the
    // crypto module.
    let input = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    fuzzOne(input)
    return 0
}

@_cdecl("FuzzOpen_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutableRawPointer?) -> CInt {
    // SwiftPM links executables with `--defsym main=FuzzOpen_main`; hand libFuzzer its argv untouched.
    sealedpush_fuzz_main(argc, argv)
}
