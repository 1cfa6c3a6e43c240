public import SealedPushKeychain
public import SealedPushReceiver
import SealedPushWire
public import Logging

/// The device's `pending.json` is the extension's pending queue (reveal v1 §9).
extension FilePendingQueue: PendingQueue {}

/// Replaces notifications in the simulated device's notification store, as iOS replaces a delivered notification
/// added again under its request identifier (reveal v1 §9). The entry keeps its delivery date: the content
/// extension judges expiry at it.
public struct NotificationStoreReplacer: DeliveredNotificationReplacer {
    /// The device's notification store.
    public let notifications: NotificationCenterStore
    /// Where a store that cannot be written is logged.
    public var logger: Logger

    /// A replacer over `store`'s notification store.
    public init(store: KeychainStore, logger: Logger = Logger(label: "sealedpush.extension")) {
        notifications = NotificationCenterStore(store: store)
        self.logger = logger
    }

    /// Replaces the stored notification `request.identifier`; `false` when it is not in the store.
    public func replaceDelivered(_ request: NotificationRequest) async -> Bool {
        do {
            guard let old = try notifications.entry(requestID: request.identifier) else { return false }
            let c = request.content
            return try notifications.replace(StoredNotification(
                requestID: request.identifier, deliveredAt: old.deliveredAt, title: c.title, subtitle: c.subtitle, body: c.body,
                category: c.categoryIdentifier, thread: c.threadIdentifier, userInfo: c.userInfo,
                attachments: c.attachments.map { SimulatedDevice.fileName($0.url) }))
        } catch {
            logger.error("the notification store could not be written", metadata: ["error": "\(error.description)"])
            return false
        }
    }
}

extension SimulatedDevice {
    /// The device's pending queue (`pending.json` in its store).
    public var pendingQueue: FilePendingQueue { FilePendingQueue(store: store) }

    /// Opens what waits in the pending queue, as the app does on launch (`sealedpush device unlock`): each entry
    /// that opens replaces its notification in the store under the current preview policy, one that fails a check
    /// is removed. Does nothing while the device key cannot be read.
    public func processPendingQueue(receipts: ReceiptCourier? = nil, attachments: AttachmentPipeline? = nil,
                                    logger: Logger = Logger(label: "sealedpush.extension")) async -> PendingQueueSummary {
        let policy: PreviewPolicy
        do { policy = try previews() } catch {
            logger.error("the preview setting cannot be read; no text is handed over", metadata: ["error": "\(error.description)"])
            policy = .hidden
        }
        var configuration = extensionConfiguration(logger: logger, attachments: attachments, previews: policy)
        configuration.receipts = receipts
        return await SecretMessageExtension(configuration: configuration)
            .processPendingQueue(replacer: NotificationStoreReplacer(store: store, logger: logger))
    }
}
