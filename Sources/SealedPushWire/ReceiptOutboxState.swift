public import SealedPushCrypto

// The device's receipt outbox, failure-report window and `revealed` receipt tickets as values, with the rules
// that change them (receipts v1 §2, §3; reveal v1 §6). No I/O: `ReceiptOutboxStore` (SealedPushKeychain: items in
// the keychain store, each change one store transaction, sealed under the store key) and `AppGroupReceiptOutbox`
// (SealedPushApple: files in the app group, each change an atomic replace under `flock`) read the state, apply one
// of these rules and write it back, each with its own durability, errors and logging.

/// The bounds and backoff of a receipt outbox (receipts v1 §2), which `ReceiptOutboxState` applies on every change.
public struct ReceiptOutboxLimits: Sendable, Equatable {
    /// The most entries kept; beyond it the oldest are dropped and counted (at least 1).
    public let capacity: Int
    /// Entries older than this many seconds are dropped and counted.
    public let maximumAgeSeconds: Int64
    /// The most bytes the encoded outbox may hold; beyond it the oldest entries are dropped and counted (at least 16 KiB).
    public let maximumEncodedBytes: Int
    /// The first backoff of an origin that failed, in seconds (at least 1); it doubles with every failure in a row.
    public let backoffBaseSeconds: Int64
    /// The longest backoff, in seconds (at least `backoffBaseSeconds`).
    public let backoffCapSeconds: Int64
    /// The first backoff of an origin whose connection was refused, in seconds (at least 1, at most
    /// `backoffBaseSeconds`); it doubles with every failure in a row. Nothing listening is what a collector or
    /// gateway restarting looks like: it answers again within seconds, so waiting the full base delays receipts.
    public let refusedBackoffBaseSeconds: Int64

    /// The default `maximumEncodedBytes`: 512 KiB.
    public static let defaultMaximumEncodedBytes = 512 * 1024

    /// Limits from their values, each raised to its least (see the properties).
    public init(capacity: Int = 1000, maximumAgeSeconds: Int64 = 7 * 86_400,
                maximumEncodedBytes: Int = ReceiptOutboxLimits.defaultMaximumEncodedBytes,
                backoffBaseSeconds: Int64 = 60, backoffCapSeconds: Int64 = 3600, refusedBackoffBaseSeconds: Int64 = 2) {
        self.capacity = max(1, capacity)
        self.maximumAgeSeconds = maximumAgeSeconds
        self.maximumEncodedBytes = max(16 * 1024, maximumEncodedBytes)
        self.backoffBaseSeconds = max(1, backoffBaseSeconds)
        self.backoffCapSeconds = max(self.backoffBaseSeconds, backoffCapSeconds)
        self.refusedBackoffBaseSeconds = min(max(1, refusedBackoffBaseSeconds), self.backoffBaseSeconds)
    }

    /// The wait after `failures` failures in a row: base × 2^(failures − 1), at most the cap; the base is
    /// `refusedBackoffBaseSeconds` when the last failure was a refused connection, else `backoffBaseSeconds`.
    public func backoff(afterFailures failures: Int, connectionRefused: Bool = false) -> Int64 {
        let doublings = min(max(0, failures - 1), 40)
        let base = connectionRefused ? refusedBackoffBaseSeconds : backoffBaseSeconds
        let (wait, overflow) = base.multipliedReportingOverflow(by: Int64(1) << doublings)
        return overflow ? backoffCapSeconds : min(wait, backoffCapSeconds)
    }
}

/// Why an entry cannot be queued: each entry is bounded (receipts v1 §2). The description never quotes the URL.
public enum ReceiptOutboxEntryProblem: Error, Sendable, Equatable, CustomStringConvertible {
    /// The URL is not a receipt URL; the reason as `ReceiptRequest.urlProblem` gives it ("is longer than 2048 bytes", …).
    case url(String)
    /// The body would be this many bytes, over `ReceiptMessage.maximumBodyBytes`.
    case bodyTooLarge(bytes: Int)
    /// The body would not read back as a receipt (receipts v1 §2, §3): a token that is not base64url without padding
    /// of 16 to 64 bytes, or a member out of its range. Written anyway, it would make the whole outbox unreadable.
    case malformedBody

    /// What is wrong, starting "the receipt URL" or "the receipt body".
    public var description: String {
        switch self {
        case let .url(why): return "the receipt URL \(why)"
        case let .bodyTooLarge(bytes):
            return "the receipt body would be \(bytes) bytes, over the \(ReceiptMessage.maximumBodyBytes) a collector accepts"
        case .malformedBody:
            return "the receipt body is not one receipts v1 allows (its token must be base64url without padding of 16 to 64 bytes)"
        }
    }
}

/// A device's receipt outbox as a value (receipts v1 §2): its entries, its origins' dropped counts and backoffs, and
/// the rules every change follows.
///
/// The outbox is bounded three ways, the oldest entries dropped and counted first: at most `capacity` entries, at
/// most `maximumEncodedBytes` encoded, none older than `maximumAgeSeconds` (`ReceiptOutboxLimits`). Entries are kept
/// per origin (`scheme://host:port`): each origin has its own dropped count (reported only to it) and its own backoff.
///
/// Encoded as `{"next", "dropped", "origins": [{"origin", "dropped", "failures", "retry_at", "touched"}], "entries":
/// [{"seq", "url", "queued_at", "body"}]}` (top-level `dropped`: entries lost with no origin known, never sent).
public struct ReceiptOutboxState: Sendable, Equatable {
    /// One origin's record in the outbox.
    public struct Origin: Sendable, Equatable {
        /// How many of its entries were dropped and not yet reported to it.
        public var dropped: Int
        /// How many flushes of it failed in a row.
        public var failures: Int
        /// Not tried before this device time; 0: may be tried now.
        public var retryAt: Int64
        /// When an entry for it was last queued.
        public var touched: Int64

        /// A record from its parts.
        public init(dropped: Int = 0, failures: Int = 0, retryAt: Int64 = 0, touched: Int64 = 0) {
            self.dropped = dropped
            self.failures = failures
            self.retryAt = retryAt
            self.touched = touched
        }
    }

    /// An entry checked against the per-entry bounds, ready to be queued: its URL is a receipt URL (at most 2048
    /// bytes, https or loopback http) and its body, with any dropped count, at most `ReceiptMessage.maximumBodyBytes`.
    public struct NewEntry: Sendable, Equatable {
        /// Where it goes.
        public let url: String
        /// The URL's origin, `scheme://host:port`.
        public let origin: String
        /// What it says.
        public let message: ReceiptMessage
        /// When the message it is about expires, if known: the entry is dropped after it.
        public var expiresAt: Int64? = nil

        /// Checks `url` and `message`; throws what is wrong with them.
        public init(url: String, message: ReceiptMessage) throws(ReceiptOutboxEntryProblem) {
            if let problem = ReceiptRequest.urlProblem(url) { throw .url(problem) }
            guard let origin = HTTPURL(url)?.origin else { throw .url("is not an absolute http(s) URL") }
            let size = JSON.serialize(.object(message.jsonObject(dropped: Int(Int32.max)))).count
            guard size <= ReceiptMessage.maximumBodyBytes else { throw .bodyTooLarge(bytes: size) }
            // What the outbox reads back (init(decoding:)) must parse, or one entry would cost every other.
            guard ReceiptMessage.parse(JSON.serialize(.object(message.jsonObject()))) != nil else { throw .malformedBody }
            self.url = url
            self.origin = origin
            self.message = message
        }
    }

    /// The sequence number the next entry gets.
    public var next: UInt64
    /// Entries lost with no origin known (an outbox that could not be read): shown, never sent.
    public var dropped: Int
    /// The origins' records, by origin.
    public var origins: [String: Origin]
    /// The entries waiting, oldest first.
    public var entries: [ReceiptOutboxEntry]

    /// An outbox from its parts (by default empty).
    public init(next: UInt64 = 1, dropped: Int = 0, origins: [String: Origin] = [:], entries: [ReceiptOutboxEntry] = []) {
        self.next = next
        self.dropped = dropped
        self.origins = origins
        self.entries = entries
    }

    /// Every dropped entry not yet reported, all origins together (and those with no origin).
    public var totalDropped: Int { dropped + origins.values.reduce(0) { $0 + $1.dropped } }

    /// Counts `entry` as dropped at its origin.
    mutating func countDropped(_ entry: ReceiptOutboxEntry) {
        if let origin = HTTPURL(entry.url)?.origin { origins[origin, default: Origin()].dropped += 1 } else { dropped += 1 }
    }

    // MARK: Rules

    /// Adds `entry` at `now` and drops (and counts) entries past the age limit. The count and byte bounds are applied
    /// by `boundedEncoding(limits:)`, when the outbox is written.
    public mutating func enqueue(_ entry: NewEntry, now: Int64, limits: ReceiptOutboxLimits) {
        entries.append(ReceiptOutboxEntry(sequence: next, url: entry.url, message: entry.message, queuedAt: now, expiresAt: entry.expiresAt))
        next += 1
        origins[entry.origin, default: Origin()].touched = now
        prune(now: now, limits: limits)
    }

    /// The outbox by origin (origins in the order of their oldest entry, then those with only a record, by name): each
    /// origin's entries oldest first, its dropped count and its backoff. A retry time further away than the longest
    /// backoff means the device clock went back: the origin is due now.
    public func queues(now: Int64, limits: ReceiptOutboxLimits) -> [ReceiptOriginQueue] {
        var order: [String] = []
        var byOrigin: [String: [ReceiptOutboxEntry]] = [:]
        for entry in entries {
            guard let origin = HTTPURL(entry.url)?.origin else { continue }
            if byOrigin[origin] == nil { order.append(origin) }
            byOrigin[origin, default: []].append(entry)
        }
        order += origins.keys.filter { byOrigin[$0] == nil }.sorted()
        return order.map { origin in
            let state = origins[origin] ?? Origin()
            let waiting = state.retryAt > now && state.retryAt - now <= limits.backoffCapSeconds
            return ReceiptOriginQueue(origin: origin, entries: byOrigin[origin] ?? [], dropped: state.dropped, failures: state.failures,
                                      retryAt: waiting ? state.retryAt : nil)
        }
    }

    /// Records what a flush of `origin` came to: removes the entries sent or refused for good, subtracts
    /// `droppedReported` from the origin's dropped count, and, when the origin `failed`, backs it off: by
    /// `retryAfter` seconds when the server said how long to wait (`Retry-After` on a `429` or `503`, gateway v1 §6),
    /// at most `limits.backoffCapSeconds`, else by `limits.backoff(afterFailures:connectionRefused:)` (from the
    /// shorter first wait when `connectionRefused`); otherwise its backoff is cleared. Then prunes as
    /// `prune(now:limits:)`.
    public mutating func settle(origin: String, removing sequences: [UInt64], droppedReported: Int, failed: Bool,
                                retryAfter: Int64? = nil, connectionRefused: Bool = false, now: Int64, limits: ReceiptOutboxLimits) {
        let done = Set(sequences)
        entries.removeAll { done.contains($0.sequence) }
        var state = origins[origin] ?? Origin(touched: now)
        state.dropped = max(0, state.dropped - droppedReported)
        if failed {
            state.failures += 1
            let wait = retryAfter.map { min(max(0, $0), limits.backoffCapSeconds) }
                ?? limits.backoff(afterFailures: state.failures, connectionRefused: connectionRefused)
            state.retryAt = now + wait
        } else {
            state.failures = 0
            state.retryAt = 0
        }
        origins[origin] = state
        prune(now: now, limits: limits)
    }

    /// Removes entries by sequence number (dropped counts and backoffs unchanged).
    public mutating func remove(sequences: [UInt64]) {
        let done = Set(sequences)
        entries.removeAll { done.contains($0.sequence) }
    }

    /// Whether `prune(now:limits:)` would change anything: an entry past the age limit, or a stale origin record.
    public func needsPruning(now: Int64, limits: ReceiptOutboxLimits) -> Bool {
        if entries.contains(where: { Self.isTooOld($0, now: now, limits: limits) }) { return true }
        let live = liveOrigins
        return origins.contains { !live.contains($0.key) && Self.isStale($0.value, now: now, limits: limits) }
    }

    /// Drops (and counts) entries past the age limit, then forgets origin records with no entries that are stale
    /// (holding nothing, or last queued to longer ago than the age limit).
    public mutating func prune(now: Int64, limits: ReceiptOutboxLimits) {
        var kept: [ReceiptOutboxEntry] = []
        kept.reserveCapacity(entries.count)
        for entry in entries {
            if Self.isTooOld(entry, now: now, limits: limits) { countDropped(entry) } else { kept.append(entry) }
        }
        entries = kept
        // A record recovered without a time (an outbox that was not as written) starts its age now.
        for (origin, state) in origins where state.touched == 0 { origins[origin]?.touched = now }
        let live = liveOrigins
        origins = origins.filter { live.contains($0.key) || !Self.isStale($0.value, now: now, limits: limits) }
    }

    /// Applies the count and byte bounds (the oldest entries dropped and counted at their origins; origin records with
    /// no entries forgotten first, least recently queued first) and returns the encoded outbox, at most
    /// `limits.maximumEncodedBytes`.
    public mutating func boundedEncoding(limits: ReceiptOutboxLimits) -> [UInt8] {
        if entries.count > limits.capacity {
            for entry in entries.prefix(entries.count - limits.capacity) { countDropped(entry) }
            entries.removeFirst(entries.count - limits.capacity)
        }
        let idle = idleOrigins()
        if idle.count > limits.capacity { for origin in idle.prefix(idle.count - limits.capacity) { origins[origin] = nil } }
        while true {
            let bytes = encoded()
            let excess = bytes.count - limits.maximumEncodedBytes
            if excess <= 0 { return bytes }
            var freed = 0
            for origin in idleOrigins() where freed < excess {
                freed += JSON.serialize(Self.originValue(origin, origins[origin]!)).count + 1
                origins[origin] = nil
            }
            var dropCount = 0
            for entry in entries where freed < excess {
                freed += JSON.serialize(Self.entryValue(entry)).count + 1
                dropCount += 1
            }
            for entry in entries.prefix(dropCount) { countDropped(entry) }
            entries.removeFirst(dropCount)
            if freed == 0 { return bytes }  // nothing left to drop (cannot happen: the cap is at least 16 KiB)
        }
    }

    private var liveOrigins: Set<String> { Set(entries.compactMap { HTTPURL($0.url)?.origin }) }

    /// Origin records with no entries, least recently queued first.
    private func idleOrigins() -> [String] {
        let live = liveOrigins
        return origins.filter { !live.contains($0.key) }.sorted { ($0.value.touched, $0.key) < ($1.value.touched, $1.key) }.map(\.key)
    }

    private static func isTooOld(_ entry: ReceiptOutboxEntry, now: Int64, limits: ReceiptOutboxLimits) -> Bool {
        now - entry.queuedAt > limits.maximumAgeSeconds || entry.expiresAt.map { now > $0 } ?? false
    }

    /// An origin record with no entries that holds nothing, or was last queued to longer ago than the age limit.
    private static func isStale(_ state: Origin, now: Int64, limits: ReceiptOutboxLimits) -> Bool {
        (state.dropped == 0 && state.failures == 0) || now - state.touched > limits.maximumAgeSeconds
    }

    // MARK: Encoding

    /// The outbox encoded (origins by name), without applying any bound.
    public func encoded() -> [UInt8] {
        JSON.serialize(.object(JSONObject([
            ("next", .int(Int64(clamping: next))), ("dropped", .int(Int64(dropped))),
            ("origins", .array(origins.sorted { $0.key < $1.key }.map { Self.originValue($0.key, $0.value) })),
            ("entries", .array(entries.map(Self.entryValue))),
        ])))
    }

    static func entryValue(_ e: ReceiptOutboxEntry) -> JSONValue {
        var members: [(String, JSONValue)] = [("seq", .int(Int64(clamping: e.sequence))), ("url", .string(e.url)), ("queued_at", .int(e.queuedAt)),
                                              ("body", .object(e.message.jsonObject()))]
        if let until = e.expiresAt { members.append(("until", .int(until))) }
        return .object(JSONObject(members))
    }

    static func originValue(_ origin: String, _ s: Origin) -> JSONValue {
        .object(JSONObject([("origin", .string(origin)), ("dropped", .int(Int64(s.dropped))), ("failures", .int(Int64(s.failures))),
                            ("retry_at", .int(s.retryAt)), ("touched", .int(s.touched))]))
    }

    /// The outbox as written, or `nil` when it is not; empty bytes are an empty outbox. With `requiringOrigins` false
    /// the format before per-origin queues (#22), which had no `origins`, is read too (the keychain store's items may
    /// hold it; an app group file never did, so there a missing `origins` means damage).
    public init?(decoding bytes: [UInt8], requiringOrigins: Bool) {
        guard !bytes.isEmpty else {
            self.init()
            return
        }
        guard case let .object(o)? = try? JSON.parse(bytes), case let .int(next)? = o["next"], next >= 1,
              case let .int(dropped)? = o["dropped"], dropped >= 0, dropped <= Int64(Int32.max),
              case let .array(list)? = o["entries"] else { return nil }
        var out = ReceiptOutboxState(next: UInt64(next), dropped: Int(dropped))
        if let origins = o["origins"] {
            guard case let .array(rows) = origins else { return nil }
            for row in rows {
                guard case let .object(r) = row, case let .string(origin)? = r["origin"], case let .int(d)? = r["dropped"],
                      (0...Int64(Int32.max)).contains(d), case let .int(failures)? = r["failures"], (0...1_000_000).contains(failures),
                      case let .int(retryAt)? = r["retry_at"], case let .int(touched)? = r["touched"] else { return nil }
                out.origins[origin] = Origin(dropped: Int(d), failures: Int(failures), retryAt: retryAt, touched: touched)
            }
        } else if requiringOrigins {
            return nil
        }
        for value in list {
            guard case let .object(e) = value, case let .int(seq)? = e["seq"], seq >= 1, case let .string(url)? = e["url"],
                  let origin = HTTPURL(url)?.origin, case let .int(queuedAt)? = e["queued_at"], case let .object(body)? = e["body"],
                  let (message, _) = ReceiptMessage.parse(JSON.serialize(.object(body))) else { return nil }
            var until: Int64?
            if let value = e["until"] {
                guard case let .int(t) = value else { return nil }
                until = t
            }
            out.entries.append(ReceiptOutboxEntry(sequence: UInt64(seq), url: url, message: message, queuedAt: queuedAt, expiresAt: until))
            if out.origins[origin] == nil { out.origins[origin] = Origin(touched: queuedAt) }
        }
        self = out
    }

    /// A fresh outbox replacing one that is not as written (`bytes`), or that could not be read at all (`nil`): every
    /// entry the old one listed is counted as dropped (at its origin when its URL reads), plus the dropped count it
    /// held; one, at no origin, when nothing can be counted. `lost` is how many entries that is, for the log.
    public static func recovering(from bytes: [UInt8]?) -> (state: ReceiptOutboxState, lost: Int) {
        var out = ReceiptOutboxState()
        guard let bytes, case let .object(o)? = try? JSON.parse(bytes), case let .array(list)? = o["entries"] else {
            out.dropped = 1
            return (out, 1)
        }
        if case let .int(next)? = o["next"], next >= 1 { out.next = UInt64(next) }
        if case let .int(dropped)? = o["dropped"], (0...Int64(Int32.max)).contains(dropped) { out.dropped += Int(dropped) }
        for value in list {
            if case let .object(e) = value, case let .string(url)? = e["url"], let origin = HTTPURL(url)?.origin {
                out.origins[origin, default: Origin()].dropped += 1
            } else {
                out.dropped += 1
            }
        }
        let maxSeq = list.compactMap { $0.objectValue?["seq"]?.intValue }.filter { $0 >= 1 }.max() ?? 0
        out.next = max(out.next, UInt64(maxSeq) + 1)
        return (out, list.count)
    }
}

/// A receipts item or file that holds a JSON array of objects: the failure-report window and the `revealed` receipt
/// tickets. The rows are kept as read (members this version does not know included).
public protocol JSONRowList: Sendable {
    /// The rows, in order.
    var rows: [JSONObject] { get set }
    /// A list of `rows`.
    init(rows: [JSONObject])
}

extension JSONRowList {
    /// The list as written, or `nil` when it is not a JSON array; empty bytes are an empty list. An array holding
    /// something other than objects is read without those values when `skippingNonObjects` (the keychain store's
    /// reading), and is not as written otherwise (the app group's).
    public init?(decoding bytes: [UInt8], skippingNonObjects: Bool) {
        guard !bytes.isEmpty else {
            self.init(rows: [])
            return
        }
        guard case let .array(list)? = try? JSON.parse(bytes) else { return nil }
        let rows = list.compactMap(\.objectValue)
        guard skippingNonObjects || rows.count == list.count else { return nil }
        self.init(rows: rows)
    }

    /// The list encoded as a JSON array.
    public func encoded() -> [UInt8] { JSON.serialize(.array(rows.map { .object($0) })) }
}

/// The failure-report window (receipts v1 §3) as a value: per `(reason, kid)`, when a report was last made and how many
/// failures inside the window were counted for the next one. Encoded as `[{"reason", "kid", "last", "suppressed"}]`.
public struct ReceiptReportWindow: JSONRowList, Equatable {
    /// The rows, in the order the pairs were first reported.
    public var rows: [JSONObject]

    /// The most pairs a device keeps by default (the keychain store's bound; the app group's is the same).
    public static let defaultMaximumPairs = 1000

    /// How long a pair's suppressed count is kept for its next report: 7 days (the outbox's age limit). A failure
    /// that has not come back in that long is not worth a report's count, and a flood of junk key ids, each failing
    /// twice, would otherwise leave rows that no later report ever clears.
    public static let maximumAgeSeconds: Int64 = 7 * 86_400

    /// A window of `rows` (by default empty).
    public init(rows: [JSONObject] = []) { self.rows = rows }

    /// Records a failure of `(reason, kid)`: the count a report made now stands for, or `nil` within `window` seconds of
    /// the pair's last report (the failure is then counted for the next one). First the pairs that hold nothing worth
    /// keeping are forgotten (`prune(now:window:maximumAgeSeconds:)`); with `maximumPairs`, beyond that many pairs the
    /// least recently reported go (`nil`: no bound).
    public mutating func noteFailure(reason: ReasonCode, kid: KeyID?, now: Int64, window: Int64, maximumPairs: Int?,
                                     maximumAgeSeconds: Int64 = ReceiptReportWindow.maximumAgeSeconds) -> Int? {
        let kidValue: JSONValue = kid.map { .string($0.hex) } ?? .null
        prune(now: now, window: window, maximumAgeSeconds: maximumAgeSeconds)
        if let index = rows.firstIndex(where: { $0["reason"] == .string(reason.rawValue) && $0["kid"] == kidValue }) {
            let last = rows[index]["last"]?.intValue ?? .min
            let suppressed = rows[index]["suppressed"]?.intValue ?? 0
            if now >= last, now - last < window {
                rows[index]["suppressed"] = .int(suppressed + 1)
                return nil
            }
            rows[index]["last"] = .int(now)
            rows[index]["suppressed"] = .int(0)
            return Int(clamping: suppressed) + 1
        }
        rows.append(JSONObject([("reason", .string(reason.rawValue)), ("kid", kidValue), ("last", .int(now)), ("suppressed", .int(0))]))
        // A flood of junk with ever new key ids cannot grow the list without bound: the least recently reported go.
        if let maximumPairs, rows.count > max(1, maximumPairs) {
            rows.sort { ($0["last"]?.intValue ?? 0) < ($1["last"]?.intValue ?? 0) }
            rows.removeFirst(rows.count - max(1, maximumPairs))
        }
        return 1
    }

    /// Forgets the pairs that hold nothing worth keeping: those whose window has passed with nothing suppressed (their
    /// count was reported), and those last reported more than `maximumAgeSeconds` from `now`, before or after it (a
    /// clock set back), whatever they suppressed. A row without a readable `last` is forgotten.
    public mutating func prune(now: Int64, window: Int64, maximumAgeSeconds: Int64 = ReceiptReportWindow.maximumAgeSeconds) {
        rows.removeAll { row in
            guard let last = row["last"]?.intValue else { return true }
            let (age, overflow) = now.subtractingReportingOverflow(last)
            if overflow || age.magnitude > UInt64(max(0, maximumAgeSeconds)) { return true }
            return age > window && (row["suppressed"]?.intValue ?? 0) == 0
        }
    }
}

/// The `revealed` receipt tickets (reveal v1 §6) as a value: the outer receipts of held messages, by notification
/// request identifier, each kept until its time. Encoded as `[{"request", "url", "token", "id", "until"}]`.
public struct RevealTicketList: JSONRowList, Equatable {
    /// The most tickets kept; beyond it the oldest kept go (their receipts are then not sent).
    public static let maximumCount = 200

    /// The rows, oldest kept first.
    public var rows: [JSONObject]

    /// A list of `rows` (by default empty).
    public init(rows: [JSONObject] = []) { self.rows = rows }

    /// Keeps the receipt `request` of message `messageID` until `keepUntil` for the notification `requestIdentifier`,
    /// replacing one kept for it; expired tickets go, and beyond `maximumCount` the oldest kept.
    public mutating func keep(_ request: ReceiptRequest, messageID: String, keepUntil: Int64, requestIdentifier: String, now: Int64) {
        rows.removeAll { $0["request"] == .string(requestIdentifier) || ($0["until"]?.intValue ?? 0) < now }
        rows.append(JSONObject([("request", .string(requestIdentifier)), ("url", .string(request.url)), ("token", .string(request.token)),
                                ("id", .string(messageID)), ("until", .int(keepUntil))]))
        if rows.count > Self.maximumCount { rows.removeFirst(rows.count - Self.maximumCount) }
    }

    /// Removes and returns the unexpired ticket of `requestIdentifier`, and forgets every other ticket of the same
    /// message id: a message's `revealed` receipt goes out once. Expired tickets go.
    public mutating func take(requestIdentifier: String, now: Int64) -> (request: ReceiptRequest, messageID: String, keepUntil: Int64)? {
        rows.removeAll { ($0["until"]?.intValue ?? 0) < now }
        guard let row = rows.first(where: { $0["request"] == .string(requestIdentifier) }),
              case let .string(url)? = row["url"], case let .string(token)? = row["token"], case let .string(id)? = row["id"],
              let until = row["until"]?.intValue else { return nil }
        rows.removeAll { $0["id"] == .string(id) }
        return (ReceiptRequest(url: url, token: token), id, until)
    }
}
