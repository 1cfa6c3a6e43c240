// The notification service extension docs/ios.md shows, compiled here as an app target would compile
// it with Xcode 26's defaults (default MainActor isolation; see Package.swift).
import SealedPushApple
import SealedPushReceiver
import UserNotifications
import Logging

nonisolated final class NotificationService: SealedPushServiceExtension {
    /// One URLSession for the extension process, reused by every request.
    let fetcher = URLSessionAttachmentFetcher()

    override func configuration(for request: UNNotificationRequest) -> SecretMessageExtension.Configuration {
        SecretMessageExtension.Configuration(
            keys: KeychainDeviceKeyring(accessGroup: "ABCDE12345.com.example.shared"),
            logger: .unifiedLogging(label: "sealedpush.extension", subsystem: "com.example.app.NotificationService"),
            attachments: attachmentPipeline(for: request, fetcher: fetcher)
        )
    }
}
