#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import SealedPushWire

/// An OAuth 2.0 access token for FCM, and when it expires. Its `description` never shows the token.
public struct FCMAccessToken: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The bearer token (sent as `Authorization: Bearer <value>`; never log it).
    public let value: String
    /// When it expires, Unix seconds (measured from when it was asked for, so never later than the truth).
    public let expiresAt: Int64

    /// A token from its parts.
    public init(value: String, expiresAt: Int64) {
        self.value = value
        self.expiresAt = expiresAt
    }

    /// Redacted.
    public var description: String { "FCMAccessToken(redacted, expires at \(expiresAt))" }
    /// Redacted.
    public var debugDescription: String { description }
}

/// Gets FCM access tokens for one service account and keeps the current one.
///
/// A token is reused until 5 minutes before it expires. At most one exchange runs at a time: callers that need a
/// token while one is being fetched await that same exchange. `invalidate(_:)` drops a token FCM refused (a 401),
/// so the next caller fetches a new one — once, however many requests saw the refusal. Failures are not cached: the
/// next caller tries again (the gateway's backoff paces it). Neither the token nor the assertion is ever logged.
public actor FCMAccessTokenProvider {
    /// How long before expiry a token is renewed, in seconds.
    public static let renewalMargin: Int64 = 300
    /// The most answer bytes read from the token endpoint.
    public static let maximumAnswerBytes = 64 * 1024

    let account: FCMServiceAccount
    /// Where assertions are exchanged (`fcm.token_url`, default the file's `token_uri`).
    public nonisolated let tokenURL: String
    let transport: any FCMTransport
    let timeout: Duration
    let now: @Sendable () -> Int64

    var current: FCMAccessToken?
    var pending: Task<Result<FCMAccessToken, FCMAccessTokenError>, Never>?
    /// How many exchanges were started (for tests and metrics).
    public private(set) var exchanges = 0

    /// A provider for `account`.
    ///
    /// - Parameters:
    ///   - tokenURL: the token endpoint (default the account's `token_uri`, which stays the assertion's `aud`).
    ///   - transport: how to reach it.
    ///   - timeout: the longest one exchange may take.
    ///   - now: the wall clock, Unix seconds (tests inject one).
    public init(account: FCMServiceAccount, tokenURL: String? = nil, transport: any FCMTransport, timeout: Duration = .seconds(10),
                now: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }) {
        self.account = account
        self.tokenURL = tokenURL ?? account.tokenURI
        self.transport = transport
        self.timeout = timeout
        self.now = now
    }

    /// A token valid for at least 5 more minutes: the current one, or a new one from the token endpoint.
    public func token() async throws(FCMAccessTokenError) -> FCMAccessToken {
        if let current, now() < current.expiresAt - Self.renewalMargin { return current }
        let task: Task<Result<FCMAccessToken, FCMAccessTokenError>, Never>
        if let pending {
            task = pending
        } else {
            exchanges += 1
            let account = account, tokenURL = tokenURL, transport = transport, timeout = timeout, now = now
            task = Task {
                await Self.exchange(account: account, tokenURL: tokenURL, transport: transport, timeout: timeout, now: now)
            }
            pending = task
        }
        let result = await task.value
        if pending == task {
            pending = nil
            if case let .success(token) = result { current = token }
        }
        return try result.get()
    }

    /// Drops `token` if it is the current one (FCM answered 401 with it); a later token is kept.
    public func invalidate(_ token: FCMAccessToken) {
        if current?.value == token.value { current = nil }
    }

    /// One exchange: sign an assertion now, POST it, read the token.
    static func exchange(account: FCMServiceAccount, tokenURL: String, transport: any FCMTransport, timeout: Duration,
                         now: @Sendable () -> Int64) async -> Result<FCMAccessToken, FCMAccessTokenError> {
        let issuedAt = now()
        let assertion: String
        do { assertion = try FCMAssertion.make(account: account, issuedAt: issuedAt) } catch {
            return .failure(error)
        }
        let form = "grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=" + assertion
        let request = FCMHTTPRequest(
            url: tokenURL,
            headers: ["content-type": "application/x-www-form-urlencoded", "accept": "application/json"],
            body: Array(form.utf8), timeout: timeout, responseBodyLimit: maximumAnswerBytes)
        let response: FCMHTTPResponse
        do { response = try await transport.post(request) } catch { return .failure(.unreachable(error)) }
        return parse(response, requestedAt: issuedAt)
    }

    /// Reads a token endpoint's answer: `{"access_token", "expires_in", "token_type": "Bearer"}` on 200, else
    /// Google's `{"error", "error_description"}`.
    public static func parse(_ response: FCMHTTPResponse, requestedAt: Int64) -> Result<FCMAccessToken, FCMAccessTokenError> {
        let object: JSONObject? = response.bodyTruncated ? nil : (try? JSON.parse(response.body, maxDepth: 8))?.objectValue
        guard response.status == 200 else {
            return .failure(.refused(status: response.status, error: object?["error"]?.stringValue.map { printable($0) },
                                     errorDescription: object?["error_description"]?.stringValue.map { printable($0) }))
        }
        guard let object else { return .failure(.malformedAnswer(detail: response.bodyTruncated ? "over \(maximumAnswerBytes) bytes" : "not a JSON object")) }
        guard let value = object["access_token"]?.stringValue else { return .failure(.malformedAnswer(detail: "no \"access_token\" string")) }
        // The token goes into a header: visible ASCII only.
        guard (1...8192).contains(value.utf8.count), value.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            return .failure(.malformedAnswer(detail: "\"access_token\" is not 1–8192 visible ASCII characters"))
        }
        guard case let .int(lifetime)? = object["expires_in"], lifetime > 0, lifetime <= 86_400 * 7 else {
            return .failure(.malformedAnswer(detail: "\"expires_in\" is not a positive number of seconds"))
        }
        guard object["token_type"]?.stringValue?.lowercased() == "bearer" else {
            return .failure(.malformedAnswer(detail: "\"token_type\" is not \"Bearer\""))
        }
        return .success(FCMAccessToken(value: value, expiresAt: requestedAt + lifetime))
    }

    /// `text` as at most 200 printable ASCII characters (Google's error strings carry no secret, but are the
    /// server's words: kept short and free of control characters).
    static func printable(_ text: String) -> String {
        String(String.UnicodeScalarView(text.unicodeScalars.lazy.filter { $0.value >= 0x20 && $0.value < 0x7F }.prefix(200)))
    }
}
