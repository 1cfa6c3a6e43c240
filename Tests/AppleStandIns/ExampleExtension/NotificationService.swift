// The notification service extension docs/ios.md shows, compiled here as an app target would compile
// it with Xcode 26's defaults (default MainActor isolation; see Package.swift).
import SealedPushApple
import SealedPushReceiver
import UserNotifications

nonisolated final class NotificationService: SealedPushServiceExtension {
    /// Where the app and its extensions keep SealedPush's keys and state (SharedSettings.swift, in all three targets).
    static let settings = SharedSettings.sealedPush(logSubsystem: "com.example.app.NotificationService")
    override func configuration(for request: UNNotificationRequest) -> SecretMessageExtension.Configuration {
        // One URLSession each for attachments and receipts for the whole process: iOS runs several instances of this
        // class in one process, with requests in parallel.
        standardConfiguration(for: request, settings: Self.settings, fetcher: URLSessionAttachmentFetcher.shared,
                              receiptTransport: URLSessionReceiptTransport.shared)
    }
}
