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
        }
    }
}
