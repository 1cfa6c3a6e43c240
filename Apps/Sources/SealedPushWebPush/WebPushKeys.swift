public import Crypto
public import SealedPushCrypto
public import SealedPushWire
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A subscription's public keys (`PushSubscription.toJSON().keys`): the user agent's P-256 key `p256dh` and the
/// 16-byte `auth` secret it shares with the application server (RFC 8291 §2–§3).
public struct WebPushSubscriptionKeys: Sendable, Equatable {
    /// The user agent's public key (validated: a point on P-256).
    public let publicKey: P256.KeyAgreement.PublicKey
    /// The 16-byte authentication secret (wiped when released).
    public let auth: SecureBytes

    /// The member names errors use (gateway API paths).
    public static let p256dhMember = "webpush/keys/p256dh"
    /// The member names errors use (gateway API paths).
    public static let authMember = "webpush/keys/auth"
    /// The length of `auth` (RFC 8291 §3.2).
    public static let authLength = 16
    /// The length of an uncompressed P-256 point.
    public static let pointLength = 65

    /// Keys from the subscription's base64url members (unpadded, as browsers give them; correct `=` padding is
    /// accepted too). Errors name the member: `webpush/keys/p256dh`, `webpush/keys/auth`.
    public init(p256dh: String, auth: String) throws(WebPushError) {
        guard let point = WebPushBase64URL.decodeLenient(p256dh) else {
            throw .subscription(member: Self.p256dhMember, problem: .notBase64URL)
        }
        publicKey = try Self.point(point, member: Self.p256dhMember)
        guard var secret = WebPushBase64URL.decodeLenient(auth) else {
            throw .subscription(member: Self.authMember, problem: .notBase64URL)
        }
        defer { for i in secret.indices { secret[i] = 0 } }
        guard secret.count == Self.authLength else {
            throw .subscription(member: Self.authMember, problem: .wrongLength(length: secret.count, expected: Self.authLength))
        }
        self.auth = SecureBytes(secret)
    }

    /// Keys from their parts; `auth` must be 16 bytes.
    public init(publicKey: P256.KeyAgreement.PublicKey, auth: SecureBytes) throws(WebPushError) {
        guard auth.count == Self.authLength else {
            throw .subscription(member: Self.authMember, problem: .wrongLength(length: auth.count, expected: Self.authLength))
        }
        self.publicKey = publicKey
        self.auth = auth
    }

    init(checkedPublicKey: P256.KeyAgreement.PublicKey, auth: SecureBytes) {
        publicKey = checkedPublicKey
        self.auth = auth
    }

    /// `p256dh` as the subscription JSON holds it: base64url, no padding, of the 65-byte uncompressed point.
    public var p256dh: String { WebPushBase64URL.encode(publicKey.x963Representation) }

    /// `auth` as the subscription JSON holds it (base64url, no padding). It is a secret: store it, never log it.
    public var authBase64URL: String { auth.withUnsafeBytes { WebPushBase64URL.encode($0) } }

    /// `bytes` as an uncompressed P-256 point, or the error naming `member`.
    static func point(_ bytes: [UInt8], member: String) throws(WebPushError) -> P256.KeyAgreement.PublicKey {
        guard bytes.count == pointLength else {
            throw .subscription(member: member, problem: .wrongLength(length: bytes.count, expected: pointLength))
        }
        guard bytes[0] == 0x04 else { throw .subscription(member: member, problem: .notUncompressedPoint) }
        // swift-crypto (BoringSSL's EC_POINT_oct2point) refuses a point that is not on the curve.
        do { return try P256.KeyAgreement.PublicKey(x963Representation: bytes) } catch {
            throw .subscription(member: member, problem: .notOnCurve)
        }
    }

    /// The two members compare in constant time (`auth` is a secret).
    public static func == (lhs: WebPushSubscriptionKeys, rhs: WebPushSubscriptionKeys) -> Bool {
        lhs.publicKey.x963Representation == rhs.publicKey.x963Representation && lhs.auth == rhs.auth
    }
}

/// A user agent's Web Push keys (a simulated browser's, `sealedpush device subscribe`): its P-256 private key
/// and the 16-byte auth secret, the private half of a subscription.
public struct WebPushUserAgentKeys: Sendable {
    /// The private key (held by swift-crypto, which clears it when released).
    public let privateKey: P256.KeyAgreement.PrivateKey
    /// The 16-byte authentication secret (wiped when released).
    public let auth: SecureBytes

    /// New keys: a fresh P-256 key and 16 random bytes of auth secret.
    public static func generate() -> WebPushUserAgentKeys {
        WebPushUserAgentKeys(uncheckedPrivateKey: P256.KeyAgreement.PrivateKey(), auth: SecureBytes.random(count: WebPushSubscriptionKeys.authLength))
    }

    /// Keys from their parts; `auth` must be 16 bytes.
    public init(privateKey: P256.KeyAgreement.PrivateKey, auth: SecureBytes) throws(WebPushError) {
        guard auth.count == WebPushSubscriptionKeys.authLength else {
            throw .subscription(member: WebPushSubscriptionKeys.authMember,
                                problem: .wrongLength(length: auth.count, expected: WebPushSubscriptionKeys.authLength))
        }
        self.init(uncheckedPrivateKey: privateKey, auth: auth)
    }

    /// Keys as a keychain stores them: the 32-byte private scalar and the auth secret, both in wiped storage.
    public init(rawPrivateKey: SecureBytes, auth: SecureBytes) throws(WebPushError) {
        let key: P256.KeyAgreement.PrivateKey
        do { key = try rawPrivateKey.withUnsafeBytes { try P256.KeyAgreement.PrivateKey(rawRepresentation: $0) } } catch {
            throw .invalidDeviceKey
        }
        try self.init(privateKey: key, auth: auth)
    }

    private init(uncheckedPrivateKey: P256.KeyAgreement.PrivateKey, auth: SecureBytes) {
        privateKey = uncheckedPrivateKey
        self.auth = auth
    }

    /// The 32-byte private scalar, in wiped storage, for the keychain store.
    public var rawPrivateKey: SecureBytes { SecureBytes(privateKey.rawRepresentation) }

    /// The public half, as the subscription gives it to the application server.
    public var subscriptionKeys: WebPushSubscriptionKeys {
        // `auth` was checked (16 bytes) when these keys were made.
        WebPushSubscriptionKeys(checkedPublicKey: privateKey.publicKey, auth: auth)
    }

    /// The browser's `PushSubscription.toJSON()` for `endpoint`: `{"endpoint", "expirationTime": null, "keys":
    /// {"p256dh", "auth"}}`, the body `device subscribe` prints to register.
    public func subscriptionJSON(endpoint: String) -> JSONValue {
        let keys = subscriptionKeys
        return .object(JSONObject([
            ("endpoint", .string(endpoint)),
            ("expirationTime", .null),
            ("keys", .object(JSONObject([("p256dh", .string(keys.p256dh)), ("auth", .string(keys.authBase64URL))]))),
        ]))
    }
}

/// Base64url without padding (RFC 4648 §5), as Web Push and JWTs use it.
public enum WebPushBase64URL {
    /// Encodes `bytes` (no padding).
    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        Base64.encodeURLSafeNoPadding(bytes)
    }

    /// Decodes strict unpadded base64url (canonical trailing bits), or `nil`.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        try? Base64.decodeURLSafeNoPadding(String(text))
    }

    /// Decodes base64url with or without correct `=` padding (some libraries pad), or `nil`.
    public static func decodeLenient(_ text: String) -> [UInt8]? {
        var body = Substring(text)
        if text.hasSuffix("=") {
            guard text.utf8.count % 4 == 0 else { return nil }
            while body.hasSuffix("=") { body.removeLast() }
            guard text.utf8.count - body.utf8.count <= 2 else { return nil }
        }
        return decode(body)
    }
}

/// A subscription as a device registers it (platforms v1 §1): the browser's `PushSubscription.toJSON()`,
/// `{"endpoint", "expirationTime", "keys": {"p256dh", "auth"}}`, checked.
public struct WebPushSubscription: Sendable, Equatable {
    /// The endpoint, checked by the endpoint rules. A capability URL: never log it.
    public let endpoint: WebPushEndpoint
    /// The keys.
    public let keys: WebPushSubscriptionKeys

    /// A subscription from its parts.
    public init(endpoint: WebPushEndpoint, keys: WebPushSubscriptionKeys) {
        self.endpoint = endpoint
        self.keys = keys
    }

    /// Reads the `webpush` member of a registration: `endpoint` checked by `policy`, `keys` as
    /// `WebPushSubscriptionKeys`, `expirationTime` accepted and ignored, any other member refused (so that typos
    /// surface). Errors name the member (`webpush/endpoint`, `webpush/keys/auth`, …).
    public init(json: JSONValue, policy: WebPushEndpointPolicy) throws(WebPushError) {
        guard case let .object(object) = json else { throw .subscription(member: "webpush", problem: .missing) }
        for (name, _) in object where !["endpoint", "expirationTime", "keys"].contains(name) {
            throw .subscription(member: "webpush/\(name.prefix(64))", problem: .unknownMember)
        }
        guard let endpoint = object["endpoint"]?.stringValue else { throw .subscription(member: "webpush/endpoint", problem: .missing) }
        guard case let .object(keys)? = object["keys"] else { throw .subscription(member: "webpush/keys", problem: .missing) }
        for (name, _) in keys where name != "p256dh" && name != "auth" {
            throw .subscription(member: "webpush/keys/\(name.prefix(64))", problem: .unknownMember)
        }
        guard let p256dh = keys["p256dh"]?.stringValue else { throw .subscription(member: WebPushSubscriptionKeys.p256dhMember, problem: .missing) }
        guard let auth = keys["auth"]?.stringValue else { throw .subscription(member: WebPushSubscriptionKeys.authMember, problem: .missing) }
        self.endpoint = try policy.check(endpoint)
        self.keys = try WebPushSubscriptionKeys(p256dh: p256dh, auth: auth)
    }
}
