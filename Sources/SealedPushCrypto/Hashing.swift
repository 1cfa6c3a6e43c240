#if canImport(Clibsodium)
import Clibsodium  // iOS and macOS, AppleSodium trait: swift-sodium's libsodium
#elseif canImport(CSodium)
import CSodium  // Linux: the system libsodium
#endif  // neither: Sodium.swift stops the build with #error, naming the AppleSodium trait

/// BLAKE2b (`crypto_generichash`), unkeyed.
public enum Blake2b {
    /// The BLAKE2b digest of `data` with an output of `outputLength` bytes (16...64).
    public static func hash(_ data: some Collection<UInt8>, outputLength: Int) -> [UInt8] {
        Sodium.ensureInitialized()
        precondition(outputLength >= Int(crypto_generichash_BYTES_MIN) && outputLength <= Int(crypto_generichash_BYTES_MAX),
                     "BLAKE2b output length must be 16...64 bytes")
        var input = Array(data)
        let inputCount = input.count
        if input.isEmpty { input = [0] }  // libsodium wants a valid pointer even for empty input
        var out = [UInt8](repeating: 0, count: outputLength)
        input.withUnsafeBufferPointer { inBuf in
            out.withUnsafeMutableBufferPointer { outBuf in
                _ = crypto_generichash(outBuf.baseAddress!, outputLength, inBuf.baseAddress!, UInt64(inputCount), nil, 0)
            }
        }
        return out
    }

    /// The keyed BLAKE2b digest (a MAC) of `data` under `key` (16...64 bytes) with an output of
    /// `outputLength` bytes (16...64).
    public static func keyedHash(_ data: some Collection<UInt8>, key: some Collection<UInt8>, outputLength: Int) -> [UInt8] {
        Sodium.ensureInitialized()
        precondition(outputLength >= Int(crypto_generichash_BYTES_MIN) && outputLength <= Int(crypto_generichash_BYTES_MAX),
                     "BLAKE2b output length must be 16...64 bytes")
        precondition(key.count >= Int(crypto_generichash_KEYBYTES_MIN) && key.count <= Int(crypto_generichash_KEYBYTES_MAX),
                     "a BLAKE2b key is 16...64 bytes")
        var input = Array(data)
        let inputCount = input.count
        if input.isEmpty { input = [0] }
        let keyBytes = SecureBytes(Array(key))
        var out = [UInt8](repeating: 0, count: outputLength)
        input.withUnsafeBufferPointer { inBuf in
            keyBytes.withUnsafeBytes { keyBuf in
                out.withUnsafeMutableBufferPointer { outBuf in
                    _ = crypto_generichash(outBuf.baseAddress!, outputLength, inBuf.baseAddress!, UInt64(inputCount),
                                           keyBuf.bindMemory(to: UInt8.self).baseAddress!, keyBuf.count)
                }
            }
        }
        return out
    }
}

/// An 8-byte key id: the first 8 bytes of the 16-byte BLAKE2b digest of a 32-byte public key.
///
/// The same derivation names device (X25519) keys and sender (Ed25519) keys. In text it is 16
/// lowercase hex digits. Key ids are public and not authenticated by themselves.
public struct KeyID: Hashable, Sendable, Comparable, CustomStringConvertible, Codable {
    /// The 8 raw bytes.
    public let bytes: [UInt8]

    /// The key id length in bytes.
    public static let byteCount = 8

    /// Derives the key id of a 32-byte public key.
    public init(publicKey: [UInt8]) {
        precondition(publicKey.count == 32, "a key id is derived from a 32-byte public key")
        bytes = Array(Blake2b.hash(publicKey, outputLength: 16).prefix(8))
    }

    /// Wraps 8 raw bytes; throws if the length is not 8.
    public init(rawBytes: some Collection<UInt8>) throws(CryptoError) {
        guard rawBytes.count == KeyID.byteCount else {
            throw .invalidLength(what: "a key id", expected: KeyID.byteCount, actual: rawBytes.count)
        }
        bytes = Array(rawBytes)
    }

    /// Parses 16 lowercase hex digits; `nil` for anything else.
    public init?(hex: String) {
        guard hex.utf8.count == 16, let raw = try? Hex.decode(hex), raw.count == 8 else { return nil }
        bytes = raw
    }

    /// 16 lowercase hex digits.
    public var hex: String { Hex.encode(bytes) }

    /// 16 lowercase hex digits.
    public var description: String { hex }

    /// Orders key ids by their hex text.
    public static func < (lhs: KeyID, rhs: KeyID) -> Bool { lhs.bytes.lexicographicallyPrecedes(rhs.bytes) }

    /// Decodes from a 16-hex-digit string.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let id = KeyID(hex: text) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "a key id is 16 lowercase hex digits")
        }
        self = id
    }

    /// Encodes as a 16-hex-digit string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(hex)
    }
}

/// SHA-256 (`crypto_hash_sha256`), fed incrementally: used to identify files without holding them whole.
public struct SHA256Hasher: ~Copyable {
    private var state = crypto_hash_sha256_state()

    /// A hasher with no input yet.
    public init() {
        Sodium.ensureInitialized()
        crypto_hash_sha256_init(&state)
    }

    /// Adds `bytes` to the input.
    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        crypto_hash_sha256_update(&state, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(bytes.count))
    }

    /// The 32-byte digest of everything added.
    public consuming func finalize() -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        crypto_hash_sha256_final(&state, &out)
        return out
    }

    /// The digest of `bytes` in one call.
    public static func hash(_ bytes: [UInt8]) -> [UInt8] {
        var h = SHA256Hasher()
        bytes.withUnsafeBytes { h.update($0) }
        return h.finalize()
    }
}
