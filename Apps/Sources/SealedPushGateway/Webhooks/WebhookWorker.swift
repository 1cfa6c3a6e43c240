public import ServiceLifecycle
import AsyncHTTPClient
import Crypto
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import SealedPushCrypto

/// `SealedPush-Signature` (gateway v1 §8): `t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>." + body)>`, with one
/// `v1=` per secret during a rotation (the new secret's first): a receiver accepts the header when any `v1` matches.
public enum WebhookSignature {
    /// The header's value for `body` sent at `timestamp` (Unix seconds), signed with `secret`.
    public static func header(secret: [UInt8], timestamp: Int64, body: [UInt8]) -> String {
        header(secrets: [secret], timestamp: timestamp, body: body)
    }

    /// The header's value for `body` sent at `timestamp`, with one `v1=` per secret, in the order given.
    public static func header(secrets: [[UInt8]], timestamp: Int64, body: [UInt8]) -> String {
        var message = Array("\(timestamp).".utf8)
        message += body
        let signatures = secrets.map { secret in
            "v1=" + Hex.encode(Array(HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: secret))))
        }
        return (["t=\(timestamp)"] + signatures).joined(separator: ",")
    }
}

/// What one webhook POST came to.
enum WebhookAnswer: Sendable, Equatable {
    /// The receiver answered with this status, and its body was read, within the deadline.
    case status(Int)
    /// No complete answer within the deadline: why, for the log and never holding the URL ("connection refused",
    /// "no answer within 10 s", "body not read within 10 s", …).
    case noAnswer(String)

    /// For the log: `HTTP <code>`, or why there was no answer.
    var logValue: String {
        switch self {
        case let .status(code): "HTTP \(code)"
        case let .noAnswer(why): why
        }
    }

    /// The status as the `sealedpush_gateway_webhook_requests_total` label: the code, or `none`.
    var label: String {
        switch self {
        case let .status(code): String(code)
        case .noAnswer: "none"
        }
    }
}

/// The webhook worker (gateway v1 §8), a service: for each app with a `webhook`, claims its due events under a
/// lease, POSTs each (signed afresh for each attempt, answer within `webhookTimeout`), and writes the outcome
/// under the claim's lease generation: a 2xx acknowledges, anything else is retried with exponential backoff
/// and jitter until `webhookRetryWindow` after the event was written, then dropped and counted
/// (`sealedpush_gateway_webhook_dropped_total{app}`). Events are durable: a restart resumes them.
public struct WebhookWorker: Service {
    let gateway: Gateway

    /// A worker for `gateway`.
    public init(gateway: Gateway) { self.gateway = gateway }

    /// Runs until graceful shutdown; attempts in flight then are cancelled and their events handed back.
    public func run() async throws {
        await cancelWhenGracefulShutdown { await self.serveAll() }
    }

    /// The HTTP client of one app's loop (its own connection pool: one app's receiver never holds up another's).
    ///
    /// - A refused connection fails that attempt at once; the worker's own backoff schedules the next. With
    ///   AsyncHTTPClient's default the pool retried the connect on a backoff of its own (100 ms × 1.25ⁿ up to a
    ///   minute, reset only by a connect that succeeds) and kept the attempts queued behind it: after a 22 s outage,
    ///   attempts that started once the receiver was back still waited out their 10 s in the pool, and draining took
    ///   70 s (issue #36, bug 7).
    /// - As many connections as attempts at once (`concurrency`), so no attempt spends its deadline queued for one
    ///   (AsyncHTTPClient's default is 8 per host; an app POSTs up to 16 events at once).
    static func makeClient(timeout: Duration, concurrency: Int) -> HTTPClient {
        let amount = TimeAmount.milliseconds(timeout.milliseconds)
        var configuration = HTTPClient.Configuration(redirectConfiguration: .disallow, timeout: .init(connect: amount, read: amount))
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = max(8, concurrency)
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    /// POSTs `request` and reads the whole answer, its body included, within `timeout` of the start: a receiver
    /// that sends its headers and then stalls its body has not answered (gateway v1 §8: no answer in 10 s). The body
    /// is read and discarded as it comes, never kept.
    static func post(_ request: HTTPClientRequest, client: HTTPClient, timeout: Duration) async -> WebhookAnswer {
        let deadline = ContinuousClock.now + timeout
        let seconds = "\(timeout)"
        return await withTaskGroup(of: WebhookAnswer?.self) { group in
            group.addTask {
                let response: HTTPClientResponse
                do {
                    response = try await client.execute(request, deadline: .now() + .milliseconds(timeout.milliseconds))
                } catch {
                    return .noAnswer(Self.describe(error, seconds: seconds))
                }
                do {
                    for try await _ in response.body {}
                } catch {
                    return .noAnswer("the answer's body was not read within \(seconds) (\(Self.describe(error, seconds: seconds)))")
                }
                return .status(Int(response.status.code))
            }
            group.addTask {
                try? await Task.sleep(until: deadline, clock: .continuous)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            if let first { return first }
            return .noAnswer("no complete answer within \(seconds)")
        }
    }

    /// What went wrong, in words that hold neither the URL nor any header.
    static func describe(_ error: any Error, seconds: String) -> String {
        if let error = error as? HTTPClientError {
            switch error {
            case .deadlineExceeded, .readTimeout: return "no answer within \(seconds)"
            case .connectTimeout: return "no connection within \(seconds)"
            case .cancelled: return "cancelled"
            default: break
            }
        }
        if let error = error as? IOError, error.errnoCode == ECONNREFUSED { return "connection refused" }
        if error is CancellationError { return "cancelled" }
        // NIOPosix's NIOConnectionError lists each address tried with its errno (only the errno is read here).
        if String(describing: error).contains("(errno: \(ECONNREFUSED))") { return "connection refused" }
        return "\(type(of: error))"
    }

    /// Runs one loop per app with a webhook; after a reload, the loops of the new configuration.
    func serveAll() async {
        while !Task.isCancelled {
            let generation = gateway.appsGeneration.withLockedValue { $0 }
            let apps = gateway.apps.values.filter { $0.config.webhook != nil }
            await withTaskGroup(of: Void.self) { group in
                for app in apps { group.addTask { await self.serve(app, generation: generation) } }
                if apps.isEmpty {
                    // Nothing to send: wait for a reload (or shutdown).
                    group.addTask {
                        while !Task.isCancelled, gateway.appsGeneration.withLockedValue({ $0 }) == generation {
                            try? await Task.sleep(for: .milliseconds(500))
                        }
                    }
                }
            }
        }
    }

    /// One app's loop with a client of its own, shut down when the loop ends.
    func serve(_ app: AppRuntime, generation: Int) async {
        let client = Self.makeClient(timeout: gateway.options.webhookTimeout,
                                     concurrency: app.config.webhook?.concurrency ?? gateway.options.webhookConcurrency)
        await serve(app, client: client, generation: generation)
        try? await client.shutdown()
    }

    /// One app's loop: at most `width` POSTs in flight (its webhook's `concurrency`, else `webhookConcurrency`); as
    /// they finish it claims the next due events, a few at a time (`claimThreshold`), so that one slow answer holds
    /// one slot, not a whole batch. It sleeps until a new event (announced by the store, from every instance on
    /// PostgreSQL), a finished POST, or `webhookPollInterval`.
    func serve(_ app: AppRuntime, client: HTTPClient, generation: Int) async {
        guard let webhook = app.config.webhook else { return }
        let options = gateway.options
        let width = max(1, webhook.concurrency ?? options.webhookConcurrency)
        let threshold = Self.claimThreshold(width: width)
        let inFlight = NIOLockedValueBox(0)
        // Events POSTed whose outcome is not written yet: at most `width` more, so that a store slow to write
        // outcomes slows the claims rather than piling up answered events.
        let unwritten = NIOLockedValueBox(0)
        let wake = app.webhookWake
        await withDiscardingTaskGroup { group in
            while !Task.isCancelled, gateway.appsGeneration.withLockedValue({ $0 }) == generation {
                let held = inFlight.withLockedValue { $0 }
                let free = min(width - held, width - unwritten.withLockedValue { $0 })
                guard free >= threshold || (held == 0 && free > 0) else {
                    await wake.wait(upTo: options.webhookPollInterval)
                    continue
                }
                let now = gateway.now
                let claims: [ClaimedEvent]
                do {
                    claims = try await gateway.store.claimEvents(app: app.config.id, now: now,
                                                                 leaseUntil: now + options.webhookTimeout.milliseconds + options.lease.milliseconds,
                                                                 limit: free)
                } catch {
                    gateway.logger.error("cannot claim webhook events; retrying in 1 s",
                                         metadata: ["app": "\(app.config.id)", "error": "\(String(describing: type(of: error)))"])
                    try? await Task.sleep(for: .seconds(1))
                    continue
                }
                if claims.isEmpty {
                    await wake.wait(upTo: options.webhookPollInterval)
                    continue
                }
                inFlight.withLockedValue { $0 += claims.count }
                for claim in claims {
                    group.addTask {
                        let outcome = await self.attempt(claim, app: app.config.id, webhook: webhook, client: client)
                        // The slot is free once the POST is over: the outcome's write (grouped with others' on
                        // PostgreSQL) no longer holds it. The event stays leased until that write.
                        unwritten.withLockedValue { $0 += 1 }
                        inFlight.withLockedValue { $0 -= 1 }
                        wake.notify()
                        await self.finish(claim, app: app.config.id, outcome)
                        unwritten.withLockedValue { $0 -= 1 }
                        wake.notify()
                    }
                }
            }
        }
    }

    /// How many free slots make a claim worthwhile while POSTs are in flight: a quarter of the width (at least 1),
    /// so that under load each claim takes several events rather than one per finished POST.
    static func claimThreshold(width: Int) -> Int { max(1, width / 4) }

    /// POSTs one event; what came of it, for `finish` to write.
    func attempt(_ claim: ClaimedEvent, app: String, webhook: WebhookConfiguration, client: HTTPClient) async -> EventOutcome {
        let options = gateway.options
        let now = gateway.now
        let deadline = claim.createdAt + options.webhookRetryWindow.milliseconds
        if now >= deadline { return .dropped }
        var request = HTTPClientRequest(url: webhook.url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "User-Agent", value: "sealedpush-gateway")
        request.headers.add(name: "SealedPush-Signature",
                            value: WebhookSignature.header(secrets: webhook.signingSecrets, timestamp: now / 1000, body: claim.body))
        request.body = .bytes(ByteBuffer(bytes: claim.body))
        let answer = await Self.post(request, client: client, timeout: options.webhookTimeout)
        if case .noAnswer = answer, Task.isCancelled {
            // Shutting down: not an attempt; the event is due again at the next start (or when its lease lapses).
            return .handBack
        }
        gateway.metrics.webhookRequest(app: app, status: answer.label)
        if case let .status(status) = answer, (200..<300).contains(status) { return .acknowledged }
        let base = max(1, options.webhookBaseRetryDelay.milliseconds)
        let cap = max(base, options.webhookMaxRetryDelay.milliseconds)
        let full = min(cap, base << Int64(min(claim.attempts, 40)))
        let next = gateway.now + full / 2 + Int64.random(in: 0...(full - full / 2))
        gateway.logger.info("webhook attempt failed; retrying with backoff",
                            metadata: ["app": "\(app)", "event": "\(claim.id)", "answer": "\(answer.logValue)",
                                       "attempts": "\(claim.attempts + 1)"])
        return next >= deadline ? .dropped : .retry(at: next)
    }

    func finish(_ claim: ClaimedEvent, app: String, _ outcome: EventOutcome) async {
        do {
            let changed = try await gateway.store.completeEvent(claim, outcome: outcome, now: gateway.now)
            if changed, outcome == .dropped {
                gateway.metrics.webhookDropped(app: app)
                gateway.logger.warning("webhook event dropped: no 2xx within the retry window",
                                       metadata: ["app": "\(app)", "event": "\(claim.id)", "attempts": "\(claim.attempts)"])
            }
        } catch {
            // The lease lapses and the event is sent again: at least once.
            gateway.logger.error("cannot record a webhook attempt's outcome; the event will be sent again when its lease lapses",
                                 metadata: ["app": "\(app)", "error": "\(String(describing: type(of: error)))"])
        }
    }
}
