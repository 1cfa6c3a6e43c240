/// Everything that can go wrong in Web Push (platforms v1 §1.1, §3): the module's one error type.
///
/// Messages say what happened and what to do. They never hold a key, the auth secret, a token, a JWT or an
/// endpoint's path (an endpoint is a capability URL): at most its origin.
public enum WebPushError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A member of a subscription (`webpush/keys/p256dh`, `webpush/keys/auth`) is not usable.
    case subscription(member: String, problem: SubscriptionProblem)
    /// The encrypted body would be `size` bytes, over the push services' `limit` (4096).
    case bodyTooLarge(size: Int, limit: Int)
    /// The salt given to the encryptor is not 16 bytes (`length`).
    case invalidSalt(length: Int)
    /// A Web Push body could not be opened.
    case undecryptable(BodyProblem)
    /// The VAPID key file or PEM is not usable.
    case vapidKey(VAPIDKeyProblem)
    /// The VAPID subject is neither `mailto:` nor `https://` (`reason` says what is wrong).
    case invalidSubject(reason: String)
    /// A VAPID origin (a JWT's `aud`) is not `https://host[:port]` or `http://host[:port]`.
    case invalidAudience
    /// A VAPID `Authorization` header was refused by a push service's verifier.
    case vapidRefused(VAPIDRefusal)
    /// An endpoint is refused by the endpoint rules (platforms v1 §1.1).
    case endpoint(EndpointProblem)
    /// A stored Web Push device key is not a 32-byte P-256 private scalar.
    case invalidDeviceKey
    /// swift-crypto could not sign or agree a key (`operation`); this should not happen with a valid key.
    case cryptoFailed(operation: String)

    /// What is wrong with a subscription member.
    public enum SubscriptionProblem: Sendable, Equatable {
        /// The member is absent, or not of its type (a string; an object for `webpush` and `webpush/keys`).
        case missing
        /// The member is not one a `PushSubscription.toJSON()` has.
        case unknownMember
        /// Not base64url.
        case notBase64URL
        /// The decoded value is `length` bytes, not `expected`.
        case wrongLength(length: Int, expected: Int)
        /// `p256dh` does not start with `0x04` (an uncompressed point).
        case notUncompressedPoint
        /// `p256dh` is not a point on P-256.
        case notOnCurve
    }

    /// Why a Web Push body (RFC 8188 `aes128gcm`, RFC 8291) could not be opened.
    public enum BodyProblem: Sendable, Equatable {
        /// The body is `length` bytes, shorter than its header (`needed`).
        case truncatedHeader(length: Int, needed: Int)
        /// The body is `size` bytes, over `limit`.
        case tooLarge(size: Int, limit: Int)
        /// The header's record size `rs` is below 18 (RFC 8188 §2).
        case recordSizeTooSmall(rs: UInt32)
        /// The header's `idlen` is `length`, not 65 (RFC 8291 §4: the sender's uncompressed P-256 key).
        case keyIDLength(length: Int)
        /// The header's `keyid` is not an uncompressed P-256 point.
        case invalidSenderKey
        /// The record after the header is `length` bytes: too short for a delimiter and a tag (17).
        case recordTooShort(length: Int)
        /// The body holds more than one record (`length` bytes after the header, `rs` per record): RFC 8291 §4
        /// has the sender use one, and only one is read.
        case multipleRecords(length: Int, rs: UInt32)
        /// The record does not authenticate: tampered with, or encrypted for other keys.
        case authenticationFailed
        /// The decrypted record holds no delimiter (all zeros).
        case missingDelimiter
        /// The record's delimiter is `0x01` (not the last record): the body was truncated.
        case notLastRecord
        /// The last non-zero byte is `value`, not a delimiter (RFC 8188 §2: `0x02` then zeros).
        case invalidPadding(value: UInt8)
    }

    /// Why the VAPID key could not be loaded.
    public enum VAPIDKeyProblem: Sendable, Equatable {
        /// The file does not exist or cannot be opened.
        case unreadable(path: String)
        /// The path is a symbolic link (key files are never followed).
        case symbolicLink(path: String)
        /// The path is a directory.
        case directory(path: String)
        /// The path is not a regular file.
        case notRegularFile(path: String)
        /// The file belongs to another user.
        case notOwner(path: String)
        /// Group or others may access the file (`mode`).
        case readableByOthers(path: String, mode: Int)
        /// The file is larger than `limit` bytes.
        case tooLarge(path: String, limit: Int)
        /// No `-----BEGIN PRIVATE KEY-----` block (PKCS#8 PEM).
        case notPEM(source: String)
        /// The PEM block is not base64.
        case invalidBase64(source: String)
        /// The key is not a P-256 private key in PKCS#8.
        case notP256(source: String)
    }

    /// Why a push service refuses a VAPID `Authorization` header (RFC 8292).
    public enum VAPIDRefusal: String, Sendable, Equatable {
        /// No header, or too long.
        case missing = "missing"
        /// Not `vapid t=…, k=…` (another scheme, a missing or repeated parameter).
        case malformedHeader = "malformed_header"
        /// `t` is not a JWT of three base64url parts with JSON header and claims.
        case malformedToken = "malformed_token"
        /// The JWT's header is not `alg` `ES256` (and `typ`, when present, `JWT`).
        case unsupportedAlgorithm = "unsupported_algorithm"
        /// `k` is not a base64url uncompressed P-256 point.
        case invalidKey = "invalid_key"
        /// `k` is not the key the subscription was made for.
        case keyMismatch = "key_mismatch"
        /// The signature does not verify under `k`.
        case badSignature = "bad_signature"
        /// `aud` is missing or is not this push service's origin.
        case wrongAudience = "wrong_audience"
        /// `exp` is missing or not an integer.
        case missingExpiry = "missing_expiry"
        /// `exp` is not in the future.
        case expired = "expired"
        /// `exp` is more than 24 hours ahead (RFC 8292 §2).
        case expiryTooFar = "expiry_too_far"
        /// `sub` is missing or neither `mailto:` nor `https:`.
        case invalidSubject = "invalid_subject"
    }

    /// Why an endpoint is refused (platforms v1 §1.1). Cases carry the origin when it is known, never the path.
    public enum EndpointProblem: Sendable, Equatable {
        /// Empty, or longer than `limit` bytes (`length`).
        case badLength(length: Int, limit: Int)
        /// Not an absolute URL this parser reads (spaces, control or non-ASCII bytes, no `//`, a bad port,
        /// a fragment, a backslash).
        case malformed
        /// The scheme is not `https`.
        case notHTTPS
        /// The URL carries user information (`user@`).
        case userinfo
        /// The host is not a valid DNS name.
        case invalidHost
        /// The host is an IP address literal (IPv4 in any `inet_aton` form, or bracketed IPv6).
        case ipLiteral(origin: String)
        /// The host is `localhost` or under `.localhost`.
        case localhost(origin: String)
        /// The port is neither 443 nor in the app's `allow_ports`.
        case portNotAllowed(origin: String, port: Int)
        /// The name resolved to no address.
        case noAddresses(origin: String)
        /// The name resolved to an address that is not public (`addressClass`).
        case notPublic(origin: String, addressClass: WebPushAddressClass)
    }

    /// The message for operators and API clients.
    public var description: String {
        switch self {
        case let .subscription(member, problem):
            switch problem {
            case .missing: return "\(member) is missing or of the wrong type: send the browser's PushSubscription.toJSON()"
            case .unknownMember: return "\(member) is not a member of a PushSubscription: remove it"
            case .notBase64URL: return "\(member) is not base64url: send the browser's PushSubscription.toJSON() keys unchanged"
            case let .wrongLength(length, expected):
                return "\(member) is \(length) bytes, not \(expected): send the browser's PushSubscription.toJSON() keys unchanged"
            case .notUncompressedPoint: return "\(member) is not an uncompressed P-256 point (65 bytes starting 0x04)"
            case .notOnCurve: return "\(member) is not a point on P-256: the subscription's key is corrupt"
            }
        case let .bodyTooLarge(size, limit):
            return "the Web Push body would be \(size) bytes, over the \(limit)-byte limit push services accept: send a shorter message"
        case let .invalidSalt(length):
            return "the Web Push salt is \(length) bytes; it must be 16"
        case let .undecryptable(problem):
            return "the Web Push body cannot be opened: " + problem.text
        case let .vapidKey(problem):
            return problem.text
        case let .invalidSubject(reason):
            return "the VAPID subject \(reason): use \"mailto:ops@example.com\" or an https:// URL (RFC 8292 §2.1)"
        case .invalidAudience:
            return "the VAPID audience is not an origin (https://host[:port])"
        case let .vapidRefused(refusal):
            return "VAPID refused (\(refusal.rawValue)): " + refusal.text
        case let .endpoint(problem):
            return "webpush/endpoint " + problem.text
        case .invalidDeviceKey:
            return "the stored Web Push device key is not a P-256 private key: subscribe the device again"
        case let .cryptoFailed(operation):
            return "swift-crypto failed to \(operation): check the key"
        }
    }
}

extension WebPushError.EndpointProblem {
    /// The delivery reason for this refusal: `endpoint_not_public` when the endpoint names an address that is not
    /// public (an IP literal, `localhost`, a name resolving to one), else `invalid_endpoint`.
    public var reason: String {
        switch self {
        case .ipLiteral, .localhost, .noAddresses, .notPublic: return "endpoint_not_public"
        case .badLength, .malformed, .notHTTPS, .userinfo, .invalidHost, .portNotAllowed: return "invalid_endpoint"
        }
    }

    var text: String {
        switch self {
        case let .badLength(length, limit):
            return length == 0 ? "is empty: give the browser's PushSubscription endpoint"
                : "is \(length) bytes, over \(limit): give the browser's PushSubscription endpoint"
        case .malformed: return "is not an absolute https URL: give the browser's PushSubscription endpoint unchanged"
        case .notHTTPS: return "is not https: push services are reached over https only"
        case .userinfo: return "carries user information (user@host): remove it"
        case .invalidHost: return "has no valid host name"
        // The endpoint is a capability URL chosen by whoever registered the device: no part of it, its origin
        // included, is quoted in an error (platforms v1 §1), which may reach a problem's detail or a log.
        case .ipLiteral: return "names an IP address: a push service endpoint must use a host name"
        case .localhost: return "is a localhost name: set \"allow_private_endpoints\" for a local push service"
        case let .portNotAllowed(_, port):
            return "uses port \(port): only 443 is allowed unless the app lists it in \"webpush\": {\"allow_ports\": […]}"
        case .noAddresses: return "resolves to no address"
        case let .notPublic(_, addressClass):
            return "resolves to a \(addressClass.rawValue) address, not a public one: the gateway connects to public addresses only"
        }
    }
}

extension WebPushError.BodyProblem {
    var text: String {
        switch self {
        case let .truncatedHeader(length, needed): return "it is \(length) bytes, shorter than its \(needed)-byte header"
        case let .tooLarge(size, limit): return "it is \(size) bytes, over the \(limit)-byte limit"
        case let .recordSizeTooSmall(rs): return "its record size is \(rs), below the minimum of 18"
        case let .keyIDLength(length): return "its key id is \(length) bytes, not the 65 of an uncompressed P-256 key"
        case .invalidSenderKey: return "its key id is not a P-256 point"
        case let .recordTooShort(length): return "its record is \(length) bytes, too short for a delimiter and a tag"
        case let .multipleRecords(length, rs): return "it holds \(length) bytes of records of \(rs): more than the one record Web Push uses"
        case .authenticationFailed: return "it does not authenticate: it was altered, or encrypted for another subscription's keys"
        case .missingDelimiter: return "its record holds no padding delimiter"
        case .notLastRecord: return "its only record is not marked last: the body was truncated"
        case let .invalidPadding(value): return "its padding ends in 0x\(String(value, radix: 16)), not the delimiter 0x02"
        }
    }
}

extension WebPushError.VAPIDKeyProblem {
    var text: String {
        switch self {
        case let .unreadable(path): return "cannot read the VAPID key \(path): check the path (make one with `sealedpush-server webpush generate-vapid --out \(path)`)"
        case let .symbolicLink(path): return "the VAPID key \(path) is a symbolic link: key files are not followed; give the file itself"
        case let .directory(path): return "the VAPID key \(path) is a directory: give the key file"
        case let .notRegularFile(path): return "the VAPID key \(path) is not a regular file"
        case let .notOwner(path): return "the VAPID key \(path) belongs to another user: chown it to the user running SealedPush"
        case let .readableByOthers(path, mode):
            return "the VAPID key \(path) has mode \(String(mode, radix: 8)): run `chmod 600 \(path)`"
        case let .tooLarge(path, limit): return "the VAPID key \(path) is over \(limit) bytes: it is not a key file"
        case let .notPEM(source):
            return "\(source) holds no PKCS#8 PEM (-----BEGIN PRIVATE KEY-----): convert an EC key with `openssl pkcs8 -topk8 -nocrypt`"
        case let .invalidBase64(source): return "\(source) holds a PEM block that is not base64"
        case let .notP256(source): return "\(source) is not a P-256 private key in PKCS#8"
        }
    }
}

extension WebPushError.VAPIDRefusal {
    var text: String {
        switch self {
        case .missing: return "no Authorization header, or one too long"
        case .malformedHeader: return "the Authorization header is not `vapid t=<JWT>, k=<key>`"
        case .malformedToken: return "t is not a JWT"
        case .unsupportedAlgorithm: return "the JWT is not ES256"
        case .invalidKey: return "k is not a base64url P-256 public key"
        case .keyMismatch: return "k is not the applicationServerKey of the subscription"
        case .badSignature: return "the JWT's signature does not verify under k"
        case .wrongAudience: return "the JWT's aud is not this push service's origin"
        case .missingExpiry: return "the JWT has no integer exp"
        case .expired: return "the JWT has expired"
        case .expiryTooFar: return "the JWT's exp is more than 24 hours ahead"
        case .invalidSubject: return "the JWT's sub is neither mailto: nor https:"
        }
    }
}
