import PostgresNIO
import SealedPushWire

/// Mailbox v1 on PostgreSQL: `MailboxQueries` in its dialect, the fetched row locked (`FOR UPDATE OF m`) so that
/// instances fetching one handle at once count each fetch. A deleted envelope's tuple is gone from every later
/// snapshot and backup (`pg_dump`); its pages are reclaimed by (auto)vacuum.
extension PostgresGatewayStore: GatewayMailboxStore {
    /// The mailbox's statements in PostgreSQL's dialect.
    static let mailboxSQL = MailboxQueries(.postgres)

    /// The mailbox rows and envelopes of `messages`' mailbox deliveries, in the caller's transaction.
    func insertMailboxRows(_ conn: PostgresConnection, _ messages: [NewMessage]) async throws {
        for m in messages {
            for d in m.deliveries {
                guard let entry = d.mailbox else { continue }
                let binds = MailboxQueries.insertBinds(m, d, entry)
                try await run(conn, Self.mailboxSQL.insert, binds.row)
                try await run(conn, Self.mailboxSQL.insertEnvelope, binds.envelope)
            }
        }
    }

    /// A receipt confirmed a delivery: a mailbox one is collected, its envelope deleted (caller's transaction).
    func collectMailbox(_ conn: PostgresConnection, deliveryID: String, now: Int64) async throws {
        if try await !run(conn, Self.mailboxSQL.collectOnReceipt, [.int(now), .text(deliveryID)]).isEmpty {
            try await run(conn, Self.mailboxSQL.deleteEnvelope, [.text(deliveryID)])
        }
    }

    public func mailboxFetch(deliveryID: String, tokenSHA256: [UInt8], now: Int64, graces: [String: Int64]) async throws -> MailboxFetchOutcome {
        try await transaction { [self] conn in
            let row = try await run(conn, Self.mailboxSQL.fetchRead, [.text(deliveryID)]).first.flatMap { MailboxRules.row($0.makeRandomAccess()) }
            switch MailboxRules.decide(row, tokenSHA256: tokenSHA256, now: now, graceMilliseconds: MailboxRules.grace(of: row?.app, in: graces)) {
            case .unknown: return .unknown
            case let .gone(reason, newly):
                if newly {
                    try await run(conn, Self.mailboxSQL.markGone, [.text(reason.rawValue), .int(now), .text(deliveryID)])
                    try await run(conn, Self.mailboxSQL.deleteEnvelope, [.text(deliveryID)])
                }
                return .gone(reason)
            case let .hand(first):
                guard let row, let envelope = try await run(conn, Self.mailboxSQL.envelope, [.text(deliveryID)]).first?.makeRandomAccess().bytes(0) else {
                    try await run(conn, Self.mailboxSQL.markGone, [.text(MailboxGone.collected.rawValue), .int(now), .text(deliveryID)])
                    return .gone(.collected)
                }
                try await run(conn, Self.mailboxSQL.countFetch, [.int(now), .text(deliveryID)])
                if first { try await insertDeliveryEvents(conn, try await run(conn, Self.mailboxSQL.markFetched, [.int(now), .text(deliveryID)]), now: now) }
                return .envelope(envelope, messageID: row.messageID, expiresAt: row.expiresAt, app: row.app, first: first)
            }
        }
    }

    public func putMailboxChallenge(id: String, app: String, deviceID: String, answerSHA256: [UInt8], expiresAt: Int64) async throws {
        try await transaction { [self] conn in
            try await run(conn, Self.mailboxSQL.insertChallenge, [.text(id), .text(app), .text(deviceID), .bytes(answerSHA256), .int(expiresAt)])
            return ()
        }
    }

    public func mailboxList(challengeID: String, answerSHA256: [UInt8], now: Int64, graces: [String: Int64],
                            limit: Int) async throws -> [MailboxListEntry]? {
        let tokens = (0..<limit).map { _ in MailboxHandle.make(deliveryID: "x")!.token }
        return try await transaction { [self] conn -> [MailboxListEntry]? in
            guard let c = try await run(conn, Self.mailboxSQL.takeChallenge, [.text(challengeID)]).first?.makeRandomAccess(),
                  let app = c.text(0), let device = c.text(1), let expected = c.bytes(2), let expiresAt = c.int(3)
            else { return nil }
            guard MailboxRules.answerMatches(expected: expected, given: answerSHA256), expiresAt > now else { return nil }
            let rows = try await run(conn, Self.mailboxSQL.waiting, [.text(app), .text(device), .int(now), .int(now - MailboxRules.grace(of: app, in: graces)), .int(limit)])
            var out: [MailboxListEntry] = []
            for (pgRow, token) in zip(rows, tokens) {
                let row = pgRow.makeRandomAccess()
                guard let id = row.text(0), let message = row.text(1), let created = row.int(2), let expires = row.int(3),
                      let handle = MailboxHandle(deliveryID: id, token: token) else { continue }
                try await run(conn, Self.mailboxSQL.rehandle, [.bytes(Digests.sha256(Array(token.utf8))), .text(id)])
                out.append(MailboxListEntry(handle: handle.description, messageID: message, createdAt: created, expiresAt: expires))
            }
            return out
        }
    }

    public func mailboxRetract(app: String, messageID: String, now: Int64) async throws -> [MailboxRetraction] {
        try await transaction { [self] conn in
            let ids = try await run(conn, Self.mailboxSQL.retract, [.int(now), .text(app), .text(messageID)]).compactMap { $0.makeRandomAccess().text(0) }
            var out: [MailboxRetraction] = []
            for id in ids.sorted() {
                try await run(conn, Self.mailboxSQL.deleteEnvelope, [.text(id)])
                let accepted = try await run(conn, Self.mailboxSQL.acceptedAt, [.text(id)]).first?.makeRandomAccess().int(0) != nil
                out.append(MailboxRetraction(deliveryID: id, pushAccepted: accepted))
            }
            return out
        }
    }

    public func mailboxSweep(now: Int64, graces: [String: Int64], rowsBefore: Int64) async throws -> Int {
        try await transaction { [self] conn in
            try await run(conn, Self.mailboxSQL.expire, [.int(now), .int(now)])
            let apps = try await run(conn, "SELECT DISTINCT app FROM mailbox WHERE gone IS NULL AND fetched_at IS NOT NULL", [])
                .compactMap { $0.makeRandomAccess().text(0) }
            for app in apps {
                try await run(conn, Self.mailboxSQL.collectByGrace, [.int(now), .text(app), .int(now - MailboxRules.grace(of: app, in: graces))])
            }
            let n = try await run(conn, Self.mailboxSQL.deleteGoneEnvelopes, []).count
            try await run(conn, Self.mailboxSQL.pruneRows, [.int(rowsBefore)])
            try await run(conn, Self.mailboxSQL.pruneChallenges, [.int(now)])
            return n
        }
    }

    public func queueRetractionPush(of deliveryID: String, pushID: String, apnsID: String, payload: [UInt8], handleSHA256: [UInt8],
                                    now: Int64) async throws -> Bool {
        try await transaction { [self] conn in
            let rows = try await run(conn, Self.mailboxSQL.retractionPush, [.text(pushID), .bytes(payload), .text(apnsID), .int(now), .int(now),
                                                                            .int(now), .text(deliveryID)])
            guard !rows.isEmpty else { return false }
            try await run(conn, Self.mailboxSQL.setRetractionHandle, [.bytes(handleSHA256), .text(deliveryID)])
            return true
        }
    }

    public func mailboxDeliveries(messageID: String) async throws -> [String: Int64?] {
        try await transaction { [self] conn in
            var out: [String: Int64?] = [:]
            for pgRow in try await run(conn, Self.mailboxSQL.ofMessage, [.text(messageID)]) {
                let row = pgRow.makeRandomAccess()
                if let id = row.text(0) { out[id] = row.int(1) }
            }
            return out
        }
    }
}
