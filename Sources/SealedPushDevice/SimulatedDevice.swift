public import SealedPushKeychain
public import SealedPushReceiver
public import SealedPushWire
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
    public func extensionConfiguration(keys: (any DeviceKeyProvider)? = nil,
                                       logger: Logger = Logger(label: "sealedpush.extension"),
                                       attachments: AttachmentPipeline? = nil) -> SecretMessageExtension.Configuration {
        let trust = TrustStore(store: store)
        return SecretMessageExtension.Configuration(
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
    }

    /// Delivers an APNs payload as the phone would receive it and reports what is shown.
    ///
    /// `requestIdentifier` is the notification request identifier it arrives under (`nil`: a new one);
    /// `extensionDelay` makes the extension stall that long before it starts work; `attachments` fetches
    /// and writes a message's attachments (`nil`: the text alone). Attachment files older than
    /// `AttachmentPipeline.defaultFileLifetime` are removed from its directory first: iOS moves each file
    /// away when it shows it, and on Linux nothing else deletes the decrypted files.
    public func deliver(_ payload: [UInt8], requestIdentifier: String? = nil, options: DeviceSimulator.Options = .init(),
                        extensionDelay: Duration = .zero, logger: Logger = Logger(label: "sealedpush.extension"),
                        attachments: AttachmentPipeline? = nil, receipts: ReceiptCourier? = nil) async -> DeliveryResult {
        attachments?.removeFiles(olderThan: AttachmentPipeline.defaultFileLifetime)
        var configured = extensionConfiguration(logger: logger, attachments: attachments)
        configured.receipts = receipts
        let configuration = configured
        let made = MadeExtension()
        let simulator = DeviceSimulator(options: options) {
            let ext = SecretMessageExtension(configuration: configuration)
            made.value.withLock { $0 = ext }
            return extensionDelay > .zero ? StalledExtension(ext, delay: extensionDelay) : ext
        }
        let result = await simulator.deliver(payload: payload, identifier: requestIdentifier)
        // Receipts: the outbox flush after the content was handed over finishes before the device reports.
        if receipts != nil { await made.value.withLock { $0 }?.finishBackgroundWork() }
        return result
    }
}

/// The extension a delivery made, kept so the device can wait for its work after the content was shown.
private final class MadeExtension: Sendable {
    let value = Mutex<SecretMessageExtension?>(nil)
}
