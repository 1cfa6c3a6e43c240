#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import Logging

/// Why an FCM client could not be set up.
public enum FCMClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A configuration value is wrong (`detail` names it and says what it must be).
    case invalidConfiguration(String)
    /// The extra trusted CA certificate file cannot be used.
    case caCertificate(path: String, problem: String)

    /// What happened and what to do.
    public var description: String {
        switch self {
        case let .invalidConfiguration(detail): "invalid FCM configuration: \(detail)"
        case let .caCertificate(path, problem):
            "cannot use the FCM CA certificate \(path): \(problem); pass the ca.pem that `sealedpush-server fcm serve --ca-out` wrote"
        }
    }
}

/// An app's `"fcm"` configuration section, resolved against its service account.
public struct FCMClientConfiguration: Sendable {
    /// FCM's own address.
    public static let defaultURL = "https://fcm.googleapis.com"

    /// Where FCM is (`fcm.url`; default `https://fcm.googleapis.com`): `https://HOST[:PORT]`, no path.
    public var url: String
    /// The Firebase project messages are sent for (`fcm.project_id`; default the service account's).
    public var projectID: String
    /// Where access tokens come from (`fcm.token_url`; default the service account's `token_uri`).
    public var tokenURL: String
    /// A PEM file of CA certificates trusted besides the system's (`fcm.ca_cert`: a local FCM), or `nil`.
    public var caCertificateFile: String?
    /// The longest one `messages:send` exchange may take, answer included.
    public var requestTimeout: Duration
    /// The longest one token exchange may take.
    public var tokenTimeout: Duration
    /// The longest a connection may take to open.
    public var connectTimeout: Duration
    /// The wall clock (the assertion's `iat`, token expiry, `Retry-After` dates); tests inject one.
    public var now: @Sendable () -> Date

    /// The configuration for `serviceAccount`; `nil` values take their defaults.
    ///
    /// - Throws: `FCMClientError.invalidConfiguration` when a URL is not https or the project id is not one.
    public init(serviceAccount: FCMServiceAccount, projectID: String? = nil, url: String? = nil, tokenURL: String? = nil,
                caCertificateFile: String? = nil, requestTimeout: Duration = .seconds(10), tokenTimeout: Duration = .seconds(10),
                connectTimeout: Duration = .seconds(5), now: @escaping @Sendable () -> Date = { Date() }) throws(FCMClientError) {
        var base = url ?? Self.defaultURL
        while base.hasSuffix("/") { base.removeLast() }
        guard FCMServiceAccount.isHTTPSURL(base), let parsed = URL(string: base), parsed.path.isEmpty, parsed.query == nil,
              parsed.user == nil else {
            throw .invalidConfiguration("fcm.url must be https://HOST[:PORT] with no path (default \(Self.defaultURL))")
        }
        let project = projectID ?? serviceAccount.projectID
        guard FCMServiceAccount.isValidProjectID(project) else {
            throw .invalidConfiguration("fcm.project_id must be \(FCMServiceAccount.projectIDRule)")
        }
        // The signed assertion goes to Google's token URL only, unless the configuration names another explicitly: a
        // key file whose token_uri points elsewhere would otherwise hand it to whoever wrote that URL.
        let token: String
        if let tokenURL {
            token = tokenURL
        } else {
            guard FCMServiceAccount.googleTokenURIs.contains(serviceAccount.tokenURI) else {
                throw .invalidConfiguration("the service account's token_uri is not Google's token URL (https://oauth2.googleapis.com/token); "
                    + "set fcm.token_url explicitly to exchange assertions elsewhere (a local FCM: its /token URL)")
            }
            token = serviceAccount.tokenURI
        }
        guard FCMServiceAccount.isHTTPSURL(token) else { throw .invalidConfiguration("fcm.token_url must be an https URL") }
        self.url = base
        self.projectID = project
        self.tokenURL = token
        self.caCertificateFile = caCertificateFile
        self.requestTimeout = requestTimeout
        self.tokenTimeout = tokenTimeout
        self.connectTimeout = connectTimeout
        self.now = now
    }

    /// `{url}/v1/projects/{project_id}/messages:send`.
    public var sendURL: String { "\(url)/v1/projects/\(projectID)/messages:send" }
}

/// The result of one `FCMClient.send`: the outcome and FCM's last HTTP status (`platform_status`; `nil` when no
/// answer came).
public struct FCMSendResult: Sendable, Equatable {
    /// What the attempt came to.
    public var outcome: FCMOutcome
    /// The HTTP status of FCM's last answer, if any.
    public var status: Int?

    /// A result from its parts.
    public init(outcome: FCMOutcome, status: Int?) {
        self.outcome = outcome
        self.status = status
    }
}

/// Sends FCM HTTP v1 messages for one app: `POST {url}/v1/projects/{project_id}/messages:send` with a bearer token
/// from its `FCMAccessTokenProvider`, and classifies the answer (`FCMAnswer`).
///
/// One `send` is one delivery attempt; retries with backoff are the caller's (the gateway's), as its outcome says.
/// A 401 drops the token, renews it and tries once more at once; a second 401 is `pauseCredentials`.
public final class FCMClient: Sendable {
    /// The configuration.
    public let configuration: FCMClientConfiguration
    /// The app's access tokens.
    public let tokens: FCMAccessTokenProvider
    let transport: any FCMTransport
    let ownedTransport: FCMHTTPClientTransport?
    let logger: Logger

    /// A client over `transport` (tests pass a fake).
    public init(configuration: FCMClientConfiguration, serviceAccount: FCMServiceAccount, transport: any FCMTransport,
                logger: Logger = Logger(label: "sealedpush.fcm")) {
        self.configuration = configuration
        self.transport = transport
        self.ownedTransport = nil
        self.logger = logger
        let now = configuration.now
        tokens = FCMAccessTokenProvider(account: serviceAccount, tokenURL: configuration.tokenURL, transport: transport,
                                        timeout: configuration.tokenTimeout, now: { Int64(now().timeIntervalSince1970.rounded(.down)) })
    }

    /// A client over AsyncHTTPClient, trusting `configuration.caCertificateFile` besides the system's roots.
    /// Call `shutdown()` when done.
    public init(configuration: FCMClientConfiguration, serviceAccount: FCMServiceAccount,
                logger: Logger = Logger(label: "sealedpush.fcm")) throws(FCMClientError) {
        let transport = try FCMHTTPClientTransport(caCertificateFile: configuration.caCertificateFile,
                                                   connectTimeout: configuration.connectTimeout)
        self.configuration = configuration
        self.transport = transport
        self.ownedTransport = transport
        self.logger = logger
        let now = configuration.now
        tokens = FCMAccessTokenProvider(account: serviceAccount, tokenURL: configuration.tokenURL, transport: transport,
                                        timeout: configuration.tokenTimeout, now: { Int64(now().timeIntervalSince1970.rounded(.down)) })
    }

    /// Closes the connections of a client that made its own transport.
    public func shutdown() async {
        await ownedTransport?.shutdown()
    }

    /// Sends one message body (`FCMMessage.body`) and says what came of it. Never throws: every failure is an outcome.
    public func send(_ body: [UInt8]) async -> FCMSendResult {
        var lastStatus: Int?
        for attempt in 1...2 {
            let token: FCMAccessToken
            do { token = try await tokens.token() } catch {
                logger.warning("no FCM access token", metadata: ["error": "\(error)"])
                return FCMSendResult(outcome: Self.outcome(for: error), status: lastStatus)
            }
            let request = FCMHTTPRequest(
                url: configuration.sendURL,
                headers: ["authorization": "Bearer \(token.value)", "content-type": "application/json; charset=UTF-8"],
                body: body, timeout: configuration.requestTimeout, responseBodyLimit: FCMAnswer.maximumBodyBytes)
            let response: FCMHTTPResponse
            do { response = try await transport.post(request) } catch {
                return FCMSendResult(outcome: Self.outcome(for: error), status: lastStatus)
            }
            lastStatus = response.status
            let outcome = FCMAnswer.classify(response, now: configuration.now())
            guard case let .renewTokenAndRetry(reason) = outcome else { return FCMSendResult(outcome: outcome, status: response.status) }
            await tokens.invalidate(token)
            if attempt == 2 {
                logger.error("FCM refused a freshly renewed access token; pausing", metadata: ["reason": "\(reason)"])
                return FCMSendResult(outcome: .pauseCredentials(reason: reason), status: response.status)
            }
            logger.info("FCM refused the access token (401); renewing it once", metadata: ["reason": "\(reason)"])
        }
        // Not reached: the second pass returns.
        return FCMSendResult(outcome: .pauseCredentials(reason: "UNAUTHENTICATED"), status: lastStatus)
    }

    /// The outcome when no answer came: timeouts and lost connections are retried.
    static func outcome(for error: FCMTransportError) -> FCMOutcome {
        switch error {
        case .timedOut: .retry(reason: "timeout", retryAfter: nil)
        case .connection: .retry(reason: "connection_failed", retryAfter: nil)
        case .untrustedServer: .retry(reason: "untrusted_server", retryAfter: nil)
        case .cancelled: .retry(reason: "cancelled", retryAfter: nil)
        }
    }

    /// The outcome when no access token could be had: a network failure or a 5xx/429 at the token endpoint is
    /// retried; a refusal of the service account's assertion (a deleted or disabled key) pauses the app.
    static func outcome(for error: FCMAccessTokenError) -> FCMOutcome {
        if error.isTransient { return .retry(reason: "access_token_unavailable", retryAfter: nil) }
        switch error {
        case let .refused(_, code, _):
            let safe = code.flatMap { c in
                (1...64).contains(c.utf8.count) && c.utf8.allSatisfy({ ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x5F }) ? c : nil
            }
            return .pauseCredentials(reason: safe ?? "access_token_refused")
        default:
            return .pauseCredentials(reason: "access_token_refused")
        }
    }
}
