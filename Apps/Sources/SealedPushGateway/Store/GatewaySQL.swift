/// A value bound to a statement's parameter, in either dialect.
enum SQLValue: Sendable, Equatable {
    /// TEXT.
    case text(String)
    /// An integer (INTEGER on SQLite; BIGINT, or an INTEGER column by assignment, on PostgreSQL).
    case int(Int64)
    /// A BLOB / BYTEA.
    case bytes([UInt8])
    /// A boolean (0 or 1 on SQLite, which has none).
    case bool(Bool)
    /// NULL.
    case null
    /// A text array (`text[]`): bound only on PostgreSQL, by the `= ANY(?::text[])` predicate `SQLDialect.among`
    /// renders there; SQLite has no arrays, and `among` binds each value alone on it.
    case texts([String])

    /// An integer.
    static func int(_ value: Int) -> SQLValue { .int(Int64(value)) }
    /// An optional integer: NULL when nil.
    static func int(_ value: Int64?) -> SQLValue { value.map { .int($0) } ?? .null }
    /// An optional integer: NULL when nil.
    static func int(_ value: Int?) -> SQLValue { value.map { .int(Int64($0)) } ?? .null }
    /// Optional text: NULL when nil.
    static func text(_ value: String?) -> SQLValue { value.map { .text($0) } ?? .null }
}

extension SQLDialect {
    /// `sql` with its `?` placeholders as this dialect numbers them: kept on SQLite, `$1`, `$2`… on PostgreSQL.
    /// A `?` inside a quoted literal is kept (the store's SQL has none, and binds every value).
    func render(_ sql: String) -> String {
        guard self == .postgres else { return sql }
        var out = ""
        out.reserveCapacity(sql.utf8.count + 16)
        var n = 0
        var quoted = false
        for c in sql {
            if c == "'" { quoted.toggle() }
            if c == "?", !quoted {
                n += 1
                out += "$\(n)"
            } else {
                out.append(c)
            }
        }
        return out
    }

    /// An empty byte string: what a delivery's payload becomes once it will never be sent again.
    var emptyBytes: String {
        switch self {
        case .sqlite: "x''"
        case .postgres: "'\\x'::bytea"
        }
    }

    /// What follows a `SELECT` whose rows the transaction changes next: `FOR UPDATE` on PostgreSQL (another
    /// instance waits for the commit), nothing on SQLite (its one writer runs one transaction at a time).
    var lockRows: String {
        switch self {
        case .sqlite: ""
        case .postgres: " FOR UPDATE"
        }
    }

    /// What follows the claim's `SELECT` of due rows: `FOR UPDATE SKIP LOCKED` on PostgreSQL (instances claiming
    /// at once never take the same row, nor wait for each other: gateway v1 §9), nothing on SQLite.
    var skipLocked: String {
        switch self {
        case .sqlite: ""
        case .postgres: " FOR UPDATE SKIP LOCKED"
        }
    }

    /// The most values one SQLite `IN (?, …)` list binds: a longer list is run as several statements.
    static let sqliteListLimit = 500

    /// `column` is one of `values` (duplicates dropped, first seen kept): the predicate and its binds, one pair per
    /// statement to run, with `?` placeholders for `render`. PostgreSQL binds the whole list as one array
    /// (`column = ANY(?::text[])`: one statement, whatever its length); SQLite, which has no arrays, lists the values
    /// in chunks of `sqliteListLimit` (`column IN (?, ?, …)`). Empty for no values: nothing matches, nothing to run.
    func among(_ column: String, _ values: [String]) -> [(predicate: String, binds: [SQLValue])] {
        var seen = Set<String>()
        let unique = values.filter { seen.insert($0).inserted }
        guard !unique.isEmpty else { return [] }
        switch self {
        case .postgres:
            return [("\(column) = ANY(?::text[])", [.texts(unique)])]
        case .sqlite:
            return stride(from: 0, to: unique.count, by: Self.sqliteListLimit).map { start in
                let chunk = unique[start..<min(unique.count, start + Self.sqliteListLimit)]
                let marks = Array(repeating: "?", count: chunk.count).joined(separator: ", ")
                return ("\(column) IN (\(marks))", chunk.map { SQLValue.text($0) })
            }
        }
    }

    /// The column a claim picks its rows by: SQLite's `rowid` (in every index, so the due rows are found from
    /// deliveries_due alone), PostgreSQL's primary key.
    var claimKey: String {
        switch self {
        case .sqlite: "rowid"
        case .postgres: "delivery_id"
        }
    }
}

/// A row as the shared decoders read it, by position (in the order of the statement's column list); nil for
/// NULL or a value of another type.
protocol SQLRow {
    /// TEXT.
    func text(_ index: Int) -> String?
    /// An integer.
    func int(_ index: Int) -> Int64?
    /// A BLOB / BYTEA.
    func bytes(_ index: Int) -> [UInt8]?
    /// A boolean (SQLite: an integer, 1 for true).
    func bool(_ index: Int) -> Bool?
}

/// The columns the stores read and how a row of them is read, written once for both dialects.
enum GatewayRows {
    /// A device row's columns; `device(_:)` reads them by position, in this order.
    static let deviceColumns = """
        app, device_id, user_id, apns_token, environment, key_record, key_id, state, created_at, updated_at, registered_at,
        unregistered_at, unregistered_reason, token_reassigned, report_reason, report_kid, report_count, report_at,
        webpush_p256dh, webpush_auth
        """

    /// A device from a row of `deviceColumns`.
    static func device(_ row: some SQLRow) -> DeviceRecord? {
        guard let app = row.text(0), let id = row.text(1), let user = row.text(2), let token = row.text(3),
              let (platform, env) = row.text(4).flatMap(PushPlatform.fromEnvironmentColumn), let record = row.text(5), let kid = row.text(6),
              let state = row.text(7).flatMap(DeviceState.init(rawValue:)),
              let created = row.int(8), let updated = row.int(9), let registered = row.int(10)
        else { return nil }
        var report: FailureReportSummary?
        if let reason = row.text(14), let count = row.int(16), let at = row.int(17) {
            report = FailureReportSummary(reason: reason, kid: row.text(15), count: Int(count), at: at)
        }
        return DeviceRecord(
            app: app, deviceID: id, userID: user, address: token, environment: env, keyRecord: Array(record.utf8), keyID: kid, state: state,
            createdAt: created, updatedAt: updated, registeredAt: registered, unregisteredAt: row.int(11), unregisteredReason: row.text(12),
            tokenReassigned: row.bool(13) ?? false, lastReport: report, platform: platform,
            webpushKeys: platform == .webpush ? row.text(18).flatMap { p in row.text(19).map { StoredWebPushKeys(p256dh: p, auth: $0) } } : nil)
    }

    /// A delivery row's columns; `delivery(_:)` reads them by position, in this order.
    static let deliveryColumns = """
        delivery_id, app, message_id, device_id, state, attempts, apns_id, apns_status, reason, created_at, updated_at,
        next_attempt_at, accepted_at, delivered_at, revealed_at, seq, platform, platform_id
        """

    /// A delivery from a row of `deliveryColumns`.
    static func delivery(_ row: some SQLRow) -> DeliveryRecord? {
        guard let id = row.text(0), let app = row.text(1), let message = row.text(2), let device = row.text(3),
              let state = row.text(4).flatMap(DeliveryState.init(rawValue:)), let attempts = row.int(5), let apnsID = row.text(6),
              let created = row.int(9), let updated = row.int(10), let seq = row.int(15),
              let platform = row.text(16).flatMap(PushPlatform.init(rawValue:))
        else { return nil }
        return DeliveryRecord(
            deliveryID: id, app: app, messageID: message, deviceID: device, state: state, attempts: Int(attempts), apnsID: apnsID,
            apnsStatus: row.int(7).map(Int.init), reason: row.text(8), createdAt: created, updatedAt: updated, nextAttemptAt: row.int(11),
            acceptedAt: row.int(12), deliveredAt: row.int(13), revealedAt: row.int(14), seq: seq, platform: platform, platformID: row.text(17))
    }

    /// A delivery as an attempt's outcome reads it: `deliveryColumns`, then `lease_generation, cancel_reason`.
    static func leasedDelivery(_ row: some SQLRow) -> LeasedDeliveryRow? {
        guard let record = delivery(row), let generation = row.int(18) else { return nil }
        return LeasedDeliveryRow(record: record, leaseGeneration: generation, pendingCancel: row.text(19))
    }

    /// The columns a claim returns; `claimed(_:)` reads them by position, in this order.
    static let claimColumns = """
        delivery_id, app, device_id, apns_token, environment, payload, priority, collapse_id, apns_expiration,
        expires_at, apns_id, attempts, lease_generation, cancel_reason, platform
        """

    /// An idempotency answer from a row of `StoreQueries.idempotentAnswer` (`body_hmac, status, response, created_at`).
    static func idempotentAnswer(_ row: some SQLRow) -> IdempotentAnswer? {
        guard let hmac = row.bytes(0), let status = row.int(1), let body = row.bytes(2), let created = row.int(3) else { return nil }
        return IdempotentAnswer(bodyHMAC: hmac, status: Int(status), body: body, createdAt: created)
    }

    /// A column of a claimed row that does not read as what it must be.
    struct UndecodableColumn: Error {
        /// Its name.
        let name: String
    }

    /// A claim from a row of `claimColumns`, or the first column that cannot be read.
    static func claimed(_ row: some SQLRow) -> Result<ClaimedDelivery, UndecodableColumn> {
        func need<T>(_ value: T?, _ name: String) throws(UndecodableColumn) -> T {
            guard let value else { throw UndecodableColumn(name: name) }
            return value
        }
        do throws(UndecodableColumn) {
            return .success(ClaimedDelivery(
                deliveryID: try need(row.text(0), "delivery_id"), app: try need(row.text(1), "app"),
                deviceID: try need(row.text(2), "device_id"), address: try need(row.text(3), "apns_token"),
                environment: try need(row.text(4).flatMap(PushPlatform.fromEnvironmentColumn), "environment").1,
                payload: try need(row.bytes(5), "payload"), priority: Int(try need(row.int(6), "priority")),
                collapseID: try need(row.text(7), "collapse_id"), apnsExpiration: try need(row.int(8), "apns_expiration"),
                expiresAt: try need(row.int(9), "expires_at"), apnsID: try need(row.text(10), "apns_id"),
                attempts: Int(try need(row.int(11), "attempts")), generation: try need(row.int(12), "lease_generation"),
                platform: try need(row.text(14).flatMap(PushPlatform.init(rawValue:)), "platform")))
        } catch {
            return .failure(error)
        }
    }
}

/// The statements of the delivery queue (claims, attempts' outcomes, cancellations, receipts), written once
/// and rendered in each store's dialect when it opens.
struct DeliveryQueries: Sendable {
    /// The dialect they are rendered in.
    let dialect: SQLDialect
    /// Leases up to `limit` due deliveries of one platform (binds: lease_until, leased_by, app, platform, now, now, limit),
    /// returning `claimColumns`.
    let claim: String
    /// The selection of `claim`, alone (the same binds but the first two): for query plans.
    let claimSelection: String
    /// Ends a delivery a claim just found without sending it, if it is still queued (binds: state, reason, now, delivery
    /// id), returning `deliveryColumns`.
    let endClaimed: String
    /// The row an attempt's outcome is written against, locked (binds: delivery id): `deliveryColumns`, `lease_generation`, `cancel_reason`.
    let completeRead: String
    /// Writes the row `DeliveryStateMachine` decided (binds: `completeWriteBinds`).
    let completeWrite: String
    /// Marks the active devices of a token unregistered (binds: now, reason, now, app, environment, token, registered before),
    /// returning `deviceColumns`.
    let unregisterDevices: String
    /// Marks an app's queued deliveries to one platform `credentials_paused` (binds: app, platform): a credential
    /// refusal pauses that platform only.
    let pauseApp: String
    /// Marks a message's queued deliveries for cancellation (binds: message id), locking them.
    let markMessageCancelled: String
    /// Cancels a message's marked deliveries that are not in flight (binds: now, message id, now), returning `deliveryColumns`.
    let cancelMessage: String
    /// Marks a device's queued deliveries for cancellation (binds: reason, app, device id), locking them.
    let markDeviceCancelled: String
    /// Cancels a device's marked deliveries that are not in flight (binds: now, app, device id, now), returning `deliveryColumns`.
    let cancelDevice: String
    /// The delivery a receipt names, locked (binds: message id, SHA-256 of its token): `delivery_id, app, state, platform`.
    let receipt: String
    /// Whether a message has any delivery (binds: message id).
    let anyDelivery: String
    /// Makes a delivery `delivered` (binds: now, now, delivery id), returning `deliveryColumns`.
    let deliver: String
    /// Sets a delivery's `revealed_at` once (binds: now, now, delivery id), returning `deliveryColumns`.
    let reveal: String

    /// The statements in `dialect`.
    init(_ dialect: SQLDialect) {
        self.dialect = dialect
        let d = GatewayRows.deliveryColumns, empty = dialect.emptyBytes
        let due = """
            SELECT \(dialect.claimKey) FROM deliveries WHERE app = ? AND platform = ? AND state = 'queued' AND next_attempt_at <= ?
                AND (lease_until IS NULL OR lease_until < ?) ORDER BY next_attempt_at LIMIT ?\(dialect.skipLocked)
            """
        claimSelection = dialect.render(due)
        claim = dialect.render("""
            UPDATE deliveries SET lease_until = ?, lease_generation = lease_generation + 1, leased_by = ?
            WHERE \(dialect.claimKey) IN (\(due))
            RETURNING \(GatewayRows.claimColumns)
            """)
        endClaimed = dialect.render("""
            UPDATE deliveries SET state = ?, reason = ?, updated_at = ?, next_attempt_at = NULL, lease_until = NULL, leased_by = NULL,
                cancel_reason = NULL, seq = seq + 1, payload = \(empty)
            WHERE delivery_id = ? AND state = 'queued' RETURNING \(d)
            """)
        completeRead = dialect.render("SELECT \(d), lease_generation, cancel_reason FROM deliveries WHERE delivery_id = ?\(dialect.lockRows)")
        completeWrite = dialect.render("""
            UPDATE deliveries SET state = ?, attempts = ?, apns_status = ?, reason = ?, updated_at = ?, next_attempt_at = ?, accepted_at = ?,
                seq = ?, platform_id = ?, lease_until = NULL, leased_by = NULL, cancel_reason = NULL, payload = CASE WHEN ? THEN \(empty) ELSE payload END
            WHERE delivery_id = ?
            """)
        unregisterDevices = dialect.render("""
            UPDATE devices SET state = 'unregistered', unregistered_at = ?, unregistered_reason = ?, updated_at = ?
            WHERE app = ? AND environment = ? AND apns_token = ? AND state = 'active' AND registered_at < ?
            RETURNING \(GatewayRows.deviceColumns)
            """)
        pauseApp = dialect.render("""
            UPDATE deliveries SET reason = 'credentials_paused'
            WHERE app = ? AND platform = ? AND state = 'queued' AND (reason IS NULL OR reason <> 'credentials_paused')
            """)
        markMessageCancelled = dialect.render("UPDATE deliveries SET cancel_reason = 'message_deleted' WHERE message_id = ? AND state = 'queued'")
        cancelMessage = dialect.render("""
            UPDATE deliveries SET state = 'cancelled', reason = cancel_reason, cancel_reason = NULL, updated_at = ?, next_attempt_at = NULL,
                seq = seq + 1, payload = \(empty)
            WHERE message_id = ? AND state = 'queued' AND cancel_reason IS NOT NULL AND (lease_until IS NULL OR lease_until < ?)
            RETURNING \(d)
            """)
        markDeviceCancelled = dialect.render("UPDATE deliveries SET cancel_reason = ? WHERE app = ? AND device_id = ? AND state = 'queued'")
        cancelDevice = dialect.render("""
            UPDATE deliveries SET state = 'cancelled', reason = cancel_reason, cancel_reason = NULL, updated_at = ?, next_attempt_at = NULL,
                seq = seq + 1, payload = \(empty)
            WHERE app = ? AND device_id = ? AND state = 'queued' AND cancel_reason IS NOT NULL AND (lease_until IS NULL OR lease_until < ?)
            RETURNING \(d)
            """)
        receipt = dialect.render("SELECT delivery_id, app, state, platform FROM deliveries WHERE message_id = ? AND receipt_sha256 = ?\(dialect.lockRows)")
        anyDelivery = dialect.render("SELECT 1 AS k FROM deliveries WHERE message_id = ? LIMIT 1")
        deliver = dialect.render("""
            UPDATE deliveries SET state = 'delivered', delivered_at = ?, updated_at = ?, next_attempt_at = NULL, seq = seq + 1,
                payload = \(empty), cancel_reason = NULL
            WHERE delivery_id = ? RETURNING \(d)
            """)
        reveal = dialect.render("""
            UPDATE deliveries SET revealed_at = ?, updated_at = ?, seq = seq + 1 WHERE delivery_id = ? AND revealed_at IS NULL RETURNING \(d)
            """)
    }

    /// The binds of `completeWrite` for the row `change` writes.
    static func completeWriteBinds(_ row: DeliveryRecord, dropsPayload: Bool) -> [SQLValue] {
        [.text(row.state.rawValue), .int(row.attempts), .int(row.apnsStatus), .text(row.reason), .int(row.updatedAt), .int(row.nextAttemptAt),
         .int(row.acceptedAt), .int(row.seq), .text(row.platformID), .bool(dropsPayload), .text(row.deliveryID)]
    }
}

extension SQLDialect {
    /// The smaller of two values: SQLite's two-argument `MIN`, PostgreSQL's `LEAST`.
    var least: String {
        switch self {
        case .sqlite: "MIN"
        case .postgres: "LEAST"
        }
    }
}

/// The store's other statements that read the same in both dialects (devices, messages, the queue's depth,
/// failure reports), written once and rendered when a store opens.
struct StoreQueries: Sendable {
    /// One device (binds: app, device id): `deviceColumns`.
    let device: String
    /// A user's devices in (updated_at, device_id) order (binds: app, user id): `deviceColumns`; a search of devices_user.
    let userDevices: String
    /// Whether a user was ever registered (binds: app, user id).
    let userIsKnown: String
    /// Deletes a device (binds: app, device id), returning `device_id`.
    let deleteDevice: String
    /// Deletes a user's devices (binds: app, user id), returning `device_id`.
    let deleteUserDevices: String
    /// A message's times (binds: app, message id): `created_at, expires_at`.
    let message: String
    /// A message's deliveries in (device_id, delivery_id) order (binds: message id): `deliveryColumns`.
    let messageDeliveries: String
    /// Whether a message of the app exists (binds: app, message id).
    let messageExists: String
    /// The earliest next attempt of an app's queued deliveries of one platform (binds: app, platform): `t`.
    let nextDue: String
    /// Every app's queue depth and oldest queued delivery: `app, n, oldest`; the queued rows' partial index only.
    let queueDepths: String
    /// How many of an app's deliveries to one platform are queued (binds: app, platform): `n`; the claim's index only.
    let queuedOnPlatform: String
    /// Records a failure report on one app's devices of a key id (binds: reason, kid, count, now, kid, app), returning `app`.
    let reportOnDevices: String
    /// Counts a failure report per app, key id and reason (binds: app, kid, reason, count, now).
    let countReport: String
    /// What a registration takes first, one at a time across instances: PostgreSQL's transaction-scoped advisory
    /// locks on the user (the device limit) and then the token (its uniqueness), always in that order (binds:
    /// `app \u{1} user id`, then `app \u{1} environment \u{1} token`); nothing on SQLite, whose one writer runs
    /// one registration at a time.
    let registrationLocks: [String]
    /// A device about to be replaced, locked (binds: app, device id): `deviceColumns`.
    let deviceForUpdate: String
    /// How many devices a user holds (binds: app, user id): `n`.
    let countUserDevices: String
    /// Deletes the other device that holds a token (binds: app, environment, token, device id), returning `device_id`.
    let takeToken: String
    /// Writes a registered device, new or replaced (binds: `upsertDeviceBinds`).
    let upsertDevice: String
    /// Remembers that a user was registered (binds: app, user id).
    let knowUser: String
    /// An idempotency key's answer (binds: app, key): `GatewayRows.idempotentAnswer(_:)` reads it.
    let idempotentAnswer: String
    /// Keeps an answer for a key, replacing one kept before only when that one was given at or before a time
    /// (binds: `keepIdempotencyBinds`), returning `k` when it was kept: one upsert, whose cut each store chooses.
    let keepIdempotency: String
    /// Deletes up to a number of messages that expired before a time, with their deliveries: each statement in turn,
    /// all with the same binds (expired before, limit); the last returns one row per message deleted.
    ///
    /// The one prune statement whose text differs by dialect: PostgreSQL picks the messages once, `FOR UPDATE SKIP
    /// LOCKED` (instances pruning at once never wait for each other), in a data-modifying `WITH` that deletes the
    /// deliveries and the messages of the same picked rows (picked twice, the second pick could differ from the first
    /// as other instances lock and release rows). SQLite has no data-modifying `WITH`, and its one writer picks the
    /// same rows twice in one transaction.
    let pruneMessages: [String]
    /// Deletes the idempotency answers given before a time (binds: before).
    let pruneIdempotency: String
    /// Deletes up to a number of events written before a time, the oldest first, whatever their state (binds: before,
    /// limit), returning one row per event deleted; PostgreSQL skips the rows another instance holds locked.
    let pruneEvents: String

    /// The statements in `dialect`.
    init(_ dialect: SQLDialect) {
        let devices = GatewayRows.deviceColumns
        device = dialect.render("SELECT \(devices) FROM devices WHERE app = ? AND device_id = ?")
        userDevices = dialect.render("SELECT \(devices) FROM devices WHERE app = ? AND user_id = ? ORDER BY updated_at, device_id")
        userIsKnown = dialect.render("SELECT 1 AS k FROM known_users WHERE app = ? AND user_id = ?")
        deleteDevice = dialect.render("DELETE FROM devices WHERE app = ? AND device_id = ? RETURNING device_id")
        deleteUserDevices = dialect.render("DELETE FROM devices WHERE app = ? AND user_id = ? RETURNING device_id")
        message = dialect.render("SELECT created_at, expires_at FROM messages WHERE app = ? AND message_id = ?")
        messageDeliveries = dialect.render("""
            SELECT \(GatewayRows.deliveryColumns) FROM deliveries WHERE message_id = ? ORDER BY device_id, delivery_id
            """)
        messageExists = dialect.render("SELECT 1 AS k FROM messages WHERE app = ? AND message_id = ?")
        nextDue = dialect.render("SELECT MIN(next_attempt_at) AS t FROM deliveries WHERE app = ? AND platform = ? AND state = 'queued'")
        queueDepths = "SELECT app, COUNT(*) AS n, MIN(created_at) AS oldest FROM deliveries WHERE state = 'queued' GROUP BY app"
        queuedOnPlatform = dialect.render("SELECT COUNT(*) AS n FROM deliveries WHERE app = ? AND platform = ? AND state = 'queued'")
        reportOnDevices = dialect.render("""
            UPDATE devices SET report_reason = ?, report_kid = ?, report_count = ?, report_at = ? WHERE key_id = ? AND app = ? RETURNING app
            """)
        switch dialect {
        case .sqlite: registrationLocks = []
        case .postgres: registrationLocks = ["SELECT pg_advisory_xact_lock(1, hashtext($1))", "SELECT pg_advisory_xact_lock(2, hashtext($1))"]
        }
        deviceForUpdate = dialect.render("SELECT \(devices) FROM devices WHERE app = ? AND device_id = ?\(dialect.lockRows)")
        countUserDevices = dialect.render("SELECT COUNT(*) AS n FROM devices WHERE app = ? AND user_id = ?")
        takeToken = dialect.render("""
            DELETE FROM devices WHERE app = ? AND environment = ? AND apns_token = ? AND device_id <> ? RETURNING device_id
            """)
        upsertDevice = dialect.render("""
            INSERT INTO devices (\(devices)) VALUES (?, ?, ?, ?, ?, ?, ?, 'active', ?, ?, ?, NULL, NULL, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (app, device_id) DO UPDATE SET user_id = excluded.user_id, apns_token = excluded.apns_token,
                environment = excluded.environment, key_record = excluded.key_record, key_id = excluded.key_id, state = 'active',
                created_at = excluded.created_at, updated_at = excluded.updated_at, registered_at = excluded.registered_at,
                unregistered_at = NULL, unregistered_reason = NULL, token_reassigned = excluded.token_reassigned,
                report_reason = excluded.report_reason, report_kid = excluded.report_kid, report_count = excluded.report_count,
                report_at = excluded.report_at, webpush_p256dh = excluded.webpush_p256dh, webpush_auth = excluded.webpush_auth
            """)
        knowUser = dialect.render("INSERT INTO known_users (app, user_id) VALUES (?, ?) ON CONFLICT DO NOTHING")
        idempotentAnswer = dialect.render("SELECT body_hmac, status, response, created_at FROM idempotency WHERE app = ? AND key = ?")
        keepIdempotency = dialect.render("""
            INSERT INTO idempotency (app, key, body_hmac, status, response, created_at) VALUES (?, ?, ?, ?, ?, ?)
            ON CONFLICT (app, key) DO UPDATE SET body_hmac = excluded.body_hmac, status = excluded.status, response = excluded.response,
                created_at = excluded.created_at
            WHERE idempotency.created_at <= ?
            RETURNING 1 AS k
            """)
        let picked = "SELECT message_id FROM messages WHERE expires_at < ? ORDER BY expires_at, message_id LIMIT ?\(dialect.skipLocked)"
        switch dialect {
        case .sqlite:
            pruneMessages = [
                dialect.render("DELETE FROM deliveries WHERE message_id IN (\(picked))"),
                dialect.render("DELETE FROM messages WHERE message_id IN (\(picked)) RETURNING 1 AS k"),
            ]
        case .postgres:
            pruneMessages = [dialect.render("""
                WITH picked AS (\(picked)),
                     gone AS (DELETE FROM deliveries WHERE message_id IN (SELECT message_id FROM picked))
                DELETE FROM messages WHERE message_id IN (SELECT message_id FROM picked) RETURNING 1 AS k
                """)]
        }
        pruneIdempotency = dialect.render("DELETE FROM idempotency WHERE created_at < ?")
        pruneEvents = dialect.render("""
            DELETE FROM events WHERE position IN (SELECT position FROM events WHERE created_at < ? ORDER BY created_at LIMIT ?\(dialect.skipLocked))
            RETURNING 1 AS k
            """)
        countReport = dialect.render("""
            INSERT INTO reports (app, kid, reason, count, last_at) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT (app, kid, reason) DO UPDATE SET count = \(dialect.least)(reports.count + excluded.count, 1000000000),
                last_at = excluded.last_at
            """)
    }
}

extension StoreQueries {
    /// The binds of `upsertDevice` for `device` as it is stored.
    static func upsertDeviceBinds(_ device: DeviceRecord) -> [SQLValue] {
        let report = device.lastReport
        return [.text(device.app), .text(device.deviceID), .text(device.userID), .text(device.address),
                .text(device.platform.environmentColumn(device.environment)),
                .text(String(decoding: device.keyRecord, as: UTF8.self)), .text(device.keyID), .int(device.createdAt), .int(device.updatedAt),
                .int(device.registeredAt), .bool(device.tokenReassigned), .text(report?.reason), .text(report?.kid), .int(report?.count),
                .int(report?.at), .text(device.webpushKeys?.p256dh), .text(device.webpushKeys?.auth)]
    }

    /// The binds of `keepIdempotency` for `answer` in `dialect`. The cut is each store's own rule: PostgreSQL keeps
    /// the first answer (instances may answer one key at once; a repeat replays the answer kept) and replaces only
    /// one older than the idempotency window; SQLite's one instance never answers a key twice at once (its in-flight
    /// slots), so its latest answer replaces any kept before (`Int64.max`), as its `INSERT OR REPLACE` did.
    static func keepIdempotencyBinds(_ dialect: SQLDialect, app: String, key: String, answer: IdempotentAnswer) -> [SQLValue] {
        let replacesUpTo = switch dialect {
        case .sqlite: Int64.max
        case .postgres: answer.createdAt - Gateway.idempotencyWindow
        }
        return [.text(app), .text(key), .bytes(answer.bodyHMAC), .int(answer.status), .bytes(answer.body), .int(answer.createdAt),
                .int(replacesUpTo)]
    }

    /// An app's devices of the given ids: one statement per `SQLDialect.among` list, with its binds; their rows
    /// together make the answer, in no particular order.
    static func devices(_ dialect: SQLDialect, app: String, ids: [String]) -> [(sql: String, binds: [SQLValue])] {
        dialect.among("device_id", ids).map { list in
            (dialect.render("SELECT \(GatewayRows.deviceColumns) FROM devices WHERE app = ? AND \(list.predicate)"), [.text(app)] + list.binds)
        }
    }

    /// An app's devices of the given users: one statement per `SQLDialect.among` list, with its binds, each in
    /// (user_id, updated_at, device_id) order; all of a user's devices are in one statement's rows.
    static func usersDevices(_ dialect: SQLDialect, app: String, userIDs: [String]) -> [(sql: String, binds: [SQLValue])] {
        dialect.among("user_id", userIDs).map { list in
            (dialect.render("""
                SELECT \(GatewayRows.deviceColumns) FROM devices WHERE app = ? AND \(list.predicate) ORDER BY user_id, updated_at, device_id
                """), [.text(app)] + list.binds)
        }
    }

    /// A page of an app's devices in (updated_at, device_id) order, from `since` (inclusive) and after the cursor
    /// position: the statement in `dialect` and its binds. The cursor's comparison is the dialect's own: a row
    /// value on PostgreSQL (one index range), its expansion on SQLite.
    static func listDevices(_ dialect: SQLDialect, app: String, state: DeviceState?, since: Int64?, after: (Int64, String)?,
                            limit: Int) -> (sql: String, binds: [SQLValue]) {
        var sql = "SELECT \(GatewayRows.deviceColumns) FROM devices WHERE app = ?"
        var binds: [SQLValue] = [.text(app)]
        if let state {
            sql += " AND state = ?"
            binds.append(.text(state.rawValue))
        }
        if let since {
            sql += " AND updated_at >= ?"
            binds.append(.int(since))
        }
        if let after {
            switch dialect {
            case .sqlite:
                sql += " AND (updated_at > ? OR (updated_at = ? AND device_id > ?))"
                binds += [.int(after.0), .int(after.0), .text(after.1)]
            case .postgres:
                sql += " AND (updated_at, device_id) > (?, ?)"
                binds += [.int(after.0), .text(after.1)]
            }
        }
        sql += " ORDER BY updated_at, device_id LIMIT ?"
        binds.append(.int(limit))
        return (dialect.render(sql), binds)
    }
}
