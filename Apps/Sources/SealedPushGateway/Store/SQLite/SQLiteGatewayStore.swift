import Foundation
import GRDB
import NIOConcurrencyHelpers
public import Logging
import SealedPushAPNs
import SealedPushCrypto
#if canImport(Glibc)
import Glibc
#endif

/// Why the gateway's database cannot be used; names the file and what to do.
public struct GatewayStoreError: Error, CustomStringConvertible, Sendable {
    /// What happened and what to do.
    public let description: String
    /// Whether the database did not answer in time (or the store is closing): a request meeting it is answered
    /// `503` with `Retry-After`, not `500`.
    public let isUnavailable: Bool
    /// An error saying `description`; `unavailable` when waiting and retrying may help.
    public init(_ description: String, unavailable: Bool = false) {
        self.description = description
        isUnavailable = unavailable
    }
}

/// The gateway's SQLite store (WAL, `synchronous=FULL`: a `202` is on disk before it is answered), through
/// GRDB over the system SQLite.
///
/// One writer connection and a few readers (a `DatabasePool`). The short reads every message makes (a user's
/// devices, a device, an idempotency answer) run on the calling thread against a WAL reader (`readNow`); the
/// longer ones (listings, the dashboard, events) on a reader's queue (`read`); both see the last commit.
/// Every method is one transaction, and concurrent
/// write transactions are committed together (group commit): the writer runs every queued transaction, all
/// synchronously on its queue, in one `BEGIN IMMEDIATE` … `COMMIT`, with the statements prepared once per
/// connection (`cachedStatement`), and none returns before that commit is on disk, so one `fsync` serves
/// many requests. SQLite serves one instance: `open` takes an exclusive `flock` on `<file>.lock` and refuses
/// to start when another process holds it.
public final class SQLiteGatewayStore: GatewayStore {
    /// The connections: one writer (group commits) and readers (WAL), each used on its own serial queue.
    let pool: DatabasePool
    let commits = WriteQueue<CommitJob>()
    let lockFD: Int32
    /// The database file.
    public let path: String
    /// Where a row that cannot be read is reported (never with a token, key or payload).
    let logger: Logger
    /// Where new events are announced: the webhook loop of their app wakes (`onWake`).
    let wakes = StoreWakeHandler()

    /// The schema versions this build knows, in order (`GatewayMigrations`): each is applied once, in its own transaction.
    static let migrations = GatewayMigrations.list(for: .sqlite)

    /// When this instance opened the store (the dashboard's instance list).
    let openedAt = SealedPushClock.systemWallTime().milliseconds

    private init(pool: DatabasePool, path: String, lockFD: Int32, logger: Logger) {
        self.pool = pool
        self.path = path
        self.lockFD = lockFD
        self.logger = logger
    }

    /// Opens (creating if needed) the database at `path`, takes the single-instance lock and applies migrations.
    public static func open(path: String, logger: Logger) async throws(GatewayStoreError) -> SQLiteGatewayStore {
        let lockPath = path + ".lock"
        let fd = Glibc.open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw GatewayStoreError("cannot create \(lockPath) (errno \(errno)); check that the directory of \"database\" exists and is writable")
        }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            Glibc.close(fd)
            throw GatewayStoreError("another gateway is running on \(path) (it holds \(lockPath)); SQLite serves one instance — stop the other, or run several instances on PostgreSQL (\"database\": \"postgres://…\")")
        }
        // Created 0600 (device tokens and key records live here); SQLite gives its -wal and -shm the same mode.
        let created = Glibc.open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        if created >= 0 { Glibc.close(created) }
        do {
            var configuration = Configuration()
            configuration.busyMode = .timeout(5)
            configuration.maximumReaderCount = 4
            configuration.label = "gateway"
            let pool = try DatabasePool(path: path, configuration: configuration)
            let store = SQLiteGatewayStore(pool: pool, path: path, lockFD: fd, logger: logger)
            try await store.setUp()
            return store
        } catch let error as GatewayStoreError {
            Glibc.close(fd)
            throw error
        } catch {
            Glibc.close(fd)
            throw GatewayStoreError("cannot open the database \(path): \(error); check that its directory exists and is writable")
        }
    }

    private func setUp() async throws {
        // GRDB opens a pool in WAL mode with synchronous=NORMAL; the gateway answers 202 only once a commit is
        // on disk, so the writer connection (the only one that commits) runs with FULL.
        try await pool.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
            // Deleted rows' bytes are overwritten with zeros (mailbox v1 §3: an envelope is deleted, not flagged).
            try db.execute(sql: "PRAGMA secure_delete = ON")
            try db.execute(sql: "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY NOT NULL, applied_at INTEGER NOT NULL)")
        }
        let current = try await pool.writeWithoutTransaction { db in
            try db.rows("SELECT MAX(version) AS v FROM schema_migrations").first?.column("v")?.integer ?? 0
        }
        let known = Self.migrations.last?.version ?? 0
        guard current <= known else {
            throw GatewayStoreError("\(path) has schema version \(current), newer than this build knows (\(known)); run the newer gateway, or restore a backup")
        }
        for migration in Self.migrations where migration.version > current {
            try await transaction { db in
                for statement in migration.statements { try db.execute(sql: statement) }
                _ = try db.rows("INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)",
                                [.integer(migration.version), .integer(Int(SealedPushClock.systemWallTime().milliseconds))], cached: false)
            }
        }
        // This process holds the lock, so a lease left in the file belongs to a process that is gone (a crash
        // or a kill): its deliveries are due again now, with the same apns-id and collapse id.
        try await transaction { db in
            _ = try db.rows("UPDATE deliveries SET lease_until = NULL WHERE lease_until IS NOT NULL", cached: false)
            _ = try db.rows("UPDATE events SET lease_until = NULL WHERE lease_until IS NOT NULL", cached: false)
        }
        try await transaction { db in
            let rows = try db.rows("SELECT value FROM settings WHERE name = 'idempotency_secret'")
            if rows.isEmpty {
                _ = try db.rows("INSERT INTO settings (name, value) VALUES ('idempotency_secret', ?)",
                                [.blob(CryptoLibrary.randomBytes(count: 32))], cached: false)
            }
        }
    }

    /// The writer connection's `PRAGMA synchronous` (2: FULL), for the test that keeps commits durable.
    func writerSynchronous() async throws -> Int {
        try await pool.writeWithoutTransaction { db in try db.rows("PRAGMA synchronous", cached: false).first?.column("synchronous")?.integer ?? -1 }
    }

    /// Runs `body` as one transaction (`BEGIN IMMEDIATE` … `COMMIT`) on the writer connection, in a batch with
    /// the other callers' (group commit): returns once the transaction it ran in committed, or throws.
    ///
    /// `body` may run more than once (its batch failed for another job and is replayed job by job); only the
    /// last run's transaction is ever committed.
    func transaction<R: Sendable>(_ body: @escaping @Sendable (Database) throws -> R) async throws -> R {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<R, any Error>) in
            let job = CommitJob(run: { db in
                // Runs inside a batch's transaction; its outcome stands once that transaction's COMMIT says how it ended.
                let result: Result<R, any Error>
                do { result = .success(try body(db)) } catch { result = .failure(error) }
                let failed = if case .failure = result { true } else { false }
                return (failed, { committed in
                    switch (result, committed) {
                    case (.success, .failure(let error)): continuation.resume(throwing: error)
                    default: continuation.resume(with: result)
                    }
                })
            }, fail: { error in continuation.resume(throwing: error) })
            if commits.enqueue(job) {
                pool.asyncWriteWithoutTransaction { [self] db in writeBatches(db) }
            }
        }
    }

    /// Commits what is queued, batch after batch, until the queue is empty, on the writer connection's queue
    /// (synchronously: one hop for a whole batch). A batch runs every job in one transaction; if any job fails,
    /// the batch is rolled back and each job runs again in a transaction of its own, so one job's failure never
    /// undoes or fails another's. Callers are answered after their transaction's COMMIT returned.
    func writeBatches(_ db: Database) {
        while let jobs = commits.takeAll() {
            var finishers: [@Sendable (Result<Void, any Error>) -> Void] = []
            finishers.reserveCapacity(jobs.count)
            var batchFailed = false
            do {
                try db.cachedStatement(sql: "BEGIN IMMEDIATE").execute()
                for job in jobs {
                    let (failed, finish) = job.run(db)
                    finishers.append(finish)
                    if failed {
                        batchFailed = true
                        break
                    }
                }
                if !batchFailed {
                    try db.cachedStatement(sql: "COMMIT").execute()
                    for finish in finishers { finish(.success(())) }
                    continue
                }
            } catch {
                batchFailed = true
            }
            if db.isInsideTransaction { try? db.cachedStatement(sql: "ROLLBACK").execute() }
            for job in jobs {
                var committed: Result<Void, any Error> = .success(())
                var finish: (@Sendable (Result<Void, any Error>) -> Void)?
                do {
                    try db.cachedStatement(sql: "BEGIN IMMEDIATE").execute()
                    let (failed, f) = job.run(db)
                    finish = f
                    try db.cachedStatement(sql: failed ? "ROLLBACK" : "COMMIT").execute()
                } catch {
                    if db.isInsideTransaction { try? db.cachedStatement(sql: "ROLLBACK").execute() }
                    committed = .failure(error)
                }
                if let finish { finish(committed) } else if case let .failure(error) = committed { job.fail(error) }
            }
        }
    }

    /// Runs one read on a reader connection of the pool (WAL: it sees the last commit, alongside writes), on
    /// that reader's queue: for reads that may take long (listings, the dashboard).
    func read<R: Sendable>(_ body: @Sendable (Database) throws -> R) async throws -> R {
        try await pool.read(body)
    }

    /// Runs one short read (a few rows by index) on a reader connection, on the calling thread: no hop to a
    /// queue and back for the reads every message makes. A WAL reader never waits for the writer, and the pool
    /// has more readers than the cooperative pool has threads. No explicit transaction: each statement is its
    /// own read transaction (a snapshot of the last commit), so `body` runs single statements whose results
    /// need no common snapshot.
    func readNow<R>(_ body: (Database) throws -> R) throws -> R {
        try pool.unsafeRead(body)
    }

    /// Closes the connections and releases the single-instance lock.
    public func close() async {
        // The readers first (releaseMemory closes the idle ones): the last connection to close checkpoints the WAL
        // and deletes it, which a read-only reader cannot do, and GRDB's close() closes the writer first.
        pool.releaseMemory()
        try? pool.close()
        Glibc.close(lockFD)
    }

    public func ping() async throws {
        _ = try readNow { db in try db.rows("SELECT 1") }
    }

    public func idempotencySecret() async throws -> [UInt8] {
        try readNow { db in
            guard let blob = try db.rows("SELECT value FROM settings WHERE name = 'idempotency_secret'").first?.column("value")?.blob else {
                throw GatewayStoreError("the idempotency secret is missing from \(path); the database was altered")
            }
            return blob
        }
    }

    // MARK: Devices

    /// The delivery queue's statements (`DeliveryQueries`), in SQLite's dialect.
    static let queries = DeliveryQueries(.sqlite)
    /// The store's other shared statements (`StoreQueries`), in SQLite's dialect.
    static let store = StoreQueries(.sqlite)
    /// The webhook events' shared statements (`EventQueries`), in SQLite's dialect.
    static let eventSQL = EventQueries(.sqlite)
    /// The dashboard's shared statements (`DashboardQueries`), in SQLite's dialect.
    static let dashboardSQL = DashboardQueries(.sqlite)

    /// A device row's columns (`GatewayRows`).
    static let deviceColumns = GatewayRows.deviceColumns

    /// A device from a row of `deviceColumns` (`GatewayRows`).
    static func device(_ row: Row) -> DeviceRecord? { GatewayRows.device(row) }

    /// Cancels a device's queued deliveries that are not in flight, once `cancel_reason` is set on all of them
    /// (binds: now, app, device id, now): a search of deliveries_device.
    static let cancelUnsentSQL = queries.cancelDevice

    /// Cancels a device's unsent deliveries, with their events; how many. One whose push is in flight (under a
    /// lease) is sent: it keeps the cancellation for when its attempt is written (`DeliveryStateMachine`).
    func cancelUnsent(_ db: Database, app: String, deviceID: String, reason: String, now: Int64) throws -> Int {
        _ = try db.run(Self.queries.markDeviceCancelled, [.text(reason), .text(app), .text(deviceID)])
        let rows = try db.run(Self.cancelUnsentSQL, [.int(now), .text(app), .text(deviceID), .int(now)])
        try insertDeliveryEvents(db, rows, now: now)
        return rows.count
    }

    /// Writes the events of deliveries an UPDATE just changed (its `RETURNING` rows), in the current transaction.
    func insertDeliveryEvents(_ db: Database, _ rows: [Row], now: Int64) throws {
        for row in rows {
            guard let delivery = Self.delivery(row) else { continue }
            try insertEvent(db, GatewayEvents.delivery(delivery, now: now))
        }
    }

    /// Inserts one event (pending, due now) in the current transaction: the only SQL the events of §8 add to
    /// the state-changing methods.
    func insertEvent(_ db: Database, _ event: EventRecord?) throws {
        guard let event else { return }
        _ = try db.run(Self.eventSQL.insert, EventQueries.insertBinds(event))
        // Announced before the commit: the webhook loop's claim is a write, so it waits for this transaction.
        wakes.announce(.events(app: event.app))
    }

    public func onWake(_ handler: @escaping @Sendable (StoreWake) -> Void) { wakes.set(handler) }

    public func putDevice(_ device: DeviceRecord, maxDevicesPerUser: Int) async throws -> (device: DeviceRecord, created: Bool, cancelled: Int) {
        try await transaction { [self] db in
            let existing = try db.run(Self.store.deviceForUpdate, [.text(device.app), .text(device.deviceID)]).first.flatMap(Self.device)
            if existing?.userID != device.userID {
                let count = try db.run(Self.store.countUserDevices, [.text(device.app), .text(device.userID)]).first?.int(0) ?? 0
                if count >= maxDevicesPerUser { throw DeviceRegistrationRefusal.tooManyDevices(limit: maxDevicesPerUser) }
            }
            let holders = try db.run(Self.store.takeToken, [.text(device.app), .text(device.platform.environmentColumn(device.environment)), .text(device.address),
                                                           .text(device.deviceID)]).compactMap { $0.text(0) }
            var cancelled = 0
            for other in holders {
                cancelled += try cancelUnsent(db, app: device.app, deviceID: other, reason: "token_reassigned", now: device.updatedAt)
            }
            let stored = device.registered(over: existing, tokenReassigned: !holders.isEmpty)
            _ = try db.run(Self.store.upsertDevice, StoreQueries.upsertDeviceBinds(stored))
            _ = try db.run(Self.store.knowUser, [.text(device.app), .text(device.userID)])
            return (stored, existing == nil, cancelled)
        }
    }

    public func device(app: String, deviceID: String) async throws -> DeviceRecord? {
        try readNow { db in
            try db.run(Self.store.device, [.text(app), .text(deviceID)]).first.flatMap(Self.device)
        }
    }

    public func deleteDevice(app: String, deviceID: String, now: Int64) async throws -> Int? {
        try await transaction { [self] db in
            let rows = try db.run(Self.store.deleteDevice, [.text(app), .text(deviceID)])
            guard !rows.isEmpty else { return nil }
            return try cancelUnsent(db, app: app, deviceID: deviceID, reason: "device_deleted", now: now)
        }
    }

    /// A user's devices (binds: app, user id): a search of devices_user, which also gives the order.
    static let userDevicesSQL = store.userDevices

    public func userDevices(app: String, userID: String) async throws -> [DeviceRecord] {
        try readNow { db in
            try db.rows(Self.userDevicesSQL, [.text(app), .text(userID)]).compactMap(Self.device)
        }
    }

    public func usersDevices(app: String, userIDs: [String]) async throws -> [String: [DeviceRecord]] {
        let statements = StoreQueries.usersDevices(.sqlite, app: app, userIDs: userIDs)
        guard !statements.isEmpty else { return [:] }
        return try readNow { db in
            var out: [String: [DeviceRecord]] = [:]
            for (sql, binds) in statements {
                for device in try db.run(sql, binds, cached: false).compactMap(Self.device) {
                    out[device.userID, default: []].append(device)
                }
            }
            return out
        }
    }

    public func userIsKnown(app: String, userID: String) async throws -> Bool {
        try readNow { db in
            try !db.run(Self.store.userIsKnown, [.text(app), .text(userID)]).isEmpty
        }
    }

    public func deleteUserDevices(app: String, userID: String, now: Int64) async throws -> (devices: Int, cancelled: Int) {
        try await transaction { [self] db in
            let rows = try db.run(Self.store.deleteUserDevices, [.text(app), .text(userID)])
            var cancelled = 0
            for row in rows {
                if let id = row.text(0) { cancelled += try cancelUnsent(db, app: app, deviceID: id, reason: "device_deleted", now: now) }
            }
            return (rows.count, cancelled)
        }
    }

    public func listDevices(app: String, state: DeviceState?, since: Int64?, after: (Int64, String)?, limit: Int) async throws -> [DeviceRecord] {
        let (sql, binds) = StoreQueries.listDevices(.sqlite, app: app, state: state, since: since, after: after, limit: limit)
        let values = binds.map(SQLiteValue.init)
        return try await read { db in try db.rows(sql, values, cached: false).compactMap(Self.device) }
    }

    public func devices(app: String, ids: [String]) async throws -> [DeviceRecord] {
        let statements = StoreQueries.devices(.sqlite, app: app, ids: ids)
        guard !statements.isEmpty else { return [] }
        return try readNow { db in
            try statements.flatMap { sql, binds in try db.run(sql, binds, cached: false).compactMap(Self.device) }
        }
    }

    // MARK: Messages

    public func insertMessage(_ message: NewMessage, idempotency: (key: String, answer: IdempotentAnswer)?) async throws {
        try await transaction { [self] db in try insert(db, message, idempotency: idempotency) }
    }

    public func insertMessages(_ batch: [(message: NewMessage, idempotency: (key: String, answer: IdempotentAnswer)?)]) async throws -> [Bool] {
        // One writer: no other instance can hold a key meanwhile, so every message is kept.
        try await transaction { [self] db in
            for entry in batch { try insert(db, entry.message, idempotency: entry.idempotency) }
            return Array(repeating: true, count: batch.count)
        }
    }

    /// A message's rows and its idempotency answer, in the caller's transaction.
    func insert(_ db: Database, _ message: NewMessage, idempotency: (key: String, answer: IdempotentAnswer)?) throws {
        _ = try db.rows("INSERT INTO messages (message_id, app, created_at, expires_at) VALUES (?, ?, ?, ?)",
                        [.text(message.messageID), .text(message.app), .integer(Int(message.createdAt)), .integer(Int(message.expiresAt))])
        for d in message.deliveries {
            _ = try db.rows("""
                INSERT INTO deliveries (delivery_id, app, message_id, device_id, apns_token, environment, payload, receipt_sha256, priority,
                    collapse_id, apns_expiration, expires_at, apns_id, state, attempts, created_at, updated_at, next_attempt_at, seq, platform)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'queued', 0, ?, ?, ?, 1, ?)
                """, [.text(d.deliveryID), .text(message.app), .text(message.messageID), .text(d.deviceID), .text(d.address),
                      .text(d.platform.environmentColumn(d.environment)), .blob(d.payload),
                      d.receiptTokenSHA256.map { .blob($0) } ?? .null, .integer(d.priority), .text(d.collapseID),
                      .integer(Int(d.apnsExpiration)), .integer(Int(message.expiresAt)), .text(d.apnsID),
                      .integer(Int(message.createdAt)), .integer(Int(message.createdAt)), .integer(Int(message.createdAt)),
                      .text(d.platform.rawValue)])
            if let entry = d.mailbox { try insertMailbox(db, message, d, entry) }
        }
        if let idempotency { try upsertIdempotency(db, app: message.app, key: idempotency.key, answer: idempotency.answer) }
    }

    /// Keeps `answer` for the key, replacing any answer kept before (one instance: `StoreQueries.keepIdempotencyBinds`).
    func upsertIdempotency(_ db: Database, app: String, key: String, answer: IdempotentAnswer) throws {
        _ = try db.run(Self.store.keepIdempotency, StoreQueries.keepIdempotencyBinds(.sqlite, app: app, key: key, answer: answer))
    }

    public func idempotentAnswer(app: String, key: String) async throws -> IdempotentAnswer? {
        try readNow { db in
            try db.run(Self.store.idempotentAnswer, [.text(app), .text(key)]).first.flatMap { GatewayRows.idempotentAnswer($0) }
        }
    }

    public func storeIdempotentAnswer(app: String, key: String, answer: IdempotentAnswer) async throws {
        try await transaction { [self] db in try upsertIdempotency(db, app: app, key: key, answer: answer) }
    }

    /// A delivery row's columns (`GatewayRows`).
    static let deliveryColumns = GatewayRows.deliveryColumns

    /// A delivery from a row of `deliveryColumns` (`GatewayRows`).
    static func delivery(_ row: Row) -> DeliveryRecord? { GatewayRows.delivery(row) }

    public func message(app: String, messageID: String) async throws -> (createdAt: Int64, expiresAt: Int64, deliveries: [DeliveryRecord])? {
        try await read { db in
            guard let row = try db.run(Self.store.message, [.text(app), .text(messageID)]).first, let created = row.int(0), let expires = row.int(1)
            else { return nil }
            return (created, expires, try db.run(Self.store.messageDeliveries, [.text(messageID)]).compactMap(Self.delivery))
        }
    }

    public func cancelMessage(app: String, messageID: String, now: Int64) async throws -> Int? {
        try await transaction { [self] db in
            guard try !db.run(Self.store.messageExists, [.text(app), .text(messageID)]).isEmpty else {
                return nil
            }
            // Gateway v1 §5: a push in flight (under a lease) is sent and ends as APNs answers; the others are cancelled now.
            _ = try db.run(Self.queries.markMessageCancelled, [.text(messageID)])
            let rows = try db.run(Self.queries.cancelMessage, [.int(now), .text(messageID), .int(now)])
            try insertDeliveryEvents(db, rows, now: now)
            return rows.count
        }
    }

    // MARK: The queue

    /// The claim's selection of due rows (binds: app, now, now, limit): an index-only search of deliveries_due,
    /// then a rowid lookup per claimed row.
    static let claimSQL = queries.claimSelection

    public func claimDue(app: String, platform: PushPlatform, now: Int64, leaseUntil: Int64, limit: Int) async throws -> [ClaimedDelivery] {
        let (claims, unreadable) = try await transaction { [self] db in
            var claims: [ClaimedDelivery] = []
            var unreadable: [(id: String, column: String)] = []
            // leased_by stays NULL: SQLite serves one instance.
            for row in try db.run(Self.queries.claim, [.int(leaseUntil), .null, .text(app), .text(platform.rawValue), .int(now), .int(now), .int(limit)]) {
                if let id = row.text(0), let cancel = row.text(13) {
                    // Deleted while an attempt was in flight, whose process ended before writing it: never sent again.
                    try endClaimed(db, deliveryID: id, state: .cancelled, reason: cancel, now: now)
                    continue
                }
                switch GatewayRows.claimed(row) {
                case let .success(claim):
                    claims.append(claim)
                case let .failure(column):
                    // Never leased and left unsent: it ends now, and the rest of the batch goes on.
                    guard let id = row.text(0) else { continue }
                    try endClaimed(db, deliveryID: id, state: .rejected, reason: "undecodable_record", now: now)
                    unreadable.append((id, column.name))
                }
            }
            return (claims, unreadable)
        }
        for (id, column) in unreadable {
            logger.error("a claimed delivery's row cannot be read; it ends rejected (undecodable_record) and is not sent",
                         metadata: ["app": "\(app)", "delivery_id": "\(id)", "column": "\(column)"])
        }
        return claims
    }

    /// Ends a delivery the claim just leased without sending it (`state` final), with its event.
    func endClaimed(_ db: Database, deliveryID: String, state: DeliveryState, reason: String, now: Int64) throws {
        let rows = try db.run(Self.queries.endClaimed, [.text(state.rawValue), .text(reason), .int(now), .text(deliveryID)])
        try insertDeliveryEvents(db, rows, now: now)
    }

    public func completeAttempt(_ claim: ClaimedDelivery, outcome: AttemptOutcome, unregisteredAt: Int64?, now: Int64) async throws -> DeliveryState? {
        try await transaction { [self] db in
            // The single writer: nothing changes the row between this read and the write below.
            let current = try db.run(Self.queries.completeRead, [.text(claim.deliveryID)]).first.flatMap { GatewayRows.leasedDelivery($0) }
            let change = DeliveryStateMachine.complete(current, claim: claim, outcome: outcome, unregisteredAt: unregisteredAt, now: now)
            try write(db, change)
            return change.landedState
        }
    }

    /// Writes what the state machine decided (which checked the lease generation against the row read in this
    /// transaction): the row (its lease released), the events, the device APNs unregistered, the app's pause.
    func write(_ db: Database, _ change: DeliveryCompletion) throws {
        guard let row = change.row else { return }
        _ = try db.run(Self.queries.completeWrite, DeliveryQueries.completeWriteBinds(row, dropsPayload: change.dropsPayload))
        for event in change.events { try insertEvent(db, event) }
        if let gone = change.unregister {
            let devices = try db.run(Self.queries.unregisterDevices, [
                .int(gone.at), .text(gone.reason), .int(gone.at), .text(gone.app), .text(gone.platform.environmentColumn(gone.environment)),
                .text(gone.address), .int(gone.registeredBefore),
            ])
            for device in devices.compactMap(Self.device) { try insertEvent(db, GatewayEvents.deviceUnregistered(device, now: gone.at)) }
        }
        // The app's other queued deliveries wait for the same reason (gateway v1 §6).
        if change.pausesApp { _ = try db.run(Self.queries.pauseApp, [.text(row.app), .text(row.platform.rawValue)]) }
    }

    public func prune(messagesExpiredBefore: Int64, idempotencyBefore: Int64, eventsBefore: Int64, limit: Int) async throws -> Int {
        try await transaction { db in
            var messages = 0
            for sql in Self.store.pruneMessages {
                messages = try db.run(sql, [.int(messagesExpiredBefore), .int(limit)]).count
            }
            _ = try db.run(Self.store.pruneIdempotency, [.int(idempotencyBefore)])
            let events = try db.run(Self.store.pruneEvents, [.int(eventsBefore), .int(limit)]).count
            return messages + events
        }
    }

    public func nextDue(app: String, platform: PushPlatform) async throws -> Int64? {
        try readNow { db in
            try db.run(Self.store.nextDue, [.text(app), .text(platform.rawValue)]).first?.int(0)
        }
    }

    /// Every app's queue depth and oldest queued delivery: a scan of the queued rows' partial index only.
    static let queueDepthsSQL = store.queueDepths

    /// How SQLite runs `sql` (EXPLAIN QUERY PLAN's detail lines): for tests that keep the hot statements on indexes.
    func queryPlan(_ sql: String, _ binds: [SQLiteValue]) async throws -> [String] {
        try await read { db in
            try db.rows("EXPLAIN QUERY PLAN " + sql, binds, cached: false).compactMap { $0.column("detail")?.string }
        }
    }

    /// How many of an app's deliveries to one platform are queued (binds: app, platform): the claim's covering index.
    static let queuedOnPlatformSQL = store.queuedOnPlatform

    public func queued(app: String, platform: PushPlatform) async throws -> Int {
        try await read { db in
            Int(try db.run(Self.queuedOnPlatformSQL, [.text(app), .text(platform.rawValue)]).first?.int(0) ?? 0)
        }
    }

    public func queueDepths() async throws -> [String: QueueDepth] {
        try await read { db in
            var out: [String: QueueDepth] = [:]
            for row in try db.run(Self.queueDepthsSQL, []) {
                guard let app = row.text(0) else { continue }
                out[app] = QueueDepth(queued: Int(row.int(1) ?? 0), oldestCreatedAt: row.int(2))
            }
            return out
        }
    }

    // MARK: Receipts and reports

    /// The delivery a receipt names (binds: message id, SHA-256 of its token): a search of deliveries_receipt, one row.
    static let receiptSQL = queries.receipt

    public func recordReceipt(messageID: String, tokenSHA256: [UInt8], revealed: Bool, now: Int64) async throws -> ReceiptResult {
        try await transaction { [self] db in
            // Looked up by the hash itself: only SHA-256 of a random 32-byte token is stored, so how long the lookup
            // takes says nothing that helps forge a token (the rows are no longer compared one by one).
            guard let row = try db.run(Self.receiptSQL, [.text(messageID), .bytes(tokenSHA256)]).first,
                  let id = row.text(0), let app = row.text(1), let state = row.text(2).flatMap(DeliveryState.init(rawValue:))
            else {
                return try db.run(Self.queries.anyDelivery, [.text(messageID)]).isEmpty ? .unknownID : .wrongToken
            }
            var changed = false
            switch state {
            case .queued, .accepted, .fetched, .expired, .cancelled:
                try insertDeliveryEvents(db, try db.run(Self.queries.deliver, [.int(now), .int(now), .text(id)]), now: now)
                changed = true
                try collectMailbox(db, deliveryID: id, now: now)
            default:
                break
            }
            if revealed {
                // Reveal v1 §8: the first `revealed` receipt sets revealed_at (delivery.revealed); repeats change nothing.
                for row in try db.run(Self.queries.reveal, [.int(now), .int(now), .text(id)]) {
                    if let d = Self.delivery(row) { try insertEvent(db, GatewayEvents.revealed(d, now: now)) }
                }
            }
            return .matched(app: app, changed: changed, platform: row.text(3).flatMap(PushPlatform.init(rawValue:)) ?? .apns)
        }
    }

    public func recordReport(app: String, kid: String?, reason: String, count: Int, now: Int64) async throws -> [String] {
        guard let kid else { return [] }
        return try await transaction { db in
            let rows = try db.run(Self.store.reportOnDevices, [.text(reason), .text(kid), .int(count), .int(now), .text(kid), .text(app)])
            let apps = Set(rows.compactMap { $0.text(0) })
            for app in apps {
                _ = try db.run(Self.store.countReport, [.text(app), .text(kid), .text(reason), .int(count), .int(now)])
            }
            return apps.sorted()
        }
    }
}

/// A write transaction waiting for the SQLite writer's next batch: its body, run inside a batch, says whether it
/// failed and gives back what to do once the transaction it ran in has ended (committed, or not).
struct CommitJob: Sendable {
    let run: @Sendable (Database) -> (failed: Bool, finish: @Sendable (Result<Void, any Error>) -> Void)
    /// Fails the job without running it (the transaction could not begin).
    let fail: @Sendable (any Error) -> Void
}

/// A value bound to a statement's parameter.
enum SQLiteValue: Sendable {
    case text(String)
    case integer(Int)
    case blob([UInt8])
    case null

    var databaseValue: DatabaseValue {
        switch self {
        case let .text(s): s.databaseValue
        case let .integer(i): i.databaseValue
        case let .blob(b): Data(b).databaseValue
        case .null: .null
        }
    }
}

extension SQLiteValue {
    /// A shared statement's value as SQLite binds it (a boolean as 0 or 1).
    init(_ value: SQLValue) {
        switch value {
        case let .text(s): self = .text(s)
        case let .int(i): self = .integer(Int(i))
        case let .bytes(b): self = .blob(b)
        case let .bool(b): self = .integer(b ? 1 : 0)
        case .null: self = .null
        case .texts:
            // `SQLDialect.among` binds each value alone on SQLite: an array here is a statement rendered for PostgreSQL.
            preconditionFailure("a text array was bound to a SQLite statement; SQLite lists its values one bind each (SQLDialect.among)")
        }
    }
}

extension Row: SQLRow {
    func text(_ index: Int) -> String? { at(index)?.string }
    func int(_ index: Int) -> Int64? { at(index)?.integer.map(Int64.init) }
    func bytes(_ index: Int) -> [UInt8]? { at(index)?.blob }
    func bool(_ index: Int) -> Bool? { at(index)?.integer.map { $0 != 0 } }
}

extension Database {
    /// Runs one of the shared statements (`DeliveryQueries`, `StoreQueries`, `EventQueries`…) with `binds`; `cached`:
    /// prepared once per connection (false for SQL built per call, such as an id list's).
    func run(_ sql: String, _ binds: [SQLValue], cached: Bool = true) throws -> [Row] {
        try rows(sql, binds.map(SQLiteValue.init), cached: cached)
    }

    /// Runs `sql` with `binds` and returns its rows. `cached`: the statement is prepared once per connection
    /// and reused (the hot statements; SQL built per call passes false, so the cache stays small).
    func rows(_ sql: String, _ binds: [SQLiteValue] = [], cached: Bool = true) throws -> [Row] {
        let statement = cached ? try cachedStatement(sql: sql) : try makeStatement(sql: sql)
        // Optional existentials, not `[DatabaseValue]`: GRDB maps that one with a key path, which the runtime
        // instantiates on every call (a tenth of the writer's time in a profile).
        let arguments = StatementArguments(binds.map { value -> (any DatabaseValueConvertible)? in value.databaseValue })
        return try Row.fetchAll(statement, arguments: arguments)
    }
}

extension Row {
    /// The value at column `index` (0-based, in the statement's order); nil when it is NULL or out of range.
    func at(_ index: Int) -> DatabaseValue? {
        guard index < count else { return nil }
        let value: DatabaseValue = self[index]
        return value.isNull ? nil : value
    }

    /// The value of the column named `name`; nil when it is NULL or absent.
    func column(_ name: String) -> DatabaseValue? {
        let value: (any DatabaseValueConvertible)? = self[name]
        return value?.databaseValue
    }
}

extension DatabaseValue {
    /// An INTEGER (or a REAL or TEXT that reads as one).
    var integer: Int? {
        switch storage {
        case let .int64(i): Int(i)
        case let .double(d): Int(exactly: d.rounded(.towardZero))
        case let .string(s): Int(s)
        default: nil
        }
    }

    /// TEXT (or a number, as text).
    var string: String? {
        switch storage {
        case let .string(s): s
        case let .int64(i): String(i)
        case let .double(d): String(d)
        case let .blob(b): String(decoding: b, as: UTF8.self)
        case .null: nil
        }
    }

    /// A BLOB's bytes.
    var blob: [UInt8]? {
        switch storage {
        case let .blob(b): [UInt8](b)
        case let .string(s): Array(s.utf8)
        default: nil
        }
    }
}
