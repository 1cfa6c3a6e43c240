public import Crypto
import SealedPushCrypto
import SealedPushWire
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The sizes of a Web Push body as SealedPush writes it (RFC 8188 `aes128gcm`, RFC 8291 §4).
public enum WebPushBody {
    /// The record size SealedPush writes (`rs`).
    public static let recordSize: UInt32 = 4096
    /// The largest body push services must accept (RFC 8030 §7.2), and the budget the sealer checks.
    public static let maximumSize = 4096
    /// Salt (16), `rs` (4), `idlen` (1) and the 65-byte `keyid`.
    public static let headerSize = 86
    /// The padding delimiter and the AES-GCM tag in the one record.
    public static let recordOverhead = 1 + 16
    /// The longest plaintext that fits the budget: 4096 − 86 − 17 = 3993 bytes.
    public static let maximumPlaintextSize = maximumSize - headerSize - recordOverhead
    /// The salt's length.
    public static let saltLength = 16

    /// The body's size for a plaintext of `plaintextCount` bytes.
    public static func size(plaintextCount: Int) -> Int { headerSize + plaintextCount + recordOverhead }

    /// The plaintext SealedPush encrypts for a `webpush` device (platforms v1 §3): the UTF-8 JSON
    /// `{"ENCRYPTED_DATA": "<the wire v1 envelope, standard base64>", "sealedpush": 1}`.
    public static func plaintext(encryptedData: String) -> [UInt8] {
        JSON.serialize(.object(JSONObject([("ENCRYPTED_DATA", .string(encryptedData)), ("sealedpush", .int(1))])))
    }
}

/// The header of an `aes128gcm` body (RFC 8188 §2.1): salt, record size and key id.
public struct WebPushContentHeader: Sendable, Equatable {
    /// The 16-byte salt.
    public let salt: [UInt8]
    /// The record size `rs`.
    public let recordSize: UInt32
    /// The sender's public key (the `keyid`, 65 bytes).
    public let senderPublicKey: P256.KeyAgreement.PublicKey

    /// Reads and checks the header at the start of `body`: at least 21 bytes, `rs` ≥ 18, `idlen` 65, a `keyid` that
    /// is an uncompressed P-256 point. Returns the header and its length (86).
    public static func parse(_ body: [UInt8]) throws(WebPushError) -> (header: WebPushContentHeader, length: Int) {
        guard body.count >= 21 else { throw .undecryptable(.truncatedHeader(length: body.count, needed: 21)) }
        let rs = body[16..<20].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        guard rs >= 18 else { throw .undecryptable(.recordSizeTooSmall(rs: rs)) }
        let idlen = Int(body[20])
        guard idlen == WebPushSubscriptionKeys.pointLength else { throw .undecryptable(.keyIDLength(length: idlen)) }
        let length = 21 + idlen
        guard body.count >= length else { throw .undecryptable(.truncatedHeader(length: body.count, needed: length)) }
        let keyID = Array(body[21..<length])
        guard keyID[0] == 0x04, let key = try? P256.KeyAgreement.PublicKey(x963Representation: keyID) else {
            throw .undecryptable(.invalidSenderKey)
        }
        return (WebPushContentHeader(salt: Array(body[0..<16]), recordSize: rs, senderPublicKey: key), length)
    }

    /// Headers are equal when their salt, record size and key id are.
    public static func == (lhs: WebPushContentHeader, rhs: WebPushContentHeader) -> Bool {
        lhs.salt == rhs.salt && lhs.recordSize == rhs.recordSize
            && lhs.senderPublicKey.x963Representation == rhs.senderPublicKey.x963Representation
    }

    /// The header's bytes: salt, `rs` (big-endian), `idlen` 65, the sender's uncompressed public key.
    public var bytes: [UInt8] {
        salt + [UInt8(recordSize >> 24 & 0xFF), UInt8(recordSize >> 16 & 0xFF), UInt8(recordSize >> 8 & 0xFF), UInt8(recordSize & 0xFF)]
            + [UInt8(WebPushSubscriptionKeys.pointLength)] + Array(senderPublicKey.x963Representation)
    }
}

/// The application server's side of RFC 8291: encrypts a push message to a subscription's keys.
///
/// Each call uses a fresh P-256 key pair and a fresh 16-byte salt (tests inject both), writes one record
/// (`rs` 4096): the plaintext, the delimiter `0x02`, no further padding (a sealed envelope is padded already).
public struct WebPushEncryptor: Sendable {
    /// The subscription the body is for.
    public let subscription: WebPushSubscriptionKeys

    /// An encryptor for `subscription`.
    public init(subscription: WebPushSubscriptionKeys) {
        self.subscription = subscription
    }

    /// The body for `plaintext`: header (salt, `rs` 4096, `idlen` 65, the sender's public key) and one record.
    ///
    /// `senderKey` and `salt` default to fresh random values; pass them only to reproduce a known body (RFC 8291
    /// Appendix A). Throws `bodyTooLarge` when the body would exceed 4096 bytes (3993 bytes of plaintext).
    public func encrypt(_ plaintext: [UInt8], senderKey: P256.KeyAgreement.PrivateKey = P256.KeyAgreement.PrivateKey(),
                        salt: [UInt8]? = nil) throws(WebPushError) -> [UInt8] {
        let size = WebPushBody.size(plaintextCount: plaintext.count)
        guard size <= WebPushBody.maximumSize else { throw .bodyTooLarge(size: size, limit: WebPushBody.maximumSize) }
        let salt = salt ?? Self.randomSalt()
        guard salt.count == WebPushBody.saltLength else { throw .invalidSalt(length: salt.count) }
        let header = WebPushContentHeader(salt: salt, recordSize: WebPushBody.recordSize, senderPublicKey: senderKey.publicKey)
        let shared: SharedSecret
        do { shared = try senderKey.sharedSecretFromKeyAgreement(with: subscription.publicKey) } catch {
            throw .cryptoFailed(operation: "agree a key with the subscription's p256dh")
        }
        let keys = WebPushKeyDerivation.derive(shared: shared, auth: subscription.auth, uaPublic: subscription.publicKey,
                                               senderPublic: senderKey.publicKey, salt: salt)
        var record = plaintext
        record.append(0x02)
        let sealed: AES.GCM.SealedBox
        do { sealed = try AES.GCM.seal(record, using: keys.contentKey, nonce: keys.nonce) } catch {
            throw .cryptoFailed(operation: "encrypt the Web Push record")
        }
        return header.bytes + Array(sealed.ciphertext) + Array(sealed.tag)
    }

    static func randomSalt() -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<WebPushBody.saltLength).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }
}

/// The user agent's side of RFC 8291 (the simulated browser): opens a body with its private key and auth secret.
///
/// Hostile bytes end in a typed `WebPushError.undecryptable`, never a crash: the header is checked field by field,
/// only one record is read (RFC 8291 §4), and the padding must be the delimiter `0x02` followed by zeros.
public struct WebPushDecryptor: Sendable {
    /// The user agent's keys.
    public let keys: WebPushUserAgentKeys
    /// The largest body accepted (4096 by default, as push services deliver).
    public let maximumBodySize: Int

    /// A decryptor with `keys`, refusing bodies over `maximumBodySize` bytes.
    public init(keys: WebPushUserAgentKeys, maximumBodySize: Int = WebPushBody.maximumSize) {
        self.keys = keys
        self.maximumBodySize = maximumBodySize
    }

    /// The plaintext of `body`.
    public func decrypt(_ body: [UInt8]) throws(WebPushError) -> [UInt8] {
        guard body.count <= maximumBodySize else { throw .undecryptable(.tooLarge(size: body.count, limit: maximumBodySize)) }
        let (header, headerLength) = try WebPushContentHeader.parse(body)
        let recordLength = body.count - headerLength
        guard recordLength <= Int(header.recordSize) else {
            throw .undecryptable(.multipleRecords(length: recordLength, rs: header.recordSize))
        }
        guard recordLength >= WebPushBody.recordOverhead else { throw .undecryptable(.recordTooShort(length: recordLength)) }
        let shared: SharedSecret
        do { shared = try keys.privateKey.sharedSecretFromKeyAgreement(with: header.senderPublicKey) } catch {
            throw .undecryptable(.invalidSenderKey)
        }
        let derived = WebPushKeyDerivation.derive(shared: shared, auth: keys.auth, uaPublic: keys.privateKey.publicKey,
                                                  senderPublic: header.senderPublicKey, salt: header.salt)
        let tagStart = body.count - 16
        var record: [UInt8]
        do {
            let box = try AES.GCM.SealedBox(nonce: derived.nonce, ciphertext: body[headerLength..<tagStart], tag: body[tagStart...])
            record = Array(try AES.GCM.open(box, using: derived.contentKey))
        } catch {
            throw .undecryptable(.authenticationFailed)
        }
        // RFC 8188 §2: the data, then the delimiter (0x02 in the last record), then zeros.
        guard let last = record.lastIndex(where: { $0 != 0 }) else { throw .undecryptable(.missingDelimiter) }
        switch record[last] {
        case 0x02: break
        case 0x01: throw .undecryptable(.notLastRecord)
        default: throw .undecryptable(.invalidPadding(value: record[last]))
        }
        record.removeSubrange(last...)
        return record
    }
}

/// RFC 8291 §3.3–§3.4 and RFC 8188 §2.2–§2.3: the content-encryption key and nonce of a message. The secrets stay
/// in swift-crypto's `SymmetricKey` storage.
enum WebPushKeyDerivation {
    struct Keys {
        let contentKey: SymmetricKey
        let nonce: AES.GCM.Nonce
    }

    static let keyInfoPrefix = Array("WebPush: info".utf8) + [0]
    static let contentKeyInfo = Array("Content-Encoding: aes128gcm".utf8) + [0]
    static let nonceInfo = Array("Content-Encoding: nonce".utf8) + [0]

    static func derive(shared: SharedSecret, auth: SecureBytes, uaPublic: P256.KeyAgreement.PublicKey,
                       senderPublic: P256.KeyAgreement.PublicKey, salt: [UInt8]) -> Keys {
        // IKM = HKDF(salt = auth_secret, IKM = ecdh_secret, info = "WebPush: info" 0x00 ua_public as_public, L = 32)
        let keyInfo = keyInfoPrefix + Array(uaPublic.x963Representation) + Array(senderPublic.x963Representation)
        let ikm = auth.withUnsafeBytes { authBytes in
            shared.hkdfDerivedSymmetricKey(using: SHA256.self, salt: authBytes, sharedInfo: keyInfo, outputByteCount: 32)
        }
        // CEK = HKDF(salt, IKM, "Content-Encoding: aes128gcm" 0x00, 16); NONCE = HKDF(salt, IKM, "Content-Encoding: nonce" 0x00, 12).
        let contentKey = HKDF<SHA256>.deriveKey(inputKeyMaterial: ikm, salt: salt, info: contentKeyInfo, outputByteCount: 16)
        let nonceKey = HKDF<SHA256>.deriveKey(inputKeyMaterial: ikm, salt: salt, info: nonceInfo, outputByteCount: 12)
        // The record's sequence number is 0, so its nonce is NONCE itself (NONCE XOR 0). A 12-byte nonce always parses.
        let nonce = nonceKey.withUnsafeBytes { bytes in
            (try? AES.GCM.Nonce(data: bytes)) ?? { preconditionFailure("a 12-byte AES-GCM nonce is valid") }()
        }
        return Keys(contentKey: contentKey, nonce: nonce)
    }
}
