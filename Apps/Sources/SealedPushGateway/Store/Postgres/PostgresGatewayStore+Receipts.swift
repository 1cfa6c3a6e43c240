import PostgresNIO
import SealedPushWire

/// PostgreSQL's receipts in sets (#47): receipts that arrive while a transaction of receipts is being written go in
/// the next one together, in a constant number of statements whatever their number: the named deliveries read and
/// locked in one, the unknown message ids told apart in one (only when some receipt matched nothing), every delivery
/// moved to `delivered` and its mailbox envelope collected in one, every `revealed_at` set in one (only when some
/// receipt says revealed), every event inserted in one. One receipt alone took five statements and its own
/// transaction; the rules are unchanged (receipts v1 §3, reveal v1 §8, mailbox v1 §3).
enum PostgresReceiptQueries {
    /// The deliveries the receipts name, locked in delivery-id order (binds: message ids, `text[]`; SHA-256 of their
    /// tokens in hex, `text[]`, pairwise): `delivery_id, app, state, platform, message_id, receipt hex`. Found through
    /// `deliveries_receipt` by the hash itself: only SHA-256 of a random 32-byte token is stored, so how long the
    /// lookup takes says nothing that helps forge a token.
    static let read = """
        SELECT d.delivery_id, d.app, d.state, d.platform, d.message_id, encode(d.receipt_sha256, 'hex') FROM deliveries d
        JOIN (SELECT DISTINCT * FROM unnest($1::text[], $2::text[]) AS r(message_id, sha)) r
            ON d.message_id = r.message_id AND d.receipt_sha256 = decode(r.sha, 'hex')
        ORDER BY d.delivery_id FOR UPDATE OF d
        """

    /// Which of the message ids have any delivery (binds: the ids, `text[]`).
    static let known = "SELECT DISTINCT message_id FROM deliveries WHERE message_id = ANY($1::text[])"

    /// Moves each delivery to `delivered` at its receipt's time, and collects its mailbox envelope if it has one
    /// (the `mailbox` row marked, the envelope's bytes deleted), returning `deliveryColumns` (binds: a JSON array of
    /// `{delivery_id, at}`).
    static let deliver = """
        WITH v AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS v(delivery_id text, at bigint)),
        d AS (
            UPDATE deliveries AS t SET state = 'delivered', delivered_at = v.at, updated_at = v.at, next_attempt_at = NULL,
                seq = t.seq + 1, payload = \(SQLDialect.postgres.emptyBytes), cancel_reason = NULL
            FROM v WHERE t.delivery_id = v.delivery_id RETURNING t.*
        ),
        c AS (
            UPDATE mailbox AS m SET gone = 'collected', gone_at = v.at FROM v
            WHERE m.delivery_id = v.delivery_id AND m.gone IS NULL RETURNING m.delivery_id
        ),
        e AS (DELETE FROM mailbox_envelopes WHERE delivery_id IN (SELECT delivery_id FROM c))
        SELECT \(GatewayRows.deliveryColumns) FROM d ORDER BY delivery_id
        """

    /// Sets `revealed_at` of each delivery that has none yet, returning `deliveryColumns` (binds: as `deliver`).
    static let reveal = """
        WITH u AS (
            UPDATE deliveries AS t SET revealed_at = v.at, updated_at = v.at, seq = t.seq + 1
            FROM jsonb_to_recordset($1::jsonb) AS v(delivery_id text, at bigint)
            WHERE t.delivery_id = v.delivery_id AND t.revealed_at IS NULL RETURNING t.*
        )
        SELECT \(GatewayRows.deliveryColumns) FROM u ORDER BY delivery_id
        """

    /// One `{delivery_id, at}` of `deliver` and `reveal`.
    static func record(_ deliveryID: String, at: Int64) -> JSONValue {
        .object(JSONObject([("delivery_id", .string(deliveryID)), ("at", .int(at))]))
    }

    /// A JSON array bind.
    static func array(_ values: [JSONValue]) -> SQLValue { .text(String(decoding: JSON.serialize(.array(values)), as: UTF8.self)) }
}

/// A receipt waiting for the PostgreSQL store's next transaction of receipts, and who waits for its result.
struct ReceiptJob: Sendable {
    let messageID: String
    let tokenSHA256: [UInt8]
    let revealed: Bool
    let now: Int64
    let continuation: CheckedContinuation<ReceiptResult, any Error>

    /// The token's SHA-256 in lowercase hex, as `PostgresReceiptQueries.read` binds and answers it.
    var hashHex: String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(tokenSHA256.count * 2)
        for byte in tokenSHA256 { out += [digits[Int(byte >> 4)], digits[Int(byte & 0x0f)]] }
        return String(decoding: out, as: UTF8.self)
    }
}

extension PostgresGatewayStore {
    /// The most receipts one transaction takes: a larger backlog is written in several.
    static let receiptGroupLimit = 256

    public func recordReceipt(messageID: String, tokenSHA256: [UInt8], revealed: Bool, now: Int64) async throws -> ReceiptResult {
        try checkOpen()
        return try await withCheckedThrowingContinuation { continuation in
            let job = ReceiptJob(messageID: messageID, tokenSHA256: tokenSHA256, revealed: revealed, now: now, continuation: continuation)
            if receipts.enqueue(job) {
                Task { await self.writeReceipts() }
            }
        }
    }

    /// Writes the queued receipts, up to `receiptGroupLimit` at a time in one transaction, until none are left. If a
    /// group's transaction fails, each of its receipts is written again alone, so one receipt's failure never fails
    /// another.
    func writeReceipts() async {
        while let all = receipts.takeAll() {
            for start in stride(from: 0, to: all.count, by: Self.receiptGroupLimit) {
                let jobs = Array(all[start..<min(start + Self.receiptGroupLimit, all.count)])
                do {
                    let results = try await transaction { [self] conn in try await recordReceipts(conn, jobs) }
                    for (job, result) in zip(jobs, results) { job.continuation.resume(returning: result) }
                } catch {
                    for job in jobs {
                        do {
                            let result = try await transaction { [self] conn in try await recordReceipts(conn, [job]) }
                            job.continuation.resume(returning: result[0])
                        } catch {
                            job.continuation.resume(throwing: error)
                        }
                    }
                }
            }
        }
    }

    /// A group of receipts in the caller's transaction, in a constant number of statements; their results in the
    /// jobs' order. Receipts for one delivery in one group count as a first and repeats, as they would one by one.
    func recordReceipts(_ conn: PostgresConnection, _ jobs: [ReceiptJob]) async throws -> [ReceiptResult] {
        struct Named { let id: String, app: String, state: DeliveryState, platform: PushPlatform }
        let rows = try await run(conn, PostgresReceiptQueries.read, [.texts(jobs.map(\.messageID)), .texts(jobs.map(\.hashHex))])
        var named: [String: Named] = [:]  // by message id + " " + hash
        for row in rows {
            let r = row.makeRandomAccess()
            guard let id = r.text(0), let app = r.text(1), let state = r.text(2).flatMap(DeliveryState.init(rawValue:)),
                  let message = r.text(4), let hash = r.text(5) else { continue }
            named[message + " " + hash] = Named(id: id, app: app, state: state, platform: r.text(3).flatMap(PushPlatform.init(rawValue:)) ?? .apns)
        }
        let unmatched = jobs.filter { named[$0.messageID + " " + $0.hashHex] == nil }.map(\.messageID)
        let known = unmatched.isEmpty ? [] : Set(try await run(conn, PostgresReceiptQueries.known, [.texts(Array(Set(unmatched)))])
            .compactMap { $0.makeRandomAccess().text(0) })

        // The state machine of one receipt, run in the jobs' order: the first receipt of a delivery that is not yet
        // delivered (queued, accepted, fetched, expired, cancelled) delivers it; a repeat changes nothing.
        var delivering: [(id: String, at: Int64)] = [], revealing: [(id: String, at: Int64)] = []
        var delivered = Set<String>(), revealedIDs = Set<String>()
        var results: [ReceiptResult] = []
        results.reserveCapacity(jobs.count)
        for job in jobs {
            guard let d = named[job.messageID + " " + job.hashHex] else {
                results.append(known.contains(job.messageID) ? .wrongToken : .unknownID)
                continue
            }
            var changed = false
            switch d.state {
            case .queued, .accepted, .fetched, .expired, .cancelled:
                if delivered.insert(d.id).inserted {
                    delivering.append((d.id, job.now))
                    changed = true
                }
            default:
                break
            }
            if job.revealed, revealedIDs.insert(d.id).inserted { revealing.append((d.id, job.now)) }
            results.append(.matched(app: d.app, changed: changed, platform: d.platform))
        }

        var events: [EventRecord] = []
        let at = Dictionary(delivering, uniquingKeysWith: { first, _ in first })
        if !delivering.isEmpty {
            let rows = try await run(conn, PostgresReceiptQueries.deliver, [PostgresReceiptQueries.array(delivering.map { PostgresReceiptQueries.record($0.id, at: $0.at) })])
            events += rows.compactMap { row in Self.delivery(row).flatMap { GatewayEvents.delivery($0, now: at[$0.deliveryID] ?? $0.updatedAt) } }
        }
        if !revealing.isEmpty {
            // Reveal v1 §8: the first `revealed` receipt sets revealed_at (delivery.revealed); repeats change nothing.
            let when = Dictionary(revealing, uniquingKeysWith: { first, _ in first })
            let rows = try await run(conn, PostgresReceiptQueries.reveal, [PostgresReceiptQueries.array(revealing.map { PostgresReceiptQueries.record($0.id, at: $0.at) })])
            events += rows.compactMap(Self.delivery).map { GatewayEvents.revealed($0, now: when[$0.deliveryID] ?? $0.updatedAt) }
        }
        try await insertEvents(conn, events)
        return results
    }
}
