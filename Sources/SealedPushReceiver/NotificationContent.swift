public import SealedPushWire
import Synchronization

/// A file attached to a notification (mirrors `UNNotificationAttachment`).
public struct NotificationAttachment: Sendable, Equatable {
    /// The attachment's identifier.
    public var identifier: String
    /// The absolute path of the file the extension wrote.
    public var url: String
    /// The attachment's MIME type (iOS: `UNNotificationAttachmentOptionsTypeHintKey`).
    public var type: String?
    /// The file's size in bytes.
    public var size: Int64?
    /// Whether the thumbnail is hidden (`UNNotificationAttachmentOptionsThumbnailHiddenKey`).
    public var thumbnailHidden: Bool?
    /// Seconds into a movie, or frame of an animated image, for the thumbnail (`…ThumbnailTimeKey`).
    public var thumbnailTime: Int64?

    /// An attachment from its identifier, file and options.
    public init(identifier: String, url: String, type: String? = nil, size: Int64? = nil, thumbnailHidden: Bool? = nil,
                thumbnailTime: Int64? = nil) {
        self.identifier = identifier
        self.url = url
        self.type = type
        self.size = size
        self.thumbnailHidden = thumbnailHidden
        self.thumbnailTime = thumbnailTime
    }
}

/// The content of a notification (mirrors `UNNotificationContent` and `UNMutableNotificationContent`).
///
/// One value type serves for both of Apple's classes: a `let` is the immutable content, a `var` copy
/// is the mutable one (Objective-C needs the pair; a Swift value does not).
public struct NotificationContent: Sendable, Equatable {
    /// The title line.
    public var title: String
    /// The subtitle line.
    public var subtitle: String
    /// The body text.
    public var body: String
    /// The app badge number, if set.
    public var badge: Int64?
    /// The sound name, if any.
    public var sound: String?
    /// The thread used to group notifications.
    public var threadIdentifier: String
    /// The category that selects the notification's actions.
    public var categoryIdentifier: String
    /// The custom data of the payload (the whole APNs payload, as iOS gives it).
    public var userInfo: JSONObject
    /// Attached media.
    public var attachments: [NotificationAttachment]

    /// Content with the given values; everything defaults to empty.
    public init(title: String = "", subtitle: String = "", body: String = "", badge: Int64? = nil, sound: String? = nil,
                threadIdentifier: String = "", categoryIdentifier: String = "", userInfo: JSONObject = JSONObject(),
                attachments: [NotificationAttachment] = []) {
        self.title = title
        self.subtitle = subtitle
        self.body = body
        self.badge = badge
        self.sound = sound
        self.threadIdentifier = threadIdentifier
        self.categoryIdentifier = categoryIdentifier
        self.userInfo = userInfo
        self.attachments = attachments
    }

    /// Whether any of title, subtitle or body is non-empty (what iOS needs to show a banner).
    public var hasAlertText: Bool { !title.isEmpty || !subtitle.isEmpty || !body.isEmpty }
}

/// A delivered notification request (mirrors `UNNotificationRequest`).
public struct NotificationRequest: Sendable, Equatable {
    /// The request identifier (APNs' `apns-id`, or a generated one).
    public let identifier: String
    /// The content as the payload describes it.
    public let content: NotificationContent

    /// A request from its identifier and content.
    public init(identifier: String, content: NotificationContent) {
        self.identifier = identifier
        self.content = content
    }

    /// The request iOS builds from an APNs payload: the alert (string or object), badge, sound,
    /// thread id and category from `aps`, and the whole payload as userInfo.
    public init(identifier: String, payload: JSONObject) {
        let aps = payload["aps"]?.objectValue ?? JSONObject()
        var content = NotificationContent(userInfo: payload)
        switch aps["alert"] {
        case let .string(text)?: content.body = text
        case let .object(alert)?:
            content.title = alert["title"]?.stringValue ?? ""
            content.subtitle = alert["subtitle"]?.stringValue ?? ""
            content.body = alert["body"]?.stringValue ?? ""
        default: break
        }
        content.badge = aps["badge"]?.intValue
        switch aps["sound"] {
        case let .string(name)?: content.sound = name
        case let .object(critical)?: content.sound = critical["name"]?.stringValue
        default: break
        }
        content.threadIdentifier = aps["thread-id"]?.stringValue ?? ""
        content.categoryIdentifier = aps["category"]?.stringValue ?? ""
        self.init(identifier: identifier, content: content)
    }
}

/// The shape of Apple's `UNNotificationServiceExtension`.
///
/// iOS calls `didReceive(_:withContentHandler:)` on a background thread and gives the extension
/// about 30 seconds; if the handler has not been called by then it calls
/// `serviceExtensionTimeWillExpire()` on another thread, and the extension must deliver its best
/// attempt at once. Implementations must be safe to call from any thread.
public protocol NotificationServiceExtension: AnyObject, Sendable {
    /// Starts modifying `request`'s content; call `contentHandler` once with the result.
    func didReceive(_ request: NotificationRequest, withContentHandler contentHandler: @escaping @Sendable (NotificationContent) -> Void)
    /// Time is nearly up: deliver the best attempt now.
    func serviceExtensionTimeWillExpire()
}

/// An extension that says what it did: each delivery comes with its outcome.
///
/// iOS only ever sees the content (`didReceive(_:withContentHandler:)`); the device simulator, tests
/// and tools use this form to learn why the content looks as it does.
public protocol ReportingServiceExtension: NotificationServiceExtension {
    /// Starts work on `request`; `resultHandler` receives the delivered content and its outcome once.
    func didReceive(_ request: NotificationRequest, resultHandler: @escaping @Sendable (ExtensionDelivery) -> Void)
}

extension ReportingServiceExtension {
    /// Forwards to `didReceive(_:resultHandler:)` and hands iOS the content alone.
    public func didReceive(_ request: NotificationRequest, withContentHandler contentHandler: @escaping @Sendable (NotificationContent) -> Void) {
        didReceive(request) { contentHandler($0.content) }
    }

    /// The async form: starts `didReceive` and returns the first delivery.
    public func delivery(for request: NotificationRequest) async -> ExtensionDelivery {
        await withCheckedContinuation { (continuation: CheckedContinuation<ExtensionDelivery, Never>) in
            let once = DeliverOnce<ExtensionDelivery> { continuation.resume(returning: $0) }
            didReceive(request) { once($0) }
        }
    }
}

/// Wraps a handler so that it takes effect once, however often and from however many threads it is
/// called (later calls are ignored, as iOS ignores them).
public final class DeliverOnce<Value: Sendable>: Sendable {
    private let state: Mutex<(@Sendable (Value) -> Void)?>

    /// Wraps `handler`.
    public init(_ handler: @escaping @Sendable (Value) -> Void) {
        state = Mutex(handler)
    }

    /// Delivers `value` if nothing was delivered before; returns whether this call took effect.
    @discardableResult
    public func callAsFunction(_ value: Value) -> Bool {
        let handler = state.withLock { current -> (@Sendable (Value) -> Void)? in
            defer { current = nil }
            return current
        }
        guard let handler else { return false }
        handler(value)
        return true
    }

    /// Whether a value was already delivered.
    public var hasDelivered: Bool { state.withLock { $0 == nil } }
}

/// A content handler that takes effect once (iOS ignores later calls).
public typealias ContentHandlerOnce = DeliverOnce<NotificationContent>
