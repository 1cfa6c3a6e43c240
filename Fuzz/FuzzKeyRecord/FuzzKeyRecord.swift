import Foundation
import CFuzzDriver
import FuzzSupport
import SealedPushCrypto
import SealedPushWire

// FuzzKeyRecord: the key-record readers of wire format §6 on arbitrary bytes. A record that is
// accepted must have a key id derived from its public key, and must survive being written out and
// read back (same key, same bytes the second time round).

func fuzzOne(_ bytes: [UInt8]) {
    if let record = try? DeviceKeyRecord(jsonBytes: bytes) {
        FuzzFixture.check(record.keyID == KeyID(publicKey: record.publicKey.bytes), "the key id is derived from the key")
        let written = record.jsonBytes
        let again = try? DeviceKeyRecord(jsonBytes: written)
        FuzzFixture.check(again?.publicKey == record.publicKey, "a written device record reads back")
        FuzzFixture.check((again?.createdAt == nil) == (record.createdAt == nil), "created_at survives a round trip")
        if let a = again?.createdAt, let b = record.createdAt {
            FuzzFixture.check(abs(a.timeIntervalSince(b)) < 1, "created_at survives a round trip to the second")
        }
        FuzzFixture.check(again?.jsonBytes == written, "writing a record is stable")
    }
    if let record = try? SenderKeyRecord(jsonBytes: bytes) {
        FuzzFixture.check(record.keyID == KeyID(publicKey: record.publicKey.bytes), "the key id is derived from the key")
        let again = try? SenderKeyRecord(jsonBytes: record.jsonBytes)
        FuzzFixture.check(again == record, "a written sender record reads back")
    }
    // Both readers agree a record is never both kinds.
    FuzzFixture.check(!((try? DeviceKeyRecord(jsonBytes: bytes)) != nil && (try? SenderKeyRecord(jsonBytes: bytes)) != nil),
                      "a record has one type")
}

func seeds() -> [[UInt8]] {
    let device = DeviceKeyRecord(publicKey: FuzzFixture.deviceKey.publicKey, createdAt: Date(timeIntervalSince1970: 1_800_000_000))
    let sender = SenderKeyRecord(publicKey: FuzzFixture.trustedSender.publicKey)
    let kid = device.keyID.hex
    let pk = Base64.encode(device.publicKey.bytes)
    var out = [device.jsonBytes, DeviceKeyRecord(publicKey: FuzzFixture.deviceKey.publicKey, createdAt: nil).jsonBytes, sender.jsonBytes]
    for text in [
        #"{"type":"sealedpush-device-key","version":1,"key_id":"\#(kid)","public_key":"\#(pk)","created_at":"2026-11-21T12:00:00.123Z"}"#,
        #"{"type":"sealedpush-device-key","version":1,"key_id":"\#(kid)","public_key":"\#(pk)","created_at":"9999-12-31T23:59:59Z"}"#,
        #"{"type":"sealedpush-device-key","version":1,"key_id":"\#(kid)","public_key":"\#(pk)","created_at":"0001-01-01T00:00:00Z"}"#,
        #"{"type":"sealedpush-device-key","version":1.0,"key_id":"\#(kid)","public_key":"\#(pk)"}"#,
        #"{"type":"sealedpush-device-key","version":1,"key_id":"\#(kid.uppercased())","public_key":"\#(pk)"}"#,
        #"{"type":"sealedpush-sender-key","version":1,"key_id":"0000000000000000","public_key":"\#(pk)"}"#,
        #"{"type":"sealedpush-sender-key","version":1,"key_id":"\#(kid)","public_key":"\#(pk)","type":"x"}"#,
    ] {
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
    // libFuzzer hands the input over as a raw pointer and length. It is copied into a [UInt8] at
    // once; this (and the other harnesses' identical line) is the only pointer use outside the
    // crypto module.
    let input = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    fuzzOne(input)
    return 0
}

@_cdecl("FuzzKeyRecord_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutableRawPointer?) -> CInt {
    // SwiftPM links executables with `--defsym main=FuzzKeyRecord_main`; hand libFuzzer its argv untouched.
    sealedpush_fuzz_main(argc, argv)
}
