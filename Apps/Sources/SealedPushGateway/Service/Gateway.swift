public import Logging
import SealedPushAPNs
import SealedPushWebPush
import SealedPushAPNsCore
import SealedPushSender
import SealedPushWire
import SealedPushCrypto
import NIOConcurrencyHelpers
import SealedPushRateLimit
@_exported public import SealedPushTime
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// How the gateway retries, leases and limits; the defaults suit production, tests shorten them.
public struct GatewayOptions: Sendable {
    /// The one clock the gateway reads (tests inject a `SealedPushManualClock`'s): its wall reading (`UnixMilliseconds`) times
    /// what is stored, expiry, leases and the PostgreSQL heartbeat's `last_seen`; its monotonic reading is what the
    /// rate limits refill by and what the delivery worker paces its claims, prunes and drain deadline by.
    public var clock: SealedPushClock = .system
    /// The delay before the second attempt; each further attempt doubles it (equal jitter), up to `maxRetryDelay`.
    public var baseRetryDelay: Duration = .seconds(1)
    /// The longest delay between attempts.
    public var maxRetryDelay: Duration = .seconds(300)
    /// How long a claimed attempt is leased (longer than the APNs request timeout).
    public var lease: Duration = .seconds(60)
    /// How long shutdown waits for attempts in flight before handing them back.
    public var drainTimeout: Duration = .seconds(10)
    /// The most devices a user holds per app (gateway v1 §4).
    public var maxDevicesPerUser = 100
    /// Refusals a second per source address on the device endpoints, or nil for the configuration's
    /// `device_rate_limit` (gateway v1 §6).
    public var deviceRateLimit: Int?
    /// Seals made at once across all requests (`sendMessage`'s bounded pool); defaults to the processor count.
    public var sealingWidth = max(1, ProcessInfo.processInfo.activeProcessorCount)
    /// Makes each app's APNs clients.
    public var makeAPNsClient: APNsSenderFactory = AppRuntime.makeAPNsClient
    /// Makes each app's FCM and Web Push senders (tests pass stand-ins); nil: the real ones.
    var makePlatformSender: PlatformSenderFactory?
    /// Resolves Web Push endpoints' hosts, at registration and at each connection (tests pass their own).
    public var addressResolver: any GatewayAddressResolver = SystemAddressResolver()
    /// The deadlines of each step toward a Web Push service (platforms v1 §4.1); tests shorten them.
    var webPushDeadlines = WebPushDeadlines()
    /// Deliveries claimed per query.
    public var claimBatch = 256
    /// The longest the delivery worker waits for a batch's worth of free slots (a quarter of its share) while
    /// attempts are in flight before it claims with the slots it has: under load it claims in batches, and a
    /// new message still leaves within this delay when a slow APNs holds most slots.
    public var claimDelay: Duration = .milliseconds(20)
    /// How often records past their keeping time are deleted: messages and deliveries `ttl` + 7 days after
    /// they were sent (receipts can come that late), idempotency answers after 24 hours.
    public var pruneInterval: Duration = .seconds(60)
    /// How long a webhook receiver has to answer one attempt (gateway v1 §8: 10 s).
    public var webhookTimeout: Duration = .seconds(10)
    /// The delay before an event's second attempt; each further attempt doubles it (equal jitter), up to
    /// `webhookMaxRetryDelay`.
    public var webhookBaseRetryDelay: Duration = .seconds(5)
    /// The longest delay between two attempts of an event.
    public var webhookMaxRetryDelay: Duration = .seconds(3600)
    /// How long after it was written an unacknowledged event is retried before it is dropped (gateway v1 §8: 24 h).
    public var webhookRetryWindow: Duration = .seconds(86_400)
    /// How often each app's webhook loop looks for due events when it found none.
    public var webhookPollInterval: Duration = .milliseconds(500)
    /// Events POSTed at once per app (its webhook's `concurrency` overrides it): each finished POST makes room for
    /// the next due event, over kept-alive connections.
    public var webhookConcurrency = GatewayOptions.defaultWebhookConcurrency
    /// The default of `webhookConcurrency` and of a webhook's `concurrency`.
    public static let defaultWebhookConcurrency = 8
    /// Runs after a batch's transaction committed and before the batch is answered: the crash tests end the process
    /// there (`sealedpush-server gateway` sets it when `SEALEDPUSH_GATEWAY_FAULT=exit-after-batch-commit`). Nil in use.
    public var afterBatchCommit: (@Sendable () -> Void)?
    /// The most deliveries a batch writes in one transaction (gateway v1 §5.1: large batches in chunks).
    var batchChunkDeliveries = 5000

    /// The defaults.
    public init() {}
}

/// The push gateway (gateway v1): the registry, the queue, delivery and receipts over a `GatewayStore`, with
/// its HTTP API (`GatewayHTTP`) and its worker (`DeliveryWorker`) as services.
public final class Gateway: Sendable {
    /// The configuration it was started (or last reloaded) with.
    public var configuration: GatewayConfiguration { state.withLockedValue { $0.configuration } }
    /// Where state lives.
    public let store: any GatewayStore
    /// The metrics `/metrics` prints.
    public let metrics = GatewayMetrics()
    let options: GatewayOptions
    let logger: Logger
    /// The key of idempotency HMACs (the store's secret), read once the store is ready (`prepare()`).
    let preparedKey = OneShot<[UInt8]>()
    let state: NIOLockedValueBox<(configuration: GatewayConfiguration, apps: [String: AppRuntime])>
    /// Set on SIGTERM: new messages get 503.
    let draining = NIOLockedValueBox(false)
    /// Idempotency keys being handled now (app + key).
    let keysInFlight = NIOLockedValueBox<Set<String>>([])
    let sourceLimiter: SourceRateLimiter
    /// Bumped on reload so the worker restarts its per-app loops.
    let appsGeneration = NIOLockedValueBox(0)
    /// Where messages are sealed, off the request's task and bounded across requests.
    let sealing: SealingPool
    /// Apps replaced by a reload, with when: their clients are shut down once the attempts in flight on them
    /// have had `retireAfter` to finish (by `GatewayResources`), or at close.
    let retired = NIOLockedValueBox<[(app: AppRuntime, since: ContinuousClock.Instant)]>([])
    /// How long a reload keeps the replaced apps' clients open.
    static let retireAfter: Duration = .seconds(15)
    /// Set by the first `close()`.
    let closed = NIOLockedValueBox(false)

    /// A gateway over `store` for `configuration`.
    public init(configuration: GatewayConfiguration, store: any GatewayStore, options: GatewayOptions = GatewayOptions(),
                logger: Logger) async throws {
        self.store = store
        self.options = options
        self.logger = logger
        // A store whose services the gateway's group runs (PostgreSQL through `make`) is read once they run (`prepare()`).
        if store.services.isEmpty { preparedKey.fulfil(.success(try await store.idempotencySecret())) }
        let perSecond = options.deviceRateLimit ?? configuration.deviceRateLimit
        sourceLimiter = SourceRateLimiter(capacity: perSecond, refillPerSecond: Double(perSecond), clock: options.clock)
        sealing = SealingPool(width: options.sealingWidth)
        var apps: [String: AppRuntime] = [:]
        for app in configuration.apps {
            apps[app.id] = try AppRuntime(config: app, makeClient: options.makeAPNsClient, makePlatformSender: options.makePlatformSender,
                                          context: PlatformContext(options: options), logger: logger)
        }
        state = NIOLockedValueBox((configuration, apps))
        // New rows wake the loops that claim them: announced by this process's store, and on PostgreSQL by every
        // instance's (LISTEN/NOTIFY). Weak: the store outlives nothing of the gateway's.
        store.onWake { [weak self] wake in
            guard let self else { return }
            switch wake {
            case let .deliveries(app): self.apps[app]?.wakeAll()
            case let .events(app): self.apps[app]?.webhookWake.notify()
            case let .listener(connected): self.metrics.listener(connected: connected)
            }
        }
        for app in apps.values {
            metrics.declare(app: app.config.id, platforms: app.config.platforms)
            for platform in app.config.platforms { metrics.paused(app: app.config.id, platform: platform, false) }
        }
        for app in configuration.apps { metrics.declareMatrix(app: app.id, platforms: Set(app.matrix?.appIDs.values.map(\.platform) ?? [])) }
        for warning in configuration.warnings { logger.warning("\(warning)") }
    }

    /// Opens the store a configuration names and makes a gateway over it. A PostgreSQL store is made but not yet
    /// connected: it connects and migrates when `GatewayServer.services` (which begin with the store's own) run in
    /// a `ServiceGroup`, and the gateway serves once `prepare()` has found it ready.
    public static func open(configuration: GatewayConfiguration, options: GatewayOptions = GatewayOptions(), logger: Logger) async throws -> Gateway {
        let store: any GatewayStore
        switch configuration.database {
        case let .sqlite(path):
            store = try await SQLiteGatewayStore.open(path: path, logger: logger)
        case let .postgres(url):
            var password: String?
            if let file = configuration.databasePasswordFile {
                let data = try GatewaySecretFile.read(file, member: "/database_password_file", what: "a file holding the PostgreSQL password").bytes
                var text = Substring(String(decoding: data.unsafeCopyToArray(), as: UTF8.self))
                while let last = text.last, last.isWhitespace { text.removeLast() }
                password = String(text)
            }
            var storeOptions = PostgresGatewayStore.Options()
            storeOptions.clock = options.clock
            storeOptions.listenNotify = configuration.listenNotify
            storeOptions.sessionParameters = configuration.sessionParameters
            // Not connected yet: its services (the client, the heartbeat) run first in the gateway's group
            // (`GatewayServer.services`), which migrates before any server listens.
            store = try PostgresGatewayStore.make(url: url, password: password, options: storeOptions, logger: logger)
        }
        do { return try await Gateway(configuration: configuration, store: store, options: options, logger: logger) } catch {
            await store.close()
            throw error
        }
    }

    /// Waits until the store is ready (migrated) and reads its idempotency secret: then the gateway can serve.
    /// `GatewayResources` calls it first; the servers and workers wait for it (`readiness`). Once: later calls
    /// return the first one's result.
    public func prepare() async throws {
        if preparedKey.result == nil {
            do {
                try await store.ready()
                preparedKey.fulfil(.success(try await store.idempotencySecret()))
            } catch {
                preparedKey.fulfil(.failure(error))
            }
        }
        _ = try await preparedKey.wait()
    }

    /// Waits until `prepare()` has finished; throws its error, or `CancellationError` when cancelled first.
    func waitUntilPrepared() async throws {
        _ = try await preparedKey.wait()
    }

    /// The key of idempotency HMACs; an error (answered `503`) before the store is ready.
    var idempotencyKey: [UInt8] {
        get throws(GatewayStoreError) {
            switch preparedKey.result {
            case let .success(key): return key
            case .failure, nil:
                throw GatewayStoreError("the gateway's store is not ready (its migrations have not finished, or failed); retry shortly", unavailable: true)
            }
        }
    }

    /// The running apps.
    var apps: [String: AppRuntime] { state.withLockedValue { $0.apps } }

    /// Replaces the apps and their keys from a re-read configuration (SIGHUP); listen addresses and the
    /// database stay as started. A configuration that does not load leaves the running one in place.
    public func reload(_ configuration: GatewayConfiguration) async throws {
        var apps: [String: AppRuntime] = [:]
        for app in configuration.apps {
            apps[app.id] = try AppRuntime(config: app, makeClient: options.makeAPNsClient, makePlatformSender: options.makePlatformSender,
                                          context: PlatformContext(options: options), logger: logger)
        }
        let old = state.withLockedValue { s -> [String: AppRuntime] in
            let old = s.apps
            s = (configuration, apps)
            return old
        }
        appsGeneration.withLockedValue { $0 += 1 }
        for app in apps.values { metrics.declare(app: app.config.id, platforms: app.config.platforms) }
        for app in configuration.apps { metrics.declareMatrix(app: app.id, platforms: Set(app.matrix?.appIDs.values.map(\.platform) ?? [])) }
        for app in apps.values {  // new clients: sending again until the push service says otherwise
            for platform in app.config.platforms { metrics.paused(app: app.config.id, platform: platform, false) }
        }
        for app in old.values { app.wakeAll() }
        logger.notice("configuration reloaded", metadata: ["apps": "\(apps.count)"])
        let since = options.clock.monotonic()
        retired.withLockedValue { $0 += old.values.map { ($0, since) } }  // attempts in flight on them finish first
    }

    /// Shuts down the clients of apps replaced at least `retireAfter` ago (all of them with `all`).
    func shutDownRetired(all: Bool = false) async {
        let now = options.clock.monotonic()
        let due = retired.withLockedValue { r -> [AppRuntime] in
            let due = r.filter { all || $0.since.duration(to: now) >= Self.retireAfter }.map(\.app)
            r.removeAll { all || $0.since.duration(to: now) >= Self.retireAfter }
            return due
        }
        for app in due { await app.shutdown() }
    }

    /// Stops taking messages (`503`) and wakes the worker's loops so they drain.
    func beginDraining() {
        draining.withLockedValue { $0 = true }
        for app in apps.values { app.wakeAll() }
    }

    /// Shuts down every app's APNs clients (those replaced by reloads too) and closes the store; once (later calls
    /// return at once). `GatewayResources`, the first service of the group, calls it after every other stopped.
    public func close() async {
        guard closed.withLockedValue({ c in defer { c = true }; return !c }) else { return }
        for app in apps.values { await app.shutdown() }
        await shutDownRetired(all: true)
        await store.close()
    }

    /// Now on the gateway's wall clock, in Unix milliseconds (the store's unit).
    var now: Int64 { options.clock.wall().milliseconds }

    /// How long an idempotency key's answer is replayed (gateway v1 §5): 24 hours.
    static let idempotencyWindow: Int64 = 24 * 3600 * 1000
    /// How long events are kept and listed (gateway v1 §8): 7 days.
    static let eventsKeptFor: Int64 = 7 * 86_400_000

    /// `/readyz`: ready when the database answers and the gateway is not draining; the body lists each app's state.
    func readiness() async -> (Bool, JSONObject) {
        var database = "ok"
        do { try await store.ping() } catch { database = "unreachable" }
        let isDraining = draining.withLockedValue { $0 }
        let states: [JSONValue] = apps.values.sorted { $0.config.id < $1.config.id }.map { app in
            let paused = app.pausedSummary
            var o = JSONObject([("id", .string(app.config.id)), ("state", .string(paused == nil ? "sending" : "paused"))])
            if let paused { o["reason"] = .string(paused) }
            return .object(o)
        }
        let ready = database == "ok" && !isDraining
        return (ready, JSONObject([("status", .string(ready ? "ready" : isDraining ? "draining" : "database unreachable")),
                                   ("database", .string(database)), ("apps", .array(states))]))
    }

    // MARK: Authentication (gateway v1 §2)

    /// The app a bearer key opens for `appID` with one of `scopes`, or the problem to answer.
    func authorize(bearer: String?, appID: String, anyOf scopes: Set<Scope>) throws(GatewayError) -> AppRuntime {
        guard let bearer, !bearer.isEmpty else { throw GatewayError.unauthorized }
        let digest = Digests.sha256(Array(bearer.utf8))
        var owner: (app: AppRuntime, entry: APIKeyEntry)?
        for app in apps.values {
            for entry in app.config.apiKeys where constantTimeEquals(entry.sha256, digest) { owner = (app, entry) }
        }
        guard let owner else { throw GatewayError.unauthorized }
        guard owner.app.config.id == appID else {
            throw GatewayError.forbidden("this API key belongs to another app; use a key configured for the app in the path")
        }
        guard !owner.entry.scopes.isDisjoint(with: scopes) else {
            let names = scopes.map(\.rawValue).sorted().joined(separator: " or ")
            throw GatewayError.forbidden("this API key lacks the scope this route needs (\(names)); add it to the key's scopes in the configuration")
        }
        return owner.app
    }

    // MARK: Devices (gateway v1 §4)

    func registerDevice(app: AppRuntime, deviceID: String, body: JSONObject) async throws -> (JSONObject, created: Bool) {
        let registration = try DeviceRegistration(body, webpushPolicy: app.webpushPolicy)
        guard app.config.serves(registration.platform) else { throw GatewayError.platformNotConfigured(registration.platform) }
        if registration.platform == .webpush { try await checkWebPushEndpoint(registration.token, app: app) }
        // A key no sealed box can be made to (a low-order point, e.g. 32 zero bytes) would fail every message to
        // this device: refuse it now, naming the member (gateway v1 §4, revision 2).
        guard SealingPool.canSeal(to: registration.record.publicKey) else {
            throw GatewayError.invalidField("/key_record/public_key", "key_record.public_key cannot be sealed to (a low-order point); export the device's record again from a key made by `sealedpush device generate` or the SDK")
        }
        if let reveal = registration.record.reveal, !SealingPool.canSeal(to: reveal.publicKey) {
            throw GatewayError.invalidField("/key_record/reveal/public_key", "key_record.reveal.public_key cannot be sealed to (a low-order point); export the device's record again")
        }
        let t = now
        let record = DeviceRecord(
            app: app.config.id, deviceID: deviceID, userID: registration.userID, address: registration.token,
            environment: registration.environment, keyRecord: JSON.serialize(.object(registration.keyRecord)),
            keyID: registration.record.keyID.hex, state: .active, createdAt: t, updatedAt: t, registeredAt: t,
            unregisteredAt: nil, unregisteredReason: nil, tokenReassigned: false, lastReport: nil,
            platform: registration.platform, webpushKeys: registration.webpushKeys)
        do {
            let (stored, created, cancelled) = try await store.putDevice(record, maxDevicesPerUser: options.maxDevicesPerUser)
            metrics.delivery(app: app.config.id, state: .cancelled, count: cancelled)
            return (Self.json(stored), created)
        } catch DeviceRegistrationRefusal.tooManyDevices(let limit) {
            throw GatewayError.conflict("this user already holds \(limit) devices in this app; delete one (DELETE …/devices/{device_id}) first")
        }
    }

    /// A device as the API shows it: its platform's members (platforms v1 §1) and never its whole address.
    static func json(_ d: DeviceRecord) -> JSONObject {
        var address: [(String, JSONValue)] = [("platform", .string(d.platform.rawValue))]
        switch d.platform {
        case .apns:
            address += [("environment", .string(d.environment.rawValue)), ("apns_token_suffix", .string(String(d.address.suffix(8))))]
        case .fcm:
            address.append(("fcm_token_suffix", .string(String(d.address.suffix(8)))))
        case .webpush:
            // The endpoint is a capability URL: only its origin is shown.
            address.append(("webpush_origin", WebPushEndpointPolicy.origin(of: d.address).map { .string($0) } ?? .null))
        }
        return JSONObject([("device_id", .string(d.deviceID)), ("user_id", .string(d.userID))] + address + [
            ("key_id", .string(d.keyID)), ("state", .string(d.state.rawValue)),
            ("created_at", GatewayTime.json(d.createdAt)), ("updated_at", GatewayTime.json(d.updatedAt)),
            ("unregistered_at", GatewayTime.json(d.unregisteredAt)), ("unregistered_reason", d.unregisteredReason.map { .string($0) } ?? .null),
            ("token_reassigned", .bool(d.tokenReassigned)),
            ("reveal_key_id", (try? DeviceKeyRecord(jsonBytes: d.keyRecord))?.reveal.map { JSONValue.string($0.keyID.hex) } ?? .null),
            ("last_report", d.lastReport.map { r in
                .object(JSONObject([("reason", .string(r.reason)), ("kid", r.kid.map { .string($0) } ?? .null),
                                    ("count", .int(Int64(r.count))), ("at", GatewayTime.json(r.at))]))
            } ?? .null),
        ])
    }

    static func json(_ d: DeliveryRecord) -> JSONObject {
        JSONObject([
            ("delivery_id", .string(d.deliveryID)), ("device_id", .string(d.deviceID)), ("state", .string(d.state.rawValue)),
            ("attempts", .int(Int64(d.attempts))), ("platform", .string(d.platform.rawValue)),
            ("platform_id", d.platform == .apns ? (d.sentOnce ? .string(d.apnsID) : .null) : d.platformID.map { .string($0) } ?? .null),
            ("platform_status", d.apnsStatus.map { .int(Int64($0)) } ?? .null),
            ("apns_id", d.platform == .apns && d.sentOnce ? .string(d.apnsID) : .null),
            ("apns_status", d.platform == .apns ? d.apnsStatus.map { .int(Int64($0)) } ?? .null : .null),
            ("reason", d.reason.map { .string($0) } ?? .null),
            ("updated_at", GatewayTime.json(d.updatedAt)), ("next_attempt_at", GatewayTime.json(d.state == .queued ? d.nextAttemptAt : nil)),
            ("accepted_at", GatewayTime.json(d.acceptedAt)), ("delivered_at", GatewayTime.json(d.deliveredAt)),
            ("revealed_at", GatewayTime.json(d.revealedAt)), ("seq", .int(d.seq)),
        ])
    }

    // MARK: Messages (gateway v1 §5)

    /// Checks, seals and queues a message; the 202 body once it is durable. Throws a `GatewayError` for anything the
    /// caller must fix.
    func sendMessage(app: AppRuntime, body: JSONObject, idempotency: (key: String, hmac: [UInt8])?) async throws -> [UInt8] {
        let prepared = try await prepareMessage(app: app, body: body, idempotency: idempotency)
        try await store.insertMessage(prepared.message, idempotency: prepared.idempotency)
        stored(prepared, app: app)
        return prepared.answer
    }

    /// A message checked and sealed, not yet written: its rows, its idempotency record and its `202` body.
    struct PreparedMessage: Sendable {
        let message: NewMessage
        let idempotency: (key: String, answer: IdempotentAnswer)?
        /// The `202` body as JSON (a batch's result embeds it as it is).
        let answerJSON: JSONObject
        /// Its deliveries' place in the app's `max_queue`, held until it is stored or dropped.
        let reservation: QueueReservation
        /// The `202` body.
        var answer: [UInt8] { idempotency?.answer.body ?? JSON.serialize(.object(answerJSON)) }
    }

    /// Counts a message once its rows are durable, and wakes the delivery loops.
    func stored(_ prepared: PreparedMessage, app: AppRuntime) {
        let count = prepared.message.deliveries.count
        app.queued.withLockedValue { $0 += count }
        metrics.message(app: app.config.id)
        var byPlatform: [PushPlatform: Int] = [:]
        for delivery in prepared.message.deliveries { byPlatform[delivery.platform, default: 0] += 1 }
        for (platform, n) in byPlatform { metrics.delivery(app: app.config.id, platform: platform, state: .queued, count: n) }
        if count > 0 { app.wakeAll() }
    }

    /// Checks and seals a message (gateway v1 §5): its rows and answer, nothing written yet. `prefetched` holds its
    /// users' devices when a batch read them at once (a user absent from it has none).
    func prepareMessage(app: AppRuntime, body: JSONObject, idempotency: (key: String, hmac: [UInt8])?,
                        devicesOf prefetched: [String: [DeviceRecord]]? = nil) async throws -> PreparedMessage {
        guard !draining.withLockedValue({ $0 }) else { throw GatewayError.unavailable("the gateway is shutting down; retry against another instance or later") }
        let request = try MessageRequest(body)
        let mode = try deliveryMode(of: request, app: app)
        let appID = app.config.id
        func devicesOf(_ user: String) async throws -> [DeviceRecord] {
            if let prefetched { return prefetched[user] ?? [] }
            return try await store.userDevices(app: appID, userID: user)
        }
        var devices: [DeviceRecord]
        var skipped: [(String, String)] = []
        switch request.to {
        case let .user(user):
            devices = try await devicesOf(user)
            if devices.isEmpty, try await !store.userIsKnown(app: appID, userID: user) {
                throw GatewayError.notFound("no device was ever registered for this user in this app; register one with PUT …/devices/{device_id}")
            }
        case let .users(users):
            devices = []
            var seen = Set<String>()
            for user in users where seen.insert(user).inserted {
                devices += try await devicesOf(user)
            }
        case let .devices(ids):
            var unique: [String] = []
            var seen = Set<String>()
            for id in ids where seen.insert(id).inserted { unique.append(id) }
            let found = try await store.devices(app: appID, ids: unique)
            let byID = Dictionary(found.map { ($0.deviceID, $0) }, uniquingKeysWith: { a, _ in a })
            devices = []
            for id in unique {
                if let d = byID[id] { devices.append(d) } else { skipped.append((id, "unknown_device")) }
            }
        }
        var targets: [(device: DeviceRecord, record: DeviceKeyRecord)] = []
        for d in devices {
            guard d.state != .unregistered else {
                skipped.append((d.deviceID, "unregistered"))
                continue
            }
            // A device of a platform the app no longer serves (its section removed) is skipped (platforms v1 §4).
            guard app.config.serves(d.platform) else {
                skipped.append((d.deviceID, "platform_not_configured"))
                continue
            }
            // A record that no longer parses cannot be sealed to: that device is skipped, never the message (§5).
            guard let record = try? DeviceKeyRecord(jsonBytes: d.keyRecord) else {
                skipped.append((d.deviceID, "bad_key_record"))
                continue
            }
            // A reveal message is never sealed to the device key instead (reveal v1 §2).
            if request.reveal && record.reveal == nil {
                skipped.append((d.deviceID, "no_reveal_key"))
                continue
            }
            targets.append((d, record))
        }
        // Checked before any sealing: a fan-out beyond the app's bound stores nothing (gateway v1 §5, revision 2).
        guard targets.count <= app.config.maxFanout else {
            throw GatewayError.tooManyDeliveries(deliveries: targets.count, limit: app.config.maxFanout)
        }
        // Reserved now, so that concurrent messages (and a batch's next ones) see these deliveries (gateway v1 §5.1).
        guard let reservation = QueueReservation(app: app, count: targets.count) else {
            throw GatewayError.unavailable("this app's queue is full (\(app.config.maxQueue) deliveries); retry later", retryAfter: 30)
        }
        let created = now
        let issuedAt = created / 1000
        let messageID = GatewayIDs.message(now: created)
        let expiresAt = created + request.ttl * 1000
        var message = SecretMessage(title: request.title, subtitle: request.subtitle, body: request.body, threadID: request.threadID,
                                    category: request.category, badge: request.badge, sound: request.sound, data: request.data)
        message.messageID = messageID
        message.expiry = request.ttl == 0 ? .deliverOnce : .at(issuedAt + request.ttl)
        message.topic = app.config.apns?.topic
        if request.receipt { message.receiptURL = configuration.publicURL + "/v1/receipts" }
        if request.reveal { message.reveal = .standard }
        var deliveries: [NewDelivery] = []
        deliveries.reserveCapacity(targets.count)
        // Mailbox v1: sealed once per device with `dlv`, kept at the gateway; the push carries only a handle.
        let mailbox = mode == .mailbox
            ? try await mailboxDeliveries(app: app, request: request, messageID: messageID, created: created, expiresAt: expiresAt, targets: targets)
            : nil
        if let mailbox {
            deliveries = mailbox.deliveries
            skipped += mailbox.skipped
        }
        let sealedResults = mailbox != nil ? [] : try await sealing.seal(message, to: targets.map(\.record), with: app.sender)
        for ((device, record), result) in zip(targets, sealedResults) {
            let sealed: SealedNotification
            switch result {
            case let .success(s): sealed = s
            case let .failure(error):
                // Too large is the message's fault, whoever it goes to; any other refusal is this device's key.
                if case .sealing(.payloadTooLarge) = error { throw sealProblem(error, request: request, message: message, record: record, device: device, app: app) }
                if case .revealTooLarge = error { throw sealProblem(error, request: request, message: message, record: record, device: device, app: app) }
                skipped.append((device.deviceID, "bad_key_record"))
                continue
            }
            let deliveryID = GatewayIDs.delivery(now: created)
            let payload: [UInt8]
            do { payload = try platformPayload(sealed, device: device, request: request) } catch is UnusableDeviceKeys {
                skipped.append((device.deviceID, "bad_key_record"))
                continue
            } catch let error as GatewayError {
                // Too large for this device's platform: the 413 names that platform's limit and the body that fits.
                if case .tooLarge = error { throw sizeProblem(request: request, message: message, record: record, device: device, app: app) }
                throw error
            }
            deliveries.append(NewDelivery(
                deliveryID: deliveryID, deviceID: device.deviceID, address: device.address, environment: device.environment,
                payload: payload, receiptTokenSHA256: sealed.receipt.map { Digests.sha256(Array($0.token.utf8)) },
                priority: request.priority, collapseID: request.collapseID ?? deliveryID,
                apnsExpiration: request.ttl == 0 ? 0 : expiresAt / 1000, apnsID: APNsID.random(), platform: device.platform))
        }
        var answer = JSONObject([
            ("message_id", .string(messageID)), ("created_at", GatewayTime.json(created)), ("expires_at", GatewayTime.json(expiresAt)),
            ("deliveries", .array(deliveries.map { d in
                .object(JSONObject([("delivery_id", .string(d.deliveryID)), ("device_id", .string(d.deviceID)), ("state", "queued"),
                                    ("delivery", .string(d.mailbox == nil ? "push" : "mailbox"))]))
            })),
        ])
        answer["skipped"] = .array(skipped.map { .object(JSONObject([("device_id", .string($0.0)), ("reason", .string($0.1))])) })
        return PreparedMessage(
            message: NewMessage(app: appID, messageID: messageID, createdAt: created, expiresAt: expiresAt, deliveries: deliveries),
            idempotency: idempotency.map { ($0.key, IdempotentAnswer(bodyHMAC: $0.hmac, status: 202, body: JSON.serialize(.object(answer)), createdAt: created)) },
            answerJSON: answer, reservation: reservation)
    }

    /// A sealing refusal as a problem; for a message too large, the largest `body` that fits with the other members as sent.
    func sealProblem(_ error: SenderError, request: MessageRequest, message: SecretMessage, record: DeviceKeyRecord, device: DeviceRecord,
                     app: AppRuntime) -> GatewayError {
        if case let .revealTooLarge(_, _, largestText) = error {
            return GatewayError.tooLarge(largestText == 0
                ? "the reveal message does not fit APNs's 4096 bytes once sealed even without text; remove data or shorten the other members"
                : "the reveal message does not fit APNs's 4096 bytes once sealed (its text is sealed twice); title, subtitle and body together may hold at most \(largestText) bytes (UTF-8) with the other members as sent",
                field: "/body")
        }
        guard case .sealing(.payloadTooLarge) = error else {
            return GatewayError.invalidField("", "the message cannot be sealed: check title, body, data and sound")
        }
        return sizeProblem(request: request, message: message, record: record, device: device, app: app)
    }

    /// The `413` for a message too large for `device`'s platform (#44 pilot 2): the limit of that platform — APNs's
    /// 4096-byte payload, FCM's 4096 bytes of data, Web Push's 4096-byte encrypted body — and the largest `body` that
    /// fits it, with the other members as sent, found by sealing (and encrypting) as the delivery would.
    func sizeProblem(request: MessageRequest, message: SecretMessage, record: DeviceKeyRecord, device: DeviceRecord, app: AppRuntime) -> GatewayError {
        let limit = switch device.platform {
        case .apns: "APNs's 4096-byte payload"
        case .fcm: "FCM's 4096 bytes of data"
        case .webpush: "Web Push's 4096-byte encrypted body"
        }
        var low = 0, high = request.body.utf8.count
        let scalars = Array(request.body.unicodeScalars)
        func fits(_ n: Int) -> Bool {
            var m = message
            var text = ""
            var bytes = 0
            for s in scalars {
                let w = String(s).utf8.count
                if bytes + w > n { break }
                text.unicodeScalars.append(s)
                bytes += w
            }
            m.body = text
            let sealed: SealedNotification
            do { sealed = try app.sender.seal(m, to: record) } catch {
                if case .sealing(.payloadTooLarge) = error { return false }
                return true  // refused for another reason than size (an empty body)
            }
            do { _ = try platformPayload(sealed, device: device, request: request) } catch let error as GatewayError {
                if case .tooLarge = error { return false }
            } catch {}
            return true
        }
        guard fits(0) else {
            return GatewayError.tooLarge("the message does not fit \(limit) once sealed even with an empty body, for a \(device.platform.rawValue) device; shorten title, subtitle, data or the other members",
                                         field: "/body")
        }
        while low < high {
            let mid = (low + high + 1) / 2
            if fits(mid) { low = mid } else { high = mid - 1 }
        }
        return GatewayError.tooLarge("the message does not fit \(limit) once sealed, for a \(device.platform.rawValue) device; with the other members as sent, body may hold at most \(low) bytes (UTF-8)",
                                     field: "/body")
    }

    func messageJSON(app: AppRuntime, messageID: String) async throws -> JSONObject {
        guard let m = try await store.message(app: app.config.id, messageID: messageID) else {
            throw GatewayError.notFound("no message with this id in this app")
        }
        let mailbox = try await mailboxStore?.mailboxDeliveries(messageID: messageID) ?? [:]
        return JSONObject([
            ("message_id", .string(messageID)), ("created_at", GatewayTime.json(m.createdAt)), ("expires_at", GatewayTime.json(m.expiresAt)),
            ("deliveries", .array(m.deliveries.map { d in
                var o = Self.json(d)
                o["delivery"] = .string(mailbox[d.deliveryID] == nil ? "push" : "mailbox")
                if let fetched = mailbox[d.deliveryID] { o["fetched_at"] = GatewayTime.json(fetched) }
                return .object(o)
            })),
        ])
    }

    // MARK: Device endpoints (gateway v1 §6, receipts v1)

    /// What a receipt or failure report came to (the controller answers it and counts refusals against the source).
    enum DeviceEndpointOutcome: Sendable, Equatable {
        /// A receipt that matched its delivery (`204`), or a report counted (`202`).
        case accepted
        /// A receipt whose token does not match (`403`).
        case wrongToken
        /// A receipt naming no delivery (`404`).
        case unknownID
        /// Not a receipt (on `v1/receipts`) or not a report (on `v1/reports`) (`400`).
        case malformed
        /// The database did not answer (`503`).
        case unavailable
    }

    /// Records a receipt (on `v1/receipts`) or failure report (on `v1/reports`) body; the other kind is malformed.
    /// A report counts only in the app its URL names (`?app=<id>`): it cannot be authenticated, so one without a
    /// known app is counted in the metrics (`app="unknown"`) and changes no device's `last_report`.
    /// A receipt or report body as the OpenAPI document describes it, ready for `ReceiptMessage.parse`: integers
    /// may be written `250.0` (JSON Schema's `integer`), and a receipt's `attachments` is checked as the document
    /// says (`attached` 0–4, `failed` counts 1–4 by reason code, nothing else) and then set aside, as the gateway
    /// keeps no attachment counts (so counts that add up to more than 4 are no reason to lose a receipt). Nil when
    /// `attachments` is not as described. The bytes are returned unchanged when neither applies.
    static func normalizedDeviceBody(_ bytes: [UInt8]) -> [UInt8]? {
        // Only a body with a number written with a fraction or exponent, or with attachments, is rewritten.
        var rewrite = false
        for i in bytes.indices.dropLast() where bytes[i] >= 0x30 && bytes[i] <= 0x39
            && (bytes[i + 1] == UInt8(ascii: ".") || bytes[i + 1] == UInt8(ascii: "e") || bytes[i + 1] == UInt8(ascii: "E")) {
            rewrite = true
            break
        }
        if !rewrite, bytes.count >= 13 {
            let needle = Array("\"attachments\"".utf8)
            rewrite = (0...(bytes.count - needle.count)).contains { bytes[$0..<($0 + needle.count)].elementsEqual(needle) }
        }
        guard rewrite, case let .object(parsed)? = try? JSON.parse(bytes), case var .object(o) = JSONValue.object(parsed).integralNumbersAsIntegers
        else { return bytes }
        if let attachments = o["attachments"] {
            guard case let .object(a) = attachments, a.count == 2, let attached = a["attached"]?.intValue, (0...4).contains(attached),
                  case let .object(failed)? = a["failed"],
                  failed.allSatisfy({ member in ReasonCode(rawValue: member.key) != nil && (1...4).contains(member.value.intValue ?? 0) })
            else { return nil }
            o["attachments"] = nil
        }
        return JSON.serialize(.object(o))
    }

    func deviceEndpoint(body: [UInt8], path: String, reportApp: String? = nil) async -> DeviceEndpointOutcome {
        guard let body = Self.normalizedDeviceBody(body), let (message, _) = ReceiptMessage.parse(body) else { return .malformed }
        do {
            switch message {
            case let .delivered(id, token, _, _), let .revealed(id, token, _, _):
                // Reveal v1 §8: a `revealed` receipt also makes the delivery `delivered`.
                guard path == "v1/receipts" else { return .malformed }
                let type = if case .revealed = message { "revealed" } else { "delivered" }
                switch try await store.recordReceipt(messageID: id, tokenSHA256: Digests.sha256(Array(token.utf8)),
                                                     revealed: type == "revealed", now: now) {
                case let .matched(app, changed, platform):
                    metrics.receipt(app: app, type: type, reason: "matched")
                    if changed { metrics.delivery(app: app, platform: platform, state: .delivered) }
                    return .accepted
                case .unknownID:
                    metrics.receipt(app: "unknown", type: type, reason: "unknown_id")
                    return .unknownID
                case .wrongToken:
                    metrics.receipt(app: "unknown", type: type, reason: "wrong_token")
                    return .wrongToken
                }
            case let .failed(reason, kid, _, count):
                guard path == "v1/reports" else { return .malformed }
                var counted = "unknown"
                if let reportApp, apps[reportApp] != nil {
                    _ = try await store.recordReport(app: reportApp, kid: kid?.hex, reason: reason.rawValue, count: min(count, 10_000), now: now)
                    counted = reportApp
                }
                metrics.receipt(app: counted, type: "failed", reason: reason.rawValue)
                return .accepted
            }
        } catch {
            logger.error("receipt not stored", metadata: ["error": "\(String(describing: type(of: error)))"])
            return .unavailable
        }
    }
}
