/// Why a notification was not shown decrypted: the wire format's §5 reason codes, followed by the
/// device-level codes of `shared/spec/device-outcomes.md`.
public enum ReasonCode: String, Sendable, Codable, CaseIterable, CustomStringConvertible {
    // Wire format v1, §5, in check order.
    /// `ENCRYPTED_DATA` is not strict base64, or the envelope is too short.
    case malformedPayload
    /// The envelope's version byte is not `0x01`.
    case unsupportedVersion
    /// No usable device key has the envelope's key id.
    case unknownKey
    /// The sealed box did not open with that key.
    case decryptionFailed
    /// The plaintext's ISO/IEC 7816-4 padding is wrong.
    case badPadding
    /// The inner framing, the body JSON or one of its members is wrong.
    case malformedMessage
    /// The body's `kid` is not the envelope's key id.
    case recipientMismatch
    /// The message is signed by a sender key the device does not trust.
    case untrustedSender
    /// The signature does not verify.
    case badSignature
    /// The message is unsigned but the device requires signatures.
    case signatureRequired
    /// `now > exp + skew`.
    case expired
    /// `iat > now + skew`.
    case notYetValid
    /// A message with this id was already accepted.
    case replayed
    /// The key exists but its keychain item cannot be read in the device's lock state.
    case keychainLocked

    // Device level (device-outcomes.md).
    /// The payload has no `ENCRYPTED_DATA`: passed through unchanged.
    case notEncrypted
    /// `aps.mutable-content` is missing or not the integer 1: the extension does not run.
    case notMutable
    /// `aps.alert` has no visible text: the extension does not run.
    case noAlert
    /// The payload is over 4096 bytes.
    case payloadTooLarge
    /// The payload is not a UTF-8 JSON object with an `aps` object.
    case invalidPayload
    /// The extension process died.
    case extensionCrashed
    /// The extension's time ran out.
    case timeExpired
    /// The extension delivered content without alert text.
    case alertRemoved

    // Mailbox mode (mailbox-v1.md §5).
    /// The message could not be fetched by its handle: `404`, a network failure, an answer over the size limit, or
    /// the fetch deadline. The handle is kept in userInfo, to be fetched later.
    case fetchFailed
    /// The envelope fetched by a handle names another delivery in its `dlv` (or none).
    case handleMismatch
    /// The sender retracted the message (mailbox v1 §6): `(Deleted)`, or nothing with the filtering entitlement.
    case retracted

    // One attachment (attachments-v1.md §4): the message still shows its text.
    /// The descriptor's `type` is not in the type table.
    case attachmentUnsupportedType
    /// The declared size is over the kind's limit, or the server announced or sent more than the object can be.
    case attachmentTooLarge
    /// The URL (or a redirect) is not `https` nor loopback `http`, or not a valid absolute URL.
    case attachmentInsecureURL
    /// The connection failed, or the status was not 200 after at most 3 redirects.
    case attachmentUnavailable
    /// The object did not decrypt to exactly the declared file.
    case attachmentCorrupt
    /// The file does not start as its type's signature says.
    case attachmentTypeMismatch
    /// The file could not be written.
    case attachmentStorageFailed
    /// The attachment was not finished when the extension had to answer.
    case attachmentTimeExpired

    /// The code as written in JSON and logs.
    public var description: String { rawValue }
}

/// A receiver-side check failed; carries the reason code, never message content.
public struct OpenFailure: Error, Equatable, Sendable, CustomStringConvertible {
    /// The §5 reason code.
    public let reason: ReasonCode
    /// A short explanation without any secret or plaintext.
    public let detail: String

    /// A failure with its reason code and an explanation.
    public init(_ reason: ReasonCode, _ detail: String) {
        self.reason = reason
        self.detail = detail
    }

    /// `reason: detail`.
    public var description: String { "\(reason.rawValue): \(detail)" }
}
