public import SealedPushCrypto
public import SealedPushKeyring
public import SealedPushWire
import Logging

/// The device's receipt outbox, failure-report window and report URL (receipts v1 §2, §3), kept as items
/// in the store: every change is one `modify` transaction (the writers' lock, temp file + fsync + rename +
/// directory fsync, the change counter), so a crash at any point leaves the old or the new outbox, whole.
///
/// The outbox is bounded three ways, the oldest entries dropped and counted first: at most `capacity` entries,
/// at most `maximumEncodedBytes` encoded (well under the store's 1 MiB read limit), none older than
/// `maximumAgeSeconds`; each entry is a receipt URL (at most 2048 bytes) and a body of at most 4096 bytes.
/// Entries are kept per origin (`scheme://host:port`): each origin has its own dropped count (reported only to
/// it) and its own backoff. An outbox item that cannot be read (over the read limit, or not as written) is
/// replaced by a fresh one that counts what was lost as dropped, so it never fails for ever.
///
/// Items (first access group, `alwaysThisDeviceOnly`: a `keychainLocked` report is queued before the first
/// unlock too; sealed under the store key like every item, so queued tokens are not readable on disk):
/// - `genericPassword@sealedpush.receipts@outbox.item`: `{"next", "dropped", "origins": [{"origin", "dropped",
///   "failures", "retry_at", "touched"}], "entries": [{"seq", "url", "queued_at", "body"}]}` (top-level
///   `dropped`: entries lost with no origin known, never sent to any collector);
/// - `genericPassword@sealedpush.receipts@report-window.item`: `[{"reason", "kid", "last", "suppressed"}]`;
/// - `genericPassword@sealedpush.receipts@report-url.item`: the report URL;
/// - `genericPassword@sealedpush.receipts@reveal-tickets.item`: `[{"request", "url", "token", "id", "until"}]`,
///   the outer receipts of held messages the content extension sends `revealed` receipts for (reveal v1 §6),
///   by notification request identifier; at most `maximumRevealTickets`, expired ones dropped.
public struct ReceiptOutboxStore: Sendable {
    static let service = "sealedpush.receipts"
    static let outboxAccount = "outbox"
    static let windowAccount = "report-window"
    static let reportURLAccount = "report-url"
    static let ticketsAccount = "reveal-tickets"
    /// The most `revealed` receipt tickets kept; beyond it the oldest kept go (their receipts are then not sent).
    public static let maximumRevealTickets = 200
    static let logger = Logger(label: "sealedpush.receipts")

    /// The store holding the items.
    public let store: KeychainStore
    /// The most entries kept; beyond it the oldest are dropped and counted (1000).
    public let capacity: Int
    /// Entries older than this many seconds are dropped and counted (7 days).
    public let maximumAgeSeconds: Int64
    /// The most bytes the encoded outbox may hold; beyond it the oldest entries are dropped and counted (512 KiB,
    /// so the sealed, base64-encoded item file stays well under the store's 1 MiB read limit).
    public let maximumEncodedBytes: Int
    /// The first backoff of an origin that failed, in seconds (60); it doubles with every failure in a row.
    public let backoffBaseSeconds: Int64
    /// The longest backoff, in seconds (1 hour).
    public let backoffCapSeconds: Int64

    /// The default `maximumEncodedBytes`: 512 KiB.
    public static let defaultMaximumEncodedBytes = 512 * 1024

    /// The outbox of `store`.
    public init(store: KeychainStore, capacity: Int = 1000, maximumAgeSeconds: Int64 = 7 * 86_400,
                maximumEncodedBytes: Int = ReceiptOutboxStore.defaultMaximumEncodedBytes,
                backoffBaseSeconds: Int64 = 60, backoffCapSeconds: Int64 = 3600) {
        self.store = store
        self.capacity = max(1, capacity)
        self.maximumAgeSeconds = maximumAgeSeconds
        self.maximumEncodedBytes = max(16 * 1024, maximumEncodedBytes)
        self.backoffBaseSeconds = max(1, backoffBaseSeconds)
        self.backoffCapSeconds = max(self.backoffBaseSeconds, backoffCapSeconds)
    }

    /// One origin's state in the outbox.
    struct OriginState: Equatable {
        var dropped = 0
        var failures = 0
        /// Not tried before this device time; 0: may be tried now.
        var retryAt: Int64 = 0
        /// When an entry for it was last queued.
        var touched: Int64 = 0
    }

    struct Outbox {
        var next: UInt64 = 1
        /// Entries lost with no origin known (an outbox that could not be read): shown, never sent.
        var dropped = 0
        var origins: [String: OriginState] = [:]
        var entries: [ReceiptOutboxEntry] = []

        var totalDropped: Int { dropped + origins.values.reduce(0) { $0 + $1.dropped } }

        /// Counts `entry` as dropped at its origin.
        mutating func countDropped(_ entry: ReceiptOutboxEntry) {
            if let origin = HTTPURL(entry.url)?.origin { origins[origin, default: OriginState()].dropped += 1 } else { dropped += 1 }
        }
    }

    // MARK: Report URL

    /// The device's report URL, or `nil` (none by default).
    public func reportURL() throws(KeychainError) -> String? {
        do {
            let item = try store.read(itemClass: .genericPassword, service: Self.service, account: Self.reportURLAccount,
                                      accessGroup: store.accessGroups[0])
            let text = String(decoding: item.data?.unsafeCopyToArray() ?? [], as: UTF8.self)
            return text.isEmpty ? nil : text
        } catch .itemNotFound { return nil }
    }

    /// Sets (or with `nil` removes) the report URL; it must be a receipt URL (§1: https, http only to loopback).
    public func setReportURL(_ url: String?) throws(KeychainError) {
        guard let url else {
            do {
                try store.delete(KeychainQuery(itemClass: .genericPassword, accessGroup: store.accessGroups[0], service: Self.service,
                                               account: Self.reportURLAccount))
            } catch .itemNotFound {}
            return
        }
        if let problem = ReceiptRequest.urlProblem(url) { throw .param("the report URL \(problem)") }
        try store.modify(itemClass: .genericPassword, service: Self.service, account: Self.reportURLAccount,
                         accessGroup: store.accessGroups[0], accessibility: .alwaysThisDeviceOnly) { _ in SecureBytes(Array(url.utf8)) }
    }

    // MARK: Outbox

    /// Reads the outbox without changing it (no lock: rename atomicity is enough): every entry, oldest first, and
    /// every dropped entry not yet reported, all origins together. An outbox that cannot be read is replaced by a
    /// fresh one first (a write).
    public func entries() throws(KeychainError) -> (entries: [ReceiptOutboxEntry], dropped: Int) {
        let outbox = try readOutbox()
        return (outbox.entries, outbox.totalDropped)
    }

    /// The outbox as it is; an unreadable one is replaced (one transaction) and the fresh one returned.
    func readOutbox() throws(KeychainError) -> Outbox {
        do throws(KeychainError) {
            let item = try store.read(itemClass: .genericPassword, service: Self.service, account: Self.outboxAccount,
                                      accessGroup: store.accessGroups[0])
            if let outbox = Self.decodeOutbox(item.data) { return outbox }
        } catch .itemNotFound {
            return Outbox()
        } catch let error where isOutboxFileUnreadable(error) {}
        // Not as written, or over the read limit: the recovering write path.
        return try modifyOutbox { (o: inout Outbox) throws(KeychainError) in o }
    }

    private var outboxPath: String {
        store.path(of: ItemIdentity(itemClass: .genericPassword, accessGroup: store.accessGroups[0], service: Self.service,
                                    account: Self.outboxAccount)).string
    }

    /// Whether `error` says the outbox item's file cannot be read as an item (over the read limit, cut short, a
    /// header or sealed line not as written). Not an integrity failure: a file that fails authentication is left
    /// as it is for whoever investigates.
    private func isOutboxFileUnreadable(_ error: KeychainError) -> Bool {
        if case let .decode(path, _) = error { return path == outboxPath }
        return false
    }

    /// Applies `change` to the outbox under the writers' lock, bounds it, and writes it back durably: one
    /// transaction. An outbox that cannot be read is replaced, in the same transaction, by a fresh one that counts
    /// what was lost as dropped (logged at error, without content).
    func modifyOutbox<R>(_ change: (inout Outbox) throws(KeychainError) -> R) throws(KeychainError) -> R {
        try store.transaction { (tx: KeychainStore) throws(KeychainError) -> R in
            var result: R?
            do throws(KeychainError) {
                try tx.modify(itemClass: .genericPassword, service: Self.service, account: Self.outboxAccount,
                              accessGroup: tx.accessGroups[0], accessibility: .alwaysThisDeviceOnly) { (old) throws(KeychainError) -> SecureBytes in
                    var outbox = Self.decodeOutbox(old) ?? Self.recovered(from: old)
                    result = try change(&outbox)
                    return bounded(&outbox)
                }
            } catch let error where isOutboxFileUnreadable(error) {
                // The file itself does not read (over the read limit, or not an item): its entries cannot be counted.
                Self.logger.error("the receipt outbox item could not be read; replaced it with a fresh outbox counting 1 lost entry as dropped",
                                  metadata: ["why": "\(Self.unreadableReason(error))"])
                var outbox = Outbox()
                outbox.dropped = 1
                result = try change(&outbox)
                let date = tx.now()
                try tx.writeItem(ItemHeader(itemClass: .genericPassword, accessGroup: tx.accessGroups[0], service: Self.service,
                                            account: Self.outboxAccount, label: nil, accessibility: .alwaysThisDeviceOnly,
                                            applicationTag: nil, created: date, modified: date), data: bounded(&outbox))
            }
            return result!
        }
    }

    private static func unreadableReason(_ error: KeychainError) -> String {
        if case let .decode(_, why) = error { return why }
        return "unreadable"
    }

    /// Adds an entry; when this returns it is on disk. Beyond the outbox's bounds the oldest entries are dropped and
    /// counted. Throws `param` for an entry that is not bounded: a URL that is not a receipt URL (over 2048 bytes,
    /// not https or loopback http), or a body over 4096 bytes.
    public func enqueue(url: String, message: ReceiptMessage, now: Int64) throws(KeychainError) {
        if let problem = ReceiptRequest.urlProblem(url) { throw .param("the receipt URL \(problem); it was not queued") }
        guard let origin = HTTPURL(url)?.origin else { throw .param("the receipt URL is not an absolute http(s) URL; it was not queued") }
        let size = JSON.serialize(.object(message.jsonObject(dropped: Int(Int32.max)))).count
        guard size <= ReceiptMessage.maximumBodyBytes else {
            throw .param("the receipt body would be \(size) bytes, over the \(ReceiptMessage.maximumBodyBytes) a collector accepts; it was not queued")
        }
        try modifyOutbox { (o: inout Outbox) throws(KeychainError) in
            o.entries.append(ReceiptOutboxEntry(sequence: o.next, url: url, message: message, queuedAt: now))
            o.next += 1
            o.origins[origin, default: OriginState()].touched = now
            pruneOld(&o, now: now)
        }
    }

    /// The entries waiting (oldest first) and every dropped entry not yet reported; entries past the age limit are
    /// dropped first (a write only when there are any).
    public func pending(now: Int64) throws(KeychainError) -> (entries: [ReceiptOutboxEntry], dropped: Int) {
        let outbox = try prunedOutbox(now: now)
        return (outbox.entries, outbox.totalDropped)
    }

    /// The outbox by origin (origins in the order of their oldest entry, then those with only a dropped count):
    /// each origin's entries oldest first, its dropped count and its backoff. Entries past the age limit are
    /// dropped first (a write only when there are any).
    public func queues(now: Int64) throws(KeychainError) -> [ReceiptOriginQueue] {
        let outbox = try prunedOutbox(now: now)
        var order: [String] = []
        var byOrigin: [String: [ReceiptOutboxEntry]] = [:]
        for entry in outbox.entries {
            guard let origin = HTTPURL(entry.url)?.origin else { continue }
            if byOrigin[origin] == nil { order.append(origin) }
            byOrigin[origin, default: []].append(entry)
        }
        order += outbox.origins.keys.filter { byOrigin[$0] == nil }.sorted()
        return order.map { origin in
            let state = outbox.origins[origin] ?? OriginState()
            // A retry time further away than the longest backoff means the device clock went back: due now.
            let waiting = state.retryAt > now && state.retryAt - now <= backoffCapSeconds
            return ReceiptOriginQueue(origin: origin, entries: byOrigin[origin] ?? [], dropped: state.dropped, failures: state.failures,
                                      retryAt: waiting ? state.retryAt : nil)
        }
    }

    private func prunedOutbox(now: Int64) throws(KeychainError) -> Outbox {
        let current = try readOutbox()
        guard needsPruning(current, now: now) else { return current }
        return try modifyOutbox { (o: inout Outbox) throws(KeychainError) in
            pruneOld(&o, now: now)
            return o
        }
    }

    /// Records what a flush of `origin` came to, in one transaction: removes the entries sent or refused for good,
    /// subtracts `droppedReported` from the origin's dropped count, and, when the origin `failed` (no answer, or
    /// neither `2xx` nor a final refusal), backs it off: `backoffBaseSeconds` doubled for every failure in a row,
    /// at most `backoffCapSeconds`; otherwise its backoff is cleared.
    public func settle(origin: String, removing sequences: [UInt64], droppedReported: Int, failed: Bool, now: Int64) throws(KeychainError) {
        let done = Set(sequences)
        try modifyOutbox { (o: inout Outbox) throws(KeychainError) in
            o.entries.removeAll { done.contains($0.sequence) }
            var state = o.origins[origin] ?? OriginState(touched: now)
            state.dropped = max(0, state.dropped - droppedReported)
            if failed {
                state.failures += 1
                state.retryAt = now + backoff(afterFailures: state.failures)
            } else {
                state.failures = 0
                state.retryAt = 0
            }
            o.origins[origin] = state
            pruneOld(&o, now: now)
        }
    }

    /// Removes entries by sequence number (dropped counts and backoffs unchanged).
    public func remove(sequences: [UInt64]) throws(KeychainError) {
        let done = Set(sequences)
        try modifyOutbox { (o: inout Outbox) throws(KeychainError) in o.entries.removeAll { done.contains($0.sequence) } }
    }

    /// The wait after `failures` failures in a row: base × 2^(failures − 1), at most the cap.
    func backoff(afterFailures failures: Int) -> Int64 {
        let doublings = min(max(0, failures - 1), 40)
        let (wait, overflow) = backoffBaseSeconds.multipliedReportingOverflow(by: Int64(1) << doublings)
        return overflow ? backoffCapSeconds : min(wait, backoffCapSeconds)
    }

    private func isTooOld(_ entry: ReceiptOutboxEntry, now: Int64) -> Bool { now - entry.queuedAt > maximumAgeSeconds }

    private func needsPruning(_ o: Outbox, now: Int64) -> Bool {
        if o.entries.contains(where: { isTooOld($0, now: now) }) { return true }
        let live = Set(o.entries.compactMap { HTTPURL($0.url)?.origin })
        return o.origins.contains { !live.contains($0.key) && isStale($0.value, now: now) }
    }

    /// An origin record with no entries that holds nothing, or was last queued to longer ago than the age limit.
    private func isStale(_ state: OriginState, now: Int64) -> Bool {
        (state.dropped == 0 && state.failures == 0) || now - state.touched > maximumAgeSeconds
    }

    /// Drops (and counts) entries past the age limit, then forgets origin records with no entries that are stale.
    private func pruneOld(_ o: inout Outbox, now: Int64) {
        var kept: [ReceiptOutboxEntry] = []
        kept.reserveCapacity(o.entries.count)
        for entry in o.entries {
            if isTooOld(entry, now: now) { o.countDropped(entry) } else { kept.append(entry) }
        }
        o.entries = kept
        // A record recovered without a time (an outbox that was not as written) starts its age now.
        for (origin, state) in o.origins where state.touched == 0 { o.origins[origin]?.touched = now }
        let live = Set(o.entries.compactMap { HTTPURL($0.url)?.origin })
        o.origins = o.origins.filter { live.contains($0.key) || !isStale($0.value, now: now) }
    }

    /// Applies the count and byte bounds (the oldest entries dropped and counted at their origins; origin records
    /// with no entries forgotten first, least recently queued first) and returns the encoded outbox.
    func bounded(_ o: inout Outbox) -> SecureBytes {
        if o.entries.count > capacity {
            for entry in o.entries.prefix(o.entries.count - capacity) { o.countDropped(entry) }
            o.entries.removeFirst(o.entries.count - capacity)
        }
        func idleOrigins() -> [String] {
            let live = Set(o.entries.compactMap { HTTPURL($0.url)?.origin })
            return o.origins.filter { !live.contains($0.key) }.sorted { ($0.value.touched, $0.key) < ($1.value.touched, $1.key) }.map(\.key)
        }
        let idle = idleOrigins()
        if idle.count > capacity { for origin in idle.prefix(idle.count - capacity) { o.origins[origin] = nil } }
        while true {
            let bytes = Self.encodeOutbox(o)
            let excess = bytes.count - maximumEncodedBytes
            if excess <= 0 { return SecureBytes(bytes) }
            var freed = 0
            for origin in idleOrigins() where freed < excess {
                freed += Self.encode(origin: origin, o.origins[origin]!).count + 1
                o.origins[origin] = nil
            }
            var dropCount = 0
            for entry in o.entries where freed < excess {
                freed += Self.encode(entry: entry).count + 1
                dropCount += 1
            }
            for entry in o.entries.prefix(dropCount) { o.countDropped(entry) }
            o.entries.removeFirst(dropCount)
            if freed == 0 { return SecureBytes(bytes) }  // nothing left to drop (cannot happen: the cap is at least 16 KiB)
        }
    }

    static func encode(entry e: ReceiptOutboxEntry) -> [UInt8] {
        JSON.serialize(entryValue(e))
    }

    static func entryValue(_ e: ReceiptOutboxEntry) -> JSONValue {
        .object(JSONObject([("seq", .int(Int64(clamping: e.sequence))), ("url", .string(e.url)), ("queued_at", .int(e.queuedAt)),
                            ("body", .object(e.message.jsonObject()))]))
    }

    static func originValue(_ origin: String, _ s: OriginState) -> JSONValue {
        .object(JSONObject([("origin", .string(origin)), ("dropped", .int(Int64(s.dropped))), ("failures", .int(Int64(s.failures))),
                            ("retry_at", .int(s.retryAt)), ("touched", .int(s.touched))]))
    }

    static func encode(origin: String, _ s: OriginState) -> [UInt8] { JSON.serialize(originValue(origin, s)) }

    static func encodeOutbox(_ o: Outbox) -> [UInt8] {
        JSON.serialize(.object(JSONObject([
            ("next", .int(Int64(clamping: o.next))), ("dropped", .int(Int64(o.dropped))),
            ("origins", .array(o.origins.sorted { $0.key < $1.key }.map { originValue($0.key, $0.value) })),
            ("entries", .array(o.entries.map(entryValue))),
        ])))
    }

    /// The outbox as written (this version's, or the one before #22, which had no `origins`), or `nil` when the
    /// secret is not as written. An empty or missing secret is an empty outbox.
    static func decodeOutbox(_ data: SecureBytes?) -> Outbox? {
        guard let data, !data.isEmpty else { return Outbox() }
        guard case let .object(o)? = try? JSON.parse(data.unsafeCopyToArray()), case let .int(next)? = o["next"], next >= 1,
              case let .int(dropped)? = o["dropped"], dropped >= 0, dropped <= Int64(Int32.max),
              case let .array(list)? = o["entries"] else { return nil }
        var out = Outbox(next: UInt64(next), dropped: Int(dropped), origins: [:], entries: [])
        if let origins = o["origins"] {
            guard case let .array(rows) = origins else { return nil }
            for row in rows {
                guard case let .object(r) = row, case let .string(origin)? = r["origin"], case let .int(d)? = r["dropped"],
                      (0...Int64(Int32.max)).contains(d), case let .int(failures)? = r["failures"], (0...1_000_000).contains(failures),
                      case let .int(retryAt)? = r["retry_at"], case let .int(touched)? = r["touched"] else { return nil }
                out.origins[origin] = OriginState(dropped: Int(d), failures: Int(failures), retryAt: retryAt, touched: touched)
            }
        }
        for value in list {
            guard case let .object(e) = value, case let .int(seq)? = e["seq"], seq >= 1, case let .string(url)? = e["url"],
                  let origin = HTTPURL(url)?.origin, case let .int(queuedAt)? = e["queued_at"], case let .object(body)? = e["body"],
                  let (message, _) = ReceiptMessage.parse(JSON.serialize(.object(body))) else { return nil }
            out.entries.append(ReceiptOutboxEntry(sequence: UInt64(seq), url: url, message: message, queuedAt: queuedAt))
            if out.origins[origin] == nil { out.origins[origin] = OriginState(touched: queuedAt) }
        }
        return out
    }

    /// A fresh outbox replacing a secret that is not as written: it counts every entry the old one listed as dropped
    /// (at its origin when its URL reads), plus the dropped count it held; one when nothing can be counted.
    /// Logged at error, without content.
    static func recovered(from data: SecureBytes?) -> Outbox {
        var out = Outbox()
        var lost = 0
        if let data, case let .object(o)? = try? JSON.parse(data.unsafeCopyToArray()), case let .array(list)? = o["entries"] {
            if case let .int(next)? = o["next"], next >= 1 { out.next = UInt64(next) }
            if case let .int(dropped)? = o["dropped"], (0...Int64(Int32.max)).contains(dropped) { out.dropped += Int(dropped) }
            for value in list {
                if case let .object(e) = value, case let .string(url)? = e["url"], let origin = HTTPURL(url)?.origin {
                    out.origins[origin, default: OriginState()].dropped += 1
                } else {
                    out.dropped += 1
                }
            }
            lost = list.count
            let maxSeq = list.compactMap { $0.objectValue?["seq"]?.intValue }.filter { $0 >= 1 }.max() ?? 0
            out.next = max(out.next, UInt64(maxSeq) + 1)
        } else {
            out.dropped = 1
            lost = 1
        }
        logger.error("the receipt outbox was not as written; replaced it with a fresh outbox counting the lost entries as dropped",
                     metadata: ["lost": "\(lost)"])
        return out
    }

    // MARK: Report window

    /// Records a failure of `(reason, kid)`: the count a report made now stands for, or `nil` within `window`
    /// seconds of the pair's last report (the failure is then counted for the next one). One transaction.
    public func noteFailure(reason: ReasonCode, kid: KeyID?, now: Int64, window: Int64) throws(KeychainError) -> Int? {
        var result: Int?
        try store.modify(itemClass: .genericPassword, service: Self.service, account: Self.windowAccount,
                         accessGroup: store.accessGroups[0], accessibility: .alwaysThisDeviceOnly) { (old) throws(KeychainError) -> SecureBytes in
            var rows: [JSONObject] = []
            if let old, !old.isEmpty {
                guard case let .array(list)? = try? JSON.parse(old.unsafeCopyToArray()) else {
                    throw .decode(path: "\(Self.service)/\(Self.windowAccount)", why: "the report window item is not as written")
                }
                rows = list.compactMap(\.objectValue)
            }
            let kidValue: JSONValue = kid.map { .string($0.hex) } ?? .null
            // Pairs whose window has long passed carry nothing worth keeping.
            rows.removeAll { ($0["last"]?.intValue ?? 0) < now - window && ($0["suppressed"]?.intValue ?? 0) == 0 }
            if let index = rows.firstIndex(where: { $0["reason"] == .string(reason.rawValue) && $0["kid"] == kidValue }) {
                let last = rows[index]["last"]?.intValue ?? .min
                let suppressed = rows[index]["suppressed"]?.intValue ?? 0
                if now >= last, now - last < window {
                    rows[index]["suppressed"] = .int(suppressed + 1)
                    result = nil
                } else {
                    rows[index]["last"] = .int(now)
                    rows[index]["suppressed"] = .int(0)
                    result = Int(suppressed) + 1
                }
            } else {
                rows.append(JSONObject([("reason", .string(reason.rawValue)), ("kid", kidValue), ("last", .int(now)), ("suppressed", .int(0))]))
                result = 1
            }
            return SecureBytes(JSON.serialize(.array(rows.map { .object($0) })))
        }
        return result
    }

    // MARK: Reveal receipt tickets

    /// Keeps the outer receipt of a held message for the notification `requestIdentifier` (reveal v1 §6), replacing
    /// one kept for it; expired tickets go, and beyond `maximumRevealTickets` the oldest kept. One transaction.
    public func keepRevealTicket(url: String, token: String, messageID: String, keepUntil: Int64, requestIdentifier: String,
                                 now: Int64) throws(KeychainError) {
        try modifyTickets { (rows: inout [JSONObject]) in
            rows.removeAll { $0["request"] == .string(requestIdentifier) || ($0["until"]?.intValue ?? 0) < now }
            rows.append(JSONObject([("request", .string(requestIdentifier)), ("url", .string(url)), ("token", .string(token)),
                                    ("id", .string(messageID)), ("until", .int(keepUntil))]))
            if rows.count > Self.maximumRevealTickets { rows.removeFirst(rows.count - Self.maximumRevealTickets) }
            return ()
        }
    }

    /// Removes and returns the unexpired ticket of `requestIdentifier` (url, token, message id), and every other
    /// ticket for the same message id: a message's `revealed` receipt goes out once. One transaction.
    public func takeRevealTicket(requestIdentifier: String, now: Int64) throws(KeychainError) -> (url: String, token: String, messageID: String, keepUntil: Int64)? {
        try modifyTickets { (rows: inout [JSONObject]) in
            rows.removeAll { ($0["until"]?.intValue ?? 0) < now }
            guard let row = rows.first(where: { $0["request"] == .string(requestIdentifier) }),
                  case let .string(url)? = row["url"], case let .string(token)? = row["token"], case let .string(id)? = row["id"],
                  let until = row["until"]?.intValue else { return nil }
            rows.removeAll { $0["id"] == .string(id) }
            return (url, token, id, until)
        }
    }

    private func modifyTickets<R>(_ change: (inout [JSONObject]) -> R) throws(KeychainError) -> R {
        var result: R?
        try store.modify(itemClass: .genericPassword, service: Self.service, account: Self.ticketsAccount,
                         accessGroup: store.accessGroups[0], accessibility: .alwaysThisDeviceOnly) { (old) throws(KeychainError) -> SecureBytes in
            var rows: [JSONObject] = []
            if let old, !old.isEmpty {
                if case let .array(list)? = try? JSON.parse(old.unsafeCopyToArray()) {
                    rows = list.compactMap(\.objectValue)
                } else {
                    // Not as written: the tickets are lost (their revealed receipts are not sent), never the message.
                    Self.logger.error("the revealed receipt tickets were not as written; starting with none")
                }
            }
            result = change(&rows)
            return SecureBytes(JSON.serialize(.array(rows.map { .object($0) })))
        }
        return result!
    }
}
