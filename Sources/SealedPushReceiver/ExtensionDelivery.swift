public import SealedPushWire

/// What the service extension hands iOS for an ordinary message that opened (reveal v1 §5, the
/// device setting `previews`). A reveal message is `held` whatever the setting.
public enum PreviewPolicy: String, Sendable, Codable, CaseIterable {
    /// The decrypted title, subtitle and body, the message's category, `data` merged (the default).
    case full
    /// The decrypted title and subtitle; the body `Press and hold to read`, the reveal category,
    /// `ENCRYPTED_DATA` kept for the content extension, `data` not merged, no attachments fetched.
    case title
    /// `none` in the spec and on the command line: the placeholder's title and subtitle and the body
    /// `Press and hold to read`; otherwise as `title`. (Not spelled `.none`, which Swift would read as
    /// `Optional.none` wherever the policy is optional.)
    case hidden = "none"
}

/// What the service extension makes of a push without `ENCRYPTED_DATA` (outcome `notEncrypted`).
public enum PlaintextHandling: Sendable, Equatable {
    /// Shown as it came (the simulated device's default; anyone who can push for the app can show any text).
    case passThrough
    /// The push's text is not shown: empty title and subtitle, body `(Encrypted)`.
    case placeholder
    /// Not shown at all: empty content (iOS with the filtering entitlement shows nothing).
    case suppress
}

/// What the extension did with one request, reported with the content it delivered.
public enum ExtensionOutcome: Sendable, Equatable, Hashable {
    /// The message opened and passed every check: the content is the decrypted message.
    case decrypted
    /// A check failed (wire format §5, or the key could not be read): the placeholder with body `(Encrypted)`.
    case fallback(ReasonCode)
    /// The payload has no `ENCRYPTED_DATA`: its content passed through unchanged.
    case notEncrypted
    /// Time ran out before the message was opened: the placeholder with subtitle `(Encrypted)` and an empty body.
    case timeExpired
    /// A reveal message (reveal v1 §3) opened and passed every check; its text was not opened: the content
    /// is its placeholder alert with the reveal category and the `reveal` envelope in userInfo
    /// (`SEALEDPUSH_REVEAL`), for the content extension to open when the user presses and holds.
    case held
    /// The sender retracted a mailbox message (mailbox v1 §6): the placeholder's title with body `(Deleted)`, or empty
    /// content (`suppressed`) with the filtering entitlement.
    case retracted

    /// The reason code of this outcome; `nil` for `decrypted` and `held`.
    public var reason: ReasonCode? {
        switch self {
        case .decrypted, .held: return nil
        case let .fallback(reason): return reason
        case .notEncrypted: return .notEncrypted
        case .timeExpired: return .timeExpired
        case .retracted: return .retracted
        }
    }
}

/// The content an extension delivered and why it looks as it does.
public struct ExtensionDelivery: Sendable, Equatable {
    /// What is handed to the system to show.
    public var content: NotificationContent
    /// What happened to the message.
    public var outcome: ExtensionOutcome
    /// For an opened message that asked for a receipt: whether it was sent or queued (receipts v1 §2).
    public var receipt: ReceiptStatus? = nil
    /// For a fallback the device reports: whether the failure report was sent, queued or suppressed (§3).
    public var report: ReportStatus? = nil
    /// The receipt an opened message asks for, and its id (never shown, never logged).
    var receiptTicket: ReceiptTicket? = nil
    /// For an opened message with `attachments`: the ones not attached and why (those attached are in
    /// `content.attachments`); `nil` when the message had none. Never changes `outcome`.
    public var attachmentFailures: [AttachmentFailure]?
    /// Whether the message is to be suppressed (the filtering entitlement): `content` is then empty, and on iOS the
    /// extension hands over `UNNotificationContent()` with nothing set.
    public var suppressed = false

    /// A delivery from its content and outcome.
    public init(content: NotificationContent, outcome: ExtensionOutcome, attachmentFailures: [AttachmentFailure]? = nil) {
        self.content = content
        self.outcome = outcome
        self.attachmentFailures = attachmentFailures
    }
}

/// An opened message's `receipt` member and id, carried from the open to the receipt hook.
struct ReceiptTicket: Sendable, Equatable {
    var request: ReceiptRequest
    var messageID: String
    /// The message's `exp`, if any (how long a `revealed` ticket is kept).
    var expiresAt: Int64? = nil
    /// Whether the content extension can still reveal the message (held, or limited by the preview
    /// policy): then a `revealed` ticket is kept for it.
    var revealable = false
}
