#if canImport(UserNotifications)
public import UserNotifications
public import SealedPushReceiver
import SealedPushWire
import SealedPushCrypto
import Synchronization
import Logging

/// A notification service extension that opens SealedPush messages; an app's extension subclasses it.
///
/// The subclass overrides `configuration(for:)` (device keys, trust policy, replay cache, attachments,
/// receipts, logger) and is named as the extension's `NSExtensionPrincipalClass`. Each request is
/// worked on by a `SecretMessageExtension` of its own; the content iOS receives is built from
/// `request.content.mutableCopy()` (`UNNotificationContent.applying(_:over:logger:)`), so what iOS
/// resolved — localized alert text, sound objects (default and critical), interruption level,
/// relevance score — stays as it was. `serviceExtensionTimeWillExpire()` delivers each request's best
/// attempt (before the message opened, the timeout content) through the content handler exactly once.
///
/// Nothing here is actor-isolated: iOS calls both methods on threads of its own. In a target built
/// with Xcode 26's default MainActor isolation, declare the subclass `nonisolated`.
open class SealedPushServiceExtension: UNNotificationServiceExtension {
    /// The requests being worked on; shared with their result handlers.
    private let inFlight = InFlightRequests()

    /// The extension; iOS creates the subclass with `init()`.
    public nonisolated override init() {
        super.init()
    }

    /// How requests are opened: device keys, trust policy, replay cache, attachments, receipts, logger.
    ///
    /// Called once per request, on the thread that delivered it. Subclasses override; the default
    /// reads no keys (`KeyLookup.unavailable`), so every SealedPush message shows the `(Encrypted)`
    /// placeholder with reason `keychainLocked`.
    nonisolated open func configuration(for request: UNNotificationRequest) -> SecretMessageExtension.Configuration {
        SecretMessageExtension.Configuration(keys: NoDeviceKeys())
    }

    /// Opens `request`'s `ENCRYPTED_DATA` and calls `contentHandler` once with the content to show.
    nonisolated open override func didReceive(_ request: UNNotificationRequest,
                                               withContentHandler contentHandler: @escaping (UNNotificationContent) -> Void) {
        let configuration = configuration(for: request)
        let handler = AppleContentHandler(original: request.content, handler: contentHandler, logger: configuration.logger)
        guard let content = NotificationContent(request.content) else {
            // userInfo is not JSON (APNs payloads always are): show what iOS gave.
            configuration.logger.notice("userInfo is not JSON; content passed through", metadata: ["reason": "\(ReasonCode.invalidPayload)"])
            handler.deliverOriginal()
            return
        }
        let ours = NotificationRequest(identifier: request.identifier, content: content)
        let receiver = SecretMessageExtension(configuration: configuration)
        let (token, expired) = inFlight.add(receiver)
        if expired { receiver.serviceExtensionTimeWillExpire() }   // the expiry came while this call was starting
        receiver.didReceive(ours) { [inFlight] delivery in
            handler.deliver(delivery.content, original: content)
            inFlight.remove(token)
        }
    }

    /// Delivers the best attempt of every request in flight now (once each) and cancels their work.
    nonisolated open override func serviceExtensionTimeWillExpire() {
        for receiver in inFlight.expireAll() { receiver.serviceExtensionTimeWillExpire() }
    }
}

/// The requests an extension instance is working on, and whether an expiry came with none in flight.
final class InFlightRequests: Sendable {
    private let state = Mutex<(next: Int, receivers: [Int: SecretMessageExtension], expiredEarly: Bool)>((0, [:], false))

    /// Registers `receiver`; `expired` says the expiry callback came before any request was in flight.
    func add(_ receiver: SecretMessageExtension) -> (token: Int, expired: Bool) {
        state.withLock { s in
            defer { s.next += 1; s.expiredEarly = false }
            s.receivers[s.next] = receiver
            return (s.next, s.expiredEarly)
        }
    }

    /// Forgets a request whose content was delivered.
    func remove(_ token: Int) { _ = state.withLock { $0.receivers.removeValue(forKey: token) } }

    /// The receivers to expire; with none, remembers the expiry for the next request.
    func expireAll() -> [SecretMessageExtension] {
        state.withLock { s in
            if s.receivers.isEmpty { s.expiredEarly = true }
            return Array(s.receivers.values)
        }
    }
}

/// Apple's content handler and the request's content, used once.
///
/// `@unchecked Sendable`: the handler and the original content are Apple's types, not declared
/// Sendable. Both are immutable `let`s; `UNNotificationContent` is immutable, so reading it from
/// two threads is safe; the handler is called by exactly one thread — the one that wins `used` —
/// which also makes, fills and hands over the mutable copy, so no Apple object is used by two
/// threads at once.
final class AppleContentHandler: @unchecked Sendable {
    private let original: UNNotificationContent
    private let handler: (UNNotificationContent) -> Void
    private let used = Mutex(false)
    private let logger: Logging.Logger

    init(original: UNNotificationContent, handler: @escaping (UNNotificationContent) -> Void, logger: Logging.Logger) {
        self.original = original
        self.handler = handler
        self.logger = logger
    }

    /// Whether this call is the first; later calls do nothing (iOS ignores them too).
    private func claim() -> Bool { used.withLock { used in defer { used = true }; return !used } }

    /// Hands iOS `delivered` applied over a mutable copy of the request's content.
    func deliver(_ delivered: NotificationContent, original converted: NotificationContent) {
        guard claim() else { return }
        handler(original.applying(delivered, over: converted, logger: logger))
    }

    /// Hands iOS the request's content unchanged.
    func deliverOriginal() {
        guard claim() else { return }
        handler(original)
    }
}

/// The key provider of an extension that did not configure one: the key store cannot be asked.
struct NoDeviceKeys: DeviceKeyProvider {
    func lookUpKey(id keyID: KeyID) -> KeyLookup { .unavailable }
}
#endif
