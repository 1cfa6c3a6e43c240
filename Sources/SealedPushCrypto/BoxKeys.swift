#if canImport(Clibsodium)
import Clibsodium  // iOS and macOS, AppleSodium trait: swift-sodium's libsodium
#elseif canImport(CSodium)
import CSodium  // Linux: the system libsodium
#endif  // neither: Sodium.swift stops the build with #error, naming the AppleSodium trait

/// An X25519 public key (32 bytes): what a device publishes and senders seal to.
public struct BoxPublicKey: Hashable, Sendable {
    /// The 32 raw bytes.
    public let bytes: [UInt8]

    /// Length of an X25519 public key.
    public static let byteCount = Int(crypto_box_PUBLICKEYBYTES)

    /// Wraps 32 raw bytes; throws `invalidLength` otherwise.
    public init(bytes: [UInt8]) throws(CryptoError) {
        guard bytes.count == BoxPublicKey.byteCount else {
            throw .invalidLength(what: "an X25519 public key", expected: BoxPublicKey.byteCount, actual: bytes.count)
        }
        self.bytes = bytes
    }

    /// The key id of this public key.
    public var keyID: KeyID { KeyID(publicKey: bytes) }
}

/// An X25519 key pair whose secret half lives in guarded, wiped memory.
public struct BoxKeyPair: Sendable {
    /// The public half.
    public let publicKey: BoxPublicKey
    /// The 32-byte secret scalar, in guarded `sodium_malloc` memory.
    public let secretKey: SecureBytes

    /// Length of an X25519 secret key.
    public static let secretKeyByteCount = Int(crypto_box_SECRETKEYBYTES)

    /// A fresh random key pair (`crypto_box_keypair`).
    public static func generate() -> BoxKeyPair {
        Sodium.ensureInitialized()
        var secret = SecureBytes(zeros: secretKeyByteCount, guarded: true)
        var pk = [UInt8](repeating: 0, count: BoxPublicKey.byteCount)
        secret.withUnsafeMutableBytes { sk in
            pk.withUnsafeMutableBufferPointer { _ = crypto_box_keypair($0.baseAddress!, sk.baseAddress!.assumingMemoryBound(to: UInt8.self)) }
        }
        // crypto_box_keypair always yields a 32-byte public key, so this cannot fail.
        return BoxKeyPair(publicKey: try! BoxPublicKey(bytes: pk), secretKey: secret)
    }

    /// Rebuilds a key pair from its 32-byte secret, deriving the public key (`crypto_scalarmult_base`).
    public init(secretKey: SecureBytes) throws(CryptoError) {
        guard secretKey.count == BoxKeyPair.secretKeyByteCount else {
            throw .invalidLength(what: "an X25519 secret key", expected: BoxKeyPair.secretKeyByteCount, actual: secretKey.count)
        }
        Sodium.ensureInitialized()
        var pk = [UInt8](repeating: 0, count: BoxPublicKey.byteCount)
        let rc = secretKey.withUnsafeBytes { sk in
            pk.withUnsafeMutableBufferPointer { crypto_scalarmult_base($0.baseAddress!, sk.baseAddress!.assumingMemoryBound(to: UInt8.self)) }
        }
        guard rc == 0 else { throw .operationFailed("X25519 public key derivation") }
        let guardedSecret = secretKey.withUnsafeBytes { SecureBytes($0, guarded: true) }
        self.init(publicKey: try BoxPublicKey(bytes: pk), secretKey: guardedSecret)
    }

    /// Rebuilds a key pair from its 32-byte secret and its public key as stored beside it, without
    /// deriving the public key again (which costs an X25519 base-point multiplication).
    ///
    /// The caller vouches that `publicKey` belongs to `secretKey`, for example because both were read
    /// from one authenticated store under the same key id. A wrong public key cannot leak anything:
    /// sealed boxes to this pair simply fail to open (their nonce hashes the recipient's public key).
    public init(secretKey: SecureBytes, publicKey: BoxPublicKey) throws(CryptoError) {
        guard secretKey.count == BoxKeyPair.secretKeyByteCount else {
            throw .invalidLength(what: "an X25519 secret key", expected: BoxKeyPair.secretKeyByteCount, actual: secretKey.count)
        }
        let guardedSecret = secretKey.withUnsafeBytes { SecureBytes($0, guarded: true) }
        self.init(publicKey: publicKey, secretKey: guardedSecret)
    }

    private init(publicKey: BoxPublicKey, secretKey: SecureBytes) {
        self.publicKey = publicKey
        self.secretKey = secretKey
    }

    /// The key id of the public half.
    public var keyID: KeyID { publicKey.keyID }
}

/// An Ed25519 public key (32 bytes) that verifies sender signatures.
public struct SigningPublicKey: Hashable, Sendable {
    /// The 32 raw bytes.
    public let bytes: [UInt8]

    /// Length of an Ed25519 public key.
    public static let byteCount = Int(crypto_sign_PUBLICKEYBYTES)
    /// Length of a detached Ed25519 signature.
    public static let signatureByteCount = Int(crypto_sign_BYTES)

    /// Wraps 32 raw bytes; throws `invalidLength` otherwise.
    public init(bytes: [UInt8]) throws(CryptoError) {
        guard bytes.count == SigningPublicKey.byteCount else {
            throw .invalidLength(what: "an Ed25519 public key", expected: SigningPublicKey.byteCount, actual: bytes.count)
        }
        self.bytes = bytes
    }

    /// The sender key id of this public key.
    public var keyID: KeyID { KeyID(publicKey: bytes) }

    /// Whether `signature` is a valid detached Ed25519 signature of `message` (`crypto_sign_verify_detached`).
    public func isValidSignature(_ signature: [UInt8], for message: SecureBytes) -> Bool {
        Sodium.ensureInitialized()
        guard signature.count == SigningPublicKey.signatureByteCount else { return false }
        return message.withUnsafeBytes { msg in
            signature.withUnsafeBufferPointer { sig in
                bytes.withUnsafeBufferPointer { pk in
                    crypto_sign_verify_detached(sig.baseAddress!, msg.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                                UInt64(msg.count), pk.baseAddress!) == 0
                }
            }
        }
    }
}

/// An Ed25519 signing key pair; the 64-byte secret (seed and public key) lives in guarded memory.
public struct SigningKeyPair: Sendable {
    /// The public half.
    public let publicKey: SigningPublicKey
    /// libsodium's 64-byte Ed25519 secret key (seed || public key).
    public let secretKey: SecureBytes

    /// Length of libsodium's Ed25519 secret key.
    public static let secretKeyByteCount = Int(crypto_sign_SECRETKEYBYTES)
    /// Length of an Ed25519 seed.
    public static let seedByteCount = Int(crypto_sign_SEEDBYTES)

    /// A fresh random signing key pair (`crypto_sign_keypair`).
    public static func generate() -> SigningKeyPair {
        try! SigningKeyPair(seed: SecureBytes.random(count: seedByteCount, guarded: true))
    }

    /// Derives the key pair from a 32-byte seed (`crypto_sign_seed_keypair`).
    public init(seed: SecureBytes) throws(CryptoError) {
        guard seed.count == SigningKeyPair.seedByteCount else {
            throw .invalidLength(what: "an Ed25519 seed", expected: SigningKeyPair.seedByteCount, actual: seed.count)
        }
        Sodium.ensureInitialized()
        var secret = SecureBytes(zeros: SigningKeyPair.secretKeyByteCount, guarded: true)
        var pk = [UInt8](repeating: 0, count: SigningPublicKey.byteCount)
        seed.withUnsafeBytes { seedBuf in
            secret.withUnsafeMutableBytes { sk in
                pk.withUnsafeMutableBufferPointer {
                    _ = crypto_sign_seed_keypair($0.baseAddress!, sk.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                                 seedBuf.baseAddress!.assumingMemoryBound(to: UInt8.self))
                }
            }
        }
        publicKey = try SigningPublicKey(bytes: pk)
        secretKey = secret
    }

    /// The 32-byte seed this key pair derives from (for storing it encrypted).
    public var seed: SecureBytes { secretKey.slice(0..<SigningKeyPair.seedByteCount) }

    /// The sender key id of the public half.
    public var keyID: KeyID { publicKey.keyID }

    /// A detached Ed25519 signature of `message` (`crypto_sign_detached`).
    public func signature(for message: SecureBytes) -> [UInt8] {
        var sig = [UInt8](repeating: 0, count: SigningPublicKey.signatureByteCount)
        message.withUnsafeBytes { msg in
            secretKey.withUnsafeBytes { sk in
                sig.withUnsafeMutableBufferPointer {
                    _ = crypto_sign_detached($0.baseAddress!, nil, msg.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                             UInt64(msg.count), sk.baseAddress!.assumingMemoryBound(to: UInt8.self))
                }
            }
        }
        return sig
    }
}
