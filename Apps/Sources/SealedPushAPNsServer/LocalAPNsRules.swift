public import Crypto
public import SealedPushAPNsCore
import SealedPushAPNs
import NIOConcurrencyHelpers
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// What a local APNs knows and how it misbehaves on purpose.
public struct LocalAPNsConfiguration: Sendable {
    /// A provider key the server accepts tokens from: its key id, team, public key and allowed topics.
    public struct ProviderKey: Sendable {
        /// The key id (`kid`).
        public var keyID: String
        /// The team id the key belongs to (`iss`).
        public var teamID: String
        /// The public half of the `.p8` key.
        public var publicKey: P256.Signing.PublicKey
        /// The topics (bundle ids) this key may push to.
        public var topics: Set<String>

        /// A key from its parts.
        public init(keyID: String, teamID: String, publicKey: P256.Signing.PublicKey, topics: Set<String>) {
            self.keyID = keyID
            self.teamID = teamID
            self.publicKey = publicKey
            self.topics = topics
        }
    }

    /// Where to listen (`127.0.0.1` by default; port 0 picks a free one).
    public var host: String
    /// The port (APNs uses 443 and 2197).
    public var port: Int
    /// The keys tokens must be signed with.
    public var keys: [ProviderKey]
    /// Known device tokens (lowercase hex) and the topic each belongs to.
    public var devices: [String: String]
    /// Accept (and drop) pushes to unknown tokens instead of answering BadDeviceToken.
    public var acceptUnknownTokens: Bool
    /// More than this many pushes to one token within a second answer 429 TooManyRequests (0: no limit).
    public var maxPushesPerTokenPerSecond: Int
    /// The fraction of otherwise valid pushes answered 500 InternalServerError or 503 ServiceUnavailable.
    public var failRate: Double
    /// Added before every answer.
    public var latency: Duration
    /// Send GOAWAY on a connection once this many of its requests are complete (`nil`: never). The GOAWAY names
    /// the highest stream processed so far; streams at or below it are all answered, streams above it are not
    /// processed (reset with REFUSED_STREAM), and the connection closes once the former are done.
    public var goawayAfter: Int?
    /// The SETTINGS_MAX_CONCURRENT_STREAMS the server announces.
    public var maxConcurrentStreams: Int
    /// Provider tokens older than this are answered ExpiredProviderToken (Apple: one hour).
    public var tokenMaxAge: Int64
    /// A connection may change its token at most once in this many seconds (Apple: 20 minutes).
    public var tokenUpdateInterval: Int64
    /// The wall clock in milliseconds since the Unix epoch; tests inject one.
    public var nowMilliseconds: @Sendable () -> Int64
    /// The most connections open at once; a connection past it is closed as soon as it is accepted.
    public var maxConnections: Int = 256
    /// A connection whose TLS handshake is not done within this is closed.
    public var handshakeTimeout: Duration = .seconds(10)
    /// A connection with no stream open for this long is sent GOAWAY and closed.
    public var idleTimeout: Duration = .seconds(600)
    /// A request whose headers and body have not all arrived within this is reset.
    public var requestTimeout: Duration = .seconds(30)

    /// A configuration: loopback, no devices, no faults, Apple's token rules.
    public init(host: String = "127.0.0.1", port: Int = 2197, keys: [ProviderKey] = [], devices: [String: String] = [:],
                acceptUnknownTokens: Bool = false, maxPushesPerTokenPerSecond: Int = 0, failRate: Double = 0,
                latency: Duration = .zero, goawayAfter: Int? = nil, maxConcurrentStreams: Int = 1000,
                tokenMaxAge: Int64 = 3600, tokenUpdateInterval: Int64 = 20 * 60,
                nowMilliseconds: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970 * 1000) }) {
        self.host = host
        self.port = port
        self.keys = keys
        self.devices = devices
        self.acceptUnknownTokens = acceptUnknownTokens
        self.maxPushesPerTokenPerSecond = maxPushesPerTokenPerSecond
        self.failRate = failRate
        self.latency = latency
        self.goawayAfter = goawayAfter
        self.maxConcurrentStreams = maxConcurrentStreams
        self.tokenMaxAge = tokenMaxAge
        self.tokenUpdateInterval = tokenUpdateInterval
        self.nowMilliseconds = nowMilliseconds
    }
}

/// One request as the local APNs received it.
public struct LocalAPNsRequest: Sendable {
    /// The HTTP method.
    public var method: String
    /// The path.
    public var path: String
    /// The headers, in order, names lowercase.
    public var headers: [(name: String, value: String)]
    /// The body (the payload).
    public var body: [UInt8]

    /// A request from its parts.
    public init(method: String, path: String, headers: [(name: String, value: String)], body: [UInt8]) {
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
    }
}

/// A push the local APNs accepted: what a device would receive.
public struct AcceptedPush: Sendable {
    /// The device token (lowercase hex).
    public let deviceToken: String
    /// `apns-topic`.
    public let topic: String
    /// The payload bytes exactly as received.
    public let payload: [UInt8]
    /// The `apns-id` answered.
    public let apnsID: String
    /// `apns-expiration` (0 when absent).
    public let expiration: Int64
    /// `apns-collapse-id`, if any.
    public let collapseID: String?
    /// Whether the token is a registered device (false: accepted and dropped under `acceptUnknownTokens`).
    public let deviceKnown: Bool

    /// The notification request identifier iOS gives the notification: the collapse id when the push had
    /// one, else its `apns-id` (spec/device-outcomes.md, "Replays").
    public var requestIdentifier: String { collapseID ?? apnsID }

    /// An accepted push from its parts.
    public init(deviceToken: String, topic: String, payload: [UInt8], apnsID: String, expiration: Int64, collapseID: String?,
                deviceKnown: Bool) {
        self.deviceToken = deviceToken
        self.topic = topic
        self.payload = payload
        self.apnsID = apnsID
        self.expiration = expiration
        self.collapseID = collapseID
        self.deviceKnown = deviceKnown
    }
}

/// The local APNs's answer to one request.
public enum LocalAPNsAnswer: Sendable {
    /// 200 with the `apns-id` and `apns-unique-id`.
    case accepted(AcceptedPush, uniqueID: String)
    /// An error status with its reason (and a millisecond timestamp for 410).
    case rejected(APNsReason, apnsID: String?, timestamp: Int64?)
}

/// The per-connection part of the token rules (the last token seen and when it last changed), and the
/// connection's `goawayAfter` bookkeeping.
public final class LocalAPNsConnection: Sendable {
    struct State {
        var token: String?
        var claims: ProviderTokenClaims?
        var tokenChangedAt: Int64 = 0
        var requests = 0
        /// The highest stream id whose request was processed (handed to the rules).
        var highestProcessed = 0
        /// The last stream id of the GOAWAY `goawayAfter` sent, once sent.
        var goawayLastStreamID: Int?
        /// Streams whose request has not been answered (or reset) yet.
        var unanswered: Set<Int> = []
    }

    /// What to do with a complete request.
    enum Admission: Equatable {
        /// Process it; `goawayLastStreamID` is set when it is the `goawayAfter`-th and GOAWAY must now go out.
        case process(goawayLastStreamID: Int?)
        /// Reset it with REFUSED_STREAM: it is above the GOAWAY's last stream id, so it must not be processed.
        case refuse
    }

    let state = NIOLockedValueBox(State())

    /// A new connection's state.
    public init() {}

    /// A stream was opened: its request is now awaited.
    func streamOpened(_ id: Int) {
        _ = state.withLockedValue { $0.unanswered.insert(id) }
    }

    /// Decides over the complete request of stream `id`. The GOAWAY's last stream id is the highest stream
    /// processed so far (this one included), never merely the one that completed last: with requests completing
    /// out of order, lower streams may still be waiting for their DATA, and RFC 9113 §6.8 lets the client
    /// assume those may be processed — so they are, and only streams above it are refused.
    func admit(_ id: Int, goawayAfter: Int?) -> Admission {
        state.withLockedValue { c in
            if let last = c.goawayLastStreamID {
                // Counting stops with the GOAWAY: `requests` only decides when it goes out.
                return id <= last ? .process(goawayLastStreamID: nil) : .refuse
            }
            c.requests += 1
            c.highestProcessed = max(c.highestProcessed, id)
            if let goawayAfter, c.requests >= goawayAfter {
                c.goawayLastStreamID = c.highestProcessed
                return .process(goawayLastStreamID: c.highestProcessed)
            }
            return .process(goawayLastStreamID: nil)
        }
    }

    /// Stream `id` was answered (its response written to the socket) or ended without an answer. `true` when
    /// the connection went away and every stream at or below its GOAWAY's last stream id is now done: it may close.
    func streamEnded(_ id: Int) -> Bool {
        state.withLockedValue { c in
            guard c.unanswered.remove(id) != nil, let last = c.goawayLastStreamID else { return false }
            return !c.unanswered.contains { $0 <= last }
        }
    }

    /// Whether `goawayAfter` sent its GOAWAY: the connection is draining and closes itself.
    var goingAway: Bool { state.withLockedValue { $0.goawayLastStreamID != nil } }
}

/// APNs's checks, in order, over one request: the part of the local APNs that is not networking.
///
/// Order: method, path and token format, duplicate headers, `apns-id`, provider token (present, valid,
/// signed by a registered key of the team, not older than an hour, not changed on the connection within
/// 20 minutes), topic, push type, priority, expiration, collapse id, payload, then the device token's state
/// (unregistered, unknown, other topic), the per-token rate and the injected failure rate.
public final class LocalAPNsRules: Sendable {
    /// The configuration.
    public let configuration: LocalAPNsConfiguration
    let keys: [String: LocalAPNsConfiguration.ProviderKey]

    struct Shared {
        var unregistered: [String: Int64] = [:]
        var recent: [String: (second: Int64, count: Int)] = [:]
        var accepted = 0
        var rejected: [String: Int] = [:]
        /// Phones switched off, and the one push each holds (APNs keeps only the last one per app).
        var off: [String: AcceptedPush?] = [:]
    }

    let shared = NIOLockedValueBox(Shared())

    /// Switches the phone with `token` off: pushes to it are still accepted (200), but none reaches it; the local
    /// APNs keeps only the last one, as APNs keeps one push per app for a phone it cannot reach.
    public func switchOff(_ token: String) {
        shared.withLockedValue { $0.off[token.lowercased()] = .some(nil) }
    }

    /// Switches the phone with `token` on again; the one push kept for it while it was off, if any (the caller
    /// hands it to the phone).
    @discardableResult
    public func switchOn(_ token: String) -> AcceptedPush? {
        shared.withLockedValue { $0.off.removeValue(forKey: token.lowercased()) ?? nil }
    }

    /// Whether an accepted `push` reaches its phone now: `false` when the phone is off, and the push is kept instead
    /// (replacing the one kept before).
    public func reachesPhone(_ push: AcceptedPush) -> Bool {
        shared.withLockedValue { shared in
            guard shared.off[push.deviceToken] != nil else { return true }
            shared.off[push.deviceToken] = .some(push)
            return false
        }
    }

    /// Rules for `configuration`.
    public init(configuration: LocalAPNsConfiguration) {
        self.configuration = configuration
        keys = Dictionary(configuration.keys.map { ($0.keyID, $0) }, uniquingKeysWith: { _, last in last })
    }

    /// Marks `token` unregistered from now on (as when the app is removed from the phone): later pushes
    /// answer 410 Unregistered with this time.
    public func unregister(_ token: String, at milliseconds: Int64? = nil) {
        let t = milliseconds ?? configuration.nowMilliseconds()
        shared.withLockedValue { $0.unregistered[token.lowercased()] = t }
    }

    /// How many pushes were accepted, and how many refused per reason.
    public var counts: (accepted: Int, rejected: [String: Int]) {
        shared.withLockedValue { ($0.accepted, $0.rejected) }
    }

    /// Applies APNs's checks to `request` arriving on `connection`.
    public func answer(_ request: LocalAPNsRequest, on connection: LocalAPNsConnection,
                       random: () -> Double = { Double.random(in: 0..<1) }) -> LocalAPNsAnswer {
        let answer = evaluate(request, on: connection, random: random)
        shared.withLockedValue { s in
            switch answer {
            case .accepted: s.accepted += 1
            case let .rejected(reason, _, _): s.rejected[reason.rawValue, default: 0] += 1
            }
        }
        return answer
    }

    func evaluate(_ request: LocalAPNsRequest, on connection: LocalAPNsConnection, random: () -> Double) -> LocalAPNsAnswer {
        func header(_ name: String) -> String? { request.headers.first { $0.name == name }?.value }
        let requestID = header("apns-id")
        func reject(_ reason: APNsReason, timestamp: Int64? = nil) -> LocalAPNsAnswer {
            .rejected(reason, apnsID: requestID.flatMap { APNsPush.isValidAPNsID($0) ? $0 : nil }, timestamp: timestamp)
        }
        // 1. Method and path.
        guard request.method == "POST" else { return reject(.methodNotAllowed) }
        let prefix = "/3/device/"
        guard request.path.hasPrefix(prefix) else { return reject(.badPath) }
        let token = String(request.path.dropFirst(prefix.count))
        guard !token.isEmpty else { return reject(.missingDeviceToken) }
        guard APNsPush.isValidDeviceToken(token) else { return reject(.badDeviceToken) }
        // 2. Headers given twice.
        var seen = Set<String>()
        for (name, _) in request.headers where name.hasPrefix("apns-") || name == "authorization" {
            guard seen.insert(name).inserted else { return reject(.duplicateHeaders) }
        }
        // 3. apns-id.
        if let requestID, !APNsPush.isValidAPNsID(requestID) { return .rejected(.badMessageID, apnsID: nil, timestamp: nil) }
        // 4. The provider token.
        guard let authorization = header("authorization") else { return reject(.missingProviderToken) }
        guard authorization.lowercased().hasPrefix("bearer ") else { return reject(.invalidProviderToken) }
        let jwt = String(authorization.dropFirst("bearer ".count))
        // The connection's current token was verified when it arrived: its signature is not checked again
        // (an ES256 verification per push would be most of the server's work), its age is.
        let claims: ProviderTokenClaims
        if let known = connection.state.withLockedValue({ $0.token == jwt ? $0.claims : nil }) {
            claims = known
        } else {
            switch ProviderToken.verify(jwt, publicKey: { keys[$0]?.publicKey }, teamOf: { keys[$0]?.teamID }) {
            case let .success(c): claims = c
            case .failure(.unrelatedKey): return reject(.unrelatedKeyIDInToken)
            case .failure(.invalid): return reject(.invalidProviderToken)
            }
        }
        let now = configuration.nowMilliseconds()
        let nowSeconds = now / 1000
        if nowSeconds - claims.issuedAt > configuration.tokenMaxAge { return reject(.expiredProviderToken) }
        if claims.issuedAt - nowSeconds > 300 { return reject(.invalidProviderToken) }  // issued in the future
        let tooManyUpdates: Bool = connection.state.withLockedValue { c in
            guard c.token != jwt else { return false }
            if c.token != nil && nowSeconds - c.tokenChangedAt < configuration.tokenUpdateInterval { return true }
            c.token = jwt
            c.claims = claims
            c.tokenChangedAt = nowSeconds
            return false
        }
        if tooManyUpdates { return reject(.tooManyProviderTokenUpdates) }
        // 5. Topic, push type, priority, expiration, collapse id.
        guard let topic = header("apns-topic"), !topic.isEmpty else { return reject(.missingTopic) }
        guard let key = keys[claims.keyID], key.topics.contains(topic) else { return reject(.topicDisallowed) }
        if let pushType = header("apns-push-type"), APNsPushType(rawValue: pushType) == nil { return reject(.invalidPushType) }
        if let priority = header("apns-priority"), !["1", "5", "10"].contains(priority) { return reject(.badPriority) }
        var expiration: Int64 = 0
        if let text = header("apns-expiration") {
            guard let value = Int64(text), value >= 0 else { return reject(.badExpirationDate) }
            expiration = value
        }
        let collapseID = header("apns-collapse-id")
        if let collapseID, APNsHeaderRules.collapseIDProblem(collapseID) != nil { return reject(.badCollapseID) }
        // 6. The payload.
        guard !request.body.isEmpty else { return reject(.payloadEmpty) }
        guard request.body.count <= APNsPush.maximumPayloadSize else { return reject(.payloadTooLarge) }
        // 7. The device token's state.
        let lowerToken = token.lowercased()
        if let since = shared.withLockedValue({ $0.unregistered[lowerToken] }) { return reject(.unregistered, timestamp: since) }
        let deviceTopic = configuration.devices[lowerToken]
        if deviceTopic == nil && !configuration.acceptUnknownTokens { return reject(.badDeviceToken) }
        if let deviceTopic, deviceTopic != topic { return reject(.deviceTokenNotForTopic) }
        // 8. Rate per token, then injected failures.
        if configuration.maxPushesPerTokenPerSecond > 0 {
            let limited: Bool = shared.withLockedValue { s in
                var entry = s.recent[lowerToken] ?? (second: nowSeconds, count: 0)
                if entry.second != nowSeconds { entry = (nowSeconds, 0) }
                entry.count += 1
                s.recent[lowerToken] = entry
                return entry.count > configuration.maxPushesPerTokenPerSecond
            }
            if limited { return reject(.tooManyRequests) }
        }
        if configuration.failRate > 0, random() < configuration.failRate {
            return reject(random() < 0.5 ? .internalServerError : .serviceUnavailable)
        }
        let apnsID = requestID?.lowercased() ?? APNsID.random()
        let push = AcceptedPush(deviceToken: lowerToken, topic: topic, payload: request.body, apnsID: apnsID,
                                expiration: expiration, collapseID: collapseID, deviceKnown: deviceTopic != nil)
        return .accepted(push, uniqueID: APNsID.random())
    }
}
