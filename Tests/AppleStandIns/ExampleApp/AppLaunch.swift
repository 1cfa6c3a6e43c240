// The app side of docs/ios.md §4 and §5, compiled here as an app target would compile it (default MainActor
// isolation): trusting the server's sender key, the preview setting, and what the app does on launch.
import SealedPushApple
import SealedPushReceiver
import SealedPushWire

/// Trusts the server's sender key and sets the preview policy.
func setUpTrust(senderRecordFromYourServer: [UInt8]) throws {
    // In the app: trust the server's sender key (its record is public), and let the user pick the previews.
    let trust = KeychainTrustStore(accessGroup: "ABCDE12345.com.example.shared")
    try trust.trust(try SenderKeyRecord(jsonBytes: senderRecordFromYourServer))
    try trust.setPreviews(.hidden)   // "none": iOS is handed only the placeholder; press and hold to read
}

/// The app's own settings (SharedSettings.swift: the same keychain access group and app group as the extensions').
let appSettings = SharedSettings.sealedPush(logSubsystem: "com.example.app")

/// Opens the pending queue and flushes the receipt outbox.
func onLaunch() {
    // In the app, e.g. from application(_:didFinishLaunchingWithOptions:), and from a BGTaskScheduler task:
    SealedPushApp.wipeKeychainAfterInstall(settings: appSettings)   // the first launch after an install only
    Task {
        let summary = await SealedPushApp.didLaunch(settings: appSettings,
                                                    receiptTransport: URLSessionReceiptTransport.shared)
        _ = summary   // pending.replaced: notifications opened from the pending queue; receipts.sent: receipts delivered
    }
}
