public import SealedPushWebPush
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What the local Web Push service serves: where it listens, its subscriptions, and its faults.
public struct LocalWebPushConfiguration: Sendable {
    /// The host to bind (loopback unless the operator allows otherwise).
    public var host: String
    /// The port to bind; 0 picks a free one.
    public var port: Int
    /// The subscription ids it delivers to (`/push/ID`); others are `404` unless `acceptUnknown`.
    public var subscriptions: Set<String>
    /// Accept a message to a well-formed subscription id that `subscriptions` does not hold (after every other
    /// check) instead of answering `404`: no browser receives it. For load tests with many subscriptions.
    public var acceptUnknown: Bool = false
    /// Subscription ids that are gone (`410`).
    public var gone: Set<String>
    /// When set, every subscription was made for this application server key (a 65-byte P-256 point): a VAPID `k`
    /// that is another key is `403` (RFC 8292 §4.2).
    public var applicationServerKey: [UInt8]?
    /// The fraction of otherwise accepted messages answered `500` or `503` instead.
    public var failRate: Double
    /// How long every answer is delayed.
    public var latency: Duration
    /// How long a connection may stay idle before it is closed.
    public var idleTimeout: Duration = .seconds(120)

    /// A configuration from its parts.
    public init(host: String = "127.0.0.1", port: Int = 0, subscriptions: Set<String>, gone: Set<String> = [],
                applicationServerKey: [UInt8]? = nil, failRate: Double = 0, latency: Duration = .zero) {
        self.host = host
        self.port = port
        self.subscriptions = subscriptions
        self.gone = gone
        self.applicationServerKey = applicationServerKey
        self.failRate = failRate
        self.latency = latency
    }

    /// Whether `id` may name a subscription: 1–128 characters of `A–Z a–z 0–9 - _` (the last path component of
    /// `https://HOST:PORT/push/ID`).
    public static func isValidSubscriptionID(_ id: String) -> Bool {
        (1...128).contains(id.utf8.count) && id.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || byte == 0x2D || byte == 0x5F
        }
    }

    /// `id` as logs show it: its first four characters (the id is the capability part of an endpoint).
    public static func redacted(_ id: String) -> String {
        id.utf8.count <= 4 ? "…" : String(id.prefix(4)) + "…"
    }
}

/// A message the service accepted, as it hands it to the simulated browser that holds the subscription.
public struct AcceptedWebPush: Sendable, Equatable {
    /// The subscription id (`/push/ID`).
    public let subscription: String
    /// The message's id, the last component of its `Location` (a lowercase UUID).
    public let messageID: String
    /// The RFC 8291 body, as received.
    public let body: [UInt8]
    /// `TTL` in seconds.
    public let ttl: Int
    /// `Urgency` (`normal` when absent).
    public let urgency: WebPushUrgency
    /// `Topic`, when given.
    public let topic: String?
}

/// Why the service refuses a request: the HTTP status, a short reason code and a message for the sender (never a
/// key, a token, the body or the subscription id).
public struct LocalWebPushRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    /// The HTTP status.
    public let status: Int
    /// A reason code (`unknown_subscription`, `subscription_gone`, `vapid_wrong_audience`, `missing_ttl`, …).
    public let reason: String
    /// What is wrong and what to do.
    public let message: String

    /// A refusal from its parts.
    public init(_ status: Int, _ reason: String, _ message: String) {
        self.status = status
        self.reason = reason
        self.message = message
    }

    /// `STATUS reason: message`.
    public var description: String { "\(status) \(reason): \(message)" }
}

/// The checks of the local Web Push service (RFC 8030 §5, RFC 8291, RFC 8292; platforms v1 §5), in this order:
///
/// 1. the path is `/push/ID` (else `404`) and the method `POST` (else `405`);
/// 2. the subscription: gone (`--gone`) is `410`, unknown `404` (unless `acceptUnknown`);
/// 3. VAPID: `Authorization: vapid t=<ES256 JWT>, k=<key>`, the signature verifying under `k`, `aud` this service's
///    origin, `exp` in the future and at most 24 hours ahead, `sub` `mailto:` or `https:` (`401`); with an application
///    server key configured, `k` must be it (`403`);
/// 4. `Content-Encoding: aes128gcm` (`400`);
/// 5. `TTL`, required, a non-negative integer (`400`);
/// 6. `Urgency`, when given, `very-low`, `low`, `normal` or `high` (`400`);
/// 7. `Topic`, when given, 1–32 base64url characters (`400`);
/// 8. the body: at most 4096 bytes (`413`), an RFC 8188 header with a 65-byte P-256 `keyid` and room for one
///    record (`400`).
///
/// A header given twice is `400`. Headers are matched by lowercase name.
public struct LocalWebPushRules: Sendable {
    /// The configuration.
    public let configuration: LocalWebPushConfiguration
    /// The time, Unix seconds (VAPID `exp`).
    public let clock: UnixClock

    /// The largest body accepted (RFC 8030 §7.2).
    public static let maximumBodySize = WebPushBody.maximumSize

    /// Rules for `configuration`, reading the time from `clock`.
    public init(configuration: LocalWebPushConfiguration, clock: @escaping UnixClock = LocalWebPushRules.systemClock) {
        self.configuration = configuration
        self.clock = clock
    }

    /// The system's time in Unix seconds.
    public static let systemClock: UnixClock = { Int64(Date().timeIntervalSince1970) }

    /// What the headers say, once they passed.
    public struct CheckedHeaders: Sendable, Equatable {
        /// The subscription id.
        public let subscription: String
        /// `TTL`.
        public let ttl: Int
        /// `Urgency`.
        public let urgency: WebPushUrgency
        /// `Topic`.
        public let topic: String?
    }

    /// Checks 1–7 (everything but the body) of a request to `path` with `headers` (lowercase names), for the
    /// service at `origin` (`https://127.0.0.1:PORT`).
    public func checkHeaders(method: String, path: String, headers: [(name: String, value: String)],
                             origin: String) throws(LocalWebPushRefusal) -> CheckedHeaders {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].isEmpty, parts[1] == "push", LocalWebPushConfiguration.isValidSubscriptionID(String(parts[2])) else {
            throw LocalWebPushRefusal(404, "not_found", "no such resource: push to the subscription's endpoint, https://HOST:PORT/push/ID")
        }
        guard method == "POST" else { throw LocalWebPushRefusal(405, "method_not_allowed", "push messages are POSTed (RFC 8030 §5)") }
        let id = String(parts[2])
        if configuration.gone.contains(id) {
            throw LocalWebPushRefusal(410, "subscription_gone", "the subscription has expired or was unsubscribed: stop sending to it and forget it")
        }
        guard configuration.subscriptions.contains(id) || configuration.acceptUnknown else {
            throw LocalWebPushRefusal(404, "unknown_subscription", "no such subscription: stop sending to it and forget it")
        }
        var seen: [String: String] = [:]
        for (name, value) in headers where Self.checkedHeaders.contains(name) {
            guard seen[name] == nil else { throw LocalWebPushRefusal(400, "duplicate_header", "the \(name) header is given twice: send it once") }
            seen[name] = value
        }
        let verifier = VAPIDVerifier(origin: origin, clock: clock)
        do { _ = try verifier.verify(authorization: seen["authorization"], expectedKey: configuration.applicationServerKey) } catch {
            guard case let .vapidRefused(refusal) = error else {
                throw LocalWebPushRefusal(401, "vapid_invalid", error.description)
            }
            let status = refusal == .keyMismatch ? 403 : 401
            throw LocalWebPushRefusal(status, "vapid_\(refusal.rawValue)", error.description + Self.vapidAdvice(refusal, origin: origin))
        }
        guard let encoding = seen["content-encoding"], encoding.lowercased() == WebPushRequest.contentEncoding else {
            throw LocalWebPushRefusal(400, "content_encoding", "Content-Encoding must be aes128gcm (RFC 8291 §4)")
        }
        guard let ttlText = seen["ttl"] else { throw LocalWebPushRefusal(400, "missing_ttl", "the TTL header is required (RFC 8030 §5.2)") }
        guard let ttl = WebPushRequest.parseTTL(ttlText) else {
            throw LocalWebPushRefusal(400, "invalid_ttl", "TTL must be a non-negative integer number of seconds (RFC 8030 §5.2)")
        }
        var urgency = WebPushUrgency.normal
        if let text = seen["urgency"] {
            guard let parsed = WebPushUrgency(headerValue: text) else {
                throw LocalWebPushRefusal(400, "invalid_urgency", "Urgency must be very-low, low, normal or high (RFC 8030 §5.3)")
            }
            urgency = parsed
        }
        if let topic = seen["topic"], !WebPushRequest.isValidTopic(topic) {
            throw LocalWebPushRefusal(400, "invalid_topic", "Topic must be 1 to 32 characters of the base64url alphabet (RFC 8030 §5.4)")
        }
        return CheckedHeaders(subscription: id, ttl: ttl, urgency: urgency, topic: seen["topic"])
    }

    /// The headers whose repetition is refused.
    static let checkedHeaders: Set<String> = ["authorization", "content-encoding", "ttl", "urgency", "topic"]

    /// The fix for a VAPID refusal, in the sender's terms.
    static func vapidAdvice(_ refusal: WebPushError.VAPIDRefusal, origin: String) -> String {
        switch refusal {
        case .wrongAudience: return " (aud must be \(origin))"
        case .keyMismatch: return " (sign with the VAPID key the subscription was made for)"
        case .expiryTooFar, .expired, .missingExpiry: return " (exp must be in the future and at most 24 hours ahead)"
        default: return ""
        }
    }

    /// Check 8: a body of `size` bytes, `bytes` its first bytes (all of it when within the limit).
    public func checkBody(_ bytes: [UInt8], size: Int) throws(LocalWebPushRefusal) {
        guard size <= Self.maximumBodySize else {
            throw LocalWebPushRefusal(413, "payload_too_large", "the body is \(size) bytes, over the \(Self.maximumBodySize) a push service must accept (RFC 8030 §7.2)")
        }
        let header: (header: WebPushContentHeader, length: Int)
        do { header = try WebPushContentHeader.parse(bytes) } catch {
            throw LocalWebPushRefusal(400, "invalid_body", "the body is not an aes128gcm message: " + error.description)
        }
        guard bytes.count - header.length >= WebPushBody.recordOverhead else {
            throw LocalWebPushRefusal(400, "invalid_body", "the body holds an aes128gcm header but no record (a delimiter and a 16-byte tag at least)")
        }
    }

    /// The fault `--fail-rate` asks for, drawn for one otherwise accepted message: `500` or `503`, or `nil`.
    public func fault() -> LocalWebPushRefusal? {
        guard configuration.failRate > 0 else { return nil }
        var generator = SystemRandomNumberGenerator()
        guard Double.random(in: 0..<1, using: &generator) < configuration.failRate else { return nil }
        return Bool.random(using: &generator)
            ? LocalWebPushRefusal(500, "fault_injected", "internal error (--fail-rate): try again later")
            : LocalWebPushRefusal(503, "fault_injected", "service unavailable (--fail-rate): try again later")
    }

    /// Every check of a complete request, then the fault draw: the message to accept (with a new id), or the refusal.
    public func answer(method: String, path: String, headers: [(name: String, value: String)], body: [UInt8],
                       origin: String) -> Result<AcceptedWebPush, LocalWebPushRefusal> {
        do throws(LocalWebPushRefusal) {
            let checked = try checkHeaders(method: method, path: path, headers: headers, origin: origin)
            try checkBody(body, size: body.count)
            if let fault = fault() { throw fault }
            return .success(accept(checked, body: body))
        } catch {
            return .failure(error)
        }
    }

    /// The accepted message for `checked` headers and `body`, with a new message id.
    public func accept(_ checked: CheckedHeaders, body: [UInt8]) -> AcceptedWebPush {
        AcceptedWebPush(subscription: checked.subscription, messageID: Self.newMessageID(), body: body, ttl: checked.ttl,
                        urgency: checked.urgency, topic: checked.topic)
    }

    /// A random (version 4) UUID, lowercase.
    static func newMessageID() -> String {
        var generator = SystemRandomNumberGenerator()
        var bytes = (0..<16).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        bytes[6] = bytes[6] & 0x0F | 0x40
        bytes[8] = bytes[8] & 0x3F | 0x80
        let hex = bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
        let cut = [8, 12, 16, 20].map { hex.index(hex.startIndex, offsetBy: $0) }
        return [hex[..<cut[0]], hex[cut[0]..<cut[1]], hex[cut[1]..<cut[2]], hex[cut[2]..<cut[3]], hex[cut[3]...]].joined(separator: "-")
    }
}
