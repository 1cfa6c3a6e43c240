public import SealedPushCrypto

/// Why a message could not be sealed.
public enum SealError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Even the minimal envelope does not fit the 4096-byte payload.
    case payloadTooLarge(size: Int, limit: Int)
    /// The body JSON is longer than the 16-bit length field allows.
    case bodyTooLarge(size: Int, limit: Int)
    /// The message has no visible text (title, subtitle or body).
    case emptyAlert
    /// The message id is not 1 to 64 bytes of UTF-8.
    case invalidMessageID
    /// Custom data holds `aps`, which the receiver would refuse.
    case dataHoldsAPS
    /// The recipient key could not be used.
    case invalidRecipient(String)

    /// What happened and what to do.
    public var description: String {
        switch self {
        case let .payloadTooLarge(size, limit):
            return "the payload would be \(size) bytes, over the APNs limit of \(limit) bytes; shorten the title, subtitle, body or custom data"
        case let .bodyTooLarge(size, limit):
            return "the message body is \(size) bytes, over the \(limit)-byte maximum of the wire format; shorten it"
        case .emptyAlert:
            return "the message has no visible text; give it a non-empty title, subtitle or body"
        case .invalidMessageID:
            return "the message id must be 1 to 64 bytes of UTF-8 (keep it ASCII); leave it unset to get a random one"
        case .dataHoldsAPS:
            return "custom data must not contain an 'aps' key (the receiver refuses it); rename that key"
        case let .invalidRecipient(why):
            return "the device key cannot be sealed to: \(why); ask the device to re-register its key record"
        }
    }
}

/// The sender half of wire format v1: body → inner message → padding → sealed box → envelope.
public enum MessageSealer {
    /// Seals `body` to `recipient`, padding with `policy` for a payload whose other bytes take
    /// `payloadOverhead`; signs it with `signer` when given (the body's `sender` must then name it).
    public static func seal(body: MessageBody, to recipient: BoxPublicKey, signer: SigningKeyPair?,
                            padding policy: PaddingPolicy, payloadOverhead: Int) throws(SealError) -> Envelope {
        let bodyBytes = try serialize(body)
        return try seal(inner: InnerMessage.frame(body: bodyBytes, recipient: recipient.keyID, signer: signer), to: recipient,
                        padding: policy, payloadOverhead: payloadOverhead)
    }

    /// The checked body JSON a message is framed from (and a signature covers, with the recipient
    /// key id: `InnerMessage.signedBytes`). The first half of sealing with an asynchronous signer.
    public static func serialize(_ body: MessageBody) throws(SealError) -> SecureBytes {
        guard body.alert.hasVisibleText else { throw .emptyAlert }
        guard (1...64).contains(body.id.utf8.count) else { throw .invalidMessageID }
        guard body.data?["aps"] == nil else { throw .dataHoldsAPS }
        let bodyBytes = SecureBytes(JSON.serialize(.object(body.jsonObject)))
        guard bodyBytes.count <= InnerMessage.maxBodyBytes else {
            throw .bodyTooLarge(size: bodyBytes.count, limit: InnerMessage.maxBodyBytes)
        }
        return bodyBytes
    }

    /// Pads and seals a framed inner message (`InnerMessage.frame`) to `recipient`: the second half
    /// of sealing with an asynchronous signer.
    public static func seal(inner: SecureBytes, to recipient: BoxPublicKey,
                            padding policy: PaddingPolicy, payloadOverhead: Int) throws(SealError) -> Envelope {
        guard let paddedLength = policy.paddedLength(innerLength: inner.count, payloadOverhead: payloadOverhead) else {
            let minimal = payloadOverhead + WireFormat.base64Length(
                ofByteCount: WireFormat.envelopeHeaderBytes + SealedBox.overhead + inner.count + 1)
            throw .payloadTooLarge(size: minimal, limit: WireFormat.maxPayloadBytes)
        }
        do {
            let padded = try ISO7816Padding.pad(inner, to: paddedLength)
            let box = try SealedBox.seal(padded, to: recipient)
            return Envelope(keyID: recipient.keyID, sealedBox: box)
        } catch {
            throw .invalidRecipient(error.description)
        }
    }
}
