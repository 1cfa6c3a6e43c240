// The notification service extension docs/ios.md shows, compiled here as an app target would compile
// it with Xcode 26's defaults (default MainActor isolation; see Package.swift).
import SealedPushApple
import SealedPushReceiver
import UserNotifications

nonisolated final class NotificationService: SealedPushServiceExtension {
    /// Where the app and its extensions keep SealedPush's keys and state (the same in all three targets).
    static let settings = SealedPushSettings(keychainAccessGroup: "ABCDE12345.com.example.shared",
                                             appGroup: "group.com.example",
                                             logSubsystem: "com.example.app.NotificationService")
    /// One URLSession each for attachments and receipts, reused by every request of the extension process.
    let fetcher = URLSessionAttachmentFetcher()
    let receipts = URLSessionReceiptTransport()

    override func configuration(for request: UNNotificationRequest) -> SecretMessageExtension.Configuration {
        standardConfiguration(for: request, settings: Self.settings, fetcher: fetcher, receiptTransport: receipts)
    }
}
