import Foundation
import SealedPushCrypto
import SealedPushSender
import SealedPushTestSupport
import SealedPushWire
import Testing

/// The fixed "now" of the sender tests.
let testNow: Int64 = 1_795_000_000

/// A sender with a fixed clock.
func makeSender(placeholder: Placeholder = .standard, padding: PaddingPolicy = .bucket, signer: (any MessageSigner)? = nil,
                now: Int64 = testNow) throws -> NotificationSender {
    try NotificationSender(placeholder: placeholder, padding: padding, signer: signer, clock: { now })
}

/// A fresh device: key pair and its record.
func makeDevice() -> (pair: BoxKeyPair, record: DeviceKeyRecord) {
    let pair = BoxKeyPair.generate()
    return (pair, DeviceKeyRecord(publicKey: pair.publicKey, createdAt: nil))
}

/// The payload parsed with the strict parser.
func payloadObject(_ sealed: SealedNotification) throws -> JSONObject {
    try #require(try JSON.parse(sealed.payload).objectValue)
}

/// The `ENCRYPTED_DATA` value of a payload.
func encryptedData(_ sealed: SealedNotification) throws -> String {
    try #require(try payloadObject(sealed)["ENCRYPTED_DATA"]?.stringValue)
}

/// Opens a sealed notification with the receiver's ordered checks.
func openSealed(_ sealed: SealedNotification, with pairs: [BoxKeyPair], trusting: [SigningPublicKey] = [],
                requireSignature: Bool = false, now: Int64 = testNow) throws -> OpenedMessage {
    let opener = MessageOpener(keys: InMemoryKeys(pairs), policy: ReceiverPolicy(trustedSenders: trusting, requireSignature: requireSignature))
    return try opener.open(encryptedData: try encryptedData(sealed), now: now)
}

/// The inner-message length of an opened message (3-byte header, body, signature).
func innerLength(of opened: OpenedMessage) -> Int {
    3 + JSON.serialize(.object(opened.rawBody)).count + (opened.signedBy == nil ? 0 : 64)
}

extension SenderError {
    /// The case, by name (from the case itself, not from the message).
    var caseName: String {
        switch self {
        case .sealing: return "sealing"
        case .invalidPlaceholder: return "invalidPlaceholder"
        case .invalidCollapseID: return "invalidCollapseID"
        case .invalidTopic: return "invalidTopic"
        case .invalidExpiry: return "invalidExpiry"
        case .invalidDeviceRecord: return "invalidDeviceRecord"
        case .invalidRequest: return "invalidRequest"
        case .invalidReceiptURL: return "invalidReceiptURL"
        case .invalidAttachment: return "invalidAttachment"
        case .payloadTooLargeWithAttachments: return "payloadTooLargeWithAttachments"
        case .signerIsRemote: return "signerIsRemote"
        case .signingFailed: return "signingFailed"
        case .noRevealKey: return "noRevealKey"
        case .revealTooLarge: return "revealTooLarge"
        case .invalidReveal: return "invalidReveal"
        }
    }
}

/// The `SenderError` case `body` threw, by name; `nil` when it did not throw, `"not a SenderError"` for another error.
func senderErrorCase(_ body: () throws -> Void) -> String? {
    do { try body(); return nil } catch let error as SenderError { return error.caseName } catch { return "not a SenderError" }
}
