public import ServiceLifecycle
import AsyncHTTPClient
import Crypto
import Logging
import NIOCore
import SealedPushCrypto

/// `SealedPush-Signature` (gateway v1 §8): `t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>." + body)>`.
public enum WebhookSignature {
    /// The header's value for `body` sent at `timestamp` (Unix seconds), signed with `secret`.
    public static func header(secret: [UInt8], timestamp: Int64, body: [UInt8]) -> String {
        var message = Array("\(timestamp).".utf8)
        message += body
        let mac = HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: secret))
        return "t=\(timestamp),v1=" + Hex.encode(Array(mac))
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
        let timeout = TimeAmount.milliseconds(gateway.options.webhookTimeout.milliseconds)
        let client = HTTPClient(eventLoopGroupProvider: .singleton,
                                configuration: HTTPClient.Configuration(redirectConfiguration: .disallow,
                                                                        timeout: .init(connect: timeout, read: timeout)))
        await cancelWhenGracefulShutdown { await self.serveAll(client) }
        try? await client.shutdown()
    }

    /// Runs one loop per app with a webhook; after a reload, the loops of the new configuration.
    func serveAll(_ client: HTTPClient) async {
        while !Task.isCancelled {
            let generation = gateway.appsGeneration.withLockedValue { $0 }
            let apps = gateway.apps.values.filter { $0.config.webhook != nil }
            await withTaskGroup(of: Void.self) { group in
                for app in apps { group.addTask { await self.serve(app, client: client, generation: generation) } }
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

    /// One app's loop: claim what is due, POST each (at most `webhookConcurrency` at once), then poll again.
    func serve(_ app: AppRuntime, client: HTTPClient, generation: Int) async {
        guard let webhook = app.config.webhook else { return }
        let options = gateway.options
        while !Task.isCancelled, gateway.appsGeneration.withLockedValue({ $0 }) == generation {
            let now = gateway.now
            let claims: [ClaimedEvent]
            do {
                claims = try await gateway.store.claimEvents(app: app.config.id, now: now,
                                                             leaseUntil: now + options.webhookTimeout.milliseconds + options.lease.milliseconds,
                                                             limit: options.webhookConcurrency)
            } catch {
                gateway.logger.error("cannot claim webhook events; retrying in 1 s",
                                     metadata: ["app": "\(app.config.id)", "error": "\(String(describing: type(of: error)))"])
                try? await Task.sleep(for: .seconds(1))
                continue
            }
            if claims.isEmpty {
                try? await Task.sleep(for: options.webhookPollInterval)
                continue
            }
            await withTaskGroup(of: Void.self) { group in
                for claim in claims { group.addTask { await self.attempt(claim, app: app.config.id, webhook: webhook, client: client) } }
            }
        }
    }

    /// POSTs one event and writes what came of it.
    func attempt(_ claim: ClaimedEvent, app: String, webhook: WebhookConfiguration, client: HTTPClient) async {
        let options = gateway.options
        let now = gateway.now
        let deadline = claim.createdAt + options.webhookRetryWindow.milliseconds
        if now >= deadline {
            await finish(claim, app: app, .dropped)
            return
        }
        var request = HTTPClientRequest(url: webhook.url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "User-Agent", value: "sealedpush-gateway")
        request.headers.add(name: "SealedPush-Signature", value: WebhookSignature.header(secret: webhook.secret, timestamp: now / 1000, body: claim.body))
        request.body = .bytes(ByteBuffer(bytes: claim.body))
        var status: Int?
        do {
            let response = try await client.execute(request, timeout: .milliseconds(options.webhookTimeout.milliseconds))
            status = Int(response.status.code)
            _ = try? await response.body.collect(upTo: 64 * 1024)  // read (and ignore) what the receiver says
        } catch {
            if Task.isCancelled {
                // Shutting down: not an attempt; the event is due again at the next start (or when its lease lapses).
                await finish(claim, app: app, .handBack)
                return
            }
        }
        gateway.metrics.webhookRequest(app: app, status: status.map(String.init) ?? "none")
        if let status, (200..<300).contains(status) {
            await finish(claim, app: app, .acknowledged)
            return
        }
        let base = max(1, options.webhookBaseRetryDelay.milliseconds)
        let cap = max(base, options.webhookMaxRetryDelay.milliseconds)
        let full = min(cap, base << Int64(min(claim.attempts, 40)))
        let next = gateway.now + full / 2 + Int64.random(in: 0...(full - full / 2))
        gateway.logger.info("webhook attempt failed; retrying with backoff",
                            metadata: ["app": "\(app)", "event": "\(claim.id)", "status": "\(status.map(String.init) ?? "no answer")",
                                       "attempts": "\(claim.attempts + 1)"])
        await finish(claim, app: app, next >= deadline ? .dropped : .retry(at: next))
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
