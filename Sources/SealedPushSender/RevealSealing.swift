import SealedPushWire
import SealedPushCrypto

// Reveal on demand (reveal v1 §2): the two bodies of a reveal message, and its size when it does not fit.
extension NotificationSender {
    /// The body sealed to the reveal key: `kid` (the reveal key id), `id`, `iat`, `exp` and `alert` (the
    /// text), plus `attachments` and `data` when the message has them, and `sender` when it is signed
    /// (wire v1 requires a signed body to name its sender).
    static func revealInnerBody(_ body: MessageBody, revealKeyID: KeyID) -> MessageBody {
        MessageBody(kid: revealKeyID, id: body.id, issuedAt: body.issuedAt, expiresAt: body.expiresAt, alert: body.alert,
                    data: body.data, sender: body.sender, attachments: body.attachments)
    }

    /// The body sealed to the device key: the placeholder `alert`, `thread-id`, `category`, `sound`, `badge`,
    /// `sender` and `receipt` of the message, and in `reveal` the base64 envelope sealed to the reveal key.
    /// Never the text, `data` or `attachments`.
    static func revealOuterBody(_ body: MessageBody, alert: MessageBody.Alert, envelope: String) -> MessageBody {
        MessageBody(kid: body.kid, id: body.id, issuedAt: body.issuedAt, expiresAt: body.expiresAt, alert: alert, threadID: body.threadID,
                    category: body.category, sound: body.sound, badge: body.badge, sender: body.sender, receipt: body.receipt,
                    reveal: envelope)
    }

    /// The payload size in bytes a reveal message of `textBody` (the message's ordinary body) showing
    /// `alert` would have with the smallest padding. Lengths only: any 16-hex key id serializes alike,
    /// the reveal envelope is padded to its inner length + 1 and each sealed box adds its fixed overhead.
    func revealPayloadSize(_ textBody: MessageBody, alert: MessageBody.Alert) -> Int {
        let signature = textBody.sender == nil ? 0 : SigningPublicKey.signatureByteCount
        let fixed = WireFormat.envelopeHeaderBytes + SealedBox.overhead
        let inner = Self.revealInnerBody(textBody, revealKeyID: textBody.kid)
        let innerEnvelope = fixed + 3 + JSON.serialize(.object(inner.jsonObject)).count + signature + 1
        let outer = Self.revealOuterBody(textBody, alert: alert,
                                         envelope: String(repeating: "A", count: WireFormat.base64Length(ofByteCount: innerEnvelope)))
        let outerEnvelope = fixed + 3 + JSON.serialize(.object(outer.jsonObject)).count + signature + 1
        return payloadOverhead + WireFormat.base64Length(ofByteCount: outerEnvelope)
    }

    /// The most bytes of text (title, subtitle and body together, plain ASCII) a reveal message with the
    /// other members of `textBody` can carry within the payload limit; 0 when even one byte does not fit.
    public func largestRevealText(_ message: SecretMessage) -> Int {
        var body = MessageBody(kid: KeyID(publicKey: [UInt8](repeating: 0, count: 32)), id: message.messageID ?? makeMessageID(),
                               issuedAt: clock(), alert: .init(body: "a"), threadID: message.threadID, category: message.category,
                               sound: message.sound, badge: message.badge, data: message.data, sender: signer?.keyID,
                               attachments: message.attachments.isEmpty ? nil : message.attachments,
                               receipt: message.receiptURL.map { ReceiptRequest(url: $0, token: ReceiptRequest.makeToken()) })
        body.expiresAt = (message.expiry ?? Expiry.defaultLifetime).resolved(issuedAt: body.issuedAt)
        return largestRevealText(body, alert: (message.reveal ?? .standard).alert)
    }

    func largestRevealText(_ textBody: MessageBody, alert: MessageBody.Alert) -> Int {
        var probe = textBody
        func fits(_ n: Int) -> Bool {
            probe.alert = MessageBody.Alert(body: String(repeating: "a", count: n))
            return revealPayloadSize(probe, alert: alert) <= WireFormat.maxPayloadBytes
        }
        guard fits(1) else { return 0 }
        var (low, high) = (1, WireFormat.maxPayloadBytes)  // fits(low) holds
        while low < high {
            let mid = (low + high + 1) / 2
            if fits(mid) { low = mid } else { high = mid - 1 }
        }
        return low
    }

    /// A sealing refusal of a reveal message in the sender's terms: too large says how much text fits.
    func revealError(_ error: SealError, _ textBody: MessageBody, _ message: SecretMessage) -> SenderError {
        switch error {
        case .payloadTooLarge, .bodyTooLarge:
            let revealAlert = (message.reveal ?? .standard).alert
            return .revealTooLarge(size: revealPayloadSize(textBody, alert: revealAlert), limit: WireFormat.maxPayloadBytes,
                                   largestText: largestRevealText(textBody, alert: revealAlert))
        default:
            return .sealing(error)
        }
    }
}
