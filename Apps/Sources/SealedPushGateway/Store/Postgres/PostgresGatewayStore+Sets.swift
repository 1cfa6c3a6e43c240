import PostgresNIO
import SealedPushWire

/// PostgreSQL's set-based outcome writes (#47): a group of attempt outcomes in a constant number of statements,
/// whatever its size — the rows read and locked in one, every row written in one, every event inserted in one —
/// where writing them one by one took three round trips per delivery. The state machine still runs in Swift, per
/// row, on the row read and locked in the same transaction: lease generations, forward-only states, the 410 rule
/// and the pause are decided exactly as before (`DeliveryStateMachine.complete`).
enum PostgresSetQueries {
    /// The group's rows, locked in delivery-id order (two instances' groups never wait on each other in a cycle),
    /// as `GatewayRows.leasedDelivery` reads them (binds: the ids, `text[]`).
    static let completeRead = """
        SELECT \(GatewayRows.deliveryColumns), lease_generation, cancel_reason FROM deliveries
        WHERE delivery_id = ANY($1::text[]) ORDER BY delivery_id FOR UPDATE
        """

    /// Every row the state machine decided, as one JSON array of `completeWriteRecord` objects (binds: the array).
    static let completeWrite = """
        UPDATE deliveries AS t SET state = v.state, attempts = v.attempts, apns_status = v.apns_status, reason = v.reason,
            updated_at = v.updated_at, next_attempt_at = v.next_attempt_at, accepted_at = v.accepted_at, seq = v.seq,
            platform_id = v.platform_id, lease_until = NULL, leased_by = NULL, cancel_reason = NULL,
            payload = CASE WHEN v.drops THEN \(SQLDialect.postgres.emptyBytes) ELSE t.payload END
        FROM jsonb_to_recordset($1::jsonb) AS v(delivery_id text, state text, attempts integer, apns_status integer, reason text,
            updated_at bigint, next_attempt_at bigint, accepted_at bigint, seq bigint, platform_id text, drops boolean)
        WHERE t.delivery_id = v.delivery_id
        """

    /// Every event, pending and due at once, in the array's order (their positions follow it): one JSON array of
    /// `eventRecord` objects (binds: the array).
    static let insertEvents = """
        INSERT INTO events (id, app, type, created_at, body, next_attempt_at)
        SELECT v.id, v.app, v.type, v.created_at, v.body, v.created_at
        FROM jsonb_to_recordset($1::jsonb) AS v(n integer, id text, app text, type text, created_at bigint, body text)
        ORDER BY v.n
        """

    /// Writes a group of webhook attempts' outcomes (binds: a JSON array of `eventOutcomes`' objects), each only while
    /// its lease is current (the generation it was claimed under, still pending), as `EventQueries`' four statements
    /// do one by one: `ack` acknowledged (an attempt counted), `retry` due again at `at` (counted), `drop` dropped,
    /// `back` handed back as it was. Returns the ids written with the generation that wrote each (a stale outcome of
    /// the same event in the group matches no row).
    static let completeEvents = """
        UPDATE events AS e SET
            state = CASE v.kind WHEN 'ack' THEN 'acknowledged' WHEN 'drop' THEN 'dropped' ELSE e.state END,
            attempts = e.attempts + CASE WHEN v.kind IN ('ack', 'retry') THEN 1 ELSE 0 END,
            next_attempt_at = CASE WHEN v.kind = 'retry' THEN v.at ELSE e.next_attempt_at END,
            lease_until = NULL, leased_by = NULL
        FROM jsonb_to_recordset($1::jsonb) AS v(id text, generation bigint, kind text, at bigint)
        WHERE e.id = v.id AND e.lease_generation = v.generation AND e.state = 'pending'
        RETURNING e.id || ' ' || v.generation
        """

    /// The bind of `completeEvents` for `jobs`.
    static func eventOutcomes(_ jobs: [EventCompletionJob]) -> SQLValue {
        let records: [JSONValue] = jobs.map { job in
            let (kind, at): (String, Int64?) = switch job.outcome {
            case .acknowledged: ("ack", nil)
            case let .retry(at): ("retry", at)
            case .dropped: ("drop", nil)
            case .handBack: ("back", nil)
            }
            return .object(JSONObject([("id", .string(job.claim.id)), ("generation", .int(job.claim.generation)), ("kind", .string(kind)),
                                       ("at", at.map { .int($0) } ?? .null)]))
        }
        return .text(String(decoding: JSON.serialize(.array(records)), as: UTF8.self))
    }

    /// One row of `completeWrite`.
    static func completeWriteRecord(_ row: DeliveryRecord, dropsPayload: Bool) -> JSONValue {
        .object(JSONObject([
            ("delivery_id", .string(row.deliveryID)), ("state", .string(row.state.rawValue)), ("attempts", .int(Int64(row.attempts))),
            ("apns_status", row.apnsStatus.map { .int(Int64($0)) } ?? .null), ("reason", row.reason.map { .string($0) } ?? .null),
            ("updated_at", .int(row.updatedAt)), ("next_attempt_at", row.nextAttemptAt.map { .int($0) } ?? .null),
            ("accepted_at", row.acceptedAt.map { .int($0) } ?? .null), ("seq", .int(row.seq)),
            ("platform_id", row.platformID.map { .string($0) } ?? .null), ("drops", .bool(dropsPayload)),
        ]))
    }

    /// One row of `insertEvents`, the `n`th of its statement.
    static func eventRecord(_ event: EventRecord, n: Int) -> JSONValue {
        .object(JSONObject([
            ("n", .int(Int64(n))), ("id", .string(event.id)), ("app", .string(event.app)), ("type", .string(event.type.rawValue)),
            ("created_at", .int(event.createdAt)), ("body", .string(String(decoding: event.body, as: UTF8.self))),
        ]))
    }
}

extension PostgresGatewayStore {
    /// A group of outcomes in the caller's transaction, in a constant number of statements (`PostgresSetQueries`);
    /// a device to unregister and a pause (rare) take statements of their own. The states that landed, in the
    /// jobs' order. The group holds each delivery once (`writeCompletions` sends a group with a delivery twice
    /// through `complete` one by one, so that the second outcome reads the first's row).
    func completeAll(_ conn: PostgresConnection, _ jobs: [CompletionJob]) async throws -> [DeliveryState?] {
        let rows = try await run(conn, PostgresSetQueries.completeRead, [.texts(jobs.map(\.claim.deliveryID))])
        var current: [String: LeasedDeliveryRow] = [:]
        for row in rows {
            if let leased = GatewayRows.leasedDelivery(row.makeRandomAccess()) { current[leased.record.deliveryID] = leased }
        }
        var writes: [JSONValue] = []
        var events: [EventRecord] = []
        var states: [DeliveryState?] = []
        states.reserveCapacity(jobs.count)
        for job in jobs {
            let change = DeliveryStateMachine.complete(current[job.claim.deliveryID], claim: job.claim, outcome: job.outcome,
                                                       unregisteredAt: job.unregisteredAt, now: job.now)
            states.append(change.landedState)
            guard let row = change.row else { continue }
            writes.append(PostgresSetQueries.completeWriteRecord(row, dropsPayload: change.dropsPayload))
            events += change.events
            if let gone = change.unregister {
                let devices = try await run(conn, Self.queries.unregisterDevices, [
                    .int(gone.at), .text(gone.reason), .int(gone.at), .text(gone.app), .text(gone.platform.environmentColumn(gone.environment)),
                    .text(gone.address), .int(gone.registeredBefore),
                ]).compactMap(Self.device)
                events += devices.map { GatewayEvents.deviceUnregistered($0, now: gone.at) }
            }
            // The app's other queued deliveries wait for the same reason (gateway v1 §6).
            if change.pausesApp { try await run(conn, Self.queries.pauseApp, [.text(row.app), .text(row.platform.rawValue)]) }
        }
        if !writes.isEmpty {
            try await run(conn, PostgresSetQueries.completeWrite, [.text(String(decoding: JSON.serialize(.array(writes)), as: UTF8.self))])
        }
        // After the rows changed (the transaction has its id before its events draw their positions).
        try await insertEvents(conn, events)
        return states
    }
}

/// A webhook attempt's outcome waiting for the PostgreSQL store's next group of event outcomes, and who waits for it.
struct EventCompletionJob: Sendable {
    let claim: ClaimedEvent
    let outcome: EventOutcome
    let continuation: CheckedContinuation<Bool, any Error>
}
