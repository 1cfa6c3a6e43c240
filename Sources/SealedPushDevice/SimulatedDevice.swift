public import SealedPushKeychain
public import SealedPushReceiver
public import SealedPushWire
import SealedPushCrypto
public import Logging
import Synchronization

/// A simulated iPhone over a keychain store: its keys, trusted senders and replay cache, and the
/// `SecretMessageExtension` that delivery runs.
public struct SimulatedDevice: Sendable {
    /// The device's keychain store.
    public let store: KeychainStore
    /// The device's wall clock (the store's clock).
    public var clock: WallClock { store.clock }

    /// A device over `store`.
    public init(store: KeychainStore) {
        self.store = store
    }

    /// The extension configuration for this device: keys, trust policy and replay cache from the store.
    ///
    /// One delivery per process reads keys through a plain `DeviceKeyring`; a long-lived process
    /// passes a `CachedDeviceKeyring` as `keys`.
    /// `attachments` fetches and writes a message's attachments; `nil` shows the text alone.
    /// `previews` is the device's preview policy (reveal v1 §5).
    public func extensionConfiguration(keys: (any DeviceKeyProvider)? = nil,
                                       logger: Logger = Logger(label: "sealedpush.extension"),
                                       attachments: AttachmentPipeline? = nil, previews: PreviewPolicy = .full,
                                       mailbox: (any MailboxFetcher)? = nil) -> SecretMessageExtension.Configuration {
        let trust = TrustStore(store: store)
        var configuration = SecretMessageExtension.Configuration(
            keys: keys ?? DeviceKeyring(store: store),
            policy: { () throws(OpenFailure) -> ReceiverPolicy in
                do { return try trust.receiverPolicy() } catch {
                    throw OpenFailure(.keychainLocked, "the trust settings cannot be read: \(error)")
                }
            },
            replayGuard: ReplayCache(store: store),
            clock: clock,
            logger: logger,
            attachments: attachments)
        configuration.previews = previews
        // A push without ENCRYPTED_DATA (`device config --plaintext`): shown as it came unless refused; a setting that
        // cannot be read refuses, as an unreadable preview setting hides.
        configuration.plaintext = ((try? plaintext()) ?? .refuse) == .refuse ? .placeholder : .passThrough
        let store = self.store
        // Reveal v1 §5.1 and §9: the reveal public key (a record readable in every lock state), the pending queue and
        // the notification store the queue's messages replace their placeholders in.
        configuration.revealPublicKey = { try? RevealKeyring(store: store).export().publicKey }
        configuration.pendingQueue = FilePendingQueue(store: store)
        // Revision 3: pending entries sealed to the reveal public key, opened only with the reveal key (unlocked).
        configuration.pendingQueueSealKey = configuration.revealPublicKey
        configuration.pendingQueueRevealKeys = RevealKeyring(store: store)
        configuration.notificationReplacer = NotificationStoreReplacer(store: store, logger: logger)
        // Mailbox v1 §5: the fetcher of the configured mailbox URL (`nil`: none, a mailbox push is malformedPayload), and
        // no fetch before the first unlock (a lock state that cannot be read counts as before it).
        configuration.mailboxFetcher = mailbox
        configuration.deviceKeysReadable = { ((try? store.deviceLockState()) ?? .beforeFirstUnlock) != .beforeFirstUnlock }
        return configuration
    }

    /// The policy the device reads per notification, from its trust items.
    private var policy: @Sendable () throws(OpenFailure) -> ReceiverPolicy {
        let trust = TrustStore(store: store)
        return { () throws(OpenFailure) -> ReceiverPolicy in
            do { return try trust.receiverPolicy() } catch {
                throw OpenFailure(.keychainLocked, "the trust settings cannot be read: \(error)")
            }
        }
    }

    /// Delivers an APNs payload as the phone would receive it and reports what is shown.
    ///
    /// `requestIdentifier` is the notification request identifier it arrives under (`nil`: a new one);
    /// `extensionDelay` makes the extension stall that long before it starts work; `mailbox` fetches a mailbox push's
    /// message (`nil`: no mailbox URL is configured); `attachments` fetches
    /// and writes a message's attachments (`nil`: the text alone). Attachment files older than
    /// `AttachmentPipeline.defaultFileLifetime` are removed from its directory first: iOS moves each file
    /// away when it shows it, and on Linux nothing else deletes the decrypted files.
    ///
    /// What is shown is appended to the device's notification store (`NotificationCenterStore`), as iOS keeps
    /// it; `previews` overrides the device's preview policy (reveal v1 §5; `nil`: the setting, `previews()`).
    public func deliver(_ payload: [UInt8], requestIdentifier: String? = nil, options: DeviceSimulator.Options = .init(),
                        extensionDelay: Duration = .zero, logger: Logger = Logger(label: "sealedpush.extension"),
                        attachments: AttachmentPipeline? = nil, receipts: ReceiptCourier? = nil,
                        previews: PreviewPolicy? = nil, mailbox: (any MailboxFetcher)? = nil) async -> DeliveryResult {
        await deliver(payload, requestIdentifier: requestIdentifier, options: options, extensionDelay: extensionDelay, logger: logger,
                      attachments: attachments, receipts: receipts, previews: previews, mailbox: mailbox, keepIf: { _ in true })
    }

    /// `deliver`, keeping what is shown in the notification store only when `keepIf` holds for the result.
    func deliver(_ payload: [UInt8], requestIdentifier: String?, options: DeviceSimulator.Options, extensionDelay: Duration, logger: Logger,
                 attachments: AttachmentPipeline?, receipts: ReceiptCourier?, previews: PreviewPolicy?, mailbox: (any MailboxFetcher)?,
                 keepIf: (DeliveryResult) -> Bool) async -> DeliveryResult {
        attachments?.removeFiles(olderThan: AttachmentPipeline.defaultFileLifetime)
        let policy: PreviewPolicy
        if let previews { policy = previews } else {
            do { policy = try self.previews() } catch {
                // Never fall back to showing more than the user chose: an unreadable setting hands over no text.
                logger.error("the preview setting cannot be read; no text is handed over", metadata: ["error": "\(error.description)"])
                policy = .hidden
            }
        }
        var configured = extensionConfiguration(logger: logger, attachments: attachments, previews: policy, mailbox: mailbox)
        configured.receipts = receipts
        // The app's filtering entitlement (`device push --filtering`): a replay is suppressed, not shown as (Encrypted).
        configured.suppressesReplays = options.filtering
        let configuration = configured
        let made = MadeExtension()
        let simulator = DeviceSimulator(options: options) {
            let ext = SecretMessageExtension(configuration: configuration)
            made.value.withLock { $0 = ext }
            return extensionDelay > .zero ? StalledExtension(ext, delay: extensionDelay) : ext
        }
        let result = await simulator.deliver(payload: payload, identifier: requestIdentifier)
        // Receipts and the pending queue: the outbox flush and the queue's processing after the content was handed
        // over finish before the device reports.
        await made.value.withLock { $0 }?.finishBackgroundWork()
        if keepIf(result) { keep(result, logger: logger) }
        return result
    }

    static let settingsService = "sealedpush.policy"
    static let previewsAccount = "previews"

    /// The device's preview policy (`device config --previews`; default `full`).
    public func previews() throws(KeychainError) -> PreviewPolicy {
        try setting(Self.previewsAccount, default: .full, expected: "full, title or none")
    }

    /// Sets the device's preview policy.
    public func setPreviews(_ policy: PreviewPolicy) throws(KeychainError) {
        try setSetting(Self.previewsAccount, policy.rawValue)
    }

    static let plaintextAccount = "plaintext"

    /// What the simulated device shows for a push without `ENCRYPTED_DATA` (outcome `notEncrypted`).
    public enum PlaintextSetting: String, Sendable, CaseIterable {
        /// Shown as `(Encrypted)`: anyone who can push for the app (a leaked key, a compromised backend) cannot show
        /// their own text (`SealedPushSettings.plaintext` `.refuse`, the iOS default).
        case refuse
        /// Shown as it came (the simulator's default, kept so that existing scripts behave as before).
        case show
    }

    /// The device's plaintext setting (`device config --plaintext`; default `show`).
    public func plaintext() throws(KeychainError) -> PlaintextSetting {
        try setting(Self.plaintextAccount, default: .show, expected: "refuse or show")
    }

    /// Sets the device's plaintext setting.
    public func setPlaintext(_ setting: PlaintextSetting) throws(KeychainError) {
        try setSetting(Self.plaintextAccount, setting.rawValue)
    }

    /// A device setting kept in the store under `sealedpush.policy`, or `fallback` when it was never set; a stored
    /// value that is not one of `Value`'s is a decode error naming what it should be (`expected`).
    func setting<Value: RawRepresentable>(_ account: String, default fallback: Value,
                                                  expected: String) throws(KeychainError) -> Value where Value.RawValue == String {
        let item: KeychainItem
        do {
            item = try store.read(itemClass: .genericPassword, service: Self.settingsService, account: account,
                                  accessGroup: store.accessGroups[0])
        } catch .itemNotFound { return fallback }
        let text = String(decoding: item.data?.unsafeCopyToArray() ?? [], as: UTF8.self)
        guard let value = Value(rawValue: text) else {
            throw .decode(path: "\(Self.settingsService)/\(account)", why: "the \(account) setting is not \(expected)")
        }
        return value
    }

    /// Stores a device setting under `sealedpush.policy` (readable in every lock state, never synced).
    func setSetting(_ account: String, _ raw: String) throws(KeychainError) {
        try store.modify(itemClass: .genericPassword, service: Self.settingsService, account: account,
                         accessGroup: store.accessGroups[0], accessibility: .alwaysThisDeviceOnly) { _ in
            SecureBytes(Array(raw.utf8))
        }
    }

    /// Appends what `result` shows to the notification store (nothing for a rejected or suppressed payload).
    /// A store that cannot be written is logged; the delivery stands.
    private func keep(_ result: DeliveryResult, logger: Logger) {
        guard let shown = result.notification, let requestID = result.requestID else { return }
        let entry = StoredNotification(requestID: requestID, deliveredAt: clock.unixSeconds, title: shown.title, subtitle: shown.subtitle,
                                       body: shown.body, category: shown.categoryIdentifier, thread: shown.threadIdentifier,
                                       userInfo: shown.userInfo, attachments: shown.attachments.map { Self.fileName($0.url) })
        do { try NotificationCenterStore(store: store).append(entry) } catch {
            logger.error("the notification store could not be written", metadata: ["error": "\(error.description)"])
        }
    }

    static func fileName(_ path: String) -> String {
        String(path.split(separator: "/", omittingEmptySubsequences: false).last ?? Substring(path))
    }

    /// Presses and holds the stored notification `requestID` under the device's current lock state (reveal v1
    /// §7, `device expand`): the content extension runs on the notification as the system kept it, with the
    /// reveal and device keys, trust and replay cache of this device, and its view ends (attachments removed)
    /// before this returns. Nothing it shows is written to the notification store. With `receipts` (the device's
    /// courier, `receiptCourier(transport:)`), a revealed message sends its `revealed` receipt, once per message id.
    public func expand(requestID: String, attachments: AttachmentPipeline? = nil, receipts: ReceiptCourier? = nil,
                       logger: Logger = Logger(label: "sealedpush.content-extension")) async throws(ExpandError) -> RevealView {
        let stored: StoredNotification?
        do { stored = try NotificationCenterStore(store: store).entry(requestID: requestID) } catch { throw .storeUnreadable(error) }
        guard let stored else { throw .unknownRequest(requestID) }
        let content = NotificationContent(title: stored.title, subtitle: stored.subtitle, body: stored.body, threadIdentifier: stored.thread,
                                          categoryIdentifier: stored.category, userInfo: stored.userInfo)
        let store = self.store
        var configuration = RevealContentExtension.Configuration(
            revealKeys: RevealKeyring(store: store), deviceKeys: DeviceKeyring(store: store), policy: policy,
            replayGuard: ReplayCache(store: store), protectedDataAvailable: { (try? store.deviceLockState()) == .unlocked },
            logger: logger, attachments: attachments)
        configuration.receipts = receipts
        configuration.clock = clock
        let contentExtension = RevealContentExtension(configuration: configuration)
        let view = await contentExtension.didReceive(DeliveredNotification(
            request: NotificationRequest(identifier: stored.requestID, content: content), deliveredAt: stored.deliveredAt))
        await contentExtension.finishBackgroundWork()
        contentExtension.viewDidDisappear()
        return view
    }
}

/// Why `SimulatedDevice.expand` could not run the content extension.
public enum ExpandError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No notification with this request identifier is in the device's notification store.
    case unknownRequest(String)
    /// The notification store could not be read (edited, cut short, wrong permissions).
    case storeUnreadable(KeychainError)

    /// What happened and what to do.
    public var description: String {
        switch self {
        case let .unknownRequest(id):
            return "no notification with request id '\(id)' is in this device's notification store; list them with `device notifications`"
        case let .storeUnreadable(error): return "the device's notification store cannot be read: \(error.description)"
        }
    }
}

/// The extension a delivery made, kept so the device can wait for its work after the content was shown.
private final class MadeExtension: Sendable {
    let value = Mutex<SecretMessageExtension?>(nil)
}
