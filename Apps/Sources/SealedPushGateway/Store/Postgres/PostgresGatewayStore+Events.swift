import PostgresNIO
import NIOCore
import SealedPushWire

// The webhook events (gateway v1 §8) and the dashboard's numbers on PostgreSQL. The events themselves are
// written by the state-changing methods in PostgresGatewayStore.swift (`insertEvent`), in their transaction;
// these read and lease them, with the shared statements (`EventQueries`, `DashboardQueries`) but for the claim and
// the instance list, PostgreSQL's own. Claims take `FOR UPDATE SKIP LOCKED` under a lease whose `lease_generation`
// grows with each claim, as deliveries do, so that several instances never claim one event at once.
extension PostgresGatewayStore {
    /// Writes the events of deliveries an UPDATE just changed (its `RETURNING` rows), in the current transaction: one
    /// statement whatever their number (#47; a message cancelled with 10 000 deliveries was 10 000 inserts).
    func insertDeliveryEvents(_ conn: PostgresConnection, _ rows: [PostgresRow], now: Int64) async throws {
        try await insertEvents(conn, rows.compactMap { Self.delivery($0).flatMap { GatewayEvents.delivery($0, now: now) } })
    }

    /// Inserts `events` (pending, due now) in the current transaction, in their order: one statement for one event,
    /// one set-based statement (`PostgresSetQueries.insertEvents`) for several. Called after the transaction changed
    /// a row, as `insertEvent`.
    func insertEvents(_ conn: PostgresConnection, _ events: [EventRecord]) async throws {
        guard events.count > 1 else { return try await insertEvent(conn, events.first) }
        let records = events.enumerated().map { PostgresSetQueries.eventRecord($0.element, n: $0.offset) }
        try await run(conn, PostgresSetQueries.insertEvents, [.text(String(decoding: JSON.serialize(.array(records)), as: UTF8.self))])
    }

    /// Inserts one event (pending, due now) in the current transaction: the only SQL the events of §8 add to
    /// the state-changing methods.
    ///
    /// Always called after the transaction has changed a row (every event follows an `UPDATE … RETURNING`
    /// that returned it), so the transaction has its transaction id before its event draws a `position`:
    /// `settledEventPosition` relies on that.
    func insertEvent(_ conn: PostgresConnection, _ event: EventRecord?) async throws {
        guard let event else { return }
        try await run(conn, Self.eventSQL.insert, EventQueries.insertBinds(event))
    }

    // The claim stays PostgreSQL's own: instances claiming at once take disjoint rows (`FOR UPDATE SKIP LOCKED` in
    // an `UPDATE … FROM`) and each names itself in `leased_by`; SQLite's one writer needs neither (see `EventQueries`).
    public func claimEvents(app: String, now: Int64, leaseUntil: Int64, limit: Int) async throws -> [ClaimedEvent] {
        // One statement, in autocommit (one round trip where BEGIN … COMMIT took three).
        try await autocommit { [self] conn in
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

    /// Writes a webhook attempt's outcome. Outcomes that arrive while a group is being written go in the next one
    /// together (#47): one `UPDATE … FROM jsonb_to_recordset` for the whole group, in autocommit, where each outcome
    /// took a transaction of its own (three round trips). The lease generation still guards each row.
    public func completeEvent(_ claim: ClaimedEvent, outcome: EventOutcome, now: Int64) async throws -> Bool {
        try checkOpen()
        return try await withCheckedThrowingContinuation { continuation in
            if eventCompletions.enqueue(EventCompletionJob(claim: claim, outcome: outcome, continuation: continuation)) {
                Task { await self.writeEventCompletions() }
            }
        }
    }

    /// Writes the queued event outcomes, all that are queued at a time in one statement, until none are left; if a
    /// group's statement fails, each outcome is written alone, so one outcome's failure never fails another.
    func writeEventCompletions() async {
        while let jobs = eventCompletions.takeAll() {
            do {
                let current = try await read { [self] conn in
                    Set(try await run(conn, PostgresSetQueries.completeEvents, [PostgresSetQueries.eventOutcomes(jobs)])
                        .compactMap { $0.makeRandomAccess().text(0) })
                }
                // Written when its own lease (id and generation) was current: a stale outcome of an event whose
                // current outcome is in the same group did not write.
                for job in jobs { job.continuation.resume(returning: current.contains("\(job.claim.id) \(job.claim.generation)")) }
            } catch {
                for job in jobs {
                    let (sql, binds) = Self.eventSQL.complete(job.claim, job.outcome)
                    do {
                        job.continuation.resume(returning: try await read { [self] conn in try await !run(conn, sql, binds).isEmpty })
                    } catch {
                        job.continuation.resume(throwing: error)
                    }
                }
            }
        }
    }

    /// The events of `app` in position order, only up to the settled position: positions are drawn when an
    /// event is inserted, not when its transaction commits, so a later position can be visible while an
    /// earlier one is still being written, and a reader paging with `after=` would step over the earlier one.
    public func events(app: String, after: String?, since: Int64, limit: Int) async throws -> [EventRecord]? {
        try await read { [self] conn -> [EventRecord]? in
            var position: Int64 = 0
            if let after {
                guard let found = try await run(conn, Self.eventSQL.position, [.text(app), .text(after)]).first?.makeRandomAccess().int(0)
                else { return nil }
                position = found
            }
            let settled = try await settledEventPosition(conn)
            return try await run(conn, Self.eventSQL.page, [.text(app), .int(position), .int(settled), .int(since), .int(limit)])
                .compactMap { GatewayRows.event($0.makeRandomAccess()) }
        }
    }

    public func dashboard(now: Int64) async throws -> DashboardSnapshot {
        let dayAgo = now - 86_400_000
        // Instances are live by the clock their heartbeat writes `last_seen` with, whatever `now` says.
        let liveSince = options.clock.wall().milliseconds - options.heartbeat.milliseconds * 3
        return try await read { [self] conn -> DashboardSnapshot in
            let q = Self.dashboardSQL
            var tally = DashboardTally()
            // Deliveries created in the last 24 hours by current state and hour (0: the last hour).
            for row in try await run(conn, q.hourly, [.int(now), .int(dayAgo)]) { tally.hourly(row.makeRandomAccess()) }
            for row in try await run(conn, q.answers, [.int(dayAgo)]) { tally.answer(row.makeRandomAccess()) }
            for row in try await run(conn, q.dayTotals, [.int(dayAgo)]) { tally.dayTotals(row.makeRandomAccess()) }
            for row in try await run(conn, q.reports, []) { tally.report(row.makeRandomAccess()) }
            // Queued deliveries, and those of them under a live lease, per app and per instance.
            for row in try await run(conn, q.queued, [.int(now)]) { tally.queued(row.makeRandomAccess()) }
            for row in try await run(conn, q.devices, []) { tally.devices(row.makeRandomAccess()) }
            // The apps seen above (devices, queued or last-day deliveries, reports): no scan of every event for others.
            for (sql, binds) in q.events(apps: tally.appNames, now: now) {
                for row in try await run(conn, sql, binds) { tally.events(row.makeRandomAccess()) }
            }
            // PostgreSQL's own: several instances share the database, each with its row in `instances`.
            let instances = try await conn.rows("""
                SELECT instance_id, COALESCE(name, instance_id) AS name, started_at FROM instances
                WHERE last_seen >= \(liveSince) OR instance_id = \(instanceID) ORDER BY started_at, instance_id
                """, logger: logger).map { row -> DashboardSnapshot.Instance in
                let r = row.makeRandomAccess()
                let id = try r["instance_id"].decode(String.self)
                return DashboardSnapshot.Instance(name: try r["name"].decode(String.self), startedAt: try r["started_at"].decode(Int64.self),
                                                  leasedDeliveries: tally.leasedDeliveriesBy[id] ?? 0, leasedEvents: tally.leasedEventsBy[id] ?? 0)
            }
            return DashboardSnapshot(apps: tally.apps, instances: instances, takenAt: now)
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
