public import SealedPushCrypto

/// A mailbox handle (mailbox v1 §2): `"1." delivery_id "." token`, the capability a device fetches its sealed
/// message with. Its `description` is the handle itself, so never log one whole: `redacted` is for logs.
public struct MailboxHandle: Sendable, Equatable, CustomStringConvertible {
    /// The gateway's delivery id: 1 to 64 bytes of `[A-Za-z0-9_-]`.
    public let deliveryID: String
    /// The token: base64url without padding of 32 random bytes (43 characters).
    public let token: String

    /// The longest handle text: `"1."`, 64 bytes of id, `"."`, 43 of token.
    public static let maximumLength = 2 + 64 + 1 + 43
    /// The token's length in characters.
    public static let tokenLength = 43
    /// The APNs payload key that carries a handle (mailbox v1 §2).
    public static let apnsKey = "SEALEDPUSH_FETCH"
    /// The FCM data key and Web Push plaintext member that carry a handle (mailbox v1 §2).
    public static let dataKey = "sealedpush_fetch"
    /// The body member naming the delivery an envelope fetched by handle belongs to (mailbox v1 §4).
    public static let bodyMember = "dlv"

    /// A handle from its parts; nil when either is malformed.
    public init?(deliveryID: String, token: String) {
        guard Self.isDeliveryID(deliveryID), Self.isToken(token) else { return nil }
        self.deliveryID = deliveryID
        self.token = token
    }

    /// Parses a handle; nil for anything malformed, truncated or overlong (never a partial handle).
    public init?(_ text: String) {
        let bytes = Array(text.utf8)
        guard bytes.count <= Self.maximumLength, bytes.count >= 2 + 1 + 1 + Self.tokenLength,
              bytes[0] == UInt8(ascii: "1"), bytes[1] == UInt8(ascii: ".") else { return nil }
        let rest = bytes[2...]
        guard let dot = rest.lastIndex(of: UInt8(ascii: ".")) else { return nil }
        let id = String(decoding: rest[rest.startIndex..<dot], as: UTF8.self)
        let token = String(decoding: rest[(dot + 1)...], as: UTF8.self)
        self.init(deliveryID: id, token: token)
    }

    /// A new handle for `deliveryID` with a fresh token of 32 random bytes; nil when the id is malformed.
    public static func make(deliveryID: String) -> MailboxHandle? {
        MailboxHandle(deliveryID: deliveryID, token: Base64.encodeURLSafeNoPadding(CryptoLibrary.randomBytes(count: 32)))
    }

    /// The handle as it travels.
    public var description: String { "1.\(deliveryID).\(token)" }

    /// The handle for logs: the delivery id and the token's first four characters only.
    public var redacted: String { "1.\(deliveryID).\(token.prefix(4))…" }

    /// Whether `id` is a delivery id: 1 to 64 bytes of `[A-Za-z0-9_-]`.
    public static func isDeliveryID(_ id: String) -> Bool {
        let bytes = Array(id.utf8)
        return (1...64).contains(bytes.count) && bytes.allSatisfy(Self.isIDByte)
    }

    /// Whether `token` is 43 characters of base64url that decode to 32 bytes.
    public static func isToken(_ token: String) -> Bool {
        let bytes = Array(token.utf8)
        guard bytes.count == tokenLength, bytes.allSatisfy(Self.isIDByte) else { return false }
        return (try? Base64.decodeURLSafeNoPadding(token))?.count == 32
    }

    static func isIDByte(_ b: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(b) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(b)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b) || b == UInt8(ascii: "_") || b == UInt8(ascii: "-")
    }
}

/// The sealing rules of a message kept at the gateway (mailbox v1 §4): its body gains `dlv`, and its padding
/// grows past wire v1 §3's buckets up to the app's `max_message_bytes`.
public enum MailboxSealing {
    /// The smallest `max_message_bytes` an app may configure.
    public static let minimumMessageBytes = 4096
    /// The largest `max_message_bytes` an app may configure.
    public static let maximumMessageBytes = 65536

    /// The padded length P for an inner message of `innerLength` bytes: the smallest power of two from 256 that
    /// is greater than it, at most `maxMessageBytes`; nil when it does not fit. P is never over the limit, and
    /// padding takes at least one byte, so the largest inner message is `maxMessageBytes - 1` bytes.
    public static func paddedLength(innerLength: Int, maxMessageBytes: Int) -> Int? {
        guard innerLength >= 0, innerLength < maxMessageBytes else { return nil }
        var p = 256
        while p <= innerLength { p <<= 1 }
        return min(p, maxMessageBytes)
    }

    /// The body JSON of `body` with `"dlv": deliveryID` added (the bytes a signature covers).
    public static func bodyBytes(_ body: MessageBody, deliveryID: String) throws(SealError) -> SecureBytes {
        guard body.alert.hasVisibleText else { throw .emptyAlert }
        guard (1...64).contains(body.id.utf8.count) else { throw .invalidMessageID }
        guard body.data?["aps"] == nil else { throw .dataHoldsAPS }
        var object = body.jsonObject
        object[MailboxHandle.bodyMember] = .string(deliveryID)
        let bytes = SecureBytes(JSON.serialize(.object(object)))
        guard bytes.count <= InnerMessage.maxBodyBytes else { throw .bodyTooLarge(size: bytes.count, limit: InnerMessage.maxBodyBytes) }
        return bytes
    }

    /// Pads a framed inner message (`InnerMessage.frame`) by this page's rule and seals it to `recipient`: the
    /// envelope's bytes (wire v1 §2). `MailboxSealError.tooLarge` names the limit when it is over it.
    public static func seal(inner: SecureBytes, to recipient: BoxPublicKey, maxMessageBytes: Int) throws(MailboxSealError) -> [UInt8] {
        guard let padded = paddedLength(innerLength: inner.count, maxMessageBytes: maxMessageBytes) else {
            throw .tooLarge(size: inner.count, limit: maxMessageBytes)
        }
        do {
            let box = try SealedBox.seal(try ISO7816Padding.pad(inner, to: padded), to: recipient)
            return Envelope(keyID: recipient.keyID, sealedBox: box).bytes
        } catch {
            throw .invalidRecipient(error.description)
        }
    }
}

/// Why a mailbox message could not be sealed.
public enum MailboxSealError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The inner message is over the app's `max_message_bytes`.
    case tooLarge(size: Int, limit: Int)
    /// The recipient key could not be sealed to.
    case invalidRecipient(String)

    /// What happened and what to do.
    public var description: String {
        switch self {
        case let .tooLarge(size, limit):
            "the inner message is \(size) bytes, over this app's max_message_bytes of \(limit); shorten the message or raise the limit (at most 65536)"
        case let .invalidRecipient(why):
            "the device key cannot be sealed to: \(why); ask the device to re-register its key record"
        }
    }
}

/// The list's challenge (mailbox v1 §7): 32 random bytes sealed to the device's public key, answered with
/// those bytes in base64url.
public enum MailboxChallenge {
    /// The challenge's byte count.
    public static let byteCount = 32

    /// The answer to a `sealed` challenge (standard base64 of a sealed box) opened with `keyPair`; nil when it does
    /// not open or is not 32 bytes.
    public static func answer(sealed: String, with keyPair: BoxKeyPair) -> String? {
        guard let box = try? Base64.decode(sealed), let opened = try? SealedBox.open(box, with: keyPair),
              opened.count == byteCount else { return nil }
        return opened.withUnsafeBytes { Base64.encodeURLSafeNoPadding($0) }
    }
}
