import GRDB
public import SealedPushWire
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
public import SealedPushCrypto
import Foundation

/// Creates `path` empty with mode 0600 unless it exists (never through a symbolic link); the error text, or `nil`.
private func createPrivateFileIfMissing(_ path: String) -> String? {
    let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
    guard fd >= 0 else { return errno == EEXIST ? nil : String(cString: strerror(errno)) }
    _ = fchmod(fd, 0o600)
    close(fd)
    return nil
}

/// What an SQLite error says (its result code and message), without the statement or its values.
private func describe(_ error: any Error) -> String {
    guard let error = error as? DatabaseError else { return "\(type(of: error))" }
    return "SQLite error \(error.resultCode.rawValue)" + (error.message.map { ": \($0)" } ?? "")
}

/// Why the receipts database could not be used; says what to do, never holds a token.
public enum ReceiptsDatabaseError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The database at `path` could not be opened or set up (`detail` is SQLite's message).
    case cannotOpen(path: String, detail: String)
    /// Recording an expected receipt failed.
    case cannotRecord(path: String, detail: String)
    /// Reading the figures failed.
    case cannotRead(path: String, detail: String)

    /// What happened and what to do.
    public var description: String {
        switch self {
        case let .cannotOpen(path, detail):
            "cannot open the receipts database \(path): \(detail); check that the directory exists and is writable"
        case let .cannotRecord(path, detail): "cannot record the expected receipt in \(path): \(detail)"
        case let .cannotRead(path, detail): "cannot read \(path): \(detail)"
        }
    }
}

/// The collector's SQLite database (WAL mode, so `seal --receipts-db` can record while `receipts serve` runs),
/// through GRDB over the system SQLite.
///
/// Tables: `expected` (one row per sealed message asking for a receipt: message id, SHA-256 of the token,
/// issued-at, device key id, and once delivered the device's time, the collector's time and the attachment
/// counts) and `failure_reports` (one row per failure report received). Tokens are never stored, only their hashes.
public actor ReceiptsDatabase {
    /// What a receipt came to (receipts v1 §4).
    public enum ReceiptAnswer: Sendable, Equatable {
        /// The token matches: the message is counted as delivered (once, however often its receipt arrives).
        case counted(firstTime: Bool)
        /// No message with this id asked for a receipt.
        case unknownID
        /// The token does not match the one kept for the id.
        case wrongToken
    }

    let queue: DatabaseQueue
    /// The database file.
    public let path: String
    /// The most failures one stored report stands for (its `count`, and its `dropped`): a report is a
    /// signal, never proof, so one report cannot outweigh a thousand devices (receipts v1 §3).
    public static let maximumReportCount = 1000
    /// How long failure reports are kept, in milliseconds (30 days).
    public static let reportRetentionMilliseconds: Int64 = 30 * 86_400_000
    private var lastPurgeMilliseconds: Int64?

    private init(queue: DatabaseQueue, path: String) {
        self.queue = queue
        self.path = path
    }

    /// Opens (creating if needed) the database at `path`: WAL journal, `synchronous=NORMAL`, a 5 s busy timeout.
    ///
    /// A new file is created 0600 before SQLite opens it, so it and the `-wal` and `-shm` files SQLite
    /// makes beside it with the same mode are the owner's alone, whatever the process umask.
    public static func open(path: String) async throws(ReceiptsDatabaseError) -> ReceiptsDatabase {
        if let problem = createPrivateFileIfMissing(path) { throw .cannotOpen(path: path, detail: problem) }
        do {
            var configuration = Configuration()
            configuration.busyMode = .timeout(5)
            configuration.label = "receipts"
            let queue = try DatabaseQueue(path: path, configuration: configuration)
            try await queue.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA journal_mode = WAL")
                try db.execute(sql: "PRAGMA synchronous = NORMAL")
            }
            try await queue.write { db in try Self.setUp(db) }
            return ReceiptsDatabase(queue: queue, path: path)
        } catch {
            throw .cannotOpen(path: path, detail: describe(error))
        }
    }

    private static func setUp(_ db: Database) throws {
        try db.execute(sql: """
            CREATE TABLE IF NOT EXISTS expected (
                message_id TEXT PRIMARY KEY NOT NULL,
                token_sha256 BLOB NOT NULL,
                issued_at INTEGER NOT NULL,
                key_id TEXT NOT NULL,
                receipts INTEGER NOT NULL DEFAULT 0,
                delivered_at INTEGER,
                received_ms INTEGER,
                attachments TEXT
            )
            """)
        try db.execute(sql: """
            CREATE TABLE IF NOT EXISTS failure_reports (
                id INTEGER PRIMARY KEY,
                reason TEXT NOT NULL,
                key_id TEXT,
                at INTEGER NOT NULL,
                count INTEGER NOT NULL,
                dropped INTEGER NOT NULL DEFAULT 0,
                received_ms INTEGER NOT NULL
            )
            """)
        // Reveal v1 §6: `revealed` receipts, counted apart from `delivered` (added to databases made before).
        let columns = try String.fetchAll(db, sql: "SELECT name FROM pragma_table_info('expected')")
        if !columns.contains("reveals") {
            try db.execute(sql: "ALTER TABLE expected ADD COLUMN reveals INTEGER NOT NULL DEFAULT 0")
            try db.execute(sql: "ALTER TABLE expected ADD COLUMN revealed_at INTEGER")
        }
        try db.execute(sql: "CREATE INDEX IF NOT EXISTS expected_issued ON expected(issued_at)")
        try db.execute(sql: "CREATE INDEX IF NOT EXISTS failure_reports_received ON failure_reports(received_ms)")
    }

    /// Closes the database (its WAL is checkpointed and removed when this was the last connection).
    public func close() async {
        try? queue.close()
    }

    /// Opens the database at `path`, runs `body` with it and closes it, whether `body` returned or threw.
    public static func withOpened<R>(path: String, _ body: (ReceiptsDatabase) async throws(ReceiptsDatabaseError) -> R)
        async throws(ReceiptsDatabaseError) -> R
    {
        let database = try await open(path: path)
        let result: Result<R, ReceiptsDatabaseError>
        do throws(ReceiptsDatabaseError) { result = .success(try await body(database)) } catch { result = .failure(error) }
        await database.close()
        return try result.get()
    }

    /// Records that message `messageID`, sealed to `keyID` at `issuedAt`, asked for a receipt with `token`
    /// (only `SHA-256(token)` is kept). A message id already recorded is refused.
    public func recordExpected(messageID: String, token: String, issuedAt: Int64, keyID: KeyID) async throws(ReceiptsDatabaseError) {
        let hash = Data(SHA256Hasher.hash(Array(token.utf8)))
        do {
            try await queue.write { db in
                try db.execute(sql: "INSERT INTO expected (message_id, token_sha256, issued_at, key_id) VALUES (?, ?, ?, ?)",
                               arguments: [messageID, hash, issuedAt, keyID.hex])
            }
        } catch {
            throw .cannotRecord(path: path, detail: describe(error))
        }
    }

    /// Counts a receipt (§4): `counted` when `SHA-256(token)` matches the one kept for `id`.
    public func recordReceipt(id: String, token: String, at: Int64, attachments: ReceiptAttachmentCounts?,
                              receivedMilliseconds: Int64) async throws -> ReceiptAnswer {
        let hash = Data(SHA256Hasher.hash(Array(token.utf8)))
        let attachmentsText = attachments.map { String(decoding: JSON.serialize(.object($0.jsonObject)), as: UTF8.self) }
        // One statement: the match and the count are one atomic step, so concurrent repeats count once.
        return try await queue.write { db in
            if let receipts = try Int64.fetchOne(db, sql: """
                UPDATE expected SET receipts = receipts + 1, delivered_at = COALESCE(delivered_at, ?1),
                    received_ms = COALESCE(received_ms, ?2), attachments = COALESCE(attachments, ?3)
                WHERE message_id = ?4 AND token_sha256 = ?5 RETURNING receipts
                """, arguments: [at, receivedMilliseconds, attachmentsText, id, hash]) {
                return .counted(firstTime: receipts == 1)
            }
            return try Self.known(db, id) ? .wrongToken : .unknownID
        }
    }

    /// Counts a `revealed` receipt (reveal v1 §6) for `id` if `token` matches, apart from `delivered`: the
    /// first sets `revealed_at`; repeats are counted, never a second reveal.
    public func recordRevealed(id: String, token: String, at: Int64, receivedMilliseconds: Int64) async throws -> ReceiptAnswer {
        let hash = Data(SHA256Hasher.hash(Array(token.utf8)))
        return try await queue.write { db in
            if let reveals = try Int64.fetchOne(db, sql: """
                UPDATE expected SET reveals = reveals + 1, revealed_at = COALESCE(revealed_at, ?1)
                WHERE message_id = ?2 AND token_sha256 = ?3 RETURNING reveals
                """, arguments: [at, id, hash]) {
                return .counted(firstTime: reveals == 1)
            }
            return try Self.known(db, id) ? .wrongToken : .unknownID
        }
    }

    private static func known(_ db: Database, _ id: String) throws -> Bool {
        try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM expected WHERE message_id = ?)", arguments: [id]) ?? false
    }

    /// Stores a failure report (§3), its `count` and `dropped` capped at `maximumReportCount`; reports
    /// received more than `reportRetentionMilliseconds` ago are deleted (at most once a minute).
    public func recordFailure(reason: ReasonCode, kid: KeyID?, at: Int64, count: Int, dropped: Int, receivedMilliseconds: Int64) async throws {
        let cap = Self.maximumReportCount
        try await queue.write { db in
            try db.execute(sql: "INSERT INTO failure_reports (reason, key_id, at, count, dropped, received_ms) VALUES (?, ?, ?, ?, ?, ?)",
                           arguments: [reason.rawValue, kid?.hex, at, min(max(count, 0), cap), min(max(dropped, 0), cap), receivedMilliseconds])
        }
        // Decided and noted with no suspension between (the actor is reentrant), so concurrent reports purge once.
        if let last = lastPurgeMilliseconds, receivedMilliseconds >= last, receivedMilliseconds - last < 60_000 { return }
        lastPurgeMilliseconds = receivedMilliseconds
        let (cutoff, overflow) = receivedMilliseconds.subtractingReportingOverflow(Self.reportRetentionMilliseconds)
        let purgeBefore = overflow ? Int64.min : cutoff
        try await queue.write { db in
            try db.execute(sql: "DELETE FROM failure_reports WHERE received_ms < ?", arguments: [purgeBefore])
        }
    }

    /// The figures of `receipts stats` for messages issued (and reports received) at or after `since` (Unix seconds).
    public func stats(since: Int64 = 0) async throws(ReceiptsDatabaseError) -> ReceiptStats {
        do {
            return try await queue.read { db in
                var stats = ReceiptStats()
                var latencies: [Double] = []
                let expected = try Row.fetchCursor(db, sql: "SELECT issued_at, received_ms, attachments, revealed_at FROM expected WHERE issued_at >= ?",
                                                   arguments: [since])
                while let row = try expected.next() {
                    stats.sent += 1
                    if (row["revealed_at"] as Int64?) != nil { stats.revealed += 1 }
                    guard let received = row["received_ms"] as Int64?, let issued = row["issued_at"] as Int64? else { continue }
                    stats.delivered += 1
                    latencies.append(max(0, Double(received) / 1000 - Double(issued)))
                    if let text = row["attachments"] as String?, case let .object(o)? = try? JSON.parse(Array(text.utf8)),
                       case let .object(failed)? = o["failed"] {
                        for (reason, value) in failed { stats.attachmentFailures[reason, default: 0] += Int(value.intValue ?? 0) }
                    }
                }
                stats.issueToReceiptSeconds = ReceiptStats.percentiles(latencies)
                let reports = try Row.fetchCursor(db, sql: """
                    SELECT reason, key_id, SUM(count) AS n, SUM(dropped) AS d FROM failure_reports WHERE received_ms >= ? GROUP BY reason, key_id
                    """, arguments: [since.multipliedReportingOverflow(by: 1000).overflow ? (since < 0 ? Int64.min : Int64.max) : since * 1000])
                while let row = try reports.next() {
                    let n = (row["n"] as Int?) ?? 0
                    let reason = (row["reason"] as String?) ?? "?"
                    let kid = (row["key_id"] as String?) ?? "null"
                    stats.failuresByReason[reason, default: 0] += n
                    stats.failuresByKeyID[kid, default: 0] += n
                    stats.droppedReported += (row["d"] as Int?) ?? 0
                }
                stats.registeredKeyIDs = Set(try String.fetchAll(db, sql: "SELECT DISTINCT key_id FROM expected"))
                return stats
            }
        } catch {
            throw .cannotRead(path: path, detail: describe(error))
        }
    }
}

/// What `receipts stats` prints.
public struct ReceiptStats: Sendable, Equatable {
    /// Messages sealed with a receipt requested.
    public var sent = 0
    /// Of those, messages whose receipt arrived (each counted once).
    public var delivered = 0
    /// Of those, messages whose `revealed` receipt arrived (reveal v1 §6; each counted once).
    public var revealed = 0
    /// Time from the message's issue to its first receipt at the collector, seconds: p50, p95, p99 (`nil` when none).
    public var issueToReceiptSeconds: (p50: Double, p95: Double, p99: Double)?
    /// Attachment failures reported in receipts, by reason code.
    public var attachmentFailures: [String: Int] = [:]
    /// Failures reported by devices (the sum of the reports' counts), by reason code.
    public var failuresByReason: [String: Int] = [:]
    /// The same, by envelope key id (`null`: no key id could be read).
    public var failuresByKeyID: [String: Int] = [:]
    /// Outbox entries devices said they dropped.
    public var droppedReported = 0
    /// Key ids messages were sealed to (marks which reported key ids are registered ones).
    public var registeredKeyIDs: Set<String> = []

    /// Messages still waiting for a receipt.
    public var pending: Int { sent - delivered }
    /// `delivered / sent`, or `nil` when nothing was sent.
    public var deliveryRate: Double? { sent == 0 ? nil : Double(delivered) / Double(sent) }

    /// Nearest-rank percentiles of `values`.
    static func percentiles(_ values: [Double]) -> (p50: Double, p95: Double, p99: Double)? {
        guard !values.isEmpty else { return nil }
        let sorted = values.sorted()
        func rank(_ p: Double) -> Double {
            let index = Int((p * Double(sorted.count)).rounded(.up)) - 1
            return sorted[min(max(index, 0), sorted.count - 1)]
        }
        return (rank(0.50), rank(0.95), rank(0.99))
    }

    /// Equal when every figure is.
    public static func == (a: ReceiptStats, b: ReceiptStats) -> Bool {
        a.sent == b.sent && a.delivered == b.delivered && a.revealed == b.revealed && a.attachmentFailures == b.attachmentFailures
            && a.failuresByReason == b.failuresByReason && a.failuresByKeyID == b.failuresByKeyID && a.droppedReported == b.droppedReported
            && a.issueToReceiptSeconds?.p50 == b.issueToReceiptSeconds?.p50 && a.issueToReceiptSeconds?.p95 == b.issueToReceiptSeconds?.p95
            && a.issueToReceiptSeconds?.p99 == b.issueToReceiptSeconds?.p99 && a.registeredKeyIDs == b.registeredKeyIDs
    }

    /// The figures as one JSON object (`--json`).
    public var jsonObject: JSONObject {
        func counts(_ d: [String: Int]) -> JSONValue { .object(JSONObject(d.sorted { $0.key < $1.key }.map { ($0.key, .int(Int64($0.value))) })) }
        var o = JSONObject()
        o["sent"] = .int(Int64(sent))
        o["delivered"] = .int(Int64(delivered))
        o["revealed"] = .int(Int64(revealed))
        o["pending"] = .int(Int64(pending))
        o["deliveryRate"] = deliveryRate.map { .double($0) } ?? .null
        if let p = issueToReceiptSeconds {
            o["issueToReceiptSeconds"] = .object(JSONObject([("p50", .double(p.p50)), ("p95", .double(p.p95)), ("p99", .double(p.p99))]))
        } else {
            o["issueToReceiptSeconds"] = .null
        }
        o["attachmentFailures"] = counts(attachmentFailures)
        o["failureReportsByReason"] = counts(failuresByReason)
        o["failureReportsByKeyID"] = .object(JSONObject(failuresByKeyID.sorted { $0.key < $1.key }.map { kid, n in
            (kid, .object(JSONObject([("count", .int(Int64(n))), ("registered", .bool(registeredKeyIDs.contains(kid)))])))
        }))
        o["droppedReported"] = .int(Int64(droppedReported))
        return o
    }
}
