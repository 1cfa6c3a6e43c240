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
    ///
    /// Before the first unlock since the phone started (an app launched in the background: a prewarm, a background
    /// task), `UserDefaults` reads as empty, which would look like a fresh install and wipe the keys of this one:
    /// then it does nothing and returns `false` (call it again on a later launch). It tells by creating or reading
    /// a class C file (`completeUntilFirstUserAuthentication`) in `SealedPush/` of the app group container; without
    /// the App Groups capability it cannot tell and goes by `defaults` alone.
    @discardableResult
    public static func wipeKeychainAfterInstall(settings: SealedPushSettings, defaults: UserDefaults = .standard) -> Bool {
        guard protectedDataAvailable(appGroup: settings.appGroup) != false else { return false }
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

    /// The file whose class C tells whether the phone was unlocked since it started.
    static let protectedDataProbeName = "protected-data-probe"

    /// Whether class C files (and `UserDefaults`) can be read: a class C probe file in the app group reads or can be
    /// made. `nil` when it cannot tell (no app group container, or another error).
    static func protectedDataAvailable(appGroup: String, files: any AppGroupFileSystem = SystemAppGroupFiles()) -> Bool? {
        guard let directory = try? AppGroupContainer.directory(groupIdentifier: appGroup, files: files) else { return nil }
        let probe = directory.appendingPathComponent(protectedDataProbeName)
        do {
            switch try files.read(probe, maximumBytes: 64) {
            case .bytes, .oversized: return true
            case .missing:
                try files.createDirectory(at: directory, protection: .noProtection)
                try files.createFile(at: probe, protection: .completeUntilFirstUserAuthentication)
                return true
            }
        } catch .protectedDataUnavailable {
            return false
        } catch {
            return nil
        }
    }
}
#endif
