#if canImport(UserNotifications)
public import SealedPushReceiver
import SealedPushWire
import UserNotifications
public import Logging
import Foundation

/// Replaces a notification iOS still shows in Notification Center (reveal v1 §9): what a pending message's
/// placeholder becomes once its device key reads, under the same request identifier.
///
/// `replaceDelivered(_:)` asks `UNUserNotificationCenter.current()` for the delivered notifications; when the
/// identifier is among them it adds a request with that identifier and the new content (iOS replaces a delivered
/// notification added again under its identifier), else it does nothing (the user removed it). The content is
/// built as the service extension builds it (`UNNotificationContent.applying(_:over:logger:)`), attachments
/// included. Works in the app and in an extension; nothing is kept.
public struct NotificationCenterReplacer: DeliveredNotificationReplacer {
    /// Where a failed replacement is logged (its error, never the content).
    public var logger: Logging.Logger

    /// A replacer over the app's notification center.
    public init(logger: Logging.Logger = Logging.Logger(label: "sealedpush.pending")) {
        self.logger = logger
    }

    /// Replaces the delivered notification `request.identifier`; `false` when it is no longer delivered or iOS refused.
    public func replaceDelivered(_ request: SealedPushReceiver.NotificationRequest) async -> Bool {
        let identifier = request.identifier
        let shown: [String] = await withCheckedContinuation { continuation in
            UNUserNotificationCenter.current().getDeliveredNotifications { notifications in
                continuation.resume(returning: notifications.map { $0.request.identifier })
            }
        }
        guard shown.contains(identifier) else { return false }
        let content = UNMutableNotificationContent().applying(request.content, over: NotificationContent(), logger: logger)
        let replacement = UNNotificationRequest(identifier: identifier, content: content, trigger: nil)
        let failure: String? = await withCheckedContinuation { continuation in
            UNUserNotificationCenter.current().add(replacement) { error in
                continuation.resume(returning: error.map { "\($0)" })
            }
        }
        if let failure {
            logger.error("the notification could not be replaced", metadata: ["error": "\(failure)"])
            return false
        }
        return true
    }
}
#endif
