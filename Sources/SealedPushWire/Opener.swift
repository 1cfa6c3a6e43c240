public import SealedPushCrypto

/// What looking up a device key by id can find.
public enum KeyLookup: Sendable {
    /// A usable key (active, or retired and within its grace).
    case found(BoxKeyPair)
    /// No usable key has this id.
    case unknown
    /// A key with this id exists but cannot be read in the device's current lock state.
    case locked
    /// The key store could not be asked: an error other than the lock state (on iOS a missing
    /// keychain entitlement or access group, or any other Keychain error). Whether a key with this id
    /// exists is not known, so the opener does not call it `unknownKey` (which tells a sender the
    /// device's key record is stale); it refuses the message as `keychainLocked`, the reason for a key
    /// the device could not read.
    case unavailable
}

/// Where the receiver finds device private keys by key id.
///
/// The file-backed keychain store implements it on Linux; an iOS build can put the real Keychain
/// (an access group shared by the app and its extension) behind the same protocol.
public protocol DeviceKeyProvider: Sendable {
    /// The usable key pair whose public key has id `keyID`.
    func lookUpKey(id keyID: KeyID) -> KeyLookup
}

/// Remembers accepted message ids so the same message is not shown twice.
///
/// The rule (`device-outcomes.md`, "Replays"): an id accepted before is a replay, except when it
/// arrives again under the same notification request identifier (on iOS the push's
/// `apns-collapse-id`, else its `apns-id`) — then it is the same notification replacing itself.
public protocol ReplayGuard: Sendable {
    /// Records `messageID`, which arrived under `requestIdentifier` (`nil`: unknown), as accepted
    /// until `expiresAt` (Unix seconds); returns `false` if it was already accepted, has not expired
    /// and was accepted under another (or an unknown) request identifier (a replay).
    func recordIfNew(messageID: String, requestIdentifier: String?, keyID: KeyID, expiresAt: Int64, now: Int64) -> Bool
}

extension ReplayGuard {
    /// Records `messageID` with no request identifier: any second arrival is a replay.
    public func recordIfNew(messageID: String, keyID: KeyID, expiresAt: Int64, now: Int64) -> Bool {
        recordIfNew(messageID: messageID, requestIdentifier: nil, keyID: keyID, expiresAt: expiresAt, now: now)
    }
}

/// The receiver's policy: trusted sender keys, whether signatures are required, allowed clock skew.
public struct ReceiverPolicy: Sendable, Equatable {
    /// Sender signing keys whose signatures are accepted, by sender key id.
    public var trustedSenders: [KeyID: SigningPublicKey]
    /// Whether unsigned messages are refused (`signatureRequired`).
    public var requireSignature: Bool
    /// Allowed clock difference for `iat` and `exp`, seconds.
    public var clockSkewSeconds: Int64
    /// How long an id stays in the replay cache after `iat` (or until `exp`, when that is sooner),
    /// seconds. A message issued longer ago than this cannot be checked and is refused as `replayed`.
    public var replayWindowSeconds: Int64

    /// Default replay window for messages without `exp`: 30 days.
    public static let defaultReplayWindowSeconds: Int64 = 30 * 24 * 3600

    /// A policy; by default nothing trusted, signatures optional, 300 s skew.
    public init(trustedSenders: [SigningPublicKey] = [], requireSignature: Bool = false,
                clockSkewSeconds: Int64 = WireFormat.defaultClockSkewSeconds,
                replayWindowSeconds: Int64 = ReceiverPolicy.defaultReplayWindowSeconds) {
        self.trustedSenders = Dictionary(trustedSenders.map { ($0.keyID, $0) }, uniquingKeysWith: { a, _ in a })
        self.requireSignature = requireSignature
        self.clockSkewSeconds = clockSkewSeconds
        self.replayWindowSeconds = replayWindowSeconds
    }
}

/// A message that opened and passed every check.
public struct OpenedMessage: Sendable {
    /// The validated body.
    public let body: MessageBody
    /// The body exactly as parsed, unknown members included.
    public let rawBody: JSONObject
    /// The device key that opened it.
    public let keyID: KeyID
    /// The sender key that signed it, if it was signed.
    public let signedBy: KeyID?
    /// The padded length P (what an observer learns about its size).
    public let paddedLength: Int
    /// The inner message exactly as it was opened and checked (wire v1 §4: flags, length, body and signature, without
    /// padding): what a device seals again to its own reveal key (reveal v1 §5.1).
    public let innerMessage: SecureBytes
}

/// What the inner message's `kid` must name (wire v1 §5 step 6), and the key id a signature is bound to.
public enum RecipientRule: Sendable {
    /// Wire v1: `kid` is the envelope's key id, and the signature is bound to it.
    case envelope
    /// Reveal v1 §5.1, a message the device sealed again to its own reveal key (`SEALEDPUSH_LOCAL`): `kid` names a
    /// device key of this device found through `deviceKeys` (active, or retired within its grace), never the
    /// envelope's (reveal) key, and the signature is verified as the sender made it, bound to that device key id.
    case resealed(deviceKeys: any DeviceKeyProvider)
}

/// Runs the receiver's ordered checks of wire format §5 on the value of `ENCRYPTED_DATA`.
public struct MessageOpener: Sendable {
    /// Where device keys come from.
    public let keys: any DeviceKeyProvider
    /// Trust, signature and skew policy.
    public let policy: ReceiverPolicy
    /// The replay cache, or `nil` to skip step 9.
    public let replayGuard: (any ReplayGuard)?
    /// What the inner `kid` must name (step 6): the envelope's key (wire v1), or a device key (reveal v1 §5.1).
    public let recipientRule: RecipientRule

    /// An opener over a key provider, a policy, an optional replay cache and the recipient rule (wire v1 by default).
    public init(keys: any DeviceKeyProvider, policy: ReceiverPolicy = ReceiverPolicy(), replayGuard: (any ReplayGuard)? = nil,
                recipientRule: RecipientRule = .envelope) {
        self.keys = keys
        self.policy = policy
        self.replayGuard = replayGuard
        self.recipientRule = recipientRule
    }

    /// Opens an `ENCRYPTED_DATA` value at time `now` (Unix seconds); throws the first failing check.
    ///
    /// `requestIdentifier` is the notification request's identifier (`nil`: unknown): a message
    /// opened before opens again only under the same one (`device-outcomes.md`, "Replays").
    public func open(encryptedData: String, requestIdentifier: String? = nil, now: Int64) throws(OpenFailure) -> OpenedMessage {
        // 1. payload and envelope shape
        let envelope = try Envelope(base64: encryptedData)
        // 2. key lookup (and 10: a key that exists but is locked)
        let keyPair: BoxKeyPair
        switch keys.lookUpKey(id: envelope.keyID) {
        case let .found(pair): keyPair = pair
        case .unknown: throw OpenFailure(.unknownKey, "no usable device key has the envelope's key id")
        case .locked: throw OpenFailure(.keychainLocked, "the device key cannot be read while the device is locked")
        case .unavailable: throw OpenFailure(.keychainLocked, "the key store could not be read (not the lock state: e.g. a missing keychain entitlement)")
        }
        // 3. open
        let padded: SecureBytes
        do { padded = try SealedBox.open(bytes: envelope.sealedBox, with: keyPair) } catch {
            throw OpenFailure(.decryptionFailed, "the sealed box does not open with this device key")
        }
        // 4. unpad
        let innerLength: Int
        do { innerLength = try ISO7816Padding.unpaddedLength(of: padded) } catch {
            throw OpenFailure(.badPadding, "the plaintext does not end in 0x80 followed by zero bytes")
        }
        // 5. framing, JSON, members
        let parts = try InnerMessage.split(padded, length: innerLength)
        let raw: JSONValue
        do { raw = try parts.body.withSpan { span throws(JSONError) in try JSON.parse(span) } } catch {
            throw OpenFailure(.malformedMessage, "the body is not valid UTF-8 JSON (\(error.reason))")
        }
        guard case let .object(rawBody) = raw else { throw OpenFailure(.malformedMessage, "the body is not a JSON object") }
        let body = try MessageBody(validating: rawBody)
        if parts.signature != nil, body.sender == nil {
            throw OpenFailure(.malformedMessage, "a signed message must name its 'sender'")
        }
        // 6. recipient
        let recipient: KeyID
        switch recipientRule {
        case .envelope:
            guard body.kid == envelope.keyID else {
                throw OpenFailure(.recipientMismatch, "the message was addressed to another device key")
            }
            recipient = envelope.keyID
        case let .resealed(deviceKeys):
            guard body.kid != envelope.keyID else {
                throw OpenFailure(.recipientMismatch, "a message sealed again on the device must name a device key, not the reveal key")
            }
            switch deviceKeys.lookUpKey(id: body.kid) {
            case .found: recipient = body.kid
            case .unknown: throw OpenFailure(.recipientMismatch, "the message sealed again on the device names no device key of this device")
            case .locked, .unavailable: throw OpenFailure(.keychainLocked, "the device keys cannot be read to check the message's recipient")
            }
        }
        // 7. signature and policy
        var signedBy: KeyID?
        if let signature = parts.signature, let sender = body.sender {
            guard let senderKey = policy.trustedSenders[sender] else {
                throw OpenFailure(.untrustedSender, "sender key \(sender.hex) is not trusted on this device")
            }
            let signed = InnerMessage.signedBytes(recipient: recipient, body: parts.body)
            guard senderKey.isValidSignature(signature, for: signed) else {
                throw OpenFailure(.badSignature, "the signature of sender key \(sender.hex) does not verify")
            }
            signedBy = sender
        } else if policy.requireSignature {
            throw OpenFailure(.signatureRequired, "this device requires signed messages and the message is unsigned")
        }
        // 8. time
        let skew = policy.clockSkewSeconds
        if let exp = body.expiresAt, now > exp.addingClamped(skew) {
            throw OpenFailure(.expired, "the message expired at \(exp) (now \(now), skew \(skew) s)")
        }
        if body.issuedAt > now.addingClamped(skew) {
            throw OpenFailure(.notYetValid, "the message is issued at \(body.issuedAt), after now \(now) + skew \(skew) s")
        }
        // 9. replay
        if let replayGuard {
            // An entry lives until `iat` plus the replay window (or `exp`, when sooner), plus the skew,
            // so a flood of far-future `exp` messages cannot settle in the cache; a message issued
            // longer ago than the window could be a replay the cache has let go, and is refused.
            let windowEnd = body.issuedAt.addingClamped(policy.replayWindowSeconds).addingClamped(skew)
            guard now <= windowEnd else {
                throw OpenFailure(.replayed, "the message was issued more than the replay window (\(policy.replayWindowSeconds) s) ago, so it cannot be told apart from a replay")
            }
            let keepUntil = min(body.expiresAt?.addingClamped(skew) ?? .max, windowEnd)
            guard replayGuard.recordIfNew(messageID: body.id, requestIdentifier: requestIdentifier, keyID: envelope.keyID,
                                          expiresAt: keepUntil, now: now) else {
                throw OpenFailure(.replayed, "a message with this id was already delivered under another notification")
            }
        }
        return OpenedMessage(body: body, rawBody: rawBody, keyID: envelope.keyID, signedBy: signedBy, paddedLength: padded.count,
                             innerMessage: padded.slice(0..<innerLength))
    }
}

extension Int64 {
    /// Addition that saturates instead of trapping (timestamps from hostile input may be extreme).
    func addingClamped(_ other: Int64) -> Int64 {
        let (sum, overflow) = addingReportingOverflow(other)
        if overflow { return other > 0 ? .max : .min }
        return sum
    }
}
