public import SealedPushWire
import Dispatch
import Synchronization

/// What the device did with one payload (`shared/spec/device-outcomes.md`).
public struct DeliveryResult: Sendable, Equatable {
    /// The kind of result.
    public enum Outcome: String, Sendable, Codable, CaseIterable {
        /// Opened and passed every check; the secret message is shown.
        case decrypted
        /// A check failed; the placeholder is shown with body `(Encrypted)`.
        case fallback
        /// Time ran out; the placeholder is shown with subtitle `(Encrypted)` and an empty body.
        case timeout
        /// The payload's own content is shown.
        case original
        /// Nothing is shown (filtering entitlement and content without alert text).
        case suppressed
        /// APNs/simctl refuse the payload; nothing is delivered.
        case rejected
    }

    /// The kind of result.
    public let outcome: Outcome
    /// Why, as a reason code; `nil` for `decrypted`.
    public let reason: ReasonCode?
    /// What is shown, or `nil` when nothing is.
    public let notification: NotificationContent?

    /// A result from its parts.
    public init(outcome: Outcome, reason: ReasonCode?, notification: NotificationContent?) {
        self.outcome = outcome
        self.reason = reason
        self.notification = notification
    }

    /// The `--json` object: `{"outcome", "reason", "notification"}`. Absent text fields are `""`;
    /// an absent badge or sound is `null`.
    public var jsonObject: JSONObject {
        var o = JSONObject()
        o["outcome"] = .string(outcome.rawValue)
        o["reason"] = reason.map { .string($0.rawValue) } ?? .null
        if let n = notification {
            o["notification"] = .object(JSONObject([
                ("title", .string(n.title)), ("subtitle", .string(n.subtitle)), ("body", .string(n.body)),
                ("threadIdentifier", .string(n.threadIdentifier)), ("categoryIdentifier", .string(n.categoryIdentifier)),
                ("badge", n.badge.map { .int($0) } ?? .null), ("sound", n.sound.map { .string($0) } ?? .null),
                ("userInfo", .object(n.userInfo)),
            ]))
        } else {
            o["notification"] = .null
        }
        return o
    }

    /// Whether the device simulator should exit non-zero (the payload was refused).
    public var isRejection: Bool { outcome == .rejected }
}

/// Delivers APNs payloads to a notification service extension under the rules iOS applies,
/// modelled on `xcrun simctl push`.
public struct DeviceSimulator: Sendable {
    /// How the device treats the extension.
    public struct Options: Sendable {
        /// The extension's time budget (iOS: about 30 seconds).
        public var timeLimit: Duration
        /// How long the device waits after `serviceExtensionTimeWillExpire()` before showing the original.
        public var expiryGrace: Duration
        /// The extension process dies without the expiry callback.
        public var extensionCrash: Bool
        /// The app has the filtering entitlement (content without alert text is not shown at all).
        public var filtering: Bool

        /// Options; by default 30 s, a 1 s grace after expiry, no crash, no filtering.
        public init(timeLimit: Duration = .seconds(30), expiryGrace: Duration = .seconds(1), extensionCrash: Bool = false,
                    filtering: Bool = false) {
            self.timeLimit = timeLimit
            self.expiryGrace = expiryGrace
            self.extensionCrash = extensionCrash
            self.filtering = filtering
        }
    }

    /// The options in force.
    public let options: Options
    private let makeExtension: @Sendable () -> any NotificationServiceExtension

    /// A simulator that makes a fresh extension instance per notification, as iOS may.
    public init(options: Options = Options(), makeExtension: @escaping @Sendable () -> any NotificationServiceExtension) {
        self.options = options
        self.makeExtension = makeExtension
    }

    /// Delivers one payload (the bytes of an APNs payload file) and reports what is shown.
    public func deliver(payload bytes: [UInt8], identifier: String = "sealedpush-simulated") async -> DeliveryResult {
        // 1. A UTF-8 JSON object with an `aps` object.
        guard case let .object(payload)? = try? JSON.parse(bytes), case .object? = payload["aps"] else {
            return DeliveryResult(outcome: .rejected, reason: .invalidPayload, notification: nil)
        }
        // 2. At most 4096 bytes.
        guard bytes.count <= WireFormat.maxPayloadBytes else {
            return DeliveryResult(outcome: .rejected, reason: .payloadTooLarge, notification: nil)
        }
        let request = NotificationRequest(identifier: identifier, payload: payload)
        let aps = payload["aps"]?.objectValue ?? JSONObject()
        // 3. The extension runs only for mutable-content: 1 ...
        guard aps["mutable-content"] == .int(1) else {
            return DeliveryResult(outcome: .original, reason: .notMutable, notification: request.content)
        }
        // 4. ... and a visible alert.
        guard request.content.hasAlertText else {
            return DeliveryResult(outcome: .original, reason: .noAlert, notification: request.content)
        }
        // 5. The extension dies before it can answer.
        if options.extensionCrash {
            return DeliveryResult(outcome: .original, reason: .extensionCrashed, notification: request.content)
        }
        return await run(makeExtension(), request)
    }

    private func run(_ serviceExtension: any NotificationServiceExtension, _ request: NotificationRequest) async -> DeliveryResult {
        // The device's clock runs on a thread of its own (a semaphore with a deadline), so its timing
        // does not depend on Swift's cooperative pool being free — as iOS's watchdog does not depend
        // on the app's threads.
        await withCheckedContinuation { (continuation: CheckedContinuation<DeliveryResult, Never>) in
            runOnThread { continuation.resume(returning: self.runBlocking(serviceExtension, request)) }
        }
    }

    private func runBlocking(_ serviceExtension: any NotificationServiceExtension, _ request: NotificationRequest) -> DeliveryResult {
        let box = DeliveryBox()
        let handler = ContentHandlerOnce { content in box.deliver(content) }
        // The time limit counts from the moment the extension is called, as on iOS.
        let started = DispatchSemaphore(value: 0)
        runOnThread {
            started.signal()
            serviceExtension.didReceive(request, withContentHandler: { handler($0) })
        }
        started.wait()
        if let content = box.wait(for: options.timeLimit) {
            return classify(content, serviceExtension, request)
        }
        // Time is up: the expiry callback on another thread, then a short grace. What arrives in the
        // grace is labelled by what it is: the expiry callback's content is `timeout`, and the
        // extension's own answer that won the race against it is classified as if on time.
        runOnThread { serviceExtension.serviceExtensionTimeWillExpire() }
        if let content = box.wait(for: options.expiryGrace) {
            return classify(content, serviceExtension, request)
        }
        handler(request.content)  // later deliveries from the extension are ignored
        return DeliveryResult(outcome: .original, reason: .timeExpired, notification: request.content)
    }

    private func classify(_ content: NotificationContent, _ serviceExtension: any NotificationServiceExtension,
                          _ request: NotificationRequest) -> DeliveryResult {
        guard content.hasAlertText else {
            return options.filtering
                ? DeliveryResult(outcome: .suppressed, reason: .alertRemoved, notification: nil)
                : DeliveryResult(outcome: .original, reason: .alertRemoved, notification: request.content)
        }
        if serviceExtension.lastDecrypted { return DeliveryResult(outcome: .decrypted, reason: nil, notification: content) }
        switch serviceExtension.lastReason {
        case .notEncrypted?: return DeliveryResult(outcome: .original, reason: .notEncrypted, notification: content)
        case .timeExpired?: return DeliveryResult(outcome: .timeout, reason: .timeExpired, notification: content)
        case let reason?: return DeliveryResult(outcome: .fallback, reason: reason, notification: content)
        case nil: return DeliveryResult(outcome: .original, reason: nil, notification: content)
        }
    }
}

/// The first content an extension delivered, shared between its thread and the waiting device.
final class DeliveryBox: Sendable {
    private let value = Mutex<NotificationContent?>(nil)
    private let delivered = DispatchSemaphore(value: 0)

    /// Records the first content and wakes the waiting device.
    func deliver(_ content: NotificationContent) {
        let first = value.withLock { current -> Bool in
            guard current == nil else { return false }
            current = content
            return true
        }
        if first { delivered.signal() }
    }

    /// Blocks the calling (device) thread until content arrives or `duration` passes.
    func wait(for duration: Duration) -> NotificationContent? {
        if let content = value.withLock({ $0 }) { return content }
        let c = duration.components
        let nanoseconds = c.seconds * 1_000_000_000 + c.attoseconds / 1_000_000_000
        _ = delivered.wait(timeout: .now() + .nanoseconds(Int(clamping: nanoseconds)))
        return value.withLock { $0 }
    }
}
