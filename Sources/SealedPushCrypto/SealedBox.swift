import CSodium

/// libsodium sealed boxes: anonymous public-key encryption to an X25519 key.
///
/// A sealed box is `ephemeral public key (32) || Poly1305 tag (16) || XSalsa20 ciphertext`, with the
/// nonce `BLAKE2b-192(ephemeral pk || recipient pk)`. Sealing never writes into its input: libsodium
/// 1.0.18 silently corrupts a sealed box made in place, so every output is a fresh buffer.
public enum SealedBox {
    /// Bytes a sealed box adds to its plaintext (`crypto_box_SEALBYTES`, 48).
    public static let overhead = Int(crypto_box_sealbytes())

    /// Seals `message` to `recipient`. Byte-compatible with `crypto_box_seal`: the ephemeral key pair is
    /// made with the faster Edwards fixed-base path (see `EphemeralKey`), the rest is `crypto_box_easy`.
    public static func seal(_ message: SecureBytes, to recipient: BoxPublicKey) throws(CryptoError) -> [UInt8] {
        Sodium.ensureInitialized()
        let ephemeral = EphemeralKey.generate()
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

/// Ephemeral X25519 key pairs for sealing, made faster than `crypto_box_keypair`.
///
/// X25519's public key is the Montgomery u-coordinate of `clamp(sk)·B`. libsodium's Edwards
/// fixed-base multiplication (`crypto_scalarmult_ed25519_base_noclamp`, precomputed tables) yields the
/// same point about twice as fast as the Montgomery ladder; the Edwards y-coordinate then maps to
/// u = (1 + y) / (1 − y) mod 2²⁵⁵−19. The public key is public, so that conversion runs in variable
/// time in `Field25519`; the secret scalar only ever enters libsodium's constant-time code.
public enum EphemeralKey {
    /// A fresh ephemeral key pair: the 32-byte secret (in wiped memory) and its X25519 public key.
    public static func generate() -> (secret: SecureBytes, publicKey: [UInt8]) {
        Sodium.ensureInitialized()
        var secret = SecureBytes.random(count: 32)
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
        if rc == 0, let u = Field25519.montgomeryU(fromEdwardsY: edwards) {
            return (secret, u)
        }
        // Unreachable in practice (the clamped scalar is never 0 mod the group order); fall back to the ladder.
        var publicKey = [UInt8](repeating: 0, count: 32)
        secret.withUnsafeMutableBytes { s in
            publicKey.withUnsafeMutableBufferPointer {
                _ = crypto_scalarmult_base($0.baseAddress!, s.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }
        return (secret, publicKey)
    }

    /// The X25519 public key of `secret` through the fast path (for tests against `crypto_scalarmult_base`).
    public static func publicKey(forSecret secret: SecureBytes) -> [UInt8]? {
        guard secret.count == 32 else { return nil }
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
        guard rc == 0 else { return nil }
        return Field25519.montgomeryU(fromEdwardsY: edwards)
    }

    /// The X25519 public key of `secret` through libsodium's Montgomery ladder (`crypto_scalarmult_base`).
    public static func referencePublicKey(forSecret secret: SecureBytes) -> [UInt8]? {
        guard secret.count == 32 else { return nil }
        var publicKey = [UInt8](repeating: 0, count: 32)
        let rc = secret.withUnsafeBytes { s in
            publicKey.withUnsafeMutableBufferPointer {
                crypto_scalarmult_base($0.baseAddress!, s.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }
        return rc == 0 ? publicKey : nil
    }
}
