#if canImport(UIKit) && canImport(UserNotificationsUI)
public import UIKit
public import UserNotifications
public import UserNotificationsUI
public import SealedPushReceiver
import SealedPushWire
import Foundation

/// The view controller of a notification content extension that reveals SealedPush messages (reveal v1 §4);
/// an app's content extension subclasses it.
///
/// iOS makes it when the user presses and holds a notification of a category the extension lists in
/// `UNNotificationExtensionCategory` (the reveal category, `SEALED_REVEAL` by default). `didReceive(_:)`
/// runs a `RevealContentExtension` over the notification as iOS keeps it (the `SEALEDPUSH_REVEAL` envelope,
/// or `ENCRYPTED_DATA` under a preview policy), judged at the notification's delivery date, and hands the
/// resulting `RevealView` to `show(_:)` on the main actor: `revealed` with the text, `locked` (`Unlock
/// iPhone to read`, retried by itself when `UIApplication.protectedDataDidBecomeAvailableNotification` is
/// posted while the view is shown), or `fallback` with `(Encrypted)`. When the view goes away the
/// extension's attachments directory is emptied and nothing of what was shown is kept.
///
/// The subclass overrides `configuration(for:)` (reveal and device keys, trust policy, the replay cache
/// shared with the service extension, the lock probe, attachments, receipts) and `show(_:)` (draws the
/// view model in its own views). The text is never written into the notification, its userInfo or a file
/// that outlives the view.
@MainActor
open class SealedPushRevealViewController: UIViewController, UNNotificationContentExtension {
    private var contentExtension: RevealContentExtension?
    private var unlockObserver: (any NSObjectProtocol)?
    private var work: Task<Void, Never>?

    /// How notifications are opened; called once per `didReceive(_:)`.
    ///
    /// Subclasses override. The default reads no keys and reports protected data unavailable, so every
    /// notification shows `Unlock iPhone to read`.
    open func configuration(for notification: UNNotification) -> RevealContentExtension.Configuration {
        RevealContentExtension.Configuration(revealKeys: NoDeviceKeys(), deviceKeys: NoDeviceKeys(), protectedDataAvailable: { false })
    }

    /// Draws `view` (what the content extension shows now). Called on the main actor after each
    /// `didReceive(_:)` and after an unlock retried a locked view. The default draws nothing.
    open func show(_ view: RevealView) {}

    /// Opens `notification` for the view (reveal v1 §4); the result reaches `show(_:)`.
    open func didReceive(_ notification: UNNotification) {
        work?.cancel()
        let opener = RevealContentExtension(configuration: configuration(for: notification))
        contentExtension = opener
        let request = notification.request
        let delivered = NotificationContent(request.content).map {
            DeliveredNotification(request: NotificationRequest(identifier: request.identifier, content: $0),
                                  deliveredAt: Int64(notification.date.timeIntervalSince1970))
        }
        if unlockObserver == nil {
            unlockObserver = NotificationCenter.default.addObserver(
                forName: UIApplication.protectedDataDidBecomeAvailableNotification, object: nil, queue: nil
            ) { [weak self] _ in
                Task { @MainActor in self?.protectedDataDidBecomeAvailable() }
            }
        }
        work = Task { [weak self] in
            let view = if let delivered { await opener.didReceive(delivered) } else {
                // userInfo is not JSON (APNs payloads always are): nothing to open.
                RevealView(outcome: .fallback(.invalidPayload), body: SecretMessageExtension.placeholderText)
            }
            guard !Task.isCancelled else { return }
            self?.show(view)
        }
    }

    /// The phone was unlocked while the view is shown: a locked view is opened again.
    func protectedDataDidBecomeAvailable() {
        guard let opener = contentExtension else { return }
        work = Task { [weak self] in
            guard let view = await opener.protectedDataDidBecomeAvailable(), !Task.isCancelled else { return }
            self?.show(view)
        }
    }

    /// The view went away: the work in flight is cancelled, the unlock observer removed, and the
    /// attachments directory emptied.
    open override func viewDidDisappear(_ animated: Bool) {
        super.viewDidDisappear(animated)
        work?.cancel()
        work = nil
        if let unlockObserver { NotificationCenter.default.removeObserver(unlockObserver) }
        unlockObserver = nil
        contentExtension?.viewDidDisappear()
        contentExtension = nil
    }

    /// Waits for the work in flight (tests).
    func finishWork() async { await work?.value }
}
#endif
