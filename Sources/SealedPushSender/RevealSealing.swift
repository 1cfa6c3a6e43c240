import SealedPushWire
import SealedPushCrypto

// Reveal on demand (reveal v1 §2): the two bodies of a reveal message, how its `reveal` envelope is padded, the
// padded length of an ordinary message to a record with a reveal key (revision 2: size does not tell them apart),
// and its size when it does not fit.
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

    /// The length of `body` framed as an inner message (wire v1 §4): header, JSON, and the signature when it is
    /// signed (it names a `sender`). Lengths only: any 16-hex key id and any receipt token serialize alike.
    static func framedLength(_ body: MessageBody) -> Int {
        3 + JSON.serialize(.object(body.jsonObject)).count + (body.sender == nil ? 0 : SigningPublicKey.signatureByteCount)
    }

    /// The `payloadOverhead` the `reveal` envelope is padded against (reveal v1 §2, revision 2): it makes the
    /// largest P the policy may choose the largest whose base64 still lets the outer message fit.
    ///
    /// What "fits" means for the reveal envelope: with its base64 as the outer body's `reveal` value, the outer
    /// message at its smallest padding (P = its inner length + 1) stays within the 4096-byte payload. So the bucket
    /// rule pads the reveal envelope to the smallest of 256, 512, 1024 and 2048 above its inner message that leaves
    /// that much room, else to the largest P that does; the outer message is then padded by the sender's policy,
    /// whose bucket rule falls back in the same way. A reveal message fits exactly when it fits with both envelopes
    /// padded minimally (`revealPayloadSize`), so padding never refuses a message that would otherwise seal.
    /// `outerFrameLength` is the framed length of the outer body with an empty `reveal` value.
    func revealEnvelopeOverhead(outerFrameLength: Int) -> Int {
        let room = largestPaddedLength - 1 - outerFrameLength  // base64 characters the `reveal` value may take
        return WireFormat.maxPayloadBytes - room
    }

    /// `revealEnvelopeOverhead(outerFrameLength:)` for the reveal message of `textBody` (the message's ordinary
    /// body) showing `alert`.
    func revealEnvelopeOverhead(_ textBody: MessageBody, alert: MessageBody.Alert) -> Int {
        revealEnvelopeOverhead(outerFrameLength: Self.framedLength(Self.revealOuterBody(textBody, alert: alert, envelope: "")))
    }

    /// The payload size in bytes a reveal message of `textBody` (the message's ordinary body) showing `alert`
    /// would have with both envelopes at their smallest padding (P = inner length + 1), each sealed box adding its
    /// fixed overhead. A reveal message seals exactly when this is within the limit (whatever the policy, since
    /// the bucket rule falls back to the largest P that fits); it is the size the `revealTooLarge` error names,
    /// as wire v1's `payloadTooLarge` names the smallest envelope.
    func revealPayloadSize(_ textBody: MessageBody, alert: MessageBody.Alert) -> Int {
        let fixed = WireFormat.envelopeHeaderBytes + SealedBox.overhead
        let innerEnvelope = fixed + Self.framedLength(Self.revealInnerBody(textBody, revealKeyID: textBody.kid)) + 1
        let outer = Self.framedLength(Self.revealOuterBody(textBody, alert: alert, envelope: ""))
            + WireFormat.base64Length(ofByteCount: innerEnvelope)
        return payloadOverhead + WireFormat.base64Length(ofByteCount: fixed + outer + 1)
    }

    /// The padded length P the outer envelope of the reveal form of `textBody` would take under the bucket rule:
    /// the same members, the text sealed to the reveal key `revealKeyID`, the default reveal alert
    /// (`RevealFormat.defaultAlert`), the `reveal` envelope padded as `revealEnvelopeOverhead` says. `nil` when
    /// the reveal form does not fit the payload. Lengths only, nothing is sealed.
    func revealFormPaddedLength(_ textBody: MessageBody, revealKeyID: KeyID) -> Int? {
        let innerLength = Self.framedLength(Self.revealInnerBody(textBody, revealKeyID: revealKeyID))
        let outerFrame = Self.framedLength(Self.revealOuterBody(textBody, alert: RevealFormat.defaultAlert, envelope: ""))
        guard let innerPadded = PaddingPolicy.bucket.paddedLength(
            innerLength: innerLength, payloadOverhead: revealEnvelopeOverhead(outerFrameLength: outerFrame)) else { return nil }
        let outerLength = outerFrame
            + WireFormat.base64Length(ofByteCount: WireFormat.envelopeHeaderBytes + SealedBox.overhead + innerPadded)
        return PaddingPolicy.bucket.paddedLength(innerLength: outerLength, payloadOverhead: payloadOverhead)
    }

    /// The padded length P the sender chooses itself for the envelope sealed to the device key, or `nil` to let
    /// the padding policy choose (reveal v1 §2, revision 2).
    ///
    /// An ordinary message to a record with a reveal key, under the `.bucket` policy, takes the P of its reveal
    /// form (`revealFormPaddedLength`), so a message and its reveal form reach Apple at the same size whatever the
    /// text. `nil` (the policy's own rule) for a reveal message, a record without a reveal key, the `.none` policy
    /// (no length hiding, as asked), the `.max` policy (every message already takes the largest P), and a message
    /// whose reveal form would not fit the payload (the ordinary bucket rule: the smallest bucket above it that
    /// fits, else the largest P that fits). `framedLength` is the length of the framed ordinary message.
    func devicePaddedLength(_ message: SecretMessage, _ textBody: MessageBody, framedLength: Int,
                            revealKey: RevealKeyRecord?) -> Int? {
        guard message.reveal == nil, padding == .bucket, let revealKey,
              let paddedLength = revealFormPaddedLength(textBody, revealKeyID: revealKey.keyID),
              paddedLength > framedLength, paddedLength <= largestPaddedLength
        else { return nil }
        return paddedLength
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
