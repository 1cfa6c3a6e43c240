public import SealedPushWire
import Synchronization

/// A file attached to a notification (mirrors `UNNotificationAttachment`).
public struct NotificationAttachment: Sendable, Equatable {
    /// The attachment's identifier.
    public var identifier: String
    /// The file's path or URL string.
    public var url: String

    /// An attachment from its identifier and location.
    public init(identifier: String, url: String) {
        self.identifier = identifier
        self.url = url
    }
}

/// The content of a notification as shown (mirrors `UNNotificationContent`).
public struct NotificationContent: Sendable, Equatable {
    /// The title line.
    public internal(set) var title: String
    /// The subtitle line.
    public internal(set) var subtitle: String
    /// The body text.
    public internal(set) var body: String
    /// The app badge number, if set.
    public internal(set) var badge: Int64?
    /// The sound name, if any.
    public internal(set) var sound: String?
    /// The thread used to group notifications.
    public internal(set) var threadIdentifier: String
    /// The category that selects the notification's actions.
    public internal(set) var categoryIdentifier: String
    /// The custom data of the payload (the whole APNs payload, as iOS gives it).
    public internal(set) var userInfo: JSONObject
    /// Attached media.
    public internal(set) var attachments: [NotificationAttachment]

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

    /// A mutable copy (mirrors `mutableCopy()`).
    public func mutableCopy() -> MutableNotificationContent { MutableNotificationContent(self) }

    /// Whether any of title, subtitle or body is non-empty (what iOS needs to show a banner).
    public var hasAlertText: Bool { !title.isEmpty || !subtitle.isEmpty || !body.isEmpty }
}

/// Content an extension may change before it is shown (mirrors `UNMutableNotificationContent`).
public struct MutableNotificationContent: Sendable, Equatable {
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
    /// The custom data of the payload.
    public var userInfo: JSONObject
    /// Attached media.
    public var attachments: [NotificationAttachment]

    /// A mutable copy of `content`.
    public init(_ content: NotificationContent) {
        title = content.title
        subtitle = content.subtitle
        body = content.body
        badge = content.badge
        sound = content.sound
        threadIdentifier = content.threadIdentifier
        categoryIdentifier = content.categoryIdentifier
        userInfo = content.userInfo
        attachments = content.attachments
    }

    /// Empty mutable content.
    public init() { self.init(NotificationContent()) }

    /// The immutable content to hand to the content handler.
    public var content: NotificationContent {
        NotificationContent(title: title, subtitle: subtitle, body: body, badge: badge, sound: sound,
                            threadIdentifier: threadIdentifier, categoryIdentifier: categoryIdentifier,
                            userInfo: userInfo, attachments: attachments)
    }
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
    /// Why the last delivered content looks as it does (the device simulator reports it); `nil` if unknown.
    var lastReason: ReasonCode? { get }
    /// Whether the last request was opened and passed every check.
    var lastDecrypted: Bool { get }
}

extension NotificationServiceExtension {
    /// Unknown by default.
    public var lastReason: ReasonCode? { nil }
    /// Unknown by default.
    public var lastDecrypted: Bool { false }

    /// The async form: runs `didReceive` on its own thread and returns the first content delivered.
    public func content(for request: NotificationRequest) async -> NotificationContent {
        await withCheckedContinuation { (continuation: CheckedContinuation<NotificationContent, Never>) in
            let handler = ContentHandlerOnce { continuation.resume(returning: $0) }
            runOnThread { self.didReceive(request, withContentHandler: { handler($0) }) }
        }
    }
}

/// Wraps a content handler so that it takes effect once, however often and from however many
/// threads it is called (later calls are ignored, as iOS ignores them).
public final class ContentHandlerOnce: Sendable {
    private let state: Mutex<(@Sendable (NotificationContent) -> Void)?>

    /// Wraps `handler`.
    public init(_ handler: @escaping @Sendable (NotificationContent) -> Void) {
        state = Mutex(handler)
    }

    /// Delivers `content` if nothing was delivered before; returns whether this call took effect.
    @discardableResult
    public func callAsFunction(_ content: NotificationContent) -> Bool {
        let handler = state.withLock { current -> (@Sendable (NotificationContent) -> Void)? in
            defer { current = nil }
            return current
        }
        guard let handler else { return false }
        handler(content)
        return true
    }

    /// Whether content was already delivered.
    public var hasDelivered: Bool { state.withLock { $0 == nil } }
}
