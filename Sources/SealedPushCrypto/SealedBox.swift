#if canImport(Clibsodium)
import Clibsodium  // iOS and macOS, AppleSodium trait: swift-sodium's libsodium
#elseif canImport(CSodium)
import CSodium  // Linux: the system libsodium
#endif  // neither: Sodium.swift stops the build with #error, naming the AppleSodium trait

/// libsodium sealed boxes: anonymous public-key encryption to an X25519 key.
///
/// A sealed box is `ephemeral public key (32) || Poly1305 tag (16) || XSalsa20 ciphertext`, with the
/// nonce `BLAKE2b-192(ephemeral pk || recipient pk)`. Sealing never writes into its input: libsodium
/// 1.0.18 silently corrupts a sealed box made in place, so every output is a fresh buffer.
public enum SealedBox {
    /// Bytes a sealed box adds to its plaintext (`crypto_box_SEALBYTES`, 48).
    public static let overhead = Int(crypto_box_sealbytes())

    /// Seals `message` to `recipient`. Byte-compatible with `crypto_box_seal`: the ephemeral key pair is
    /// made with the faster Edwards fixed-base path (`ephemeralPublicKey(forSecret:)`), the rest is
    /// `crypto_box_easy`.
    public static func seal(_ message: SecureBytes, to recipient: BoxPublicKey) throws(CryptoError) -> [UInt8] {
        Sodium.ensureInitialized()
        return try seal(message, to: recipient, ephemeralSecret: SecureBytes.random(count: 32))
    }

    /// Seals with a given ephemeral secret: the path `seal(_:to:)` takes, open to tests with fixed secrets.
    static func seal(_ message: SecureBytes, to recipient: BoxPublicKey, ephemeralSecret: SecureBytes) throws(CryptoError) -> [UInt8] {
        let ephemeral = (secret: ephemeralSecret, publicKey: ephemeralPublicKey(forSecret: ephemeralSecret))
        var nonceInput = ephemeral.publicKey
        nonceInput.append(contentsOf: recipient.bytes)
        let nonce = Blake2b.hash(nonceInput, outputLength: Int(crypto_box_NONCEBYTES))
        var out = [UInt8](repeating: 0, count: overhead + message.count)
        let rc = out.withUnsafeMutableBufferPointer { o in
            message.withUnsafeBytes { m in
                ephemeral.secret.withUnsafeBytes { esk in
                    recipient.bytes.withUnsafeBufferPointer { pk in
                        nonce.withUnsafeBufferPointer { n in
                            crypto_box_easy(o.baseAddress! + Int(crypto_box_PUBLICKEYBYTES),
                                            m.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(m.count),
                                            n.baseAddress!, pk.baseAddress!, esk.baseAddress!.assumingMemoryBound(to: UInt8.self))
                        }
                    }
                }
            }
        }
        guard rc == 0 else { throw .operationFailed("sealing to this public key (it is a low-order point)") }
        out.replaceSubrange(0..<ephemeral.publicKey.count, with: ephemeral.publicKey)
        return out
    }

    /// Seals with libsodium's own `crypto_box_seal` (the reference the fast path must match), into a
    /// separate output buffer.
    public static func sealReference(_ message: SecureBytes, to recipient: BoxPublicKey) throws(CryptoError) -> [UInt8] {
        Sodium.ensureInitialized()
        var out = [UInt8](repeating: 0, count: overhead + message.count)
        let rc = out.withUnsafeMutableBufferPointer { o in
            message.withUnsafeBytes { m in
                recipient.bytes.withUnsafeBufferPointer { pk in
                    crypto_box_seal(o.baseAddress!, m.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(m.count), pk.baseAddress!)
                }
            }
        }
        guard rc == 0 else { throw .operationFailed("sealing to this public key (it is a low-order point)") }
        return out
    }

    /// Opens a sealed box with the recipient's key pair (`crypto_box_seal_open`) into wiped memory.
    public static func open(_ box: some Collection<UInt8>, with keyPair: BoxKeyPair) throws(CryptoError) -> SecureBytes {
        let boxBytes = Array(box)
        return try open(bytes: boxBytes, with: keyPair)
    }

    /// Opens a sealed box held in an array (no copy of the ciphertext is made).
    public static func open(bytes box: [UInt8], with keyPair: BoxKeyPair) throws(CryptoError) -> SecureBytes {
        Sodium.ensureInitialized()
        guard box.count >= overhead else { throw .authenticationFailed }
        var out = SecureBytes(zeros: box.count - overhead)
        let rc = box.withUnsafeBufferPointer { c in
            keyPair.publicKey.bytes.withUnsafeBufferPointer { pk in
                keyPair.secretKey.withUnsafeBytes { sk in
                    out.withUnsafeMutableBytes { m in
                        crypto_box_seal_open(m.baseAddress!.assumingMemoryBound(to: UInt8.self), c.baseAddress!, UInt64(c.count),
                                             pk.baseAddress!, sk.baseAddress!.assumingMemoryBound(to: UInt8.self))
                    }
                }
            }
        }
        guard rc == 0 else {
            out.wipe()
            throw .authenticationFailed
        }
        return out
    }
}

extension SealedBox {
    /// The X25519 public key of `secret` (32 bytes), made faster than `crypto_scalarmult_base`.
    ///
    /// X25519's public key is the Montgomery u-coordinate of `clamp(sk)·B`. libsodium's Edwards
    /// fixed-base multiplication (`crypto_scalarmult_ed25519_base_noclamp`, precomputed tables, constant
    /// time) yields the same point about twice as fast as the Montgomery ladder; the Edwards
    /// y-coordinate then maps to u = (1 + y) / (1 − y) mod 2²⁵⁵−19. That conversion runs in variable
    /// time in `Field25519`, on the resulting *public* point only: the secret scalar never leaves
    /// libsodium's constant-time code. Should the Edwards path fail (it cannot for a clamped scalar),
    /// the Montgomery ladder answers. `seal(_:to:)` calls this for every message; the tests run it on
    /// RFC 7748's vectors and edge scalars against the ladder.
    static func ephemeralPublicKey(forSecret secret: SecureBytes) -> [UInt8] {
        precondition(secret.count == 32, "an X25519 secret key is 32 bytes")
        Sodium.ensureInitialized()
        var clamped = secret
        clamped.withUnsafeMutableBytes { s in
            s[0] &= 248
            s[31] &= 127
            s[31] |= 64
        }
        var edwards = [UInt8](repeating: 0, count: 32)
        let rc = clamped.withUnsafeBytes { s in
            edwards.withUnsafeMutableBufferPointer {
                crypto_scalarmult_ed25519_base_noclamp($0.baseAddress!, s.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }
        if rc == 0, let u = Field25519.montgomeryU(fromEdwardsY: edwards) { return u }
        var publicKey = [UInt8](repeating: 0, count: 32)
        secret.withUnsafeBytes { s in
            publicKey.withUnsafeMutableBufferPointer {
                _ = crypto_scalarmult_base($0.baseAddress!, s.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }
        return publicKey
    }
}
