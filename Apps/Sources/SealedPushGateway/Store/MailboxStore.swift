import SealedPushWire
import SealedPushCrypto

/// Why a mailbox delivery answers `410` (mailbox v1 §3).
public enum MailboxGone: String, Sendable, Equatable {
    /// Handed out and then confirmed (its receipt), its grace ended, or fetched six times.
    case collected
    /// The sender retracted it (§6).
    case retracted
    /// It expired.
    case expired
}

/// A mailbox delivery's envelope, written with its delivery (mailbox v1 §4).
public struct NewMailboxEntry: Sendable {
    /// SHA-256 of its handle's token: the token itself is never stored.
    public var handleSHA256: [UInt8]
    /// The sealed envelope's bytes (wire v1 §2).
    public var envelope: [UInt8]
    /// When it is deleted as expired (Unix milliseconds): the message's expiry, or for a `ttl` of 0 its fetch grace.
    public var expiresAt: Int64
}

/// What a fetch by handle came to.
public enum MailboxFetchOutcome: Sendable, Equatable {
    /// `200`: the envelope; `first` when this fetch moved the delivery to `fetched` (its app, for the metrics).
    case envelope([UInt8], messageID: String, expiresAt: Int64, app: String, first: Bool)
    /// `404`: no such delivery, or a wrong token (one answer for both).
    case unknown
    /// `410`, and why.
    case gone(MailboxGone)
}

/// A delivery the list hands back (mailbox v1 §7), with its fresh handle.
public struct MailboxListEntry: Sendable, Equatable {
    /// The fresh handle (the old token no longer works).
    public var handle: String
    /// The message id.
    public var messageID: String
    /// When the message was accepted (Unix milliseconds).
    public var createdAt: Int64
    /// When it expires (Unix milliseconds).
    public var expiresAt: Int64
}

/// A mailbox delivery a retraction made `retracted` (mailbox v1 §6).
public struct MailboxRetraction: Sendable, Equatable {
    /// The delivery's id.
    public var deliveryID: String
    /// Whether its push was accepted by its push service (a retraction push can replace it).
    public var pushAccepted: Bool
}

/// The store side of mailbox v1: both `SQLiteGatewayStore` and `PostgresGatewayStore` implement it with the
/// statements of `MailboxQueries`, each method one transaction.
public protocol GatewayMailboxStore: GatewayStore {
    /// Fetches a delivery's envelope by handle (§3): compares the token's hash in constant time, counts the fetch,
    /// moves the delivery to `fetched` on the first (event `delivery.fetched`), and deletes the envelope of a
    /// delivery it finds collected or expired.
    func mailboxFetch(deliveryID: String, tokenSHA256: [UInt8], now: Int64, graces: [String: Int64]) async throws -> MailboxFetchOutcome
    /// Keeps a challenge for `fetchChallenge` (§7).
    func putMailboxChallenge(id: String, app: String, deviceID: String, answerSHA256: [UInt8], expiresAt: Int64) async throws
    /// Takes a challenge (deleted whatever the answer: it answers once) and, when `answerSHA256` matches it and it has
    /// not expired, lists its device's waiting deliveries, oldest first, at most `limit`, each with a fresh token.
    /// Nil: unknown, expired or wrong.
    func mailboxList(challengeID: String, answerSHA256: [UInt8], now: Int64, graces: [String: Int64], limit: Int) async throws -> [MailboxListEntry]?
    /// Makes every mailbox delivery of a message that is not yet gone `retracted` and deletes its envelope.
    func mailboxRetract(app: String, messageID: String, now: Int64) async throws -> [MailboxRetraction]
    /// Deletes what is due (§3): envelopes of deliveries expired, or collected by their grace (per app, in
    /// milliseconds; an app absent from it uses 60 s); mailbox rows past `rowsBefore`; challenges expired. The number of
    /// envelopes deleted.
    func mailboxSweep(now: Int64, graces: [String: Int64], rowsBefore: Int64) async throws -> Int
    /// Queues the retraction push of a retracted delivery (§6): a new delivery `pushID` of the same message, device,
    /// address, collapse id and expiry carrying `payload`, and
    /// the hash of its retraction push's handle set to `handleSHA256` (that handle answers `410 retracted`, and so does
    /// the first one). False when the delivery is unknown.
    func queueRetractionPush(of deliveryID: String, pushID: String, apnsID: String, payload: [UInt8], handleSHA256: [UInt8], now: Int64) async throws -> Bool
    /// The mailbox deliveries of a message: delivery id → when first fetched (nil: not yet).
    func mailboxDeliveries(messageID: String) async throws -> [String: Int64?]
}

/// The mailbox's rules, once for both stores: what a fetch finds decides its answer. Pure.
enum MailboxRules {
    /// A mailbox row as a fetch reads it.
    struct Row: Sendable {
        var app: String
        var messageID: String
        var handleSHA256: [UInt8]
        var expiresAt: Int64
        var fetchedAt: Int64?
        var fetches: Int
        var gone: MailboxGone?
        var state: DeliveryState?
        /// The token hash of its retraction push's handle (§6), if one was sent.
        var retractionSHA256: [UInt8]? = nil
    }

    /// The most fetches of one delivery: the sixth is `410 collected`.
    static let maximumFetches = 5

    /// What a fetch decides.
    enum Decision: Equatable {
        /// `404`.
        case unknown
        /// `410`; `newly` when the row becomes gone now (its envelope is to be deleted).
        case gone(MailboxGone, newly: Bool)
        /// `200`; `first` when it was never fetched.
        case hand(first: Bool)
    }

    /// The decision for `row` (nil: no mailbox delivery has that id) fetched with a token hashing to `tokenSHA256`.
    static func decide(_ row: Row?, tokenSHA256: [UInt8], now: Int64, graceMilliseconds: Int64) -> Decision {
        // Compared whatever the row: the same work for an unknown id and a wrong token.
        let expected = row?.handleSHA256 ?? Array(repeating: 0, count: 32)
        let matchesHandle = constantTimeEquals(expected, tokenSHA256)
        let matchesRetraction = constantTimeEquals(row?.retractionSHA256 ?? Array(repeating: 0xff, count: 32), tokenSHA256)
        guard let row, matchesHandle || matchesRetraction else { return .unknown }
        if let gone = row.gone { return .gone(gone, newly: false) }
        if row.expiresAt <= now { return .gone(.expired, newly: true) }
        if row.state == .delivered { return .gone(.collected, newly: true) }
        if let at = row.fetchedAt, now >= at + graceMilliseconds { return .gone(.collected, newly: true) }
        if row.fetches >= maximumFetches { return .gone(.collected, newly: true) }
        return .hand(first: row.fetchedAt == nil)
    }
}

/// The mailbox's statements, written once and rendered in each store's dialect.
struct MailboxQueries: Sendable {
    /// The row a fetch decides on, locked (binds: delivery id): app, message_id, handle_sha256, expires_at,
    /// fetched_at, fetches, gone, the delivery's state.
    let fetchRead: String
    /// Marks a row gone (binds: gone, now, delivery id).
    let markGone: String
    /// Deletes a delivery's envelope (binds: delivery id).
    let deleteEnvelope: String
    /// A delivery's envelope (binds: delivery id).
    let envelope: String
    /// Counts a fetch (binds: now, delivery id).
    let countFetch: String
    /// Moves a delivery to `fetched` from `queued` or `accepted`, dropping its push payload (binds: now, delivery id),
    /// returning `deliveryColumns`.
    let markFetched: String
    /// Writes a mailbox row (binds: delivery id, app, device id, message id, handle sha256, created_at, expires_at).
    let insert: String
    /// Writes an envelope (binds: delivery id, envelope).
    let insertEnvelope: String
    /// Marks a delivery collected on its receipt (binds: now, delivery id), returning delivery_id.
    let collectOnReceipt: String
    /// Keeps a challenge (binds: id, app, device id, answer sha256, expires_at).
    let insertChallenge: String
    /// Takes a challenge (binds: id), returning app, device_id, answer_sha256, expires_at.
    let takeChallenge: String
    /// A device's waiting deliveries (binds: app, device id, now, fetched after, limit): delivery_id, message_id,
    /// created_at, expires_at.
    let waiting: String
    /// Replaces a row's token hash (binds: sha256, delivery id).
    let rehandle: String
    /// Sets the token hash of a row's retraction push handle (binds: sha256, delivery id).
    let setRetractionHandle: String
    /// Retracts a message's deliveries not yet gone (binds: now, app, message id), returning delivery_id.
    let retract: String
    /// Whether a delivery's push was accepted (binds: delivery id): accepted_at.
    let acceptedAt: String
    /// Marks expired rows gone (binds: now, now), returning delivery_id.
    let expire: String
    /// Marks an app's rows collected whose grace ended (binds: now, app, fetched at or before), returning delivery_id.
    let collectByGrace: String
    /// Deletes every envelope whose row is gone (or absent): it reads the envelopes (the waiting ones, few) and
    /// probes each row by its key, returning delivery_id.
    let deleteGoneEnvelopes: String
    /// Deletes rows kept past their time (binds: before).
    let pruneRows: String
    /// Deletes expired challenges (binds: now).
    let pruneChallenges: String
    /// A message's mailbox deliveries (binds: message id): delivery_id, fetched_at.
    let ofMessage: String
    /// Copies a delivery as a queued retraction push (binds: push id, payload, apns id, now, now, now, delivery id).
    let retractionPush: String

    /// The statements in `dialect`.
    init(_ dialect: SQLDialect) {
        fetchRead = dialect.render("""
            SELECT m.app, m.message_id, m.handle_sha256, m.expires_at, m.fetched_at, m.fetches, m.gone, d.state, m.retraction_sha256
            FROM mailbox m LEFT JOIN deliveries d ON d.delivery_id = m.delivery_id WHERE m.delivery_id = ?\(dialect == .postgres ? " FOR UPDATE OF m" : "")
            """)
        markGone = dialect.render("UPDATE mailbox SET gone = ?, gone_at = ? WHERE delivery_id = ? AND gone IS NULL")
        deleteEnvelope = dialect.render("DELETE FROM mailbox_envelopes WHERE delivery_id = ?")
        envelope = dialect.render("SELECT envelope FROM mailbox_envelopes WHERE delivery_id = ?")
        countFetch = dialect.render("UPDATE mailbox SET fetches = fetches + 1, fetched_at = COALESCE(fetched_at, ?) WHERE delivery_id = ?")
        markFetched = dialect.render("""
            UPDATE deliveries SET state = 'fetched', updated_at = ?, next_attempt_at = NULL, seq = seq + 1, payload = \(dialect.emptyBytes)
            WHERE delivery_id = ? AND state IN ('queued', 'accepted') RETURNING \(GatewayRows.deliveryColumns)
            """)
        insert = dialect.render("""
            INSERT INTO mailbox (delivery_id, app, device_id, message_id, handle_sha256, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)
            """)
        insertEnvelope = dialect.render("INSERT INTO mailbox_envelopes (delivery_id, envelope) VALUES (?, ?)")
        collectOnReceipt = dialect.render("""
            UPDATE mailbox SET gone = 'collected', gone_at = ? WHERE delivery_id = ? AND gone IS NULL RETURNING delivery_id
            """)
        insertChallenge = dialect.render("""
            INSERT INTO mailbox_challenges (challenge_id, app, device_id, answer_sha256, expires_at) VALUES (?, ?, ?, ?, ?)
            """)
        takeChallenge = dialect.render("""
            DELETE FROM mailbox_challenges WHERE challenge_id = ? RETURNING app, device_id, answer_sha256, expires_at
            """)
        waiting = dialect.render("""
            SELECT m.delivery_id, m.message_id, m.created_at, m.expires_at FROM mailbox m JOIN deliveries d ON d.delivery_id = m.delivery_id
            WHERE m.app = ? AND m.device_id = ? AND m.gone IS NULL AND m.expires_at > ? AND d.state <> 'delivered'
                AND (m.fetched_at IS NULL OR m.fetched_at > ?) AND m.fetches < \(MailboxRules.maximumFetches)
            ORDER BY m.created_at, m.delivery_id LIMIT ?\(dialect.lockRows.isEmpty ? "" : " FOR UPDATE OF m")
            """)
        rehandle = dialect.render("UPDATE mailbox SET handle_sha256 = ? WHERE delivery_id = ?")
        setRetractionHandle = dialect.render("UPDATE mailbox SET retraction_sha256 = ? WHERE delivery_id = ?")
        retract = dialect.render("""
            UPDATE mailbox SET gone = 'retracted', gone_at = ? WHERE app = ? AND message_id = ? AND gone IS NULL RETURNING delivery_id
            """)
        acceptedAt = dialect.render("SELECT accepted_at FROM deliveries WHERE delivery_id = ?")
        expire = dialect.render("UPDATE mailbox SET gone = 'expired', gone_at = ? WHERE gone IS NULL AND expires_at <= ? RETURNING delivery_id")
        collectByGrace = dialect.render("""
            UPDATE mailbox SET gone = 'collected', gone_at = ? WHERE app = ? AND gone IS NULL AND fetched_at IS NOT NULL AND fetched_at <= ?
            RETURNING delivery_id
            """)
        deleteGoneEnvelopes = dialect.render("""
            DELETE FROM mailbox_envelopes WHERE NOT EXISTS (
                SELECT 1 FROM mailbox m WHERE m.delivery_id = mailbox_envelopes.delivery_id AND m.gone IS NULL)
            RETURNING delivery_id
            """)
        pruneRows = dialect.render("DELETE FROM mailbox WHERE expires_at < ?")
        pruneChallenges = dialect.render("DELETE FROM mailbox_challenges WHERE expires_at < ?")
        ofMessage = dialect.render("SELECT delivery_id, fetched_at FROM mailbox WHERE message_id = ?")
        // The binds' types said on PostgreSQL, where a parameter of a SELECT list has none of its own.
        let (text, bytes, int) = dialect == .postgres ? ("?::text", "?::bytea", "?::bigint") : ("?", "?", "?")
        retractionPush = dialect.render("""
            INSERT INTO deliveries (delivery_id, app, message_id, device_id, apns_token, environment, payload, receipt_sha256, priority,
                collapse_id, apns_expiration, expires_at, apns_id, state, attempts, created_at, updated_at, next_attempt_at, seq, platform)
            SELECT \(text), app, message_id, device_id, apns_token, environment, \(bytes), NULL, priority, collapse_id, apns_expiration,
                expires_at, \(text), 'queued', 0, \(int), \(int), \(int), 1, platform
            FROM deliveries WHERE delivery_id = ? RETURNING delivery_id
            """)
    }

    /// The binds of `insert` and `insertEnvelope` for one delivery of `message`.
    static func insertBinds(_ message: NewMessage, _ d: NewDelivery, _ entry: NewMailboxEntry) -> (row: [SQLValue], envelope: [SQLValue]) {
        ([.text(d.deliveryID), .text(message.app), .text(d.deviceID), .text(message.messageID), .bytes(entry.handleSHA256),
          .int(message.createdAt), .int(entry.expiresAt)],
         [.text(d.deliveryID), .bytes(entry.envelope)])
    }
}

extension MailboxRules {
    /// A row of `MailboxQueries.fetchRead`.
    static func row(_ r: some SQLRow) -> Row? {
        guard let app = r.text(0), let message = r.text(1), let hash = r.bytes(2), let expires = r.int(3), let fetches = r.int(5) else { return nil }
        return Row(app: app, messageID: message, handleSHA256: hash, expiresAt: expires, fetchedAt: r.int(4), fetches: Int(fetches),
                   gone: r.text(6).flatMap(MailboxGone.init(rawValue:)), state: r.text(7).flatMap(DeliveryState.init(rawValue:)),
                   retractionSHA256: r.bytes(8))
    }

    /// An app's fetch grace in milliseconds: 60 s for an app not configured now.
    static func grace(of app: String?, in graces: [String: Int64]) -> Int64 {
        app.flatMap { graces[$0] } ?? 60_000
    }

    /// Whether a challenge's answer hashes to what was kept: compared in constant time.
    static func answerMatches(expected: [UInt8], given: [UInt8]) -> Bool {
        constantTimeEquals(expected, given)
    }
}
