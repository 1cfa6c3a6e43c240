public import Hummingbird
public import Logging
import SealedPushWire
public import SealedPushReceiptsDatabase
import NIOCore
import NIOConcurrencyHelpers
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The receipt collector's HTTP answers (receipts v1 §4), independent of the server around them.
///
/// `204` for a receipt whose `SHA-256(token)` matches the one kept for its id (repeats too, counted once),
/// `404` for an unknown id, `403` for a wrong token, `400` for a body that is not as §2 or §3 says, `413`
/// over 4096 bytes, `202` for a failure report; `429` when over the rate limit, `405` for anything but POST.
/// Nothing it logs holds a token.
public struct ReceiptCollector: Sendable {
    /// The database receipts are counted in.
    public let database: ReceiptsDatabase
    /// The most requests answered per second (a token bucket as deep as one second); excess gets `429`.
    public let maxRequestsPerSecond: Int
    private let bucket: RateBucket
    private let logger: Logger
    private let now: @Sendable () -> ContinuousClock.Instant

    /// A collector over `database`, answering at most `maxRequestsPerSecond` requests a second; the rate
    /// limiter reads `now` (tests pass a clock that stands still, so a slow machine does not refill it).
    public init(database: ReceiptsDatabase, maxRequestsPerSecond: Int = 50_000, logger: Logger = Logger(label: "sealedpush.receipts"),
                now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }) {
        self.database = database
        self.maxRequestsPerSecond = max(1, maxRequestsPerSecond)
        self.bucket = RateBucket(Double(max(1, maxRequestsPerSecond)), at: now())
        self.logger = logger
        self.now = now
    }

    private func admit() -> Bool {
        let rate = Double(maxRequestsPerSecond)
        return bucket.state.withLockedValue { b in
            let now = self.now()
            let elapsed = b.last.duration(to: now)
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            b.tokens = min(rate, b.tokens + seconds * rate)
            b.last = now
            guard b.tokens >= 1 else { return false }
            b.tokens -= 1
            return true
        }
    }

    /// The answer to one request: its method and its body (read up to one byte past the limit).
    public func answer(method: HTTPRequest.Method, body: [UInt8]?, tooLarge: Bool) async -> HTTPResponse.Status {
        guard method == .post else { return .methodNotAllowed }
        guard admit() else { return .tooManyRequests }
        if tooLarge { return .contentTooLarge }
        guard let body, let (message, dropped) = ReceiptMessage.parse(body) else { return .badRequest }
        let now = Self.milliseconds()
        do {
            switch message {
            case let .delivered(id, token, at, attachments):
                switch try await database.recordReceipt(id: id, token: token, at: at, attachments: attachments, receivedMilliseconds: now) {
                case .counted: return .noContent
                case .unknownID: return .notFound
                case .wrongToken: return .forbidden
                }
            case let .failed(reason, kid, at, count):
                try await database.recordFailure(reason: reason, kid: kid, at: at, count: count, dropped: dropped, receivedMilliseconds: now)
                logger.info("failure report", metadata: ["reason": "\(reason)", "kid": "\(kid?.hex ?? "null")", "count": "\(count)"])
                return .accepted
            }
        } catch {
            logger.error("receipt not stored", metadata: ["error": "\(String(describing: type(of: error)))"])
            return .internalServerError
        }
    }

    static func milliseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }

    /// The Hummingbird application answering every path with `answer`, bound to `host:port`; `onRunning`
    /// gets the bound port (useful with port 0). Its own log (connections, server errors) goes to `httpLogger`,
    /// by default one at `warning`.
    public func application(host: String, port: Int, httpLogger: Logger? = nil,
                            onRunning: @escaping @Sendable (Int) async -> Void = { _ in })
        -> some ApplicationProtocol
    {
        let collector = self
        let responder = CallbackResponder<BasicRequestContext> { request, _ in
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
            let status = await collector.answer(method: request.method, body: bytes, tooLarge: tooLarge)
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

/// The rate limiter's token bucket, shared by every request of one collector.
final class RateBucket: Sendable {
    let state: NIOLockedValueBox<(tokens: Double, last: ContinuousClock.Instant)>
    init(_ tokens: Double, at start: ContinuousClock.Instant) { state = NIOLockedValueBox((tokens, start)) }
}
