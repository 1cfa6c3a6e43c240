public import SealedPushReceiver
public import SealedPushWire
import SealedPushCrypto
import Synchronization

/// What the device did with one payload (`shared/spec/device-outcomes.md`).
public struct DeliveryResult: Sendable, Equatable {
    /// The kind of result.
    public enum Outcome: String, Sendable, Codable, CaseIterable {
        /// Opened and passed every check; the secret message is shown.
        case decrypted
        /// A reveal message opened and passed every check; its placeholder is shown with the reveal
        /// category, and the text waits, sealed, for a press and hold (reveal v1 §3).
        case held
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
    /// Why, as a reason code; `nil` for `decrypted` and `held`.
    public let reason: ReasonCode?
    /// What is shown, or `nil` when nothing is.
    public let notification: NotificationContent?
    /// For an opened message asking for a receipt: `sent` or `queued` (receipts v1).
    public var receipt: ReceiptStatus? = nil
    /// For a fallback the device reports: `sent`, `queued` or `suppressed` (receipts v1 §3).
    public var report: ReportStatus? = nil
    /// For an opened message with attachments, the ones that failed and why; `nil` when it had none.
    public let attachmentFailures: [AttachmentFailure]?
    /// The notification request identifier the payload was delivered under (`device-outcomes.md`,
    /// "Replays"); `nil` only for a result not made by `DeviceSimulator.deliver`.
    public var requestID: String? = nil

    /// A result from its parts.
    public init(outcome: Outcome, reason: ReasonCode?, notification: NotificationContent?, attachmentFailures: [AttachmentFailure]? = nil) {
        self.outcome = outcome
        self.reason = reason
        self.notification = notification
        self.attachmentFailures = attachmentFailures
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
            if attachmentFailures != nil, case var .object(shown)? = o["notification"] {
                shown["attachments"] = .array(n.attachments.map { a in
                    .object(JSONObject([("identifier", .string(a.identifier)), ("type", a.type.map { .string($0) } ?? .null),
                                        ("size", a.size.map { .int($0) } ?? .null), ("file", .string(a.url))]))
                })
                o["notification"] = .object(shown)
            }
        } else {
            o["notification"] = .null
        }
        if let receipt { o["receipt"] = .string(receipt.rawValue) }
        if let report { o["report"] = .string(report.rawValue) }
        if let requestID { o["request_id"] = .string(requestID) }
        if let attachmentFailures {
            o["attachmentFailures"] = .array(attachmentFailures.map { f in
                .object(JSONObject([("identifier", .string(f.identifier)), ("reason", .string(f.reason.rawValue))]))
            })
        }
        return o
    }

    /// Whether the device simulator should exit non-zero (the payload was refused).
    public var isRejection: Bool { outcome == .rejected }
}

/// Delivers APNs payloads to a notification service extension under the rules iOS applies,
/// modelled on `xcrun simctl push`.
///
/// The device's timer runs on an injected clock (`ContinuousClock` by default), so tests move time
/// by hand instead of racing real sleeps. The extension's callbacks run on threads of their own, off
/// Swift's cooperative pool, as iOS calls an extension on its own threads.
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
        /// The largest payload delivered (APNs: 4096 bytes). A receiver that checked its own platform's budget
        /// before handing the core an APNs-shaped payload around the message (an Android device: FCM's 4096 data
        /// bytes, keys and values counted) raises it, so the wrapping does not count against the message.
        public var maximumPayloadBytes: Int = WireFormat.maxPayloadBytes

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
    private let clock: any Clock<Duration>
    private let makeExtension: @Sendable () -> any NotificationServiceExtension

    /// A simulator that makes a fresh extension instance per notification, as iOS may, and times it on `clock`.
    public init(options: Options = Options(), clock: any Clock<Duration> = ContinuousClock(),
                makeExtension: @escaping @Sendable () -> any NotificationServiceExtension) {
        self.options = options
        self.clock = clock
        self.makeExtension = makeExtension
    }

    /// Delivers one payload (the bytes of an APNs payload file) under the notification request
    /// identifier `identifier` (as iOS takes it from `apns-collapse-id`, else `apns-id`; `nil`: a new
    /// one is drawn, as for a fresh push) and reports what is shown.
    public func deliver(payload bytes: [UInt8], identifier: String? = nil) async -> DeliveryResult {
        let identifier = identifier ?? Self.newRequestIdentifier()
        var result = await deliver(payload: bytes, requestIdentifier: identifier)
        result.requestID = identifier
        return result
    }

    /// A fresh request identifier shaped like an `apns-id`: a random (version 4) UUID, upper case.
    public static func newRequestIdentifier() -> String {
        var bytes = CryptoLibrary.randomBytes(count: 16)
        bytes[6] = bytes[6] & 0x0F | 0x40
        bytes[8] = bytes[8] & 0x3F | 0x80
        let hex = Hex.encode(bytes).uppercased()
        let cut = [8, 12, 16, 20].map { hex.index(hex.startIndex, offsetBy: $0) }
        return [hex[..<cut[0]], hex[cut[0]..<cut[1]], hex[cut[1]..<cut[2]], hex[cut[2]..<cut[3]], hex[cut[3]...]].joined(separator: "-")
    }

    private func deliver(payload bytes: [UInt8], requestIdentifier identifier: String) async -> DeliveryResult {
        // 1. A UTF-8 JSON object with an `aps` object.
        guard case let .object(payload)? = try? JSON.parse(bytes), case .object? = payload["aps"] else {
            return DeliveryResult(outcome: .rejected, reason: .invalidPayload, notification: nil)
        }
        // 2. At most 4096 bytes (or the larger limit of a receiver that checked its platform's own budget).
        guard bytes.count <= options.maximumPayloadBytes else {
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
        let box = DeliveryBox()
        // The time limit counts from the moment the extension is called, as on iOS.
        if let reporting = serviceExtension as? any ReportingServiceExtension {
            runOffPool {
                reporting.didReceive(request) {
                    box.deliver(Reported(content: $0.content, outcome: $0.outcome, receipt: $0.receipt, report: $0.report,
                                         attachmentFailures: $0.attachmentFailures))
                }
            }
        } else {
            runOffPool { serviceExtension.didReceive(request) { box.deliver(Reported(content: $0, outcome: nil)) } }
        }
        if let delivery = await box.wait(upTo: options.timeLimit, on: clock) {
            var result = classify(delivery, request)
            result.receipt = delivery.receipt
            result.report = delivery.report
            return result
        }
        // Time is up: the expiry callback on another thread, then a short grace. What arrives in the
        // grace is labelled by what it is: the expiry callback's content is `timeout`, and the
        // extension's own answer that won the race against it is classified as if on time.
        runOffPool { serviceExtension.serviceExtensionTimeWillExpire() }
        if let delivery = await box.wait(upTo: options.expiryGrace, on: clock) {
            return classify(delivery, request)
        }
        box.deliver(Reported(content: request.content, outcome: nil))  // later deliveries are ignored
        return DeliveryResult(outcome: .original, reason: .timeExpired, notification: request.content)
    }

    private func classify(_ delivery: Reported, _ request: NotificationRequest) -> DeliveryResult {
        let content = delivery.content
        guard content.hasAlertText else {
            return options.filtering
                ? DeliveryResult(outcome: .suppressed, reason: .alertRemoved, notification: nil)
                : DeliveryResult(outcome: .original, reason: .alertRemoved, notification: request.content)
        }
        switch delivery.outcome {
        case .decrypted?:
            return DeliveryResult(outcome: .decrypted, reason: nil, notification: content, attachmentFailures: delivery.attachmentFailures)
        case .held?: return DeliveryResult(outcome: .held, reason: nil, notification: content)
        case .notEncrypted?: return DeliveryResult(outcome: .original, reason: .notEncrypted, notification: content)
        case .timeExpired?: return DeliveryResult(outcome: .timeout, reason: .timeExpired, notification: content)
        case let .fallback(reason)?: return DeliveryResult(outcome: .fallback, reason: reason, notification: content)
        case .retracted?: return DeliveryResult(outcome: .fallback, reason: .retracted, notification: content)
        case nil: return DeliveryResult(outcome: .original, reason: nil, notification: content)  // an extension that does not report
        }
    }
}

/// Delivered content and, when the extension reports it, its outcome.
struct Reported: Sendable, Equatable {
    var content: NotificationContent
    var outcome: ExtensionOutcome?
    var receipt: ReceiptStatus? = nil
    var report: ReportStatus? = nil
    var attachmentFailures: [AttachmentFailure]? = nil
}

/// The first delivery an extension made, shared between its thread and the waiting device.
final class DeliveryBox: Sendable {
    private struct State {
        var value: Reported?
        var waiters: [Int: CheckedContinuation<Reported?, Never>] = [:]
        var nextWaiter = 0
    }

    private let state = Mutex(State())

    /// Records the first delivery and wakes every waiter.
    func deliver(_ delivery: Reported) {
        let waiters = state.withLock { s -> [CheckedContinuation<Reported?, Never>] in
            guard s.value == nil else { return [] }
            s.value = delivery
            defer { s.waiters = [:] }
            return Array(s.waiters.values)
        }
        for waiter in waiters { waiter.resume(returning: delivery) }
    }

    /// The delivery, if one was made.
    var value: Reported? { state.withLock { $0.value } }

    /// Waits until a delivery is made or `duration` passes on `clock`.
    func wait(upTo duration: Duration, on clock: any Clock<Duration>) async -> Reported? {
        if let value { return value }
        let result = await withTaskGroup(of: Reported?.self) { group in
            group.addTask { await self.next() }
            group.addTask {
                try? await clock.sleep(for: duration)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        return result ?? value
    }

    /// The delivery, once made; `nil` if the waiting task is cancelled first.
    private func next() async -> Reported? {
        let id = state.withLock { s -> Int in
            defer { s.nextWaiter += 1 }
            return s.nextWaiter
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Reported?, Never>) in
                let resumeNow = state.withLock { s -> Reported?? in
                    if let value = s.value { return .some(value) }
                    if Task.isCancelled { return .some(nil) }
                    s.waiters[id] = continuation
                    return nil
                }
                if let now = resumeNow { continuation.resume(returning: now) }
            }
        } onCancel: {
            let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.resume(returning: nil)
        }
    }
}
