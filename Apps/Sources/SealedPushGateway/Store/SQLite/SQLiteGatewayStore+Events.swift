import GRDB
#if canImport(Glibc)
import Glibc
#endif

// The webhook events (gateway v1 §8) and the dashboard's numbers on SQLite. The events themselves are written
// by the state-changing methods in SQLiteGatewayStore.swift (`insertEvent`); these read and lease them, with the
// shared statements (`EventQueries`, `DashboardQueries`) but for the claim, which is SQLite's own (see `EventQueries`).
extension SQLiteGatewayStore {
    // The claim stays SQLite's own: its one writer picks the due rows without row locks and leases them unnamed;
    // PostgreSQL's picks them `FOR UPDATE SKIP LOCKED` and names its instance (see `EventQueries`).
    public func claimEvents(app: String, now: Int64, leaseUntil: Int64, limit: Int) async throws -> [ClaimedEvent] {
        try await transaction { db in
            try db.rows("""
                UPDATE events SET lease_until = ?, lease_generation = lease_generation + 1
                WHERE position IN (SELECT position FROM events WHERE app = ? AND state = 'pending' AND next_attempt_at <= ?
                                   AND (lease_until IS NULL OR lease_until < ?) ORDER BY position LIMIT ?)
                RETURNING id, app, created_at, body, attempts, lease_generation
                """, [.integer(Int(leaseUntil)), .text(app), .integer(Int(now)), .integer(Int(now)), .integer(limit)]).compactMap { row in
                guard let id = row.column("id")?.string, let app = row.column("app")?.string, let created = row.column("created_at")?.integer,
                      let body = row.column("body")?.string, let attempts = row.column("attempts")?.integer,
                      let generation = row.column("lease_generation")?.integer
                else { return nil }
                return ClaimedEvent(id: id, app: app, createdAt: Int64(created), body: Array(body.utf8), attempts: attempts, generation: Int64(generation))
            }.sorted { $0.createdAt < $1.createdAt }
        }
    }

    public func completeEvent(_ claim: ClaimedEvent, outcome: EventOutcome, now: Int64) async throws -> Bool {
        let (sql, binds) = Self.eventSQL.complete(claim, outcome)
        return try await transaction { db in try !db.run(sql, binds).isEmpty }
    }

    public func events(app: String, after: String?, since: Int64, limit: Int) async throws -> [EventRecord]? {
        try await read { db throws -> [EventRecord]? in
            var position: Int64 = 0
            if let after {
                guard let found = try db.run(Self.eventSQL.position, [.text(app), .text(after)]).first?.int(0) else { return nil }
                position = found
            }
            // Every position up to the last is settled: the one writer commits events in the order it draws their positions.
            return try db.run(Self.eventSQL.page, [.text(app), .int(position), .int(Int64.max), .int(since), .int(limit)])
                .compactMap { GatewayRows.event($0) }
        }
    }

    public func dashboard(now: Int64) async throws -> DashboardSnapshot {
        let dayAgo = now - 86_400_000
        let openedAt = self.openedAt
        return try await read { db throws -> DashboardSnapshot in
            let q = Self.dashboardSQL
            var tally = DashboardTally()
            // Deliveries created in the last 24 hours by current state and hour (0: the last hour).
            for row in try db.run(q.hourly, [.int(now), .int(dayAgo)]) { tally.hourly(row) }
            for row in try db.run(q.answers, [.int(dayAgo)]) { tally.answer(row) }
            for row in try db.run(q.dayTotals, [.int(dayAgo)]) { tally.dayTotals(row) }
            for row in try db.run(q.reports, []) { tally.report(row) }
            for row in try db.run(q.queued, [.int(now)]) { tally.queued(row) }
            for row in try db.run(q.devices, []) { tally.devices(row) }
            // The apps seen above (devices, queued or last-day deliveries, reports): no scan of every event for others.
            for (sql, binds) in q.events(apps: tally.appNames, now: now) {
                for row in try db.run(sql, binds, cached: false) { tally.events(row) }
            }
            // The one instance holds every lease (`leased_by` stays NULL on SQLite).
            let instance = DashboardSnapshot.Instance(
                name: Self.hostName() + ":" + String(getpid()), startedAt: openedAt,
                leasedDeliveries: tally.apps.values.reduce(0) { $0 + $1.leasedDeliveries }, leasedEvents: tally.leasedEvents)
            return DashboardSnapshot(apps: tally.apps, instances: [instance], takenAt: now)
        }
    }

    /// This machine's host name.
    static func hostName() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "localhost" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
