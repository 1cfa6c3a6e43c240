#if canImport(UserNotifications)
public import SealedPushKeyring
public import SealedPushWire
public import SealedPushCrypto
public import Foundation
import Security
import Synchronization

/// The iOS Keychain as the storage of a key lifecycle (`KeyLifecycle`): generate, rotate, stage and
/// activate, retire, destroy and prune device or sender keys in a keychain access group the app and its
/// extension share.
///
/// Every item is a generic password (`kSecClassGenericPassword`) in `accessGroup`, in the data protection
/// keychain (`kSecUseDataProtectionKeychain`), accessible `kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly`:
/// service the lifecycle's service (`sealedpush.device-key`, `….state`, `….active`), account the key id
/// in hex (`pointer` for the active-key pointer). A key's secret is where `KeychainDeviceKeys` reads it.
/// An item is added with `SecItemAdd`, replaced with `SecItemUpdate`, removed with `SecItemDelete` and read
/// with `SecItemCopyMatching`; each call is atomic, and the lifecycle's intent log (the pointer) lets the
/// next writer finish or undo an operation the process did not complete.
///
/// Statuses: `errSecInteractionNotAllowed` is `KeychainError.interactionNotAllowed` (a lookup answers
/// `.locked`), `errSecMissingEntitlement` is `.missingEntitlement` and any other failure
/// `.keychainStatus` (a lookup answers `.unavailable`).
///
/// `transaction` serialises writers within this process only: the Keychain has no lock two processes can
/// share. Run the lifecycle's writing operations in the app; the extension only looks keys up.
public struct KeychainKeyringStorage: KeyringStorage {
    /// The keychain access group (`TEAMID.` followed by the group in the entitlement).
    public let accessGroup: String
    /// The clock of creation dates and deadlines.
    public let clock: WallClock
    private let inTransaction: Bool

    /// Serialises the writers of this process (one lock for every access group: writes are rare).
    private static let writers = Mutex(())

    /// Items in `accessGroup`, dated by `clock`.
    public init(accessGroup: String, clock: WallClock = .system) {
        self.accessGroup = accessGroup
        self.clock = clock
        inTransaction = false
    }

    private init(inside other: KeychainKeyringStorage) {
        accessGroup = other.accessGroup
        clock = other.clock
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
        try copy(service: service, account: account, what: "\(service) record \(account)")
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
        try check(status, "SecItemCopyMatching (\(service) records)", what: "the \(service) records")
        guard let items = result as? [[String: Any]] else { throw .decode(path: location(service: service, account: "*", secret: false),
                                                                         why: "the Keychain did not return a list of items") }
        return items.compactMap { item in
            guard let account = item[kSecAttrAccount as String] as? String, let data = item[kSecValueData as String] as? Data else { return nil }
            return (account, SecureBytes(data))
        }
    }

    /// Adds or replaces a record.
    public func writeRecord(service: String, account: String, data: SecureBytes, label: String) throws(KeychainError) {
        try write(service: service, account: account, data: data, label: label)
    }

    /// A key's secret, `nil` if there is none; `interactionNotAllowed` before the first unlock.
    public func readSecret(service: String, account: String, what: String) throws(KeychainError) -> SecureBytes? {
        try copy(service: service, account: account, what: what)
    }

    /// Adds or replaces a key's secret (the tag is not stored: generic passwords have none).
    public func writeSecret(service: String, account: String, data: SecureBytes, label: String, tag: [UInt8]) throws(KeychainError) {
        try write(service: service, account: account, data: data, label: label)
    }

    /// Deletes an item; nothing happens if it is absent.
    public func removeItem(service: String, account: String, secret: Bool) throws(KeychainError) {
        let status = SecItemDelete(base(service: service, account: account) as CFDictionary)
        if status == errSecItemNotFound { return }
        try check(status, "SecItemDelete", what: "\(service) item \(account)")
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

    private func copy(service: String, account: String, what: String) throws(KeychainError) -> SecureBytes? {
        var query = base(service: service, account: account)
        query[kSecReturnData as String] = true
        query[kSecMatchLimit as String] = kSecMatchLimitOne
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        if status == errSecItemNotFound { return nil }
        try check(status, "SecItemCopyMatching", what: what)
        guard let data = result as? Data else {
            throw .decode(path: location(service: service, account: account, secret: false), why: "the Keychain returned no data")
        }
        return SecureBytes(data)
    }

    private func write(service: String, account: String, data: SecureBytes, label: String) throws(KeychainError) {
        let query = base(service: service, account: account)
        let value = Data(data.unsafeCopyToArray())
        var status = SecItemUpdate(query as CFDictionary, [kSecValueData as String: value, kSecAttrLabel as String: label] as CFDictionary)
        if status == errSecItemNotFound {
            var attributes = query
            attributes[kSecAttrAccessible as String] = kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly
            attributes[kSecAttrLabel as String] = label
            attributes[kSecValueData as String] = value
            status = SecItemAdd(attributes as CFDictionary, nil)
        }
        try check(status, "SecItemAdd/SecItemUpdate", what: "writing \(label)")
    }

    private func check(_ status: OSStatus, _ operation: String, what: String) throws(KeychainError) {
        switch status {
        case errSecSuccess: return
        case errSecInteractionNotAllowed: throw .interactionNotAllowed("\(what) (the device has not been unlocked since it started)")
        case errSecMissingEntitlement: throw .missingEntitlement(group: accessGroup)
        case errSecDuplicateItem: throw .duplicateItem(what)
        default: throw .keychainStatus(operation: operation, status: status)
        }
    }
}

/// The device's keys in the iOS Keychain with their lifecycle, and the extension's `DeviceKeyProvider`.
///
/// The app generates, rotates, retires and prunes through `lifecycle`; the extension looks keys up with
/// `lookUpKey(id:)`, which honours retirement deadlines and destroyed keys (three `SecItemCopyMatching`
/// calls: the pointer, the key's state, the secret).
public struct KeychainDeviceKeyring: DeviceKeyProvider {
    /// The lifecycle over the Keychain.
    public let lifecycle: KeyLifecycle<BoxKeyPair, KeychainKeyringStorage>

    /// Device keys in `accessGroup`, dated by `clock`.
    public init(accessGroup: String, clock: WallClock = .system) {
        lifecycle = KeyLifecycle(storage: KeychainKeyringStorage(accessGroup: accessGroup, clock: clock))
    }

    /// The usable key pair with id `keyID`: `.found`, `.unknown` (never made, destroyed, past its deadline),
    /// `.locked` (before the first unlock) or `.unavailable` (missing entitlement, other Keychain errors).
    public func lookUpKey(id keyID: KeyID) -> KeyLookup {
        switch lifecycle.lookUp(keyID) {
        case let .found(pair, _): return .found(pair)
        case .unknown: return .unknown
        case .locked: return .locked
        case .unavailable: return .unavailable
        }
    }
}
#endif
