public import SealedPushWire

/// Which of a device's two X25519 keys a listed key is.
public enum DeviceKeyKind: String, Sendable, Codable, CaseIterable {
    /// The device key (`afterFirstUnlockThisDeviceOnly`): what every message is sealed to.
    case device
    /// The reveal key (`whenUnlockedThisDeviceOnly`, reveal v1 §1): what a reveal message's text is sealed to.
    case reveal
}

/// One key of a device, with which kind it is.
public struct DeviceKeyListing: Sendable, Equatable {
    /// Device key or reveal key.
    public let kind: DeviceKeyKind
    /// Its id, state and dates (never a secret).
    public let info: KeyInfo
}

/// A device's device key and reveal key together (reveal v1 §1): what `keys generate`, `export`,
/// `list` and `prune` work on.
///
/// Each key has its own id and lifecycle (`device` and `reveal` are ordinary keyrings: rotate,
/// stage, activate, retire and destroy each on its own). The exported record is the active device
/// key's, with the active reveal key in its `reveal` member when there is one.
public struct DeviceKeys: Sendable {
    /// The device keys (`sealedpush.device-key`).
    public let device: DeviceKeyring
    /// The reveal keys (`sealedpush.reveal-key`, `whenUnlockedThisDeviceOnly`).
    public let reveal: RevealKeyring

    /// Both keyrings over `store`.
    public init(store: KeychainStore) {
        device = DeviceKeyring(store: store)
        reveal = RevealKeyring(store: store)
    }

    /// Creates the first device key and, unless `reveal` is `false`, the first reveal key; returns the
    /// record to register (with its `reveal` member when a reveal key was made).
    ///
    /// Checks first and changes nothing when either keyring already has an active key
    /// (`activeKeyExists`), or, with `reveal`, when the phone is not unlocked (`interactionNotAllowed`:
    /// a `whenUnlockedThisDeviceOnly` key cannot be written while it is locked).
    @discardableResult
    public func generate(reveal withReveal: Bool = true) throws(KeychainError) -> DeviceKeyRecord {
        if let active = try device.list().first(where: { $0.state == .active }) { throw .activeKeyExists(keyID: active.keyID.hex) }
        if withReveal {
            if let active = try reveal.list().first(where: { $0.state == .active }) { throw .activeKeyExists(keyID: active.keyID.hex) }
            let state = try device.store.deviceLockState()
            try device.store.checkAvailable(RevealKeyPair.defaultAccessibility, "adding a reveal key", state: state)
        }
        let record = try device.generate()
        guard withReveal else { return record }
        return record.withReveal(try reveal.generate())
    }

    /// Adds a reveal key to a device that has a device key but no active reveal key (a record made
    /// with `generate(reveal: false)`, or one whose reveal key was destroyed); returns the new record.
    @discardableResult
    public func addReveal() throws(KeychainError) -> DeviceKeyRecord {
        let record = try device.export()
        return record.withReveal(try reveal.generate())
    }

    /// The record of the active device key, with the active reveal key when there is one (a reveal
    /// keyring without an active key gives a record without `reveal`). Works while locked.
    public func export() throws(KeychainError) -> DeviceKeyRecord {
        let record = try device.export()
        let revealRecord: RevealKeyRecord?
        do { revealRecord = try reveal.export() } catch .noActiveKey { revealRecord = nil }
        return record.withReveal(revealRecord)
    }

    /// Makes a new active reveal key; the previous one stays usable until now + `grace`, which covers
    /// reveal messages still waiting in Notification Center. Returns the record to register again.
    @discardableResult
    public func rotateReveal(grace: Duration = RevealKeyring.defaultGrace) throws(KeychainError) -> DeviceKeyRecord {
        _ = try reveal.rotate(grace: grace)
        return try export()
    }

    /// Makes a new active device key; the previous one stays usable until now + `grace`. The reveal
    /// key is unchanged. Returns the record to register again.
    @discardableResult
    public func rotateDevice(grace: Duration = DeviceKeyring.defaultGrace) throws(KeychainError) -> DeviceKeyRecord {
        _ = try device.rotate(grace: grace)
        return try export()
    }

    /// Every key of both kinds, device keys first, each oldest first. Works while locked.
    public func list() throws(KeychainError) -> [DeviceKeyListing] {
        try device.list().map { DeviceKeyListing(kind: .device, info: $0) } + reveal.list().map { DeviceKeyListing(kind: .reveal, info: $0) }
    }

    /// Destroys every retired key of both kinds whose deadline has passed; returns them.
    @discardableResult
    public func prune() throws(KeychainError) -> [DeviceKeyListing] {
        try device.prune().map { DeviceKeyListing(kind: .device, info: $0) } + reveal.prune().map { DeviceKeyListing(kind: .reveal, info: $0) }
    }
}
