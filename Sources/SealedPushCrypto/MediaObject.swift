#if canImport(Clibsodium)
import Clibsodium  // iOS and macOS, AppleSodium trait: swift-sodium's libsodium
#elseif canImport(CSodium)
import CSodium  // Linux: the system libsodium
#endif  // neither: Sodium.swift stops the build with #error, naming the AppleSodium trait

/// The arithmetic of an encrypted media object (attachments v1 §2): Padmé, padded and object lengths, the
/// additional data every chunk carries.
public enum MediaObjectFormat {
    /// Plaintext bytes per chunk (65 536); the last chunk holds 1 to this many.
    public static let chunkSize = 65_536
    /// Prefix of every chunk's additional data (19 ASCII bytes; a `0x00` byte follows it).
    public static let additionalDataLabel = Array("SealedPush-v1-media".utf8)

    /// Padmé (Nikitin et al., PETS 2019): `L` rounded up so that only O(log log L) bits of it remain.
    public static func padme(_ length: Int) -> Int {
        precondition(length >= 0, "padme of a negative length")
        guard length >= 4 else { return length }
        let e = Int.bitWidth - 1 - length.leadingZeroBitCount  // floor(log2 L)
        let s = (Int.bitWidth - 1 - e.leadingZeroBitCount) + 1  // floor(log2 E) + 1
        let z = e - s
        let mask = (1 << z) - 1
        return (length + mask) & ~mask
    }

    /// The padded plaintext lengths a receiver accepts for a file of `size` bytes: `size + 1 ... padme(size + 1)`.
    public static func paddedLengthBounds(size: Int) -> ClosedRange<Int> { (size + 1)...padme(size + 1) }

    /// The number of chunks for a padded length `P`: `ceil(P / 65536)`.
    public static func chunkCount(paddedLength: Int) -> Int { (paddedLength + chunkSize - 1) / chunkSize }

    /// The object's length for a padded length `P`: `24 + P + 17·ceil(P / 65536)`.
    public static func objectLength(paddedLength: Int) -> Int {
        SecretStream.headerByteCount + paddedLength + SecretStream.chunkOverhead * chunkCount(paddedLength: paddedLength)
    }

    /// The most bytes a receiver reads for a file of `size` bytes (the object length at `padme(size + 1)`).
    public static func maximumObjectLength(size: Int) -> Int { objectLength(paddedLength: padme(size + 1)) }

    /// Every chunk's additional data: `"SealedPush-v1-media" || 0x00 || size (8 bytes, big-endian) || type`.
    public static func additionalData(size: Int, type: String) -> [UInt8] {
        var ad = additionalDataLabel
        ad.append(0)
        let s = UInt64(size)
        for shift in stride(from: 56, through: 0, by: -8) { ad.append(UInt8(truncatingIfNeeded: s >> UInt64(shift))) }
        ad += Array(type.utf8)
        return ad
    }
}

/// How much a sender pads a media object.
public enum MediaPadding: String, Sendable, CaseIterable {
    /// `P = padme(size + 1)`: the default.
    case padme
    /// `P = size + 1`: no more than the padding marker.
    case none

    /// The padded length for a file of `size` bytes.
    public func paddedLength(size: Int) -> Int {
        switch self {
        case .padme: return MediaObjectFormat.padme(size + 1)
        case .none: return size + 1
        }
    }
}

/// Why a media object could not be made or read (attachments v1 §2, §4). Never carries content.
public enum MediaObjectError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The object is longer than the most a receiver reads for its declared size (`attachmentTooLarge`).
    case tooLarge(limit: Int)
    /// The object does not decrypt to exactly the declared file (`attachmentCorrupt`): the detail says which check.
    case corrupt(String)
    /// The sender was given a different number of file bytes than it declared.
    case sizeMismatch(declared: Int, given: Int)

    /// A sentence saying what happened.
    public var description: String {
        switch self {
        case let .tooLarge(limit):
            return "the media object is longer than the \(limit) bytes its declared size allows"
        case let .corrupt(why):
            return "the media object is corrupt: \(why)"
        case let .sizeMismatch(declared, given):
            return "the file changed while it was encrypted: \(declared) bytes were declared but \(given) were read; try again"
        }
    }
}

/// Encrypts one file into a media object, chunk by chunk: holds one 64 KiB chunk at a time, in wiped memory.
///
/// Give it the file's bytes in any pieces with `update(_:output:)`, then call `finish(output:)`; `output`
/// receives the header and then each encrypted chunk in order. Not `Sendable`: one task drives it.
public final class MediaObjectEncryptor {
    /// The file's exact length in bytes.
    public let size: Int
    /// The padded plaintext length `P`.
    public let paddedLength: Int
    /// The object's exact length in bytes.
    public let objectLength: Int
    private let stream: SecretStreamPush
    private let additionalData: [UInt8]
    private var chunk: SecureBytes
    private var filled = 0
    private var consumed = 0
    private var emitted = 0
    private var headerSent = false
    private var output: [UInt8]

    /// An encryptor for a file of `size` bytes of MIME `type`, under a fresh 32-byte `key`.
    public init(key: SecureBytes, size: Int, type: String, padding: MediaPadding = .padme) throws(CryptoError) {
        precondition(size >= 0, "a file size cannot be negative")
        self.size = size
        paddedLength = padding.paddedLength(size: size)
        objectLength = MediaObjectFormat.objectLength(paddedLength: paddedLength)
        stream = try SecretStreamPush(key: key)
        additionalData = MediaObjectFormat.additionalData(size: size, type: type)
        chunk = SecureBytes(zeros: MediaObjectFormat.chunkSize)
        output = [UInt8](repeating: 0, count: MediaObjectFormat.chunkSize + SecretStream.chunkOverhead)
    }

    /// Encrypts the next file bytes; `output` receives whatever object bytes are ready, as new arrays. Throws what `output` throws, or `MediaObjectError.sizeMismatch` past `size` bytes.
    public func update(_ bytes: UnsafeRawBufferPointer, output sink: ([UInt8]) throws -> Void) throws {
        try sendHeader(sink)
        guard consumed + bytes.count <= size else { throw MediaObjectError.sizeMismatch(declared: size, given: consumed + bytes.count) }
        var offset = 0
        while offset < bytes.count {
            let n = min(bytes.count - offset, MediaObjectFormat.chunkSize - filled)
            chunk.withUnsafeMutableBytes { dst in
                (dst.baseAddress! + filled).copyMemory(from: bytes.baseAddress! + offset, byteCount: n)
            }
            filled += n
            offset += n
            consumed += n
            // A full chunk of file bytes is never the last: at least the 0x80 marker follows it.
            if filled == MediaObjectFormat.chunkSize { try emit(tag: .message, sink) }
        }
    }

    /// Encrypts the next file bytes (array form of `update(_:output:)`).
    public func update(_ bytes: [UInt8], output sink: ([UInt8]) throws -> Void) throws {
        try bytes.withUnsafeBytes { try update($0, output: sink) }
    }

    /// Appends the padding and encrypts the remaining chunks, the last with `TAG_FINAL`. Throws
    /// `sizeMismatch` if fewer than `size` file bytes were given.
    public func finish(output sink: ([UInt8]) throws -> Void) throws {
        try sendHeader(sink)
        guard consumed == size else { throw MediaObjectError.sizeMismatch(declared: size, given: consumed) }
        var marker = true
        while emitted + filled < paddedLength {
            let n = min(paddedLength - emitted - filled, MediaObjectFormat.chunkSize - filled)
            chunk.withUnsafeMutableBytes { dst in
                (dst.baseAddress! + filled).initializeMemory(as: UInt8.self, repeating: 0, count: n)
                if marker { dst[filled] = 0x80 }
            }
            marker = false
            filled += n
            if emitted + filled == paddedLength { break }
            if filled == MediaObjectFormat.chunkSize { try emit(tag: .message, sink) }
        }
        try emit(tag: .final, sink)
    }

    private func sendHeader(_ sink: ([UInt8]) throws -> Void) throws {
        guard !headerSent else { return }
        headerSent = true
        try sink(stream.header)
    }

    private func emit(tag: SecretStream.Tag, _ sink: ([UInt8]) throws -> Void) throws {
        let count = filled
        try chunk.withUnsafeBytes { (plain) throws in
            try additionalData.withUnsafeBytes { (ad) throws in
                try output.withUnsafeMutableBytes { (out) throws in
                    try stream.push(UnsafeRawBufferPointer(rebasing: plain[0..<count]), additionalData: ad, tag: tag, into: out)
                    try sink(copyOut(UnsafeRawBufferPointer(out), count: count + SecretStream.chunkOverhead))
                }
            }
        }
        emitted += count
        filled = 0
    }

}

/// Decrypts a media object as its bytes arrive and hands out the file, checking everything §2 and §4 say:
/// the length bound, each chunk's authenticity and tag, the final chunk, the padding and the exact size.
///
/// Holds at most one 64 KiB chunk (ciphertext and plaintext, the latter in wiped memory). Feed the bytes in
/// any pieces with `consume(_:file:)`, then call `finish(file:)`; `file` receives the file's bytes in order,
/// each chunk's as a new array. Or hand them to a buffered `MediaFileWriter` with `consume(_:into:)` and
/// `finish(into:)`: each chunk is then decrypted straight into the writer's buffer, without a copy.
/// Nothing it hands out is trustworthy until `finish` returns. Not `Sendable`: one task drives it.
public final class MediaObjectDecryptor {
    /// The declared file size.
    public let size: Int
    /// The most object bytes it reads (`24 + padme(size+1) + 17·ceil(padme(size+1)/65536)`).
    public let maximumObjectLength: Int
    private let key: SecureBytes
    private let additionalData: [UInt8]
    private let maximumPadded: Int
    private var header: [UInt8] = []
    private var stream: SecretStreamPull?
    private var cipher: [UInt8]
    private var cipherFilled = 0
    private var plain: SecureBytes
    private var produced = 0
    private var received = 0
    private var finalSeen = false
    private var failed = false

    /// A decryptor for a file of `size` bytes of MIME `type` under the descriptor's 32-byte `key`.
    public init(key: SecureBytes, size: Int, type: String) throws(CryptoError) {
        guard key.count == SecretStream.keyByteCount else {
            throw .invalidLength(what: "a media key", expected: SecretStream.keyByteCount, actual: key.count)
        }
        precondition(size >= 0, "a file size cannot be negative")
        self.key = key
        self.size = size
        maximumPadded = MediaObjectFormat.padme(size + 1)
        maximumObjectLength = MediaObjectFormat.objectLength(paddedLength: maximumPadded)
        additionalData = MediaObjectFormat.additionalData(size: size, type: type)
        cipher = [UInt8](repeating: 0, count: MediaObjectFormat.chunkSize + SecretStream.chunkOverhead)
        plain = SecureBytes(zeros: MediaObjectFormat.chunkSize)
    }

    /// The number of object bytes received so far.
    public var bytesReceived: Int { received }

    /// Takes the next object bytes. Throws `MediaObjectError.tooLarge` as soon as they would pass the bound
    /// (reading none of them), `.corrupt` when a check fails, or what `file` throws.
    public func consume(_ bytes: UnsafeRawBufferPointer, file: ([UInt8]) throws -> Void) throws {
        try withoutActuallyEscaping(file) { file in try consume(bytes, output: .bytes(file)) }
    }

    /// Takes the next object bytes (array form of `consume(_:file:)`).
    public func consume(_ bytes: [UInt8], file: ([UInt8]) throws -> Void) throws {
        try withoutActuallyEscaping(file) { file in try bytes.withUnsafeBytes { try consume($0, output: .bytes(file)) } }
    }

    /// Takes the next object bytes, decrypting each chunk into `writer`'s buffer (through a copy if it has
    /// none, or one smaller than a chunk). Throws like `consume(_:file:)`, or the writer's `MediaFileError`.
    public func consume(_ bytes: [UInt8], into writer: MediaFileWriter) throws {
        try bytes.withUnsafeBytes { try consume($0, output: .writer(writer)) }
    }

    /// The object ended: decrypts the last chunk into `writer` and checks what `finish(file:)` checks.
    public func finish(into writer: MediaFileWriter) throws {
        try finish(output: .writer(writer))
    }

    /// Where the file's bytes go.
    private enum Output {
        case bytes(([UInt8]) throws -> Void)
        case writer(MediaFileWriter)
    }

    private func consume(_ bytes: UnsafeRawBufferPointer, output file: Output) throws {
        guard !failed else { throw MediaObjectError.corrupt("the object was already rejected") }
        do {
            guard bytes.count <= maximumObjectLength - received else {
                throw MediaObjectError.tooLarge(limit: maximumObjectLength)
            }
            received += bytes.count
            var offset = 0
            while offset < bytes.count {
                if finalSeen { throw MediaObjectError.corrupt("bytes follow the final chunk") }
                if stream == nil {
                    let n = min(SecretStream.headerByteCount - header.count, bytes.count - offset)
                    header += UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + n)])
                    offset += n
                    if header.count == SecretStream.headerByteCount {
                        do { stream = try SecretStreamPull(key: key, header: header) } catch {
                            throw MediaObjectError.corrupt("the stream header is invalid")
                        }
                    }
                    continue
                }
                let n = min(cipher.count - cipherFilled, bytes.count - offset)
                cipher.withUnsafeMutableBytes { dst in
                    (dst.baseAddress! + cipherFilled).copyMemory(from: bytes.baseAddress! + offset, byteCount: n)
                }
                cipherFilled += n
                offset += n
                if cipherFilled == cipher.count { try openChunk(atEnd: false, file: file) }
            }
        } catch {
            failed = true
            throw error
        }
    }

    /// The object ended: decrypts the last chunk and checks the final tag, the padded length and the size.
    public func finish(file: ([UInt8]) throws -> Void) throws {
        try withoutActuallyEscaping(file) { file in try finish(output: .bytes(file)) }
    }

    private func finish(output file: Output) throws {
        guard !failed else { throw MediaObjectError.corrupt("the object was already rejected") }
        do {
            guard stream != nil else { throw MediaObjectError.corrupt("the object ends inside its header") }
            if !finalSeen {
                guard cipherFilled > 0 else { throw MediaObjectError.corrupt("the object ends before a final chunk") }
                try openChunk(atEnd: true, file: file)
            }
            guard produced >= size + 1 else { throw MediaObjectError.corrupt("the padded file is shorter than its declared size") }
        } catch {
            failed = true
            throw error
        }
    }

    private func openChunk(atEnd: Bool, file: Output) throws {
        let count = cipherFilled
        cipherFilled = 0
        guard count > SecretStream.chunkOverhead else { throw MediaObjectError.corrupt("a chunk is empty or cut short") }
        let plainCount = count - SecretStream.chunkOverhead
        guard let stream else { throw MediaObjectError.corrupt("the stream header is missing") }
        // Straight into the writer's buffer when it has one that holds a chunk: only the file's bytes of it
        // are appended, after every check passed.
        if case let .writer(writer) = file {
            let direct = try writer.fill(minimum: MediaObjectFormat.chunkSize) { free in
                let p = UnsafeMutableRawBufferPointer(rebasing: free[0..<plainCount])
                try checkChunk(atEnd: atEnd, plainCount: plainCount, tag: pull(stream, count: count, into: p))
                return try checkPadding(UnsafeRawBufferPointer(p))
            }
            if direct {
                produced += plainCount
                return
            }
        }
        let tag = try plain.withUnsafeMutableBytes { p in try pull(stream, count: count, into: p) }
        try checkChunk(atEnd: atEnd, plainCount: plainCount, tag: tag)
        try plain.withUnsafeBytes { (all) throws in
            let p = UnsafeRawBufferPointer(rebasing: all[0..<plainCount])
            let fileEnd = try checkPadding(p)
            guard fileEnd > 0 else { return }
            switch file {
            case let .bytes(sink): try sink(copyOut(p, count: fileEnd))
            case let .writer(writer): try writer.append(UnsafeRawBufferPointer(rebasing: p[0..<fileEnd]))
            }
        }
        produced += plainCount
    }

    /// Decrypts the `count` ciphertext bytes into `p`, returning the chunk's tag.
    private func pull(_ stream: SecretStreamPull, count: Int, into p: UnsafeMutableRawBufferPointer) throws -> SecretStream.Tag {
        do {
            return try cipher.withUnsafeBytes { c in
                additionalData.withUnsafeBytes { ad in
                    Result { () throws(CryptoError) -> SecretStream.Tag in
                        try stream.pull(UnsafeRawBufferPointer(rebasing: c[0..<count]), additionalData: ad, into: p)
                    }
                }
            }.get()
        } catch {
            throw MediaObjectError.corrupt("a chunk does not decrypt (wrong key, changed bytes, or made for another size or type)")
        }
    }

    /// Checks a chunk's tag and that the padded length stays within `padme(size + 1)`.
    private func checkChunk(atEnd: Bool, plainCount: Int, tag: SecretStream.Tag) throws {
        switch tag {
        case .final: finalSeen = true
        case .message where !atEnd: break
        case .message: throw MediaObjectError.corrupt("the object ends before a final chunk")
        case .push, .rekey: throw MediaObjectError.corrupt("a chunk carries a tag other than message or final")
        }
        guard produced + plainCount <= maximumPadded else { throw MediaObjectError.corrupt("the padded length is over padme(size + 1)") }
    }

    /// Checks the padding of the decrypted chunk `p` (the bytes before `size` are the file; at `size` the 0x80
    /// marker; after it only zeros) and returns how many of its bytes are the file's.
    private func checkPadding(_ p: UnsafeRawBufferPointer) throws -> Int {
        let fileEnd = min(max(size - produced, 0), p.count)
        var valid = true
        for i in fileEnd..<p.count {
            let expected: UInt8 = produced + i == size ? 0x80 : 0
            valid = valid && p[i] == expected
        }
        if !valid { throw MediaObjectError.corrupt("the padding is not 0x80 followed by zeros at the declared size") }
        return fileEnd
    }
}

/// The first `count` bytes of `source` as a new array, in one `memcpy` (a generic `Array(slice)` copies
/// byte by byte).
private func copyOut(_ source: UnsafeRawBufferPointer, count: Int) -> [UInt8] {
    [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
        if count > 0 { UnsafeMutableRawBufferPointer(buffer).copyMemory(from: UnsafeRawBufferPointer(rebasing: source[0..<count])) }
        initialized = count
    }
}
