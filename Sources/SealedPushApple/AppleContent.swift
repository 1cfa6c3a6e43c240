#if canImport(UserNotifications)
public import UserNotifications
public import SealedPushReceiver
import SealedPushWire
public import Logging
import Foundation

extension NotificationContent {
    /// The receiver's value for Apple's content; `nil` when `userInfo` is not JSON.
    ///
    /// Title, subtitle and body are the text iOS resolved (a localized `loc-key` alert arrives
    /// already localized), badge, thread, category and `userInfo` (the whole APNs payload) as JSON.
    /// `sound` is left `nil`: Apple's sound object (default, named or critical) cannot be named back,
    /// and `applying(_:over:logger:)` keeps it unless the message sets a sound.
    public init?(_ apple: UNNotificationContent) {
        guard let userInfo = Self.jsonObject(apple.userInfo) else { return nil }
        self.init(title: apple.title, subtitle: apple.subtitle, body: apple.body, badge: apple.badge.map { $0.int64Value },
                  threadIdentifier: apple.threadIdentifier, categoryIdentifier: apple.categoryIdentifier, userInfo: userInfo)
    }

    /// `userInfo` as a JSON object: its keys must all be strings and its values JSON.
    static func jsonObject(_ userInfo: [AnyHashable: Any]) -> JSONObject? {
        var strings: [String: Any] = [:]
        for (key, value) in userInfo {
            guard let key = key.base as? String else { return nil }
            strings[key] = value
        }
        guard JSONSerialization.isValidJSONObject(strings),
              let data = try? JSONSerialization.data(withJSONObject: strings),
              case let .object(object)? = try? JSON.parse([UInt8](data)) else { return nil }
        return object
    }

    /// A JSON object as Apple's `userInfo`.
    static func userInfo(_ object: JSONObject) -> [AnyHashable: Any]? {
        let data = Data(JSON.serialize(.object(object)))
        return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
    }
}

extension UNNotificationContent {
    /// The content to hand iOS: a mutable copy of this content with what the receiver changed.
    ///
    /// `converted` is this content as `NotificationContent(_:)` made it, `delivered` what the receiver
    /// delivered. Title, subtitle, body, badge and attachments are always taken from `delivered`;
    /// thread, category, sound and `userInfo` only where `delivered` differs from `converted` (an
    /// opened message that sets them; an opened message's `userInfo` loses `ENCRYPTED_DATA` and gains
    /// its `data`). Everything else — interruption level, relevance score, target content id, filter
    /// criteria, launch image, and the sound unless the message names one — is this content's.
    /// A message's sound `"default"` is `UNNotificationSound.default`; other names are files.
    /// Attachments are made with `AttachmentOptions`; one that iOS refuses is left out, its file
    /// deleted (it holds plaintext) and the failure logged.
    public func applying(_ delivered: NotificationContent, over converted: NotificationContent, logger: Logging.Logger)
        -> UNNotificationContent {
        // Never `self`: it may hold ENCRYPTED_DATA.
        guard let apple = mutableCopy() as? UNMutableNotificationContent else { return UNNotificationContent() }
        apple.title = delivered.title
        apple.subtitle = delivered.subtitle
        apple.body = delivered.body
        apple.badge = delivered.badge.map { NSNumber(value: $0) }
        if delivered.threadIdentifier != converted.threadIdentifier { apple.threadIdentifier = delivered.threadIdentifier }
        if delivered.categoryIdentifier != converted.categoryIdentifier { apple.categoryIdentifier = delivered.categoryIdentifier }
        if delivered.sound != converted.sound {
            apple.sound = delivered.sound.map { $0 == "default" ? UNNotificationSound.default : UNNotificationSound(named: UNNotificationSoundName($0)) }
        }
        if delivered.userInfo != converted.userInfo {
            if let userInfo = NotificationContent.userInfo(delivered.userInfo) {
                apple.userInfo = userInfo
            } else {
                // Not representable: at least never hand the sealed payload back.
                apple.userInfo = apple.userInfo.filter { ($0.key.base as? String) != WireFormat.encryptedDataKey }
            }
        }
        apple.attachments = delivered.attachments.compactMap { attachment in
            // Class C explicitly: iOS must read the file on a locked phone (under default-data-protection =
            // NSFileProtectionComplete a file without a class would be class A).
            DataProtection.setProtection(.completeUntilFirstUserAuthentication, path: attachment.url)
            do {
                return try UNNotificationAttachment(identifier: attachment.identifier, url: URL(fileURLWithPath: attachment.url),
                                                    options: AttachmentOptions.options(for: attachment))
            } catch {
                try? FileManager.default.removeItem(atPath: attachment.url)
                logger.notice("attachment refused by the system; file deleted",
                              metadata: ["attachment": "\(attachment.identifier)", "reason": "\(ReasonCode.attachmentStorageFailed)"])
                return nil
            }
        }
        return apple
    }
}
#endif
