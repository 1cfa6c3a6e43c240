#if canImport(UserNotifications)
public import UserNotifications
public import SealedPushReceiver
public import SealedPushWire
import SealedPushKeyring
import SealedPushCrypto
import Logging
import Foundation

/// Where an app keeps what SealedPush needs, and the few choices it makes: the whole input of the
/// configurations SealedPush recommends (`SealedPushServiceExtension.standardConfiguration`,
/// `SealedPushRevealViewController.standardConfiguration`, `SealedPushApp`).
///
/// Strict by default: every message must be signed by a sender the app trusts (`signatures`, `.required`: with no
/// trusted sender every message is refused as `signatureRequired`), a push without `ENCRYPTED_DATA` is never shown as
/// it came (`plaintext`, `.refuse`), and replays are refused (`guardsReplays`); each opt-out is explicit.
public struct SealedPushSettings: Sendable {
    /// Whether messages must be signed by a trusted sender.
    public enum SignaturePolicy: Sendable, Equatable {
        /// Every message must be signed by a sender in the trust store (`KeychainTrustStore.trust`); with none trusted,
        /// every message is refused (`signatureRequired`) and the log says so. The default.
        case required
        /// Signatures are verified when present and required only once the app trusts a sender (or the trust store's
        /// setting says so). Costs: until the app trusts a sender, anyone who has the device's public key record (the
        /// server, its database, its backups) can make a message that opens. `reason` documents why in the app's code.
        case notRequired(reason: String)
    }

    /// What a push without `ENCRYPTED_DATA` becomes.
    public enum PlaintextPolicy: Sendable, Equatable {
        /// Not shown as it came: `(Encrypted)` without its text, or nothing with the filtering entitlement (outcome
        /// `notEncrypted`). The default.
        case refuse
        /// Shown as it came. Costs: anyone who can push for the app (a leaked `.p8` key, a compromised backend) shows any
        /// text, signatures or not. `reason` documents why in the app's code.
        case show(reason: String)
    }

    /// The keychain access group the app and its extensions share (`TEAMID.` followed by the group in the
    /// `keychain-access-groups` entitlement): device keys, reveal keys, trusted senders, preview policy.
    public var keychainAccessGroup: String
    /// The app group the app and its extensions share (`com.apple.security.application-groups`): the replay
    /// cache, the pending queue and the receipt outbox, in `SealedPush/` in its container.
    public var appGroup: String
    /// The unified logging subsystem (e.g. the extension's bundle id).
    public var logSubsystem: String
    /// Whether replays are refused (default `true`). `false` costs the "opens once" promise: a push captured on
    /// the way (or in a provider's logs) shows again every time it is replayed until it expires.
    public var guardsReplays = true
    /// Whether the app has the notification filtering entitlement
    /// (`com.apple.developer.usernotifications.filtering`): then a replay is not shown at all, rather than as
    /// `(Encrypted)`. Set it only with the entitlement: without it iOS shows the payload as it arrived.
    public var hasFilteringEntitlement = false
    /// The reveal category (reveal v1 §3), one the content extension lists in `UNNotificationExtensionCategory`.
    public var revealCategory = RevealFormat.defaultCategory
    /// Where failure reports go (receipts v1 §3); `nil` sends none.
    public var reportURL: String? = nil
    /// The gateway's `public_url` for mailbox pushes (mailbox v1 §5): `https`, or `http` to loopback in development.
    /// `nil` (the default), or a URL that is refused (logged): a push with `SEALEDPUSH_FETCH` is `malformedPayload`.
    public var mailboxURL: String? = nil
    /// Which attachment URLs are fetched (`.production`: https to public hosts only).
    public var attachmentPolicy: AttachmentURLPolicy = .production
    /// What the log says when signatures are required and no sender is trusted.
    static let noTrustedSenderAdvice = "no trusted sender: every message is refused (signatureRequired). Trust your server's sender key "
        + "record in the app (KeychainTrustStore.trust), or set SealedPushSettings.signatures = .notRequired(reason:)"

    /// Whether messages must be signed by a trusted sender (default `.required`).
    public var signatures: SignaturePolicy = .required
    /// What a push without `ENCRYPTED_DATA` becomes (default `.refuse`).
    public var plaintext: PlaintextPolicy = .refuse

    /// The receiver policy under `signatures`, read per message from `trust`. Under `.required` with no trusted sender
    /// every message fails `signatureRequired`, logged with what to do.
    func receiverPolicy(_ trust: KeychainTrustStore, logger: Logging.Logger) -> @Sendable () throws(OpenFailure) -> ReceiverPolicy {
        let signatures = self.signatures
        return { () throws(OpenFailure) -> ReceiverPolicy in
            var policy = try trust.receiverPolicy()
            guard signatures == .required else { return policy }
            guard !policy.trustedSenders.isEmpty else {
                logger.error("\(Self.noTrustedSenderAdvice)")
                throw OpenFailure(.signatureRequired, "signatures are required and no sender is trusted")
            }
            policy.requireSignature = true
            return policy
        }
    }

    /// The settings of an app: its keychain access group, app group and logging subsystem.
    public init(keychainAccessGroup: String, appGroup: String, logSubsystem: String) {
        self.keychainAccessGroup = keychainAccessGroup
        self.appGroup = appGroup
        self.logSubsystem = logSubsystem
    }

    /// The logger of `label` under the settings' subsystem.
    func logger(_ label: String) -> Logging.Logger { .unifiedLogging(label: label, subsystem: logSubsystem) }

    /// The replay cache in the app group, or — when the container cannot be had (no App Groups capability) — a
    /// guard that refuses every message, logged: replay protection is never silently off.
    func replayGuard(logger: Logging.Logger) -> (any ReplayGuard)? {
        guard guardsReplays else { return nil }
        do { return try AppGroupReplayCache(appGroup: appGroup, logger: logger) } catch {
            logger.error("the replay cache cannot be opened; every message is refused until the App Groups capability is set",
                         metadata: ["error": "\(error)"])
            return RefuseAllReplayGuard()
        }
    }

    /// The receipt courier over the app group outbox (`nil` when the container cannot be had).
    func courier(transport: (any ReceiptTransport)?, logger: Logging.Logger) -> ReceiptCourier? {
        let outbox: AppGroupReceiptOutbox
        do { outbox = try AppGroupReceiptOutbox(appGroup: appGroup, logger: logger) } catch {
            logger.error("the receipt outbox cannot be opened; no receipt is sent", metadata: ["error": "\(error)"])
            return nil
        }
        let url = reportURL
        var courier = ReceiptCourier(transport: transport, outbox: outbox, reportURL: { url }, logger: logger)
        courier.revealTickets = outbox
        // Several extension instances in one process share the app group outbox: one flush per origin at a time.
        courier.flushGate = .forOutbox(at: outbox.directory.path)
        courier.revealTicketLifetime = AppGroupReceiptOutbox.defaultMaximumAgeSeconds
        return courier
    }

    /// The service extension's configuration without a request's attachments: keys, trust, replays, previews,
    /// the reveal public key, the pending queue and its replacer, receipts.
    public func serviceConfiguration(receiptTransport: (any ReceiptTransport)?) -> SecretMessageExtension.Configuration {
        let logger = logger("sealedpush.extension")
        let trust = KeychainTrustStore(accessGroup: keychainAccessGroup)
        let deviceKeys = KeychainDeviceKeyring(accessGroup: keychainAccessGroup, logger: logger)
        var configuration = SecretMessageExtension.Configuration(
            keys: deviceKeys,
            policy: receiverPolicy(trust, logger: logger),
            replayGuard: replayGuard(logger: logger), logger: logger)
        // Mailbox v1 §5: before the first unlock (the device key's class unavailable) a mailbox push is not fetched and
        // nothing is written: the handle waits in the notification and at the gateway.
        configuration.deviceKeysReadable = { deviceKeys.isReadable() }
        if let mailboxURL {
            do { configuration.mailboxFetcher = try URLSessionMailboxFetcher.shared(mailboxURL: mailboxURL) } catch {
                logger.error("the mailbox URL is refused; mailbox pushes show (Encrypted)", metadata: ["error": "\(error)"])
            }
        }
        configuration.revealCategory = revealCategory
        if case .refuse = plaintext { configuration.plaintext = hasFilteringEntitlement ? .suppress : .placeholder }
        do { configuration.previews = try trust.previews() } catch {
            // Never show more than the user chose: an unreadable setting hands over no text.
            logger.error("the preview setting cannot be read; no text is handed over", metadata: ["error": "\(error)"])
            configuration.previews = .hidden
        }
        let reveal = KeychainRevealKeyring(accessGroup: keychainAccessGroup, logger: logger)
        configuration.revealPublicKey = { try? reveal.activeRevealPublicKey() }
        // Reveal v1 revision 3 §9: pending entries are sealed to the reveal public key, read from the app group (the
        // Keychain does not read before the first unlock), and opened only with the reveal key (while unlocked).
        let revealPublic = try? AppGroupRevealPublicKey(appGroup: appGroup)
        configuration.pendingQueueSealKey = { revealPublic?.read() }
        configuration.pendingQueueRevealKeys = reveal
        do { configuration.pendingQueue = try AppGroupPendingQueue(appGroup: appGroup, logger: logger) } catch {
            logger.error("the pending queue cannot be opened; messages that arrive before the first unlock are lost",
                         metadata: ["error": "\(error)"])
        }
        configuration.notificationReplacer = NotificationCenterReplacer(logger: logger)
        configuration.receipts = courier(transport: receiptTransport, logger: logger)
        configuration.suppressesReplays = hasFilteringEntitlement
        return configuration
    }

    /// The content extension's configuration: reveal and device keys, trust, the shared replay cache, the lock probe
    /// (the reveal key reads only while unlocked), the `revealed` receipt.
    public func revealConfiguration(receiptTransport: (any ReceiptTransport)?) -> RevealContentExtension.Configuration {
        let logger = logger("sealedpush.content-extension")
        let trust = KeychainTrustStore(accessGroup: keychainAccessGroup)
        let reveal = KeychainRevealKeyring(accessGroup: keychainAccessGroup, logger: logger)
        var configuration = RevealContentExtension.Configuration(
            revealKeys: reveal, deviceKeys: KeychainDeviceKeyring(accessGroup: keychainAccessGroup, logger: logger),
            policy: receiverPolicy(trust, logger: logger),
            replayGuard: replayGuard(logger: logger), protectedDataAvailable: { reveal.isReadable() }, logger: logger)
        configuration.receipts = courier(transport: receiptTransport, logger: logger)
        return configuration
    }
}

/// The replay guard of an extension that cannot open its replay cache: every message is refused as `replayed`
/// (fail closed) until the App Groups capability is fixed.
struct RefuseAllReplayGuard: ReplayGuard {
    func recordIfNew(messageID: String, requestIdentifier: String?, keyID: KeyID, expiresAt: Int64, now: Int64) -> Bool { false }
}

extension SealedPushServiceExtension {
    /// The configuration SealedPush recommends for `request`: `settings.serviceConfiguration` plus the request's
    /// attachments fetched through `fetcher` (`nil`: text only). Call it from `configuration(for:)`.
    nonisolated public func standardConfiguration(for request: UNNotificationRequest, settings: SealedPushSettings,
                                                  fetcher: (any AttachmentFetcher)?,
                                                  receiptTransport: (any ReceiptTransport)?) -> SecretMessageExtension.Configuration {
        var configuration = settings.serviceConfiguration(receiptTransport: receiptTransport)
        if let fetcher { configuration.attachments = attachmentPipeline(for: request, fetcher: fetcher, policy: settings.attachmentPolicy) }
        return configuration
    }
}

/// What the app does for SealedPush when it launches (and, if it likes, when it comes to the foreground).
public enum SealedPushApp {
    /// What `didLaunch` did.
    public struct LaunchSummary: Sendable, Equatable {
        /// The pending queue's processing (reveal v1 §9).
        public var pending: PendingQueueSummary
        /// The receipt outbox's flush.
        public var receipts: OutboxFlushSummary
        /// The handles kept in delivered notifications, fetched and replaced (mailbox v1 §5 "Later"; only with a
        /// `mailboxURL`).
        public var mailbox = KeptHandlesSummary()
    }

    /// Opens the messages that waited for the first unlock (replacing their notifications in Notification Center),
    /// fetches the mailbox messages whose handles delivered notifications still hold (with a `mailboxURL`), and sends
    /// what waits in the receipt outbox. Call it once the app runs with the phone unlocked (e.g. from
    /// `application(_:didFinishLaunchingWithOptions:)` in a `Task`), and from a `BGTaskScheduler` task to flush
    /// receipts later; wrap it in `ProcessInfo.performExpiringActivity(withReason:using:)`.
    public static func didLaunch(settings: SealedPushSettings, receiptTransport: (any ReceiptTransport)?) async -> LaunchSummary {
        var configuration = settings.serviceConfiguration(receiptTransport: receiptTransport)
        configuration.processesPendingQueueAfterDelivery = false
        // The extension seals pending entries to this copy of the reveal public key (reveal v1 revision 3 §9).
        if let key = try? KeychainRevealKeyring(accessGroup: settings.keychainAccessGroup, logger: configuration.logger).activeRevealPublicKey() {
            do { try AppGroupRevealPublicKey(appGroup: settings.appGroup).write(key) } catch {
                configuration.logger.error("the reveal public key could not be copied to the app group; pending messages stay sealed to the device key only",
                                           metadata: ["error": "\(error)"])
            }
        }
        let receiver = SecretMessageExtension(configuration: configuration)
        let pending = await receiver.processPendingQueue(replacer: NotificationCenterReplacer(logger: configuration.logger))
        // Mailbox v1 §5 "Later": what the extension could not fetch (before the first unlock, a failed fetch).
        let mailbox = configuration.mailboxFetcher == nil ? KeptHandlesSummary()
            : await receiver.processKeptHandles(replacer: NotificationCenterReplacer(logger: configuration.logger))
        let receipts = await configuration.receipts?.flush(now: configuration.clock.unixSeconds) ?? OutboxFlushSummary()
        var summary = LaunchSummary(pending: pending, receipts: receipts)
        summary.mailbox = mailbox
        return summary
    }
}
#endif
