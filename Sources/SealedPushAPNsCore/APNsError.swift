/// Everything that can go wrong delivering a push through APNs, one case per kind of failure.
public enum APNsError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The auth key file (`.p8`), key id or team id is missing, unreadable, readable by others, or not a P-256 key.
    case authKey(String)
    /// A request was refused before sending: device token, topic, collapse id or payload size.
    case invalidRequest(String)
    /// APNs answered with an error status and reason (after any retries the reason allows).
    case rejected(APNsRejection)
    /// The server's TLS certificate is not trusted (a local APNs: pass its CA certificate).
    case untrustedServer(String)
    /// No answer within the per-request deadline, on every try.
    case timedOut(tries: Int)
    /// The connection failed on every try (refused, reset, closed, TLS handshake failed).
    case connection(String, tries: Int)
    /// The client was shut down before the push could be sent.
    case shutDown

    /// What happened and what to do, without secrets.
    public var description: String {
        switch self {
        case let .authKey(message): return message
        case let .invalidRequest(message): return message
        case let .rejected(rejection): return rejection.description
        case let .untrustedServer(message): return message
        case let .timedOut(tries): return "APNs did not answer within the deadline (\(tries) \(tries == 1 ? "try" : "tries")); check the network or raise the timeout"
        case let .connection(message, tries): return "could not reach APNs (\(tries) \(tries == 1 ? "try" : "tries")): \(message)"
        case .shutDown: return "the APNs client was shut down before the push was sent"
        }
    }
}

/// An APNs error response: status, reason, and for `410` the time APNs last knew the token was valid.
public struct APNsRejection: Sendable, Equatable, CustomStringConvertible {
    /// The HTTP status.
    public let status: Int
    /// The `reason` of the JSON body.
    public let reason: APNsReason
    /// The `apns-id` of the response, when given.
    public let apnsID: String?
    /// For `410`: milliseconds since the Unix epoch when APNs confirmed the token was no longer valid.
    public let timestamp: Int64?

    /// A rejection from its parts.
    public init(status: Int, reason: APNsReason, apnsID: String? = nil, timestamp: Int64? = nil) {
        self.status = status
        self.reason = reason
        self.apnsID = apnsID
        self.timestamp = timestamp
    }

    /// Whether the provider should stop sending to the device token (see `APNsReason.stopSendingToToken`).
    public var stopSendingToToken: Bool { reason.stopSendingToToken }

    /// `APNs refused the push: 410 Unregistered (stop sending to this device token)`.
    public var description: String {
        var s = "APNs refused the push: \(status) \(reason.rawValue)"
        if stopSendingToToken { s += " (stop sending to this device token)" }
        return s
    }
}
