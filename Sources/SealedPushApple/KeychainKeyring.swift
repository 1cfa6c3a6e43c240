#if canImport(UserNotifications)
public import SealedPushKeyring
public import SealedPushWire
public import SealedPushCrypto
public import Foundation
public import Logging
import Security
import Synchronization

/// The iOS Keychain as the storage of a key lifecycle (`KeyLifecycle`): generate, rotate, stage and
/// activate, retire, destroy and prune device, reveal or sender keys in a keychain access group the app and
/// its extensions share.
///
/// Every item is a generic password (`kSecClassGenericPassword`) in `accessGroup`, in the data protection
/// keychain (`kSecUseDataProtectionKeychain`), not synchronizable (`kSecAttrSynchronizable` false): service
/// the lifecycle's service (`sealedpush.device-key`, `….state`, `….active`), account the key id in hex
/// (`pointer` for the active-key pointer). A key's **secret** is written `secretAccessibility` (the kind's
/// `keychainAccessibility`: `kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly` for device keys,
/// `kSecAttrAccessibleWhenUnlockedThisDeviceOnly` for reveal keys); the **records** (each key's public key,
/// state and deadlines, and the pointer) hold no secret and are always
/// `kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly`, so a locked phone still lists keys and reads the
/// active public key (the service extension seals to the reveal public key, reveal v1 §5.1). When
/// `secretAccessibility` is `whenUnlockedThisDeviceOnly`, a secret is read together with its class
/// (`kSecReturnAttributes`) and an item that reads back in any other class is refused: it is logged (the
/// class's name, never the key) and read as unusable (`KeychainError.decode`; a lookup answers `.unknown`).
/// A key's secret is where `KeychainDeviceKeys` reads it.
/// An item is added with `SecItemAdd`, replaced with `SecItemUpdate` (data, label and class), removed with
/// `SecItemDelete` and read with `SecItemCopyMatching`; each call is atomic, and the lifecycle's intent log
/// (the pointer) lets the next writer finish or undo an operation the process did not complete.
///
/// Statuses: `errSecInteractionNotAllowed` is `KeychainError.interactionNotAllowed` (a lookup answers
/// `.locked`: before the first unlock for every item, and while locked for a `whenUnlockedThisDeviceOnly`
/// secret), `errSecMissingEntitlement` is `.missingEntitlement` and any other failure `.keychainStatus` (a
/// lookup answers `.unavailable`).
///
/// `transaction` serialises writers within this process only: the Keychain has no lock two processes can
/// share. Run the lifecycle's writing operations in the app; the extensions only look keys up.
public struct KeychainKeyringStorage: KeyringStorage {
    /// The keychain access group (`TEAMID.` followed by the group in the entitlement).
    public let accessGroup: String
    /// The clock of creation dates and deadlines.
    public let clock: WallClock
    /// The class secrets are written with (and, for `whenUnlockedThisDeviceOnly`, must read back as).
    public let secretAccessibility: KeychainAccessibility
    /// Where a refused item is logged (its class's name and location, never key material).
    public let logger: Logging.Logger
    private let inTransaction: Bool

    /// Serialises the writers of this process (one lock for every access group: writes are rare).
    private static let writers = Mutex(())

    /// The class of the records (public facts: readable after the first unlock, also while locked).
    static let recordAccessibility = KeychainAccessibility.afterFirstUnlockThisDeviceOnly

    /// Items in `accessGroup`, dated by `clock`; secrets written `secretAccessibility`.
    public init(accessGroup: String, clock: WallClock = .system, secretAccessibility: KeychainAccessibility = .afterFirstUnlockThisDeviceOnly,
                logger: Logging.Logger = Logging.Logger(label: "sealedpush.keychain")) {
        self.accessGroup = accessGroup
        self.clock = clock
        self.secretAccessibility = secretAccessibility
        self.logger = logger
        inTransaction = false
    }

    private init(inside other: KeychainKeyringStorage) {
        accessGroup = other.accessGroup
        clock = other.clock
        secretAccessibility = other.secretAccessibility
        logger = other.logger
        inTransaction = true
    }

    /// The clock's time.
    public func now() -> Date { clock.now() }

    /// Runs `body` holding this process's writers' lock (calls inside `body` run at once).
    public func transaction<R>(_ body: (KeychainKeyringStorage) throws(KeychainError) -> R) throws(KeychainError) -> R {
        if inTransaction { return try body(self) }
        let inside = KeychainKeyringStorage(inside: self)
        var result: Result<R, KeychainError>?
        Self.writers.withLock { _ in
            do throws(KeychainError) { result = .success(try body(inside)) } catch { result = .failure(error) }
        }
        return try result!.get()
    }

    /// A record's data, `nil` if there is none.
    public func readRecord(service: String, account: String) throws(KeychainError) -> SecureBytes? {
        try copy(service: service, account: account, secret: false, what: "\(service) record \(account)")
    }

    /// Every record of `service`.
    public func readRecords(service: String) throws(KeychainError) -> [(account: String, data: SecureBytes)] {
        var query = base(service: service, account: nil)
        query[kSecReturnData as String] = true
        query[kSecReturnAttributes as String] = true
        query[kSecMatchLimit as String] = kSecMatchLimitAll
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        if status == errSecItemNotFound { return [] }
        try check(status, "SecItemCopyMatching (\(service) records)", what: "the \(service) records", accessibility: Self.recordAccessibility)
        guard let items = result as? [[String: Any]] else { throw .decode(path: location(service: service, account: "*", secret: false),
                                                                         why: "the Keychain did not return a list of items") }
        return items.compactMap { item in
            guard let account = item[kSecAttrAccount as String] as? String, let data = item[kSecValueData as String] as? Data else { return nil }
            return (account, SecureBytes(data))
        }
    }

    /// Adds or replaces a record (`kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly`).
    public func writeRecord(service: String, account: String, data: SecureBytes, label: String) throws(KeychainError) {
        try write(service: service, account: account, data: data, label: label, accessibility: Self.recordAccessibility)
    }

    /// A key's secret, `nil` if there is none; `interactionNotAllowed` when its class is unavailable in the
    /// lock state; `decode` when it must read back `whenUnlockedThisDeviceOnly` and does not.
    public func readSecret(service: String, account: String, what: String) throws(KeychainError) -> SecureBytes? {
        try copy(service: service, account: account, secret: true, what: what)
    }

    /// Adds or replaces a key's secret, `secretAccessibility` (the tag is not stored: generic passwords have none).
    public func writeSecret(service: String, account: String, data: SecureBytes, label: String, tag: [UInt8]) throws(KeychainError) {
        try write(service: service, account: account, data: data, label: label, accessibility: secretAccessibility)
    }

    /// Deletes an item; nothing happens if it is absent.
    public func removeItem(service: String, account: String, secret: Bool) throws(KeychainError) {
        let status = SecItemDelete(base(service: service, account: account) as CFDictionary)
        if status == errSecItemNotFound { return }
        try check(status, "SecItemDelete", what: "\(service) item \(account)", accessibility: secret ? secretAccessibility : Self.recordAccessibility)
    }

    /// `keychain <group> <service>/<account>`.
    public func location(service: String, account: String, secret: Bool) -> String { "keychain \(accessGroup) \(service)/\(account)" }

    // MARK: -

    private func base(service: String, account: String?) -> [String: Any] {
        var query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword,
            kSecAttrService as String: service,
            kSecAttrAccessGroup as String: accessGroup,
            kSecUseDataProtectionKeychain as String: true,
        ]
        if let account { query[kSecAttrAccount as String] = account }
        return query
    }

    private func copy(service: String, account: String, secret: Bool, what: String) throws(KeychainError) -> SecureBytes? {
        let accessibility = secret ? secretAccessibility : Self.recordAccessibility
        switch KeychainItemRead.copy(base(service: service, account: account), required: accessibility) {
        case let .found(data, _):
            return SecureBytes(data)
        case let .status(status):
            if status == errSecItemNotFound { return nil }
            try check(status, "SecItemCopyMatching", what: what, accessibility: accessibility)
            return nil
        case .noData:
            throw .decode(path: location(service: service, account: account, secret: secret), why: "the Keychain returned no data")
        case let .refused(readBackAs):
            logger.error("keychain item refused: it must be \(accessibility) and reads back in another class",
                         metadata: ["accessibility": "\(readBackAs)", "service": "\(service)"])
            throw .decode(path: location(service: service, account: account, secret: secret),
                          why: "its accessibility reads back as \(readBackAs), not \(accessibility); it is refused — delete it and make the key again")
        }
    }

    private func write(service: String, account: String, data: SecureBytes, label: String, accessibility: KeychainAccessibility) throws(KeychainError) {
        let query = base(service: service, account: account)
        let value = Data(data.unsafeCopyToArray())
        var status = SecItemUpdate(query as CFDictionary, [kSecValueData as String: value, kSecAttrLabel as String: label,
                                                           kSecAttrAccessible as String: accessibility.attributeValue] as CFDictionary)
        if status == errSecItemNotFound {
            var attributes = query
            attributes[kSecAttrAccessible as String] = accessibility.attributeValue
            attributes[kSecAttrSynchronizable as String] = false
            attributes[kSecAttrLabel as String] = label
            attributes[kSecValueData as String] = value
            status = SecItemAdd(attributes as CFDictionary, nil)
        }
        try check(status, "SecItemAdd/SecItemUpdate", what: "writing \(label)", accessibility: accessibility)
    }

    private func check(_ status: OSStatus, _ operation: String, what: String, accessibility: KeychainAccessibility) throws(KeychainError) {
        switch status {
        case errSecSuccess: return
        case errSecInteractionNotAllowed:
            let when = accessibility == .whenUnlockedThisDeviceOnly ? "the phone is locked" : "the phone has not been unlocked since it started"
            throw .interactionNotAllowed("\(what) (\(accessibility): \(when))")
        case errSecMissingEntitlement: throw .missingEntitlement(group: accessGroup)
        case errSecDuplicateItem: throw .duplicateItem(what)
        default: throw .keychainStatus(operation: operation, status: status)
        }
    }
}

/// Keys of one X25519 kind in the iOS Keychain with their lifecycle, and an extension's `DeviceKeyProvider`:
/// `KeychainDeviceKeyring` (device keys) and `KeychainRevealKeyring` (reveal keys, reveal v1 §1).
///
/// The app generates, rotates, retires and prunes through `lifecycle`; an extension looks keys up with
/// `lookUpKey(id:)`, which honours retirement deadlines and destroyed keys (three `SecItemCopyMatching`
/// calls: the pointer, the key's state, the secret). Secrets are written in the kind's class
/// (`Material.keychainAccessibility`); the records in `kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly`.
public struct KeychainKeyring<Material: BoxKeyMaterial>: DeviceKeyProvider {
    /// The lifecycle over the Keychain.
    public let lifecycle: KeyLifecycle<Material, KeychainKeyringStorage>

    /// Keys in `accessGroup`, dated by `clock`; refused items are logged to `logger`.
    public init(accessGroup: String, clock: WallClock = .system, logger: Logging.Logger = Logging.Logger(label: "sealedpush.keychain")) {
        lifecycle = KeyLifecycle(storage: KeychainKeyringStorage(accessGroup: accessGroup, clock: clock,
                                                                 secretAccessibility: Material.keychainAccessibility, logger: logger))
    }

    /// The usable key pair with id `keyID`: `.found`, `.unknown` (never made, destroyed, past its deadline, or an
    /// item in the wrong class), `.locked` (its class is unavailable in the lock state) or `.unavailable`
    /// (missing entitlement, other Keychain errors).
    public func lookUpKey(id keyID: KeyID) -> KeyLookup {
        switch lifecycle.lookUp(keyID) {
        case let .found(material, _): return .found(material.boxKeyPair)
        case .unknown: return .unknown
        case .locked: return .locked
        case .unavailable: return .unavailable
        }
    }

    /// The active key's public key, read from its record (no secret is read): readable after the first
    /// unlock, also while the phone is locked, whatever the secret's class. `noActiveKey` when there is none.
    public func activePublicKey() throws(KeychainError) -> BoxPublicKey {
        let info = try lifecycle.usableInfo(nil)
        do { return try BoxPublicKey(bytes: info.publicKey) } catch {
            throw .decode(path: lifecycle.storage.location(service: Material.service + ".state", account: info.keyID.hex, secret: false),
                          why: "the stored public key is malformed")
        }
    }

    /// Whether this kind's secrets can be read now: `false` when the Keychain refuses their data with
    /// `errSecInteractionNotAllowed` (their class is unavailable in the lock state), `true` otherwise (also
    /// when there is no key: the lookup then says so).
    public func isReadable() -> Bool {
        KeychainItemRead.isReadable([
            kSecClass as String: kSecClassGenericPassword,
            kSecAttrService as String: Material.service,
            kSecAttrAccessGroup as String: lifecycle.storage.accessGroup,
            kSecUseDataProtectionKeychain as String: true,
        ])
    }
}

/// The device's keys in the iOS Keychain (`kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly`) with their
/// lifecycle: the service extension's `DeviceKeyProvider`.
public typealias KeychainDeviceKeyring = KeychainKeyring<BoxKeyPair>
#endif
