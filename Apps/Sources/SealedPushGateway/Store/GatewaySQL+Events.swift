/// The webhook events' statements (gateway v1 §8) that read the same in both dialects, written once and rendered
/// when a store opens. Their claim stays each store's own (`claimEvents`): PostgreSQL's picks its rows `FOR UPDATE
/// SKIP LOCKED` in an `UPDATE … FROM` and records the instance that leased them (`leased_by`), returning each row's
/// position to order by; SQLite's one instance holds every lease.
struct EventQueries: Sendable {
    /// Inserts one event, pending and due at once (binds: `insertBinds`).
    let insert: String
    /// The position of an app's event (binds: app, event id): `position`.
    let position: String
    /// A page of an app's events in position order (binds: app, after position, settled position, created since,
    /// limit): `id, app, type, created_at, body`, which `GatewayRows.event(_:)` reads.
    let page: String
    /// Ends a leased event acknowledged (binds: id, lease generation), returning `k` when the lease was current.
    let acknowledge: String
    /// Hands a leased event back for another attempt at a time (binds: next attempt, id, lease generation), returning
    /// `k` when the lease was current.
    let retry: String
    /// Ends a leased event dropped (binds: id, lease generation), returning `k` when the lease was current.
    let drop: String
    /// Hands a leased event back, due as it was, its attempt not counted (binds: id, lease generation), returning `k`
    /// when the lease was current.
    let handBack: String

    /// The statements in `dialect`.
    init(_ dialect: SQLDialect) {
        insert = dialect.render("INSERT INTO events (id, app, type, created_at, body, next_attempt_at) VALUES (?, ?, ?, ?, ?, ?)")
        position = dialect.render("SELECT position FROM events WHERE app = ? AND id = ?")
        page = dialect.render("""
            SELECT id, app, type, created_at, body FROM events WHERE app = ? AND position > ? AND position <= ? AND created_at >= ?
            ORDER BY position LIMIT ?
            """)
        // `leased_by` is NULL on SQLite already (its one instance leases without naming itself): setting it is a no-op there.
        let current = "WHERE id = ? AND lease_generation = ? AND state = 'pending' RETURNING 1 AS k"
        acknowledge = dialect.render("UPDATE events SET state = 'acknowledged', attempts = attempts + 1, lease_until = NULL, leased_by = NULL \(current)")
        retry = dialect.render("UPDATE events SET attempts = attempts + 1, next_attempt_at = ?, lease_until = NULL, leased_by = NULL \(current)")
        drop = dialect.render("UPDATE events SET state = 'dropped', lease_until = NULL, leased_by = NULL \(current)")
        handBack = dialect.render("UPDATE events SET lease_until = NULL, leased_by = NULL \(current)")
    }

    /// The binds of `insert` for `event`.
    static func insertBinds(_ event: EventRecord) -> [SQLValue] {
        [.text(event.id), .text(event.app), .text(event.type.rawValue), .int(event.createdAt), .text(String(decoding: event.body, as: UTF8.self)),
         .int(event.createdAt)]
    }

    /// The statement that writes `outcome` of a claimed event, and its binds.
    func complete(_ claim: ClaimedEvent, _ outcome: EventOutcome) -> (sql: String, binds: [SQLValue]) {
        let key: [SQLValue] = [.text(claim.id), .int(claim.generation)]
        return switch outcome {
        case .acknowledged: (acknowledge, key)
        case let .retry(at): (retry, [.int(at)] + key)
        case .dropped: (drop, key)
        case .handBack: (handBack, key)
        }
    }
}

extension GatewayRows {
    /// An event from a row of `EventQueries.page` (`id, app, type, created_at, body`); nil for a type this build
    /// does not know.
    static func event(_ row: some SQLRow) -> EventRecord? {
        guard let id = row.text(0), let app = row.text(1), let type = row.text(2).flatMap(GatewayEventType.init(rawValue:)),
              let created = row.int(3), let body = row.text(4)
        else { return nil }
        return EventRecord(id: id, app: app, type: type, createdAt: created, body: Array(body.utf8))
    }
}

/// The dashboard's statements, the same in both dialects, and what their rows add up to (`DashboardTally`). Only
/// PostgreSQL has an instance list (`instances`); SQLite's one instance is the store itself.
struct DashboardQueries: Sendable {
    /// Deliveries created since a time, by app, current state and hour back from now (binds: now, since):
    /// `app, state, h, n`.
    let hourly: String
    /// Push services' answers to deliveries created since a time (binds: since): `app, platform, apns_status, reason, n`.
    let answers: String
    /// Deliveries created since a time that were accepted, and delivered (binds: since): `app, accepted, delivered`.
    let dayTotals: String
    /// Failure reports: `app, reason, kid, count, last_at`.
    let reports: String
    /// Queued deliveries by app and leasing instance, and those under a live lease (binds: now):
    /// `app, leased_by, n, oldest, leased`.
    let queued: String
    /// Devices by app and state: `app, state, n`.
    let devices: String
    /// The dialect `events(apps:now:)` renders in.
    let dialect: SQLDialect

    /// The statements in `dialect`.
    init(_ dialect: SQLDialect) {
        self.dialect = dialect
        hourly = dialect.render("""
            SELECT app, state, (? - created_at) / 3600000 AS h, COUNT(*) AS n FROM deliveries WHERE created_at > ? GROUP BY app, state, h
            """)
        // Grouped by the expression, not the name: PostgreSQL would take `reason` in GROUP BY for the column.
        answers = dialect.render("""
            SELECT app, platform, apns_status, COALESCE(reason, '') AS reason, COUNT(*) AS n FROM deliveries
            WHERE created_at > ? AND apns_status IS NOT NULL GROUP BY app, platform, apns_status, COALESCE(reason, '') ORDER BY n DESC
            """)
        dayTotals = dialect.render("""
            SELECT app, COUNT(*) FILTER (WHERE accepted_at IS NOT NULL) AS accepted, COUNT(*) FILTER (WHERE state = 'delivered') AS delivered
            FROM deliveries WHERE created_at > ? GROUP BY app
            """)
        reports = "SELECT app, reason, kid, count, last_at FROM reports ORDER BY app, count DESC, kid"
        queued = dialect.render("""
            SELECT app, leased_by, COUNT(*) AS n, MIN(created_at) AS oldest,
                   COUNT(*) FILTER (WHERE lease_until IS NOT NULL AND lease_until >= ?) AS leased
            FROM deliveries WHERE state = 'queued' GROUP BY app, leased_by
            """)
        devices = "SELECT app, state, COUNT(*) AS n FROM devices GROUP BY app, state"
    }

    /// The pending and dropped events of `apps`, by app, state and leasing instance, and those under a live lease:
    /// `app, state, leased_by, n, leased`; one statement per `SQLDialect.among` list, with its binds (now first).
    /// Only the apps seen by the other statements: no scan of every event for others.
    func events(apps: [String], now: Int64) -> [(sql: String, binds: [SQLValue])] {
        dialect.among("app", apps).map { list in
            (dialect.render("""
                SELECT app, state, leased_by, COUNT(*) AS n, COUNT(*) FILTER (WHERE lease_until IS NOT NULL AND lease_until >= ?) AS leased
                FROM events WHERE \(list.predicate) AND state IN ('pending', 'dropped') GROUP BY app, state, leased_by
                """), [.int(now)] + list.binds)
        }
    }
}

/// What the dashboard's statements' rows add up to, row by row, the same for both stores.
struct DashboardTally {
    /// Each app's numbers.
    var apps: [String: DashboardSnapshot.App] = [:]
    /// Queued deliveries under a live lease, by the instance that leased them (PostgreSQL's `leased_by`).
    var leasedDeliveriesBy: [String: Int] = [:]
    /// Pending events under a live lease, by the instance that leased them.
    var leasedEventsBy: [String: Int] = [:]
    /// Pending events under a live lease, whoever leased them.
    var leasedEvents = 0

    /// The tally of no rows.
    init() {}

    /// The apps the rows named so far, in order.
    var appNames: [String] { apps.keys.sorted() }

    private mutating func update(_ app: String, _ change: (inout DashboardSnapshot.App) -> Void) {
        var a = apps[app] ?? DashboardSnapshot.App(app: app)
        change(&a)
        apps[app] = a
    }

    /// Adds a row of `DashboardQueries.hourly`: hour 0 is the last hour.
    mutating func hourly(_ row: some SQLRow) {
        guard let app = row.text(0), let state = row.text(1), let n = row.int(3).map(Int.init) else { return }
        let hour = Int(min(23, max(0, row.int(2) ?? 0)))
        update(app) { a in
            a.hourly[hour][state, default: 0] += n
            a.lastDay[state, default: 0] += n
            if hour == 0 { a.lastHour[state, default: 0] += n }
        }
    }

    /// Adds a row of `DashboardQueries.answers`: a success's reason is not shown.
    mutating func answer(_ row: some SQLRow) {
        guard let app = row.text(0), let status = row.int(2).map(Int.init), let n = row.int(4).map(Int.init) else { return }
        let platform = row.text(1).flatMap(PushPlatform.init(rawValue:)) ?? .apns
        let reason = (200...202).contains(status) ? "" : row.text(3) ?? ""
        update(app) { $0.addAnswer(platform: platform, status: status, reason: reason, count: n) }
    }

    /// Adds a row of `DashboardQueries.dayTotals`.
    mutating func dayTotals(_ row: some SQLRow) {
        guard let app = row.text(0) else { return }
        update(app) { a in
            a.acceptedLastDay = Int(row.int(1) ?? 0)
            a.deliveredLastDay = Int(row.int(2) ?? 0)
        }
    }

    /// Adds a row of `DashboardQueries.reports`.
    mutating func report(_ row: some SQLRow) {
        guard let app = row.text(0), let reason = row.text(1), let kid = row.text(2), let count = row.int(3), let at = row.int(4) else { return }
        update(app) { $0.reports.append(.init(reason: reason, kid: kid, count: Int(count), lastAt: at)) }
    }

    /// Adds a row of `DashboardQueries.queued`.
    mutating func queued(_ row: some SQLRow) {
        guard let app = row.text(0) else { return }
        let n = Int(row.int(2) ?? 0), oldest = row.int(3), leased = Int(row.int(4) ?? 0)
        if let by = row.text(1) { leasedDeliveriesBy[by, default: 0] += leased }
        update(app) { a in
            a.queued += n
            a.oldestQueuedAt = [a.oldestQueuedAt, oldest].compactMap { $0 }.min()
            a.leasedDeliveries += leased
        }
    }

    /// Adds a row of `DashboardQueries.devices`.
    mutating func devices(_ row: some SQLRow) {
        guard let app = row.text(0), let n = row.int(2).map(Int.init) else { return }
        let unregistered = row.text(1) == DeviceState.unregistered.rawValue
        update(app) { a in if unregistered { a.devicesUnregistered += n } else { a.devicesActive += n } }
    }

    /// Adds a row of `DashboardQueries.events(apps:now:)`.
    mutating func events(_ row: some SQLRow) {
        guard let app = row.text(0), let n = row.int(3).map(Int.init) else { return }
        let pending = row.text(1) == "pending"
        if pending {
            let leased = Int(row.int(4) ?? 0)
            leasedEvents += leased
            if let by = row.text(2) { leasedEventsBy[by, default: 0] += leased }
        }
        update(app) { a in if pending { a.eventsPending += n } else { a.eventsDropped += n } }
    }
}
