import CFuzzDriver
import FuzzSupport
import SealedPushCrypto
import SealedPushWire

// FuzzReceipts: what a receipt collector reads from the network (receipts v1 §2, §3, reveal v1 §6:
// `ReceiptMessage.parse`, unauthenticated for failure reports). Invariants: whatever parses is within
// the spec's bounds (id 1–64 bytes, a valid token, `at` ≥ 0, count and dropped 1…2³¹−1, a reportable
// reason), and written back with `jsonObject(dropped:)` it parses to the same message and count; an
// input over 4096 bytes never parses.

func fuzzOne(_ bytes: [UInt8]) {
    guard let (message, dropped) = ReceiptMessage.parse(bytes) else { return }
    FuzzFixture.check(bytes.count <= ReceiptMessage.maximumBodyBytes, "a body over 4096 bytes never parses")
    FuzzFixture.check(dropped >= 0 && dropped <= Int(Int32.max), "dropped is within 0…2³¹−1")
    switch message {
    case let .delivered(id, token, at, attachments), let .revealed(id, token, at, attachments):
        FuzzFixture.check((1...64).contains(id.utf8.count), "a receipt's id is 1 to 64 bytes")
        FuzzFixture.check(ReceiptRequest.tokenProblem(token) == nil, "a receipt's token is a valid token")
        FuzzFixture.check(at >= 0, "a receipt's time is not negative")
        if let attachments { FuzzFixture.check(attachments.attached >= 0, "attached counts are not negative") }
    case let .failed(reason, _, at, count):
        FuzzFixture.check(ReceiptMessage.reportableReasons.contains(reason), "a report carries a reportable reason")
        FuzzFixture.check(at >= 0, "a report's time is not negative")
        FuzzFixture.check(count >= 1 && count <= Int(Int32.max), "a report's count is 1…2³¹−1")
    }
    let again = ReceiptMessage.parse(JSON.serialize(.object(message.jsonObject(dropped: dropped))))
    FuzzFixture.check(again?.message == message && again?.dropped == dropped, "a parsed message written back parses to itself")
}

func seeds() -> [[UInt8]] {
    let token = ReceiptRequest.makeToken()
    let kid = KeyID(publicKey: Array(repeating: 7, count: 32))
    let messages: [ReceiptMessage] = [
        .delivered(id: "7qBicKVSOw7J1Lwudzytjg", token: token, at: 1_800_000_000, attachments: nil),
        .delivered(id: "m", token: token, at: 0,
                   attachments: ReceiptAttachmentCounts(attached: 1, failed: ["attachmentTimeExpired": 2])),
        .revealed(id: "7qBicKVSOw7J1Lwudzytjg", token: token, at: 1_800_000_100, attachments: nil),
        .failed(reason: .unknownKey, kid: kid, at: 1_800_000_000, count: 1),
        .failed(reason: .decryptionFailed, kid: nil, at: 5, count: Int(Int32.max)),
    ]
    var out = messages.map { JSON.serialize(.object($0.jsonObject())) }
    out += messages.map { JSON.serialize(.object($0.jsonObject(dropped: 3))) }
    for text in ["{}", "[]", "{\"v\":1,\"type\":\"failed\"}", "{\"v\":1,\"type\":\"delivered\",\"id\":\"\",\"token\":\"\",\"at\":-1}"] {
        out.append(Array(text.utf8))
    }
    return out
}

@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: OpaquePointer?, _ argv: OpaquePointer?) -> CInt {
    // argc/argv are not read (opaque); this hook only writes the seed corpus when asked.
    SeedCorpus.generateIfAsked { seeds() }
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    // libFuzzer hands the input over as a raw pointer and length; it is copied into a [UInt8] at once,
    // as in every harness (the only pointer use outside the crypto module).
    let input = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    fuzzOne(input)
    return 0
}

@_cdecl("FuzzReceipts_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutableRawPointer?) -> CInt {
    // SwiftPM links executables with `--defsym main=FuzzReceipts_main`; hand libFuzzer its argv untouched.
    sealedpush_fuzz_main(argc, argv)
}
