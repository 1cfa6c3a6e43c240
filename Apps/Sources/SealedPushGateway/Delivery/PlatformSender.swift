import SealedPushAPNs
import SealedPushAPNsCore

/// What one push service answered to one attempt, in the gateway's terms (platforms v1 §2–§3, gateway v1 §6):
/// the delivery worker turns it into an `AttemptOutcome` (backoff, the drain) the same way for every platform.
enum PushAnswer: Sendable, Equatable {
    /// Taken: `platformID` is the service's id for the message, if it gave one.
    case accepted(status: Int, platformID: String?)
    /// The address is gone: the delivery ends `unregistered` and so does the device, unless it registered again
    /// at or after `registeredBefore` (APNs's 410 timestamp; the attempt's start for services that give none; nil:
    /// when the outcome is written).
    case unregistered(status: Int?, reason: String, registeredBefore: Int64?)
    /// Refused for good (`attempted`: a request was made).
    case rejected(status: Int?, reason: String, attempted: Bool)
    /// Try again after backoff, and not before `retryAfter` when the service said so.
    case retry(status: Int?, reason: String, retryAfter: Duration?)
    /// The app's credentials for this service were refused: its deliveries wait until it is fixed.
    case paused(status: Int?, reason: String)
    /// Not attempted, and not counted: the delivery waits `retryAfter` (its Web Push origin is paused).
    case held(reason: String, retryAfter: Duration)
    /// Not attempted (shutdown): the delivery goes back untouched.
    case handBack

    /// The status and reason `sealedpush_push_requests_total` counts it under (`none`: no HTTP answer).
    var counted: (status: String, reason: String) {
        switch self {
        case let .accepted(status, _): (String(status), "")
        case let .unregistered(status, reason, _), let .rejected(status, reason, _), let .retry(status, reason, _), let .paused(status, reason):
            (status.map(String.init) ?? "none", reason)
        case let .held(reason, _): ("none", reason)
        case .handBack: ("none", "shutdown")
        }
    }

    /// Whether a request reached the service (an answer without one, a handed-back attempt, is not counted).
    var madeRequest: Bool {
        switch self {
        case .handBack, .held: false
        case let .rejected(_, _, attempted): attempted
        default: true
        }
    }
}

/// One app's push service as the delivery worker sends through it: APNs, FCM or Web Push. Each sends a claimed
/// delivery's stored payload as its platform wants it and says what came of it; none decides a delivery's
/// state (that is `DeliveryStateMachine`'s, the same for every platform).
protocol PlatformSender: Sendable {
    /// Sends one claimed delivery (`now`: Unix milliseconds at the start of the attempt).
    func send(_ claim: ClaimedDelivery, now: Int64) async -> PushAnswer
    /// Releases its connections; attempts still in flight end `handBack`.
    func shutdown() async
}

/// APNs through the app's `APNsSending` clients, one per environment.
struct APNsPlatformSender: PlatformSender {
    let clients: [APNsEnvironmentName: any APNsSending]
    let topic: String

    func send(_ claim: ClaimedDelivery, now: Int64) async -> PushAnswer {
        guard let client = clients[claim.environment] else { return .handBack }
        let push = APNsPush(deviceToken: claim.address, payload: claim.payload, pushType: .alert, priority: claim.priority,
                            topic: topic, expiration: claim.apnsExpiration, collapseID: claim.collapseID, apnsID: claim.apnsID)
        do {
            _ = try await client.send(push)
            return .accepted(status: 200, platformID: nil)
        } catch {
            return Self.classify(error, now: now)
        }
    }

    func shutdown() async {
        for client in clients.values { await (client as? APNsClient)?.shutdown() }
    }

    /// The status and reason an error is counted under.
    static func describe(_ error: APNsError) -> (Int?, String) {
        switch error {
        case let .rejected(r): (r.status, "\(r.reason)")
        case .timedOut: (nil, "timeout")
        case .connection: (nil, "connection")
        case .untrustedServer: (nil, "untrusted_server")
        case .authKey: (nil, "auth_key")
        case .invalidRequest: (nil, "invalid_request")
        case .shutDown: (nil, "shutdown")
        }
    }

    /// What an APNs error means for the delivery (gateway v1 §6).
    static func classify(_ error: APNsError, now: Int64) -> PushAnswer {
        let (status, reason) = describe(error)
        switch error {
        case .shutDown:
            return .handBack
        case .timedOut, .connection:
            return .retry(status: nil, reason: reason, retryAfter: nil)
        case .untrustedServer, .authKey:
            return .paused(status: nil, reason: reason)
        case .invalidRequest:
            return .rejected(status: nil, reason: reason, attempted: false)
        case let .rejected(r):
            // The 410 timestamp rule (gateway v1 §4): only a device whose token was registered before APNs saw it gone.
            let gone = PushAnswer.unregistered(status: status, reason: reason, registeredBefore: r.status == 410 ? r.timestamp : nil)
            switch r.reason {
            case .unregistered, .expiredToken, .badDeviceToken, .deviceTokenNotForTopic:
                return gone
            case .invalidProviderToken, .badCertificate, .badCertificateEnvironment, .forbidden, .topicDisallowed,
                 .missingProviderToken, .unrelatedKeyIDInToken, .badEnvironmentKeyIDInToken:
                return .paused(status: status, reason: reason)
            case .expiredProviderToken, .tooManyRequests, .tooManyProviderTokenUpdates, .internalServerError, .serviceUnavailable, .shutdown:
                return .retry(status: status, reason: reason, retryAfter: nil)
            default:
                if r.status == 410 { return gone }
                if [429, 500, 503].contains(r.status) { return .retry(status: status, reason: reason, retryAfter: nil) }
                return .rejected(status: status, reason: reason, attempted: true)
            }
        }
    }
}
