// `RevealKeyPair` and `BoxKeyMaterial` live in SealedPushKeyring (shared with the iOS Keychain store of
// SealedPushApple); `import SealedPushKeychain` keeps bringing them (Keyrings.swift re-exports SealedPushKeyring).
public import SealedPushKeyring

extension KeyringMaterial {
    /// The accessibility a keyring gives new keys of this kind unless told otherwise:
    /// `whenUnlockedThisDeviceOnly` for reveal keys (they must not open while the phone is locked),
    /// `afterFirstUnlockThisDeviceOnly` (readable by an extension while the phone is locked) for the others.
    ///
    /// A protocol extension, not a requirement: `KeyringMaterial` lives in SealedPushKeyring, which does not
    /// know the file store's `Accessibility`.
    public static var defaultAccessibility: Accessibility {
        Self.self == RevealKeyPair.self ? .whenUnlockedThisDeviceOnly : .afterFirstUnlockThisDeviceOnly
    }
}
