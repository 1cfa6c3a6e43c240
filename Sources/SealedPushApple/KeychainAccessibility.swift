#if canImport(UserNotifications)
public import SealedPushKeyring
import Security
import Foundation

/// The Keychain accessibility classes (`kSecAttrAccessible`) SealedPush writes its items with.
///
/// Both are `…ThisDeviceOnly`: the items never go into a backup that restores onto another device, and
/// they are written with `kSecAttrSynchronizable` false (never in iCloud Keychain).
public enum KeychainAccessibility: Sendable, Equatable, CaseIterable, CustomStringConvertible {
    /// `kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly`: readable once the phone was unlocked after it
    /// started, also while it is locked. Device keys, and every public record (state, pointer) of a keyring.
    case afterFirstUnlockThisDeviceOnly
    /// `kSecAttrAccessibleWhenUnlockedThisDeviceOnly`: readable only while the phone is unlocked. Reveal keys
    /// (reveal v1 §1).
    case whenUnlockedThisDeviceOnly

    /// Apple's name of the class's constant.
    public var description: String {
        switch self {
        case .afterFirstUnlockThisDeviceOnly: return "kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly"
        case .whenUnlockedThisDeviceOnly: return "kSecAttrAccessibleWhenUnlockedThisDeviceOnly"
        }
    }

    /// The `kSecAttrAccessible` value.
    var attributeValue: CFString {
        switch self {
        case .afterFirstUnlockThisDeviceOnly: return kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly
        case .whenUnlockedThisDeviceOnly: return kSecAttrAccessibleWhenUnlockedThisDeviceOnly
        }
    }

    /// Whether a read checks the class an item reads back as and refuses any other: only for
    /// `whenUnlockedThisDeviceOnly`, whose point is that the secret does not open on a locked phone (reveal
    /// v1 §1: a reveal key item in another class is refused, failing closed).
    var checkedOnRead: Bool { self == .whenUnlockedThisDeviceOnly }

    /// Apple's name of the accessibility class whose `kSecAttrAccessible` value is `value` (read back from an
    /// item), for logs and errors; an unknown value is named as it is (it is no secret).
    static func name(ofAttributeValue value: String?) -> String {
        guard let value else { return "no kSecAttrAccessible value" }
        let names: [String: String] = [
            kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly as String: "kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly",
            kSecAttrAccessibleWhenUnlockedThisDeviceOnly as String: "kSecAttrAccessibleWhenUnlockedThisDeviceOnly",
            kSecAttrAccessibleWhenUnlocked as String: "kSecAttrAccessibleWhenUnlocked",
            kSecAttrAccessibleAfterFirstUnlock as String: "kSecAttrAccessibleAfterFirstUnlock",
            kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly as String: "kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly",
            // kSecAttrAccessibleAlways and …AlwaysThisDeviceOnly are deprecated: named by their values, not referenced.
            "dk": "kSecAttrAccessibleAlways",
            "dku": "kSecAttrAccessibleAlwaysThisDeviceOnly",
        ]
        return names[value] ?? "an unknown class (\(value))"
    }
}

extension KeyringMaterial {
    /// The Keychain class of this kind's secrets: `whenUnlockedThisDeviceOnly` for reveal keys (they must not
    /// open while the phone is locked), `afterFirstUnlockThisDeviceOnly` (readable by the service extension on
    /// a locked phone) for the others.
    ///
    /// A protocol extension, not a requirement: `KeyringMaterial` lives in SealedPushKeyring, which knows
    /// nothing of the Keychain (the file store has its own `defaultAccessibility`).
    public static var keychainAccessibility: KeychainAccessibility {
        Self.self == RevealKeyPair.self ? .whenUnlockedThisDeviceOnly : .afterFirstUnlockThisDeviceOnly
    }
}

/// The one way SealedPushApple reads a generic password's secret: its data together with the class it reads
/// back as (`kSecReturnAttributes`), so that a class that must be checked is.
enum KeychainItemRead {
    /// The item's data and its `kSecAttrAccessible` value.
    case found(Data, accessible: String?)
    /// `SecItemCopyMatching` answered something else than success (`errSecItemNotFound` included).
    case status(OSStatus)
    /// The item reads back in another class than the one required: its class's name (never its data).
    case refused(readBackAs: String)
    /// The Keychain answered success without the item's data.
    case noData

    /// Reads the one item `query` names (`kSecMatchLimitOne`); with `required`, an item whose class is
    /// not `required` is refused when that class is checked on read.
    static func copy(_ query: [String: Any], required: KeychainAccessibility?) -> KeychainItemRead {
        var query = query
        query[kSecReturnData as String] = true
        query[kSecReturnAttributes as String] = true
        query[kSecMatchLimit as String] = kSecMatchLimitOne
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        guard status == errSecSuccess else { return .status(status) }
        guard let item = result as? [String: Any], let data = item[kSecValueData as String] as? Data else { return .noData }
        let accessible = item[kSecAttrAccessible as String] as? String
        if let required, required.checkedOnRead, accessible != (required.attributeValue as String) {
            return .refused(readBackAs: KeychainAccessibility.name(ofAttributeValue: accessible))
        }
        return .found(data, accessible: accessible)
    }

    /// Whether the items of `query` can be read in the device's lock state now: `false` only when the Keychain
    /// answers `errSecInteractionNotAllowed` for their data (no item, or another status, is `true`: the lookup
    /// that follows reports it).
    static func isReadable(_ query: [String: Any]) -> Bool {
        var query = query
        query[kSecReturnData as String] = true
        query[kSecMatchLimit as String] = kSecMatchLimitOne
        var result: CFTypeRef?
        return SecItemCopyMatching(query as CFDictionary, &result) != errSecInteractionNotAllowed
    }
}
#endif
