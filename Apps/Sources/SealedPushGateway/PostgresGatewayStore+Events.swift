import PostgresNIO
import NIOCore

// The webhook events (gateway v1 §8) and the dashboard's numbers on PostgreSQL. The events themselves are
// written by the state-changing methods in PostgresGatewayStore.swift (`insertEvent`), in their transaction;
// these read and lease them. Claims take `FOR UPDATE SKIP LOCKED` under a lease whose `lease_generation`
// grows with each claim, as deliveries do, so that several instances never claim one event at once.
extension PostgresGatewayStore {
    /// Writes the events of deliveries an UPDATE just changed (its `RETURNING` rows), in the current transaction.
    func insertDeliveryEvents(_ conn: PostgresConnection, _ rows: [PostgresRow], now: Int64) async throws {
        for row in rows {
            guard let delivery = Self.delivery(row) else { continue }
            try await insertEvent(conn, GatewayEvents.delivery(delivery, now: now))
        }
    }

    /// Inserts one event (pending, due now) in the current transaction: the only SQL the events of §8 add to
    /// the state-changing methods.
    ///
    /// Always called after the transaction has changed a row (every event follows an `UPDATE … RETURNING`
    /// that returned it), so the transaction has its transaction id before its event draws a `position`:
    /// `settledEventPosition` relies on that.
    func insertEvent(_ conn: PostgresConnection, _ event: EventRecord?) async throws {
        guard let event else { return }
        try await conn.rows("""
            INSERT INTO events (id, app, type, created_at, body, next_attempt_at)
            VALUES (\(event.id), \(event.app), \(event.type.rawValue), \(event.createdAt), \(String(decoding: event.body, as: UTF8.self)),
                    \(event.createdAt))
            """, logger: logger)
    }

    public func claimEvents(app: String, now: Int64, leaseUntil: Int64, limit: Int) async throws -> [ClaimedEvent] {
        try await transaction { [self] conn in
            try await conn.rows("""
                UPDATE events e SET lease_until = \(leaseUntil), lease_generation = e.lease_generation + 1, leased_by = \(instanceID)
                FROM (SELECT position FROM events
                      WHERE app = \(app) AND state = 'pending' AND next_attempt_at <= \(now) AND (lease_until IS NULL OR lease_until < \(now))
                      ORDER BY position LIMIT \(Int64(limit)) FOR UPDATE SKIP LOCKED) due
                WHERE e.position = due.position
                RETURNING e.position, e.id, e.app, e.created_at, e.body, e.attempts, e.lease_generation
                """, logger: logger).map { row -> (Int64, ClaimedEvent) in
                let r = row.makeRandomAccess()
                return (try r["position"].decode(Int64.self), ClaimedEvent(
                    id: try r["id"].decode(String.self), app: try r["app"].decode(String.self), createdAt: try r["created_at"].decode(Int64.self),
                    body: Array(try r["body"].decode(String.self).utf8), attempts: try r["attempts"].decode(Int.self),
                    generation: try r["lease_generation"].decode(Int64.self)))
            }.sorted { $0.0 < $1.0 }.map(\.1)
        }
    }

    public func completeEvent(_ claim: ClaimedEvent, outcome: EventOutcome, now: Int64) async throws -> Bool {
        let id = claim.id, generation = claim.generation
        return try await transaction { [self] conn in
            let change: PostgresQuery = switch outcome {
            case .acknowledged:
                """
                UPDATE events SET state = 'acknowledged', attempts = attempts + 1, lease_until = NULL, leased_by = NULL
                WHERE id = \(id) AND lease_generation = \(generation) AND state = 'pending' RETURNING 1 AS k
                """
            case let .retry(at):
                """
                UPDATE events SET attempts = attempts + 1, next_attempt_at = \(at), lease_until = NULL, leased_by = NULL
                WHERE id = \(id) AND lease_generation = \(generation) AND state = 'pending' RETURNING 1 AS k
                """
            case .dropped:
                """
                UPDATE events SET state = 'dropped', lease_until = NULL, leased_by = NULL
                WHERE id = \(id) AND lease_generation = \(generation) AND state = 'pending' RETURNING 1 AS k
                """
            case .handBack:
                """
                UPDATE events SET lease_until = NULL, leased_by = NULL
                WHERE id = \(id) AND lease_generation = \(generation) AND state = 'pending' RETURNING 1 AS k
                """
            }
            return try await !conn.rows(change, logger: logger).isEmpty
        }
    }

    /// The events of `app` in position order, only up to the settled position: positions are drawn when an
    /// event is inserted, not when its transaction commits, so a later position can be visible while an
    /// earlier one is still being written, and a reader paging with `after=` would step over the earlier one.
    public func events(app: String, after: String?, since: Int64, limit: Int) async throws -> [EventRecord]? {
        try await read { [self] conn -> [EventRecord]? in
            var position: Int64 = 0
            if let after {
                guard let found = try await conn.rows("SELECT position FROM events WHERE app = \(app) AND id = \(after)", logger: logger)
                    .first?.makeRandomAccess()["position"].decode(Int64.self)
                else { return nil }
                position = found
            }
            let settled = try await settledEventPosition(conn)
            return try await conn.rows("""
                SELECT id, app, type, created_at, body FROM events
                WHERE app = \(app) AND position > \(position) AND position <= \(settled) AND created_at >= \(since)
                ORDER BY position LIMIT \(Int64(limit))
                """, logger: logger).compactMap { row -> EventRecord? in
                let r = row.makeRandomAccess()
                guard let type = GatewayEventType(rawValue: try r["type"].decode(String.self)) else { return nil }
                return EventRecord(id: try r["id"].decode(String.self), app: try r["app"].decode(String.self), type: type,
                                   createdAt: try r["created_at"].decode(Int64.self), body: Array(try r["body"].decode(String.self).utf8))
            }
        }
    }

    public func dashboard(now: Int64) async throws -> DashboardSnapshot {
        let dayAgo = now - 86_400_000
        // Instances are live by the clock their heartbeat writes `last_seen` with, whatever `now` says.
        let liveSince = options.clock.wall().milliseconds - options.heartbeat.milliseconds * 3
        return try await read { [self] conn -> DashboardSnapshot in
            var apps: [String: DashboardSnapshot.App] = [:]
            func update(_ app: String, _ change: (inout DashboardSnapshot.App) -> Void) {
                var a = apps[app] ?? DashboardSnapshot.App(app: app)
                change(&a)
                apps[app] = a
            }
            // Deliveries created in the last 24 hours by current state and hour (0: the last hour).
            for row in try await conn.rows("""
                SELECT app, state, (\(now) - created_at) / 3600000 AS h, COUNT(*) AS n FROM deliveries
                WHERE created_at > \(dayAgo) GROUP BY app, state, h
                """, logger: logger) {
                let r = row.makeRandomAccess()
                let app = try r["app"].decode(String.self), state = try r["state"].decode(String.self), n = try r["n"].decode(Int.self)
                let hour = Int(min(23, max(0, try r["h"].decode(Int64?.self) ?? 0)))
                update(app) { a in
                    a.hourly[hour][state, default: 0] += n
                    a.lastDay[state, default: 0] += n
                    if hour == 0 { a.lastHour[state, default: 0] += n }
                }
            }
            for row in try await conn.rows("""
                SELECT app, platform, apns_status, COALESCE(reason, '') AS reason, COUNT(*) AS n FROM deliveries
                WHERE created_at > \(dayAgo) AND apns_status IS NOT NULL GROUP BY app, platform, apns_status, COALESCE(reason, '') ORDER BY n DESC
                """, logger: logger) {
                let r = row.makeRandomAccess()
                let app = try r["app"].decode(String.self), status = try r["apns_status"].decode(Int.self), n = try r["n"].decode(Int.self)
                let platform = try PushPlatform(rawValue: r["platform"].decode(String.self)) ?? .apns
                let reason = try (200...202).contains(status) ? "" : r["reason"].decode(String.self)
                update(app) { $0.addAnswer(platform: platform, status: status, reason: reason, count: n) }
            }
            for row in try await conn.rows("""
                SELECT app, COUNT(*) FILTER (WHERE accepted_at IS NOT NULL) AS accepted, COUNT(*) FILTER (WHERE state = 'delivered') AS delivered
                FROM deliveries WHERE created_at > \(dayAgo) GROUP BY app
                """, logger: logger) {
                let r = row.makeRandomAccess()
                let app = try r["app"].decode(String.self), accepted = try r["accepted"].decode(Int.self), delivered = try r["delivered"].decode(Int.self)
                update(app) { a in
                    a.acceptedLastDay = accepted
                    a.deliveredLastDay = delivered
                }
            }
            for row in try await conn.rows("SELECT app, reason, kid, count, last_at FROM reports ORDER BY app, count DESC, kid", logger: logger) {
                let r = row.makeRandomAccess()
                let report = DashboardSnapshot.ReportCount(reason: try r["reason"].decode(String.self), kid: try r["kid"].decode(String.self),
                                                           count: try r["count"].decode(Int.self), lastAt: try r["last_at"].decode(Int64.self))
                update(try r["app"].decode(String.self)) { $0.reports.append(report) }
            }
            // Queued deliveries, and those of them under a live lease, per app and per instance.
            var leasedDeliveries: [String: Int] = [:]
            for row in try await conn.rows("""
                SELECT app, leased_by, COUNT(*) AS n, MIN(created_at) AS oldest,
                       COUNT(*) FILTER (WHERE lease_until IS NOT NULL AND lease_until >= \(now)) AS leased
                FROM deliveries WHERE state = 'queued' GROUP BY app, leased_by
                """, logger: logger) {
                let r = row.makeRandomAccess()
                let app = try r["app"].decode(String.self), n = try r["n"].decode(Int.self), leased = try r["leased"].decode(Int.self)
                let oldest = try r["oldest"].decode(Int64?.self)
                if let by = try r["leased_by"].decode(String?.self) { leasedDeliveries[by, default: 0] += leased }
                update(app) { a in
                    a.queued += n
                    a.oldestQueuedAt = [a.oldestQueuedAt, oldest].compactMap { $0 }.min()
                    a.leasedDeliveries += leased
                }
            }
            for row in try await conn.rows("SELECT app, state, COUNT(*) AS n FROM devices GROUP BY app, state", logger: logger) {
                let r = row.makeRandomAccess()
                let n = try r["n"].decode(Int.self), unregistered = try r["state"].decode(String.self) == DeviceState.unregistered.rawValue
                update(try r["app"].decode(String.self)) { a in if unregistered { a.devicesUnregistered += n } else { a.devicesActive += n } }
            }
            // The apps seen above (devices, queued or last-day deliveries, reports): no scan of every event for others.
            var leasedEvents: [String: Int] = [:]
            for row in try await conn.rows("""
                SELECT app, state, leased_by, COUNT(*) AS n, COUNT(*) FILTER (WHERE lease_until IS NOT NULL AND lease_until >= \(now)) AS leased
                FROM events WHERE app = ANY(\(apps.keys.sorted())::text[]) AND state IN ('pending', 'dropped') GROUP BY app, state, leased_by
                """, logger: logger) {
                let r = row.makeRandomAccess()
                let n = try r["n"].decode(Int.self), pending = try r["state"].decode(String.self) == "pending"
                if pending, let by = try r["leased_by"].decode(String?.self) { leasedEvents[by, default: 0] += try r["leased"].decode(Int.self) }
                update(try r["app"].decode(String.self)) { a in if pending { a.eventsPending += n } else { a.eventsDropped += n } }
            }
            let instances = try await conn.rows("""
                SELECT instance_id, COALESCE(name, instance_id) AS name, started_at FROM instances
                WHERE last_seen >= \(liveSince) OR instance_id = \(instanceID) ORDER BY started_at, instance_id
                """, logger: logger).map { row -> DashboardSnapshot.Instance in
                let r = row.makeRandomAccess()
                let id = try r["instance_id"].decode(String.self)
                return DashboardSnapshot.Instance(name: try r["name"].decode(String.self), startedAt: try r["started_at"].decode(Int64.self),
                                                  leasedDeliveries: leasedDeliveries[id] ?? 0, leasedEvents: leasedEvents[id] ?? 0)
            }
            return DashboardSnapshot(apps: apps, instances: instances, takenAt: now)
        }
    }

    /// The highest event position at or below which no transaction is still writing an event.
    ///
    /// Reads the position sequence's last value `v`, then — in a later statement, so after it — the current
    /// snapshot's `xmax` `X` (the next transaction id). A transaction that drew a position up to `v` had its
    /// transaction id before it drew it (`insertEvent`), so that id is below `X`; once the oldest running
    /// transaction (`xmin` of a fresh snapshot) is at or past `X`, all of them have ended and `v` is settled.
    /// Waits for that (every 10 ms, at most `eventsSettleWait`); if it does not come in time (a long
    /// transaction), answers the last position found settled before, which may be lower than `v`.
    func settledEventPosition(_ conn: PostgresConnection) async throws -> Int64 {
        let drawn = try await conn.rows("""
            SELECT COALESCE((SELECT last_value FROM pg_sequences
                             WHERE schemaname = current_schema() AND sequencename = 'events_position_seq'), 0) AS v
            """, logger: logger).first?.makeRandomAccess()["v"].decode(Int64.self) ?? 0
        guard drawn > settledEvents.withLockedValue({ $0 }) else { return settledEvents.withLockedValue { $0 } }
        let horizon = try await conn.rows("SELECT pg_snapshot_xmax(pg_current_snapshot())::text AS x", logger: logger)
            .first?.makeRandomAccess()["x"].decode(String.self) ?? "0"
        let deadline = ContinuousClock.now + options.eventsSettleWait
        while true {
            let passed = try await conn.rows("SELECT pg_snapshot_xmin(pg_current_snapshot()) >= \(horizon)::xid8 AS passed", logger: logger)
                .first?.makeRandomAccess()["passed"].decode(Bool.self) ?? false
            if passed {
                return settledEvents.withLockedValue { s in
                    s = max(s, drawn)
                    return s
                }
            }
            guard ContinuousClock.now < deadline else {
                logger.notice("the events listing answered without the newest events: a transaction writing events is still open",
                              metadata: ["waited": "\(options.eventsSettleWait)"])
                return settledEvents.withLockedValue { $0 }
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }
}
