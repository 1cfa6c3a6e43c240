#if canImport(Clibsodium)
import Clibsodium  // iOS and macOS, AppleSodium trait: swift-sodium's libsodium
#elseif canImport(CSodium)
import CSodium  // Linux: the system libsodium
#endif  // neither: Sodium.swift stops the build with #error, naming the AppleSodium trait

/// libsodium's `crypto_secretstream_xchacha20poly1305`: a sequence of authenticated chunks under one key.
///
/// Thin typed wrappers over `init_push`/`push` and `init_pull`/`pull`. The 52-byte state (which holds a
/// key derived from the stream key) lives in memory that is wiped when the value is released.
public enum SecretStream {
    /// Key length (32).
    public static let keyByteCount = Int(crypto_secretstream_xchacha20poly1305_keybytes())
    /// Header length (24): sent before the first chunk.
    public static let headerByteCount = Int(crypto_secretstream_xchacha20poly1305_headerbytes())
    /// Bytes each chunk's ciphertext adds to its plaintext (17: one encrypted tag byte and a 16-byte MAC).
    public static let chunkOverhead = Int(crypto_secretstream_xchacha20poly1305_abytes())

    /// The tag a chunk carries.
    public enum Tag: UInt8, Sendable {
        /// An ordinary chunk (`TAG_MESSAGE`, 0).
        case message = 0
        /// End of a set of chunks (`TAG_PUSH`, 1).
        case push = 1
        /// The state is rekeyed after this chunk (`TAG_REKEY`, 2).
        case rekey = 2
        /// The last chunk of the stream (`TAG_FINAL`, 3).
        case final = 3
    }

    /// A fresh random stream key.
    public static func generateKey() -> SecureBytes { SecureBytes.random(count: keyByteCount) }
}

/// The state of one stream, in wiped memory (shared by both directions).
final class SecretStreamState {
    let pointer: UnsafeMutablePointer<crypto_secretstream_xchacha20poly1305_state>

    init() {
        Sodium.ensureInitialized()
        pointer = .allocate(capacity: 1)
        sodium_memzero(pointer, MemoryLayout<crypto_secretstream_xchacha20poly1305_state>.size)
    }

    deinit {
        sodium_memzero(pointer, MemoryLayout<crypto_secretstream_xchacha20poly1305_state>.size)
        pointer.deallocate()
    }
}

/// The sending side of a secret stream: produces the header, then one ciphertext per chunk.
///
/// Not `Sendable`: one stream is pushed by one task, chunk after chunk, in order.
public final class SecretStreamPush {
    private let state = SecretStreamState()
    /// The 24-byte header the receiver needs before the first chunk.
    public let header: [UInt8]

    /// Starts a stream under `key` (32 bytes).
    public init(key: SecureBytes) throws(CryptoError) {
        guard key.count == SecretStream.keyByteCount else {
            throw .invalidLength(what: "a secret stream key", expected: SecretStream.keyByteCount, actual: key.count)
        }
        var header = [UInt8](repeating: 0, count: SecretStream.headerByteCount)
        let statePointer = state.pointer
        let rc = header.withUnsafeMutableBufferPointer { h in
            key.withUnsafeBytes { k in
                crypto_secretstream_xchacha20poly1305_init_push(statePointer, h.baseAddress!, k.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }
        guard rc == 0 else { throw .operationFailed("crypto_secretstream_xchacha20poly1305_init_push") }
        self.header = header
    }

    /// Encrypts one chunk into `output`, which must hold `plaintext.count + chunkOverhead` bytes.
    public func push(_ plaintext: UnsafeRawBufferPointer, additionalData: UnsafeRawBufferPointer, tag: SecretStream.Tag,
                     into output: UnsafeMutableRawBufferPointer) throws(CryptoError) {
        guard output.count >= plaintext.count + SecretStream.chunkOverhead else {
            throw .invalidLength(what: "a secret stream output buffer", expected: plaintext.count + SecretStream.chunkOverhead, actual: output.count)
        }
        let rc = crypto_secretstream_xchacha20poly1305_push(
            state.pointer, output.baseAddress!.assumingMemoryBound(to: UInt8.self), nil,
            plaintext.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(plaintext.count),
            additionalData.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(additionalData.count), tag.rawValue)
        guard rc == 0 else { throw .operationFailed("crypto_secretstream_xchacha20poly1305_push") }
    }

    /// Encrypts one chunk and returns its ciphertext (`plaintext.count + 17` bytes).
    public func push(_ plaintext: [UInt8], additionalData: [UInt8] = [], tag: SecretStream.Tag) throws(CryptoError) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: plaintext.count + SecretStream.chunkOverhead)
        let result = out.withUnsafeMutableBytes { o in
            plaintext.withUnsafeBytes { p in
                additionalData.withUnsafeBytes { ad in
                    Result { () throws(CryptoError) in try push(p, additionalData: ad, tag: tag, into: o) }
                }
            }
        }
        try result.get()
        return out
    }
}

/// The receiving side of a secret stream: reads the header, then authenticates and decrypts chunk by chunk.
///
/// Not `Sendable`: one stream is pulled by one task, chunk after chunk, in order.
public final class SecretStreamPull {
    private let state = SecretStreamState()

    /// Starts reading a stream under `key` from its 24-byte `header`.
    public init(key: SecureBytes, header: some Collection<UInt8>) throws(CryptoError) {
        guard key.count == SecretStream.keyByteCount else {
            throw .invalidLength(what: "a secret stream key", expected: SecretStream.keyByteCount, actual: key.count)
        }
        let headerBytes = Array(header)
        guard headerBytes.count == SecretStream.headerByteCount else {
            throw .invalidLength(what: "a secret stream header", expected: SecretStream.headerByteCount, actual: headerBytes.count)
        }
        let rc = headerBytes.withUnsafeBufferPointer { h in
            key.withUnsafeBytes { k in
                crypto_secretstream_xchacha20poly1305_init_pull(state.pointer, h.baseAddress!, k.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }
        guard rc == 0 else { throw .authenticationFailed }
    }

    /// Authenticates and decrypts one chunk into `output` (at least `ciphertext.count - 17` bytes) and returns
    /// its tag; throws `authenticationFailed` if the chunk, its position or its additional data was changed.
    /// After a failure the stream is unusable.
    public func pull(_ ciphertext: UnsafeRawBufferPointer, additionalData: UnsafeRawBufferPointer,
                     into output: UnsafeMutableRawBufferPointer) throws(CryptoError) -> SecretStream.Tag {
        guard ciphertext.count >= SecretStream.chunkOverhead else { throw .authenticationFailed }
        guard output.count >= ciphertext.count - SecretStream.chunkOverhead else {
            throw .invalidLength(what: "a secret stream output buffer", expected: ciphertext.count - SecretStream.chunkOverhead, actual: output.count)
        }
        var tag: UInt8 = 0xFF
        var scratch: UInt8 = 0
        let rc = withUnsafeMutablePointer(to: &scratch) { scratchPointer in
            // libsodium writes nothing for an empty chunk, but still wants a valid pointer.
            crypto_secretstream_xchacha20poly1305_pull(
                state.pointer, output.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? scratchPointer, nil, &tag,
                ciphertext.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(ciphertext.count),
                additionalData.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(additionalData.count))
        }
        guard rc == 0, let known = SecretStream.Tag(rawValue: tag) else { throw .authenticationFailed }
        return known
    }

    /// Authenticates and decrypts one chunk; returns the plaintext in wiped memory and the tag.
    public func pull(_ ciphertext: [UInt8], additionalData: [UInt8] = []) throws(CryptoError) -> (plaintext: SecureBytes, tag: SecretStream.Tag) {
        guard ciphertext.count >= SecretStream.chunkOverhead else { throw .authenticationFailed }
        var plain = SecureBytes(zeros: ciphertext.count - SecretStream.chunkOverhead)
        let result = ciphertext.withUnsafeBytes { c in
            additionalData.withUnsafeBytes { ad in
                plain.withUnsafeMutableBytes { p in
                    Result { () throws(CryptoError) -> SecretStream.Tag in try pull(c, additionalData: ad, into: p) }
                }
            }
        }
        return (plain, try result.get())
    }
}
