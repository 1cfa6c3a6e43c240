#if canImport(UserNotifications)
public import SealedPushKeyring
public import SealedPushWire
public import SealedPushCrypto
public import Foundation
public import Logging

/// The device's reveal keys in the iOS Keychain (reveal v1 §1) with their lifecycle: the content
/// extension's `DeviceKeyProvider` for `SEALEDPUSH_REVEAL` (and `SEALEDPUSH_LOCAL`).
///
/// Secrets are written `kSecAttrAccessibleWhenUnlockedThisDeviceOnly`, not synchronizable, under
/// `sealedpush.reveal-key`; reading one also reads its class back, and an item in any other class is
/// refused (logged, looked up as `.unknown`: the view shows `(Encrypted)`, never the text). While the phone
/// is locked a lookup answers `.locked` and `isReadable()` is `false`. The records (`….state`, `….active`)
/// stay `kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly`: `activeRevealPublicKey()` reads on a locked
/// phone, which is what the service extension seals to (reveal v1 §5.1).
public typealias KeychainRevealKeyring = KeychainKeyring<RevealKeyPair>

extension KeychainKeyring where Material == RevealKeyPair {
    /// The active reveal public key, from its record: readable after the first unlock, also while the phone
    /// is locked (only the secret is `whenUnlockedThisDeviceOnly`). What the service extension seals a
    /// message to again under the preview policy `title` or `none` (reveal v1 §5.1). `noActiveKey` when
    /// the device has no reveal key.
    public func activeRevealPublicKey() throws(KeychainError) -> BoxPublicKey { try activePublicKey() }

    /// The `reveal` member of the device key record for the active reveal key (works while locked).
    public func activeRecord() throws(KeychainError) -> RevealKeyRecord { try RevealKeyPair.record(lifecycle.exportInfo(nil)) }
}

/// A device's device key and reveal key in the iOS Keychain together (reveal v1 §1): what the app
/// generates, rotates and registers with its server.
///
/// Each kind has its own ids and lifecycle (`device` and `reveal` are ordinary keyrings: rotate, stage,
/// activate, retire and destroy each on its own). The record to register (`export()`) is the active device
/// key's with the active reveal key in its `reveal` member. Only the app writes; the extensions read.
public struct KeychainDeviceKeySet: Sendable {
    /// The device keys (`sealedpush.device-key`, `kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly`).
    public let device: KeychainDeviceKeyring
    /// The reveal keys (`sealedpush.reveal-key`, `kSecAttrAccessibleWhenUnlockedThisDeviceOnly`).
    public let reveal: KeychainRevealKeyring

    /// Both keyrings in `accessGroup`, dated by `clock`.
    public init(accessGroup: String, clock: WallClock = .system, logger: Logging.Logger = Logging.Logger(label: "sealedpush.keychain")) {
        device = KeychainDeviceKeyring(accessGroup: accessGroup, clock: clock, logger: logger)
        reveal = KeychainRevealKeyring(accessGroup: accessGroup, clock: clock, logger: logger)
    }

    /// Creates the first device key and, unless `reveal` is `false`, the first reveal key; returns the
    /// record to register (with its `reveal` member when a reveal key was made).
    ///
    /// Checks first and changes nothing when either keyring already has an active key (`activeKeyExists`).
    /// The reveal key is made first: while the phone is locked its secret cannot be written
    /// (`interactionNotAllowed`), and then no device key is made either (the reveal key's half-written
    /// rotation is undone by the next writer).
    @discardableResult
    public func generate(reveal withReveal: Bool = true) throws(KeychainError) -> DeviceKeyRecord {
        if let active = try device.lifecycle.list().first(where: { $0.state == .active }) { throw .activeKeyExists(keyID: active.keyID.hex) }
        var revealRecord: RevealKeyRecord?
        if withReveal {
            if let active = try reveal.lifecycle.list().first(where: { $0.state == .active }) { throw .activeKeyExists(keyID: active.keyID.hex) }
            revealRecord = try RevealKeyPair.record(reveal.lifecycle.generate())
        }
        return try BoxKeyPair.record(device.lifecycle.generate()).withReveal(revealRecord)
    }

    /// Adds a reveal key to a device that has a device key but no active reveal key (made with
    /// `generate(reveal: false)`, or whose reveal key was destroyed); returns the new record to register.
    @discardableResult
    public func addReveal() throws(KeychainError) -> DeviceKeyRecord {
        let record = try BoxKeyPair.record(device.lifecycle.exportInfo(nil))
        return record.withReveal(try RevealKeyPair.record(reveal.lifecycle.generate()))
    }

    /// The record to register with the server: the active device key's, with the active reveal key in
    /// `reveal` (none when the device has no active reveal key). Reads only records: works while locked.
    public func export() throws(KeychainError) -> DeviceKeyRecord {
        let record = try BoxKeyPair.record(device.lifecycle.exportInfo(nil))
        let revealRecord: RevealKeyRecord?
        do { revealRecord = try reveal.activeRecord() } catch .noActiveKey { revealRecord = nil }
        return record.withReveal(revealRecord)
    }

    /// Makes a new active reveal key; the previous one stays usable until now + `grace` seconds (default 7
    /// days), which covers reveal messages still waiting in Notification Center. Returns the record to
    /// register again. Needs the phone unlocked (`interactionNotAllowed` otherwise).
    @discardableResult
    public func rotateReveal(grace: TimeInterval = 7 * 86_400) throws(KeychainError) -> DeviceKeyRecord {
        _ = try reveal.lifecycle.rotate(grace: grace)
        return try export()
    }

    /// Makes a new active device key; the previous one stays usable until now + `grace` seconds (default 7
    /// days). The reveal key is unchanged. Returns the record to register again.
    @discardableResult
    public func rotateDevice(grace: TimeInterval = 7 * 86_400) throws(KeychainError) -> DeviceKeyRecord {
        _ = try device.lifecycle.rotate(grace: grace)
        return try export()
    }

    /// Destroys every retired key of both kinds whose deadline has passed; returns them, device keys first.
    @discardableResult
    public func prune() throws(KeychainError) -> [KeyInfo] {
        try device.lifecycle.prune() + reveal.lifecycle.prune()
    }
}
#endif
