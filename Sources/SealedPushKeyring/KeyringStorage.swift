#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import SealedPushCrypto

/// Where a `KeyLifecycle` keeps its items: the file store (`SealedPushKeychain`) or the iOS Keychain
/// (`SealedPushApple`'s `KeychainKeyringStorage`).
///
/// Items are named by service and account. *Records* (the active-key pointer, each key's state) are public
/// facts; *secrets* are key material, stored under the storage's accessibility class. Every write is atomic
/// on its own (an item is replaced whole or not at all); `transaction` serialises writers, and the lifecycle
/// records its intent in the pointer so that the next writer finishes or undoes an interrupted operation.
/// No method ever puts secret bytes in an error.
public protocol KeyringStorage: Sendable {
    /// The current time (creation dates, deadlines).
    func now() -> Date

    /// Runs `body` as the only writer of this storage, passing the storage to use inside it. Calls nested
    /// inside `body` on the storage it was given run at once.
    func transaction<R>(_ body: (Self) throws(KeychainError) -> R) throws(KeychainError) -> R

    /// The data of a record item, `nil` if there is none.
    func readRecord(service: String, account: String) throws(KeychainError) -> SecureBytes?

    /// Every record item of `service` (any order; empty if none).
    func readRecords(service: String) throws(KeychainError) -> [(account: String, data: SecureBytes)]

    /// Adds or replaces a record item; `label` describes it (not secret).
    func writeRecord(service: String, account: String, data: SecureBytes, label: String) throws(KeychainError)

    /// A secret, `nil` if there is none; throws `interactionNotAllowed` when the device's lock state
    /// forbids reading it. `what` names it in errors (`device key <id>`).
    func readSecret(service: String, account: String, what: String) throws(KeychainError) -> SecureBytes?

    /// Adds or replaces a secret under the storage's accessibility class; `label` and `tag` describe it (not secret).
    func writeSecret(service: String, account: String, data: SecureBytes, label: String, tag: [UInt8]) throws(KeychainError)

    /// Removes an item (a secret is wiped first where the storage can); nothing happens if it is absent.
    func removeItem(service: String, account: String, secret: Bool) throws(KeychainError)

    /// Where an item is, for error messages (a path, or `service/account`).
    func location(service: String, account: String, secret: Bool) -> String
}
