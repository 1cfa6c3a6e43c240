public import Hummingbird
public import Logging
import SealedPushWire
public import SealedPushReceiptsDatabase
import NIOCore
import SealedPushRateLimit
@_exported public import SealedPushTime

/// The receipt collector's HTTP answers (receipts v1 §4), independent of the server around them.
///
/// `204` for a receipt whose `SHA-256(token)` matches the one kept for its id (repeats too, counted once),
/// `404` for an unknown id, `403` for a wrong token, `400` for a body that is not as §2 or §3 says, `413`
/// over 4096 bytes, `202` for a failure report; `429` when over the rate limit, `405` for anything but POST.
///
/// Failure reports are unauthenticated by design, so they are limited apart from receipts: each source
/// address may send `maxReportsPerSourcePerMinute` of them (a device sends at most one per reason and key
/// every 10 minutes), and each stored report counts for at most `ReceiptsDatabase.maximumReportCount`
/// failures. The global rate is checked before a body is read. Nothing it logs holds a token.
public struct ReceiptCollector: Sendable {
    /// The database receipts are counted in.
    public let database: ReceiptsDatabase
    /// The most requests answered per second (a token bucket as deep as one second); excess gets `429`.
    public let maxRequestsPerSecond: Int
    /// The most failure reports one source address may send a minute (a bucket as deep as one minute).
    public let maxReportsPerSourcePerMinute: Int
    /// The clock receipts are timed by (their received time, its wall reading) and the rate limits refill on
    /// (its monotonic reading).
    public let clock: SealedPushClock
    private let bucket: TokenBucket
    private let sources: SourceRateLimiter
    private let logger: Logger

    /// A collector over `database`, answering at most `maxRequestsPerSecond` requests a second and
    /// `maxReportsPerSourcePerMinute` failure reports a minute from one address, on `clock` (tests pass a
    /// `SealedPushManualClock`'s, so a slow machine does not refill the rate limits).
    public init(database: ReceiptsDatabase, maxRequestsPerSecond: Int = 50_000, maxReportsPerSourcePerMinute: Int = 60,
                logger: Logger = Logger(label: "sealedpush.receipts"), clock: SealedPushClock = .system) {
        self.database = database
        self.maxRequestsPerSecond = max(1, maxRequestsPerSecond)
        self.maxReportsPerSourcePerMinute = max(1, maxReportsPerSourcePerMinute)
        self.clock = clock
        self.bucket = TokenBucket(perSecond: maxRequestsPerSecond, clock: clock)
        // As deep as a minute's reports, refilled over the minute.
        self.sources = SourceRateLimiter(capacity: max(1, maxReportsPerSourcePerMinute),
                                         refillPerSecond: Double(max(1, maxReportsPerSourcePerMinute)) / 60, clock: clock)
        self.logger = logger
    }

    /// A collector whose rate limits read the monotonic time from `now` (and the wall time from the system).
    @available(*, deprecated, message: "pass clock: SealedPushClock(wall:monotonic:) (or a SealedPushManualClock's clock); it times receipts and the rate limits alike")
    public init(database: ReceiptsDatabase, maxRequestsPerSecond: Int = 50_000, maxReportsPerSourcePerMinute: Int = 60,
                logger: Logger = Logger(label: "sealedpush.receipts"), now: @escaping @Sendable () -> ContinuousClock.Instant) {
        self.init(database: database, maxRequestsPerSecond: maxRequestsPerSecond, maxReportsPerSourcePerMinute: maxReportsPerSourcePerMinute,
                  logger: logger, clock: SealedPushClock(wall: { SealedPushClock.systemWallTime() }, monotonic: now))
    }

    /// Takes one token from the global bucket; `false` when it is empty (answer `429`).
    func admit() -> Bool {
        bucket.take() != nil
    }

    /// The answer to one request: its method, its body (read up to one byte past the limit) and the
    /// address it came from (`nil`: unknown, limited as one source).
    public func answer(method: HTTPRequest.Method, body: [UInt8]?, tooLarge: Bool, source: String? = nil) async -> HTTPResponse.Status {
        guard method == .post else { return .methodNotAllowed }
        guard admit() else { return .tooManyRequests }
        return await answerAdmitted(body: body, tooLarge: tooLarge, source: source)
    }

    /// The answer to a POST the global rate limit already admitted.
    func answerAdmitted(body: [UInt8]?, tooLarge: Bool, source: String?) async -> HTTPResponse.Status {
        if tooLarge { return .contentTooLarge }
        guard let body, let (message, dropped) = ReceiptMessage.parse(body) else { return .badRequest }
        let now = clock.wall().milliseconds
        do {
            switch message {
            case let .delivered(id, token, at, attachments):
                switch try await database.recordReceipt(id: id, token: token, at: at, attachments: attachments, receivedMilliseconds: now) {
                case .counted: return .noContent
                case .unknownID: return .notFound
                case .wrongToken: return .forbidden
                }
            case let .revealed(id, token, at, _):
                switch try await database.recordRevealed(id: id, token: token, at: at, receivedMilliseconds: now) {
                case .counted: return .noContent
                case .unknownID: return .notFound
                case .wrongToken: return .forbidden
                }
            case let .failed(reason, kid, at, count):
                guard sources.admit(source ?? "unknown") else {
                    return .tooManyRequests
                }
                try await database.recordFailure(reason: reason, kid: kid, at: at, count: count, dropped: dropped, receivedMilliseconds: now)
                logger.info("failure report", metadata: ["reason": "\(reason)", "kid": "\(kid?.hex ?? "null")", "count": "\(count)"])
                return .accepted
            }
        } catch {
            logger.error("receipt not stored", metadata: ["error": "\(String(describing: type(of: error)))"])
            return .internalServerError
        }
    }

    /// The Hummingbird application answering every path with `answer`, bound to `host:port`; `onRunning`
    /// gets the bound port (useful with port 0). Its own log (connections, server errors) goes to `httpLogger`,
    /// by default one at `warning`.
    public func application(host: String, port: Int, httpLogger: Logger? = nil,
                            onRunning: @escaping @Sendable (Int) async -> Void = { _ in })
        -> some ApplicationProtocol
    {
        let collector = self
        let responder = CallbackResponder<CollectorRequestContext> { request, context in
            // Method and rate first: a refused request's body is never read.
            guard request.method == .post else { return Response(status: .methodNotAllowed) }
            guard collector.admit() else { return Response(status: .tooManyRequests) }
            var tooLarge = false
            var bytes: [UInt8]?
            do {
                let buffer = try await request.body.collect(upTo: ReceiptMessage.maximumBodyBytes)
                bytes = Array(buffer.readableBytesView)
            } catch is NIOTooManyBytesError {
                tooLarge = true
            } catch {
                bytes = nil
            }
            let status = await collector.answerAdmitted(body: bytes, tooLarge: tooLarge, source: context.source)
            return Response(status: status)
        }
        var quiet = httpLogger ?? Logger(label: "sealedpush.receipts.http")
        if httpLogger == nil { quiet.logLevel = .warning }
        return Application(
            responder: responder,
            configuration: ApplicationConfiguration(address: .hostname(host, port: port), serverName: "sealedpush-receipts"),
            onServerRunning: { channel in await onRunning(channel.localAddress?.port ?? port) },
            logger: quiet)
    }
}

/// The collector's request context: Hummingbird's basic one plus the address the request came from.
public struct CollectorRequestContext: RequestContext {
    /// Hummingbird's per-request storage.
    public var coreContext: CoreRequestContextStorage
    /// The peer's IP address, or `nil` when the channel has none (a Unix socket).
    public let source: String?

    /// A context for a request arriving on `source.channel`.
    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        self.source = source.channel.remoteAddress?.ipAddress
    }
}
