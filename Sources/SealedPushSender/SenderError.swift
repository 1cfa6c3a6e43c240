public import SealedPushWire

/// Why the sender refused a message or a configuration.
///
/// Every message says what to do about it and never contains message text or key material.
public enum SenderError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The wire-format sealer refused the message (payload too large, no visible text, bad id,
    /// `aps` in custom data, unusable device key). `SealError.payloadTooLarge` names the size and the limit.
    case sealing(SealError)
    /// The visible placeholder has no text, or a member is not usable.
    case invalidPlaceholder(String)
    /// The `apns-collapse-id` is empty, longer than 64 bytes, or holds control characters.
    case invalidCollapseID(String)
    /// The `apns-topic` is empty or holds whitespace or control characters.
    case invalidTopic(String)
    /// The expiry is negative or earlier than the issued-at time.
    case invalidExpiry(String)
    /// The device key record could not be used (see `KeyRecordError`).
    case invalidDeviceRecord(KeyRecordError)
    /// A batch request (one JSONL line) is not valid; the text names the member.
    case invalidRequest(String)
    /// The receipt URL is not usable (receipts v1 §1).
    case invalidReceiptURL(String)
    /// An attachment was refused (unsupported type, empty, over its kind's limit, unreadable, or the object
    /// could not be written); the text names the file, its size or type, and the limit.
    case invalidAttachment(String)
    /// The payload would be over 4096 bytes with the message's attachment descriptors (about 200 bytes each).
    case payloadTooLargeWithAttachments(size: Int, limit: Int, attachments: Int)
    /// The sender's `MessageSigner` has no key in this process (a KMS or HSM), so the synchronous `seal` cannot sign.
    case signerIsRemote(keyID: String)
    /// The `MessageSigner` failed, or returned something that is not a 64-byte signature.
    case signingFailed(keyID: String, why: String)
    /// A reveal message was asked for a device whose record has no `reveal` key (reveal v1 §2); the text is
    /// never sealed to the device key instead.
    case noRevealKey(deviceKeyID: String)
    /// A reveal message would be over the payload limit: its text is sealed twice, so less fits than in an
    /// ordinary message; `largestText` is how many bytes of title, subtitle and body together (plain ASCII)
    /// would fit with the message's other members (0: none, the other members alone are too large). `size` is the
    /// payload with both envelopes at their smallest padding (what a message must fit in; padding never refuses one).
    case revealTooLarge(size: Int, limit: Int, largestText: Int)
    /// The reveal alert shows no text (iOS would not run the extension).
    case invalidReveal(String)

    /// The wrapped wire-format error, when the sealer refused the message.
    public var sealError: SealError? {
        if case let .sealing(e) = self { return e }
        return nil
    }

    /// What happened and what to do.
    public var description: String {
        switch self {
        case let .sealing(e): return e.description
        case let .invalidPlaceholder(why): return "the visible placeholder \(why); give it a non-empty title or body of plain text"
        case let .invalidCollapseID(why): return "the collapse id \(why); use 1 to 64 bytes of printable text"
        case let .invalidTopic(why): return "the topic \(why); use the app's bundle id (for example com.example.app)"
        case let .invalidExpiry(why): return "the expiry \(why); give a non-negative duration or a time after now"
        case let .invalidDeviceRecord(e): return e.description
        case let .invalidRequest(why): return "the request is invalid: \(why)"
        case let .invalidReceiptURL(why): return "the receipt URL \(why); give an https URL of at most 2048 bytes (http only to localhost or 127.0.0.1)"
        case let .invalidAttachment(why): return "attachment refused: \(why)"
        case let .payloadTooLargeWithAttachments(size, limit, attachments):
            return "the payload would be \(size) bytes, over the APNs limit of \(limit) bytes; each of the \(attachments) attachment descriptors costs about 200 bytes (URL, key, type, size): send fewer attachments, use shorter URLs, or shorten the text"
        case let .signerIsRemote(keyID):
            return "the signer of sender key \(keyID) signs remotely (no key in this process); seal with `try await sender.sealAsync(message, to: record)`"
        case let .signingFailed(keyID, why):
            return "signing with sender key \(keyID) failed: \(why); check the signer (a KMS or HSM key must be Ed25519, signing the raw message) and retry"
        case let .noRevealKey(deviceKeyID):
            return "the device key record \(deviceKeyID) has no reveal key, so a reveal message cannot be sealed to it (its text is never sealed to the device key instead); ask the device to register a record with a reveal key, or send an ordinary message"
        case let .revealTooLarge(size, limit, largestText):
            if largestText == 0 {
                return "the reveal message would be \(size) bytes, over the APNs limit of \(limit) bytes, even without text; remove custom data or attachments"
            }
            return "the reveal message would be \(size) bytes, over the APNs limit of \(limit) bytes; its text is sealed twice, so at most \(largestText) bytes of title, subtitle and body together (plain ASCII; fewer if escaped) fit with its other members: shorten the text"
        case let .invalidReveal(why): return "the reveal alert \(why); give it a non-empty title, subtitle or body (for example `Press and hold to read`)"
        }
    }
}
