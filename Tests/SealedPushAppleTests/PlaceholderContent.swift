// The content iOS makes from a sealed push, for the suites that hand the service extension a request.
#if os(Linux)
import Testing
import Foundation
import UserNotifications
import SealedPushSender

/// The content iOS makes from `sealed` before the extension runs: the payload's placeholder alert (title and body),
/// and the payload as `userInfo`.
func placeholderContent(of sealed: SealedNotification) throws -> UNMutableNotificationContent {
    let payload = try #require(try JSONSerialization.jsonObject(with: Data(sealed.payload)) as? [String: Any])
    let alert = (payload["aps"] as? [String: Any])?["alert"] as? [String: Any]
    let content = UNMutableNotificationContent()
    content.title = alert?["title"] as? String ?? ""
    content.body = alert?["body"] as? String ?? ""
    content.userInfo = payload
    return content
}
#endif
