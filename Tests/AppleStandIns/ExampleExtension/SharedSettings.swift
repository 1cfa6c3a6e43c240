// The one file docs/ios.md §2 has the app, the service extension and the content extension share (add it to all
// three targets), compiled here as an app target would compile it (default MainActor isolation).
import SealedPushApple

/// Where the app and its extensions keep SealedPush's keys and state, and the choices they make: one definition for
/// all three targets, so that they never disagree.
nonisolated enum SharedSettings {
    /// The settings of the target whose unified logging subsystem is `logSubsystem`.
    static func sealedPush(logSubsystem: String) -> SealedPushSettings {
        var settings = SealedPushSettings(keychainAccessGroup: "ABCDE12345.com.example.shared",
                                          appGroup: "group.com.example",
                                          logSubsystem: logSubsystem)
        settings.signatures = .required   // the default: only messages signed by a sender the app trusts open
        settings.plaintext = .refuse      // the default: a push without ENCRYPTED_DATA never shows its text
        return settings
    }
}
