public import SealedPushWire
public import Logging
import Foundation
import Synchronization

/// The text SealedPush shows in place of anything it could not open.
public enum Placeholder {
    /// `(Encrypted)`.
    public static let encrypted = "(Encrypted)"
}

/// The notification service extension SealedPush ships: opens `ENCRYPTED_DATA` with a device key.
///
/// On success it shows the decrypted title, subtitle, body, thread id, category, badge, sound and
/// `data` (merged into userInfo). On any failure it shows the placeholder with the body
/// `(Encrypted)`; when time expires first, the placeholder with subtitle `(Encrypted)` and an empty
/// body. A payload without `ENCRYPTED_DATA` passes through unchanged. It logs reason codes only —
/// never plaintext, never key material.
public final class SecretMessageExtension: NotificationServiceExtension {
    /// How the extension finds keys, policy, time and its replay cache.
    public struct Configuration: Sendable {
        /// Device keys by key id (the keychain store on Linux, the Keychain on iOS).
        public var keys: any DeviceKeyProvider
        /// The current trust and signature policy, read per notification so `trust` changes apply at
        /// once; a failure to read it (a locked or damaged store) is reported as the given reason.
        public var policy: @Sendable () throws(OpenFailure) -> ReceiverPolicy
        /// The replay cache, or `nil` to accept repeats.
        public var replayGuard: (any ReplayGuard)?
        /// The device clock, in Unix seconds.
        public var now: @Sendable () -> Int64
        /// A stall before any work starts (a slow network, a lock held elsewhere); for simulation.
        public var startDelay: Duration
        /// Where reason codes are logged.
        public var logger: Logger

        /// A configuration; by default the system clock, no stall, and a `sealedpush.extension` logger.
        public init(keys: any DeviceKeyProvider, policy: @escaping @Sendable () throws(OpenFailure) -> ReceiverPolicy = { ReceiverPolicy() },
                    replayGuard: (any ReplayGuard)? = nil,
                    now: @escaping @Sendable () -> Int64 = SecretMessageExtension.systemNow,
                    startDelay: Duration = .zero, logger: Logger = Logger(label: "sealedpush.extension")) {
            self.keys = keys
            self.policy = policy
            self.replayGuard = replayGuard
            self.now = now
            self.startDelay = startDelay
            self.logger = logger
        }
    }

    /// The system clock in Unix seconds.
    @Sendable public static func systemNow() -> Int64 { Int64(Date().timeIntervalSince1970) }

    private struct State {
        var handler: ContentHandlerOnce?
        var bestAttempt: MutableNotificationContent?
        var reason: ReasonCode?
        var decrypted = false
        /// Set, under the lock, by whichever of `didReceive` and the expiry callback delivers: the
        /// reason and `decrypted` always describe the content that was actually shown.
        var claimed = false
        /// The expiry callback came before `didReceive` had started: deliver the timeout content at once.
        var expiredEarly = false
    }

    private let configuration: Configuration
    private let state = Mutex(State())

    /// An extension with the given configuration.
    public init(configuration: Configuration) {
        self.configuration = configuration
    }

    /// The reason for the last delivered content (`nil` after a successful decryption).
    public var lastReason: ReasonCode? { state.withLock { $0.reason } }

    /// Whether the last request opened and passed every check.
    public var lastDecrypted: Bool { state.withLock { $0.decrypted } }

    /// Opens the request's `ENCRYPTED_DATA` and delivers the result through `contentHandler`.
    public func didReceive(_ request: NotificationRequest, withContentHandler contentHandler: @escaping @Sendable (NotificationContent) -> Void) {
        let handler = ContentHandlerOnce(contentHandler)
        let expiredEarly = state.withLock { s -> Bool in
            let early = s.expiredEarly
            s = State(handler: handler, bestAttempt: request.content.mutableCopy(), reason: nil, decrypted: false)
            return early
        }
        if expiredEarly {
            serviceExtensionTimeWillExpire()
            return
        }
        if configuration.startDelay > .zero {
            let c = configuration.startDelay.components
            Thread.sleep(forTimeInterval: Double(c.seconds) + Double(c.attoseconds) / 1e18)
        }
        let (content, reason) = process(request)
        let claimed = state.withLock { s -> Bool in
            guard !s.claimed else { return false }
            s.claimed = true
            s.reason = reason
            s.decrypted = reason == nil
            return true
        }
        if claimed { handler(content) }
    }

    /// Delivers the timeout content: the placeholder with subtitle `(Encrypted)` and an empty body.
    ///
    /// Called before `didReceive(_:withContentHandler:)` has started, it makes that call deliver the
    /// timeout content at once; called after the message was delivered, it does nothing.
    public func serviceExtensionTimeWillExpire() {
        let claimed = state.withLock { s -> (ContentHandlerOnce, MutableNotificationContent)? in
            guard let handler = s.handler, let attempt = s.bestAttempt else {
                s.expiredEarly = true
                return nil
            }
            guard !s.claimed else { return nil }
            s.claimed = true
            s.reason = .timeExpired
            s.decrypted = false
            return (handler, attempt)
        }
        guard let (handler, attempt) = claimed else { return }
        var content = attempt
        content.subtitle = Placeholder.encrypted
        content.body = ""
        if handler(content.content) {
            configuration.logger.notice("notification not opened in time", metadata: ["reason": "\(ReasonCode.timeExpired)"])
        }
    }

    /// Opens one request: the content to show, and the reason when it is not the decrypted message.
    func process(_ request: NotificationRequest) -> (NotificationContent, ReasonCode?) {
        let original = request.content
        guard let value = original.userInfo[WireFormat.encryptedDataKey] else {
            configuration.logger.info("payload has no ENCRYPTED_DATA; passed through", metadata: ["reason": "\(ReasonCode.notEncrypted)"])
            return (original, .notEncrypted)
        }
        guard case let .string(encrypted) = value else {
            return fallback(original, OpenFailure(.malformedPayload, "ENCRYPTED_DATA is not a string"))
        }
        do {
            let opener = MessageOpener(keys: configuration.keys, policy: try configuration.policy(), replayGuard: configuration.replayGuard)
            let opened = try opener.open(encryptedData: encrypted, now: configuration.now())
            configuration.logger.info("notification opened", metadata: [
                "key_id": "\(opened.keyID.hex)", "signed_by": "\(opened.signedBy?.hex ?? "-")",
            ])
            return (Self.decryptedContent(opened.body, original: original), nil)
        } catch {
            return fallback(original, error)
        }
    }

    private func fallback(_ original: NotificationContent, _ failure: OpenFailure) -> (NotificationContent, ReasonCode?) {
        configuration.logger.notice("notification not opened", metadata: ["reason": "\(failure.reason)"])
        var content = original.mutableCopy()
        content.body = Placeholder.encrypted
        return (content.content, failure.reason)
    }

    /// The content shown for an opened message: its text and members, `data` merged into userInfo
    /// (without the now useless `ENCRYPTED_DATA`).
    static func decryptedContent(_ body: MessageBody, original: NotificationContent) -> NotificationContent {
        var content = original.mutableCopy()
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
        return content.content
    }
}
