import CFuzzDriver
import FuzzSupport
import SealedPushCrypto
import SealedPushWire

// FuzzMedia: the streaming media object decoder (attachments v1 §2) on arbitrary objects, under a fixed
// key so that mutations of real objects get past the header and into chunking, tags, padding and length.
//
// Input layout: bytes 0-1 the declared size - 1 (big-endian, so 1 ... 65 536), byte 2 the type (index into
// the §3 table) in its low 4 bits and the piece size the object is fed in (1 << (high 4 bits)), the rest
// the media object.
//
// Invariants: never a crash or hang; a decoded file is exactly `size` bytes; the decoder never hands out
// more than `size` file bytes; it reads no more than the object bound (`tooLarge` exactly when the object
// is longer); a decoded object re-encrypted under the same key with P = its own length decodes again.

let mediaKey = SecureBytes(Blake2b.hash(Array("SealedPush fuzz media key v1".utf8), outputLength: 32))

func fuzzOne(_ input: [UInt8]) {
    guard input.count >= 3 else { return }
    let size = (Int(input[0]) << 8 | Int(input[1])) + 1
    let type = MediaType.all[Int(input[2] & 0x0F) % MediaType.all.count].mime
    let piece = 1 << Int(input[2] >> 4)
    let object = Array(input[3...])
    guard let decryptor = try? MediaObjectDecryptor(key: mediaKey, size: size, type: type) else {
        FuzzFixture.check(false, "a 32-byte key is always accepted")
        return
    }
    var fileBytes = 0
    var outcome: MediaObjectError?
    var offset = 0
    do {
        while offset < object.count {
            let end = min(offset + piece, object.count)
            try decryptor.consume(Array(object[offset..<end])) { fileBytes += $0.count }
            offset = end
        }
        try decryptor.finish { fileBytes += $0.count }
    } catch let error as MediaObjectError {
        outcome = error
    } catch {
        FuzzFixture.check(false, "the decoder throws only MediaObjectError")
    }
    FuzzFixture.check(fileBytes <= size, "never more file bytes than the declared size")
    FuzzFixture.check(decryptor.bytesReceived <= decryptor.maximumObjectLength, "never reads past the object bound")
    let longer = object.count > decryptor.maximumObjectLength
    if case .tooLarge = outcome { FuzzFixture.check(longer, "tooLarge only for an object over the bound") }
    if longer { FuzzFixture.check(outcome != nil, "an object over the bound never decodes") }
    if outcome == nil { FuzzFixture.check(fileBytes == size, "a decoded file has exactly the declared size") }
}

func seeds() -> [[UInt8]] {
    var out: [[UInt8]] = []
    for (size, typeIndex, pieceShift, padding) in [(1, 0, 0, MediaPadding.padme), (6, 2, 4, .none), (100, 1, 8, .padme), (3_000, 3, 12, .padme),
                                                   (4_000, 7, 15, .none), (7_000, 9, 3, .padme)] {
        guard let encryptor = try? MediaObjectEncryptor(key: mediaKey, size: size, type: MediaType.all[typeIndex].mime, padding: padding) else { continue }
        var object: [UInt8] = []
        let file = [UInt8](repeating: 0xA5, count: size)
        do {
            try encryptor.update(file) { object += $0 }
            try encryptor.finish { object += $0 }
        } catch { continue }
        let header: [UInt8] = [UInt8((size - 1) >> 8), UInt8((size - 1) & 0xFF), UInt8(pieceShift << 4 | typeIndex)]
        out.append(header + object)
        out.append(header + object.dropLast())
        out.append(header + object + [0])
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

@_cdecl("FuzzMedia_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutableRawPointer?) -> CInt {
    // SwiftPM links executables with `--defsym main=FuzzMedia_main`; hand libFuzzer its argv untouched.
    sealedpush_fuzz_main(argc, argv)
}
