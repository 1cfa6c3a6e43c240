public import SealedPushKeychain
public import SealedPushReceiver
import SealedPushWire
public import Logging

extension NotificationStoreReplacer {
    /// Removes the stored notifications whose userInfo holds `SEALEDPUSH_FETCH` equal to `handle` (mailbox v1 §6);
    /// how many it removed (0 when the store cannot be read or written, which is logged).
    public func removeDelivered(holdingHandle handle: String) async -> Int {
        do {
            var removed = 0
            for entry in try notifications.entries() where entry.userInfo[MailboxHandle.apnsKey]?.stringValue == handle {
                if try notifications.remove(requestID: entry.requestID) { removed += 1 }
            }
            return removed
        } catch {
            logger.error("the notification store could not be written", metadata: ["error": "\(error.description)"])
            return 0
        }
    }

    /// The stored notifications whose userInfo still holds `SEALEDPUSH_FETCH` (mailbox v1 §5 "Later"), oldest first.
    public func deliveredHoldingHandles() async -> [NotificationRequest] {
        do {
            return try notifications.entries().filter { $0.userInfo[MailboxHandle.apnsKey] != nil }.map { e in
                NotificationRequest(identifier: e.requestID, content: NotificationContent(
                    title: e.title, subtitle: e.subtitle, body: e.body, threadIdentifier: e.thread, categoryIdentifier: e.category,
                    userInfo: e.userInfo))
            }
        } catch {
            logger.error("the notification store cannot be read", metadata: ["error": "\(error.description)"])
            return []
        }
    }
}

/// What one pass of `SimulatedDevice.processMailbox` did (mailbox v1 §5 "Later" and §7).
public struct MailboxProcessingSummary: Sendable, Equatable {
    /// The notifications that still held a handle, fetched again.
    public var kept = KeptHandlesSummary()
    /// Whether the list was asked for (a mailbox app and device id are configured and the device key reads).
    public var listed = false
    /// Why the list could not be had, when it was asked for and failed.
    public var listFailure: String?
    /// Listed deliveries never shown before, now fetched, opened and shown.
    public var recovered = 0
    /// Listed deliveries already shown (the message id opened before): not shown again.
    public var alreadyShown = 0
    /// Listed deliveries that could not be fetched or opened (left at the gateway, or failed a check).
    public var failed = 0

    /// An empty summary.
    public init() {}
}

extension SimulatedDevice {
    static let mailboxURLAccount = "mailbox-url"
    static let mailboxAppAccount = "mailbox-app"
    static let mailboxDeviceAccount = "mailbox-device"

    /// The device's mailbox URL (`device config --mailbox-url`): the gateway's `public_url`; `nil` when none is set.
    public func mailboxURL() throws(KeychainError) -> String? { try optionalSetting(Self.mailboxURLAccount) }

    /// Sets (or, with `nil`, clears) the device's mailbox URL. The caller checks that it is https (http to loopback).
    public func setMailboxURL(_ url: String?) throws(KeychainError) { try setOptionalSetting(Self.mailboxURLAccount, url) }

    /// The app id and device id the device asks the list for (mailbox v1 §7); `nil` when either is not set.
    public func mailboxIdentity() throws(KeychainError) -> (app: String, deviceID: String)? {
        guard let app = try optionalSetting(Self.mailboxAppAccount), let device = try optionalSetting(Self.mailboxDeviceAccount) else { return nil }
        return (app, device)
    }

    /// Sets the app id and the device id the device is registered under at the gateway (for the list).
    public func setMailboxIdentity(app: String?, deviceID: String?) throws(KeychainError) {
        if let app { try setOptionalSetting(Self.mailboxAppAccount, app) }
        if let deviceID { try setOptionalSetting(Self.mailboxDeviceAccount, deviceID) }
    }

    private func optionalSetting(_ account: String) throws(KeychainError) -> String? {
        let value: OptionalSetting = try setting(account, default: OptionalSetting(rawValue: ""), expected: "text")
        return value.rawValue.isEmpty ? nil : value.rawValue
    }

    private func setOptionalSetting(_ account: String, _ value: String?) throws(KeychainError) {
        try setSetting(account, value ?? "")
    }

    /// The handles that wait on this device: stored notifications that still hold `SEALEDPUSH_FETCH` (fetched on the
    /// next `processMailbox`).
    public func handlesWaiting() throws(KeychainError) -> Int {
        try NotificationCenterStore(store: store).entries().filter { $0.userInfo[MailboxHandle.apnsKey] != nil }.count
    }

    /// The app's launch in mailbox mode (mailbox v1 §5 "Later", `device unlock` and `device fetch`): fetches the
    /// messages whose handles stored notifications still hold and replaces each under its request identifier; then,
    /// when `lister` is given and the device knows its app and device id, asks for the list (§7) and shows each listed
    /// message not shown before, once, under the request identifier `mailbox-<delivery id>` (one shown before, by
    /// its message id in the replay cache, is not shown again). Does nothing before the first unlock.
    public func processMailbox(fetcher: any MailboxFetcher, lister: (any MailboxLister)?, receipts: ReceiptCourier? = nil,
                               attachments: AttachmentPipeline? = nil,
                               logger: Logger = Logger(label: "sealedpush.extension")) async -> MailboxProcessingSummary {
        var summary = MailboxProcessingSummary()
        guard ((try? store.deviceLockState()) ?? .beforeFirstUnlock) != .beforeFirstUnlock else { return summary }
        let policy: PreviewPolicy
        do { policy = try previews() } catch {
            logger.error("the preview setting cannot be read; no text is handed over", metadata: ["error": "\(error.description)"])
            policy = .hidden
        }
        var configuration = extensionConfiguration(logger: logger, attachments: attachments, previews: policy, mailbox: fetcher)
        configuration.receipts = receipts
        let replacer = NotificationStoreReplacer(store: store, logger: logger)
        summary.kept = await SecretMessageExtension(configuration: configuration).processKeptHandles(replacer: replacer)
        guard let lister, let identity = try? mailboxIdentity() else { return summary }
        summary.listed = true
        let keys = DeviceKeyring(store: store)
        let result = await lister.list(app: identity.app, deviceID: identity.deviceID, deadlineSeconds: 10) { sealed in
            Self.answer(sealed, keys: keys)
        }
        let listed: [MailboxListedHandle]
        switch result {
        case let .handles(h): listed = h
        case .wrongAnswer:
            summary.listFailure = "the gateway's challenge does not open with this device's keys (is the device registered under this id?)"
            return summary
        case let .failed(why):
            summary.listFailure = why
            return summary
        }
        // A notification that still holds an older handle of a listed delivery (its fetch failed above) is the same
        // message: it is shown under that notification's request identifier, replacing it, rather than shown twice; when
        // it is not shown now, that notification stays as it was (the next list hands the delivery out again).
        let waiting = await replacer.deliveredHoldingHandles()
        for entry in listed {
            var requestID = "mailbox-" + entry.handle.deliveryID
            if let old = waiting.first(where: {
                $0.content.userInfo[MailboxHandle.apnsKey]?.stringValue.flatMap(MailboxHandle.init)?.deliveryID == entry.handle.deliveryID
            }) {
                requestID = old.identifier
            } else if let shown = try? NotificationCenterStore(store: store).entry(requestID: requestID),
                      shown.userInfo[MailboxHandle.apnsKey] == nil {
                // Shown by an earlier list (its receipt not in yet): under the same request identifier it would open
                // again; once is enough.
                summary.alreadyShown += 1
                continue
            }
            let payload = JSON.serialize(.object(JSONObject([
                ("aps", .object(JSONObject([("alert", .object(JSONObject([("title", .string(RevealFormat.defaultTitle)),
                                                                          ("body", .string(SecretMessageExtension.placeholderText))]))),
                                            ("mutable-content", .int(1))]))),
                (MailboxHandle.apnsKey, .string(entry.handle.description)),
            ])))
            let shown = await deliver(payload, requestIdentifier: requestID, options: .init(), extensionDelay: .zero, logger: logger,
                                      attachments: attachments, receipts: receipts, previews: policy, mailbox: fetcher,
                                      keepIf: { $0.outcome == .decrypted || $0.outcome == .held })
            switch (shown.outcome, shown.reason) {
            case (.decrypted, _), (.held, _): summary.recovered += 1
            case (.fallback, .replayed?): summary.alreadyShown += 1
            default: summary.failed += 1
            }
        }
        return summary
    }

    /// The answer to a list challenge: the sealed bytes opened with the device's active key, else any other key it
    /// still holds (a rotation the gateway has not seen yet).
    static func answer(_ sealed: String, keys: DeviceKeyring) -> String? {
        if let active = try? keys.activeKeyPair(), let answer = MailboxChallenge.answer(sealed: sealed, with: active) { return answer }
        for info in (try? keys.list()) ?? [] {
            if case let .found(pair) = keys.lookUpKey(id: info.keyID), let answer = MailboxChallenge.answer(sealed: sealed, with: pair) {
                return answer
            }
        }
        return nil
    }
}

/// A text setting that may be empty (unset).
private struct OptionalSetting: RawRepresentable {
    let rawValue: String
    init(rawValue: String) { self.rawValue = rawValue }
}
