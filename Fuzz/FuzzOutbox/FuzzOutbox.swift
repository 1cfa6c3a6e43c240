import CFuzzDriver
import FuzzSupport
import SealedPushCrypto
@testable import SealedPushKeychain
import SealedPushWire

// FuzzOutbox: the device's receipt outbox item (its decrypted secret), which the device reads back on every
// delivery and `device status` (receipts v1 §2; `ReceiptOutboxStore.decodeOutbox`, internal, reached with
// `@testable import` in the debug build, over SealedPushWire's `ReceiptOutboxState`, which the app group outbox
// decodes with too), and the recovery that replaces an item not as written.
// Invariants: a decoded outbox re-encodes to bytes that decode and re-encode to the same bytes; every decoded
// entry has a positive sequence, a URL with an origin and a body the collector's parser accepts; recovery
// never fails, is readable, and counts every entry the old item listed (or one, when none can be read) as dropped.

func fuzzOne(_ bytes: [UInt8]) {
    let secret = SecureBytes(bytes)
    guard let outbox = ReceiptOutboxStore.decodeOutbox(secret) else {
        let fresh = ReceiptOutboxStore.recovered(from: secret)
        FuzzFixture.check(fresh.entries.isEmpty, "a recovered outbox is empty")
        // What it lost: every entry the old item listed, or one when it listed none that can be read.
        if case let .object(o)? = try? JSON.parse(bytes), case let .array(list)? = o["entries"] {
            FuzzFixture.check(fresh.totalDropped >= list.count, "a recovered outbox counts every entry it lost")
        } else {
            FuzzFixture.check(fresh.totalDropped >= 1, "a recovered outbox counts what it lost")
        }
        FuzzFixture.check(ReceiptOutboxStore.decodeOutbox(SecureBytes(fresh.encoded())) != nil,
                          "a recovered outbox is readable")
        return
    }
    for entry in outbox.entries {
        FuzzFixture.check(entry.sequence >= 1, "an entry's sequence is positive")
        FuzzFixture.check(HTTPURL(entry.url)?.origin != nil, "an entry's URL has an origin")
        FuzzFixture.check(outbox.origins[HTTPURL(entry.url)?.origin ?? ""] != nil, "every entry's origin has a queue")
    }
    let once = outbox.encoded()
    guard let again = ReceiptOutboxStore.decodeOutbox(SecureBytes(once)) else {
        FuzzFixture.check(false, "an outbox that decodes re-encodes to one that decodes")
        return
    }
    FuzzFixture.check(again.encoded() == once, "decode and encode are stable")
}

func seeds() -> [[UInt8]] {
    let token = ReceiptRequest.makeToken()
    var outbox = ReceiptOutboxState()
    outbox.entries = [
        ReceiptOutboxEntry(sequence: 1, url: "https://a.example/r", message: .delivered(id: "m1", token: token, at: 1_800_000_000, attachments: nil),
                           queuedAt: 1_800_000_000),
        ReceiptOutboxEntry(sequence: 2, url: "http://127.0.0.1:8089/r",
                           message: .failed(reason: .unknownKey, kid: nil, at: 1_800_000_001, count: 3), queuedAt: 1_800_000_001),
    ]
    outbox.next = 3
    outbox.origins["https://a.example:443"] = .init(dropped: 2, failures: 1, retryAt: 1_800_000_060, touched: 1_800_000_000)
    var out = [outbox.encoded(), ReceiptOutboxState().encoded()]
    // The format before per-origin queues: no "origins" member.
    out.append(Array(#"{"next":2,"dropped":1,"entries":[{"seq":1,"url":"https://b.example/r","queued_at":5,"body":{"v":1,"type":"delivered","id":"x","token":"leSLeiHU1ME6svkg7Bq3Yw","at":5}}]}"#.utf8))
    for text in ["{}", "[]", #"{"next":0,"dropped":0,"entries":[]}"#, #"{"next":1,"dropped":-1,"entries":[{}]}"#] { out.append(Array(text.utf8)) }
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

@_cdecl("FuzzOutbox_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutableRawPointer?) -> CInt {
    // SwiftPM links executables with `--defsym main=FuzzOutbox_main`; hand libFuzzer its argv untouched.
    sealedpush_fuzz_main(argc, argv)
}
