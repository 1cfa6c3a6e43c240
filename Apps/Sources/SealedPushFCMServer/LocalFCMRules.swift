public import _CryptoExtras
import Crypto
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import SealedPushFCM
import SealedPushCrypto
import SealedPushWire
import Synchronization

/// What a local FCM checks requests against: the service account it trusts, the devices it knows, and its faults.
public struct LocalFCMConfiguration: Sendable {
    /// The Firebase project messages must be sent for (the service account's `project_id`).
    public var projectID: String
    /// The service account's `client_email`: the `iss` every assertion must have.
    public var clientEmail: String
    /// The service account's `token_uri`: the `aud` every assertion must have (checked whatever URL the server has).
    public var tokenURI: String
    /// The service account's `private_key_id`: an assertion's `kid`, when it has one, must be this.
    public var privateKeyID: String
    /// The public half of the service account's key: what assertions are verified with.
    public var publicKey: _RSA.Signing.PublicKey
    /// The registration tokens of the simulated devices (accepted messages are handed to them).
    public var devices: Set<String>
    /// Tokens answered `404 UNREGISTERED` (the app was uninstalled, the token expired).
    public var unregistered: Set<String>
    /// Tokens answered `403 SENDER_ID_MISMATCH` (registered to another Firebase project).
    public var senderMismatch: Set<String>
    /// Accept (and drop) messages to tokens that are not `devices`, instead of answering `404 UNREGISTERED`.
    public var acceptUnknownTokens: Bool
    /// The fraction (0…1) of the messages it would accept answered `503 UNAVAILABLE` instead.
    public var failRate: Double
    /// The `Retry-After` seconds of a `503`, or `nil` for none.
    public var retryAfterSeconds: Int?
    /// How long an access token is valid, in seconds (`expires_in`).
    public var accessTokenLifetime: Int64
    /// The most access tokens remembered; the oldest go first (a client asks for one an hour).
    public var maximumAccessTokens: Int
    /// The wall clock, Unix seconds (assertion times, token expiry); tests inject one.
    public var now: @Sendable () -> Int64

    /// A configuration trusting `serviceAccount` (only its public key and names are kept).
    public init(serviceAccount: FCMServiceAccount, devices: Set<String> = [], unregistered: Set<String> = [],
                senderMismatch: Set<String> = [], acceptUnknownTokens: Bool = false, failRate: Double = 0,
                retryAfterSeconds: Int? = nil, accessTokenLifetime: Int64 = 3600, maximumAccessTokens: Int = 10_000,
                now: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }) {
        projectID = serviceAccount.projectID
        clientEmail = serviceAccount.clientEmail
        tokenURI = serviceAccount.tokenURI
        privateKeyID = serviceAccount.privateKeyID
        publicKey = serviceAccount.publicKey
        self.devices = devices
        self.unregistered = unregistered
        self.senderMismatch = senderMismatch
        self.acceptUnknownTokens = acceptUnknownTokens
        self.failRate = failRate
        self.retryAfterSeconds = retryAfterSeconds
        self.accessTokenLifetime = accessTokenLifetime
        self.maximumAccessTokens = maximumAccessTokens
        self.now = now
    }
}

/// One HTTP request as the rules see it.
public struct LocalFCMRequest: Sendable {
    /// `POST`, `GET`, …
    public var method: String
    /// The path, without the query.
    public var path: String
    /// Header fields, names in lower case.
    public var headers: [String: String]
    /// The body (at most `LocalFCMRules.maximumBodyBytes`).
    public var body: [UInt8]
    /// Whether the body went on past `LocalFCMRules.maximumBodyBytes`.
    public var bodyTooLarge: Bool

    /// A request from its parts.
    public init(method: String, path: String, headers: [String: String], body: [UInt8], bodyTooLarge: Bool = false) {
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
        self.bodyTooLarge = bodyTooLarge
    }
}

/// A message the local FCM accepted (`200 {"name"}`), to be handed to the device that holds its token.
public struct AcceptedFCMMessage: Sendable, Equatable {
    /// The registration token it was sent to (never log it whole: `tokenSuffix`).
    public let token: String
    /// `message.data`, in the order sent.
    public let data: [(key: String, value: String)]
    /// The `name` answered: `projects/{project}/messages/{id}`.
    public let name: String
    /// `android.collapse_key`, if given.
    public let collapseKey: String?
    /// `android.priority`, if given (`HIGH` or `NORMAL`).
    public let priority: String?
    /// `android.ttl` in seconds, if given.
    public let ttlSeconds: Int64?
    /// Whether a simulated device holds the token (else it was accepted under `acceptUnknownTokens` and is dropped).
    public let deviceKnown: Bool

    /// The token's last 8 characters: what logs and outcome lines show.
    public var tokenSuffix: String { String(token.suffix(8)) }

    /// Members compared in order.
    public static func == (lhs: AcceptedFCMMessage, rhs: AcceptedFCMMessage) -> Bool {
        lhs.token == rhs.token && lhs.name == rhs.name && lhs.collapseKey == rhs.collapseKey && lhs.priority == rhs.priority
            && lhs.ttlSeconds == rhs.ttlSeconds && lhs.deviceKnown == rhs.deviceKnown
            && lhs.data.count == rhs.data.count && zip(lhs.data, rhs.data).allSatisfy { $0.key == $1.key && $0.value == $1.value }
    }
}

/// The answer to one request: status, headers, JSON body, and the message accepted, if any.
public struct LocalFCMAnswer: Sendable {
    /// The HTTP status.
    public var status: Int
    /// Header fields besides `content-type: application/json; charset=UTF-8` (e.g. `retry-after`).
    public var headers: [(name: String, value: String)]
    /// The JSON body.
    public var body: [UInt8]
    /// The message accepted (status 200 of `messages:send`).
    public var accepted: AcceptedFCMMessage?
    /// What the log line says about it: `token`, `message`, or the error's `errorCode`/`status`/`error`.
    public var summary: String
    /// The last 8 characters of the registration token the message was for, once the message's shape was read.
    public var tokenSuffix: String? = nil
}

/// FCM HTTP v1's checks and answers (platforms v1 §2, §5), independent of the server around them:
///
/// - `POST /token`: a form `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=<jwt>`; the assertion is
///   verified with `FCMAssertion.verify` (RS256 under the service account's public key, `iss`, `scope`, `aud` = the
///   account's `token_uri`, `iat` within the hour, `exp`) and its `kid`; `200 {"access_token", "expires_in",
///   "token_type": "Bearer"}`, else Google's `400 {"error": "invalid_grant" | "invalid_request" |
///   "unsupported_grant_type", "error_description"}`.
/// - `POST /v1/projects/{project}/messages:send`: the bearer token (one this server issued and not expired, else
///   `401 UNAUTHENTICATED`), the project (else `403 PERMISSION_DENIED`), the message's shape as SealedPush sends it
///   (else `400 INVALID_ARGUMENT` naming the field), then the token (`404 UNREGISTERED`, `403 SENDER_ID_MISMATCH`),
///   the fail rate (`503 UNAVAILABLE`); `200 {"name": "projects/{project}/messages/{id}"}`.
///
/// Errors are FCM's JSON: `{"error": {"code", "message", "status", "details": [{"@type":
/// "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode"}, {"@type":
/// "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": [{"field", "description"}]}]}}` — a shape error
/// names its field, so `FCMAnswer.classify` tells it (`rejected`) from a bad registration token (`unregistered`).
///
/// Access tokens are kept only as SHA-256 digests. Nothing here logs; `summary` never holds a token.
public final class LocalFCMRules: Sendable {
    /// The configuration.
    public let configuration: LocalFCMConfiguration
    /// The most body bytes read from a request (FCM's own limit is far above any message SealedPush sends).
    public static let maximumBodyBytes = 64 * 1024
    /// The grant type of a JWT-bearer token request (RFC 7523).
    public static let grantType = "urn:ietf:params:oauth:grant-type:jwt-bearer"
    /// Data keys FCM refuses: `from`, `notification`, `message_type`, and anything starting `google.` or `gcm.`.
    public static let reservedDataKeys: Set<String> = ["from", "notification", "message_type"]

    struct State {
        /// SHA-256 of each issued access token (hex) → when it expires (Unix seconds), oldest first.
        var tokens: [(digest: String, expiresAt: Int64)] = []
        var unregistered: Set<String>
        var counts = Counts()
    }

    /// What the rules answered so far.
    public struct Counts: Sendable, Equatable {
        /// Access tokens issued.
        public var tokensIssued = 0
        /// Assertions refused.
        public var assertionsRefused = 0
        /// Messages accepted.
        public var accepted = 0
        /// `messages:send` requests refused (any non-200).
        public var refused = 0
    }

    let state: Mutex<State>

    /// Rules with `configuration`.
    public init(configuration: LocalFCMConfiguration) {
        self.configuration = configuration
        state = Mutex(State(unregistered: configuration.unregistered))
    }

    /// Answers `404 UNREGISTERED` for `token` from now on (an app uninstalled while the server runs).
    public func unregister(_ token: String) {
        state.withLock { _ = $0.unregistered.insert(token) }
    }

    /// What was answered so far.
    public var counts: Counts { state.withLock { $0.counts } }

    /// The answer to `request`.
    public func answer(_ request: LocalFCMRequest) -> LocalFCMAnswer {
        if request.path == "/token" {
            guard request.method == "POST" else {
                return Self.oauthError(405, "invalid_request", "the token endpoint takes POST")
            }
            return tokenAnswer(request)
        }
        let parts = request.path.split(separator: "/", omittingEmptySubsequences: false)
        // "", "v1", "projects", "{project}", "messages:send"
        guard parts.count == 5, parts[0].isEmpty, parts[1] == "v1", parts[2] == "projects", parts[4] == "messages:send" else {
            return Self.fcmError(404, "NOT_FOUND", "The requested URL \(Self.printable(request.path, limit: 200)) was not found on this server "
                                 + "(the local FCM answers POST /token and POST /v1/projects/{project}/messages:send).")
        }
        guard request.method == "POST" else {
            return Self.fcmError(405, "METHOD_NOT_ALLOWED", "messages:send takes POST.")
        }
        let answer = sendAnswer(request, project: String(parts[3]))
        state.withLock { s in
            if answer.accepted != nil { s.counts.accepted += 1 } else { s.counts.refused += 1 }
        }
        return answer
    }

    // MARK: - The token endpoint

    func tokenAnswer(_ request: LocalFCMRequest) -> LocalFCMAnswer {
        let refuse = { (error: String, description: String) -> LocalFCMAnswer in
            self.state.withLock { $0.counts.assertionsRefused += 1 }
            return Self.oauthError(400, error, description)
        }
        guard !request.bodyTooLarge else { return refuse("invalid_request", "the request body is too large") }
        let contentType = request.headers["content-type"]?.lowercased() ?? ""
        guard contentType.hasPrefix("application/x-www-form-urlencoded") else {
            return refuse("invalid_request", "the body must be a form (content-type application/x-www-form-urlencoded)")
        }
        guard let form = Self.parseForm(request.body) else { return refuse("invalid_request", "the form is not valid") }
        guard let grant = form["grant_type"] else { return refuse("invalid_request", "Missing required parameter: grant_type") }
        guard grant == Self.grantType else {
            return refuse("unsupported_grant_type", "Invalid grant_type: \(Self.printable(grant, limit: 64))")
        }
        guard let assertion = form["assertion"], !assertion.isEmpty else {
            return refuse("invalid_request", "Missing required parameter: assertion")
        }
        let now = configuration.now()
        let claims: FCMAssertion.Claims
        switch FCMAssertion.verify(assertion, publicKey: configuration.publicKey, issuer: configuration.clientEmail,
                                   audience: configuration.tokenURI, now: now) {
        case let .success(verified): claims = verified
        case let .failure(rejection): return refuse("invalid_grant", rejection.description)
        }
        if let kid = claims.keyID, kid != configuration.privateKeyID {
            return refuse("invalid_grant", "the assertion's kid is not the service account's private_key_id")
        }
        let token = "ya29.local-" + Base64.encodeURLSafeNoPadding(SecureBytes.random(count: 32).unsafeCopyToArray())
        let lifetime = configuration.accessTokenLifetime
        let limit = max(1, configuration.maximumAccessTokens)
        state.withLock { s in
            s.tokens.removeAll { $0.expiresAt <= now }
            if s.tokens.count >= limit { s.tokens.removeFirst(s.tokens.count - limit + 1) }
            s.tokens.append((Self.digest(token), now + lifetime))
            s.counts.tokensIssued += 1
        }
        let body = JSON.serialize(.object(JSONObject([
            ("access_token", .string(token)), ("expires_in", .int(lifetime)), ("token_type", .string("Bearer")),
        ])))
        return LocalFCMAnswer(status: 200, headers: [("cache-control", "no-store")], body: body, accepted: nil, summary: "token")
    }

    /// Whether `token` is one this server issued and it has not expired.
    func isCurrent(_ token: String) -> Bool {
        let digest = Self.digest(token), now = configuration.now()
        return state.withLock { s in s.tokens.contains { $0.digest == digest && $0.expiresAt > now } }
    }

    // MARK: - messages:send

    func sendAnswer(_ request: LocalFCMRequest, project: String) -> LocalFCMAnswer {
        // 1. The bearer token.
        let authorization = request.headers["authorization"] ?? ""
        let bearer = authorization.count > 7 && authorization.prefix(7).lowercased() == "bearer " ? String(authorization.dropFirst(7)) : nil
        guard let bearer, isCurrent(bearer) else {
            var answer = Self.fcmError(401, "UNAUTHENTICATED",
                                       "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid "
                                       + "authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.")
            answer.headers.append(("www-authenticate", #"Bearer realm="https://accounts.google.com/""#))
            return answer
        }
        // 2. The project.
        guard project == configuration.projectID else {
            return Self.fcmError(403, "PERMISSION_DENIED",
                                 "Permission 'cloudmessaging.messages.create' denied on resource '//cloudresourcemanager.googleapis.com/projects/"
                                 + "\(Self.printable(project, limit: 128))' (or it may not exist).")
        }
        // 3. The message's shape.
        guard !request.bodyTooLarge else {
            return Self.fcmError(400, "INVALID_ARGUMENT", "Request payload size exceeds the limit: \(Self.maximumBodyBytes) bytes.")
        }
        let message: CheckedMessage
        switch Self.check(request.body) {
        case let .success(checked): message = checked
        case let .failure(violation): return violation.answer
        }
        // 4. The token.
        let token = message.token
        func refused(_ answer: LocalFCMAnswer) -> LocalFCMAnswer {
            var answer = answer
            answer.tokenSuffix = String(token.suffix(8))
            return answer
        }
        if state.withLock({ $0.unregistered.contains(token) }) {
            return refused(Self.fcmError(404, "NOT_FOUND", "Requested entity was not found.", errorCode: "UNREGISTERED"))
        }
        if configuration.senderMismatch.contains(token) {
            return refused(Self.fcmError(403, "PERMISSION_DENIED", "SenderId mismatch", errorCode: "SENDER_ID_MISMATCH"))
        }
        let known = configuration.devices.contains(token)
        guard known || configuration.acceptUnknownTokens else {
            return refused(Self.fcmError(404, "NOT_FOUND", "Requested entity was not found.", errorCode: "UNREGISTERED"))
        }
        // 5. Faults.
        if configuration.failRate > 0, Double.random(in: 0..<1) < configuration.failRate {
            var answer = Self.fcmError(503, "UNAVAILABLE", "The service is currently unavailable.", errorCode: "UNAVAILABLE")
            if let seconds = configuration.retryAfterSeconds { answer.headers.append(("retry-after", String(seconds))) }
            return refused(answer)
        }
        let id = "0:\(configuration.now() * 1000 + Int64.random(in: 0..<1000))%" + Hex.encode(SecureBytes.random(count: 8).unsafeCopyToArray())
        let name = "projects/\(configuration.projectID)/messages/\(id)"
        let accepted = AcceptedFCMMessage(token: token, data: message.data, name: name, collapseKey: message.collapseKey,
                                          priority: message.priority, ttlSeconds: message.ttl, deviceKnown: known)
        return LocalFCMAnswer(status: 200, headers: [], body: JSON.serialize(.object(JSONObject([("name", .string(name))]))),
                              accepted: accepted, summary: "message", tokenSuffix: accepted.tokenSuffix)
    }

    /// A message as SealedPush sends it (platforms v1 §2), checked.
    struct CheckedMessage {
        var token: String
        var data: [(key: String, value: String)]
        var collapseKey: String?
        var priority: String?
        var ttl: Int64?
    }

    /// Why a message's shape was refused: a `400 INVALID_ARGUMENT` answer.
    struct Violation: Error {
        let answer: LocalFCMAnswer

        /// A violation of `field` (a `google.rpc.BadRequest` field violation: never `message.token`, which is a token problem).
        init(field: String, _ description: String) {
            answer = LocalFCMRules.fcmError(400, "INVALID_ARGUMENT", description, errorCode: "INVALID_ARGUMENT",
                                            fieldViolations: [(field, description)])
        }

        /// A registration token that is not one: FCM's words, no field violation (`FCMAnswer.namesToken`).
        static let invalidToken = Violation(answer: LocalFCMRules.fcmError(
            400, "INVALID_ARGUMENT", "The registration token is not a valid FCM registration token", errorCode: "INVALID_ARGUMENT"))

        private init(answer: LocalFCMAnswer) { self.answer = answer }
    }

    /// Members of `message` FCM knows but SealedPush never sends (data-only messages, one token).
    static let unsentMessageMembers: [String: String] = [
        "notification": "SealedPush sends data-only messages: message.notification must be absent (platforms v1 §2)",
        "apns": "SealedPush sends to iPhones through APNs itself: message.apns must be absent",
        "webpush": "SealedPush sends Web Push itself: message.webpush must be absent",
        "topic": "SealedPush sends to one registration token: message.topic must be absent",
        "condition": "SealedPush sends to one registration token: message.condition must be absent",
        "fcm_options": "SealedPush sends no fcm_options: message.fcm_options must be absent",
        "name": "message.name is output only",
    ]

    /// Checks a `messages:send` body: `{"message": {"token", "data": {string: string}, "android": {"priority",
    /// "ttl", "collapse_key"}}}`, nothing else, data within 4096 bytes, no reserved data keys.
    static func check(_ body: [UInt8]) -> Result<CheckedMessage, Violation> {
        guard case let .object(root)? = try? JSON.parse(body, maxDepth: 16) else {
            return .failure(Violation(field: "", "Invalid JSON payload received: the body is not a JSON object."))
        }
        for (name, _) in root where name != "message" && name != "validate_only" {
            return .failure(Violation(field: Self.printable(name, limit: 64),
                                      "Invalid JSON payload received. Unknown name \"\(Self.printable(name, limit: 64))\": Cannot find field."))
        }
        if let validateOnly = root["validate_only"], validateOnly != .bool(false) {
            return .failure(Violation(field: "validate_only", "SealedPush never sends validate_only; the local FCM does not dry-run messages"))
        }
        guard case let .object(message)? = root["message"] else {
            return .failure(Violation(field: "message", "Invalid JSON payload received: \"message\" must be an object."))
        }
        for (name, _) in message where !["token", "data", "android"].contains(name) {
            let safe = Self.printable(name, limit: 64)
            if let why = unsentMessageMembers[name] { return .failure(Violation(field: "message.\(safe)", why)) }
            return .failure(Violation(field: "message.\(safe)",
                                      "Invalid JSON payload received. Unknown name \"\(safe)\" at 'message': Cannot find field."))
        }
        // The recipient.
        guard let tokenValue = message["token"] else {
            return .failure(Violation(field: "message", "Recipient of the message is not set."))
        }
        guard case let .string(token) = tokenValue, FCMMessage.isValidToken(token) else { return .failure(.invalidToken) }
        // data: strings only, within the budget, no reserved keys.
        guard let dataValue = message["data"] else {
            return .failure(Violation(field: "message.data", "SealedPush sends data-only messages: message.data is required"))
        }
        guard case let .object(dataObject) = dataValue else {
            return .failure(Violation(field: "message.data", "Invalid value at 'message.data': message.data must be an object of strings."))
        }
        var data: [(key: String, value: String)] = []
        for (key, value) in dataObject {
            let safe = Self.printable(key, limit: 64)
            guard case let .string(text) = value else {
                return .failure(Violation(field: "message.data[\(safe)]",
                                          "Invalid value at 'message.data[\(safe)].value' (TYPE_STRING): FCM data values are strings"))
            }
            let lower = key.lowercased()
            if reservedDataKeys.contains(lower) || lower.hasPrefix("google.") || lower.hasPrefix("gcm.") || key.isEmpty {
                return .failure(Violation(field: "message.data[\(safe)]", "Invalid data payload key: \(safe)"))
            }
            data.append((key, text))
        }
        let size = data.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count }
        guard size <= FCMMessage.maximumDataBytes else {
            return .failure(Violation(field: "message.data",
                                      "Android message is too big: its data is \(size) bytes (keys and values), over \(FCMMessage.maximumDataBytes)"))
        }
        var checked = CheckedMessage(token: token, data: data)
        // android: priority, ttl, collapse_key.
        if let androidValue = message["android"] {
            guard case let .object(android) = androidValue else {
                return .failure(Violation(field: "message.android", "Invalid value at 'message.android': must be an object."))
            }
            for (name, value) in android {
                let safe = Self.printable(name, limit: 64)
                switch name {
                case "priority":
                    guard case let .string(priority) = value, priority == "HIGH" || priority == "NORMAL" else {
                        return .failure(Violation(field: "message.android.priority",
                                                  "Invalid value at 'message.android.priority' (type.googleapis.com/google.firebase.fcm.v1.AndroidMessagePriority): must be \"HIGH\" or \"NORMAL\""))
                    }
                    checked.priority = priority
                case "ttl":
                    guard case let .string(ttl) = value, let seconds = parseTTL(ttl) else {
                        return .failure(Violation(field: "message.android.ttl",
                                                  "Invalid value at 'message.android.ttl' (type.googleapis.com/google.protobuf.Duration): must be \"<seconds>s\", like \"3600s\""))
                    }
                    guard seconds <= FCMMessage.maximumTTL else {
                        return .failure(Violation(field: "message.android.ttl", "message.android.ttl must be at most \(FCMMessage.maximumTTL)s (28 days)"))
                    }
                    checked.ttl = seconds
                case "collapse_key":
                    guard case let .string(key) = value, (1...256).contains(key.utf8.count) else {
                        return .failure(Violation(field: "message.android.collapse_key",
                                                  "Invalid value at 'message.android.collapse_key' (TYPE_STRING): must be a non-empty string"))
                    }
                    checked.collapseKey = key
                case "notification":
                    return .failure(Violation(field: "message.android.notification",
                                              "SealedPush sends data-only messages: message.android.notification must be absent (platforms v1 §2)"))
                default:
                    return .failure(Violation(field: "message.android.\(safe)",
                                              "Invalid JSON payload received. Unknown name \"\(safe)\" at 'message.android': SealedPush sends priority, ttl and collapse_key only."))
                }
            }
        }
        return .success(checked)
    }

    /// `"<n>s"` with 1–10 digits, as seconds; `nil` otherwise.
    static func parseTTL(_ text: String) -> Int64? {
        guard text.hasSuffix("s") else { return nil }
        let digits = text.dropLast()
        guard (1...10).contains(digits.count), digits.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int64(digits)
    }

    // MARK: - Answers

    /// An FCM error answer: `{"error": {"code", "message", "status", "details": […]}}` with an `FcmError` detail when
    /// `errorCode` is given and a `BadRequest` detail when there are field violations.
    static func fcmError(_ code: Int, _ status: String, _ message: String, errorCode: String? = nil,
                         fieldViolations: [(field: String, description: String)] = []) -> LocalFCMAnswer {
        var details: [JSONValue] = []
        if let errorCode {
            details.append(.object(JSONObject([("@type", .string(FCMAnswer.fcmErrorType)), ("errorCode", .string(errorCode))])))
        }
        if !fieldViolations.isEmpty {
            details.append(.object(JSONObject([
                ("@type", .string(FCMAnswer.badRequestType)),
                ("fieldViolations", .array(fieldViolations.map { v in
                    .object(JSONObject([("field", .string(v.field)), ("description", .string(v.description))]))
                })),
            ])))
        }
        var error = JSONObject([("code", .int(Int64(code))), ("message", .string(message)), ("status", .string(status))])
        if !details.isEmpty { error["details"] = .array(details) }
        return LocalFCMAnswer(status: code, headers: [], body: JSON.serialize(.object(JSONObject([("error", .object(error))]))),
                              accepted: nil, summary: errorCode ?? status)
    }

    /// Google's OAuth error: `{"error", "error_description"}`.
    static func oauthError(_ status: Int, _ error: String, _ description: String) -> LocalFCMAnswer {
        LocalFCMAnswer(status: status, headers: [],
                       body: JSON.serialize(.object(JSONObject([("error", .string(error)), ("error_description", .string(description))]))),
                       accepted: nil, summary: error)
    }

    /// `application/x-www-form-urlencoded` pairs (`+` is a space, `%XX` a byte); `nil` for bad escapes, invalid
    /// UTF-8 or a name given twice.
    static func parseForm(_ body: [UInt8]) -> [String: String]? {
        var result: [String: String] = [:]
        for pair in body.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            let parts = pair.split(separator: UInt8(ascii: "="), maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = decodeFormComponent(parts[0]), let value = decodeFormComponent(parts.count > 1 ? parts[1] : []),
                  result[name] == nil
            else { return nil }
            result[name] = value
        }
        return result
    }

    static func decodeFormComponent(_ bytes: ArraySlice<UInt8>) -> String? {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = bytes.startIndex
        func hex(_ c: UInt8) -> UInt8? {
            switch c {
            case 0x30...0x39: c - 0x30
            case 0x41...0x46: c - 0x41 + 10
            case 0x61...0x66: c - 0x61 + 10
            default: nil
            }
        }
        while i < bytes.endIndex {
            let c = bytes[i]
            if c == UInt8(ascii: "%") {
                guard i + 2 < bytes.endIndex, let high = hex(bytes[i + 1]), let low = hex(bytes[i + 2]) else { return nil }
                out.append(high << 4 | low)
                i += 3
            } else {
                out.append(c == UInt8(ascii: "+") ? 0x20 : c)
                i += 1
            }
        }
        return String(validating: out, as: UTF8.self)
    }

    /// SHA-256 of `token`, hex: how issued tokens are remembered.
    static func digest(_ token: String) -> String {
        Hex.encode(Array(SHA256.hash(data: Array(token.utf8))))
    }

    /// `text` as at most `limit` printable ASCII characters (what the client sent, echoed safely).
    static func printable(_ text: some StringProtocol, limit: Int) -> String {
        String(String.UnicodeScalarView(text.unicodeScalars.lazy.filter { $0.value >= 0x20 && $0.value < 0x7F }.prefix(limit)))
    }
}
