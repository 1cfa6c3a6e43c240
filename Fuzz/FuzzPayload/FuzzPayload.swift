import Dispatch
import CFuzzDriver
import FuzzSupport
import Logging
import SealedPushCrypto
import SealedPushDevice
import SealedPushReceiver
import SealedPushTestSupport
import SealedPushWire
import Synchronization

// FuzzPayload: the device-side path for a whole APNs payload. The input is the payload file's bytes.
// The simulator's checks run synchronously here (parse, size, mutable-content, alert), then the
// real SecretMessageExtension handles the request; for a sample of inputs the asynchronous
// DeviceSimulator.deliver runs as well and must agree with the synchronous result.

let quiet = Logger(label: "fuzz", factory: { _ in SwiftLogNoOpLogHandler() })
let keys = FixedKeys()
let policy = ReceiverPolicy(trustedSenders: [FuzzFixture.trustedSender.publicKey])

struct FixedKeys: DeviceKeyProvider {
    func lookUpKey(id keyID: KeyID) -> KeyLookup {
        keyID == FuzzFixture.deviceKey.keyID ? .found(FuzzFixture.deviceKey) : .unknown
    }
}

func makeExtension() -> SecretMessageExtension {
    SecretMessageExtension(configuration: .init(keys: keys, policy: { policy }, clock: .fixed(unixSeconds: FuzzFixture.now), logger: quiet))
}

/// What the device shows, computed synchronously with the simulator's rules.
func expectedResult(_ bytes: [UInt8]) -> DeliveryResult {
    guard case let .object(payload)? = try? JSON.parse(bytes), case .object? = payload["aps"] else {
        return DeliveryResult(outcome: .rejected, reason: .invalidPayload, notification: nil)
    }
    guard bytes.count <= WireFormat.maxPayloadBytes else {
        return DeliveryResult(outcome: .rejected, reason: .payloadTooLarge, notification: nil)
    }
    let request = NotificationRequest(identifier: "fuzz", payload: payload)
    FuzzFixture.check(request.content.userInfo == payload, "userInfo is the whole payload")
    let aps = payload["aps"]?.objectValue ?? JSONObject()
    guard aps["mutable-content"] == .int(1) else {
        return DeliveryResult(outcome: .original, reason: .notMutable, notification: request.content)
    }
    guard request.content.hasAlertText else {
        return DeliveryResult(outcome: .original, reason: .noAlert, notification: request.content)
    }

    // The envelope check on its own, to compare with the extension's reason.
    var envelopeFailure: ReasonCode?
    switch payload[WireFormat.encryptedDataKey] {
    case let .string(text)?:
        do { _ = try Envelope(base64: text) } catch { envelopeFailure = error.reason }
    case .some: envelopeFailure = .malformedPayload
    case nil: break
    }

    let ext = makeExtension()
    let delivery = ext.open(request)  // the extension's synchronous text stage
    let content = delivery.content
    FuzzFixture.check(content.hasAlertText, "the extension never removes the alert text")

    guard payload[WireFormat.encryptedDataKey] != nil else {
        FuzzFixture.check(delivery.outcome == .notEncrypted && content == request.content, "a plain payload passes through unchanged")
        return DeliveryResult(outcome: .original, reason: .notEncrypted, notification: content)
    }
    if let envelopeFailure { FuzzFixture.check(delivery.outcome == .fallback(envelopeFailure), "the extension reports the envelope's reason") }
    if delivery.outcome == .decrypted {
        FuzzFixture.check(content.userInfo["aps"] == request.content.userInfo["aps"], "a decrypted message never replaces aps")
        return DeliveryResult(outcome: .decrypted, reason: nil, notification: content)
    }
    // A fallback shows the placeholder, body "(Encrypted)", without ENCRYPTED_DATA, and nothing else changes.
    guard case let .fallback(reason) = delivery.outcome else {
        FuzzFixture.check(false, "an encrypted payload either opens or falls back")
        return DeliveryResult(outcome: .original, reason: nil, notification: content)
    }
    FuzzFixture.check(content.body == SecretMessageExtension.placeholderText, "a fallback shows (Encrypted)")
    FuzzFixture.check(content.title == request.content.title && content.subtitle == request.content.subtitle,
                      "a fallback keeps the placeholder's title and subtitle")
    // Reveal v1 revision 2: a fallback also drops ENCRYPTED_DATA (nothing openable is handed to iOS).
    var expectedUserInfo = request.content.userInfo
    expectedUserInfo[WireFormat.encryptedDataKey] = nil
    FuzzFixture.check(content.userInfo[WireFormat.encryptedDataKey] == nil, "a fallback hands iOS no ENCRYPTED_DATA")
    FuzzFixture.check(content.userInfo == expectedUserInfo && content.badge == request.content.badge
                      && content.sound == request.content.sound, "a fallback changes nothing but the body and ENCRYPTED_DATA")
    return DeliveryResult(outcome: .fallback, reason: reason, notification: content)
}

/// Runs the asynchronous simulator to completion from the fuzzing thread (not a pool thread).
func simulate(_ bytes: [UInt8]) -> DeliveryResult {
    let simulator = DeviceSimulator(options: .init(timeLimit: .seconds(10))) { makeExtension() }
    let result = Mutex<DeliveryResult?>(nil)
    let done = DispatchSemaphore(value: 0)
    Task {
        let r = await simulator.deliver(payload: bytes, identifier: "fuzz")
        result.withLock { $0 = r }
        done.signal()
    }
    done.wait()
    return result.withLock { $0 }!
}

func fuzzOne(_ bytes: [UInt8]) {
    // The strict parser: whatever it accepts serializes and parses back to the same value.
    if let value = try? JSON.parse(bytes) {
        FuzzFixture.check((try? JSON.parse(JSON.serialize(value))) == value, "JSON survives serialize and parse")
    }
    let expected = expectedResult(bytes)
    // The real simulator (threads, polling) for one input in 32, chosen by content so runs repeat.
    if Blake2b.hash(bytes, outputLength: 16)[0] & 0x1f == 0 {
        var simulated = simulate(bytes)
        FuzzFixture.check(simulated.requestID == "fuzz", "DeviceSimulator.deliver reports the request identifier it was given")
        simulated.requestID = nil
        FuzzFixture.check(simulated == expected, "DeviceSimulator.deliver agrees with the synchronous checks")
    }
}

func seeds() throws -> [[UInt8]] {
    var out: [[UInt8]] = []
    for text in try SeedCorpus.vectorEncryptedData() { out.append(TestPayloads.wrap(encryptedData: text)) }
    let device = FuzzFixture.deviceKey.publicKey
    let now = FuzzFixture.now
    let trusted = FuzzFixture.trustedSender
    for (body, signer) in [(FuzzFixture.body(), nil), (FuzzFixture.body(sender: trusted.keyID), trusted),
                           (FuzzFixture.body(issuedAt: now - 10_000, expiresAt: now - 1000), nil),
                           (FuzzFixture.body(sender: FuzzFixture.untrustedSender.keyID), FuzzFixture.untrustedSender),
                           (FuzzFixture.bodyWithAttachments(["image/jpeg", "audio/wav"]), nil)] {
        out.append(try TestPayloads.payload(body: body, to: device, signer: signer))
    }
    for text in [
        #"{"aps":{"alert":"hi","mutable-content":1},"ENCRYPTED_DATA":"AQ=="}"#,
        #"{"aps":{"alert":{"title":"t"},"mutable-content":"1"},"ENCRYPTED_DATA":"x"}"#,
        #"{"aps":{"alert":{"title":"t"},"mutable-content":1},"ENCRYPTED_DATA":12}"#,
        #"{"aps":{"alert":{"title":"t"},"mutable-content":1,"badge":-9223372036854775808,"sound":{"name":"n"}}}"#,
        #"{"aps":{"alert":{},"mutable-content":1}}"#,
        #"{"aps":[],"ENCRYPTED_DATA":""}"#,
        #"{"aps":{"alert":"\ud83d\ude00","mutable-content":1},"ENCRYPTED_DATA":null}"#,
        #"{"aps":{"alert":"x","mutable-content":1,"mutable-content":1}}"#,
        #"[1,-0,1e400,0.5e-3,true,false,null,"\u0000"]"#,
    ] {
        out.append(Array(text.utf8))
    }
    return out
}

@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: OpaquePointer?, _ argv: OpaquePointer?) -> CInt {
    // argc/argv are not read (opaque); this hook only writes the seed corpus when asked.
    SeedCorpus.generateIfAsked { try seeds() }
    _ = FuzzFixture.deviceKey
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

@_cdecl("FuzzPayload_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutableRawPointer?) -> CInt {
    // SwiftPM links executables with `--defsym main=FuzzPayload_main`; hand libFuzzer its argv untouched.
    sealedpush_fuzz_main(argc, argv)
}
