#if canImport(UserNotifications)
public import SealedPushReceiver
import UserNotifications

/// The options `UNNotificationAttachment(identifier:url:options:)` gets for a decrypted attachment.
public enum AttachmentOptions {
    /// The Uniform Type Identifier of each media type of attachments v1 (the wire format's MIME types).
    /// `UNNotificationAttachmentOptionsTypeHintKey` wants a UTI, not a MIME type.
    public static let uniformTypeIdentifiers: [String: String] = [
        "image/jpeg": "public.jpeg",
        "image/png": "public.png",
        "image/gif": "com.compuserve.gif",
        "audio/mpeg": "public.mp3",
        "audio/wav": "com.microsoft.waveform-audio",
        "audio/aiff": "public.aiff-audio",
        "audio/mp4": "public.mpeg-4-audio",
        "video/mp4": "public.mpeg-4",
        "video/mpeg": "public.mpeg",
        "video/x-msvideo": "public.avi",
    ]

    /// The options for `attachment`: the type hint (a UTI), whether the thumbnail is hidden, and the
    /// thumbnail time (seconds into a movie, or a frame of an animated image); `nil` when none applies.
    public static func options(for attachment: NotificationAttachment) -> [AnyHashable: Any]? {
        var options: [AnyHashable: Any] = [:]
        if let mime = attachment.type, let uti = uniformTypeIdentifiers[mime] {
            options[UNNotificationAttachmentOptionsTypeHintKey] = uti
        }
        if let hidden = attachment.thumbnailHidden {
            options[UNNotificationAttachmentOptionsThumbnailHiddenKey] = hidden
        }
        if let time = attachment.thumbnailTime {
            options[UNNotificationAttachmentOptionsThumbnailTimeKey] = time
        }
        return options.isEmpty ? nil : options
    }
}
#endif
