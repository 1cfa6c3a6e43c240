#if canImport(Clibsodium)
import Clibsodium  // iOS and macOS, AppleSodium trait: swift-sodium's libsodium
#elseif canImport(CSodium)
import CSodium  // Linux: the system libsodium
#endif  // neither: Sodium.swift stops the build with #error, naming the AppleSodium trait

/// XChaCha20-Poly1305 (IETF) authenticated encryption, used for secrets at rest.
public enum XChaCha20Poly1305 {
    /// Key length.
    public static let keyByteCount = Int(crypto_aead_xchacha20poly1305_ietf_KEYBYTES)
    /// Nonce length (random nonces are safe at this size).
    public static let nonceByteCount = Int(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES)
    /// Authentication tag length.
    public static let tagByteCount = Int(crypto_aead_xchacha20poly1305_ietf_ABYTES)

    /// A fresh random key in guarded memory.
    public static func generateKey() -> SecureBytes { SecureBytes.random(count: keyByteCount, guarded: true) }

    /// Encrypts `plaintext`, binding `associatedData`; returns `nonce || ciphertext || tag` with a random nonce.
    public static func seal(_ plaintext: SecureBytes, key: SecureBytes, associatedData: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard key.count == keyByteCount else { throw .invalidLength(what: "an XChaCha20-Poly1305 key", expected: keyByteCount, actual: key.count) }
        Sodium.ensureInitialized()
        var out = [UInt8](repeating: 0, count: nonceByteCount + plaintext.count + tagByteCount)
        out.withUnsafeMutableBufferPointer { o in
            randombytes_buf(o.baseAddress!, nonceByteCount)
            plaintext.withUnsafeBytes { m in
                key.withUnsafeBytes { k in
                    associatedData.withUnsafeBufferPointer { ad in
                        var clen: UInt64 = 0
                        _ = crypto_aead_xchacha20poly1305_ietf_encrypt(
                            o.baseAddress! + nonceByteCount, &clen,
                            m.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(m.count),
                            ad.baseAddress, UInt64(ad.count), nil,
                            o.baseAddress!, k.baseAddress!.assumingMemoryBound(to: UInt8.self))
                    }
                }
            }
        }
        return out
    }

    /// Decrypts `nonce || ciphertext || tag`; throws `authenticationFailed` if anything was changed.
    public static func open(_ sealed: [UInt8], key: SecureBytes, associatedData: [UInt8]) throws(CryptoError) -> SecureBytes {
        guard key.count == keyByteCount else { throw .invalidLength(what: "an XChaCha20-Poly1305 key", expected: keyByteCount, actual: key.count) }
        guard sealed.count >= nonceByteCount + tagByteCount else { throw .authenticationFailed }
        Sodium.ensureInitialized()
        var out = SecureBytes(zeros: sealed.count - nonceByteCount - tagByteCount)
        let rc = sealed.withUnsafeBufferPointer { c in
            key.withUnsafeBytes { k in
                associatedData.withUnsafeBufferPointer { ad in
                    out.withUnsafeMutableBytes { m in
                        var mlen: UInt64 = 0
                        return crypto_aead_xchacha20poly1305_ietf_decrypt(
                            m.baseAddress!.assumingMemoryBound(to: UInt8.self), &mlen, nil,
                            c.baseAddress! + nonceByteCount, UInt64(c.count - nonceByteCount),
                            ad.baseAddress, UInt64(ad.count),
                            c.baseAddress!, k.baseAddress!.assumingMemoryBound(to: UInt8.self))
                    }
                }
            }
        }
        guard rc == 0 else { throw .authenticationFailed }
        return out
    }
}
