public import SealedPushWire
public import SealedPushCrypto
public import Logging
import Synchronization

/// The notification service extension SealedPush ships: opens `ENCRYPTED_DATA` with a device key.
///
/// On success it shows the decrypted title, subtitle, body, thread id, category, badge, sound and
/// `data` (merged into userInfo). On any failure it shows the placeholder with the body
/// `(Encrypted)`; when time expires before the message was opened, the placeholder with subtitle
/// `(Encrypted)` and an empty body. A payload without `ENCRYPTED_DATA` passes through unchanged. It
/// logs reason codes only — never plaintext, never key material.
///
/// The work for a request runs in a task of its own (structured concurrency, cancellable), with the
/// deadline known to it. As on iOS, the extension keeps a *best-attempt* content: the timeout content
/// until the message opens, the decrypted message from then on. `serviceExtensionTimeWillExpire()`
/// cancels the work and delivers the best attempt at once.
public final class SecretMessageExtension: ReportingServiceExtension {
    /// How the extension finds keys, policy, time and its replay cache.
    public struct Configuration: Sendable {
        /// Device keys by key id (the keychain store on Linux, the Keychain on iOS).
        public var keys: any DeviceKeyProvider
        /// The current trust and signature policy, read per notification so `trust` changes apply at
        /// once; a failure to read it (a locked or damaged store) is reported as the given reason.
        public var policy: @Sendable () throws(OpenFailure) -> ReceiverPolicy
        /// The replay cache, or `nil` to accept repeats.
        public var replayGuard: (any ReplayGuard)?
        /// The device's wall clock (message validity and the replay window).
        public var clock: WallClock
        /// How long the extension may work on one request before it must answer (iOS: about 30 s).
        /// Work in flight sees the deadline; the expiry callback is what ends it.
        public var timeBudget: Duration
        /// Where reason codes are logged.
        public var logger: Logger
        /// Sends receipts and failure reports and keeps the outbox (receipts v1); `nil` sends none.
        public var receipts: ReceiptCourier? = nil
        /// Fetches, decrypts and writes a message's attachments (attachments v1 §4); `nil` ignores them
        /// (the text alone is shown, as by a receiver that does not know the member).
        public var attachments: AttachmentPipeline?
        /// The category a reveal message is handed to iOS with (reveal v1 §3): one the app's content
        /// extension lists in `UNNotificationExtensionCategory`. Default `SEALED_REVEAL`.
        public var revealCategory: String = RevealFormat.defaultCategory
        /// What an ordinary message that opened hands to iOS (reveal v1 §5): `full` (default), `title` or `none`.
        public var previews: PreviewPolicy = .full
        /// Whether the receipt outbox is flushed after the content was handed over (default `true`: the
        /// simulated device). On iOS the process may be suspended right after the handler, and a flush
        /// then holding the outbox's file lock in the shared container gets it killed (`0xdead10cc`): the
        /// Apple base class sets `false` and `maintenanceBudget` instead (the flush runs before the handler), and
        /// the app flushes the rest (on launch, a `BGTaskScheduler` task). Ignored when `maintenanceBudget` is set.
        public var flushesOutboxAfterDelivery: Bool = true
        /// The device's active reveal public key, readable after first unlock (only the secret is
        /// `whenUnlockedThisDeviceOnly`): what an ordinary message is sealed again to under the preview policy
        /// `title` or `none` (reveal v1 §5.1). `nil` (the default): the device has no reveal key, and such a
        /// message falls back to `(Encrypted)` rather than leave anything openable in iOS's store.
        public var revealPublicKey: @Sendable () -> BoxPublicKey? = { nil }
        /// The pending queue (reveal v1 §9): a message whose device key cannot be read yet (before the first
        /// unlock) is kept there, still sealed, and opened by `processPendingQueue(replacer:)` once the key reads.
        /// `nil`: such a message is lost (its notification keeps `(Encrypted)`).
        public var pendingQueue: (any PendingQueue)? = nil
        /// The key a pending-queue entry is sealed to again when it is queued (reveal v1 revision 3 §9): the device's
        /// reveal *public* key, which the extension reads before the first unlock (on iOS from an app-group file of
        /// class `none`; it is public). `nil` (the default): the entry keeps the payload as it arrived, sealed to the
        /// device key only, which an extraction after the first unlock opens.
        public var pendingQueueSealKey: @Sendable () -> BoxPublicKey? = { nil }
        /// The reveal keys that open sealed pending-queue entries; they read only while the phone is unlocked, so the
        /// queue is processed only then. `nil`: sealed entries wait.
        public var pendingQueueRevealKeys: (any DeviceKeyProvider)? = nil
        /// Replaces the notification of a pending message once it opens (reveal v1 §9); `nil`: the queue is
        /// processed only by an explicit `processPendingQueue(replacer:)` (the app, on launch).
        public var notificationReplacer: (any DeliveredNotificationReplacer)? = nil
        /// Whether the pending queue is processed after each delivery whose device key could be read (default
        /// `true`); the content handler is never held for it.
        public var processesPendingQueueAfterDelivery: Bool = true
        /// The longest the content handler is held for a receipt or failure report (300 ms): what has no answer by
        /// then goes to the outbox, and is sent by the next flush (the next extension run or app launch).
        public var receiptHold: Duration = .milliseconds(300)
        /// Whether the app has the notification filtering entitlement
        /// (`com.apple.developer.usernotifications.filtering`): then a replay is suppressed — the extension hands
        /// iOS content with no alert text, which iOS with that entitlement does not show at all — instead of
        /// shown as `(Encrypted)`, and a retracted mailbox message (mailbox v1 §6) is not shown rather than shown as
        /// `(Deleted)`. Leave `false` without the entitlement: iOS would then show the payload as it arrived. Default `false`.
        public var suppressesReplays: Bool = false
        /// When set, the outbox flush and the pending queue run *before* the content handler, within this budget
        /// (and never past the request's deadline), and nothing runs after it: what iOS requires, since it may
        /// suspend the process the moment the handler is called (a suspended process holding a file lock in a
        /// shared container is killed, `0xdead10cc`). The Apple base class sets 2 seconds. `nil` (the default, the
        /// simulated device): they run after the handler, as `flushesOutboxAfterDelivery` and
        /// `processesPendingQueueAfterDelivery` say.
        public var maintenanceBudget: Duration? = nil
        /// What a push without `ENCRYPTED_DATA` becomes: `passThrough` (the default, the simulated device: shown as it
        /// came), `placeholder` (`(Encrypted)`, none of its text) or `suppress` (empty content; needs the filtering
        /// entitlement). The outcome is `notEncrypted` in all three. Anyone who can push for the app (a leaked `.p8`, a
        /// compromised backend) can show any text under `passThrough`.
        public var plaintext: PlaintextHandling = .passThrough
        /// Fetches a mailbox push's sealed message by its handle (mailbox v1 §3, §5): the app's configured mailbox URL
        /// behind a `MailboxFetcher`. `nil` (the default): no mailbox URL is configured, and a push with
        /// `SEALEDPUSH_FETCH` is `malformedPayload`.
        public var mailboxFetcher: (any MailboxFetcher)? = nil
        /// Whether the device key can be read now, asked before a mailbox fetch (mailbox v1 §5): `false` (before the
        /// first unlock) means no fetch and no pending-queue entry, the placeholder with the handle kept (`keychainLocked`;
        /// the gateway is the queue). Default: always `true` (the lookup of the fetched envelope's key decides).
        public var deviceKeysReadable: @Sendable () -> Bool = { true }
        /// The longest a mailbox fetch may take (mailbox v1 §5: at most 10 s); it never runs past the request's deadline.
        public var mailboxFetchBudget: Duration = .seconds(10)

        /// A configuration; by default the system clock, a 30-second budget and a `sealedpush.extension` logger.
        public init(keys: any DeviceKeyProvider, policy: @escaping @Sendable () throws(OpenFailure) -> ReceiverPolicy = { ReceiverPolicy() },
                    replayGuard: (any ReplayGuard)? = nil, clock: WallClock = .system, timeBudget: Duration = .seconds(30),
                    logger: Logger = Logger(label: "sealedpush.extension"), attachments: AttachmentPipeline? = nil) {
            self.attachments = attachments
            self.keys = keys
            self.policy = policy
            self.replayGuard = replayGuard
            self.clock = clock
            self.timeBudget = timeBudget
            self.logger = logger
        }
    }

    /// The text SealedPush shows in place of anything it could not open: `(Encrypted)`.
    public static let placeholderText = "(Encrypted)"

    /// One request's delivery: its handler (effective once), best attempt and work.
    private final class Attempt: Sendable {
        let handler: DeliverOnce<ExtensionDelivery>
        /// The best attempt, the work in flight, and whether the expiry callback came (it cancels the work).
        let state: Mutex<(best: ExtensionDelivery, work: Task<Void, Never>?, expired: Bool)>

        init(handler: DeliverOnce<ExtensionDelivery>, best: ExtensionDelivery) {
            self.handler = handler
            state = Mutex((best, nil, false))
        }
    }

    private let configuration: Configuration
    /// The request being worked on, and whether the expiry callback came before any request did.
    private let current = Mutex<(attempt: Attempt?, expiredEarly: Bool)>((nil, false))

    /// An extension with the given configuration.
    public init(configuration: Configuration) {
        self.configuration = configuration
    }

    /// Starts work on `request`; `resultHandler` gets the delivered content and its outcome once.
    public func didReceive(_ request: NotificationRequest, resultHandler: @escaping @Sendable (ExtensionDelivery) -> Void) {
        let attempt = Attempt(handler: DeliverOnce(resultHandler), best: Self.timeoutDelivery(request.content))
        let expiredEarly = current.withLock { c -> Bool in
            defer { c = (attempt, false) }
            return c.expiredEarly
        }
        if expiredEarly {
            expire(attempt)
            return
        }
        let deadline = ContinuousClock.now.advanced(by: configuration.timeBudget)
        let work = Task { [self] in
            let now = configuration.clock.unixSeconds
            var delivery = await self.process(request, now: now, queueIfLocked: true, deadline: deadline, attempt: attempt)
            // Receipts (issue #14): the receipt or failure report goes out after the message was opened (or
            // failed) and before the result handler, held at most `receiptHold` (300 ms; never past `deadline`):
            // what has no answer by then is queued in the outbox for the next flush.
            if let courier = configuration.receipts {
                let hold = min(deadline, ContinuousClock.now.advanced(by: configuration.receiptHold))
                delivery = await Self.sendReceiptOrReport(courier, delivery, request: request, now: now, deadline: hold)
            }
            if let budget = configuration.maintenanceBudget {
                // Nothing after the handler (iOS): the outbox and the pending queue get `budget` before it. An expiry
                // meanwhile hands over this delivery (the best attempt) and cancels what is left.
                let final = delivery
                attempt.state.withLock { $0.best = final }
                await maintenance(until: min(deadline, ContinuousClock.now.advanced(by: budget)), after: delivery)
                attempt.handler(delivery)
                return
            }
            attempt.handler(delivery)
            // The outbox is flushed once this delivery's content was handed over.
            if configuration.flushesOutboxAfterDelivery, let courier = configuration.receipts, attempt.handler.hasDelivered {
                _ = await courier.flush(now: configuration.clock.unixSeconds)
            }
            // The device key read (the phone was unlocked since it started): messages that waited for it are opened
            // and their notifications replaced (reveal v1 §9), after this one's content was handed over.
            if configuration.processesPendingQueueAfterDelivery, let replacer = configuration.notificationReplacer,
               configuration.pendingQueue != nil, !Task.isCancelled, delivery.outcome != .fallback(.keychainLocked) {
                _ = await processPendingQueue(replacer: replacer)
            }
        }
        // Expired while the task was being made: cancel it now. (Not "delivered": the work delivers the content
        // itself and then flushes the outbox, which a cancel would cut short.)
        let expired = attempt.state.withLock { s -> Bool in
            s.work = work
            return s.expired
        }
        if expired { work.cancel() }
    }

    /// Delivers the best attempt now and cancels the work in flight.
    ///
    /// Before the message opened that is the timeout content (the placeholder with subtitle
    /// `(Encrypted)` and an empty body); after, the decrypted message. Called before
    /// `didReceive(_:resultHandler:)` has started, it makes that call deliver the timeout content at
    /// once; called after the delivery, it does nothing.
    public func serviceExtensionTimeWillExpire() {
        let attempt = current.withLock { c -> Attempt? in
            guard let attempt = c.attempt else {
                c.expiredEarly = true
                return nil
            }
            return attempt
        }
        if let attempt { expire(attempt) }
    }

    /// Waits until the work for the current request — its receipt and the outbox flush after the content was
    /// handed over — has finished (a simulated device calls this before its process exits).
    public func finishBackgroundWork() async {
        let work = current.withLock { $0.attempt }?.state.withLock { $0.work }
        await work?.value
    }

    private func expire(_ attempt: Attempt) {
        let (best, work) = attempt.state.withLock { s -> (ExtensionDelivery, Task<Void, Never>?) in
            s.expired = true
            return (s.best, s.work)
        }
        work?.cancel()
        if attempt.handler(best), best.outcome == .timeExpired {
            configuration.logger.notice("notification not opened in time", metadata: ["reason": "\(ReasonCode.timeExpired)"])
        }
    }

    /// The work for one request: open the message, and make the result the best attempt as soon as it
    /// is known. Cancellable; `deadline` is when the device expects an answer.
    private func process(_ request: NotificationRequest, now: Int64, queueIfLocked: Bool, deadline: ContinuousClock.Instant,
                         attempt: Attempt, mailbox: MailboxHandle? = nil) async -> ExtensionDelivery {
        if mailbox == nil, let handle = request.content.userInfo[MailboxHandle.apnsKey] {
            return await processMailbox(request, handle: handle, now: now, deadline: deadline, attempt: attempt)
        }
        var (opened, descriptors) = openWithAttachments(request, now: now, queueIfLocked: queueIfLocked, mailbox: mailbox)
        guard opened.outcome == .decrypted else { return opened }
        guard let pipeline = configuration.attachments, !descriptors.isEmpty else {
            attempt.state.withLock { $0.best = opened }
            return opened
        }
        // Until an attachment finishes, the best attempt counts it as not finished in time (§5).
        var results = descriptors.map { d -> Result<NotificationAttachment, AttachmentFailure> in
            .failure(AttachmentFailure(identifier: d.id, reason: .attachmentTimeExpired, detail: "not finished when the extension had to answer"))
        }
        func delivery() -> ExtensionDelivery {
            var d = opened
            d.content.attachments = results.compactMap { try? $0.get() }
            d.attachmentFailures = results.compactMap { if case let .failure(f) = $0 { return f } else { return nil } }
            return d
        }
        attempt.state.withLock { $0.best = delivery() }
        await withTaskGroup(of: (Int, Result<NotificationAttachment, AttachmentFailure>).self) { group in
            for (index, descriptor) in descriptors.enumerated() {
                group.addTask { (index, await pipeline.run(descriptor)) }
            }
            for await (index, result) in group {
                results[index] = result
                switch result {
                case .success:
                    configuration.logger.info("attachment attached", metadata: ["attachment": "\(descriptors[index].id)"])
                case let .failure(failure):
                    configuration.logger.notice("attachment failed", metadata: ["attachment": "\(failure.identifier)", "reason": "\(failure.reason)"])
                }
                let best = delivery()
                attempt.state.withLock { $0.best = best }
            }
        }
        opened = delivery()
        return opened
    }

    /// `open(_:)`, and the descriptors of an opened message's `attachments` (empty when none).
    private func openWithAttachments(_ request: NotificationRequest, now: Int64, queueIfLocked: Bool,
                                     mailbox: MailboxHandle? = nil) -> (ExtensionDelivery, [AttachmentDescriptor]) {
        var descriptors: [AttachmentDescriptor] = []
        let delivery = open(request, now: now, queueIfLocked: queueIfLocked, mailbox: mailbox) { descriptors = $0.attachments ?? [] }
        return (delivery, descriptors)
    }

    /// A mailbox push (mailbox v1 §5): refused when it also carries `ENCRYPTED_DATA`, when its handle is malformed or
    /// no mailbox URL is configured; not fetched while the device key cannot be read (no pending-queue entry: the
    /// gateway is the queue); else fetched within `mailboxFetchBudget` (never past `deadline`) and opened as an
    /// `ENCRYPTED_DATA` message, with the `dlv` check. The envelope is never handed to iOS.
    private func processMailbox(_ request: NotificationRequest, handle value: JSONValue, now: Int64, deadline: ContinuousClock.Instant,
                                attempt: Attempt) async -> ExtensionDelivery {
        guard request.content.userInfo[WireFormat.encryptedDataKey] == nil else {
            return mailboxFailure(request, OpenFailure(.malformedPayload, "the push carries both SEALEDPUSH_FETCH and ENCRYPTED_DATA; nothing was opened"),
                                  keepsHandle: false)
        }
        guard let text = value.stringValue, let handle = MailboxHandle(text) else {
            return mailboxFailure(request, OpenFailure(.malformedPayload, "SEALEDPUSH_FETCH is not a mailbox handle"), keepsHandle: false)
        }
        guard let fetcher = configuration.mailboxFetcher else {
            return mailboxFailure(request, OpenFailure(.malformedPayload, "a mailbox push came and no mailbox URL is configured; configure it in the extension's settings"),
                                  keepsHandle: false)
        }
        guard configuration.deviceKeysReadable() else {
            // Before the first unlock: no fetch, nothing written; the handle waits in the notification and at the gateway.
            return mailboxFailure(request, OpenFailure(.keychainLocked, "the device key cannot be read yet; the message waits at the gateway"),
                                  keepsHandle: true)
        }
        let started = ContinuousClock.now
        let left = min(started.advanced(by: configuration.mailboxFetchBudget), deadline.advanced(by: .milliseconds(-500))) - started
        let seconds = Double(left.components.seconds) + Double(left.components.attoseconds) / 1e18
        // No time left (the budget spent before the fetch): no request at all; the handle stays in the notification.
        let result = seconds > 0 ? await Self.fetch(handle, with: fetcher, seconds: seconds)
                                 : .failed("the extension's time ran out before the mailbox fetch could start")
        configuration.logger.info("mailbox fetch answered", metadata: ["handle": "\(handle.redacted)"])
        switch result {
        case let .envelope(bytes, _):
            var content = request.content
            content.userInfo[MailboxHandle.apnsKey] = nil
            content.userInfo[WireFormat.encryptedDataKey] = .string(Base64.encode(bytes))
            var delivery = await process(NotificationRequest(identifier: request.identifier, content: content), now: now, queueIfLocked: false,
                                         deadline: deadline, attempt: attempt, mailbox: handle)
            if delivery.outcome == .fallback(.keychainLocked), !delivery.suppressed {
                // Locked since the probe: the handle stays, to be fetched again within the gateway's grace.
                delivery.content.userInfo[MailboxHandle.apnsKey] = .string(handle.description)
            }
            return delivery
        case .collected:
            return fallback(Self.withoutHandle(request), OpenFailure(.replayed, "the gateway handed this message out before (410 collected)"),
                            now: now, queueIfLocked: false)
        case .expired:
            return mailboxFailure(request, OpenFailure(.expired, "the message expired at the gateway (410 expired)"), keepsHandle: false)
        case .retracted:
            // Mailbox v1 §6: what still shows this handle goes; this notification becomes `(Deleted)`, or nothing at all
            // with the filtering entitlement.
            if let replacer = configuration.notificationReplacer {
                let removed = await replacer.removeDelivered(holdingHandle: handle.description)
                if removed > 0 { configuration.logger.info("notifications of a retracted message removed", metadata: ["count": "\(removed)"]) }
            }
            return retractedDelivery(request)
        case let .failed(why):
            return mailboxFailure(request, OpenFailure(.fetchFailed, why), keepsHandle: true)
        }
    }

    /// `fetcher.fetch`, or `.failed` once `seconds` have passed, whichever comes first (a fetcher that ignores its
    /// deadline or cancellation cannot hold the extension).
    private static func fetch(_ handle: MailboxHandle, with fetcher: any MailboxFetcher, seconds: Double) async -> MailboxFetchResult {
        // The first answer wins; one that comes before the continuation is stored (a cancellation at once) is kept for it.
        let once = Mutex<(continuation: CheckedContinuation<MailboxFetchResult, Never>?, early: MailboxFetchResult?, done: Bool)>((nil, nil, false))
        let resume = { @Sendable (result: MailboxFetchResult) in
            once.withLock { s in
                guard !s.done else { return }
                if let c = s.continuation {
                    s.done = true
                    s.continuation = nil
                    c.resume(returning: result)
                } else if s.early == nil {
                    s.early = result
                }
            }
        }
        var tasks: [Task<Void, Never>] = []
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<MailboxFetchResult, Never>) in
                let early = once.withLock { s -> MailboxFetchResult? in
                    if let early = s.early {
                        s.done = true
                        return early
                    }
                    s.continuation = continuation
                    return nil
                }
                if let early {
                    continuation.resume(returning: early)
                    return
                }
                tasks.append(Task { resume(await fetcher.fetch(handle, deadlineSeconds: seconds)) })
                tasks.append(Task {
                    try? await Task.sleep(for: .milliseconds(Int64(seconds * 1000)))
                    resume(.failed("the mailbox fetch did not finish within \(seconds) s"))
                })
            }
        } onCancel: {
            resume(.failed("the extension's time ran out during the mailbox fetch"))
        }
        for task in tasks { task.cancel() }
        return result
    }

    /// A retracted mailbox message (mailbox v1 §6): with the filtering entitlement (`suppressesReplays`) empty content,
    /// else the push's title and subtitle with body `(Deleted)`; nothing of the push in userInfo.
    private func retractedDelivery(_ request: NotificationRequest) -> ExtensionDelivery {
        configuration.logger.notice("the sender retracted the message", metadata: ["reason": "\(ReasonCode.retracted)"])
        if configuration.suppressesReplays {
            var delivery = ExtensionDelivery(content: NotificationContent(), outcome: .retracted)
            delivery.suppressed = true
            return delivery
        }
        var content = Self.withoutHandle(request).content
        content.body = Self.deletedText
        content.userInfo[WireFormat.encryptedDataKey] = nil
        content.attachments = []
        return ExtensionDelivery(content: content, outcome: .retracted)
    }

    /// The body of a retracted message's notification without the filtering entitlement: `(Deleted)`.
    public static let deletedText = "(Deleted)"

    /// `request` without its handle.
    private static func withoutHandle(_ request: NotificationRequest) -> NotificationRequest {
        var content = request.content
        content.userInfo[MailboxHandle.apnsKey] = nil
        return NotificationRequest(identifier: request.identifier, content: content)
    }

    /// The placeholder with body `(Encrypted)` for a mailbox push that was not opened: nothing of the push in userInfo but
    /// the handle, and that only when `keepsHandle` (to be fetched later, mailbox v1 §5); never queued.
    private func mailboxFailure(_ request: NotificationRequest, _ failure: OpenFailure, keepsHandle: Bool) -> ExtensionDelivery {
        let handle = request.content.userInfo[MailboxHandle.apnsKey]
        var delivery = fallback(Self.withoutHandle(request), failure, now: configuration.clock.unixSeconds, queueIfLocked: false)
        if keepsHandle, !delivery.suppressed, let text = handle?.stringValue, let parsed = MailboxHandle(text) {
            delivery.content.userInfo[MailboxHandle.apnsKey] = .string(parsed.description)
        }
        return delivery
    }

    /// Opens one request's `ENCRYPTED_DATA` (the synchronous text stage, without the time budget):
    /// the content to show and the outcome. A message whose device key cannot be read yet goes to the pending
    /// queue, when there is one.
    public func open(_ request: NotificationRequest) -> ExtensionDelivery {
        open(request, now: configuration.clock.unixSeconds, queueIfLocked: true) { _ in }
    }

    private func open(_ request: NotificationRequest, now: Int64, queueIfLocked: Bool, mailbox: MailboxHandle? = nil,
                      body onOpen: (MessageBody) -> Void) -> ExtensionDelivery {
        let original = request.content
        if original.userInfo[MailboxHandle.apnsKey] != nil {
            // A mailbox push reached the synchronous stage (`open(_:)`), which cannot fetch: the handle is kept for the
            // asynchronous path (`didReceive`) or the app to fetch; nothing of the push is shown.
            return mailboxFailure(request, OpenFailure(.fetchFailed, "a mailbox push is fetched only by didReceive"), keepsHandle: true)
        }
        guard let value = original.userInfo[WireFormat.encryptedDataKey] else {
            switch configuration.plaintext {
            case .passThrough:
                configuration.logger.info("payload has no ENCRYPTED_DATA; passed through", metadata: ["reason": "\(ReasonCode.notEncrypted)"])
                return ExtensionDelivery(content: original, outcome: .notEncrypted)
            case .placeholder:
                configuration.logger.notice("payload has no ENCRYPTED_DATA; its text is not shown (plaintext is refused)",
                                            metadata: ["reason": "\(ReasonCode.notEncrypted)"])
                var content = original
                content.title = ""
                content.subtitle = ""
                content.body = Self.placeholderText
                content.attachments = []
                return ExtensionDelivery(content: content, outcome: .notEncrypted)
            case .suppress:
                configuration.logger.notice("payload has no ENCRYPTED_DATA; suppressed (plaintext is refused)",
                                            metadata: ["reason": "\(ReasonCode.notEncrypted)"])
                var delivery = ExtensionDelivery(content: NotificationContent(), outcome: .notEncrypted)
                delivery.suppressed = true
                return delivery
            }
        }
        guard case let .string(encrypted) = value else {
            return fallback(request, OpenFailure(.malformedPayload, "ENCRYPTED_DATA is not a string"), now: now, queueIfLocked: false)
        }
        do throws(OpenFailure) {
            let policy = try configuration.policy()
            var probe: OpenedMessage?
            if let mailbox {
                // Mailbox v1 §5: every check of wire v1 §5, then `dlv` must name the handle's delivery. The replay cache
                // records the id only once that holds: a first open without it, a second with it.
                let opened = try MessageOpener(keys: configuration.keys, policy: policy, replayGuard: nil)
                    .open(encryptedData: encrypted, requestIdentifier: request.identifier, now: now)
                guard mailboxBodyMatches(opened.rawBody, handle: mailbox) else {
                    throw OpenFailure(.handleMismatch, "the fetched envelope names another delivery than its handle")
                }
                probe = opened
            }
            let opener = MessageOpener(keys: configuration.keys, policy: policy, replayGuard: configuration.replayGuard)
            // The request identifier lets a retried push (the same message under the same
            // `apns-collapse-id`) replace its own notification instead of showing as a replay.
            let opened: OpenedMessage
            if let probe, configuration.replayGuard == nil {
                opened = probe
            } else {
                opened = try opener.open(encryptedData: encrypted, requestIdentifier: request.identifier, now: now)
            }
            configuration.logger.info("notification opened", metadata: [
                "key_id": "\(opened.keyID.hex)", "signed_by": "\(opened.signedBy?.hex ?? "-")",
            ])
            if let reveal = opened.body.reveal {
                // Reveal v1 §3: the text stays sealed to the reveal key; iOS gets the placeholder alert only.
                var delivery = ExtensionDelivery(content: Self.heldContent(opened.body, reveal: reveal, category: configuration.revealCategory,
                                                                           original: original, hidesThread: configuration.previews == .hidden),
                                                 outcome: .held)
                delivery.receiptTicket = opened.body.receipt.map {
                    ReceiptTicket(request: $0, messageID: opened.body.id, expiresAt: opened.body.expiresAt, revealable: true)
                }
                return delivery
            }
            guard configuration.previews == .full else {
                // Reveal v1 §5 and §5.1: the message is sealed again to the device's own reveal key (whose secret reads
                // only while the phone is unlocked) for the content extension; attachments are not fetched.
                guard let revealKey = configuration.revealPublicKey() else {
                    return fallback(request, OpenFailure(.keychainLocked, "the preview policy needs the device's reveal key and there is none"),
                                    now: now, queueIfLocked: false)
                }
                let local: Envelope
                do {
                    local = try MessageSealer.seal(inner: opened.innerMessage, to: revealKey, padding: .bucket, payloadOverhead: 0)
                } catch {
                    return fallback(request, OpenFailure(.keychainLocked, "the message could not be sealed again to the reveal key"),
                                    now: now, queueIfLocked: false)
                }
                var delivery = ExtensionDelivery(content: Self.previewContent(opened.body, policy: configuration.previews,
                                                                              category: configuration.revealCategory, local: local.base64,
                                                                              original: original),
                                                 outcome: .decrypted)
                delivery.receiptTicket = opened.body.receipt.map {
                    ReceiptTicket(request: $0, messageID: opened.body.id, expiresAt: opened.body.expiresAt, revealable: true)
                }
                return delivery
            }
            onOpen(opened.body)
            var delivery = ExtensionDelivery(content: Self.decryptedContent(opened.body, original: original), outcome: .decrypted)
            delivery.receiptTicket = opened.body.receipt.map { ReceiptTicket(request: $0, messageID: opened.body.id, expiresAt: opened.body.expiresAt) }
            return delivery
        } catch {
            return fallback(request, error, now: now, queueIfLocked: queueIfLocked)
        }
    }

    /// The placeholder with body `(Encrypted)` and userInfo without `ENCRYPTED_DATA` (nothing openable is left in
    /// iOS's store, reveal v1 §5). A message whose device key cannot be read yet (before the first unlock) is
    /// appended to the pending queue and marked `SEALEDPUSH_PENDING` (§9).
    private func fallback(_ request: NotificationRequest, _ failure: OpenFailure, now: Int64, queueIfLocked: Bool) -> ExtensionDelivery {
        configuration.logger.notice("notification not opened", metadata: ["reason": "\(failure.reason)"])
        var content = request.content
        content.body = Self.placeholderText
        content.userInfo[WireFormat.encryptedDataKey] = nil
        if failure.reason == .replayed, configuration.suppressesReplays {
            // The filtering entitlement: Apple's contract is empty content (`UNNotificationContent()`), nothing else
            // set, and iOS shows nothing (a replay is never shown twice).
            var delivery = ExtensionDelivery(content: NotificationContent(), outcome: .fallback(failure.reason))
            delivery.suppressed = true
            return delivery
        }
        if queueIfLocked, failure.reason == .keychainLocked, let queue = configuration.pendingQueue, deviceKeyIsLocked(request) {
            var entry = PendingMessage(requestID: request.identifier, thread: request.content.threadIdentifier, receivedAt: now,
                                       payload: request.content.userInfo)
            if let revealKey = configuration.pendingQueueSealKey() {
                do { entry = try SealedPendingEntry.seal(entry, to: revealKey) } catch {
                    configuration.logger.error("a pending message could not be sealed to the reveal key; kept sealed to the device key only",
                                               metadata: ["error": "\(error)"])
                }
            }
            do {
                try queue.append(entry)
                content.userInfo[RevealFormat.pendingUserInfoKey] = .string(request.identifier)
                configuration.logger.info("message kept in the pending queue until the device key can be read",
                                          metadata: ["reason": "\(failure.reason)"])
            } catch {
                configuration.logger.error("the pending queue could not be written; the message is lost",
                                           metadata: ["reason": "\(failure.reason)", "error": "\(error)"])
            }
        }
        return ExtensionDelivery(content: content, outcome: .fallback(failure.reason))
    }

    /// Whether the key of `request`'s envelope exists but cannot be read in the device's lock state (not a
    /// missing entitlement, not an unknown key): what makes a message worth keeping for later.
    private func deviceKeyIsLocked(_ request: NotificationRequest) -> Bool {
        guard let text = request.content.userInfo[WireFormat.encryptedDataKey]?.stringValue,
              let envelope = try? Envelope(base64: text), case .locked = configuration.keys.lookUpKey(id: envelope.keyID) else { return false }
        return true
    }

    /// The timeout content: the placeholder with subtitle `(Encrypted)`, an empty body and userInfo without
    /// `ENCRYPTED_DATA`.
    static func timeoutDelivery(_ original: NotificationContent) -> ExtensionDelivery {
        var content = original
        content.subtitle = placeholderText
        content.body = ""
        content.userInfo[WireFormat.encryptedDataKey] = nil
        return ExtensionDelivery(content: content, outcome: .timeExpired)
    }

    /// The work iOS allows only before the content handler: the outbox flush, then (when this delivery's device key
    /// read) the pending queue, both stopped at `end`. Cancelled with the request (an expiry).
    private func maintenance(until end: ContinuousClock.Instant, after delivery: ExtensionDelivery) async {
        if let courier = configuration.receipts, !Task.isCancelled {
            let now = configuration.clock.unixSeconds
            await withTaskGroup(of: Void.self) { group in
                group.addTask { _ = await courier.flush(now: now) }
                group.addTask { try? await Task.sleep(until: end, clock: .continuous) }
                await group.next()
                group.cancelAll()
            }
        }
        if let replacer = configuration.notificationReplacer, configuration.pendingQueue != nil, !Task.isCancelled,
           ContinuousClock.now < end, delivery.outcome != .fallback(.keychainLocked) {
            _ = await processPendingQueue(replacer: replacer, until: end)
        }
    }

    /// Opens what waits in the pending queue (reveal v1 §9), oldest first: every wire v1 check, expiry judged at
    /// the time the message arrived, the replay rule by request identifier. An entry that opens replaces its
    /// notification through `replacer` with what §5 hands iOS under the current preview policy (left alone when
    /// the user removed it) and sends its receipt; one that fails a check is removed and its notification keeps
    /// `(Encrypted)`. Stops, keeping the rest, while the device key still cannot be read.
    ///
    /// The app calls this on launch; the service extension calls it after a delivery whose key could be read.
    public func processPendingQueue(replacer: any DeliveredNotificationReplacer) async -> PendingQueueSummary {
        await processPendingQueue(replacer: replacer, until: nil)
    }

    /// `processPendingQueue(replacer:)` that stops at `end` (`nil`: none), keeping what it did not reach.
    ///
    /// When more than `summaryThreshold` (3) notifications were replaced, the replacer is asked for one summary alert
    /// (`summarize(replaced:)`): the replacements themselves are silent.
    public func processPendingQueue(replacer: any DeliveredNotificationReplacer, until end: ContinuousClock.Instant?) async -> PendingQueueSummary {
        let summary = await drainPendingQueue(replacer: replacer, until: end)
        if summary.replaced > Self.summaryThreshold { await replacer.summarize(replaced: summary.replaced) }
        return summary
    }

    /// Fetches the messages whose handles delivered notifications still hold (mailbox v1 §5 "Later": the app's launch
    /// and its background refresh, never an extension after its content handler) and replaces each notification under
    /// its request identifier with what the extension would have shown: the message, `(Deleted)` (removed with the
    /// filtering entitlement), or `(Encrypted)` without the handle once it is worthless. A fetch that fails, or a device
    /// key that cannot be read yet, leaves the notification and its handle alone. Replacements are silent.
    public func processKeptHandles(replacer: any DeliveredNotificationReplacer) async -> KeptHandlesSummary {
        var summary = KeptHandlesSummary()
        for kept in await replacer.deliveredHoldingHandles() {
            guard kept.content.userInfo[MailboxHandle.apnsKey] != nil, !Task.isCancelled else { continue }
            let attempt = Attempt(handler: DeliverOnce { _ in }, best: Self.timeoutDelivery(kept.content))
            let deadline = ContinuousClock.now.advanced(by: configuration.timeBudget)
            var delivery = await process(kept, now: configuration.clock.unixSeconds, queueIfLocked: false, deadline: deadline, attempt: attempt)
            if delivery.content.userInfo[MailboxHandle.apnsKey] != nil {
                summary.remaining += 1   // fetchFailed, or the key does not read yet: try again later
                continue
            }
            if let courier = configuration.receipts {
                delivery = await Self.sendReceiptOrReport(courier, delivery, request: kept, now: configuration.clock.unixSeconds,
                                                          deadline: ContinuousClock.now.advanced(by: courier.timeout))
            }
            if delivery.suppressed {
                // The filtering entitlement: nothing is shown, so the notification goes.
                if let text = kept.content.userInfo[MailboxHandle.apnsKey]?.stringValue {
                    _ = await replacer.removeDelivered(holdingHandle: text)
                }
            } else {
                _ = await replacer.replaceDelivered(NotificationRequest(identifier: kept.identifier, content: delivery.content))
            }
            switch delivery.outcome {
            case .decrypted, .held: summary.replaced += 1
            case .retracted: summary.retracted += 1
            default: summary.failed += 1
            }
        }
        return summary
    }

    /// Beyond this many notifications replaced in one pass over the pending queue, one summary alert is posted.
    public static let summaryThreshold = 3

    private func drainPendingQueue(replacer: any DeliveredNotificationReplacer, until end: ContinuousClock.Instant?) async -> PendingQueueSummary {
        var summary = PendingQueueSummary()
        guard let queue = configuration.pendingQueue else { return summary }
        let entries: [PendingMessage]
        do { entries = try queue.entries() } catch {
            configuration.logger.error("the pending queue cannot be read", metadata: ["error": "\(error)"])
            return summary
        }
        let window = ReceiverPolicy.defaultReplayWindowSeconds
        let now = configuration.clock.unixSeconds
        for (index, queued) in entries.enumerated() {
            if let end, ContinuousClock.now >= end || Task.isCancelled {
                summary.remaining = entries.count - index
                return summary
            }
            // Past what any message can be opened at (its own expiry is sealed inside): dropped unopened.
            if now - queued.receivedAt > window {
                summary.expired += 1
                if !removePending(queue, queued.requestID) {
                    summary.remaining = entries.count - index
                    return summary
                }
                continue
            }
            var entry = queued
            if SealedPendingEntry.isSealed(queued) {
                // Revision 3: sealed to the reveal key, which reads only while the phone is unlocked.
                var opened: PendingMessage?
                if let kid = SealedPendingEntry.keyID(of: queued), let keys = configuration.pendingQueueRevealKeys {
                    switch keys.lookUpKey(id: kid) {
                    case let .found(pair): opened = SealedPendingEntry.open(queued, with: pair)
                    case .locked:
                        summary.remaining = entries.count - index
                        return summary
                    default: opened = nil
                    }
                } else if configuration.pendingQueueRevealKeys == nil {
                    summary.remaining = entries.count - index
                    return summary
                }
                guard let opened else {
                    configuration.logger.notice("a pending entry does not open with the reveal key; removed, its notification keeps (Encrypted)")
                    summary.failed += 1
                    if !removePending(queue, queued.requestID) {
                        summary.remaining = entries.count - index
                        return summary
                    }
                    continue
                }
                entry = opened
            }
            let request = NotificationRequest(identifier: entry.requestID, payload: entry.payload)
            let attempt = Attempt(handler: DeliverOnce { _ in }, best: Self.timeoutDelivery(request.content))
            let deadline = ContinuousClock.now.advanced(by: configuration.timeBudget)
            var delivery = await process(request, now: entry.receivedAt, queueIfLocked: false, deadline: deadline, attempt: attempt)
            if delivery.outcome == .fallback(.keychainLocked), deviceKeyIsLocked(request) {
                summary.remaining = entries.count - index
                return summary
            }
            if let courier = configuration.receipts {
                let until = ContinuousClock.now.advanced(by: courier.timeout)
                delivery = await Self.sendReceiptOrReport(courier, delivery, request: request, now: configuration.clock.unixSeconds,
                                                          deadline: end.map { min($0, until) } ?? until)
            }
            switch delivery.outcome {
            case .decrypted, .held:
                if await replacer.replaceDelivered(NotificationRequest(identifier: entry.requestID, content: delivery.content)) {
                    summary.replaced += 1
                } else {
                    summary.alreadyRemoved += 1
                }
            default:
                summary.failed += 1
            }
            do { try queue.remove(requestIDs: [entry.requestID]) } catch {
                configuration.logger.error("the pending queue could not be updated", metadata: ["error": "\(error)"])
                summary.remaining = entries.count - index
                return summary
            }
        }
        return summary
    }

    /// Removes one entry of the pending queue; `false` (logged) when the queue could not be written.
    private func removePending(_ queue: any PendingQueue, _ requestID: String) -> Bool {
        do {
            try queue.remove(requestIDs: [requestID])
            return true
        } catch {
            configuration.logger.error("the pending queue could not be updated", metadata: ["error": "\(error)"])
            return false
        }
    }

    /// Sets the thread, badge and sound the body names (what a held or preview notification keeps).
    private static func applyThreadBadgeSound(_ body: MessageBody, to content: inout NotificationContent) {
        if let thread = body.threadID { content.threadIdentifier = thread }
        if let badge = body.badge { content.badge = badge }
        if let sound = body.sound { content.sound = sound }
    }

    /// The content handed to iOS for a reveal message (reveal v1 §3): the outer alert, thread, sound and
    /// badge, the reveal `category`, and userInfo without `ENCRYPTED_DATA`, with `SEALEDPUSH_REVEAL` set to the
    /// `reveal` envelope and `data` not merged. The envelope is not opened.
    ///
    /// `hidesThread` (the preview policy `none`, revision 3): no thread identifier, not even the push's own.
    static func heldContent(_ body: MessageBody, reveal: String, category: String, original: NotificationContent,
                            hidesThread: Bool = false) -> NotificationContent {
        var content = original
        content.title = body.alert.title ?? ""
        content.subtitle = body.alert.subtitle ?? ""
        content.body = body.alert.body ?? ""
        applyThreadBadgeSound(body, to: &content)
        if hidesThread { content.threadIdentifier = "" }
        content.categoryIdentifier = category
        content.attachments = []
        content.userInfo[WireFormat.encryptedDataKey] = nil
        content.userInfo[RevealFormat.userInfoKey] = .string(reveal)
        return content
    }

    /// The content handed to iOS for an opened ordinary message under the preview policy `title` or `none`
    /// (reveal v1 §5): the decrypted title and subtitle (`title`) or the placeholder's (`none`), the body
    /// `Press and hold to read`, the reveal category, the message's thread, sound and badge under `title` (no thread,
    /// the push's own badge and sound under `none`); userInfo without `ENCRYPTED_DATA`,
    /// with `SEALEDPUSH_LOCAL` set to `local` (the message sealed again to the reveal key, §5.1), `data` not merged.
    static func previewContent(_ body: MessageBody, policy: PreviewPolicy, category: String, local: String,
                               original: NotificationContent) -> NotificationContent {
        var content = original
        if policy == .title {
            content.title = body.alert.title ?? ""
            content.subtitle = body.alert.subtitle ?? ""
        }
        content.body = RevealFormat.pressAndHoldText
        if policy == .hidden {
            // Revision 3: under `none` nothing from the sealed body reaches iOS's store, not even the thread (it names a
            // conversation), badge or sound: no thread at all, the push's own badge and sound.
            content.threadIdentifier = ""
        } else {
            applyThreadBadgeSound(body, to: &content)
        }
        content.categoryIdentifier = category
        content.attachments = []
        content.userInfo[WireFormat.encryptedDataKey] = nil
        content.userInfo[RevealFormat.localUserInfoKey] = .string(local)
        return content
    }

    /// The content shown for an opened message: its text and members, `data` merged into userInfo
    /// (without the now useless `ENCRYPTED_DATA`).
    static func decryptedContent(_ body: MessageBody, original: NotificationContent) -> NotificationContent {
        var content = original
        content.title = body.alert.title ?? ""
        content.subtitle = body.alert.subtitle ?? ""
        content.body = body.alert.body ?? ""
        if let thread = body.threadID { content.threadIdentifier = thread }
        if let category = body.category { content.categoryIdentifier = category }
        if let badge = body.badge { content.badge = badge }
        if let sound = body.sound { content.sound = sound }
        content.userInfo[WireFormat.encryptedDataKey] = nil
        if let data = body.data {
            for (key, value) in data { content.userInfo[key] = value }
        }
        return content
    }
}

// MARK: - Receipts (issue #14)

extension SecretMessageExtension {
    /// The receipt for an opened message that asks for one, or the failure report for a fallback (§2, §3);
    /// the delivery gains their status. Never for a replay or a message that did not open.
    static func sendReceiptOrReport(_ courier: ReceiptCourier, _ delivery: ExtensionDelivery, request: NotificationRequest, now: Int64,
                                    deadline: ContinuousClock.Instant) async -> ExtensionDelivery {
        var delivery = delivery
        switch delivery.outcome {
        case .decrypted, .held:
            guard let ticket = delivery.receiptTicket else { return delivery }
            // Reveal v1 §6: the content extension's `revealed` receipt needs the outer body's receipt, which
            // iOS's store never gets: it is kept on the device under this notification's request identifier.
            if ticket.revealable {
                courier.keepRevealTicket(ticket.request, messageID: ticket.messageID, requestIdentifier: request.identifier,
                                         expiresAt: ticket.expiresAt, now: now)
            }
            delivery.receipt = await courier.sendReceipt(ticket.request, messageID: ticket.messageID,
                                                         attachments: receiptAttachmentCounts(delivery), now: now, deadline: deadline,
                                                         expiresAt: ticket.expiresAt)
        case let .fallback(reason):
            // The envelope's key id when the envelope reads (a malformed one has none to give).
            let kid = request.content.userInfo[WireFormat.encryptedDataKey]?.stringValue.flatMap { try? Envelope(base64: $0).keyID }
            delivery.report = await courier.reportFailure(reason: reason, kid: kid, now: now, deadline: deadline)
        case .notEncrypted, .timeExpired, .retracted:
            break
        }
        return delivery
    }

    /// The receipt's `attachments` counts: present only when the delivery carries attachment results.
    static func receiptAttachmentCounts(_ delivery: ExtensionDelivery) -> ReceiptAttachmentCounts? {
        // The counts come from the delivery's attachment results (attachments v1): `attachmentFailures` is
        // non-nil exactly when the message had attachments; the attached ones are in the content.
        guard let failures = delivery.attachmentFailures else { return nil }
        return ReceiptAttachmentCounts(attached: delivery.content.attachments.count, failures: failures)
    }
}
