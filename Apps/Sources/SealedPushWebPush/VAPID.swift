public import Crypto
public import SealedPushCrypto
import SealedPushWire
import Synchronization
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// An app's VAPID key (RFC 8292): a P-256 signing key, read from PKCS#8 PEM.
public struct VAPIDKey: Sendable {
    /// The private key (held by swift-crypto, which clears it when released).
    public let privateKey: P256.Signing.PrivateKey

    /// The largest key file read (a PKCS#8 P-256 key is about 240 bytes).
    public static let maximumFileSize = 16 * 1024

    /// A key from its swift-crypto value.
    public init(privateKey: P256.Signing.PrivateKey) {
        self.privateKey = privateKey
    }

    /// Loads the key file `path` (PKCS#8 PEM), checked like every key SealedPush reads: opened without following a
    /// symbolic link, a regular file owned by this user with no group or other access (`chmod 600`); its bytes and
    /// the DER inside stay in wiped storage.
    public init(pemFile path: String) throws(WebPushError) {
        let text: SecureBytes
        do { text = try PrivateFile.read(path, limit: Self.maximumFileSize) } catch {
            switch error {
            case .unreadable, .readFailed: throw .vapidKey(.unreadable(path: path))
            case .symbolicLink: throw .vapidKey(.symbolicLink(path: path))
            case let .notRegularFile(isDirectory): throw .vapidKey(isDirectory ? .directory(path: path) : .notRegularFile(path: path))
            case .notOwner: throw .vapidKey(.notOwner(path: path))
            case let .accessibleByOthers(mode): throw .vapidKey(.readableByOthers(path: path, mode: Int(mode)))
            case let .tooLarge(limit): throw .vapidKey(.tooLarge(path: path, limit: limit))
            }
        }
        try self.init(pem: text, source: path)
    }

    /// A key from PKCS#8 PEM held in wiped storage (`source` names it in errors).
    public init(pem: SecureBytes, source: String = "the VAPID key") throws(WebPushError) {
        let der: SecureBytes
        do { der = try PEM.decode(pem, label: "PRIVATE KEY") } catch {
            switch error {
            case .noBlock: throw .vapidKey(.notPEM(source: source))
            case .invalidBase64: throw .vapidKey(.invalidBase64(source: source))
            }
        }
        do { privateKey = try der.withUnsafeBytes { try P256.Signing.PrivateKey(derRepresentation: $0) } } catch {
            throw .vapidKey(.notP256(source: source))
        }
    }

    /// A new key and its PKCS#8 PEM, in wiped storage, for `sealedpush-server webpush generate-vapid` to write
    /// (owner-only) and `publicKeyBase64URL` to print.
    public static func generate() -> (key: VAPIDKey, pem: SecureBytes) {
        let key = P256.Signing.PrivateKey()
        return (VAPIDKey(privateKey: key), SecureBytes(Array(key.pemRepresentation.utf8)))
    }

    /// The public key as a 65-byte uncompressed point.
    public var publicKeyBytes: [UInt8] { Array(privateKey.publicKey.x963Representation) }

    /// The public key, base64url without padding, as a browser's `applicationServerKey` and the `k` parameter want it.
    public var publicKeyBase64URL: String { WebPushBase64URL.encode(privateKey.publicKey.x963Representation) }
}

/// A VAPID subject (`sub`, RFC 8292 §2.1): a `mailto:` address or an `https:` URL where the push service's
/// operator can reach the app's.
public struct VAPIDSubject: Sendable, Equatable, CustomStringConvertible {
    /// The subject as the JWT carries it.
    public let value: String

    /// The longest subject accepted.
    public static let maximumLength = 512

    /// Checks `value`: `mailto:` with an address (`local@domain`), or `https://` with a host; printable ASCII, no
    /// spaces.
    public init(_ value: String) throws(WebPushError) {
        guard !value.isEmpty, value.utf8.count <= Self.maximumLength else {
            throw .invalidSubject(reason: "is empty or longer than \(Self.maximumLength) characters")
        }
        guard value.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw .invalidSubject(reason: "holds spaces, control characters or non-ASCII characters")
        }
        let lower = value.lowercased()
        if lower.hasPrefix("mailto:") {
            let address = value.dropFirst("mailto:".count)
            let parts = address.split(separator: "@", omittingEmptySubsequences: false)
            guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else {
                throw .invalidSubject(reason: "is a mailto: without an address")
            }
        } else if lower.hasPrefix("https://") {
            let rest = value.dropFirst("https://".count)
            guard let host = rest.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false).first, !host.isEmpty else {
                throw .invalidSubject(reason: "is an https: URL without a host")
            }
        } else {
            throw .invalidSubject(reason: "is neither mailto: nor https://")
        }
        self.value = value
    }

    /// The subject.
    public var description: String { value }
}

/// The claims of a VAPID JWT.
public struct VAPIDClaims: Sendable, Equatable {
    /// `aud`: the push service's origin.
    public let audience: String
    /// `exp`: expiry, Unix seconds.
    public let expiresAt: Int64
    /// `sub`: the app's contact.
    public let subject: String

    /// Claims from their parts.
    public init(audience: String, expiresAt: Int64, subject: String) {
        self.audience = audience
        self.expiresAt = expiresAt
        self.subject = subject
    }
}

/// VAPID tokens (RFC 8292 §2–§3): ES256 JWTs `{"typ":"JWT","alg":"ES256"}` . `{"aud","exp","sub"}` with a raw
/// r‖s signature, and the `Authorization: vapid t=<JWT>, k=<key>` header.
public enum VAPIDToken {
    /// The lifetime SealedPush gives a token: 12 hours.
    public static let lifetime: Int64 = 12 * 3600
    /// The longest lifetime RFC 8292 §2 allows: 24 hours.
    public static let maximumLifetime: Int64 = 24 * 3600

    /// A token for `audience` (an origin), expiring at `expiresAt` (Unix seconds), signed with `key`.
    public static func make(key: VAPIDKey, audience: String, subject: VAPIDSubject, expiresAt: Int64) throws(WebPushError) -> String {
        let header = WebPushBase64URL.encode(Array(#"{"typ":"JWT","alg":"ES256"}"#.utf8))
        let claims = WebPushBase64URL.encode(JSON.serialize(.object(JSONObject([
            ("aud", .string(audience)), ("exp", .int(expiresAt)), ("sub", .string(subject.value)),
        ]))))
        let signingInput = header + "." + claims
        let signature: P256.Signing.ECDSASignature
        do { signature = try key.privateKey.signature(for: Array(signingInput.utf8)) } catch {
            throw .cryptoFailed(operation: "sign the VAPID token")
        }
        return signingInput + "." + WebPushBase64URL.encode(signature.rawRepresentation)
    }

    /// The `Authorization` header value: `vapid t=<token>, k=<public key, base64url>`.
    public static func authorization(token: String, key: VAPIDKey) -> String {
        "vapid t=\(token), k=\(key.publicKeyBase64URL)"
    }
}

/// A source of the current time in Unix seconds (injected in tests).
public typealias UnixClock = @Sendable () -> Int64

/// The gateway's VAPID tokens for one app: one per push-service origin, reused until an hour before it expires,
/// then renewed (tokens live 12 hours). Safe to share between tasks.
public final class VAPIDTokenCache: Sendable {
    /// The app's key.
    public let key: VAPIDKey
    /// The app's subject.
    public let subject: VAPIDSubject
    /// How many origins are remembered at most; past it, expired entries are dropped, then all.
    public let capacity: Int

    /// How long before `exp` a token is renewed: 1 hour.
    public static let renewalMargin: Int64 = 3600

    private let clock: UnixClock
    private let state = Mutex<[String: (token: String, expiresAt: Int64)]>([:])

    /// A cache signing with `key` for `subject`, reading the time from `clock` (Unix seconds).
    public init(key: VAPIDKey, subject: VAPIDSubject, capacity: Int = 4096, clock: @escaping UnixClock) {
        self.key = key
        self.subject = subject
        self.capacity = max(1, capacity)
        self.clock = clock
    }

    /// The `Authorization` header for a request to `origin` (as `WebPushEndpointPolicy.origin(of:)` gives it).
    public func authorization(origin: String) throws(WebPushError) -> String {
        VAPIDToken.authorization(token: try token(origin: origin).token, key: key)
    }

    /// The token for `origin` and its `exp`: the cached one while now < `exp` − 1 h, else a new one expiring in 12 h.
    public func token(origin: String) throws(WebPushError) -> (token: String, expiresAt: Int64) {
        guard WebPushEndpointPolicy.isOrigin(origin) else { throw .invalidAudience }
        let now = clock()
        if let cached = state.withLock({ $0[origin] }), now < cached.expiresAt - Self.renewalMargin { return cached }
        let expiresAt = now + VAPIDToken.lifetime
        let token = try VAPIDToken.make(key: key, audience: origin, subject: subject, expiresAt: expiresAt)
        state.withLock { entries in
            if entries[origin] == nil, entries.count >= capacity {
                entries = entries.filter { now < $0.value.expiresAt - Self.renewalMargin }
                if entries.count >= capacity { entries.removeAll() }
            }
            entries[origin] = (token, expiresAt)
        }
        return (token, expiresAt)
    }
}

/// A push service's check of VAPID (`webpush serve`): the `Authorization` header's ES256 JWT must verify under its
/// `k`, name this service's origin as `aud`, and expire in the future but at most 24 hours ahead.
public struct VAPIDVerifier: Sendable {
    /// This push service's origin (`https://host[:port]`, lowercase, no default port).
    public let origin: String
    /// The longest `exp` − now accepted (24 hours).
    public let maximumLifetime: Int64
    private let clock: UnixClock

    /// The longest `Authorization` header read.
    public static let maximumHeaderLength = 8192

    /// A verifier for the push service at `origin`, reading the time from `clock`.
    public init(origin: String, maximumLifetime: Int64 = VAPIDToken.maximumLifetime, clock: @escaping UnixClock) {
        self.origin = origin
        self.maximumLifetime = maximumLifetime
        self.clock = clock
    }

    /// What a verified header says: the claims and the public key `k` (uncompressed point).
    public struct Verified: Sendable, Equatable {
        /// The JWT's claims.
        public let claims: VAPIDClaims
        /// `k`: the application server's public key, 65 bytes.
        public let publicKey: [UInt8]
    }

    /// Checks `authorization` (the header's value). With `expectedKey` (a subscription's `applicationServerKey`),
    /// `k` must also be that key.
    public func verify(authorization: String?, expectedKey: [UInt8]? = nil) throws(WebPushError) -> Verified {
        guard let authorization, !authorization.isEmpty, authorization.utf8.count <= Self.maximumHeaderLength else {
            throw .vapidRefused(.missing)
        }
        let (token, k) = try Self.parseHeader(authorization)
        guard let keyBytes = WebPushBase64URL.decodeLenient(k), keyBytes.count == 65, keyBytes[0] == 0x04,
              let key = try? P256.Signing.PublicKey(x963Representation: keyBytes)
        else { throw .vapidRefused(.invalidKey) }
        if let expectedKey, !constantTimeEquals(expectedKey, keyBytes) { throw .vapidRefused(.keyMismatch) }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = WebPushBase64URL.decode(parts[0]), let claimBytes = WebPushBase64URL.decode(parts[1]),
              let signatureBytes = WebPushBase64URL.decode(parts[2]),
              case let .object(header)? = try? JSON.parse(headerBytes), case let .object(claims)? = try? JSON.parse(claimBytes)
        else { throw .vapidRefused(.malformedToken) }
        guard header["alg"]?.stringValue == "ES256", header["typ"].map({ $0.stringValue?.uppercased() == "JWT" }) ?? true else {
            throw .vapidRefused(.unsupportedAlgorithm)
        }
        guard signatureBytes.count == 64, let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureBytes),
              key.isValidSignature(signature, for: Array((parts[0] + "." + parts[1]).utf8))
        else { throw .vapidRefused(.badSignature) }
        guard let audience = claims["aud"]?.stringValue, audience == origin else { throw .vapidRefused(.wrongAudience) }
        guard let expiresAt = claims["exp"]?.intValue else { throw .vapidRefused(.missingExpiry) }
        let now = clock()
        guard expiresAt > now else { throw .vapidRefused(.expired) }
        guard expiresAt - now <= maximumLifetime else { throw .vapidRefused(.expiryTooFar) }
        guard let subject = claims["sub"]?.stringValue, (try? VAPIDSubject(subject)) != nil else {
            throw .vapidRefused(.invalidSubject)
        }
        return Verified(claims: VAPIDClaims(audience: audience, expiresAt: expiresAt, subject: subject), publicKey: keyBytes)
    }

    /// `t` and `k` of `vapid t=…, k=…` (RFC 8292 §3; scheme case-insensitive, parameters in any order, optionally
    /// quoted; other parameters ignored; a repeated or missing `t` or `k` refused).
    static func parseHeader(_ value: String) throws(WebPushError) -> (token: String, key: String) {
        let text = value.drop { $0 == " " || $0 == "\t" }
        guard let space = text.firstIndex(where: { $0 == " " || $0 == "\t" }),
              text[..<space].lowercased() == "vapid"
        else { throw .vapidRefused(.malformedHeader) }
        var token: String?, key: String?
        for raw in text[space...].split(separator: ",", omittingEmptySubsequences: false) {
            let item = trimmed(raw)
            guard let equals = item.firstIndex(of: "=") else { throw .vapidRefused(.malformedHeader) }
            let name = trimmed(item[..<equals]).lowercased()
            var value = String(trimmed(item[item.index(after: equals)...]))
            if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") { value = String(value.dropFirst().dropLast()) }
            guard !value.isEmpty else { throw .vapidRefused(.malformedHeader) }
            switch name {
            case "t":
                guard token == nil else { throw .vapidRefused(.malformedHeader) }
                token = value
            case "k":
                guard key == nil else { throw .vapidRefused(.malformedHeader) }
                key = value
            default: continue
            }
        }
        guard let token, let key else { throw .vapidRefused(.malformedHeader) }
        return (token, key)
    }

    /// `text` without leading and trailing spaces and tabs.
    static func trimmed(_ text: Substring) -> Substring {
        let isBlank = { (c: Character) in c == " " || c == "\t" }
        guard let first = text.firstIndex(where: { !isBlank($0) }), let last = text.lastIndex(where: { !isBlank($0) }) else { return "" }
        return text[first...last]
    }
}
