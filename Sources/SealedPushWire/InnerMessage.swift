public import SealedPushCrypto

/// The inner message (wire format §4): `flags (1) || L (2, big-endian) || body (L) || signature (64)?`.
public enum InnerMessage {
    /// Flag bit 0: the message carries a signature.
    public static let signedFlag: UInt8 = 0x01
    /// The largest body the 16-bit length can describe.
    public static let maxBodyBytes = Int(UInt16.max)

    /// The bytes an Ed25519 signature covers: context, 0x00, recipient key id, body.
    public static func signedBytes(recipient: KeyID, body: SecureBytes) -> SecureBytes {
        SecureBytes(joining: [SecureBytes(WireFormat.signatureContext), SecureBytes(recipient.bytes), body])
    }

    /// Frames `body` for `recipient`, signing it when a signer is given.
    public static func frame(body: SecureBytes, recipient: KeyID, signer: SigningKeyPair?) -> SecureBytes {
        precondition(body.count <= maxBodyBytes, "an inner body is at most 65535 bytes")
        let header = SecureBytes([signer == nil ? 0 : signedFlag, UInt8(body.count >> 8), UInt8(body.count & 0xff)])
        guard let signer else { return SecureBytes(joining: [header, body]) }
        let signature = signer.signature(for: signedBytes(recipient: recipient, body: body))
        return SecureBytes(joining: [header, body, SecureBytes(signature)])
    }

    /// Frames `body` with a signature already made over `signedBytes(recipient:body:)` (by a
    /// `MessageSigner` that signs asynchronously), or unsigned when `signature` is `nil`.
    public static func frame(body: SecureBytes, signature: [UInt8]?) -> SecureBytes {
        precondition(body.count <= maxBodyBytes, "an inner body is at most 65535 bytes")
        let header = SecureBytes([signature == nil ? 0 : signedFlag, UInt8(body.count >> 8), UInt8(body.count & 0xff)])
        guard let signature else { return SecureBytes(joining: [header, body]) }
        return SecureBytes(joining: [header, body, SecureBytes(signature)])
    }

    /// The parts of an unpadded inner message: body bytes and, if signed, the signature.
    public struct Parts: Sendable {
        /// The body JSON bytes.
        public let body: SecureBytes
        /// The 64-byte detached signature, when flags bit 0 is set.
        public let signature: [UInt8]?
    }

    /// Splits the first `length` bytes of `plaintext` into body and signature (§5 step 5, framing).
    public static func split(_ plaintext: SecureBytes, length: Int) throws(OpenFailure) -> Parts {
        func fail(_ why: String) -> OpenFailure { OpenFailure(.malformedMessage, why) }
        guard length >= 3 else { throw fail("the inner message is shorter than its 3-byte header") }
        let (flags, bodyLength) = plaintext.withSpan { span in (span[0], Int(span[1]) << 8 | Int(span[2])) }
        guard flags & ~signedFlag == 0 else { throw fail("unknown flag bits are set") }
        let signed = flags & signedFlag != 0
        let expected = 3 + bodyLength + (signed ? SigningPublicKey.signatureByteCount : 0)
        guard expected == length else {
            throw fail("the body length and flags describe \(expected) bytes but the message has \(length)")
        }
        let body = plaintext.slice(3..<(3 + bodyLength))
        let signature = signed ? plaintext.slice((3 + bodyLength)..<length).unsafeCopyToArray() : nil
        return Parts(body: body, signature: signature)
    }
}
