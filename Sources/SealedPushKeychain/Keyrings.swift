#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import SealedPushCrypto
public import SealedPushWire
// The lifecycle engine, its types (KeyInfo, KeyState, KeyringMaterial) and KeychainError live in
// SealedPushKeyring, which the iOS Keychain store shares; `import SealedPushKeychain` keeps bringing them.
@_exported public import SealedPushKeyring

/// Keys of one kind and their lifecycle (generate, rotate, retire, destroy, prune) in a keychain store.
///
/// Exactly one key is `active` (the one senders seal to, or the one that signs); `retired` keys stay
/// usable until their deadline; `destroyed` keys are wiped and leave a tombstone. `DeviceKeyring`
/// holds the device's X25519 keys and is the receiver's `DeviceKeyProvider`; `SenderKeyring` holds a
/// server's Ed25519 signing keys, whose retired keys stay listed and exportable so devices can keep
/// trusting them while signed messages are in flight. Open one per notification — opening reads
/// only the store key, and a lookup reads three small files whatever the number of keys.
public struct Keyring<Material: KeyringMaterial>: Sendable {
    /// The default grace of a rotated-out key: 7 days.
    public static var defaultGrace: Duration { .seconds(7 * 86_400) }

    /// The store the keys live in (the keyring uses its first access group).
    public let store: KeychainStore
    let core: KeyringCore<Material>

    /// A keyring over `store`; new keys get `accessibility` (default the kind's: `afterFirstUnlockThisDeviceOnly`
    /// for device and sender keys, `whenUnlockedThisDeviceOnly` for reveal keys).
    public init(store: KeychainStore, accessibility: Accessibility? = nil) {
        self.store = store
        core = KeyringCore(store: store, accessibility: accessibility ?? Material.defaultAccessibility)
    }

    /// Opens (creating if needed) the store at `root` with an injected clock and returns its keyring.
    public init(root: URL, clock: WallClock = .system) throws(KeychainError) {
        self.init(store: try KeychainStore(url: root, clock: clock))
    }

    /// Creates the first active key; throws `activeKeyExists` if there is one. Returns its record.
    @discardableResult
    public func generate() throws(KeychainError) -> Material.Record { try Material.record(core.generate()) }

    /// Makes a new active key at once; the previous one is retired until now + `grace`. Returns the new
    /// record. Refuses while a next key is staged (`nextKeyExists`): activate or retire it first.
    @discardableResult
    public func rotate(grace: Duration = Self.defaultGrace) throws(KeychainError) -> Material.Record {
        try Material.record(core.rotate(grace: grace.timeInterval))
    }

    /// Every key ever made here, oldest first, with state and dates (never a secret). Works while locked.
    public func list() throws(KeychainError) -> [KeyInfo] { try core.list() }

    /// The record of the active key (`keyID == nil`) or of a named usable key. Works while locked.
    /// Exporting the staged next key records that it was exported (what `activate` checks).
    public func export(keyID: KeyID? = nil) throws(KeychainError) -> Material.Record { try Material.record(core.exportInfo(keyID)) }

    /// Stages a new key as the **next** key: its record can be exported and trusted by receivers while
    /// the active key keeps signing (or being sealed to); `activate(keyID:)` switches. Refuses when a
    /// next key is already staged (`nextKeyExists`). Returns the new key's info.
    @discardableResult
    public func stageNext() throws(KeychainError) -> KeyInfo { try core.stageNext() }

    /// Makes the staged next key active; the previous active key is retired until now + `grace`.
    /// Refuses any other key (`notNextKey`) and, unless `force`, a next key whose record was never
    /// exported (`nextKeyNotExported`): receivers cannot trust a key they never received.
    @discardableResult
    public func activate(keyID: KeyID, force: Bool = false, grace: Duration = Self.defaultGrace) throws(KeychainError) -> KeyInfo {
        try core.activate(keyID, force: force, grace: grace.timeInterval)
    }

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

    /// The active key pair (the signing key of a sender; for tests and tools on a device, whose
    /// receiver uses `lookUpKey(id:)`).
    public func activeKeyPair() throws(KeychainError) -> Material { try core.activeKey() }
}

/// The device's X25519 keys; the receiver's `DeviceKeyProvider` on Linux.
public typealias DeviceKeyring = Keyring<BoxKeyPair>

/// A sender's Ed25519 signing keys (the server side, in its own store).
public typealias SenderKeyring = Keyring<SigningKeyPair>

/// The device's reveal keys (reveal v1 §1): `whenUnlockedThisDeviceOnly`, their own ids and lifecycle;
/// the content extension's `DeviceKeyProvider` for `SEALEDPUSH_REVEAL`.
public typealias RevealKeyring = Keyring<RevealKeyPair>

extension Keyring: DeviceKeyProvider where Material: BoxKeyMaterial {
    /// The usable key pair with id `keyID`: `.unknown` if there is none (never made, destroyed,
    /// retired past its deadline), `.locked` if it exists but its class is unavailable now.
    public func lookUpKey(id keyID: KeyID) -> KeyLookup { core.lookUp(keyID).keyLookup }
}

extension Keyring where Material == SigningKeyPair {
    /// The active signing key pair, to sign outgoing messages with: read from the store once, it is
    /// the file-backed `MessageSigner` (`NotificationSender(signer:)` signs with it synchronously).
    /// A server picks up `activate` by reading it again (a new sender per batch, say).
    public func activeSigningKey() throws(KeychainError) -> SigningKeyPair { try activeKeyPair() }
}

extension KeyLifecycle.Lookup where Material: BoxKeyMaterial {
    /// The receiver's view of a device-key lookup (the deadline is the cache's business only).
    var keyLookup: KeyLookup {
        switch self {
        case let .found(pair, _): return .found(pair.boxKeyPair)
        case .unknown: return .unknown
        case .locked: return .locked
        case .unavailable: return .unavailable
        }
    }
}
