public import Foundation
public import SealedPushCrypto
public import SealedPushWire

/// The device's X25519 keys and their lifecycle (generate, rotate, retire, destroy, prune), and the
/// receiver's `DeviceKeyProvider`.
///
/// Exactly one key is `active` (the one senders seal to); `retired` keys still open messages until
/// their deadline; `destroyed` keys are wiped and leave a tombstone. Open one per notification —
/// opening reads only the store key, and `lookUpKey(id:)` reads three small files whatever the
/// number of keys.
public struct DeviceKeyring: DeviceKeyProvider, Sendable {
    /// The default grace of a rotated-out key: 7 days.
    public static let defaultGrace: Duration = .seconds(7 * 86_400)

    /// The store the keys live in (the keyring uses its first access group).
    public let store: KeychainStore
    let core: KeyringCore<BoxKeyPair>

    /// A keyring over `store`; new keys get `accessibility` (default `afterFirstUnlockThisDeviceOnly`).
    public init(store: KeychainStore, accessibility: Accessibility = .afterFirstUnlockThisDeviceOnly) {
        self.store = store
        core = KeyringCore(store: store, accessibility: accessibility)
    }

    /// Opens (creating if needed) the store at `root` with an injected clock and returns its keyring.
    public init(root: URL, now: @escaping @Sendable () -> Date = { Date() }) throws(KeychainError) {
        self.init(store: try KeychainStore(url: root, now: now))
    }

    /// Creates the first active key; throws `activeKeyExists` if there is one. Returns its record.
    @discardableResult
    public func generate() throws(KeychainError) -> DeviceKeyRecord { try record(core.generate()) }

    /// Makes a new active key; the previous one is retired until now + `grace`. Returns the new record.
    @discardableResult
    public func rotate(grace: Duration = DeviceKeyring.defaultGrace) throws(KeychainError) -> DeviceKeyRecord {
        try record(core.rotate(grace: grace.timeInterval))
    }

    /// Every key ever made here, oldest first, with state and dates (never a secret). Works while locked.
    public func list() throws(KeychainError) -> [KeyInfo] { try core.list() }

    /// The record of the active key (`keyID == nil`) or of a named usable key. Works while locked.
    public func export(keyID: KeyID? = nil) throws(KeychainError) -> DeviceKeyRecord { try record(core.usableInfo(keyID)) }

    /// Sets a non-active key's deadline to now + `grace` (0 makes it unusable now); refuses the active key.
    @discardableResult
    public func retire(keyID: KeyID, grace: Duration = .zero) throws(KeychainError) -> KeyInfo {
        try core.retire(keyID, grace: grace.timeInterval)
    }

    /// Wipes a key's secret, deletes its item and leaves a tombstone; refuses the active key unless `force`.
    @discardableResult
    public func destroy(keyID: KeyID, force: Bool = false) throws(KeychainError) -> KeyInfo? {
        try core.destroy([keyID], force: force, reason: force ? "forced" : "destroyed").first
    }

    /// Destroys every retired key whose deadline is before the clock's now; returns them.
    @discardableResult
    public func prune() throws(KeychainError) -> [KeyInfo] { try core.prune() }

    /// The active key pair (for tests and tools; the receiver uses `lookUpKey(id:)`).
    public func activeKeyPair() throws(KeychainError) -> BoxKeyPair { try core.activeKey() }

    /// The usable key pair with id `keyID`: `.unknown` if there is none (never made, destroyed,
    /// retired past its deadline), `.locked` if it exists but its class is unavailable now.
    public func lookUpKey(id keyID: KeyID) -> KeyLookup { core.lookUp(keyID).keyLookup }

    private func record(_ info: KeyInfo) throws(KeychainError) -> DeviceKeyRecord {
        do { return DeviceKeyRecord(publicKey: try BoxPublicKey(bytes: info.publicKey), createdAt: info.createdAt) } catch {
            throw .decode(path: info.keyID.hex, why: "the stored public key is malformed")
        }
    }
}

/// A sender's Ed25519 signing keys (the server side, in its own store) with the same lifecycle.
///
/// Retired sender keys stay listed (and exportable) until their deadline so devices can keep
/// trusting them while messages signed by them are still in flight.
public struct SenderKeyring: Sendable {
    /// The default grace of a rotated-out key: 7 days.
    public static let defaultGrace: Duration = .seconds(7 * 86_400)

    /// The store the keys live in.
    public let store: KeychainStore
    let core: KeyringCore<SigningKeyPair>

    /// A keyring over `store`; new keys get `accessibility` (default `afterFirstUnlockThisDeviceOnly`).
    public init(store: KeychainStore, accessibility: Accessibility = .afterFirstUnlockThisDeviceOnly) {
        self.store = store
        core = KeyringCore(store: store, accessibility: accessibility)
    }

    /// Opens (creating if needed) the store at `root` with an injected clock and returns its keyring.
    public init(root: URL, now: @escaping @Sendable () -> Date = { Date() }) throws(KeychainError) {
        self.init(store: try KeychainStore(url: root, now: now))
    }

    /// Creates the first active signing key; throws `activeKeyExists` if there is one.
    @discardableResult
    public func generate() throws(KeychainError) -> SenderKeyRecord { try record(core.generate()) }

    /// Makes a new active signing key; the previous one is retired until now + `grace`.
    @discardableResult
    public func rotate(grace: Duration = SenderKeyring.defaultGrace) throws(KeychainError) -> SenderKeyRecord {
        try record(core.rotate(grace: grace.timeInterval))
    }

    /// Every signing key, oldest first, with state and dates (never a secret).
    public func list() throws(KeychainError) -> [KeyInfo] { try core.list() }

    /// The record of the active key (`keyID == nil`) or of a named usable key, for devices to trust.
    public func export(keyID: KeyID? = nil) throws(KeychainError) -> SenderKeyRecord { try record(core.usableInfo(keyID)) }

    /// Sets a non-active key's deadline to now + `grace`; refuses the active key.
    @discardableResult
    public func retire(keyID: KeyID, grace: Duration = .zero) throws(KeychainError) -> KeyInfo {
        try core.retire(keyID, grace: grace.timeInterval)
    }

    /// Wipes a key's secret and leaves a tombstone; refuses the active key unless `force`.
    @discardableResult
    public func destroy(keyID: KeyID, force: Bool = false) throws(KeychainError) -> KeyInfo? {
        try core.destroy([keyID], force: force, reason: force ? "forced" : "destroyed").first
    }

    /// Destroys every retired key whose deadline is before the clock's now; returns them.
    @discardableResult
    public func prune() throws(KeychainError) -> [KeyInfo] { try core.prune() }

    /// The active signing key pair, to sign outgoing messages with.
    public func activeSigningKey() throws(KeychainError) -> SigningKeyPair { try core.activeKey() }

    private func record(_ info: KeyInfo) throws(KeychainError) -> SenderKeyRecord {
        do { return SenderKeyRecord(publicKey: try SigningPublicKey(bytes: info.publicKey)) } catch {
            throw .decode(path: info.keyID.hex, why: "the stored public key is malformed")
        }
    }
}

extension KeyringCore.Lookup where Material == BoxKeyPair {
    /// The receiver's view of a device-key lookup (the deadline is the cache's business only).
    var keyLookup: KeyLookup {
        switch self {
        case let .found(pair, _): return .found(pair)
        case .unknown: return .unknown
        case .locked: return .locked
        }
    }
}
