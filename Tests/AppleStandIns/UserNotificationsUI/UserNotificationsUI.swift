// Stand-ins for the UserNotificationsUI declarations SealedPushApple uses (module-aliased to
// `UserNotificationsUI` in the Linux build only; empty elsewhere), after Apple's documentation
// (developer.apple.com/documentation/usernotificationsui): `UNNotificationContentExtension` is a
// main-actor protocol whose one required method is `didReceive(_:)`.
#if os(Linux)
public import UserNotifications

/// Stand-in: `UNNotificationContentExtension` (main actor).
@MainActor
public protocol UNNotificationContentExtension: AnyObject {
    /// A notification of one of the extension's categories arrived (or was pressed and held).
    func didReceive(_ notification: UNNotification)
}
#endif
