public import Logging
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
public import SealedPushAPNsCore
import SealedPushWire
import NIOConcurrencyHelpers
#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// How an `APNsClient` reaches APNs and authenticates.
public struct APNsClientConfiguration: Sendable {
    /// Which APNs to talk to.
    public enum Environment: Sendable, Equatable {
        /// `https://api.push.apple.com` (port 443).
        case production
        /// `https://api.sandbox.push.apple.com` (port 443): apps built for development.
        case sandbox
        /// A base URL of your own, e.g. `https://127.0.0.1:2197` for `sealedpush-server apns serve`.
        case custom(String)

        /// The base URL requests go to (no trailing slash).
        public var baseURL: String {
            switch self {
            case .production: "https://api.push.apple.com"
            case .sandbox: "https://api.sandbox.push.apple.com"
            case let .custom(url): url.hasSuffix("/") ? String(url.dropLast()) : url
            }
        }
    }

    /// Retries for pushes APNs did not take: capped exponential backoff with jitter.
    public struct RetryPolicy: Sendable, Equatable {
        /// The most tries per push, the first included (1 = never retry).
        public var maxTries: Int
        /// The delay before the second try; each further try doubles it.
        public var baseDelay: Duration
        /// The longest delay between tries.
        public var maxDelay: Duration

        /// A policy; the default tries 4 times, waiting about 0.2 s, 0.4 s and 0.8 s.
        public init(maxTries: Int = 4, baseDelay: Duration = .milliseconds(200), maxDelay: Duration = .seconds(5)) {
            self.maxTries = max(1, maxTries)
            self.baseDelay = baseDelay
            self.maxDelay = maxDelay
        }

        /// The delay before try `n + 1` after `n` failed tries: `min(maxDelay, baseDelay · 2^(n-1))`, times a
        /// random factor in [0.5, 1] ("equal jitter") so that many clients do not retry in step.
        public func delay(afterTries n: Int, jitter: Double) -> Duration {
            let exponent = min(max(n - 1, 0), 30)
            let raw = baseDelay * (1 << exponent)
            let capped = raw > maxDelay ? maxDelay : raw
            return capped * min(max(jitter, 0.5), 1.0)
        }
    }

    /// Where pushes go.
    public var environment: Environment
    /// The token-authentication key (`AuthKey_<KEY_ID>.p8`, key id, team id).
    public var signingKey: APNsSigningKey
    /// The `apns-topic` used when a push does not name one (the app's bundle id).
    public var topic: String?
    /// Extra CA certificates (PEM) to trust besides the system's, e.g. the one `sealedpush-server apns serve` writes;
    /// only for a `custom` environment (Apple's servers are verified against the system's roots alone).
    public var trustedCertificatesPEM: [[UInt8]]
    /// The deadline for one try of one push, from sending to the complete answer.
    public var timeout: Duration
    /// The most pushes in flight at once; further sends wait.
    public var maxInFlight: Int
    /// Retries for 429 TooManyRequests, 500, 503 and connection failures.
    public var retry: RetryPolicy
    /// A provider token is renewed when it is this old (Apple: not more often than every 20 minutes, at
    /// least once an hour). Default 50 minutes.
    public var tokenLifetime: Duration
    /// The wall clock in Unix seconds (the token's `iat`); tests inject one.
    public var now: @Sendable () -> Int64
    /// The clock backoff delays are slept on; tests inject one.
    public var sleepClock: any Clock<Duration>
    /// Called for every push APNs answers with Unregistered, ExpiredToken, BadDeviceToken or
    /// DeviceTokenNotForTopic: stop sending to that device token.
    public var onStopSending: (@Sendable (_ deviceToken: String, _ rejection: APNsRejection) -> Void)?

    /// A configuration with the defaults above.
    public init(environment: Environment, signingKey: APNsSigningKey, topic: String? = nil,
                trustedCertificatesPEM: [[UInt8]] = [], timeout: Duration = .seconds(10), maxInFlight: Int = 100,
                retry: RetryPolicy = RetryPolicy(), tokenLifetime: Duration = .seconds(50 * 60),
                now: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) },
                sleepClock: any Clock<Duration> = ContinuousClock(),
                onStopSending: (@Sendable (String, APNsRejection) -> Void)? = nil) {
        self.environment = environment
        self.signingKey = signingKey
        self.topic = topic
        self.trustedCertificatesPEM = trustedCertificatesPEM
        self.timeout = timeout
        self.maxInFlight = max(1, maxInFlight)
        self.retry = retry
        self.tokenLifetime = tokenLifetime
        self.now = now
        self.sleepClock = sleepClock
        self.onStopSending = onStopSending
    }
}

/// Something that delivers pushes to APNs: `APNsClient`, or a stand-in in tests (and the gateway's workers
/// take any).
public protocol APNsSending: Sendable {
    /// Sends `push`, retrying as the implementation's policy allows; the acceptance, or a typed error.
    func send(_ push: APNsPush) async throws(APNsError) -> APNsAcceptance
}

/// An APNs provider client: HTTP/2 over TLS on a few long-lived connections (NIOHTTP2, see
/// `HTTP2Transport`), token authentication, retries, a bound on pushes in flight.
///
/// Create one per process (or per auth key) and share it; call `shutdown()` when done.
public final class APNsClient: APNsSending {
    /// The configuration the client was made with.
    public let configuration: APNsClientConfiguration
    let transport: HTTP2Transport
    /// The `:authority` of every request (`host` or `host:port`).
    let authority: String
    let tokens: ProviderTokenCache
    let limiter: AsyncLimiter
    let logger: Logger
    let isShutDown = NIOLockedValueBox(false)

    /// A client; fails when a trusted certificate is not PEM, or is given for Apple's own servers.
    ///
    /// TLS 1.2 is the least it accepts (APNs itself speaks 1.2 and 1.3).
    public init(configuration: APNsClientConfiguration, logger: Logger = Logger(label: "sealedpush.apns")) throws(APNsError) {
        self.configuration = configuration
        self.logger = logger
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        if !configuration.trustedCertificatesPEM.isEmpty {
            if case .custom = configuration.environment {} else {
                throw .invalidRequest("an extra trusted CA certificate is only for a local or private APNs (a custom URL); Apple's servers are verified against the system's roots")
            }
            var certificates: [NIOSSLCertificate] = []
            for pem in configuration.trustedCertificatesPEM {
                do { certificates += try NIOSSLCertificate.fromPEMBytes(pem) } catch {
                    throw .invalidRequest("a trusted CA certificate is not PEM; pass the ca.pem that `sealedpush-server apns serve` wrote")
                }
            }
            tls.additionalTrustRoots = [.certificates(certificates)]
        }
        let base = configuration.environment.baseURL
        guard let url = URL(string: base), url.scheme == "https", let host = url.host(percentEncoded: false), !host.isEmpty,
              url.path().isEmpty || url.path() == "/" else {
            throw .invalidRequest("the APNs URL must be https://HOST[:PORT] with no path")
        }
        let port = url.port ?? 443
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        let named = bare.contains(":") ? "[\(bare)]" : bare
        authority = port == 443 ? named : "\(named):\(port)"
        do {
            transport = try HTTP2Transport(configuration: .init(host: bare, port: port, tls: tls))
        } catch {
            throw .invalidRequest("the TLS settings were refused: \(type(of: error))")
        }
        tokens = ProviderTokenCache(key: configuration.signingKey, lifetime: configuration.tokenLifetime, now: configuration.now)
        limiter = AsyncLimiter(limit: configuration.maxInFlight)
    }

    /// Closes the connections; pushes still in flight fail.
    public func shutdown() async {
        guard isShutDown.withLockedValue({ done in defer { done = true }; return !done }) else { return }
        await transport.shutdown()
    }

    /// A client released without `shutdown()` closes its connections in the background.
    deinit {
        if !isShutDown.withLockedValue({ $0 }) {
            let transport = transport
            Task { await transport.shutdown() }
        }
    }

    /// How many provider tokens the client has signed so far (renewals included).
    public var tokensIssued: Int { tokens.issued }

    /// Sends `push`: waits for a slot when `maxInFlight` pushes are in flight, then tries up to
    /// `retry.maxTries` times for 429 TooManyRequests, 500, 503, timeouts and connection failures, renews
    /// the provider token once on ExpiredProviderToken, and never retries any other refusal.
    public func send(_ push: APNsPush) async throws(APNsError) -> APNsAcceptance {
        if let problem = push.problem { throw .invalidRequest(problem) }
        do { try await limiter.acquire() } catch { throw .shutDown }  // cancelled while waiting for a slot
        defer { limiter.release() }
        var tries = 0
        var renewedToken = false
        var unprocessed = 0
        var lastError: APNsError = .shutDown
        while tries < configuration.retry.maxTries {
            tries += 1
            let (authorization, generation) = tokens.current()
            let outcome = await attempt(push, authorization: authorization)
            switch outcome {
            case let .accepted(apnsID, uniqueID):
                return APNsAcceptance(apnsID: apnsID ?? push.apnsID, uniqueID: uniqueID, tries: tries)
            case let .rejected(rejection):
                if rejection.reason == .expiredProviderToken && !renewedToken {
                    renewedToken = true
                    tokens.renew(ifGeneration: generation)
                    tries -= 1  // the renewal's retry does not count against the backoff budget
                    lastError = .rejected(rejection)
                    continue
                }
                if rejection.stopSendingToToken { configuration.onStopSending?(push.deviceToken, rejection) }
                lastError = .rejected(rejection)
                guard APNsClient.isRetryable(rejection.reason) else { throw lastError }
            case let .failed(error):
                lastError = error
                guard APNsClient.isRetryable(error) else { throw error }
            case .unprocessed:
                // Sent again at once, outside the retry budget: APNs never saw it. Bounded all the same.
                lastError = .connection(.closed, tries: tries)
                if unprocessed < APNsClient.maxUnprocessedResends {
                    unprocessed += 1
                    tries -= 1
                    continue
                }
            }
            guard tries < configuration.retry.maxTries else { break }
            let delay = configuration.retry.delay(afterTries: tries, jitter: Double.random(in: 0.5...1.0))
            logger.debug("retrying a push", metadata: ["apns-id": "\(push.apnsID)", "try": "\(tries + 1)", "after": "\(delay)"])
            do { try await configuration.sleepClock.sleep(for: delay) } catch { break }
        }
        switch lastError {
        case .timedOut: throw .timedOut(tries: tries)
        case let .connection(failure, _): throw .connection(failure, tries: tries)
        default: throw lastError
        }
    }

    /// How many times one push is sent again at once because APNs never processed it (GOAWAY, refused stream)
    /// before such a try counts against the retry budget. With a GOAWAY every N streams and M pushes in flight,
    /// a push that keeps landing behind the others can be excluded about M/N times in a row (the provider tests:
    /// 500 pushes, a GOAWAY every 25: 20). With 16, one such test saw a push fail (1 of 500, in one run of about
    /// a dozen).
    static let maxUnprocessedResends = 32

    /// Whether a refusal may succeed on a later try: 429 TooManyRequests, 500 and 503 (APNs did not take the push).
    public static func isRetryable(_ reason: APNsReason) -> Bool {
        switch reason {
        case .tooManyRequests, .internalServerError, .serviceUnavailable, .shutdown: true
        default: false
        }
    }

    /// Whether a failed try may succeed on a later one: a timeout, or a connection refused, unreachable, closed
    /// or whose handshake failed. An untrusted server, a shut-down client and any error the client does not
    /// recognise as a transport failure are final.
    public static func isRetryable(_ error: APNsError) -> Bool {
        switch error {
        case .timedOut: true
        case let .connection(failure, _):
            switch failure {
            case .refused, .unreachable, .closed, .tlsHandshake: true
            case .other: false
            }
        default: false
        }
    }

    enum Attempt {
        /// APNs never processed the try (a GOAWAY excluded its stream, or none could be opened).
        case unprocessed
        case accepted(apnsID: String?, uniqueID: String?)
        case rejected(APNsRejection)
        case failed(APNsError)
    }

    /// Push headers whose value changes from push to push (kept out of HPACK's dynamic table).
    static let perPushHeaders: Set<String> = ["apns-id", "apns-collapse-id", "apns-expiration"]

    func attempt(_ push: APNsPush, authorization: String) async -> Attempt {
        var headers = HPACKHeaders()
        headers.reserveCapacity(8 + push.headers.count)
        headers.add(name: ":method", value: "POST")
        headers.add(name: ":scheme", value: "https")
        headers.add(name: ":authority", value: authority)
        // What differs per push (the path with its device token, the apns-id, the collapse id, the expiration,
        // the length) is sent without indexing, so it never churns HPACK's 4 KiB dynamic table: what stays the
        // same (the provider token, topic, push type, priority) then stays indexed and costs a byte or two a
        // push on both sides, instead of being evicted and sent (and Huffman-decoded) again every few pushes.
        headers.add(name: ":path", value: push.path, indexing: .nonIndexable)
        headers.add(name: "authorization", value: authorization)
        for (name, value) in push.headers {
            headers.add(name: name, value: value, indexing: Self.perPushHeaders.contains(name) ? .nonIndexable : .indexable)
        }
        headers.add(name: "content-type", value: "application/json")
        headers.add(name: "content-length", value: String(push.payload.count), indexing: .nonIndexable)
        let request = HTTP2PushRequest(headers: headers, body: ByteBuffer(bytes: push.payload))
        do {
            let response = try await transport.send(request, timeout: configuration.timeout)
            if response.status == 200 {
                return .accepted(apnsID: response.apnsID, uniqueID: response.uniqueID)
            }
            return .rejected(APNsClient.rejection(status: response.status, apnsID: response.apnsID, body: Array(response.body.readableBytesView)))
        } catch is UnprocessedPush {
            return .unprocessed
        } catch {
            return .failed(APNsClient.classify(error))
        }
    }

    /// Reads an error response: its status, `apns-id`, and the `{"reason": "...", "timestamp": ms}` body (a
    /// body without a reason gives `unknown("HTTP <status>")`).
    public static func rejection(status: Int, apnsID: String?, body: [UInt8]) -> APNsRejection {
        var reason = APNsReason.unknown("HTTP \(status)")
        var timestamp: Int64?
        if case let .object(object)? = try? JSON.parse(body) {
            if let raw = object["reason"]?.stringValue { reason = APNsReason(rawValue: raw) }
            timestamp = object["timestamp"]?.intValue
        }
        return APNsRejection(status: status, reason: reason, apnsID: apnsID, timestamp: timestamp)
    }

    /// Maps a transport error to a typed one by its type: the transport's deadline, connect timeouts and
    /// closed connections or streams, NIO's connection errors (the `errno` of each address tried), NIOSSL's handshake and
    /// hostname failures. Anything else is `.connection(.other(type))`, which is never retried.
    package static func classify(_ error: any Error) -> APNsError {
        switch error {
        case is HTTP2Deadline:
            return .timedOut(tries: 1)
        case is HTTP2NotNegotiated:
            return .connection(.other("the server did not offer HTTP/2"), tries: 1)
        case is HTTP2TransportShutDown:
            return .shutDown
        case let error as ChannelError:
            if case .connectTimeout = error { return .timedOut(tries: 1) }
            // The connection or the stream was closed before the answer.
            return .connection(.closed, tries: 1)
        case let error as NIOConnectionError:
            // Every address tried failed: refused when each was refused, else unreachable.
            let refused = !error.connectionErrors.isEmpty && error.connectionErrors.allSatisfy { failure in
                (failure.error as? IOError)?.errnoCode == ECONNREFUSED
            }
            return .connection(refused ? .refused : .unreachable, tries: 1)
        case let error as IOError:
            switch error.errnoCode {
            case ECONNREFUSED: return .connection(.refused, tries: 1)
            case ECONNRESET, EPIPE: return .connection(.closed, tries: 1)
            case EHOSTUNREACH, ENETUNREACH, ETIMEDOUT: return .connection(.unreachable, tries: 1)
            default: return .connection(.other("IOError \(error.errnoCode)"), tries: 1)
            }
        case is NIOSSLExtraError:
            return .untrustedServer  // the certificate does not name the host
        case let error as NIOSSLError:
            if case let .handshakeFailed(reason) = error, isCertificateRejection(reason) { return .untrustedServer }
            return .connection(.tlsHandshake, tries: 1)
        case is NIOHTTP2Errors.StreamClosed:
            // The connection or the stream was closed (a GOAWAY's excluded streams, a reset) before the answer.
            return .connection(.closed, tries: 1)
        default:
            return .connection(.other(String(describing: type(of: error))), tries: 1)
        }
    }

    /// Whether a failed handshake is the server's certificate being refused. NIOSSL carries BoringSSL's
    /// reason only in its errors' text (`BoringSSLInternalError` keeps the code private), so this one
    /// check reads `CERTIFICATE_VERIFY_FAILED` there; every other classification is by type.
    static func isCertificateRejection(_ reason: BoringSSLError) -> Bool {
        guard case let .sslError(errors) = reason else { return false }
        return errors.contains { "\($0)".contains("CERTIFICATE_VERIFY_FAILED") }
    }
}

/// The provider token shared by every connection of a client: signed once, reused until `lifetime`, renewed
/// by exactly one caller when stale (concurrent callers see the new token).
final class ProviderTokenCache: Sendable {
    struct State {
        var token: String?
        /// `bearer <token>`, the `authorization` header's value, made once per token.
        var authorization = ""
        var issuedAt: Int64 = 0
        var generation = 0
        var issued = 0
    }

    let key: APNsSigningKey
    let lifetime: Int64
    let now: @Sendable () -> Int64
    let state = NIOLockedValueBox(State())

    init(key: APNsSigningKey, lifetime: Duration, now: @escaping @Sendable () -> Int64) {
        self.key = key
        self.lifetime = max(1, lifetime.components.seconds)
        self.now = now
    }

    var issued: Int { state.withLockedValue { $0.issued } }

    /// The current token's `authorization` value (`bearer <token>`) and its generation, signing a new token when
    /// there is none or it reached `lifetime`.
    func current() -> (authorization: String, generation: Int) {
        state.withLockedValue { s in
            let t = now()
            if s.token != nil, t - s.issuedAt < lifetime, t >= s.issuedAt { return (s.authorization, s.generation) }
            sign(&s, at: t)
            return (s.authorization, s.generation)
        }
    }

    /// Renews the token after APNs called generation `generation` expired, unless another caller already did.
    func renew(ifGeneration generation: Int) {
        state.withLockedValue { s in
            guard s.generation == generation else { return }
            sign(&s, at: now())
        }
    }

    private func sign(_ s: inout State, at t: Int64) {
        // ES256 signing cannot fail for a valid P-256 key; keep the old token if it somehow does.
        guard let token = try? ProviderToken.make(key: key, issuedAt: t) else { return }
        s.token = token
        s.authorization = "bearer " + token
        s.issuedAt = t
        s.generation += 1
        s.issued += 1
    }
}

/// A counting semaphore for async code: at most `limit` holders at once, waiters served in order. A
/// waiter whose task is cancelled leaves the queue and throws `CancellationError` without taking a slot.
package final class AsyncLimiter: Sendable {
    struct State {
        var held = 0
        var nextID = 0
        var waiters: [(id: Int, continuation: CheckedContinuation<Void, any Error>)] = []
        /// Acquisitions between taking their id and being queued or given a slot.
        var undecided: Set<Int> = []
        /// Those of them cancelled meanwhile.
        var cancelledEarly: Set<Int> = []
    }

    let limit: Int
    let state = NIOLockedValueBox(State())

    package init(limit: Int) { self.limit = limit }

    /// Takes a slot, waiting for one when all are held; throws `CancellationError` if the task is
    /// cancelled first (no slot is then held).
    package func acquire() async throws {
        try Task.checkCancellation()
        let id = state.withLockedValue { s -> Int in
            defer { s.nextID += 1 }
            s.undecided.insert(s.nextID)
            return s.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                enum Decision { case take, wait, cancelled }
                let decision = state.withLockedValue { s -> Decision in
                    s.undecided.remove(id)
                    if s.cancelledEarly.remove(id) != nil { return .cancelled }
                    if s.held < limit {
                        s.held += 1
                        return .take
                    }
                    s.waiters.append((id, continuation))
                    return .wait
                }
                switch decision {
                case .take: continuation.resume()
                case .cancelled: continuation.resume(throwing: CancellationError())
                case .wait: break
                }
            }
        } onCancel: {
            let waiter = state.withLockedValue { s -> CheckedContinuation<Void, any Error>? in
                if let index = s.waiters.firstIndex(where: { $0.id == id }) { return s.waiters.remove(at: index).continuation }
                if s.undecided.contains(id) { s.cancelledEarly.insert(id) }  // not queued yet: refused when it comes
                return nil  // already holds a slot: the caller releases it as usual
            }
            waiter?.resume(throwing: CancellationError())
        }
    }

    /// Gives a slot back; it passes straight to the first waiter, if any.
    package func release() {
        let next = state.withLockedValue { s -> CheckedContinuation<Void, any Error>? in
            if s.waiters.isEmpty {
                s.held -= 1
                return nil
            }
            return s.waiters.removeFirst().continuation
        }
        next?.resume()
    }

    /// Slots held now (for tests).
    package var held: Int { state.withLockedValue { $0.held } }
}
