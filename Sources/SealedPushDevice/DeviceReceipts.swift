public import SealedPushKeychain
public import SealedPushReceiver

/// The device's outbox in its keychain store is the extension's receipt outbox (receipts v1 §2, §3).
extension ReceiptOutboxStore: ReceiptOutbox {}

extension SimulatedDevice {
    /// The extension's receipt courier for this device: its outbox and report URL in the store, `transport`
    /// for the network (`nil`: receipts and reports are queued, as on a device without a connection).
    public func receiptCourier(transport: (any ReceiptTransport)?) -> ReceiptCourier {
        let outbox = ReceiptOutboxStore(store: store)
        return ReceiptCourier(transport: transport, outbox: outbox, reportURL: { try? outbox.reportURL() })
    }

    /// Sends what waits in the outbox (`sealedpush device flush`), each receipt origin on its own. A flush asked for
    /// by hand tries every origin, backing off or not (`ignoringBackoff`, the default); the flush after a delivery
    /// (`SecretMessageExtension`) skips origins backing off.
    public func flushReceipts(transport: (any ReceiptTransport)?, ignoringBackoff: Bool = true) async -> OutboxFlushSummary {
        await receiptCourier(transport: transport).flush(now: clock.unixSeconds, ignoringBackoff: ignoringBackoff)
    }
}
