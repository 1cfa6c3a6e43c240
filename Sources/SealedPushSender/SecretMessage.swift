public import SealedPushWire

/// When a message stops being valid: sealed into the body as `exp` and sent as `apns-expiration`.
public enum Expiry: Sendable, Equatable, Hashable {
    /// At this instant, seconds since the Unix epoch.
    case at(Int64)
    /// This many seconds after the message's issued-at time.
    case after(seconds: Int64)
    /// Never, and APNs delivers at most once: `apns-expiration: 0` (APNs does not store the push for a device
    /// that is offline, so it is lost) and no `exp` in the body. Only on explicit request (`--deliver-once`).
    case deliverOnce

    /// The default when a message names no expiry: seven days, so that a phone that is offline for a while
    /// still gets the message (APNs stores it until then).
    public static let defaultLifetime: Expiry = .after(seconds: 7 * 86_400)

    /// The absolute expiry for a message issued at `issuedAt`, saturating instead of overflowing; `nil`
    /// for `deliverOnce`.
    public func resolved(issuedAt: Int64) -> Int64? {
        switch self {
        case .deliverOnce: return nil
        case let .at(t): return t
        case let .after(seconds):
            let (sum, overflow) = issuedAt.addingReportingOverflow(seconds)
            return overflow ? (seconds > 0 ? .max : .min) : sum
        }
    }

    /// Parses a relative duration in `DurationSyntax` (`500ms`, `30s`, `15m`, `2h`, `7d`), or whole
    /// seconds as bare digits (`3600`). Sub-second durations round up to whole seconds. `nil` for
    /// anything else.
    public static func duration(_ text: String) -> Expiry? {
        guard let ms = DurationSyntax.milliseconds(text, bareNumberUnit: 1000) else { return nil }
        return .after(seconds: ms / 1000 + (ms % 1000 == 0 ? 0 : 1))
    }
}

/// A secret message, before sealing: everything here ends up inside the encrypted body
/// (`ENCRYPTED_DATA`) except `expiry`, `collapseID` and `topic`, which also set APNs headers.
public struct SecretMessage: Sendable, Equatable {
    /// The title the device shows after decrypting.
    public var title: String?
    /// The subtitle.
    public var subtitle: String?
    /// The body text.
    public var body: String?
    /// The notification thread id (sealed, never visible to APNs).
    public var threadID: String?
    /// The notification category after decrypting (the visible payload always carries the placeholder's).
    public var category: String?
    /// The app badge number (sealed).
    public var badge: Int64?
    /// The sound name (sealed).
    public var sound: String?
    /// Custom data merged into the notification's userInfo on the device; must not hold `aps`.
    public var data: JSONObject?
    /// When the message expires; `nil` takes `Expiry.defaultLifetime` (7 days). `.deliverOnce` sends
    /// `apns-expiration: 0` and no `exp`.
    public var expiry: Expiry?
    /// The message id (1–64 bytes of UTF-8); `nil` for a fresh random one (`makeMessageID()`).
    public var messageID: String?
    /// The `apns-collapse-id` header, when given (visible to APNs: do not put secrets in it).
    public var collapseID: String?
    /// The `apns-topic` header (the app's bundle id), when given.
    public var topic: String?
    /// Where the device sends a delivery receipt (receipts v1): an `https` URL (`http` only to loopback), or
    /// `nil` for none. The sender draws a fresh token per message and returns it in `SealedNotification.receipt`.
    public var receiptURL: String?
    /// Encrypted media the device fetches (0 to 4 descriptors, in display order): see `attach(_:to:)`.
    public var attachments: [AttachmentDescriptor] = []
    /// Makes this a reveal message (reveal v1 §2) when set: title, subtitle, body, `data` and the attachments
    /// are sealed a second time, to the device's reveal key, and iOS is handed only `reveal.alert`. `nil`: an
    /// ordinary message.
    public var reveal: Reveal? = nil

    /// How a reveal message shows before it is revealed (reveal v1 §2).
    public struct Reveal: Sendable, Equatable {
        /// The alert iOS may show (kept in its notification store): never the secret text. It must show some text.
        /// Ordinary messages to the same device are padded like a reveal message with the default alert, so an alert
        /// of another length can put a reveal message in another size bucket than they take (reveal v1 §2).
        public var alert: MessageBody.Alert

        /// A reveal showing `alert`; by default `Secret Message!` / `Press and hold to read`.
        public init(alert: MessageBody.Alert = RevealFormat.defaultAlert) { self.alert = alert }

        /// The default: title `Secret Message!`, body `Press and hold to read`.
        public static var standard: Reveal { Reveal() }
    }

    /// A message from its parts; at least one of title, subtitle and body must be non-empty.
    public init(title: String? = nil, subtitle: String? = nil, body: String? = nil, threadID: String? = nil,
                category: String? = nil, badge: Int64? = nil, sound: String? = nil, data: JSONObject? = nil,
                expiry: Expiry? = nil, messageID: String? = nil, collapseID: String? = nil, topic: String? = nil) {
        self.title = title
        self.subtitle = subtitle
        self.body = body
        self.threadID = threadID
        self.category = category
        self.badge = badge
        self.sound = sound
        self.data = data
        self.expiry = expiry
        self.messageID = messageID
        self.collapseID = collapseID
        self.topic = topic
    }

    /// Encrypts `attachment` under a fresh key into a new object of `store` and appends its descriptor
    /// (id `a1`, `a2`, … by position). Throws `invalidAttachment` naming the file, its size or type, and the limit.
    public mutating func attach(_ attachment: MediaAttachment, to store: some MediaObjectStore) throws(SenderError) {
        guard attachments.count < AttachmentDescriptor.maximumCount else {
            throw .invalidAttachment("\(attachment.source.label): a message carries at most \(AttachmentDescriptor.maximumCount) attachments")
        }
        attachments.append(try MediaSealer.encrypt(attachment, id: "a\(attachments.count + 1)", to: store))
    }
}
