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

    /// The text of the one alert posted when more than three notifications were replaced at once (no message text).
    public var summaryText: @Sendable (Int) -> String = { "\($0) messages arrived while your phone was locked" }
    /// The request identifier of the summary alert (a later summary replaces it).
    public static let summaryIdentifier = "sealedpush.pending-summary"

    /// A replacer over the app's notification center.
    public init(logger: Logging.Logger = Logging.Logger(label: "sealedpush.pending")) {
        self.logger = logger
    }

    /// Posts one alert (default sound, `.active`) saying how many notifications were replaced.
    public func summarize(replaced count: Int) async {
        let content = UNMutableNotificationContent()
        content.body = summaryText(count)
        content.sound = .default
        content.interruptionLevel = .active
        let request = UNNotificationRequest(identifier: Self.summaryIdentifier, content: content, trigger: nil)
        let failure: String? = await withCheckedContinuation { continuation in
            UNUserNotificationCenter.current().add(request) { error in continuation.resume(returning: error.map { "\($0)" }) }
        }
        if let failure { logger.error("the summary alert could not be posted", metadata: ["error": "\(failure)"]) }
    }

    /// Removes the delivered notifications whose userInfo holds `SEALEDPUSH_FETCH` equal to `handle` (a retracted mailbox
    /// message, mailbox v1 §6); returns how many.
    public func removeDelivered(holdingHandle handle: String) async -> Int {
        let holding: [String] = await withCheckedContinuation { continuation in
            UNUserNotificationCenter.current().getDeliveredNotifications { notifications in
                continuation.resume(returning: notifications.filter {
                    ($0.request.content.userInfo[MailboxHandle.apnsKey] as? String) == handle
                }.map { $0.request.identifier })
            }
        }
        if !holding.isEmpty { UNUserNotificationCenter.current().removeDeliveredNotifications(withIdentifiers: holding) }
        return holding.count
    }

    /// The delivered notifications whose userInfo holds a `SEALEDPUSH_FETCH` string (mailbox v1 §5 "Later").
    public func deliveredHoldingHandles() async -> [SealedPushReceiver.NotificationRequest] {
        let kept: [KeptNotification] = await withCheckedContinuation { continuation in
            UNUserNotificationCenter.current().getDeliveredNotifications { notifications in
                continuation.resume(returning: notifications.compactMap { n in
                    guard n.request.content.userInfo[MailboxHandle.apnsKey] is String,
                          let content = NotificationContent(n.request.content) else { return nil }
                    return KeptNotification(identifier: n.request.identifier, content: content)
                })
            }
        }
        return kept.map { SealedPushReceiver.NotificationRequest(identifier: $0.identifier, content: $0.content) }
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
        // Silent: ten messages that waited for the unlock must not give ten alerts at once (one summary does).
        if let mutable = content as? UNMutableNotificationContent {
            mutable.interruptionLevel = .passive
            mutable.sound = nil
        }
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

/// A delivered notification's identifier and content, carried out of the completion handler.
private struct KeptNotification: Sendable {
    var identifier: String
    var content: NotificationContent
}
#endif
