import GRDB
#if canImport(Glibc)
import Glibc
#endif
import SealedPushWire

/// Mailbox v1 on SQLite: `MailboxQueries` in its dialect. Envelopes are deleted with `secure_delete` on (their
/// bytes overwritten with zeros in the database file), and a sweep that deleted any truncates the WAL, whose old
/// frames would otherwise keep them until overwritten.
extension SQLiteGatewayStore: GatewayMailboxStore {
    /// The mailbox's statements in SQLite's dialect.
    static let mailboxSQL = MailboxQueries(.sqlite)

    /// Test-only, and only in a debug build: `SEALEDPUSH_TEST_BREAK_MAILBOX_DELETION=1` breaks the deletion on purpose
    /// (no envelope is ever deleted, and a collected delivery's envelope is handed out again), so that the examiner
    /// test of mailbox v1 §8 has a control that recovers the text. A release build never reads the variable.
    static let deletionBrokenForTests: Bool = {
        #if DEBUG
        return getenv("SEALEDPUSH_TEST_BREAK_MAILBOX_DELETION").map { String(cString: $0) } == "1"
        #else
        return false
        #endif
    }()

    /// A mailbox delivery's row and envelope, in the caller's (the message's) transaction.
    func insertMailbox(_ db: Database, _ message: NewMessage, _ d: NewDelivery, _ entry: NewMailboxEntry) throws {
        let binds = MailboxQueries.insertBinds(message, d, entry)
        _ = try db.run(Self.mailboxSQL.insert, binds.row)
        _ = try db.run(Self.mailboxSQL.insertEnvelope, binds.envelope)
    }

    /// A receipt confirmed a delivery: a mailbox one is collected, its envelope deleted (caller's transaction).
    func collectMailbox(_ db: Database, deliveryID: String, now: Int64) throws {
        if try !db.run(Self.mailboxSQL.collectOnReceipt, [.int(now), .text(deliveryID)]).isEmpty, !Self.deletionBrokenForTests {
            _ = try db.run(Self.mailboxSQL.deleteEnvelope, [.text(deliveryID)])
        }
    }

    public func mailboxFetch(deliveryID: String, tokenSHA256: [UInt8], now: Int64, graces: [String: Int64]) async throws -> MailboxFetchOutcome {
        try await transaction { [self] db in
            let row = try db.run(Self.mailboxSQL.fetchRead, [.text(deliveryID)]).first.flatMap(Self.mailboxRow)
            switch MailboxRules.decide(row, tokenSHA256: tokenSHA256, now: now, graceMilliseconds: MailboxRules.grace(of: row?.app, in: graces)) {
            case .unknown: return .unknown
            case let .gone(reason, newly):
                if newly {
                    _ = try db.run(Self.mailboxSQL.markGone, [.text(reason.rawValue), .int(now), .text(deliveryID)])
                    if !Self.deletionBrokenForTests { _ = try db.run(Self.mailboxSQL.deleteEnvelope, [.text(deliveryID)]) }
                }
                if Self.deletionBrokenForTests, reason == .collected, let row,
                   let envelope = try db.run(Self.mailboxSQL.envelope, [.text(deliveryID)]).first?.bytes(0) {
                    return .envelope(envelope, messageID: row.messageID, expiresAt: row.expiresAt, app: row.app, first: false)
                }
                return .gone(reason)
            case let .hand(first):
                guard let row, let envelope = try db.run(Self.mailboxSQL.envelope, [.text(deliveryID)]).first?.bytes(0) else {
                    _ = try db.run(Self.mailboxSQL.markGone, [.text(MailboxGone.collected.rawValue), .int(now), .text(deliveryID)])
                    return .gone(.collected)
                }
                _ = try db.run(Self.mailboxSQL.countFetch, [.int(now), .text(deliveryID)])
                if first { try insertDeliveryEvents(db, try db.run(Self.mailboxSQL.markFetched, [.int(now), .text(deliveryID)]), now: now) }
                return .envelope(envelope, messageID: row.messageID, expiresAt: row.expiresAt, app: row.app, first: first)
            }
        }
    }

    public func putMailboxChallenge(id: String, app: String, deviceID: String, answerSHA256: [UInt8], expiresAt: Int64) async throws {
        try await transaction { db in
            _ = try db.run(Self.mailboxSQL.insertChallenge, [.text(id), .text(app), .text(deviceID), .bytes(answerSHA256), .int(expiresAt)])
        }
    }

    public func mailboxList(challengeID: String, answerSHA256: [UInt8], now: Int64, graces: [String: Int64],
                            limit: Int) async throws -> [MailboxListEntry]? {
        // Tokens drawn before the transaction: its body may run twice (a batch replayed), and must write the same ones.
        let tokens = (0..<limit).map { _ in MailboxHandle.make(deliveryID: "x")!.token }
        return try await transaction { db -> [MailboxListEntry]? in
            guard let c = try db.run(Self.mailboxSQL.takeChallenge, [.text(challengeID)]).first,
                  let app = c.text(0), let device = c.text(1), let expected = c.bytes(2), let expiresAt = c.int(3)
            else { return nil }
            guard MailboxRules.answerMatches(expected: expected, given: answerSHA256), expiresAt > now else { return nil }
            let rows = try db.run(Self.mailboxSQL.waiting, [.text(app), .text(device), .int(now), .int(now - MailboxRules.grace(of: app, in: graces)), .int(limit)])
            var out: [MailboxListEntry] = []
            for (row, token) in zip(rows, tokens) {
                guard let id = row.text(0), let message = row.text(1), let created = row.int(2), let expires = row.int(3),
                      let handle = MailboxHandle(deliveryID: id, token: token) else { continue }
                _ = try db.run(Self.mailboxSQL.rehandle, [.bytes(Digests.sha256(Array(token.utf8))), .text(id)])
                out.append(MailboxListEntry(handle: handle.description, messageID: message, createdAt: created, expiresAt: expires))
            }
            return out
        }
    }

    public func mailboxRetract(app: String, messageID: String, now: Int64) async throws -> [MailboxRetraction] {
        try await transaction { db in
            let ids = try db.run(Self.mailboxSQL.retract, [.int(now), .text(app), .text(messageID)]).compactMap { $0.text(0) }
            return try ids.sorted().map { id in
                _ = try db.run(Self.mailboxSQL.deleteEnvelope, [.text(id)])
                let accepted = try db.run(Self.mailboxSQL.acceptedAt, [.text(id)]).first?.int(0) != nil
                return MailboxRetraction(deliveryID: id, pushAccepted: accepted)
            }
        }
    }

    public func mailboxSweep(now: Int64, graces: [String: Int64], rowsBefore: Int64) async throws -> Int {
        let deleted = try await transaction { db in
            _ = try db.run(Self.mailboxSQL.expire, [.int(now), .int(now)])
            let apps = try db.rows("SELECT DISTINCT app FROM mailbox WHERE gone IS NULL AND fetched_at IS NOT NULL", cached: false).compactMap { $0.text(0) }
            for app in apps {
                _ = try db.run(Self.mailboxSQL.collectByGrace, [.int(now), .text(app), .int(now - MailboxRules.grace(of: app, in: graces))])
            }
            let n = Self.deletionBrokenForTests ? 0 : try db.run(Self.mailboxSQL.deleteGoneEnvelopes, []).count
            _ = try db.run(Self.mailboxSQL.pruneRows, [.int(rowsBefore)])
            _ = try db.run(Self.mailboxSQL.pruneChallenges, [.int(now)])
            return n
        }
        if deleted > 0 { try await truncateWAL() }
        return deleted
    }

    /// Checkpoints the WAL into the database file and truncates it to zero bytes, so that no frame written before
    /// an envelope was deleted still holds it (readers in progress may delay it to the next sweep).
    func truncateWAL() async throws {
        try await pool.writeWithoutTransaction { db in _ = try db.rows("PRAGMA wal_checkpoint(TRUNCATE)", cached: false) }
    }

    public func queueRetractionPush(of deliveryID: String, pushID: String, apnsID: String, payload: [UInt8], handleSHA256: [UInt8],
                                    now: Int64) async throws -> Bool {
        try await transaction { db in
            let rows = try db.run(Self.mailboxSQL.retractionPush, [.text(pushID), .bytes(payload), .text(apnsID), .int(now), .int(now), .int(now),
                                                                  .text(deliveryID)])
            guard !rows.isEmpty else { return false }
            _ = try db.run(Self.mailboxSQL.setRetractionHandle, [.bytes(handleSHA256), .text(deliveryID)])
            return true
        }
    }

    public func mailboxDeliveries(messageID: String) async throws -> [String: Int64?] {
        try await read { db in
            var out: [String: Int64?] = [:]
            for row in try db.run(Self.mailboxSQL.ofMessage, [.text(messageID)]) { if let id = row.text(0) { out[id] = row.int(1) } }
            return out
        }
    }

    static func mailboxRow(_ row: Row) -> MailboxRules.Row? { MailboxRules.row(row) }
}
