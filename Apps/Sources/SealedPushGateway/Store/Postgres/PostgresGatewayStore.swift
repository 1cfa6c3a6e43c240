import PostgresNIO
public import ServiceLifecycle
import NIOConcurrencyHelpers
import NIOCore
public import Logging
import SealedPushAPNs
import SealedPushCrypto
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The gateway's PostgreSQL store: several instances share one database (gateway v1 §9).
///
/// Connections come from postgres-nio's `PostgresClient` pool; the pool reconnects by itself after the database
/// restarts (a query that fails meanwhile is an error, which the API answers `503`: nothing answered `202` is
/// lost). Every connection starts with `statement_timeout`, `lock_timeout` and `idle_in_transaction_session_timeout` set
/// (unless `Options.sessionParameters` is off, for PgBouncer).
///
/// Its long-running parts are two services (`services`): the client's `run()`, and the heartbeat, which first
/// applies the migrations and registers this instance (`ready()` waits for that), then renews the instance's row
/// and leases. The gateway (`make`) puts them first in its `ServiceGroup`, so they stop last; `open` runs them
/// in a task of the store's own instead, for a store used alone. `close()` stops both either way.
///
/// Every method is one transaction. Deliveries are claimed with `FOR UPDATE SKIP LOCKED` under a lease
/// (`lease_until`) whose `lease_generation` grows with each claim; an outcome is written only while the
/// generation is still the one it was claimed under. Each instance has a row in `instances` that it renews
/// every `heartbeat`, and with it the leases of the attempts it still has in flight; the leases of an
/// instance that died lapse, and its deliveries are claimed by the others. `liveInstances` counts the rows
/// renewed lately, so that each instance keeps `max_in_flight / liveInstances` requests in flight.
public final class PostgresGatewayStore: GatewayStore {
    /// How the store connects and times out; the defaults suit production, tests shorten them.
    public struct Options: Sendable {
        /// `statement_timeout` of every connection.
        public var statementTimeout: Duration = .seconds(15)
        /// `lock_timeout` of every connection.
        public var lockTimeout: Duration = .seconds(10)
        /// How often the instance renews its row in `instances` and the leases it holds.
        public var heartbeat: Duration = .seconds(5)
        /// The most connections this instance opens.
        public var maximumConnections = 20
        /// How long opening waits for the database to answer before giving up.
        public var startTimeout: Duration = .seconds(20)
        /// How long the events listing waits for the transactions that were writing events when it began to
        /// end, before it answers with the events settled so far (see `events(app:after:since:limit:)`).
        public var eventsSettleWait: Duration = .seconds(2)
        /// The clock the heartbeat writes `last_seen` and renewed leases with (its wall reading): the gateway's own
        /// (`GatewayOptions.clock`), so that a lease is renewed on the clock it was claimed on.
        public var clock: SealedPushClock = .system
        /// Whether a connection of its own listens for the notifications new deliveries and events send
        /// (configuration `listen_notify`, default true), waking the workers of every instance at once. Off, the
        /// workers only poll: for PgBouncer in transaction mode, which cannot hold a `LISTEN`.
        public var listenNotify = true
        /// Whether each connection starts with `statement_timeout`, `lock_timeout` and
        /// `idle_in_transaction_session_timeout` (configuration `session_parameters`, default true). Off, none is sent:
        /// PgBouncer refuses such startup parameters ("unsupported startup parameter"); the role's settings apply, and
        /// the store's own deadline (the statement timeout and 5 s) still ends every operation.
        public var sessionParameters = true
        /// The first wait before listening again after the listener's connection was lost (doubling, at most 30 s).
        public var listenRetry: Duration = .seconds(1)
        /// The defaults.
        public init() {}
    }

    let client: PostgresClient
    /// Where notifications heard on the listener's connection are announced (`onWake`).
    let wakes = StoreWakeHandler()
    /// Whether the listener's connection is listening now, and whether its being down was reported since it
    /// last listened (so that a first failure to listen is reported too, and each loss once).
    let listener = NIOLockedValueBox<(up: Bool, downReported: Bool)>((false, false))
    /// Set once the schema is migrated and this instance registered, or with why that failed or timed out.
    let started = OneShot<Void>()
    /// Set to stop the client: by `close()`, or when the setup failed (nothing is served then).
    let clientStop = OneShot<Void>()
    /// Whether the client's `run()` is running now, and whether it ever ran (it runs once).
    let clientState = NIOLockedValueBox<(running: Bool, ran: Bool)>((false, false))
    /// The heartbeat's state: asked to stop (by `close()` or graceful shutdown), running, and set once it has stopped
    /// (`heartbeatStopped`), so that `close()` removes this instance's row after its last beat, never before.
    let heartbeatState = NIOLockedValueBox<(stopRequested: Bool, running: Bool, ran: Bool)>((false, false, false))
    let heartbeatStop = OneShot<Void>()
    let heartbeatStopped = OneShot<Void>()
    /// The task running the services when the store runs them itself (`open`); nil when a ServiceGroup does.
    let detached = NIOLockedValueBox<Task<Void, Never>?>(nil)
    let logger: Logger
    let options: Options
    /// This instance's id in `instances` (random, per process start).
    public let instanceID: String
    /// What the dashboard calls this instance: `host:pid` and its id (several stores may share a process).
    public let instanceName: String
    /// The database's address as given, without its password (for messages).
    public let location: String
    /// The claims this instance holds (delivery id → generation) and the lease length last asked for:
    /// the heartbeat renews these, and no others.
    let held = NIOLockedValueBox<(claims: [String: Int64], lease: Int64)>(([:], 60_000))
    let live = NIOLockedValueBox(1)
    let secret = NIOLockedValueBox<[UInt8]?>(nil)
    /// Set by `close()`: the pool no longer serves connections (a lease asked of it then would wait forever).
    let closed = NIOLockedValueBox(false)
    /// The highest event position known settled: every event at or below it is committed or rolled back.
    let settledEvents = NIOLockedValueBox<Int64>(0)
    /// Attempts' outcomes waiting to be written together (`completeAttempt`'s group commit), in four queues by
    /// delivery id, each with its own writer: a writer's round trips are not every outcome's wait.
    let completions = (0..<4).map { _ in WriteQueue<CompletionJob>() }
    /// Receipts waiting to be written together (`recordReceipt`'s group commit, `PostgresReceiptQueries`).
    let receipts = WriteQueue<ReceiptJob>()
    /// Webhook attempts' outcomes waiting to be written together (`completeEvent`'s group commit).
    let eventCompletions = WriteQueue<EventCompletionJob>()

    /// The schema versions this build knows, in order (`GatewayMigrations`): all that are missing are applied in
    /// one transaction, under an advisory lock, so instances starting together apply each once.
    static let migrations = GatewayMigrations.list(for: .postgres)

    /// The advisory lock key migrations run under ("SPGW").
    static let migrationLock: Int64 = 0x5350_4757

    private init(client: PostgresClient, logger: Logger, options: Options, location: String) {
        self.client = client
        self.logger = logger
        self.options = options
        self.location = location
        instanceID = "i_" + Hex.encode(CryptoLibrary.randomBytes(count: 8))
        instanceName = SQLiteGatewayStore.hostName() + ":" + String(ProcessInfo.processInfo.processIdentifier) + " " + instanceID
    }

    /// A store for the database at `url` (`postgres://user@host:5432/db`, optional `?sslmode=disable|prefer|require`
    /// and `?host=/socket/dir`) that has not connected yet: its `services` connect, apply migrations, register this
    /// instance and beat, in the caller's `ServiceGroup`; `ready()` waits until it can be used. `password` comes from
    /// `database_password_file`; a password inside the URL is used when none is given.
    public static func make(url: String, password: String? = nil, options: Options = Options(),
                            logger: Logger) throws(GatewayStoreError) -> PostgresGatewayStore {
        let parsed = try PostgresURL(url)
        var configuration: PostgresClient.Configuration
        if let socket = parsed.socketDirectory {
            configuration = .init(unixSocketPath: socket + "/.s.PGSQL.\(parsed.port)", username: parsed.user,
                                  password: password ?? parsed.password, database: parsed.database)
        } else {
            let tls: PostgresClient.Configuration.TLS = switch parsed.sslmode {
            case .disable: .disable
            case .prefer: .prefer(.makeClientConfiguration())
            case .require: .require(.makeClientConfiguration())
            }
            configuration = .init(host: parsed.host, port: parsed.port, username: parsed.user, password: password ?? parsed.password,
                                  database: parsed.database, tls: tls)
        }
        configuration.options.maximumConnections = max(2, options.maximumConnections)
        configuration.options.connectTimeout = .seconds(5)
        configuration.options.additionalStartupParameters = [("application_name", "sealedpush-gateway")]
        if options.sessionParameters {
            configuration.options.additionalStartupParameters += [
                ("statement_timeout", "\(options.statementTimeout.milliseconds)"),
                ("lock_timeout", "\(options.lockTimeout.milliseconds)"),
                ("idle_in_transaction_session_timeout", "\(max(options.statementTimeout.milliseconds * 4, 60_000))"),
            ]
        }
        let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        return PostgresGatewayStore(client: client, logger: logger, options: options, location: parsed.redacted)
    }

    /// Connects to the database at `url` (as `make`), applies migrations, registers this instance and starts its
    /// heartbeat, running the store's services in a task of its own until `close()`: for a store used alone (tools,
    /// tests). A gateway uses `make` and runs `services` in its `ServiceGroup` instead.
    public static func open(url: String, password: String? = nil, options: Options = Options(),
                            logger: Logger) async throws(GatewayStoreError) -> PostgresGatewayStore {
        let store = try make(url: url, password: password, options: options, logger: logger)
        let services = store.makeServices(inGroup: false)
        store.detached.withLockedValue { d in
            d = Task {
                await withDiscardingTaskGroup { group in
                    // Their errors are the store's: a failed setup is `started`'s error, thrown below.
                    for service in services { group.addTask { try? await service.run() } }
                }
            }
        }
        do { try await store.ready() } catch {
            await store.close()
            throw error
        }
        return store
    }

    /// The store's long-running parts, to run in the gateway's `ServiceGroup` before every other service (so they
    /// stop last): the PostgreSQL client's `run()`, then the heartbeat (migrations and this instance's row first).
    /// Empty for a store that runs them itself (`open`).
    public var services: [any Service] {
        detached.withLockedValue { $0 } == nil ? makeServices(inGroup: true) : []
    }

    func makeServices(inGroup: Bool) -> [any Service] {
        [PostgresClientService(store: self, inGroup: inGroup), PostgresHeartbeatService(store: self, inGroup: inGroup)]
    }

    /// Waits until the schema is migrated and this instance registered (by the heartbeat service); throws why not.
    public func ready() async throws(GatewayStoreError) {
        do { try await started.wait() } catch let error as GatewayStoreError { throw error } catch {
            throw GatewayStoreError("the PostgreSQL store of \(location) stopped waiting for its setup (\(type(of: error))); the gateway is stopping", unavailable: true)
        }
    }

    /// Runs the client until graceful shutdown, cancellation or `clientStop`; in a group, then waits for the
    /// group's graceful shutdown (a service that returns earlier stops the group).
    func runClient(inGroup: Bool) async throws {
        guard clientState.withLockedValue({ s in defer { s.ran = true }; return !s.ran }) else {
            throw GatewayStoreError("the PostgreSQL store of \(location) had its services run twice; run `services` once, in one ServiceGroup")
        }
        if clientStop.result == nil {
            clientState.withLockedValue { $0.running = true }
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await self.client.run() }  // ends at graceful shutdown too (postgres-nio)
                group.addTask { _ = try? await self.clientStop.wait() }
                await group.next()
                group.cancelAll()
            }
            clientState.withLockedValue { $0.running = false }
        }
        if inGroup { try? await gracefulShutdown() }
    }

    /// Sets the store up (`started`), then renews this instance's row and leases every heartbeat until `close()`,
    /// graceful shutdown or cancellation; in a group, then waits for the group's graceful shutdown.
    func runHeartbeat(inGroup: Bool) async throws {
        let start = heartbeatState.withLockedValue { s -> Bool in
            guard !s.ran, !s.stopRequested else { return false }
            s.ran = true
            s.running = true
            return true
        }
        guard start else {
            let twice = heartbeatState.withLockedValue { $0.ran }
            started.fulfil(.failure(GatewayStoreError("the PostgreSQL store of \(location) was closed before it was set up", unavailable: true)))
            if twice { throw GatewayStoreError("the PostgreSQL store of \(location) had its services run twice; run `services` once, in one ServiceGroup") }
            if inGroup { try? await gracefulShutdown() }
            return
        }
        defer {
            heartbeatState.withLockedValue { $0.running = false }
            heartbeatStopped.fulfil(.success(()))
        }
        do { try await setUpWithinTimeout() } catch {
            started.fulfil(.failure(error))
            clientStop.fulfil(.success(()))  // nothing will use the client
            // Closed during its setup (a stop while starting): a stop, not a failure of the group.
            guard heartbeatState.withLockedValue({ $0.stopRequested }) else { throw error }
            heartbeatState.withLockedValue { $0.running = false }
            heartbeatStopped.fulfil(.success(()))
            if inGroup { try? await gracefulShutdown() }
            return
        }
        started.fulfil(.success(()))
        // The listener runs beside the beats and ends with them.
        let listening = Task { await self.listen() }
        defer { listening.cancel() }
        await withGracefulShutdownHandler {
            while !Task.isCancelled, heartbeatStop.result == nil {
                // Leases are renewed well before they lapse, however short they are.
                let lease = held.withLockedValue { $0.lease }
                let interval = min(options.heartbeat, .milliseconds(max(200, lease / 3)))
                try? await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await Task.sleep(for: interval) }
                    group.addTask { try await self.heartbeatStop.wait() }
                    _ = try await group.next()
                    group.cancelAll()
                }
                if Task.isCancelled || heartbeatStop.result != nil { break }
                do { try await beat() } catch {
                    logger.warning("cannot renew this instance's row and leases in PostgreSQL; retrying at the next heartbeat",
                                   metadata: ["error": "\(Self.describe(error))"])
                }
            }
        } onGracefulShutdown: {
            self.heartbeatStop.fulfil(.success(()))
        }
        listening.cancel()
        heartbeatState.withLockedValue { $0.running = false }
        heartbeatStopped.fulfil(.success(()))
        if inGroup { try? await gracefulShutdown() }
    }

    public func onWake(_ handler: @escaping @Sendable (StoreWake) -> Void) { wakes.set(handler) }

    /// Listens on `sealedpush_deliveries` and `sealedpush_events` on a connection of its own, announcing each
    /// notification (`onWake`), until cancelled. A lost connection is logged and announced once
    /// (`.listener(connected: false)`; the workers poll meanwhile) and listened again after `listenRetry`,
    /// doubling to 30 s while it keeps failing. Does nothing with `listenNotify` off.
    func listen() async {
        guard options.listenNotify else { return }
        var retry = options.listenRetry
        while !Task.isCancelled {
            let heard = NIOLockedValueBox(false)
            var failure = "the connection closed"
            do {
                try await client.withConnection { [self] conn in
                    try await conn.listen(on: StoreWake.deliveriesChannel) { deliveries in
                        try await conn.listen(on: StoreWake.eventsChannel) { events in
                            heard.withLockedValue { $0 = true }
                            self.listenerChanged(up: true, why: "")
                            try await withThrowingTaskGroup(of: Void.self) { group in
                                for (channel, sequence) in [(StoreWake.deliveriesChannel, deliveries), (StoreWake.eventsChannel, events)] {
                                    group.addTask {
                                        for try await note in sequence {
                                            if let wake = StoreWake(channel: channel, payload: note.payload) { self.wakes.announce(wake) }
                                        }
                                    }
                                }
                                // A sequence that ends without an error: the connection went away all the same.
                                try await group.next()
                            }
                        }
                    }
                }
            } catch {
                failure = Self.describe(error)
            }
            if Task.isCancelled { break }
            listenerChanged(up: false, why: failure)
            if heard.withLockedValue({ $0 }) { retry = options.listenRetry }
            try? await Task.sleep(for: retry)
            retry = min(retry * 2, .seconds(30))
        }
        listener.withLockedValue { $0.up = false }
    }

    /// Records a change of the listener's state, logs it and announces it, once per change (the first failure to
    /// listen counts as a loss too).
    func listenerChanged(up: Bool, why: String) {
        let changed = listener.withLockedValue { s -> Bool in
            defer { s = (up, !up) }
            return up ? !s.up : (s.up || !s.downReported)
        }
        guard changed else { return }
        if up {
            logger.info("listening for new deliveries and events (LISTEN/NOTIFY)")
        } else {
            logger.warning("not listening to PostgreSQL for new deliveries and events; the workers poll until the listener is back",
                           metadata: ["error": "\(why)"])
        }
        wakes.announce(.listener(connected: up))
    }

    /// Applies the migrations and registers this instance, giving up after `startTimeout` (then the client is stopped,
    /// which ends a connection request waiting in its pool: it keeps retrying an unreachable server).
    func setUpWithinTimeout() async throws(GatewayStoreError) {
        let location = location, startTimeout = options.startTimeout
        do {
            // Whichever of the setup and the timeout ends first decides, under one lock: a setup that ends just
            // after the timeout stopped the client fails too, and a timeout just after the setup stops nothing.
            let outcome = NIOLockedValueBox<(setUp: Bool, timedOut: Bool)>((false, false))
            let timeout = GatewayStoreError("cannot use the PostgreSQL database \(location): no answer within \(startTimeout); check that it runs, and that the URL's host and port are right (behind PgBouncer in transaction mode, set \"session_parameters\": false and \"listen_notify\": false: it refuses the connection's timeouts)")
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    try await self.setUp()
                    guard outcome.withLockedValue({ s in s.setUp = !s.timedOut; return s.setUp }) else { throw timeout }
                }
                group.addTask {
                    try await Task.sleep(for: startTimeout)
                    guard outcome.withLockedValue({ s in s.timedOut = !s.setUp; return s.timedOut }) else { return }
                    // Stop the client: a connection request waiting in its pool ends only when the pool does, and
                    // the group waits for `setUp` before it returns.
                    self.clientStop.fulfil(.success(()))
                    throw timeout
                }
                _ = try await group.next()
                group.cancelAll()
            }
        } catch let error as GatewayStoreError {
            throw error
        } catch {
            throw GatewayStoreError("cannot use the PostgreSQL database \(location): \(Self.describe(error)); check that it runs, that the URL's user, host, port and database are right, and the password in \"database_password_file\"")
        }
    }

    /// What a database error says, without the query or its values.
    static func describe(_ error: any Error) -> String {
        if let error = error as? PSQLError {
            if let info = error.serverInfo {
                return "\(info[.sqlState] ?? "?") \(info[.message] ?? "")"
            }
            return "\(error.code)"
        }
        return "\(type(of: error))"
    }

    private func setUp() async throws {
        let known = Self.migrations.last?.version ?? 0
        let now = options.clock.wall().milliseconds
        try await transaction { [self] conn in
            try await conn.rows("SELECT pg_advisory_xact_lock(\(Self.migrationLock))", logger: logger)
            let exists = try await conn.rows("SELECT to_regclass('schema_version') IS NOT NULL AS e", logger: logger)
                .first?.makeRandomAccess()["e"].decode(Bool.self) ?? false
            var current = 0
            if exists {
                current = try await conn.rows("SELECT COALESCE(MAX(version), 0) AS v FROM schema_version", logger: logger)
                    .first?.makeRandomAccess()["v"].decode(Int.self) ?? 0
            }
            guard current <= known else {
                throw GatewayStoreError("the PostgreSQL database \(location) has schema version \(current), newer than this build knows (\(known)); run the newer gateway on every instance")
            }
            for migration in Self.migrations where migration.version > current {
                for statement in migration.statements { try await conn.rows(PostgresQuery(unsafeSQL: statement), logger: logger) }
                try await conn.rows("INSERT INTO schema_version (version, applied_at) VALUES (\(migration.version), \(now))", logger: logger)
            }
            let fresh = ByteBuffer(bytes: CryptoLibrary.randomBytes(count: 32))
            try await conn.rows("INSERT INTO settings (name, value) VALUES ('idempotency_secret', \(fresh)) ON CONFLICT (name) DO NOTHING",
                                 logger: logger)
            try await conn.rows("""
                INSERT INTO instances (instance_id, started_at, last_seen, name) VALUES (\(instanceID), \(now), \(now), \(instanceName))
                ON CONFLICT (instance_id) DO UPDATE SET last_seen = excluded.last_seen
                """, logger: logger)
        }
        try await refreshLive(now: now)
    }

    /// Runs `body` as one transaction on a pooled connection. A serialization failure or deadlock the server
    /// reported (nothing was committed) is retried, up to 3 times; any other error is thrown as it is.
    ///
    /// A method that changes state writes every row of that change here, so that a row recording the change
    /// (an event) can be inserted in the same transaction.
    func transaction<R: Sendable>(_ body: @escaping @Sendable (PostgresConnection) async throws -> R) async throws -> R {
        try checkOpen()
        return try await bounded { [self] in
            var attempt = 0
            while true {
                do {
                    return try await client.withConnection { conn in
                        try await conn.rows("BEGIN", logger: logger)
                        let result: R
                        do { result = try await body(conn) } catch {
                            _ = try? await conn.rows("ROLLBACK", logger: logger)
                            throw error
                        }
                        try await conn.rows("COMMIT", logger: logger)
                        return result
                    }
                } catch let error as PSQLError where attempt < 3 && ["40001", "40P01"].contains(error.serverInfo?[.sqlState] ?? "") {
                    attempt += 1
                    try await Task.sleep(for: .milliseconds(Int64.random(in: 5...50)))
                }
            }
        }
    }

    /// Runs `operation` in a task of its own and gives up on it after the statement timeout and 5 s: an
    /// operation left waiting on a connection the server cut (a restart) then fails instead of waiting forever.
    func bounded<R: Sendable>(_ operation: @escaping @Sendable () async throws -> R) async throws -> R {
        let limit = options.statementTimeout + .seconds(5)
        let waiter = NIOLockedValueBox<CheckedContinuation<R, any Error>?>(nil)
        let timer = NIOLockedValueBox<Task<Void, Never>?>(nil)
        let location = location
        return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<R, any Error>) in
            waiter.withLockedValue { $0 = continuation }
            let work = Task {
                let result: Result<R, any Error>
                do { result = .success(try await operation()) } catch { result = .failure(error) }
                timer.withLockedValue { $0 }?.cancel()
                let c = waiter.withLockedValue { w in defer { w = nil }; return w }
                c?.resume(with: result)
            }
            let sleeper = Task {
                try? await Task.sleep(for: limit)
                guard !Task.isCancelled, let c = waiter.withLockedValue({ w in defer { w = nil }; return w }) else { return }
                work.cancel()
                c.resume(throwing: GatewayStoreError("the PostgreSQL database \(location) did not finish an operation within \(limit); it is retried or answered 503", unavailable: true))
            }
            timer.withLockedValue { $0 = sleeper }
        }
    }

    /// Runs one statement that changes rows on a pooled connection, in autocommit (atomic alone: no BEGIN, no
    /// COMMIT), bounded as every operation is.
    func autocommit<R: Sendable>(_ body: @escaping @Sendable (PostgresConnection) async throws -> R) async throws -> R {
        try await read(body)
    }

    /// Runs one read on a pooled connection.
    func read<R: Sendable>(_ body: @escaping @Sendable (PostgresConnection) async throws -> R) async throws -> R {
        try checkOpen()
        return try await bounded { [self] in try await client.withConnection { conn in try await body(conn) } }
    }

    func checkOpen() throws(GatewayStoreError) {
        guard !closed.withLockedValue({ $0 }) else {
            throw GatewayStoreError("the PostgreSQL store of \(location) was closed; nothing more is written through it", unavailable: true)
        }
    }

    /// Stops the heartbeat (after its beat in progress), removes this instance's row (its held leases then lapse at
    /// their time) and stops the client; a store that runs its services itself (`open`) waits for them to end. In a
    /// ServiceGroup the two services then wait for the group's graceful shutdown, which ends them at once.
    public func close() async {
        let beating = heartbeatState.withLockedValue { s in
            s.stopRequested = true
            return s.running
        }
        heartbeatStop.fulfil(.success(()))
        // A close during the setup (a stop before the store was ready) stops the client first: the setup's requests
        // then fail at once instead of running on to the start timeout.
        if started.result == nil { clientStop.fulfil(.success(())) }
        if beating { _ = try? await heartbeatStopped.wait() }
        if !closed.withLockedValue({ c in defer { c = true }; return c }) {
            if started.succeeded, clientState.withLockedValue({ $0.running }) {
                _ = try? await client.rows("DELETE FROM instances WHERE instance_id = \(instanceID)", logger: logger)
            }
        }
        clientStop.fulfil(.success(()))
        let task = detached.withLockedValue { $0 }
        await task?.value
    }

    public func ping() async throws {
        try checkOpen()
        try await client.rows("SELECT 1", logger: logger)
    }

    public func idempotencySecret() async throws -> [UInt8] {
        if let s = secret.withLockedValue({ $0 }) { return s }
        guard let value = try await client.rows("SELECT value FROM settings WHERE name = 'idempotency_secret'", logger: logger)
            .first?.makeRandomAccess()["value"].decode(ByteBuffer.self)
        else {
            throw GatewayStoreError("the idempotency secret is missing from the PostgreSQL database \(location); the database was altered")
        }
        let bytes = Array(value.readableBytesView)
        secret.withLockedValue { $0 = bytes }
        return bytes
    }

    // MARK: Instances

    /// Instances whose row was renewed within three heartbeats, this one included (at least 1).
    public var liveInstances: Int { live.withLockedValue { $0 } }

    /// Renews this instance's row and the leases of the attempts it has in flight, and counts the live instances.
    func beat() async throws {
        try checkOpen()
        let now = options.clock.wall().milliseconds
        let (claims, lease) = held.withLockedValue { ($0.claims, $0.lease) }
        try await client.rows("""
            INSERT INTO instances (instance_id, started_at, last_seen, name) VALUES (\(instanceID), \(now), \(now), \(instanceName))
            ON CONFLICT (instance_id) DO UPDATE SET last_seen = excluded.last_seen
            """, logger: logger)
        if !claims.isEmpty {
            let ids = Array(claims.keys), generations = ids.map { claims[$0]! }
            try await client.rows("""
                UPDATE deliveries d SET lease_until = GREATEST(d.lease_until, \(now + lease))
                FROM unnest(\(ids)::text[], \(generations)::bigint[]) AS h(id, generation)
                WHERE d.delivery_id = h.id AND d.lease_generation = h.generation AND d.state = 'queued'
                """, logger: logger)
        }
        // Rows not renewed for an hour belong to instances long gone.
        try await client.rows("DELETE FROM instances WHERE last_seen < \(now - 3_600_000)", logger: logger)
        try await refreshLive(now: now)
    }

    func refreshLive(now: Int64) async throws {
        let window = options.heartbeat.milliseconds * 3
        let count = try await client.rows("SELECT COUNT(*) AS n FROM instances WHERE last_seen >= \(now - window)", logger: logger)
            .first?.makeRandomAccess()["n"].decode(Int.self) ?? 1
        live.withLockedValue { $0 = max(1, count) }
    }

    // MARK: Devices

    /// The delivery queue's statements (`DeliveryQueries`), in PostgreSQL's dialect.
    static let queries = DeliveryQueries(.postgres)
    /// The store's other shared statements (`StoreQueries`), in PostgreSQL's dialect.
    static let store = StoreQueries(.postgres)
    /// The webhook events' shared statements (`EventQueries`), in PostgreSQL's dialect.
    static let eventSQL = EventQueries(.postgres)
    /// The dashboard's shared statements (`DashboardQueries`), in PostgreSQL's dialect.
    static let dashboardSQL = DashboardQueries(.postgres)

    /// A device row's columns (`GatewayRows`).
    static let deviceColumns = GatewayRows.deviceColumns

    /// A device from a row of `deviceColumns` (`GatewayRows`).
    static func device(_ row: PostgresRow) -> DeviceRecord? { GatewayRows.device(row.makeRandomAccess()) }

    /// Runs one of the shared statements (`DeliveryQueries`) with `binds`.
    @discardableResult
    func run(_ conn: PostgresConnection, _ sql: String, _ binds: [SQLValue]) async throws -> [PostgresRow] {
        var bindings = PostgresBindings(capacity: binds.count)
        for value in binds {
            switch value {
            case let .text(v): bindings.append(v)
            case let .int(v): bindings.append(v)
            case let .bytes(v): bindings.append(ByteBuffer(bytes: v))
            case let .bool(v): bindings.append(v)
            case .null: bindings.appendNull()
            case let .texts(v): bindings.append(v)
            }
        }
        return try await conn.rows(PostgresQuery(unsafeSQL: sql, binds: bindings), logger: logger)
    }

    /// Cancels a device's unsent deliveries, with their events; how many. One whose push is in flight (under a
    /// lease) is sent: it keeps the cancellation for when its attempt is written (`DeliveryStateMachine`).
    func cancelUnsent(_ conn: PostgresConnection, app: String, deviceID: String, reason: String, now: Int64) async throws -> Int {
        // First every queued row is marked (and locked until the commit: an attempt being written, or a claim, waits or
        // is waited for), then those not in flight are cancelled.
        try await run(conn, Self.queries.markDeviceCancelled, [.text(reason), .text(app), .text(deviceID)])
        let rows = try await run(conn, Self.queries.cancelDevice, [.int(now), .text(app), .text(deviceID), .int(now)])
        try await insertDeliveryEvents(conn, rows, now: now)
        return rows.count
    }

    public func putDevice(_ device: DeviceRecord, maxDevicesPerUser: Int) async throws -> (device: DeviceRecord, created: Bool, cancelled: Int) {
        try await transaction { [self] conn in
            // One registration at a time per user (the device limit) and per token (its uniqueness), across
            // instances; always user first, then token, so two registrations never wait on each other in a cycle.
            for (lock, key) in zip(Self.store.registrationLocks, [device.app + "\u{1}" + device.userID,
                                                                 device.app + "\u{1}" + device.platform.environmentColumn(device.environment) + "\u{1}" + device.address]) {
                try await run(conn, lock, [.text(key)])
            }
            let existing = try await run(conn, Self.store.deviceForUpdate, [.text(device.app), .text(device.deviceID)]).first.flatMap(Self.device)
            if existing?.userID != device.userID {
                let count = try await run(conn, Self.store.countUserDevices, [.text(device.app), .text(device.userID)]).first?.makeRandomAccess().int(0) ?? 0
                if count >= maxDevicesPerUser { throw DeviceRegistrationRefusal.tooManyDevices(limit: maxDevicesPerUser) }
            }
            let holders = try await run(conn, Self.store.takeToken, [.text(device.app), .text(device.platform.environmentColumn(device.environment)), .text(device.address),
                                                                    .text(device.deviceID)]).compactMap { $0.makeRandomAccess().text(0) }
            var cancelled = 0
            for other in holders {
                cancelled += try await cancelUnsent(conn, app: device.app, deviceID: other, reason: "token_reassigned", now: device.updatedAt)
            }
            let stored = device.registered(over: existing, tokenReassigned: !holders.isEmpty)
            try await run(conn, Self.store.upsertDevice, StoreQueries.upsertDeviceBinds(stored))
            try await run(conn, Self.store.knowUser, [.text(device.app), .text(device.userID)])
            return (stored, existing == nil, cancelled)
        }
    }

    public func device(app: String, deviceID: String) async throws -> DeviceRecord? {
        try await read { [self] conn in
            try await run(conn, Self.store.device, [.text(app), .text(deviceID)]).first.flatMap(Self.device)
        }
    }

    public func deleteDevice(app: String, deviceID: String, now: Int64) async throws -> Int? {
        try await transaction { [self] conn in
            let rows = try await run(conn, Self.store.deleteDevice, [.text(app), .text(deviceID)])
            guard !rows.isEmpty else { return nil }
            return try await cancelUnsent(conn, app: app, deviceID: deviceID, reason: "device_deleted", now: now)
        }
    }

    public func userDevices(app: String, userID: String) async throws -> [DeviceRecord] {
        try await read { [self] conn in
            try await run(conn, Self.store.userDevices, [.text(app), .text(userID)]).compactMap(Self.device)
        }
    }

    public func usersDevices(app: String, userIDs: [String]) async throws -> [String: [DeviceRecord]] {
        let statements = StoreQueries.usersDevices(.postgres, app: app, userIDs: userIDs)
        guard !statements.isEmpty else { return [:] }
        return try await read { [self] conn in
            var out: [String: [DeviceRecord]] = [:]
            for (sql, binds) in statements {
                for device in try await run(conn, sql, binds).compactMap(Self.device) {
                    out[device.userID, default: []].append(device)
                }
            }
            return out
        }
    }

    public func userIsKnown(app: String, userID: String) async throws -> Bool {
        try await read { [self] conn in
            try await !run(conn, Self.store.userIsKnown, [.text(app), .text(userID)]).isEmpty
        }
    }

    public func deleteUserDevices(app: String, userID: String, now: Int64) async throws -> (devices: Int, cancelled: Int) {
        try await transaction { [self] conn in
            let ids = try await run(conn, Self.store.deleteUserDevices, [.text(app), .text(userID)]).compactMap { $0.makeRandomAccess().text(0) }
            var cancelled = 0
            for id in ids { cancelled += try await cancelUnsent(conn, app: app, deviceID: id, reason: "device_deleted", now: now) }
            return (ids.count, cancelled)
        }
    }

    public func listDevices(app: String, state: DeviceState?, since: Int64?, after: (Int64, String)?, limit: Int) async throws -> [DeviceRecord] {
        let (sql, binds) = StoreQueries.listDevices(.postgres, app: app, state: state, since: since, after: after, limit: limit)
        return try await read { [self] conn in try await run(conn, sql, binds).compactMap(Self.device) }
    }

    public func devices(app: String, ids: [String]) async throws -> [DeviceRecord] {
        let statements = StoreQueries.devices(.postgres, app: app, ids: ids)
        guard !statements.isEmpty else { return [] }
        return try await read { [self] conn in
            var out: [DeviceRecord] = []
            for (sql, binds) in statements { out += try await run(conn, sql, binds).compactMap(Self.device) }
            return out
        }
    }

    // MARK: Messages

    public func insertMessage(_ message: NewMessage, idempotency: (key: String, answer: IdempotentAnswer)?) async throws {
        // The usual message (no Idempotency-Key, no mailbox envelope, 1 to 200 deliveries): its message row and
        // every delivery in one statement in autocommit (a data-modifying CTE), one round trip where BEGIN, two
        // INSERTs and COMMIT took four.
        if idempotency == nil, (1...200).contains(message.deliveries.count), message.deliveries.allSatisfy({ $0.mailbox == nil }) {
            return try await autocommit { [self] conn in try await insertInOneStatement(conn, message) }
        }
        try await transaction { [self] conn in
            guard try await insert(conn, message, idempotency: idempotency) else {
                throw GatewayError.conflict("a request with this Idempotency-Key is still being handled; retry after Retry-After seconds", retryAfter: 1)
            }
        }
    }

    public func insertMessages(_ batch: [(message: NewMessage, idempotency: (key: String, answer: IdempotentAnswer)?)]) async throws -> [Bool] {
        try await transaction { [self] conn in
            var kept: [Bool] = []
            kept.reserveCapacity(batch.count)
            var messages: [NewMessage] = []
            messages.reserveCapacity(batch.count)
            for entry in batch {
                if let idempotency = entry.idempotency,
                   try await !upsertIdempotency(conn, app: entry.message.app, key: idempotency.key, answer: idempotency.answer) {
                    kept.append(false)
                    continue
                }
                kept.append(true)
                messages.append(entry.message)
            }
            try await insertRows(conn, messages)
            return kept
        }
    }

    /// A message's rows and its idempotency answer in the caller's transaction; false (nothing written) when another
    /// instance answered the same key meanwhile: the caller answers `409`, and the client's repeat replays that answer.
    func insert(_ conn: PostgresConnection, _ message: NewMessage, idempotency: (key: String, answer: IdempotentAnswer)?) async throws -> Bool {
        if let idempotency, try await !upsertIdempotency(conn, app: message.app, key: idempotency.key, answer: idempotency.answer) {
            return false
        }
        try await insertRows(conn, [message])
        return true
    }

    /// The rows of `messages` (one app's) and their deliveries, in multi-row `INSERT`s: 1000 messages or 200
    /// deliveries a statement, whatever message they belong to (a batch of 100 messages is two statements).
    func insertRows(_ conn: PostgresConnection, _ messages: [NewMessage]) async throws {
        guard let app = messages.first?.app else { return }
        try await insertChunked(conn, "INSERT INTO messages (message_id, app, created_at, expires_at) VALUES", messages, chunk: 1000, app: app) { binds, m in
            let first = binds.count + 1
            binds.append(m.messageID)
            binds.append(m.createdAt)
            binds.append(m.expiresAt)
            return "($\(first), $1, $\(first + 1), $\(first + 2))"
        }
        try await insertChunked(conn, Self.insertDeliveriesHead, messages.flatMap { m in m.deliveries.map { (m, $0) } }, chunk: 200, app: app) { binds, item in
            Self.deliveryValues(&binds, item.0, item.1)
        }
        try await insertMailboxRows(conn, messages)
    }

    /// The head of a multi-row `INSERT` of deliveries (`deliveryValues` gives each row).
    static let insertDeliveriesHead = """
        INSERT INTO deliveries (delivery_id, app, message_id, device_id, apns_token, environment, payload, receipt_sha256, priority,
            collapse_id, apns_expiration, expires_at, apns_id, state, attempts, created_at, updated_at, next_attempt_at, seq, platform)
        VALUES
        """

    /// Appends the binds of `d` (a delivery of `m`) and gives its `(…)` of `insertDeliveriesHead`; `$1` binds the app.
    static func deliveryValues(_ binds: inout PostgresBindings, _ m: NewMessage, _ d: NewDelivery) -> String {
        let first = binds.count + 1
        binds.append(d.deliveryID)
        binds.append(m.messageID)
        binds.append(d.deviceID)
        binds.append(d.address)
        binds.append(d.platform.environmentColumn(d.environment))
        binds.append(ByteBuffer(bytes: d.payload))
        binds.append(d.receiptTokenSHA256.map { ByteBuffer(bytes: $0) })
        binds.append(Int32(d.priority))
        binds.append(d.collapseID)
        binds.append(d.apnsExpiration)
        binds.append(m.expiresAt)
        binds.append(d.apnsID)
        binds.append(m.createdAt)
        binds.append(d.platform.rawValue)
        let p = (first..<first + 14).map { "$\($0)" }
        return "(\(p[0]), $1, \(p[1]), \(p[2]), \(p[3]), \(p[4]), \(p[5]), \(p[6]), \(p[7]), \(p[8]), \(p[9]), \(p[10]), \(p[11]), 'queued', 0, \(p[12]), \(p[12]), \(p[12]), 1, \(p[13]))"
    }

    /// One message (at most 200 deliveries, none with a mailbox envelope) in one statement: its `messages` row in a
    /// data-modifying CTE ahead of its deliveries' multi-row `INSERT`. Atomic alone, so it needs no transaction.
    func insertInOneStatement(_ conn: PostgresConnection, _ m: NewMessage) async throws {
        var binds = PostgresBindings(capacity: m.deliveries.count * 14 + 4)
        binds.append(m.app)
        binds.append(m.messageID)
        binds.append(m.createdAt)
        binds.append(m.expiresAt)
        let rows = m.deliveries.map { Self.deliveryValues(&binds, m, $0) }
        let sql = "WITH m AS (INSERT INTO messages (message_id, app, created_at, expires_at) VALUES ($2, $1, $3, $4)) "
            + Self.insertDeliveriesHead + " " + rows.joined(separator: ", ")
        try await conn.rows(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger)
    }

    /// `head` (an `INSERT … VALUES`) for `items`, at most `chunk` rows a statement: `$1` binds `app`, and `row`
    /// appends an item's binds and gives its `(…)`.
    func insertChunked<Item>(_ conn: PostgresConnection, _ head: String, _ items: [Item], chunk: Int, app: String,
                             row: (inout PostgresBindings, Item) -> String) async throws {
        var start = 0
        while start < items.count {
            let slice = items[start..<min(items.count, start + chunk)]
            var binds = PostgresBindings(capacity: slice.count * 14 + 1)
            binds.append(app)
            var rows: [String] = []
            rows.reserveCapacity(slice.count)
            for item in slice { rows.append(row(&binds, item)) }
            try await conn.rows(PostgresQuery(unsafeSQL: head + " " + rows.joined(separator: ", "), binds: binds), logger: logger)
            start += chunk
        }
    }

    /// Keeps an answer for a key unless another answer younger than the idempotency window is kept; whether it was kept.
    func upsertIdempotency(_ conn: PostgresConnection, app: String, key: String, answer: IdempotentAnswer) async throws -> Bool {
        try await !run(conn, Self.store.keepIdempotency, StoreQueries.keepIdempotencyBinds(.postgres, app: app, key: key, answer: answer)).isEmpty
    }

    public func idempotentAnswer(app: String, key: String) async throws -> IdempotentAnswer? {
        try await read { [self] conn in
            try await run(conn, Self.store.idempotentAnswer, [.text(app), .text(key)]).first.flatMap { GatewayRows.idempotentAnswer($0.makeRandomAccess()) }
        }
    }

    public func storeIdempotentAnswer(app: String, key: String, answer: IdempotentAnswer) async throws {
        // An answer another instance kept first stands: a repeat replays it.
        try await transaction { [self] conn in _ = try await upsertIdempotency(conn, app: app, key: key, answer: answer) }
    }

    /// A delivery row's columns (`GatewayRows`).
    static let deliveryColumns = GatewayRows.deliveryColumns

    /// A delivery from a row of `deliveryColumns` (`GatewayRows`).
    static func delivery(_ row: PostgresRow) -> DeliveryRecord? { GatewayRows.delivery(row.makeRandomAccess()) }

    public func message(app: String, messageID: String) async throws -> (createdAt: Int64, expiresAt: Int64, deliveries: [DeliveryRecord])? {
        try await read { [self] conn in
            guard let row = try await run(conn, Self.store.message, [.text(app), .text(messageID)]).first?.makeRandomAccess(),
                  let created = row.int(0), let expires = row.int(1)
            else { return nil }
            return (created, expires, try await run(conn, Self.store.messageDeliveries, [.text(messageID)]).compactMap(Self.delivery))
        }
    }

    public func cancelMessage(app: String, messageID: String, now: Int64) async throws -> Int? {
        try await transaction { [self] conn in
            guard try await !run(conn, Self.store.messageExists, [.text(app), .text(messageID)]).isEmpty else { return nil }
            // Gateway v1 §5: a push in flight (under a lease) is sent and ends as APNs answers; the others are cancelled now.
            // First every queued row is marked (and locked until the commit), then those not in flight are cancelled.
            try await run(conn, Self.queries.markMessageCancelled, [.text(messageID)])
            let rows = try await run(conn, Self.queries.cancelMessage, [.int(now), .text(messageID), .int(now)])
            try await insertDeliveryEvents(conn, rows, now: now)
            return rows.count
        }
    }

    // MARK: The queue

    public func claimDue(app: String, platform: PushPlatform, now: Int64, leaseUntil: Int64, limit: Int) async throws -> [ClaimedDelivery] {
        // The claim is one statement, in autocommit (one round trip where BEGIN … COMMIT took three); the rare rows
        // it leased that end unsent are ended afterwards in a transaction of their own, under the lease just taken
        // (`endClaimed` changes only a row still queued).
        let rows = try await autocommit { [self] conn in
            try await run(conn, Self.queries.claim, [.int(leaseUntil), .text(instanceID), .text(app), .text(platform.rawValue), .int(now), .int(now), .int(limit)])
        }
        var claims: [ClaimedDelivery] = []
        var ending: [(id: String, state: DeliveryState, reason: String)] = []
        var unreadable: [(id: String, column: String)] = []
        for row in rows {
            let r = row.makeRandomAccess()
            if let id = r.text(0), let cancel = r.text(13) {
                // Deleted while an attempt was in flight, whose instance ended before writing it: never sent again.
                ending.append((id, .cancelled, cancel))
                continue
            }
            switch GatewayRows.claimed(r) {
            case let .success(claim):
                claims.append(claim)
            case let .failure(column):
                // Never leased and left unsent (nor the whole claim failed, every second): it ends now, and the
                // rest of the batch goes on.
                guard let id = r.text(0) else { continue }
                ending.append((id, .rejected, "undecodable_record"))
                unreadable.append((id, column.name))
            }
        }
        if !ending.isEmpty {
            do {
                try await transaction { [self, ending] conn in
                    for end in ending { try await endClaimed(conn, deliveryID: end.id, state: end.state, reason: end.reason, now: now) }
                }
            } catch {
                // Their lease lapses and a later claim ends them; the claims above are still this instance's to send.
                logger.warning("claimed deliveries that end unsent could not be ended yet; a later claim ends them",
                               metadata: ["app": "\(app)", "count": "\(ending.count)", "error": "\(error)"])
            }
        }
        for (id, column) in unreadable {
            logger.error("a claimed delivery's row cannot be read; it ends rejected (undecodable_record) and is not sent",
                         metadata: ["app": "\(app)", "delivery_id": "\(id)", "column": "\(column)"])
        }
        held.withLockedValue { h in
            for claim in claims { h.claims[claim.deliveryID] = claim.generation }
            h.lease = max(1, leaseUntil - now)
        }
        return claims
    }

    /// Ends a delivery the claim just leased without sending it (`state` final), with its event.
    func endClaimed(_ conn: PostgresConnection, deliveryID: String, state: DeliveryState, reason: String, now: Int64) async throws {
        let rows = try await run(conn, Self.queries.endClaimed, [.text(state.rawValue), .text(reason), .int(now), .text(deliveryID)])
        try await insertDeliveryEvents(conn, rows, now: now)
    }

    public func completeAttempt(_ claim: ClaimedDelivery, outcome: AttemptOutcome, unregisteredAt: Int64?, now: Int64) async throws -> DeliveryState? {
        // Whatever happens below, this instance stops renewing the lease: if the write fails, the lease lapses
        // and the delivery is tried again (at least once).
        held.withLockedValue { h in
            if h.claims[claim.deliveryID] == claim.generation { h.claims[claim.deliveryID] = nil }
        }
        try checkOpen()
        // Group commit: outcomes that arrive while a transaction of outcomes is being written go in the next one
        // together (one BEGIN … COMMIT for many attempts, as SQLite's commit queue does for every write).
        return try await withCheckedThrowingContinuation { continuation in
            let job = CompletionJob(claim: claim, outcome: outcome, unregisteredAt: unregisteredAt, now: now, continuation: continuation)
            let queue = completions[Int(claim.deliveryID.utf8.reduce(UInt32(0)) { $0 &* 31 &+ UInt32($1) } % UInt32(completions.count))]
            if queue.enqueue(job) {
                Task { await self.writeCompletions(queue) }
            }
        }
    }

    /// Writes the queued outcomes, all that are queued at a time in one transaction, until none are left. Rows are
    /// locked in delivery-id order (two instances' batches never wait on each other in a cycle). If the transaction
    /// fails, each outcome is written again alone, so one outcome's failure never fails another.
    func writeCompletions(_ queue: WriteQueue<CompletionJob>) async {
        while let jobs = queue.takeAll() {
            let ordered = jobs.sorted { $0.claim.deliveryID < $1.claim.deliveryID }
            do {
                // Set-based when each delivery is in the group once (the usual case): a constant number of statements.
                let unique = Set(ordered.map(\.claim.deliveryID)).count == ordered.count
                let states = try await transaction { [self] conn in
                    if unique { return try await completeAll(conn, ordered) }
                    var states: [DeliveryState?] = []
                    states.reserveCapacity(ordered.count)
                    for job in ordered { states.append(try await complete(conn, job)) }
                    return states
                }
                for (job, state) in zip(ordered, states) { job.continuation.resume(returning: state) }
            } catch {
                for job in ordered {
                    do {
                        let state = try await transaction { [self] conn in try await complete(conn, job) }
                        job.continuation.resume(returning: state)
                    } catch {
                        job.continuation.resume(throwing: error)
                    }
                }
            }
        }
    }

    /// One outcome in the caller's transaction: the row read and locked, the state machine's change written.
    func complete(_ conn: PostgresConnection, _ job: CompletionJob) async throws -> DeliveryState? {
        // Locked until the commit: a receipt or a DELETE on another instance waits for this write, or this for theirs.
        let current = try await run(conn, Self.queries.completeRead, [.text(job.claim.deliveryID)]).first
            .flatMap { GatewayRows.leasedDelivery($0.makeRandomAccess()) }
        let change = DeliveryStateMachine.complete(current, claim: job.claim, outcome: job.outcome, unregisteredAt: job.unregisteredAt, now: job.now)
        try await write(conn, change)
        return change.landedState
    }

    /// Writes what the state machine decided (which checked the lease generation against the row read and locked
    /// in this transaction): the row (its lease released), the events, the device APNs unregistered, the app's pause.
    func write(_ conn: PostgresConnection, _ change: DeliveryCompletion) async throws {
        guard let row = change.row else { return }
        try await run(conn, Self.queries.completeWrite, DeliveryQueries.completeWriteBinds(row, dropsPayload: change.dropsPayload))
        try await insertEvents(conn, change.events)
        if let gone = change.unregister {
            let devices = try await run(conn, Self.queries.unregisterDevices, [
                .int(gone.at), .text(gone.reason), .int(gone.at), .text(gone.app), .text(gone.platform.environmentColumn(gone.environment)),
                .text(gone.address), .int(gone.registeredBefore),
            ]).compactMap(Self.device)
            try await insertEvents(conn, devices.map { GatewayEvents.deviceUnregistered($0, now: gone.at) })
        }
        // The app's other queued deliveries wait for the same reason (gateway v1 §6).
        if change.pausesApp { try await run(conn, Self.queries.pauseApp, [.text(row.app), .text(row.platform.rawValue)]) }
    }

    public func prune(messagesExpiredBefore: Int64, idempotencyBefore: Int64, eventsBefore: Int64, limit: Int) async throws -> Int {
        try await transaction { [self] conn in
            var messages = 0
            for sql in Self.store.pruneMessages {
                messages = try await run(conn, sql, [.int(messagesExpiredBefore), .int(limit)]).count
            }
            try await run(conn, Self.store.pruneIdempotency, [.int(idempotencyBefore)])
            let events = try await run(conn, Self.store.pruneEvents, [.int(eventsBefore), .int(limit)]).count
            return messages + events
        }
    }

    public func nextDue(app: String, platform: PushPlatform) async throws -> Int64? {
        try await read { [self] conn in
            try await run(conn, Self.store.nextDue, [.text(app), .text(platform.rawValue)]).first?.makeRandomAccess().int(0)
        }
    }

    public func queued(app: String, platform: PushPlatform) async throws -> Int {
        try await read { [self] conn in
            Int(try await run(conn, Self.store.queuedOnPlatform, [.text(app), .text(platform.rawValue)]).first?.makeRandomAccess().int(0) ?? 0)
        }
    }

    public func queueDepths() async throws -> [String: QueueDepth] {
        try await read { [self] conn in
            var out: [String: QueueDepth] = [:]
            for row in try await run(conn, Self.store.queueDepths, []) {
                let r = row.makeRandomAccess()
                guard let app = r.text(0) else { continue }
                out[app] = QueueDepth(queued: Int(r.int(1) ?? 0), oldestCreatedAt: r.int(2))
            }
            return out
        }
    }

    // MARK: Receipts and reports

    public func recordReport(app: String, kid: String?, reason: String, count: Int, now: Int64) async throws -> [String] {
        guard let kid else { return [] }
        return try await transaction { [self] conn in
            let rows = try await run(conn, Self.store.reportOnDevices, [.text(reason), .text(kid), .int(count), .int(now), .text(kid), .text(app)])
            let apps = Set(rows.compactMap { $0.makeRandomAccess().text(0) })
            for app in apps.sorted() {
                try await run(conn, Self.store.countReport, [.text(app), .text(kid), .text(reason), .int(count), .int(now)])
            }
            return apps.sorted()
        }
    }
}

/// A `postgres://` URL taken apart: `postgres[ql]://user[:password]@host[:port]/database[?sslmode=…&host=/dir]`.
struct PostgresURL {
    enum SSLMode { case disable, prefer, require }
    var user: String
    var password: String?
    var host: String
    var port: Int
    var database: String?
    var sslmode: SSLMode
    /// A Unix socket directory (`?host=/dir`), instead of TCP.
    var socketDirectory: String?

    /// The URL without its password.
    var redacted: String {
        "postgres://\(user)@\(socketDirectory ?? host):\(port)/\(database ?? "")"
    }

    init(_ text: String) throws(GatewayStoreError) {
        let example = "e.g. \"postgres://sealedpush@db.internal:5432/sealedpush\""
        guard let schemeEnd = text.range(of: "://"), ["postgres", "postgresql"].contains(String(text[..<schemeEnd.lowerBound])) else {
            throw GatewayStoreError("\"database\" must start with postgres:// (\(example))")
        }
        var rest = String(text[schemeEnd.upperBound...])
        var query = ""
        if let q = rest.firstIndex(of: "?") {
            query = String(rest[rest.index(after: q)...])
            rest = String(rest[..<q])
        }
        var path = ""
        if let slash = rest.firstIndex(of: "/") {
            path = String(rest[rest.index(after: slash)...])
            rest = String(rest[..<slash])
        }
        var userInfo = ""
        if let at = rest.lastIndex(of: "@") {
            userInfo = String(rest[..<at])
            rest = String(rest[rest.index(after: at)...])
        }
        guard !userInfo.isEmpty else { throw GatewayStoreError("\"database\" names no user; put one before the host (\(example))") }
        if let colon = userInfo.firstIndex(of: ":") {
            user = Self.decode(String(userInfo[..<colon]))
            password = Self.decode(String(userInfo[userInfo.index(after: colon)...]))
        } else {
            user = Self.decode(userInfo)
        }
        port = 5432
        if rest.hasPrefix("["), let close = rest.firstIndex(of: "]") {
            host = String(rest[rest.index(after: rest.startIndex)..<close])
            rest = String(rest[rest.index(after: close)...])
            if rest.hasPrefix(":") { rest.removeFirst() } else { rest = "" }
        } else if let colon = rest.lastIndex(of: ":") {
            host = String(rest[..<colon])
            rest = String(rest[rest.index(after: colon)...])
        } else {
            host = rest
            rest = ""
        }
        if !rest.isEmpty {
            guard let p = Int(rest), (1...65535).contains(p) else { throw GatewayStoreError("\"database\" has a bad port \"\(rest)\" (\(example))") }
            port = p
        }
        database = path.isEmpty ? nil : Self.decode(path)
        sslmode = .prefer
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { throw GatewayStoreError("\"database\" has a bad query parameter \"\(pair)\" (\(example))") }
            switch parts[0] {
            case "sslmode":
                switch parts[1] {
                case "disable": sslmode = .disable
                case "prefer", "allow": sslmode = .prefer
                case "require", "verify-ca", "verify-full": sslmode = .require
                default: throw GatewayStoreError("\"database\" has sslmode=\(parts[1]); use disable, prefer or require")
                }
            case "host": socketDirectory = Self.decode(parts[1])
            default: throw GatewayStoreError("\"database\" has the query parameter \"\(parts[0])\", which this gateway does not know; use sslmode or host")
            }
        }
        guard !host.isEmpty || socketDirectory != nil else { throw GatewayStoreError("\"database\" names no host (\(example))") }
    }

    static func decode(_ s: String) -> String {
        var out: [UInt8] = []
        var bytes = Array(s.utf8)[...]
        while let b = bytes.popFirst() {
            if b == UInt8(ascii: "%"), bytes.count >= 2, let v = UInt8(String(decoding: bytes.prefix(2), as: UTF8.self), radix: 16) {
                out.append(v)
                bytes = bytes.dropFirst(2)
            } else {
                out.append(b)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

extension PostgresRandomAccessRow: SQLRow {
    func text(_ index: Int) -> String? { (try? self[index].decode(String?.self)) ?? nil }
    func int(_ index: Int) -> Int64? { (try? self[index].decode(Int64?.self)) ?? nil }
    func bytes(_ index: Int) -> [UInt8]? { ((try? self[index].decode(ByteBuffer?.self)) ?? nil).map { Array($0.readableBytesView) } }
    func bool(_ index: Int) -> Bool? { (try? self[index].decode(Bool?.self)) ?? nil }
}

extension PostgresConnection {
    /// Runs `query` and reads its rows to the end (a result left unread would keep the connection busy).
    @discardableResult
    func rows(_ query: PostgresQuery, logger: Logger) async throws -> [PostgresRow] {
        try await self.query(query, logger: logger).collect()
    }
}

extension PostgresClient {
    /// Runs `query` on a pooled connection and reads its rows to the end, so that the connection goes back to the pool.
    @discardableResult
    func rows(_ query: PostgresQuery, logger: Logger) async throws -> [PostgresRow] {
        try await self.query(query, logger: logger).collect()
    }
}

/// An attempt's outcome waiting for the PostgreSQL store's next transaction of outcomes, and who waits for it.
struct CompletionJob: Sendable {
    let claim: ClaimedDelivery
    let outcome: AttemptOutcome
    let unregisteredAt: Int64?
    let now: Int64
    let continuation: CheckedContinuation<DeliveryState?, any Error>
}

/// The PostgreSQL client's `run()` as a service (`PostgresGatewayStore.services`): first in the gateway's group, so
/// the pool serves until every other service, the store's close included, is done.
struct PostgresClientService: Service {
    let store: PostgresGatewayStore
    let inGroup: Bool

    func run() async throws { try await store.runClient(inGroup: inGroup) }
}

/// The store's setup (migrations, this instance's row) and then its heartbeat, as a service
/// (`PostgresGatewayStore.services`).
struct PostgresHeartbeatService: Service {
    let store: PostgresGatewayStore
    let inGroup: Bool

    func run() async throws { try await store.runHeartbeat(inGroup: inGroup) }
}
