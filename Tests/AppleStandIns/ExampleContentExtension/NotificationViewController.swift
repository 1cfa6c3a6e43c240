// The notification content extension docs/ios.md §6 shows, compiled here as an app target would compile it
// with Xcode 26's defaults (default MainActor isolation; see Package.swift).
import SealedPushApple
import SealedPushReceiver
import UIKit
import UserNotifications

final class NotificationViewController: SealedPushRevealViewController {
    /// The same settings as the service extension's (SharedSettings.swift).
    static let settings = SharedSettings.sealedPush(logSubsystem: "com.example.app.NotificationContent")
    /// One URLSession for the `revealed` receipts of this extension process.
    private let receipts = URLSessionReceiptTransport.shared
    private let label = UILabel()

    override func viewDidLoad() {
        super.viewDidLoad()
        label.numberOfLines = 0
        label.translatesAutoresizingMaskIntoConstraints = false
        view.addSubview(label)
        NSLayoutConstraint.activate([
            label.leadingAnchor.constraint(equalTo: view.layoutMarginsGuide.leadingAnchor),
            label.trailingAnchor.constraint(equalTo: view.layoutMarginsGuide.trailingAnchor),
            label.topAnchor.constraint(equalTo: view.layoutMarginsGuide.topAnchor),
            label.bottomAnchor.constraint(lessThanOrEqualTo: view.layoutMarginsGuide.bottomAnchor),
        ])
    }

    override func configuration(for notification: UNNotification) -> RevealContentExtension.Configuration {
        // Reveal and device keys, trust, the replay cache shared with the service extension (refusing every
        // message when the App Groups capability is missing), the lock probe, the revealed receipt.
        Self.settings.revealConfiguration(receiptTransport: receipts)
    }

    override func show(_ view: RevealView) {
        label.text = [view.title, view.subtitle, view.body].filter { !$0.isEmpty }.joined(separator: "\n")
    }
}
