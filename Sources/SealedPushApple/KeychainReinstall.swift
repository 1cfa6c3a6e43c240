#if canImport(UserNotifications)
import SealedPushKeyring
import SealedPushCrypto
import Security
public import Foundation

extension SealedPushApp {
    /// The `UserDefaults` key that marks this installation as having run SealedPush's first-launch wipe.
    public static let installedMarkerKey = "sealedpush.installed"

    /// The Keychain services SealedPush writes (device and reveal keys with their records, trust and settings).
    static var keychainServices: [String] {
        [BoxKeyPair.service, RevealKeyPair.service].flatMap { [$0, $0 + ".state", $0 + ".active"] }
            + [KeychainTrustStore.senderService, KeychainTrustStore.policyService]
    }

    /// On the first launch after an install, deletes every SealedPush Keychain item in the access group (reveal v1
    /// §1): Keychain items survive an uninstall, and keys, trust and settings of a previous installation must not
    /// be picked up by this one (its server knows none of them). Returns `true` when it wiped.
    ///
    /// The marker is kept in `defaults` (the app's own `UserDefaults.standard` by default), which an uninstall
    /// removes. Call it in the app — never in an extension, whose defaults are its own — before generating keys.
    /// A wipe that fails leaves the marker unset, so it is tried again on the next launch.
    @discardableResult
    public static func wipeKeychainAfterInstall(settings: SealedPushSettings, defaults: UserDefaults = .standard) -> Bool {
        guard !defaults.bool(forKey: installedMarkerKey) else { return false }
        var wiped = true
        for service in keychainServices {
            let query: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword,
                kSecAttrService as String: service,
                kSecAttrAccessGroup as String: settings.keychainAccessGroup,
                kSecUseDataProtectionKeychain as String: true,
            ]
            let status = SecItemDelete(query as CFDictionary)
            if status != errSecSuccess && status != errSecItemNotFound { wiped = false }
        }
        if wiped { defaults.set(true, forKey: installedMarkerKey) }
        return wiped
    }
}
#endif
