public import SealedPushCrypto
public import SealedPushWire
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A sealed notification: the exact APNs payload bytes and the request headers to send them with.
public struct SealedNotification: Sendable, Equatable {
    /// The APNs payload, compact UTF-8 JSON, at most 4096 bytes.
    public let payload: [UInt8]
    /// The request headers.
    public let headers: APNsHeaders
    /// The device key the message was sealed to.
    public let keyID: KeyID
    /// The message id inside the sealed body.
    public let messageID: String
    /// The issued-at time sealed into the body (Unix seconds).
    public let issuedAt: Int64
    /// The padded length P of the inner message (all an observer learns about its size).
    public let paddedLength: Int
    /// The sender key that signed the message (the body's `sender`), or `nil` when unsigned.
    public var signedBy: KeyID? = nil
    /// The receipt the message asks for (URL and the token drawn for it), or `nil`. Keep `SHA-256(token)`
    /// with `messageID` to check the receipt (the token is a secret: do not log it).
    public var receipt: ReceiptRequest? = nil
    /// For a reveal message (reveal v1 §2): the reveal key its text was sealed to; `nil` for an ordinary message.
    public var revealKeyID: KeyID? = nil

    /// The payload as a string.
    public var payloadString: String { String(decoding: payload, as: UTF8.self) }

    /// The payload parsed back into its model (for inspection; the hot path never needs this).
    public var payloadModel: APNsPayload? {
        guard case let .object(root)? = try? JSON.parse(payload),
              case let .object(aps)? = root["aps"], case let .object(alert)? = aps["alert"],
              case let .int(mutable)? = aps["mutable-content"], let data = root[WireFormat.encryptedDataKey]?.stringValue
        else { return nil }
        return APNsPayload(aps: .init(alert: .init(title: alert["title"]?.stringValue, body: alert["body"]?.stringValue),
                                      mutableContent: Int(mutable), category: aps["category"]?.stringValue),
                           encryptedData: data)
    }
}

/// The outcome of sealing one message to one device of a fan-out.
public struct DeviceSealResult: Sendable {
    /// The device key this result is for.
    public let keyID: KeyID
    /// The sealed notification, or why this device's copy failed.
    public let result: Result<SealedNotification, SenderError>
}

/// One message for one device: the unit of the batch API (one JSONL line).
public struct SealRequest: Sendable, Equatable {
    /// The message.
    public var message: SecretMessage
    /// The device to seal it to.
    public var device: DeviceKeyRecord

    /// A request from its parts.
    public init(message: SecretMessage, device: DeviceKeyRecord) {
        self.message = message
        self.device = device
    }
}

/// Seals secret messages into APNs payloads (wire format v1): what server code calls.
///
/// ```swift
/// let sender = try NotificationSender()                       // default placeholder, bucket padding
/// let record = try DeviceKeyRecord(jsonBytes: registeredRecordBytes)
/// let sealed = try sender.seal(SecretMessage(title: "Agent K", body: "The eagle lands at noon."), to: record)
/// // POST sealed.payload to APNs with sealed.headers.fields
/// ```
///
/// A sender is immutable and `Sendable`: share one across tasks. The visible part of the payload is
/// serialized once at initialization; each message costs one sealed box (and one signature when signing).
///
/// Signing: `signer` is any `MessageSigner`. A key in this process's memory (a `SigningKeyPair`, such
/// as `SenderKeyring.activeSigningKey()` reads from a sender store) signs on the synchronous path, `seal`; a signer without a local key
/// (a KMS or HSM) signs through `sealAsync`, which awaits its `sign` once per device copy.
public struct NotificationSender: Sendable {
    /// The visible placeholder every payload carries.
    public let placeholder: Placeholder
    /// How the padded length P is chosen. Under `.bucket` (the default) an ordinary message sealed to a record with
    /// a reveal key takes the bucket of its reveal form, and a reveal message's `reveal` envelope is padded too
    /// (reveal v1 §2, revision 2); `.none` and `.max` keep their meaning for both envelopes.
    public let padding: PaddingPolicy
    /// What signs messages, when they are signed (the body's `sender` names its key id).
    public let signer: (any MessageSigner)?
    /// The clock for `iat`, Unix seconds.
    public let clock: @Sendable () -> Int64
    /// Bytes of the payload without the `ENCRYPTED_DATA` value (what `MessageSealer` budgets around).
    public let payloadOverhead: Int

    /// Everything of the payload before the base64 value (including its opening quote).
    private let payloadPrefix: [UInt8]
    /// The signer's in-memory key pair, read once here: the synchronous path signs with it directly.
    private let localSigner: SigningKeyPair?
    /// The signer's key id, derived once (a BLAKE2b hash of the public key) rather than per message.
    private let signerKeyID: KeyID?
    /// Whether the signer has no key in this process (it must be awaited: `sealAsync`).
    private let signsRemotely: Bool

    /// The system clock: whole seconds since the Unix epoch.
    public static let systemClock: @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970.rounded(.down)) }

    /// A sender. Throws `invalidPlaceholder` when the placeholder shows no text or is so large
    /// that no message could fit.
    public init(placeholder: Placeholder = .standard, padding: PaddingPolicy = .bucket, signer: (any MessageSigner)? = nil,
                clock: @escaping @Sendable () -> Int64 = NotificationSender.systemClock) throws(SenderError) {
        guard !(placeholder.title ?? "").isEmpty || !placeholder.body.isEmpty else {
            throw .invalidPlaceholder("has neither a title nor a body, so the system would not run the extension")
        }
        var prefix: [UInt8] = []
        APNsPayload(placeholder: placeholder, encryptedData: "").writePrefix(into: &prefix)
        let overhead = prefix.count + 2  // the closing quote and brace
        guard PaddingPolicy.largestPaddedLength(payloadOverhead: overhead) >= 256 else {
            throw .invalidPlaceholder("takes \(overhead) bytes of the \(WireFormat.maxPayloadBytes)-byte payload, leaving too little room for a message")
        }
        self.placeholder = placeholder
        self.padding = padding
        self.signer = signer
        self.localSigner = signer?.localKeyPair
        self.signerKeyID = signer?.keyID
        self.signsRemotely = signer != nil && localSigner == nil
        self.clock = clock
        self.payloadPrefix = prefix
        self.payloadOverhead = overhead
    }

    /// The largest padded length P any message can get with this placeholder.
    public var largestPaddedLength: Int { PaddingPolicy.largestPaddedLength(payloadOverhead: payloadOverhead) }

    /// Seals `message` to the device of `record`.
    ///
    /// A reveal message (`message.reveal` set) needs the record's reveal key: without one it is refused
    /// (`noRevealKey`), never sealed with its text to the device key.
    ///
    /// Size does not tell a reveal message apart (reveal v1 §2, revision 2): under the `.bucket` policy an ordinary
    /// message to a record with a reveal key is padded to the bucket its reveal form (the default reveal alert, the
    /// same other members) would take, so both reach Apple at the same payload size; when the reveal form would not
    /// fit, the ordinary bucket rule applies.
    public func seal(_ message: SecretMessage, to record: DeviceKeyRecord) throws(SenderError) -> SealedNotification {
        try seal(message, to: record.publicKey, reveal: record.reveal, messageID: message.messageID ?? makeMessageID(), issuedAt: clock())
    }

    /// Seals `message` to a device public key (a reveal message needs the record: `noRevealKey`).
    ///
    /// A bare key names no reveal key, so an ordinary message is padded as for a record without `reveal`: seal to
    /// the record when the device has a reveal key, so that its ordinary and reveal messages take the same size.
    public func seal(_ message: SecretMessage, to device: BoxPublicKey) throws(SenderError) -> SealedNotification {
        try seal(message, to: device, reveal: nil, messageID: message.messageID ?? makeMessageID(), issuedAt: clock())
    }

    /// Seals `message` to the device of `record`, awaiting the signer when it signs remotely (a KMS or
    /// HSM); with no signer or an in-memory one this is `seal(_:to:)`, with no task hop.
    public func sealAsync(_ message: SecretMessage, to record: DeviceKeyRecord) async throws(SenderError) -> SealedNotification {
        guard signsRemotely, let signer else { return try seal(message, to: record) }
        return try await sealRemotelySigned(message, to: record.publicKey, reveal: record.reveal,
                                            messageID: message.messageID ?? makeMessageID(), issuedAt: clock(), signer: signer)
    }

    /// `seal(_:toEach:)` for any signer: one signature per device copy (it covers the recipient key id),
    /// awaited in turn; results are in the order of `records`.
    public func sealAsync(_ message: SecretMessage, toEach records: [DeviceKeyRecord]) async -> [DeviceSealResult] {
        guard signsRemotely, let signer else { return seal(message, toEach: records) }
        let id = message.messageID ?? makeMessageID()
        let now = clock()
        var results: [DeviceSealResult] = []
        results.reserveCapacity(records.count)
        for record in records {
            do {
                let sealed = try await sealRemotelySigned(message, to: record.publicKey, reveal: record.reveal, messageID: id, issuedAt: now,
                                                          signer: signer)
                results.append(DeviceSealResult(keyID: record.keyID, result: .success(sealed)))
            } catch {
                results.append(DeviceSealResult(keyID: record.keyID, result: .failure(error)))
            }
        }
        return results
    }

    /// Seals one message to many devices: each gets its own envelope (same message id and `iat`, a
    /// different sealed box). Results are in the order of `records`; one device's failure does not stop the others.
    public func seal(_ message: SecretMessage, toEach records: [DeviceKeyRecord]) -> [DeviceSealResult] {
        let id = message.messageID ?? makeMessageID()
        let now = clock()
        return records.map { record in
            DeviceSealResult(keyID: record.keyID, result: Result { () throws(SenderError) -> SealedNotification in
                try seal(message, to: record.publicKey, reveal: record.reveal, messageID: id, issuedAt: now)
            })
        }
    }

    /// Seals a batch of independent requests, in order; one request's failure does not stop the others.
    public func seal(batch requests: [SealRequest]) -> [Result<SealedNotification, SenderError>] {
        requests.map { request in Result { () throws(SenderError) -> SealedNotification in try seal(request.message, to: request.device) } }
    }

    /// Checks the parts of `message` that become headers.
    func validateHeaders(_ message: SecretMessage) throws(SenderError) {
        if let collapseID = message.collapseID { try APNsHeaders.validateCollapseID(collapseID) }
        if let topic = message.topic {
            try APNsHeaders.validateTopic(topic)
        }
    }

    /// Seals `message` to `device` (the synchronous path: no signer, or one with a key in this process).
    ///
    /// `revealKey` is the record's reveal key: a reveal message is sealed to it (reveal v1 §2), and an ordinary
    /// message is padded to the bucket of its reveal form (`devicePaddedLength`), so that size does not tell them apart.
    func seal(_ message: SecretMessage, to device: BoxPublicKey, reveal revealKey: RevealKeyRecord?, messageID: String,
              issuedAt: Int64) throws(SenderError) -> SealedNotification {
        if signsRemotely, let signerKeyID { throw .signerIsRemote(keyID: signerKeyID.hex) }
        var (body, exp) = try prepare(message, to: device, messageID: messageID, issuedAt: issuedAt)
        let textBody = body
        if let reveal = message.reveal {
            // Reveal v1 §2: the text, data and attachments sealed to the reveal key, inside a body sealed to the device key.
            guard let revealKey else { throw .noRevealKey(deviceKeyID: device.keyID.hex) }
            let inner = Self.revealInnerBody(body, revealKeyID: revealKey.keyID)
            let innerEnvelope: Envelope
            do {
                innerEnvelope = try MessageSealer.seal(body: inner, to: revealKey.publicKey, signer: localSigner, padding: padding,
                                                       payloadOverhead: revealEnvelopeOverhead(textBody, alert: reveal.alert))
            } catch { throw revealError(error, textBody, message) }
            body = Self.revealOuterBody(body, alert: reveal.alert, envelope: innerEnvelope.base64)
        }
        let envelope: Envelope
        do {
            let framed = InnerMessage.frame(body: try MessageSealer.serialize(body), recipient: device.keyID, signer: localSigner)
            envelope = try sealToDevice(framed, device, paddedLength: devicePaddedLength(message, textBody, framedLength: framed.count,
                                                                                          revealKey: revealKey))
        } catch { throw message.reveal == nil ? Self.senderError(error, message) : revealError(error, textBody, message) }
        var sealed = try assemble(envelope, message, body: body, expiration: exp)
        sealed.revealKeyID = message.reveal == nil ? nil : revealKey?.keyID
        return sealed
    }

    /// The remote-signer path: the body, then the signer's signature over it, then framing and sealing.
    func sealRemotelySigned(_ message: SecretMessage, to device: BoxPublicKey, reveal revealKey: RevealKeyRecord?, messageID: String,
                            issuedAt: Int64, signer: any MessageSigner) async throws(SenderError) -> SealedNotification {
        var (body, exp) = try prepare(message, to: device, messageID: messageID, issuedAt: issuedAt)
        let textBody = body
        if let reveal = message.reveal {
            guard let revealKey else { throw .noRevealKey(deviceKeyID: device.keyID.hex) }
            let inner = Self.revealInnerBody(body, revealKeyID: revealKey.keyID)
            let innerBytes: SecureBytes
            do { innerBytes = try MessageSealer.serialize(inner) } catch { throw revealError(error, textBody, message) }
            let innerSignature = try await Self.remoteSignature(signer, recipient: revealKey.keyID, body: innerBytes)
            let innerEnvelope: Envelope
            do {
                innerEnvelope = try MessageSealer.seal(inner: InnerMessage.frame(body: innerBytes, signature: innerSignature),
                                                       to: revealKey.publicKey, padding: padding,
                                                       payloadOverhead: revealEnvelopeOverhead(textBody, alert: reveal.alert))
            } catch { throw revealError(error, textBody, message) }
            body = Self.revealOuterBody(body, alert: reveal.alert, envelope: innerEnvelope.base64)
        }
        let bodyBytes: SecureBytes
        do { bodyBytes = try MessageSealer.serialize(body) } catch {
            throw message.reveal == nil ? Self.senderError(error, message) : revealError(error, textBody, message)
        }
        let signature = try await Self.remoteSignature(signer, recipient: device.keyID, body: bodyBytes)
        let envelope: Envelope
        do {
            let framed = InnerMessage.frame(body: bodyBytes, signature: signature)
            envelope = try sealToDevice(framed, device, paddedLength: devicePaddedLength(message, textBody, framedLength: framed.count,
                                                                                          revealKey: revealKey))
        } catch { throw message.reveal == nil ? Self.senderError(error, message) : revealError(error, textBody, message) }
        var sealed = try assemble(envelope, message, body: body, expiration: exp)
        sealed.revealKeyID = message.reveal == nil ? nil : revealKey?.keyID
        return sealed
    }

    /// Pads the framed message sealed to the device key to `paddedLength` when given, else by the sender's policy, and seals it.
    func sealToDevice(_ framed: SecureBytes, _ device: BoxPublicKey, paddedLength: Int?) throws(SealError) -> Envelope {
        guard let paddedLength else {
            return try MessageSealer.seal(inner: framed, to: device, padding: padding, payloadOverhead: payloadOverhead)
        }
        let padded: SecureBytes
        let box: [UInt8]
        do {
            padded = try ISO7816Padding.pad(framed, to: paddedLength)
            box = try SealedBox.seal(padded, to: device)
        } catch { throw .invalidRecipient(error.description) }
        return Envelope(keyID: device.keyID, sealedBox: box)
    }

    /// The remote signer's signature over `body` for `recipient`, checked to be an Ed25519 signature's length.
    static func remoteSignature(_ signer: any MessageSigner, recipient: KeyID, body: SecureBytes) async throws(SenderError) -> [UInt8] {
        let signature: [UInt8]
        do { signature = try await signer.sign(InnerMessage.signedBytes(recipient: recipient, body: body)) } catch {
            throw .signingFailed(keyID: signer.keyID.hex, why: String(String(describing: error).prefix(200)))
        }
        guard signature.count == SigningPublicKey.signatureByteCount else {
            throw .signingFailed(keyID: signer.keyID.hex,
                                 why: "it returned \(signature.count) bytes, not a \(SigningPublicKey.signatureByteCount)-byte Ed25519 signature")
        }
        return signature
    }

    /// A sealer refusal in the sender's terms (naming the attachments when they made the payload too large).
    static func senderError(_ error: SealError, _ message: SecretMessage) -> SenderError {
        if case let .payloadTooLarge(size, limit) = error, !message.attachments.isEmpty {
            return .payloadTooLargeWithAttachments(size: size, limit: limit, attachments: message.attachments.count)
        }
        return .sealing(error)
    }

    /// The checked body of `message` for `device`, and its expiry (Unix seconds) if it has one.
    func prepare(_ message: SecretMessage, to device: BoxPublicKey, messageID: String,
                 issuedAt: Int64) throws(SenderError) -> (body: MessageBody, expiration: Int64?) {
        try validateHeaders(message)
        let exp: Int64?
        switch message.expiry ?? Expiry.defaultLifetime {
        case let .after(seconds) where seconds < 0: throw .invalidExpiry("is a negative duration (\(seconds) s)")
        case let .at(t) where t < issuedAt: throw .invalidExpiry("(\(t)) is before the issued-at time \(issuedAt)")
        case let expiry: exp = expiry.resolved(issuedAt: issuedAt)
        }
        let body = MessageBody(
            kid: device.keyID, id: messageID, issuedAt: issuedAt, expiresAt: exp,
            alert: .init(title: message.title, subtitle: message.subtitle, body: message.body),
            threadID: message.threadID, category: message.category, sound: message.sound, badge: message.badge,
            data: message.data, sender: signerKeyID, attachments: message.attachments.isEmpty ? nil : message.attachments,
            receipt: try Self.receiptRequest(message))
        guard message.attachments.count <= AttachmentDescriptor.maximumCount else {
            throw .invalidAttachment("\(message.attachments.count) attachments given; a message carries at most \(AttachmentDescriptor.maximumCount)")
        }
        guard Set(message.attachments.map(\.id)).count == message.attachments.count else {
            throw .invalidAttachment("two attachments have the same id; give each a unique id")
        }
        if let reveal = message.reveal, !reveal.alert.hasVisibleText {
            throw .invalidReveal("has no text, so iOS would not run the service extension")
        }
        return (body, exp)
    }

    /// The payload around a sealed envelope, and what the caller needs to know about it.
    func assemble(_ envelope: Envelope, _ message: SecretMessage, body: MessageBody, expiration exp: Int64?) throws(SenderError) -> SealedNotification {
        let paddedLength = envelope.sealedBox.count - SealedBox.overhead
        let base64 = envelope.base64
        var payload: [UInt8] = []
        payload.reserveCapacity(payloadPrefix.count + base64.utf8.count + 2)
        payload.append(contentsOf: payloadPrefix)
        payload.append(contentsOf: base64.utf8)
        payload.append(contentsOf: APNsPayload.suffix)
        // MessageSealer budgets P so this holds; checked again because an oversized payload is never acceptable.
        guard payload.count <= WireFormat.maxPayloadBytes else {
            throw .sealing(.payloadTooLarge(size: payload.count, limit: WireFormat.maxPayloadBytes))
        }
        var sealed = SealedNotification(
            payload: payload, headers: APNsHeaders(expiration: exp ?? 0, collapseID: message.collapseID, topic: message.topic),
            keyID: envelope.keyID, messageID: body.id, issuedAt: body.issuedAt, paddedLength: paddedLength)
        sealed.receipt = body.receipt
        sealed.signedBy = body.sender
        return sealed
    }

    /// The `receipt` member for `message`: its URL checked, a fresh token (each device's copy gets its own).
    static func receiptRequest(_ message: SecretMessage) throws(SenderError) -> ReceiptRequest? {
        guard let url = message.receiptURL else { return nil }
        if let problem = ReceiptRequest.urlProblem(url) { throw .invalidReceiptURL(problem) }
        return ReceiptRequest(url: url, token: ReceiptRequest.makeToken())
    }
}
