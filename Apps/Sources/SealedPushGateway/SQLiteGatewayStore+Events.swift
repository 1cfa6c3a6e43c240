import GRDB
#if canImport(Glibc)
import Glibc
#endif

// The webhook events (gateway v1 §8) and the dashboard's numbers on SQLite. The events themselves are written
// by the state-changing methods in SQLiteGatewayStore.swift (`insertEvent`); these read and lease them.
extension SQLiteGatewayStore {
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
        try await transaction { db in
            let key: [SQLiteValue] = [.text(claim.id), .integer(Int(claim.generation))]
            let sql: String
            var binds: [SQLiteValue] = []
            switch outcome {
            case .acknowledged:
                sql = "UPDATE events SET state = 'acknowledged', attempts = attempts + 1, lease_until = NULL"
            case let .retry(at):
                sql = "UPDATE events SET attempts = attempts + 1, next_attempt_at = ?, lease_until = NULL"
                binds = [.integer(Int(at))]
            case .dropped:
                sql = "UPDATE events SET state = 'dropped', lease_until = NULL"
            case .handBack:
                sql = "UPDATE events SET lease_until = NULL"
            }
            return try !db.rows(sql + " WHERE id = ? AND lease_generation = ? AND state = 'pending' RETURNING 1 AS k", binds + key).isEmpty
        }
    }

    public func events(app: String, after: String?, since: Int64, limit: Int) async throws -> [EventRecord]? {
        try await read { db throws -> [EventRecord]? in
            var position = 0
            if let after {
                guard let found = try db.rows("SELECT position FROM events WHERE app = ? AND id = ?", [.text(app), .text(after)])
                    .first?.column("position")?.integer
                else { return nil }
                position = found
            }
            return try db.rows("""
                SELECT id, app, type, created_at, body FROM events WHERE app = ? AND position > ? AND created_at >= ? ORDER BY position LIMIT ?
                """, [.text(app), .integer(position), .integer(Int(since)), .integer(limit)]).compactMap { row in
                guard let id = row.column("id")?.string, let app = row.column("app")?.string,
                      let type = row.column("type")?.string.flatMap(GatewayEventType.init(rawValue:)),
                      let created = row.column("created_at")?.integer, let body = row.column("body")?.string
                else { return nil }
                return EventRecord(id: id, app: app, type: type, createdAt: Int64(created), body: Array(body.utf8))
            }
        }
    }

    public func dashboard(now: Int64) async throws -> DashboardSnapshot {
        let dayAgo = Int(now - 86_400_000)
        let t = Int(now)
        let openedAt = self.openedAt
        return try await read { db throws -> DashboardSnapshot in
            var apps: [String: DashboardSnapshot.App] = [:]
            func update(_ app: String, _ change: (inout DashboardSnapshot.App) -> Void) {
                var a = apps[app] ?? DashboardSnapshot.App(app: app)
                change(&a)
                apps[app] = a
            }
            // Deliveries created in the last 24 hours by current state and hour (0: the last hour).
            for row in try db.rows("""
                SELECT app, state, (? - created_at) / 3600000 AS h, COUNT(*) AS n FROM deliveries WHERE created_at > ? GROUP BY app, state, h
                """, [.integer(t), .integer(dayAgo)]) {
                guard let app = row.column("app")?.string, let state = row.column("state")?.string, let n = row.column("n")?.integer else { continue }
                let hour = min(23, max(0, row.column("h")?.integer ?? 0))
                update(app) { a in
                    a.hourly[hour][state, default: 0] += n
                    a.lastDay[state, default: 0] += n
                    if hour == 0 { a.lastHour[state, default: 0] += n }
                }
            }
            for row in try db.rows("""
                SELECT app, platform, apns_status, COALESCE(reason, '') AS reason, COUNT(*) AS n FROM deliveries
                WHERE created_at > ? AND apns_status IS NOT NULL GROUP BY app, platform, apns_status, reason ORDER BY n DESC
                """, [.integer(dayAgo)]) {
                guard let app = row.column("app")?.string, let status = row.column("apns_status")?.integer, let n = row.column("n")?.integer else { continue }
                let platform = row.column("platform")?.string.flatMap(PushPlatform.init(rawValue:)) ?? .apns
                let reason = (200...202).contains(status) ? "" : row.column("reason")?.string ?? ""
                update(app) { $0.addAnswer(platform: platform, status: status, reason: reason, count: n) }
            }
            for row in try db.rows("""
                SELECT app, SUM(accepted_at IS NOT NULL) AS accepted, SUM(state = 'delivered') AS delivered FROM deliveries
                WHERE created_at > ? GROUP BY app
                """, [.integer(dayAgo)]) {
                guard let app = row.column("app")?.string else { continue }
                update(app) { a in
                    a.acceptedLastDay = row.column("accepted")?.integer ?? 0
                    a.deliveredLastDay = row.column("delivered")?.integer ?? 0
                }
            }
            for row in try db.rows("SELECT app, reason, kid, count, last_at FROM reports ORDER BY app, count DESC, kid") {
                guard let app = row.column("app")?.string, let reason = row.column("reason")?.string, let kid = row.column("kid")?.string,
                      let count = row.column("count")?.integer, let at = row.column("last_at")?.integer else { continue }
                update(app) { $0.reports.append(.init(reason: reason, kid: kid, count: count, lastAt: Int64(at))) }
            }
            for row in try db.rows("""
                SELECT app, COUNT(*) AS n, MIN(created_at) AS oldest, SUM(lease_until IS NOT NULL AND lease_until >= ?) AS leased
                FROM deliveries WHERE state = 'queued' GROUP BY app
                """, [.integer(t)]) {
                guard let app = row.column("app")?.string else { continue }
                update(app) { a in
                    a.queued = row.column("n")?.integer ?? 0
                    a.oldestQueuedAt = row.column("oldest")?.integer.map(Int64.init)
                    a.leasedDeliveries = row.column("leased")?.integer ?? 0
                }
            }
            for row in try db.rows("SELECT app, state, COUNT(*) AS n FROM devices GROUP BY app, state") {
                guard let app = row.column("app")?.string, let n = row.column("n")?.integer else { continue }
                let unregistered = row.column("state")?.string == DeviceState.unregistered.rawValue
                update(app) { a in if unregistered { a.devicesUnregistered += n } else { a.devicesActive += n } }
            }
            var leasedEvents = 0
            // The apps seen above (devices, queued or last-day deliveries, reports): no scan of every event for others.
            for app in apps.keys.sorted() {
                for row in try db.rows("""
                    SELECT state, COUNT(*) AS n, SUM(lease_until IS NOT NULL AND lease_until >= ?) AS leased FROM events
                    WHERE app = ? AND state IN ('pending', 'dropped') GROUP BY state
                    """, [.integer(t), .text(app)]) {
                    let n = row.column("n")?.integer ?? 0
                    let pending = row.column("state")?.string == "pending"
                    if pending { leasedEvents += row.column("leased")?.integer ?? 0 }
                    update(app) { a in if pending { a.eventsPending = n } else { a.eventsDropped = n } }
                }
            }
            let instance = DashboardSnapshot.Instance(
                name: Self.hostName() + ":" + String(getpid()), startedAt: openedAt,
                leasedDeliveries: apps.values.reduce(0) { $0 + $1.leasedDeliveries }, leasedEvents: leasedEvents)
            return DashboardSnapshot(apps: apps, instances: [instance], takenAt: now)
        }
    }

    /// This machine's host name.
    static func hostName() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "localhost" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
