public import SealedPushKeychain
public import SealedPushReceiver
import SealedPushWire

/// The device's outbox in its keychain store is the extension's receipt outbox (receipts v1 §2, §3).
extension ReceiptOutboxStore: ReceiptOutbox {}

extension ReceiptOutboxStore: RevealReceiptTickets {
    /// Keeps `ticket` in the store's `reveal-tickets` item.
    public func keepTicket(_ ticket: RevealReceiptTicket, requestIdentifier: String, now: Int64) throws {
        try keepRevealTicket(url: ticket.request.url, token: ticket.request.token, messageID: ticket.messageID,
                             keepUntil: ticket.keepUntil, requestIdentifier: requestIdentifier, now: now)
    }

    /// Takes the ticket of `requestIdentifier` (and forgets every other one of its message id).
    public func takeTicket(requestIdentifier: String, now: Int64) throws -> RevealReceiptTicket? {
        try takeRevealTicket(requestIdentifier: requestIdentifier, now: now).map {
            RevealReceiptTicket(request: ReceiptRequest(url: $0.url, token: $0.token), messageID: $0.messageID, keepUntil: $0.keepUntil)
        }
    }
}

extension SimulatedDevice {
    /// The extension's receipt courier for this device: its outbox and report URL in the store, `transport`
    /// for the network (`nil`: receipts and reports are queued, as on a device without a connection).
    public func receiptCourier(transport: (any ReceiptTransport)?) -> ReceiptCourier {
        let outbox = ReceiptOutboxStore(store: store)
        var courier = ReceiptCourier(transport: transport, outbox: outbox, reportURL: { try? outbox.reportURL() })
        courier.revealTickets = outbox
        return courier
    }

    /// Sends what waits in the outbox (`sealedpush device flush`), each receipt origin on its own. A flush asked for
    /// by hand tries every origin, backing off or not (`ignoringBackoff`, the default); the flush after a delivery
    /// (`SecretMessageExtension`) skips origins backing off.
    public func flushReceipts(transport: (any ReceiptTransport)?, ignoringBackoff: Bool = true) async -> OutboxFlushSummary {
        await receiptCourier(transport: transport).flush(now: clock.unixSeconds, ignoringBackoff: ignoringBackoff)
    }
}
