public import ServiceLifecycle
import Logging
import NIOConcurrencyHelpers

/// The gateway's delivery worker (gateway v1 §6), a service: per app, claims due deliveries in batches under
/// a lease, sends each through the app's APNs client (at most `max_in_flight` at once), and writes each
/// attempt's outcome under the claim's lease generation. On graceful shutdown it stops taking messages
/// (the API answers `503`), finishes the attempts in flight within `drainTimeout`, hands back the rest, and
/// returns.
public struct DeliveryWorker: Service {
    let gateway: Gateway
    /// What the drain did, for its two log lines (the stop requested, the drain ended).
    let drain = NIOLockedValueBox(DrainTally())

    /// A worker for `gateway`.
    public init(gateway: Gateway) { self.gateway = gateway }

    /// Runs until graceful shutdown; logs when the stop is requested and when the drain ends, with the counts.
    public func run() async throws {
        await withGracefulShutdownHandler {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await self.monitorQueue() }
                group.addTask { await self.deliverAll() }
                await group.next()
                group.cancelAll()
            }
        } onGracefulShutdown: {
            let inFlight = gateway.apps.values.reduce(0) { $0 + $1.attemptsInFlight }
            drain.withLockedValue { $0 = DrainTally(started: gateway.options.clock.monotonic(), inFlight: inFlight, handedBack: 0) }
            gateway.logger.notice("stop requested (SIGTERM or SIGINT): draining; new messages answer 503, attempts in flight get the drain timeout",
                                  metadata: ["in_flight": "\(inFlight)", "drain_timeout_ms": "\(gateway.options.drainTimeout.milliseconds)"])
            gateway.beginDraining()
        }
        let tally = drain.withLockedValue { $0 }
        if let started = tally.started {
            gateway.logger.notice("drain ended: attempts in flight finished or handed back (sent at the next start with the same apns-id)",
                                  metadata: ["in_flight": "\(tally.inFlight)", "finished": "\(max(0, tally.inFlight - tally.handedBack))",
                                             "handed_back": "\(tally.handedBack)", "ms": "\(started.duration(to: gateway.options.clock.monotonic()).milliseconds)"])
        }
    }

    /// The drain's counts: the attempts in flight when the stop was requested, and those handed back at its deadline.
    struct DrainTally {
        var started: ContinuousClock.Instant?
        var inFlight = 0
        var handedBack = 0
    }

    var isDraining: Bool { gateway.draining.withLockedValue { $0 } }

    /// Runs one loop per app and platform it serves; after a reload, the loops of the new apps.
    func deliverAll() async {
        while !isDraining, !Task.isCancelled {
            let generation = gateway.appsGeneration.withLockedValue { $0 }
            let apps = gateway.apps
            await withTaskGroup(of: Void.self) { group in
                for app in apps.values {
                    for platform in app.senders.keys.sorted() { group.addTask { await self.deliver(app, platform, generation: generation) } }
                }
            }
            if apps.isEmpty { try? await Task.sleep(for: .milliseconds(200)) }
        }
    }

    /// Counts the queue each second: each app's `queued` (for `max_queue`) and the queue gauges; every
    /// `pruneInterval`, deletes what is past its keeping time.
    func monitorQueue() async {
        let clock = gateway.options.clock
        var lastPrune = clock.monotonic()
        while !Task.isCancelled {
            if lastPrune.duration(to: clock.monotonic()) >= gateway.options.pruneInterval {
                lastPrune = clock.monotonic()
                await prune()
            }
            if let depths = try? await gateway.store.queueDepths() {
                let now = gateway.now
                for app in gateway.apps.values {
                    let depth = depths[app.config.id] ?? QueueDepth(queued: 0, oldestCreatedAt: nil)
                    app.queued.withLockedValue { $0 = depth.queued }
                    gateway.metrics.queueOldest(app: app.config.id, oldestSeconds: depth.oldestCreatedAt.map { Double(max(0, now - $0)) / 1000 } ?? 0)
                    for platform in app.config.platforms {
                        // An app with nothing queued has nothing queued on any platform: no query.
                        let queued = depth.queued == 0 ? 0 : (try? await gateway.store.queued(app: app.config.id, platform: platform)) ?? 0
                        gateway.metrics.queueDepth(app: app.config.id, platform: platform, depth: queued)
                    }
                }
            }
            try? await Task.sleep(for: .seconds(1))
        }
    }

    /// Deletes messages past `expires_at` + 7 days, idempotency answers past 24 hours and events past 7 days, in batches.
    func prune() async {
        let now = gateway.now
        var deleted = 0
        do {
            while !Task.isCancelled {
                let n = try await gateway.store.prune(messagesExpiredBefore: now - 7 * 86_400_000, idempotencyBefore: now - Gateway.idempotencyWindow,
                                                      eventsBefore: now - Gateway.eventsKeptFor, limit: 2000)
                deleted += n
                if n < 2000 { break }
            }
        } catch {
            gateway.logger.error("cannot prune old records; retrying at the next interval", metadata: ["error": "\(String(describing: type(of: error)))"])
        }
        if deleted > 0 { gateway.logger.info("pruned messages and events past their keeping time", metadata: ["rows": "\(deleted)"]) }
        await gateway.sweepMailbox()
    }

    /// One app's loop for one platform: claim what is due and fits in the free slots, send each in a child task,
    /// wait for a wake-up (a new message, a finished attempt) or the next due time.
    func deliver(_ app: AppRuntime, _ platform: PushPlatform, generation: Int) async {
        let options = gateway.options
        guard let sender = app.senders[platform], let inFlight = app.inFlight[platform], let wake = app.wakes[platform] else { return }
        await withDiscardingTaskGroup { group in
            var lastClaim = options.clock.monotonic()
            while !isDraining, !Task.isCancelled, gateway.appsGeneration.withLockedValue({ $0 }) == generation {
                if app.pausedReason(platform) != nil {
                    await wake.wait(upTo: .seconds(1))
                    continue
                }
                // Instances sharing a PostgreSQL database divide the app's bound among them (gateway v1 §9).
                let share = max(1, app.config.maxInFlight / max(1, gateway.store.liveInstances))
                let free = share - inFlight.held
                // Under load, claim in batches: while attempts are in flight (the end of each wakes this loop once
                // a batch's worth is free), wait for a quarter of the share rather than claiming one delivery (a
                // transaction, a loop turn) per finished attempt — but no longer than `claimDelay`, so a slow
                // APNs holding most slots does not hold new messages back.
                let batch = Self.claimThreshold(share: share, claimBatch: options.claimBatch)
                let waited = lastClaim.duration(to: options.clock.monotonic())
                guard Self.shouldClaim(free: free, held: inFlight.held, batch: batch, waited: waited, delay: options.claimDelay) else {
                    // With every slot taken, look again every `claimDelay` (a finished attempt that frees less than a
                    // batch does not wake the loop); with some free, once the delay is up.
                    await wake.wait(upTo: free == 0 ? options.claimDelay : max(.milliseconds(1), options.claimDelay - waited))
                    continue
                }
                lastClaim = options.clock.monotonic()
                let now = gateway.now
                let claims: [ClaimedDelivery]
                do {
                    claims = try await gateway.store.claimDue(app: app.config.id, platform: platform, now: now, leaseUntil: now + options.lease.milliseconds,
                                                             limit: min(free, options.claimBatch))
                } catch {
                    gateway.logger.error("cannot claim deliveries; retrying in 1 s",
                                         metadata: ["app": "\(app.config.id)", "platform": "\(platform.rawValue)", "error": "\(String(describing: type(of: error)))"])
                    await wake.wait(upTo: .seconds(1))
                    continue
                }
                if claims.isEmpty {
                    let next = try? await gateway.store.nextDue(app: app.config.id, platform: platform)
                    let wait = next.map { max(1, min(1000, $0 - gateway.now)) } ?? 1000
                    await wake.wait(upTo: .milliseconds(wait))
                    continue
                }
                for claim in claims {
                    do { try await inFlight.acquire() } catch {
                        await write(claim, app: app, .handBack)
                        continue
                    }
                    group.addTask {
                        await self.attempt(claim, app: app, sender: sender)
                        inFlight.release()
                        // The release that makes a batch's worth free wakes the loop (later ones find it awake or
                        // notified); so does the last one, and draining wakes it too.
                        let held = inFlight.held
                        if held == 0 || share - held >= batch { wake.notify() }
                    }
                }
            }
            // Draining: attempts in flight get `drainTimeout` to finish, then are cancelled and handed back.
            if isDraining {
                let deadline = options.clock.monotonic() + options.drainTimeout
                while inFlight.held > 0, options.clock.monotonic() < deadline { try? await Task.sleep(for: .milliseconds(20)) }
                if inFlight.held > 0 {
                    gateway.logger.warning("attempts still in flight at the drain deadline are handed back",
                                           metadata: ["app": "\(app.config.id)", "platform": "\(platform.rawValue)", "count": "\(inFlight.held)"])
                    let held = inFlight.held
                    drain.withLockedValue { $0.handedBack += held }
                    group.cancelAll()
                }
            }
        }
    }

    /// Whether the loop claims now: it has a free slot, and either a batch's worth is free, nothing is in
    /// flight, or `delay` has passed since its last claim.
    static func shouldClaim(free: Int, held: Int, batch: Int, waited: Duration, delay: Duration) -> Bool {
        free > 0 && (free >= batch || held == 0 || waited >= delay)
    }

    /// How many free slots the loop waits for before it claims while attempts are in flight: a quarter of the
    /// share (at least 1, at most `claimBatch`).
    static func claimThreshold(share: Int, claimBatch: Int) -> Int {
        max(1, min(claimBatch, share / 4))
    }

    /// Sends one claimed delivery through its platform's sender and writes what came of it.
    func attempt(_ claim: ClaimedDelivery, app: AppRuntime, sender: any PlatformSender) async {
        let now = gateway.now
        let deliverOnce = claim.apnsExpiration == 0
        if (deliverOnce && claim.attempts > 0) || (!deliverOnce && now >= claim.expiresAt) {
            await write(claim, app: app, .final(.expired, status: nil, reason: "ttl_expired", attempted: false))
            return
        }
        let start = gateway.options.clock.monotonic()
        let answer = await sender.send(claim, now: now)
        if answer.madeRequest {
            let (status, reason) = answer.counted
            gateway.metrics.pushRequest(app: app.config.id, platform: claim.platform, status: status, reason: reason, duration: start.duration(to: gateway.options.clock.monotonic()))
        }
        var unregisteredAt: Int64?
        if case let .unregistered(_, _, before) = answer { unregisteredAt = before }
        let outcome = outcome(of: answer, claim: claim, cancelled: Task.isCancelled && isDraining)
        if case let .paused(_, why) = outcome { pause(app, claim.platform, why) }
        if claim.platform == .webpush { reportOrigins(app) }
        await write(claim, app: app, outcome, unregisteredAt: unregisteredAt)
    }

    /// Logs each Web Push origin the app's subscriptions paused or resumed since the last look, and sets its gauge
    /// (`sealedpush_webpush_origin_paused{app,origin}`).
    func reportOrigins(_ app: AppRuntime) {
        for change in app.webpushRefusals.takeChanges() {
            gateway.metrics.originPaused(app: app.config.id, origin: change.origin, change.paused)
            if change.paused {
                gateway.logger.error("\(app.webpushRefusals.threshold) distinct subscriptions at one push service refused this app's VAPID key within 10 minutes (401/403) and none there accepted: its Web Push to that origin waits until a delivery there succeeds or the configuration is reloaded (SIGHUP); other origins still send. Check the VAPID key and subject if this is a real push service",
                                     metadata: ["app": "\(app.config.id)", "origin": "\(change.origin)", "reason": "credentials_paused"])
            } else {
                gateway.logger.notice("a Web Push origin that was paused accepted a delivery: sending there again",
                                      metadata: ["app": "\(app.config.id)", "origin": "\(change.origin)"])
            }
        }
    }

    /// What a push service's answer means for the delivery (gateway v1 §6, platforms v1 §2–§3): the same rules
    /// for every platform. A retry waits out its backoff, and at least the service's `Retry-After`; an attempt
    /// that ended without an answer because the drain cancelled it goes back untouched.
    func outcome(of answer: PushAnswer, claim: ClaimedDelivery, cancelled: Bool) -> AttemptOutcome {
        switch answer {
        case let .accepted(status, platformID):
            return .accepted(status: status, platformID: platformID)
        case let .unregistered(status, reason, _):
            return .final(.unregistered, status: status, reason: reason, attempted: true)
        case let .rejected(status, reason, attempted):
            return .final(.rejected, status: status, reason: reason, attempted: attempted)
        case let .retry(status, reason, retryAfter):
            if cancelled && status == nil { return .handBack }
            return retry(claim, status: status, reason: reason, notBefore: retryAfter)
        case let .paused(status, reason):
            return .paused(status: status, reason: reason)
        case let .held(reason, retryAfter):
            return .held(until: gateway.now + max(1, retryAfter.milliseconds), reason: reason)
        case .handBack:
            return .handBack
        }
    }

    func write(_ claim: ClaimedDelivery, app: AppRuntime, _ outcome: AttemptOutcome, unregisteredAt: Int64? = nil) async {
        do {
            // The state machine decides the state (a retry past expires_at is expired, a delete that came while the
            // push was in flight cancels it unless APNs accepted it): count what it wrote.
            let state = try await gateway.store.completeAttempt(claim, outcome: outcome, unregisteredAt: unregisteredAt, now: gateway.now)
            if let state, state != .queued { gateway.metrics.delivery(app: app.config.id, platform: claim.platform, state: state) }
        } catch {
            // The lease lapses and the delivery is tried again: at least once.
            gateway.logger.error("cannot record an attempt's outcome; the delivery will be tried again when its lease lapses",
                                 metadata: ["app": "\(app.config.id)", "error": "\(String(describing: type(of: error)))"])
        }
    }

    func pause(_ app: AppRuntime, _ platform: PushPlatform, _ reason: String) {
        let first = app.paused.withLockedValue { r -> Bool in
            defer { r[platform] = reason }
            return r[platform] == nil
        }
        gateway.metrics.paused(app: app.config.id, platform: platform, true)
        if first {
            let fix = switch platform {
            case .apns: "APNs refused this app's credentials; its APNs deliveries stay queued until the key, topic or certificate is fixed"
            case .fcm: "FCM refused this app's service account; its FCM deliveries stay queued until the service account (or its project's permissions) is fixed"
            case .webpush: "A push service refused this app's VAPID key; its Web Push deliveries stay queued until the key or subject is fixed"
            }
            gateway.logger.error("\(fix) and the configuration reloaded (SIGHUP)",
                                 metadata: ["app": "\(app.config.id)", "platform": "\(platform.rawValue)", "reason": "\(reason)"])
        }
    }

    /// The next attempt after exponential backoff with equal jitter. One that would be at or past `expires_at`
    /// (or of a `ttl: 0` message) is written `expired` by `DeliveryStateMachine`, when this attempt is written.
    func retry(_ claim: ClaimedDelivery, status: Int?, reason: String, notBefore: Duration? = nil) -> AttemptOutcome {
        let options = gateway.options
        let base = max(1, options.baseRetryDelay.milliseconds)
        let cap = max(base, options.maxRetryDelay.milliseconds)
        let exponent = min(claim.attempts, 30)
        let full = min(cap, base << Int64(exponent))
        let delay = max(full / 2 + Int64.random(in: 0...(full - full / 2)), notBefore?.milliseconds ?? 0)
        return .retry(at: gateway.now + delay, status: status, reason: reason)
    }
}

extension Duration {
    /// Whole milliseconds.
    var milliseconds: Int64 { components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000 }
}
