// The notification content extension docs/ios.md §6 shows, compiled here as an app target would compile it
// with Xcode 26's defaults (default MainActor isolation; see Package.swift).
import Foundation
import SealedPushApple
import SealedPushKeychain
import SealedPushReceiver
import UIKit
import UserNotifications

/// Where the app and its extensions share files: on iOS the App Group container
/// (`nil` when the target lacks the App Groups capability).
enum AppGroup {
    static var replayDirectory: URL? {
        #if os(iOS)
        FileManager.default.containerURL(forSecurityApplicationGroupIdentifier: "group.com.example")?.appendingPathComponent("replay")
        #else
        FileManager.default.temporaryDirectory.appendingPathComponent("group.com.example/replay")
        #endif
    }
}

final class NotificationViewController: SealedPushRevealViewController {
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

    override func didReceive(_ notification: UNNotification) {
        guard AppGroup.replayDirectory != nil else {
            // No App Group container: nothing is opened without the shared replay cache, and the view says so.
            show(RevealView(outcome: .fallback(.keychainLocked), body: SecretMessageExtension.placeholderText))
            return
        }
        super.didReceive(notification)
    }

    override func configuration(for notification: UNNotification) -> RevealContentExtension.Configuration {
        let group = "ABCDE12345.com.example.shared"
        let reveal = KeychainRevealKeyring(accessGroup: group)
        return RevealContentExtension.Configuration(
            revealKeys: reveal,
            deviceKeys: KeychainDeviceKeyring(accessGroup: group),
            replayGuard: AppGroup.replayDirectory.map { ReplayCache(directory: .init($0.path)) },
            protectedDataAvailable: { reveal.isReadable() })
    }

    override func show(_ view: RevealView) {
        label.text = [view.title, view.subtitle, view.body].filter { !$0.isEmpty }.joined(separator: "\n")
    }
}
