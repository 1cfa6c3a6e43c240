#if canImport(UserNotifications)
public import SealedPushWire
public import SealedPushCrypto
public import Logging
public import Security
import SealedPushKeyring
import Foundation

/// Device private keys in the Keychain, shared by the app and its extension through an access group.
///
/// Each key is a generic password: service `service`, account the key id in hex, data the 32-byte
/// X25519 secret, in the access group both targets list in `keychain-access-groups`, not synchronizable,
/// accessible `accessibility`: by default `kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly` (readable while
/// locked once the device was unlocked after boot; never in backups or on another device); for reveal keys
/// (service `sealedpush.reveal-key`) `kSecAttrAccessibleWhenUnlockedThisDeviceOnly`, in which case a lookup
/// reads the item's class back and refuses any other (logged by the class's name; `.unknown`). A lookup
/// answers `.locked` for `errSecInteractionNotAllowed` (the class is unavailable in the lock state),
/// `.unknown` for a missing item or one that does not hold this key id's secret, and `.unavailable` for
/// any other status (a missing entitlement: `errSecMissingEntitlement`), which the opener reports as
/// `keychainLocked`. `KeychainKeyring` reads the same secret items with their lifecycle.
public struct KeychainDeviceKeys: DeviceKeyProvider {
    /// The service the items are stored under by default.
    public static let defaultService = "sealedpush.device-key"

    /// The keychain access group (`TEAMID.` followed by the group in the entitlement).
    public let accessGroup: String
    /// The items' service attribute.
    public let service: String
    /// The class the items are added with (and, for `whenUnlockedThisDeviceOnly`, must read back as).
    public let accessibility: KeychainAccessibility
    /// Where lookups that fail with an unexpected status are logged (the status, never key material).
    public var logger: Logging.Logger

    /// Keys in `accessGroup` under `service`, in class `accessibility`. Reveal keys (service `sealedpush.reveal-key`)
    /// are always `whenUnlockedThisDeviceOnly`, whatever `accessibility` says, and read back with their class
    /// checked: a reveal key readable after the first unlock would undo what reveal v1 §1 promises.
    public init(accessGroup: String, service: String = KeychainDeviceKeys.defaultService,
                accessibility: KeychainAccessibility = .afterFirstUnlockThisDeviceOnly,
                logger: Logging.Logger = Logging.Logger(label: "sealedpush.keychain")) {
        self.accessGroup = accessGroup
        self.service = service
        self.accessibility = service == RevealKeyPair.service ? .whenUnlockedThisDeviceOnly : accessibility
        self.logger = logger
    }

    /// The key pair whose public key has id `keyID`.
    public func lookUpKey(id keyID: KeyID) -> KeyLookup {
        switch KeychainItemRead.copy(itemQuery(keyID), required: accessibility) {
        case let .found(data, _):
            guard data.count == BoxKeyPair.secretKeyByteCount, let pair = try? BoxKeyPair(secretKey: SecureBytes(data)),
                  pair.keyID == keyID else { return .unknown }
            return .found(pair)
        case .noData:
            return .unknown
        case let .refused(readBackAs):
            logger.error("keychain item refused: it must be \(accessibility) and reads back in another class",
                         metadata: ["accessibility": "\(readBackAs)", "key_id": "\(keyID.hex)"])
            return .unknown
        case let .status(status):
            switch status {
            case errSecItemNotFound: return .unknown
            case errSecInteractionNotAllowed: return .locked
            default:
                logger.error("keychain lookup failed", metadata: ["status": "\(status)", "key_id": "\(keyID.hex)"])
                return .unavailable
            }
        }
    }

    /// Whether this provider's keys can be read now: `false` when the Keychain refuses with
    /// `errSecInteractionNotAllowed` (the device is locked and the keys' class is unavailable). For the
    /// content extension, which cannot ask `UIApplication`, ask the reveal keys
    /// (`KeychainRevealKeyring.isReadable()`), whose class is the one that locks.
    public func isReadable() -> Bool {
        KeychainItemRead.isReadable([
            kSecClass as String: kSecClassGenericPassword,
            kSecAttrAccessGroup as String: accessGroup,
            kSecAttrService as String: service,
            kSecUseDataProtectionKeychain as String: true,
        ])
    }

    /// Stores `keyPair`'s secret as this provider reads it (the app calls this once, after generating
    /// the pair); returns the `SecItemAdd` status (`errSecDuplicateItem` if the key id is stored).
    public func add(_ keyPair: BoxKeyPair) -> OSStatus {
        var attributes = itemQuery(keyPair.keyID)
        attributes[kSecAttrAccessible as String] = accessibility.attributeValue
        attributes[kSecAttrSynchronizable as String] = false
        attributes[kSecValueData as String] = Data(keyPair.secretKey.unsafeCopyToArray())
        return SecItemAdd(attributes as CFDictionary, nil)
    }

    /// The attributes that name one key's item.
    private func itemQuery(_ keyID: KeyID) -> [String: Any] {
        [
            kSecClass as String: kSecClassGenericPassword,
            kSecAttrService as String: service,
            kSecAttrAccount as String: keyID.hex,
            kSecAttrAccessGroup as String: accessGroup,
            kSecUseDataProtectionKeychain as String: true,
        ]
    }
}
#endif
