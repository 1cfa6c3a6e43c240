public import SealedPushWire
public import Logging
import Synchronization

/// A notification iOS has delivered (mirrors `UNNotification`): its request and when it was delivered.
public struct DeliveredNotification: Sendable, Equatable {
    /// The request (its identifier and the content the service extension handed to iOS).
    public let request: NotificationRequest
    /// When it was delivered, seconds since the Unix epoch (`UNNotification.date`).
    public let deliveredAt: Int64

    /// A delivered notification from its request and delivery date.
    public init(request: NotificationRequest, deliveredAt: Int64) {
        self.request = request
        self.deliveredAt = deliveredAt
    }
}

/// What the content extension did with a notification (reveal v1 §4).
public enum RevealOutcome: Sendable, Equatable, Hashable {
    /// Opened and passed every check: the view shows the text.
    case revealed
    /// Protected data is unavailable (the phone is locked): the view shows `Unlock iPhone to read`; nothing was recorded.
    case locked
    /// A check failed: the view shows `(Encrypted)`.
    case fallback(ReasonCode)

    /// The outcome's name as `device expand --json` prints it: `revealed`, `locked` or `fallback`.
    public var name: String {
        switch self {
        case .revealed: return "revealed"
        case .locked: return "locked"
        case .fallback: return "fallback"
        }
    }

    /// The reason code of a fallback; `nil` otherwise.
    public var reason: ReasonCode? {
        if case let .fallback(reason) = self { return reason }
        return nil
    }
}

/// What the content extension's view shows: the view model of one press and hold. It lives in memory
/// only; nothing of it is written to the notification's content, its userInfo or a lasting file.
public struct RevealView: Sendable, Equatable {
    /// Why the view looks as it does.
    public var outcome: RevealOutcome
    /// The title line (empty unless revealed).
    public var title: String
    /// The subtitle line (empty unless revealed).
    public var subtitle: String
    /// The body: the text when revealed, `Unlock iPhone to read` when locked, `(Encrypted)` on a failure.
    public var body: String
    /// The attachments fetched and verified into the extension's private temporary directory, in display order.
    public var attachments: [NotificationAttachment]
    /// For a revealed message with attachments, those not attached and why; `nil` when it had none.
    public var attachmentFailures: [AttachmentFailure]?

    /// A view from its parts.
    public init(outcome: RevealOutcome, title: String = "", subtitle: String = "", body: String,
                attachments: [NotificationAttachment] = [], attachmentFailures: [AttachmentFailure]? = nil) {
        self.outcome = outcome
        self.title = title
        self.subtitle = subtitle
        self.body = body
        self.attachments = attachments
        self.attachmentFailures = attachmentFailures
    }
}

extension RevealView {
    /// `{"outcome": "revealed" | "locked" | "fallback", "reason": null | "<code>", "view": {"title", "subtitle", "body",
    /// "attachments": [{"identifier", "type", "size"}]}}` (reveal v1 §7, `device expand --json`): what the view shows,
    /// never a file path.
    public var jsonObject: JSONObject {
        let files: [JSONValue] = attachments.map { a in
            .object(JSONObject([("identifier", .string(a.identifier)), ("type", a.type.map { .string($0) } ?? .null),
                                ("size", a.size.map { .int($0) } ?? .null)]))
        }
        return JSONObject([
            ("outcome", .string(outcome.name)), ("reason", outcome.reason.map { .string($0.rawValue) } ?? .null),
            ("view", .object(JSONObject([("title", .string(title)), ("subtitle", .string(subtitle)), ("body", .string(body)),
                                         ("attachments", .array(files))]))),
        ])
    }
}

/// The notification content extension SealedPush ships (reveal v1 §4), shaped like Apple's
/// `UNNotificationContentExtension`: iOS runs it when the user presses and holds a notification of the
/// reveal category, and it opens the text in its own view instead of handing it to iOS.
///
/// `didReceive(_:)` runs the checks in order: protected data must be available (else `locked`, which
/// records nothing and is retried by `protectedDataDidBecomeAvailable()`); then the `SEALEDPUSH_REVEAL`
/// envelope opens with the reveal key (or, under a preview policy, `ENCRYPTED_DATA` with the device key)
/// through the ordered checks of wire v1 §5, with expiry judged at the notification's delivery date and
/// the replay rule per notification request identifier. `viewDidDisappear()` empties the attachments
/// directory, which is also emptied when the extension starts. Logs carry reason codes only.
public final class RevealContentExtension: Sendable {
    /// How the extension finds keys, policy, replay state and the lock state.
    public struct Configuration: Sendable {
        /// Reveal keys by key id (`whenUnlockedThisDeviceOnly`): what opens `SEALEDPUSH_REVEAL`.
        public var revealKeys: any DeviceKeyProvider
        /// Device keys by key id: what the inner `kid` of a `SEALEDPUSH_LOCAL` message must name (reveal v1 §5.1), and
        /// what reopens `ENCRYPTED_DATA` in a notification handed over by a revision 1 extension.
        public var deviceKeys: any DeviceKeyProvider
        /// The trust and signature policy, read per notification; a failure is reported as its reason.
        public var policy: @Sendable () throws(OpenFailure) -> ReceiverPolicy
        /// The replay cache shared with the service extension, or `nil` to accept repeats.
        public var replayGuard: (any ReplayGuard)?
        /// Whether protected data is available now (iOS: `UIApplication.isProtectedDataAvailable`).
        public var protectedDataAvailable: @Sendable () -> Bool
        /// Where reason codes are logged.
        public var logger: Logger
        /// Fetches and verifies attachments into the extension's own private temporary directory (not the
        /// service extension's); `nil` shows the text alone.
        public var attachments: AttachmentPipeline?
        /// Sends the `revealed` receipt (reveal v1 §6) from the ticket the service extension kept; `nil` sends none.
        public var receipts: ReceiptCourier? = nil
        /// The longest the `revealed` receipt may take in the background (at most 2 s, the courier's own bound).
        public var receiptBudget: Duration = .seconds(2)
        /// The device's wall clock: the receipt's `at` and the tickets' expiry.
        public var clock: WallClock = .system

        /// A configuration; by default no replay cache, no attachments and a `sealedpush.content-extension` logger.
        public init(revealKeys: any DeviceKeyProvider, deviceKeys: any DeviceKeyProvider,
                    policy: @escaping @Sendable () throws(OpenFailure) -> ReceiverPolicy = { ReceiverPolicy() },
                    replayGuard: (any ReplayGuard)? = nil, protectedDataAvailable: @escaping @Sendable () -> Bool,
                    logger: Logger = Logger(label: "sealedpush.content-extension"), attachments: AttachmentPipeline? = nil) {
            self.revealKeys = revealKeys
            self.deviceKeys = deviceKeys
            self.policy = policy
            self.replayGuard = replayGuard
            self.protectedDataAvailable = protectedDataAvailable
            self.logger = logger
            self.attachments = attachments
        }
    }

    private let configuration: Configuration
    /// The notification shown and what its view shows; `nil` once the view went away.
    private let current = Mutex<(notification: DeliveredNotification, view: RevealView)?>(nil)
    /// The `revealed` receipts being sent: not cancelled when the view goes away (each is bounded by `receiptBudget`).
    private let receiptWork = Mutex<[Task<Void, Never>]>([])

    /// An extension with the given configuration. Empties the attachments directory (files a killed
    /// process left behind).
    public init(configuration: Configuration) {
        self.configuration = configuration
        configuration.attachments?.removeAllFiles()
    }

    /// Opens `notification` for the view (reveal v1 §4) and returns what the view shows; a revealed message
    /// also starts sending its `revealed` receipt, once per message id (§6).
    ///
    /// The view is returned as soon as the message is open: the receipt goes in the background (at most
    /// `receiptBudget`), so a slow or unreachable collector never holds the text back from the user.
    /// `finishBackgroundWork()` waits for it.
    public func didReceive(_ notification: DeliveredNotification) async -> RevealView {
        let view = await reveal(notification)
        current.withLock { $0 = (notification, view) }
        if view.outcome == .revealed, let courier = configuration.receipts {
            let now = configuration.clock.unixSeconds, budget = configuration.receiptBudget
            let requestIdentifier = notification.request.identifier, counts = Self.counts(view)
            let send = Task {
                _ = await courier.sendRevealedReceipt(requestIdentifier: requestIdentifier, attachments: counts,
                                                      now: now, deadline: ContinuousClock.now.advanced(by: budget))
            }
            receiptWork.withLock { $0.append(send) }
        }
        return view
    }

    /// Waits until every `revealed` receipt started by `didReceive(_:)` was sent or given up (each within
    /// `receiptBudget`); a simulated device calls this before its process exits.
    public func finishBackgroundWork() async {
        let work = receiptWork.withLock { w -> [Task<Void, Never>] in
            defer { w.removeAll() }
            return w
        }
        for task in work { await task.value }
    }

    /// The receipt's `attachments` counts for a revealed view: present only when the message had attachments.
    static func counts(_ view: RevealView) -> ReceiptAttachmentCounts? {
        guard let failures = view.attachmentFailures else { return nil }
        return ReceiptAttachmentCounts(attached: view.attachments.count, failures: failures)
    }

    /// The phone was unlocked while the view is shown: a notification that showed `Unlock iPhone to read`
    /// is opened again. Returns the new view, or `nil` when there is nothing to retry.
    public func protectedDataDidBecomeAvailable() async -> RevealView? {
        guard let (notification, view) = current.withLock({ $0 }), view.outcome == .locked else { return nil }
        return await didReceive(notification)
    }

    /// What the view shows now, or `nil` when no view is shown.
    public var currentView: RevealView? { current.withLock { $0?.view } }

    /// The view went away: forgets what it showed and empties the attachments directory. Returns how
    /// many attachment files were removed.
    @discardableResult
    public func viewDidDisappear() -> Int {
        current.withLock { $0 = nil }
        return configuration.attachments?.removeAllFiles() ?? 0
    }

    private func reveal(_ notification: DeliveredNotification) async -> RevealView {
        let userInfo = notification.request.content.userInfo
        let keys: any DeviceKeyProvider
        let value: JSONValue
        var rule = RecipientRule.envelope
        if let reveal = userInfo[RevealFormat.userInfoKey] {
            (keys, value) = (configuration.revealKeys, reveal)
        } else if let local = userInfo[RevealFormat.localUserInfoKey] {
            // Reveal v1 §5.1: sealed again on the device to its reveal key; the inner `kid` names a device key.
            (keys, value) = (configuration.revealKeys, local)
            rule = .resealed(deviceKeys: configuration.deviceKeys)
        } else if let encrypted = userInfo[WireFormat.encryptedDataKey] {
            // A notification handed over under a preview policy by an extension of reveal v1 revision 1.
            (keys, value) = (configuration.deviceKeys, encrypted)
        } else {
            return fallback(OpenFailure(.notEncrypted, "the notification holds neither SEALEDPUSH_REVEAL, SEALEDPUSH_LOCAL nor ENCRYPTED_DATA"))
        }
        guard case let .string(envelope) = value else {
            return fallback(OpenFailure(.malformedPayload, "the envelope in userInfo is not a string"))
        }
        // 1. Protected data: while the phone is locked nothing is opened and nothing recorded.
        guard configuration.protectedDataAvailable() else { return locked() }
        // 2. The ordered checks of wire v1 §5, expiry at the delivery date, replays per request identifier.
        let opened: OpenedMessage
        do {
            let opener = MessageOpener(keys: keys, policy: try configuration.policy(), replayGuard: configuration.replayGuard,
                                       recipientRule: rule)
            opened = try opener.open(encryptedData: envelope, requestIdentifier: notification.request.identifier, now: notification.deliveredAt)
        } catch {
            // The phone locked between the check and the key read: still `locked` (step 2 precedes the replay check).
            if error.reason == .keychainLocked, !configuration.protectedDataAvailable() { return locked() }
            return fallback(error)
        }
        configuration.logger.info("notification revealed", metadata: ["key_id": "\(opened.keyID.hex)"])
        // 3. The text and the attachments, fetched and verified into the private temporary directory.
        let alert = opened.body.alert
        var view = RevealView(outcome: .revealed, title: alert.title ?? "", subtitle: alert.subtitle ?? "", body: alert.body ?? "")
        if let pipeline = configuration.attachments, let descriptors = opened.body.attachments, !descriptors.isEmpty {
            let results = await pipeline.run(descriptors)
            view.attachments = results.compactMap { try? $0.get() }
            view.attachmentFailures = results.compactMap { if case let .failure(f) = $0 { return f } else { return nil } }
            for failure in view.attachmentFailures ?? [] {
                configuration.logger.notice("attachment failed", metadata: ["attachment": "\(failure.identifier)", "reason": "\(failure.reason)"])
            }
        }
        return view
    }

    private func locked() -> RevealView {
        configuration.logger.info("notification not revealed: protected data unavailable", metadata: ["reason": "\(ReasonCode.keychainLocked)"])
        return RevealView(outcome: .locked, body: RevealFormat.lockedText)
    }

    private func fallback(_ failure: OpenFailure) -> RevealView {
        configuration.logger.notice("notification not revealed", metadata: ["reason": "\(failure.reason)"])
        return RevealView(outcome: .fallback(failure.reason), body: SecretMessageExtension.placeholderText)
    }
}
