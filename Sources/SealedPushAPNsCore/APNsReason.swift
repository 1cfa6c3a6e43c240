/// Why APNs refused a push: the `reason` string of an APNs error response, one case per documented value.
///
/// Apple's provider API ("Handling notification responses from APNs") lists these reasons with the
/// status each comes with; `status` gives it. A reason this version does not know is kept as
/// `unknown(String)` rather than lost.
public enum APNsReason: Sendable, Hashable, CustomStringConvertible {
    /// 400: the collapse identifier exceeds the maximum allowed size.
    case badCollapseID
    /// 400: the device token is not a valid token for this environment or topic.
    case badDeviceToken
    /// 400: the `apns-expiration` value is not valid.
    case badExpirationDate
    /// 400: the `apns-id` value is not a valid UUID.
    case badMessageID
    /// 400: the `apns-priority` value is not valid.
    case badPriority
    /// 400: the `apns-topic` value is not valid.
    case badTopic
    /// 400: the device token does not match the topic.
    case deviceTokenNotForTopic
    /// 400: a header was given more than once.
    case duplicateHeaders
    /// 400: the connection was idle too long.
    case idleTimeout
    /// 400: the `apns-push-type` value is not valid.
    case invalidPushType
    /// 400: the path had no device token.
    case missingDeviceToken
    /// 400: `apns-topic` was required and not given.
    case missingTopic
    /// 400: the payload was empty.
    case payloadEmpty
    /// 400: pushing to this topic is not allowed.
    case topicDisallowed
    /// 403: the certificate is not valid.
    case badCertificate
    /// 403: the certificate is for the other environment.
    case badCertificateEnvironment
    /// 403: the provider token is stale; renew it.
    case expiredProviderToken
    /// 403: the action is not allowed.
    case forbidden
    /// 403: the provider token is not valid, or its signature does not verify.
    case invalidProviderToken
    /// 403: no provider certificate or token was given.
    case missingProviderToken
    /// 403: the key id in the token is not related to the team or topic.
    case unrelatedKeyIDInToken
    /// 403: the key id in the token is not valid for this environment.
    case badEnvironmentKeyIDInToken
    /// 404: the request path was not `/3/device/<token>`.
    case badPath
    /// 405: the method was not `POST`.
    case methodNotAllowed
    /// 410: the device token is no longer active for the topic (the response carries `timestamp`).
    case unregistered
    /// 410: the device token has expired.
    case expiredToken
    /// 413: the payload is over the size limit (4096 bytes for alerts).
    case payloadTooLarge
    /// 429: the provider token was changed too often.
    case tooManyProviderTokenUpdates
    /// 429: too many requests were sent to the same device token.
    case tooManyRequests
    /// 500: an internal server error.
    case internalServerError
    /// 503: the service is unavailable.
    case serviceUnavailable
    /// 503: the APNs server is shutting down.
    case shutdown
    /// A reason this version does not know, as APNs sent it.
    case unknown(String)

    /// Every documented reason (not `unknown`).
    public static let documented: [APNsReason] = [
        .badCollapseID, .badDeviceToken, .badExpirationDate, .badMessageID, .badPriority, .badTopic,
        .deviceTokenNotForTopic, .duplicateHeaders, .idleTimeout, .invalidPushType, .missingDeviceToken,
        .missingTopic, .payloadEmpty, .topicDisallowed, .badCertificate, .badCertificateEnvironment,
        .expiredProviderToken, .forbidden, .invalidProviderToken, .missingProviderToken, .unrelatedKeyIDInToken,
        .badEnvironmentKeyIDInToken, .badPath, .methodNotAllowed, .unregistered, .expiredToken, .payloadTooLarge,
        .tooManyProviderTokenUpdates, .tooManyRequests, .internalServerError, .serviceUnavailable, .shutdown,
    ]

    /// The reason for APNs's `reason` string (`unknown` when it is not a documented one).
    public init(rawValue: String) {
        self = APNsReason.byRawValue[rawValue] ?? .unknown(rawValue)
    }

    private static let byRawValue: [String: APNsReason] = Dictionary(
        uniqueKeysWithValues: documented.map { ($0.rawValue, $0) })

    /// The `reason` string APNs sends.
    public var rawValue: String {
        switch self {
        case .badCollapseID: "BadCollapseId"
        case .badDeviceToken: "BadDeviceToken"
        case .badExpirationDate: "BadExpirationDate"
        case .badMessageID: "BadMessageId"
        case .badPriority: "BadPriority"
        case .badTopic: "BadTopic"
        case .deviceTokenNotForTopic: "DeviceTokenNotForTopic"
        case .duplicateHeaders: "DuplicateHeaders"
        case .idleTimeout: "IdleTimeout"
        case .invalidPushType: "InvalidPushType"
        case .missingDeviceToken: "MissingDeviceToken"
        case .missingTopic: "MissingTopic"
        case .payloadEmpty: "PayloadEmpty"
        case .topicDisallowed: "TopicDisallowed"
        case .badCertificate: "BadCertificate"
        case .badCertificateEnvironment: "BadCertificateEnvironment"
        case .expiredProviderToken: "ExpiredProviderToken"
        case .forbidden: "Forbidden"
        case .invalidProviderToken: "InvalidProviderToken"
        case .missingProviderToken: "MissingProviderToken"
        case .unrelatedKeyIDInToken: "UnrelatedKeyIdInToken"
        case .badEnvironmentKeyIDInToken: "BadEnvironmentKeyIdInToken"
        case .badPath: "BadPath"
        case .methodNotAllowed: "MethodNotAllowed"
        case .unregistered: "Unregistered"
        case .expiredToken: "ExpiredToken"
        case .payloadTooLarge: "PayloadTooLarge"
        case .tooManyProviderTokenUpdates: "TooManyProviderTokenUpdates"
        case .tooManyRequests: "TooManyRequests"
        case .internalServerError: "InternalServerError"
        case .serviceUnavailable: "ServiceUnavailable"
        case .shutdown: "Shutdown"
        case let .unknown(raw): raw
        }
    }

    /// The HTTP status APNs answers this reason with (`0` for `unknown`).
    public var status: Int {
        switch self {
        case .badCollapseID, .badDeviceToken, .badExpirationDate, .badMessageID, .badPriority, .badTopic,
             .deviceTokenNotForTopic, .duplicateHeaders, .idleTimeout, .invalidPushType, .missingDeviceToken,
             .missingTopic, .payloadEmpty, .topicDisallowed:
            400
        case .badCertificate, .badCertificateEnvironment, .expiredProviderToken, .forbidden, .invalidProviderToken,
             .missingProviderToken, .unrelatedKeyIDInToken, .badEnvironmentKeyIDInToken:
            403
        case .badPath: 404
        case .methodNotAllowed: 405
        case .unregistered, .expiredToken: 410
        case .payloadTooLarge: 413
        case .tooManyProviderTokenUpdates, .tooManyRequests: 429
        case .internalServerError: 500
        case .serviceUnavailable, .shutdown: 503
        case .unknown: 0
        }
    }

    /// Whether the provider should stop sending to this device token: `Unregistered`, `ExpiredToken`,
    /// `BadDeviceToken` and `DeviceTokenNotForTopic` (remove the token, or re-register the device).
    public var stopSendingToToken: Bool {
        switch self {
        case .unregistered, .expiredToken, .badDeviceToken, .deviceTokenNotForTopic: true
        default: false
        }
    }

    /// The reason string.
    public var description: String { rawValue }
}
