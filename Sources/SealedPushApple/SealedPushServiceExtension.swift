#if canImport(UserNotifications)
public import UserNotifications
public import SealedPushReceiver
public import SealedPushWire
import SealedPushCrypto
import Synchronization
import Logging
import Foundation

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
    /// Each request's private attachments directory: one registry for the whole process, since iOS runs several
    /// instances of the extension in one process, with requests in parallel.
    private var directories: AttachmentDirectories { AttachmentDirectories.process }

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
        start(request) { content, _ in contentHandler(content) }
    }

    /// The content to hand iOS for `request` and what happened to it: the entry point for an app whose notification
    /// service extension is its own class (not a subclass of this one).
    ///
    /// The app keeps one instance of a subclass (its `configuration(for:)`, and `finalContent(_:for:)` if it likes),
    /// awaits this from its `didReceive(_:withContentHandler:)` and forwards `serviceExtensionTimeWillExpire()` to it
    /// (the best attempt is then returned at once). It returns exactly once; nothing runs after it returns.
    nonisolated public func content(for request: UNNotificationRequest) async -> (UNNotificationContent, ExtensionOutcome) {
        let box: ContentBox = await withCheckedContinuation { continuation in
            start(request) { content, outcome in continuation.resume(returning: ContentBox(content: content, outcome: outcome)) }
        }
        return (box.content, box.outcome)
    }

    /// The app's last word on the content before it is handed to iOS (called once per request, on any thread): set
    /// the category, interruption level, relevance score, or make it a communication notification
    /// (`content.updating(from: intent)`). Return the content to hand over; the default returns `content`.
    ///
    /// Reveal and preview rules are applied after it: title, subtitle, body, thread, userInfo and attachments are put
    /// back as SealedPush made them, so the hook cannot show hidden text; suppressed content (the filtering
    /// entitlement) does not go through it. `delivery` says what happened (`delivery.outcome`).
    nonisolated open func finalContent(_ content: UNMutableNotificationContent, for delivery: ExtensionDelivery) -> UNNotificationContent {
        content
    }

    /// The work of `didReceive` and `content(for:)`: `deliver` is called once with the content and its outcome.
    nonisolated func start(_ request: UNNotificationRequest, deliver contentHandler: @escaping (UNNotificationContent, ExtensionOutcome) -> Void) {
        // In flight from the first instruction: an expiry from here on is this request's, even before its
        // receiver exists (the receiver is attached below, and expires at once if the expiry came first).
        let token = inFlight.begin()
        // A fresh private directory for this request's attachments; what earlier requests (or an extension
        // iOS killed) left under the root is removed first.
        let directory = directories.begin(ObjectIdentifier(request), root: attachmentsRootDirectory)
        var configuration = configuration(for: request)
        // iOS may suspend the process the moment the content handler is called, and a suspended process holding a
        // file lock in the shared container is killed (0xdead10cc): nothing runs after the handler. The outbox
        // flush and the pending queue run before it, within `maintenanceBudget` (2 s unless the configuration
        // says otherwise); what they do not reach waits for the next request or the app
        // (`SealedPushApp.didLaunch`, from launch and from a `BGAppRefreshTask`).
        configuration.flushesOutboxAfterDelivery = false
        configuration.processesPendingQueueAfterDelivery = false
        if configuration.maintenanceBudget == nil { configuration.maintenanceBudget = Self.defaultMaintenanceBudget }
        directories.configured(ObjectIdentifier(request))
        if directory == nil {
            configuration.logger.error("the attachments directory cannot be made or is not private (0700, ours); attachments are left out",
                                       metadata: ["root": "\(attachmentsRootDirectory)"])
        }
        let handler = AppleContentHandler(original: request.content, handler: contentHandler, logger: configuration.logger) { [self] in
            finalContent($0, for: $1)
        }
        guard let content = NotificationContent(request.content) else {
            // userInfo is not JSON (APNs payloads always are): the placeholder, without ENCRYPTED_DATA.
            configuration.logger.notice("userInfo is not JSON; the placeholder is shown", metadata: ["reason": "\(ReasonCode.invalidPayload)"])
            inFlight.remove(token)
            directories.end(directory)
            handler.deliverPlaceholder()
            return
        }
        let ours = NotificationRequest(identifier: request.identifier, content: content)
        let receiver = SecretMessageExtension(configuration: configuration)
        if inFlight.attach(receiver, to: token) { receiver.serviceExtensionTimeWillExpire() }   // the expiry came while this call was starting
        receiver.didReceive(ours) { [inFlight, directories] delivery in
            handler.deliver(delivery, original: content)
            inFlight.remove(token)
            directories.end(directory)
        }
    }

    /// The directory under which each request gets its private attachments directory: `sealedpush-attachments`
    /// in the extension's temporary directory. Everything in it that does not belong to a request in flight
    /// is removed when a request starts (plaintext files iOS did not take, or left by a killed extension).
    nonisolated open var attachmentsRootDirectory: String {
        NSTemporaryDirectory() + (NSTemporaryDirectory().hasSuffix("/") ? "" : "/") + "sealedpush-attachments"
    }

    /// An attachment pipeline for `request` that writes into the request's private directory (`0700`, made
    /// when the request started), fetching through `fetcher` under `policy`; `nil` when the directory could
    /// not be made (the message then shows without its attachments). Call it from `configuration(for:)`: the
    /// directory is known only while that call runs.
    nonisolated public func attachmentPipeline(for request: UNNotificationRequest, fetcher: any AttachmentFetcher,
                                               policy: AttachmentURLPolicy = .production) -> AttachmentPipeline? {
        guard let directory = directories.directory(of: ObjectIdentifier(request)) else { return nil }
        return try? AttachmentPipeline(fetcher: fetcher, directory: directory, policy: policy)
    }

    /// How long the outbox flush and the pending queue may hold a request's content handler (2 s): iOS may suspend
    /// the process as soon as the handler is called, so they run before it.
    public static let defaultMaintenanceBudget: Duration = .seconds(2)

    /// Delivers the best attempt of every request in flight now (once each) and cancels their work.
    nonisolated open override func serviceExtensionTimeWillExpire() {
        for receiver in inFlight.expireAll() { receiver.serviceExtensionTimeWillExpire() }
    }
}

/// The requests an extension instance is working on, from the first instruction of `didReceive` until their
/// content was delivered.
///
/// iOS calls `serviceExtensionTimeWillExpire()` only for a request it handed over, so an expiry applies to
/// the requests in flight and to nothing else: one that comes with none in flight is ignored (it must not
/// cut short the next push on the same warm process). A request is registered (`begin`) before any other
/// work of `didReceive`, so an expiry that comes before its receiver exists is kept for it and applied when
/// the receiver is attached.
final class InFlightRequests: Sendable {
    /// One request: its receiver once made, and whether an expiry came before that.
    private struct Entry {
        var receiver: SecretMessageExtension?
        var expired = false
    }

    private let state = Mutex<(next: Int, entries: [Int: Entry])>((0, [:]))

    /// Registers a request that has just entered `didReceive`; returns its token.
    func begin() -> Int {
        state.withLock { s in
            defer { s.next += 1 }
            s.entries[s.next] = Entry()
            return s.next
        }
    }

    /// Attaches the request's receiver; `true` when the expiry came before (the caller expires it at once).
    func attach(_ receiver: SecretMessageExtension, to token: Int) -> Bool {
        state.withLock { s in
            s.entries[token]?.receiver = receiver
            return s.entries[token]?.expired ?? false
        }
    }

    /// Forgets a request whose content was delivered.
    func remove(_ token: Int) { _ = state.withLock { $0.entries.removeValue(forKey: token) } }

    /// The receivers to expire now; a request whose receiver is not made yet is marked, and nothing is kept
    /// when no request is in flight.
    func expireAll() -> [SecretMessageExtension] {
        state.withLock { s in
            for token in s.entries.keys where s.entries[token]?.receiver == nil { s.entries[token]?.expired = true }
            return s.entries.values.compactMap(\.receiver)
        }
    }
}

/// The private attachments directory of each request in flight, under a root emptied of everything else
/// whenever a request starts.
final class AttachmentDirectories: Sendable {
    /// The process's registry (every instance of every subclass shares it).
    static let process = AttachmentDirectories()

    /// The directories of requests in flight, and (only while `configuration(for:)` runs) which request has which.
    private let state = Mutex<(live: Set<String>, byRequest: [ObjectIdentifier: String])>(([], [:]))

    /// Removes what the root holds besides the directories of requests in flight, then makes a fresh
    /// private directory for `request` and returns it (`nil` if the root or it cannot be made).
    func begin(_ request: ObjectIdentifier, root: String) -> String? {
        state.withLock { s -> String? in
            guard (try? PrivateDirectory.prepare(root, create: true)) != nil else { return nil }
            // Class C explicitly (new files take their directory's class): under the entitlement
            // default-data-protection = NSFileProtectionComplete an attachment could not be written on a locked phone.
            DataProtection.setProtection(.completeUntilFirstUserAuthentication, path: root)
            for name in (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? [] where !s.live.contains(root + "/" + name) {
                try? FileManager.default.removeItem(atPath: root + "/" + name)
            }
            let directory = root + "/" + UUID().uuidString
            guard (try? PrivateDirectory.prepare(directory, create: true)) != nil else { return nil }
            DataProtection.setProtection(.completeUntilFirstUserAuthentication, path: directory)
            s.live.insert(directory)
            s.byRequest[request] = directory
            return directory
        }
    }

    /// The directory of `request`, between `begin` and `configured`.
    func directory(of request: ObjectIdentifier) -> String? { state.withLock { $0.byRequest[request] } }

    /// `configuration(for:)` returned: the request is no longer looked up (its object may be reused).
    func configured(_ request: ObjectIdentifier) { _ = state.withLock { $0.byRequest.removeValue(forKey: request) } }

    /// The request was delivered: its directory is no longer in flight (the next start removes it).
    func end(_ directory: String?) {
        guard let directory else { return }
        _ = state.withLock { $0.live.remove(directory) }
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
    private let handler: (UNNotificationContent, ExtensionOutcome) -> Void
    private let finalize: (UNMutableNotificationContent, ExtensionDelivery) -> UNNotificationContent
    private let used = Mutex(false)
    private let logger: Logging.Logger

    init(original: UNNotificationContent, handler: @escaping (UNNotificationContent, ExtensionOutcome) -> Void, logger: Logging.Logger,
         finalize: @escaping (UNMutableNotificationContent, ExtensionDelivery) -> UNNotificationContent = { c, _ in c }) {
        self.original = original
        self.handler = handler
        self.logger = logger
        self.finalize = finalize
    }

    /// The app's hook applied to `content`, then what SealedPush decided put back (title, subtitle, body, thread,
    /// userInfo, attachments): the hook changes presentation, never what is shown of the message.
    private func finalized(_ content: UNNotificationContent, _ delivery: ExtensionDelivery) -> UNNotificationContent {
        guard let mutable = content.mutableCopy() as? UNMutableNotificationContent else { return content }
        let hooked = finalize(mutable, delivery)
        guard let result = hooked.mutableCopy() as? UNMutableNotificationContent else { return content }
        result.title = content.title
        result.subtitle = content.subtitle
        result.body = content.body
        result.threadIdentifier = content.threadIdentifier
        result.userInfo = content.userInfo
        result.attachments = content.attachments
        return result
    }

    /// Whether this call is the first; later calls do nothing (iOS ignores them too).
    private func claim() -> Bool { used.withLock { used in defer { used = true }; return !used } }

    /// Hands iOS `delivered` applied over a mutable copy of the request's content; a suppressed delivery (the
    /// filtering entitlement) hands `UNNotificationContent()`, nothing set, as Apple's contract asks.
    func deliver(_ delivered: ExtensionDelivery, original converted: NotificationContent) {
        guard claim() else { return }
        if delivered.suppressed {
            handler(UNNotificationContent(), delivered.outcome)
            return
        }
        handler(finalized(original.applying(delivered.content, over: converted, logger: logger), delivered), delivered.outcome)
    }

    /// Hands iOS the request's content with body `(Encrypted)` and userInfo without `ENCRYPTED_DATA` (what a request
    /// whose userInfo is not JSON gets: never the payload as it came).
    func deliverPlaceholder() {
        guard claim() else { return }
        let outcome = ExtensionOutcome.fallback(.invalidPayload)
        guard let copy = original.mutableCopy() as? UNMutableNotificationContent else {
            handler(UNNotificationContent(), outcome)
            return
        }
        copy.body = SecretMessageExtension.placeholderText
        copy.userInfo = copy.userInfo.filter { ($0.key.base as? String) != WireFormat.encryptedDataKey }
        copy.attachments = []
        handler(finalized(copy, ExtensionDelivery(content: NotificationContent(body: SecretMessageExtension.placeholderText), outcome: outcome)), outcome)
    }
}

/// A content and its outcome, carried out of the content handler to `content(for:)`.
///
/// `@unchecked Sendable`: the content is made for this one hand-over and not touched by its maker afterwards.
struct ContentBox: @unchecked Sendable {
    let content: UNNotificationContent
    let outcome: ExtensionOutcome
}

/// The key provider of an extension that did not configure one: the key store cannot be asked.
struct NoDeviceKeys: DeviceKeyProvider {
    func lookUpKey(id keyID: KeyID) -> KeyLookup { .unavailable }
}
#endif
