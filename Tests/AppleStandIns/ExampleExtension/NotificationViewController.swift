// The notification content extension docs/ios.md §6 shows, compiled here as an app target would compile it
// with Xcode 26's defaults (default MainActor isolation; see Package.swift).
import Foundation
import SealedPushApple
import SealedPushKeychain
import SealedPushReceiver
import UIKit
import UserNotifications

/// Where the app and its extensions share files: on iOS,
/// `FileManager.default.containerURL(forSecurityApplicationGroupIdentifier: "group.com.example")`.
enum AppGroup {
    static var replayDirectory: URL {
        #if os(iOS)
        FileManager.default.containerURL(forSecurityApplicationGroupIdentifier: "group.com.example")!.appendingPathComponent("replay")
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
        view.addSubview(label)
    }

    override func configuration(for notification: UNNotification) -> RevealContentExtension.Configuration {
        let group = "ABCDE12345.com.example.shared"
        let reveal = KeychainDeviceKeys(accessGroup: group, service: "sealedpush.reveal-key")
        return RevealContentExtension.Configuration(
            revealKeys: reveal,
            deviceKeys: KeychainDeviceKeyring(accessGroup: group),
            replayGuard: ReplayCache(directory: .init(AppGroup.replayDirectory.path)),
            protectedDataAvailable: { reveal.isReadable() })
    }

    override func show(_ view: RevealView) {
        label.text = [view.title, view.subtitle, view.body].filter { !$0.isEmpty }.joined(separator: "\n")
    }
}
