import CFuzzDriver
import Foundation
import FuzzSupport
import SealedPushCrypto
@testable import SealedPushKeychain
import SealedPushWire

// FuzzKeychainItem: the keychain item-file decoder (`ItemFile(bytes:path:expected:)`: header JSON
// line, base64 sealed-secret line) and the authenticated open under a fixed store key. The decoder
// is internal to SealedPushKeychain, hence `@testable import` (debug builds enable testability).
// Invariants: a header that parses writes back to a header that parses to the same value; a file
// that opens re-encodes to a file that opens to the same secret.

let storeKey = SecureBytes(Blake2b.hash(Array("SealedPush fuzz store key v1".utf8), outputLength: 32), guarded: true)

func fuzzOne(_ bytes: [UInt8]) {
    guard let file = try? ItemFile(bytes: bytes, path: "fuzz.item", expected: nil) else { return }
    let again = try? ItemHeader(jsonBytes: file.header.jsonBytes, path: "fuzz.item")
    FuzzFixture.check(again == file.header, "an item header survives being written and read back")
    _ = try? ItemFile(bytes: bytes, path: "fuzz.item", expected: file.header.identity)
    guard let secret = try? file.open(storeKey: storeKey) else { return }
    guard let encoded = try? ItemFile.encode(header: file.header, data: secret, storeKey: storeKey) else {
        FuzzFixture.check(false, "an opened item re-encodes")
        return
    }
    let reopened = try? ItemFile(bytes: encoded, path: "fuzz.item", expected: file.header.identity).open(storeKey: storeKey)
    FuzzFixture.check(reopened == secret, "a re-encoded item opens to the same secret")
}

func seeds() throws -> [[UInt8]] {
    let created = Date(timeIntervalSince1970: 1_800_000_000)
    let headers = [
        ItemHeader(itemClass: .key, accessGroup: "group.sealedpush", service: "sealedpush.device", account: "active",
                   label: "device key", accessibility: .afterFirstUnlockThisDeviceOnly, applicationTag: [1, 2, 3],
                   created: created, modified: created),
        ItemHeader(itemClass: .genericPassword, accessGroup: "g", service: "s", account: "a\u{0}ü/..%",
                   label: nil, accessibility: .whenUnlocked, applicationTag: nil, created: created, modified: created.addingTimeInterval(1)),
    ]
    var out: [[UInt8]] = []
    for header in headers {
        for secret in [[], [0x80], Array(repeating: UInt8(7), count: 32), Array(repeating: UInt8(0), count: 200)] {
            out.append(try ItemFile.encode(header: header, data: SecureBytes(secret), storeKey: storeKey))
        }
    }
    for text in ["\n\n", "{}\nAAAA\n", "{\"format\":\"sealedpush-keychain-item\",\"version\":1}\n=\n"] { out.append(Array(text.utf8)) }
    return out
}

@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: OpaquePointer?, _ argv: OpaquePointer?) -> CInt {
    // argc/argv are not read (opaque); this hook only writes the seed corpus when asked.
    SeedCorpus.generateIfAsked { try seeds() }
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

@_cdecl("FuzzKeychainItem_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutableRawPointer?) -> CInt {
    // SwiftPM links executables with `--defsym main=FuzzKeychainItem_main`; hand libFuzzer its argv untouched.
    sealedpush_fuzz_main(argc, argv)
}
