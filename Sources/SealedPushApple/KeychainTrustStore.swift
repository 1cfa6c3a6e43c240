#if canImport(UserNotifications)
public import SealedPushKeyring
public import SealedPushReceiver
public import SealedPushWire
public import SealedPushCrypto
import Foundation

/// The device's trusted sender keys and its signature and preview settings, in the Keychain access group the
/// app and its extensions share: what the service and content extensions read per notification.
///
/// Items (generic passwords, data protection keychain, not synchronizable,
/// `kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly`: public data, readable on a locked phone; kept in the
/// Keychain rather than an app group file so that nothing that can write the container can add a sender):
/// - `sealedpush.trusted-sender` / the sender key id in hex: the sender key record (`SenderKeyRecord`);
/// - `sealedpush.policy` / `signatures`: `required` or `optional`;
/// - `sealedpush.policy` / `previews`: `full`, `title` or `none`.
///
/// **Safe by default.** With no `signatures` item, signatures are required as soon as one sender is trusted:
/// an app that ships a trust store gets no unsigned message. `setSignatures(.optional)` is the explicit way
/// out (and what it costs: anyone who learns the device's public key can make it show a message).
/// Only the app writes; the extensions read.
public struct KeychainTrustStore: Sendable {
    /// Whether unsigned messages are accepted.
    public enum Signatures: String, Sendable, CaseIterable {
        /// Unsigned messages are refused (`signatureRequired`). The default once a sender is trusted.
        case required
        /// Unsigned messages are accepted; signed ones must still verify against a trusted sender.
        case optional
    }

    static let senderService = "sealedpush.trusted-sender"
    static let policyService = "sealedpush.policy"
    static let signaturesAccount = "signatures"
    static let previewsAccount = "previews"

    /// The Keychain items, as records of the key lifecycle's storage (after-first-unlock, not synchronizable).
    let storage: KeychainKeyringStorage

    /// Trust kept in `accessGroup` (`TEAMID.` followed by the group in the entitlement).
    public init(accessGroup: String) {
        storage = KeychainKeyringStorage(accessGroup: accessGroup)
    }

    /// Trusts a sender key (the app calls this with the record its server publishes); trusting a rotated sender
    /// key keeps the previous one trusted until it is removed.
    public func trust(_ record: SenderKeyRecord) throws(KeychainError) {
        try storage.writeRecord(service: Self.senderService, account: record.keyID.hex, data: SecureBytes(record.jsonBytes),
                                label: "trusted sender key \(record.keyID.hex)")
    }

    /// Stops trusting a sender key (nothing happens when it was not trusted).
    public func remove(_ keyID: KeyID) throws(KeychainError) {
        try storage.removeItem(service: Self.senderService, account: keyID.hex, secret: false)
    }

    /// Every trusted sender key, ordered by key id; an item that does not hold the record of its own key id is
    /// refused (`decode`), never trusted.
    public func trustedSenders() throws(KeychainError) -> [SenderKeyRecord] {
        var out: [SenderKeyRecord] = []
        for (account, data) in try storage.readRecords(service: Self.senderService) {
            let record: SenderKeyRecord
            do { record = try SenderKeyRecord(jsonBytes: data.unsafeCopyToArray()) } catch {
                throw .decode(path: storage.location(service: Self.senderService, account: account, secret: false),
                              why: "the trusted sender record is malformed: \(error.description)")
            }
            guard record.keyID.hex == account else {
                throw .decode(path: storage.location(service: Self.senderService, account: account, secret: false),
                              why: "the trusted sender record is filed under another key id")
            }
            out.append(record)
        }
        return out.sorted { $0.keyID < $1.keyID }
    }

    /// Sets whether unsigned messages are accepted (`nil`: the default, required once a sender is trusted).
    public func setSignatures(_ signatures: Signatures?) throws(KeychainError) {
        guard let signatures else {
            return try storage.removeItem(service: Self.policyService, account: Self.signaturesAccount, secret: false)
        }
        try storage.writeRecord(service: Self.policyService, account: Self.signaturesAccount, data: SecureBytes(Array(signatures.rawValue.utf8)),
                                label: "sealedpush signatures")
    }

    /// The signature setting as stored; `nil` when none was set.
    public func signatures() throws(KeychainError) -> Signatures? {
        guard let data = try storage.readRecord(service: Self.policyService, account: Self.signaturesAccount) else { return nil }
        guard let value = Signatures(rawValue: String(decoding: data.unsafeCopyToArray(), as: UTF8.self)) else {
            throw .decode(path: storage.location(service: Self.policyService, account: Self.signaturesAccount, secret: false),
                          why: "the signature setting is not required or optional")
        }
        return value
    }

    /// Sets the preview policy (reveal v1 §5) the service extension applies to ordinary messages.
    public func setPreviews(_ policy: PreviewPolicy) throws(KeychainError) {
        try storage.writeRecord(service: Self.policyService, account: Self.previewsAccount, data: SecureBytes(Array(policy.rawValue.utf8)),
                                label: "sealedpush previews")
    }

    /// The preview policy; `full` when none was set.
    public func previews() throws(KeychainError) -> PreviewPolicy {
        guard let data = try storage.readRecord(service: Self.policyService, account: Self.previewsAccount) else { return .full }
        guard let policy = PreviewPolicy(rawValue: String(decoding: data.unsafeCopyToArray(), as: UTF8.self)) else {
            throw .decode(path: storage.location(service: Self.policyService, account: Self.previewsAccount, secret: false),
                          why: "the preview setting is not full, title or none")
        }
        return policy
    }

    /// The receiver policy: the trusted senders, and signatures required unless set `optional` (required by default
    /// once a sender is trusted). A store that cannot be read refuses the message as `keychainLocked`.
    public func receiverPolicy() throws(OpenFailure) -> ReceiverPolicy {
        do {
            let senders = try trustedSenders()
            let required = try signatures().map { $0 == .required } ?? !senders.isEmpty
            return ReceiverPolicy(trustedSenders: senders.map(\.publicKey), requireSignature: required)
        } catch {
            throw OpenFailure(.keychainLocked, "the trust settings cannot be read: \(error)")
        }
    }
}
#endif
