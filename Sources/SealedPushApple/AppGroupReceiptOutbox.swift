#if canImport(UserNotifications)
public import Foundation
public import SealedPushWire
public import SealedPushCrypto
public import SealedPushReceiver
public import Logging

/// The receipt outbox, failure-report window and `revealed` receipt tickets in the app group container (receipts v1
/// §2, §3; reveal v1 §6): iOS's counterpart of `ReceiptOutboxStore` in `SealedPushKeychain`, with its semantics.
///
/// **Files**, each changed under its own `flock` and rewritten whole — a new file of its class, `F_FULLFSYNC`,
/// `rename`, directory sync (`AppGroupFile`) — so a crash leaves the old or the new file, and an entry is on disk
/// when `enqueue` returns:
/// - `receipt-outbox.json`, protection `completeUntilFirstUserAuthentication` (queued receipts carry their tokens,
///   bearer secrets until sent): `{"next", "dropped", "origins": [{"origin", "dropped", "failures", "retry_at",
///   "touched"}], "entries": [{"seq", "url", "queued_at", "body"}]}`, as the Linux store's item holds it;
/// - `report-window.json`, protection **`none`**: `[{"reason", "kid", "last", "suppressed"}]`. It holds no secret —
///   reason codes, envelope key ids (public, in every push), times — and a `keychainLocked` failure comes before the
///   first unlock, when a file of any other class cannot be read: with class C, every such report would be lost;
///   with `none` it is counted and sent (queued only if the outbox can be written, i.e. after the first unlock);
/// - `reveal-tickets.json`, protection `completeUntilFirstUserAuthentication` (URL and token of held messages):
///   `[{"request", "url", "token", "id", "until"}]`.
///
/// **Bounds** (as the Linux store): at most `capacity` (1000) entries and `maximumEncodedBytes` (512 KiB) encoded,
/// none older than `maximumAgeSeconds` (7 days): the oldest are dropped first and counted at their origin; each
/// entry's URL is a receipt URL (at most 2048 bytes) and its body at most 4096 bytes, else `enqueue` refuses it.
/// Entries are kept per origin (`scheme://host:port`), each with its own dropped count (reported only to it) and
/// backoff (`backoffBaseSeconds` doubling per failure in a row, at most `backoffCapSeconds`). At most
/// `maximumRevealTickets` tickets; a `revealed` receipt goes out once per message id.
///
/// **Damage**: an outbox that cannot be read (larger than 1 MiB, or not as written) is replaced by a fresh one that
/// counts the entries it listed as dropped at their origins (one, at no origin, when nothing can be counted), logged
/// at error without content. A damaged report window or ticket file starts empty (logged): a report may then go out
/// inside a window, or a `revealed` receipt not at all — never a failed message. (The Linux store throws for a
/// damaged window, which would end failure reports for good.)
public struct AppGroupReceiptOutbox: ReceiptOutbox, RevealReceiptTickets, Sendable {
    /// The outbox's file name.
    public static let outboxFileName = "receipt-outbox.json"
    /// The report window's file name.
    public static let reportWindowFileName = "report-window.json"
    /// The ticket file's name.
    public static let revealTicketsFileName = "reveal-tickets.json"
    /// The outbox's protection class.
    public static let outboxProtection = AppGroupFileProtection.completeUntilFirstUserAuthentication
    /// The report window's protection class (see the type's documentation).
    public static let reportWindowProtection = AppGroupFileProtection.noProtection
    /// The ticket file's protection class.
    public static let revealTicketsProtection = AppGroupFileProtection.completeUntilFirstUserAuthentication
    /// The most `revealed` receipt tickets kept; beyond it the oldest kept go (their receipts are then not sent).
    public static let maximumRevealTickets = 200
    /// The most `(reason, kid)` pairs the report window keeps; beyond it the least recently reported go.
    public static let maximumReportWindowPairs = 1000
    /// The default `maximumEncodedBytes`: 512 KiB.
    public static let defaultMaximumEncodedBytes = 512 * 1024
    /// The largest file of the three that is read (1 MiB); a larger one is damaged.
    static let readLimit = 1 << 20

    /// The directory holding the files (and their locks).
    public let directory: URL
    /// The most entries kept; beyond it the oldest are dropped and counted (1000).
    public let capacity: Int
    /// Entries older than this many seconds are dropped and counted (7 days).
    public let maximumAgeSeconds: Int64
    /// The most bytes the encoded outbox may hold; beyond it the oldest entries are dropped and counted (512 KiB).
    public let maximumEncodedBytes: Int
    /// The first backoff of an origin that failed, in seconds (60); it doubles with every failure in a row.
    public let backoffBaseSeconds: Int64
    /// The longest backoff, in seconds (1 hour).
    public let backoffCapSeconds: Int64
    /// The longest a call waits for another process holding a file's lock.
    public let lockTimeout: Duration
    /// Where damaged files are logged (counts only, never a URL, token or id).
    public var logger: Logging.Logger
    /// The most `(reason, kid)` pairs the report window keeps (`maximumReportWindowPairs`; tests lower it).
    let reportWindowPairs: Int
    let files: any AppGroupFileSystem

    /// The outbox in `directory` (a directory of the app group container; made `0700` if missing).
    public init(directory: URL, capacity: Int = 1000, maximumAgeSeconds: Int64 = 7 * 86_400,
                maximumEncodedBytes: Int = AppGroupReceiptOutbox.defaultMaximumEncodedBytes,
                backoffBaseSeconds: Int64 = 60, backoffCapSeconds: Int64 = 3600, lockTimeout: Duration = .seconds(1),
                logger: Logging.Logger = Logging.Logger(label: "sealedpush.receipts")) {
        self.init(directory: directory, capacity: capacity, maximumAgeSeconds: maximumAgeSeconds, maximumEncodedBytes: maximumEncodedBytes,
                  backoffBaseSeconds: backoffBaseSeconds, backoffCapSeconds: backoffCapSeconds, lockTimeout: lockTimeout, logger: logger,
                  files: SystemAppGroupFiles())
    }

    /// The outbox in `SealedPush` in the container of the app group `groupIdentifier`; throws `containerUnavailable`
    /// when the process's App Groups entitlement does not list the group.
    public init(appGroup groupIdentifier: String, capacity: Int = 1000, maximumAgeSeconds: Int64 = 7 * 86_400,
                maximumEncodedBytes: Int = AppGroupReceiptOutbox.defaultMaximumEncodedBytes,
                backoffBaseSeconds: Int64 = 60, backoffCapSeconds: Int64 = 3600, lockTimeout: Duration = .seconds(1),
                logger: Logging.Logger = Logging.Logger(label: "sealedpush.receipts")) throws(AppGroupStoreError) {
        let files = SystemAppGroupFiles()
        self.init(directory: try AppGroupContainer.directory(groupIdentifier: groupIdentifier, files: files), capacity: capacity,
                  maximumAgeSeconds: maximumAgeSeconds, maximumEncodedBytes: maximumEncodedBytes, backoffBaseSeconds: backoffBaseSeconds,
                  backoffCapSeconds: backoffCapSeconds, lockTimeout: lockTimeout, logger: logger, files: files)
    }

    init(directory: URL, capacity: Int, maximumAgeSeconds: Int64, maximumEncodedBytes: Int, backoffBaseSeconds: Int64,
         backoffCapSeconds: Int64, lockTimeout: Duration, logger: Logging.Logger, files: any AppGroupFileSystem,
         reportWindowPairs: Int = AppGroupReceiptOutbox.maximumReportWindowPairs) {
        self.reportWindowPairs = max(1, reportWindowPairs)
        self.directory = directory
        self.capacity = max(1, capacity)
        self.maximumAgeSeconds = maximumAgeSeconds
        self.maximumEncodedBytes = min(max(16 * 1024, maximumEncodedBytes), Self.readLimit / 2)
        self.backoffBaseSeconds = max(1, backoffBaseSeconds)
        self.backoffCapSeconds = max(self.backoffBaseSeconds, backoffCapSeconds)
        self.lockTimeout = lockTimeout
        self.logger = logger
        self.files = files
    }

    func file(_ name: String, _ protection: AppGroupFileProtection) -> AppGroupFile {
        AppGroupFile(url: directory.appendingPathComponent(name), protection: protection, files: files, lockTimeout: lockTimeout)
    }

    var outboxFile: AppGroupFile { file(Self.outboxFileName, Self.outboxProtection) }
    var windowFile: AppGroupFile { file(Self.reportWindowFileName, Self.reportWindowProtection) }
    var ticketsFile: AppGroupFile { file(Self.revealTicketsFileName, Self.revealTicketsProtection) }

    /// One origin's state in the outbox.
    struct OriginState: Equatable {
        var dropped = 0
        var failures = 0
        /// Not tried before this device time; 0: may be tried now.
        var retryAt: Int64 = 0
        /// When an entry for it was last queued.
        var touched: Int64 = 0
    }

    struct Outbox: Equatable {
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

    // MARK: Outbox

    /// Adds an entry; when this returns it is on disk. Beyond the bounds the oldest entries are dropped and counted.
    /// Throws `invalidEntry` for an entry that is not bounded: a URL that is not a receipt URL (over 2048 bytes, not
    /// https or loopback http), or a body over 4096 bytes.
    public func enqueue(url: String, message: ReceiptMessage, now: Int64) throws(AppGroupStoreError) {
        if let problem = ReceiptRequest.urlProblem(url) { throw .invalidEntry("the receipt URL \(problem)") }
        guard let origin = HTTPURL(url)?.origin else { throw .invalidEntry("the receipt URL is not an absolute http(s) URL") }
        let size = JSON.serialize(.object(message.jsonObject(dropped: Int(Int32.max)))).count
        guard size <= ReceiptMessage.maximumBodyBytes else {
            throw .invalidEntry("the receipt body would be \(size) bytes, over the \(ReceiptMessage.maximumBodyBytes) a collector accepts")
        }
        try modifyOutbox { o in
            o.entries.append(ReceiptOutboxEntry(sequence: o.next, url: url, message: message, queuedAt: now))
            o.next += 1
            o.origins[origin, default: OriginState()].touched = now
            pruneOld(&o, now: now)
        }
    }

    /// Every entry, oldest first, and every dropped entry not yet reported, all origins together (no lock; a damaged
    /// outbox is replaced first).
    public func entries() throws(AppGroupStoreError) -> (entries: [ReceiptOutboxEntry], dropped: Int) {
        let o = try readOutbox()
        return (o.entries, o.totalDropped)
    }

    /// The entries waiting (oldest first) and every dropped entry not yet reported; entries past the age limit are
    /// dropped first (a write only when there are any).
    public func pending(now: Int64) throws(AppGroupStoreError) -> (entries: [ReceiptOutboxEntry], dropped: Int) {
        let o = try prunedOutbox(now: now)
        return (o.entries, o.totalDropped)
    }

    /// The outbox by origin (origins in the order of their oldest entry, then those with only a dropped count): each
    /// origin's entries oldest first, its dropped count and its backoff. Entries past the age limit are dropped first.
    public func queues(now: Int64) throws(AppGroupStoreError) -> [ReceiptOriginQueue] {
        let o = try prunedOutbox(now: now)
        var order: [String] = []
        var byOrigin: [String: [ReceiptOutboxEntry]] = [:]
        for entry in o.entries {
            guard let origin = HTTPURL(entry.url)?.origin else { continue }
            if byOrigin[origin] == nil { order.append(origin) }
            byOrigin[origin, default: []].append(entry)
        }
        order += o.origins.keys.filter { byOrigin[$0] == nil }.sorted()
        return order.map { origin in
            let state = o.origins[origin] ?? OriginState()
            // A retry time further away than the longest backoff means the device clock went back: due now.
            let waiting = state.retryAt > now && state.retryAt - now <= backoffCapSeconds
            return ReceiptOriginQueue(origin: origin, entries: byOrigin[origin] ?? [], dropped: state.dropped, failures: state.failures,
                                      retryAt: waiting ? state.retryAt : nil)
        }
    }

    /// Records a flush of `origin` in one change: removes the entries sent or refused for good, subtracts
    /// `droppedReported` from its dropped count, and backs it off when it `failed` (else clears its backoff).
    public func settle(origin: String, removing sequences: [UInt64], droppedReported: Int, failed: Bool, now: Int64) throws(AppGroupStoreError) {
        let done = Set(sequences)
        try modifyOutbox { o in
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
    public func remove(sequences: [UInt64]) throws(AppGroupStoreError) {
        let done = Set(sequences)
        try modifyOutbox { o in o.entries.removeAll { done.contains($0.sequence) } }
    }

    /// The wait after `failures` failures in a row: base × 2^(failures − 1), at most the cap.
    func backoff(afterFailures failures: Int) -> Int64 {
        let doublings = min(max(0, failures - 1), 40)
        let (wait, overflow) = backoffBaseSeconds.multipliedReportingOverflow(by: Int64(1) << doublings)
        return overflow ? backoffCapSeconds : min(wait, backoffCapSeconds)
    }

    /// The outbox as it is (no lock: every change is an atomic rename); a damaged one is replaced first.
    func readOutbox() throws(AppGroupStoreError) -> Outbox {
        switch try outboxFile.read(maximumBytes: Self.readLimit) {
        case .missing: return Outbox()
        case let .bytes(bytes): if let o = Self.decodeOutbox(bytes) { return o }
        case .oversized: break
        }
        return try modifyOutbox { o in o }
    }

    private func prunedOutbox(now: Int64) throws(AppGroupStoreError) -> Outbox {
        let current = try readOutbox()
        guard needsPruning(current, now: now) else { return current }
        return try modifyOutbox { o in
            pruneOld(&o, now: now)
            return o
        }
    }

    /// Applies `change` to the outbox under its lock, bounds it, and writes it back durably. A damaged outbox is
    /// replaced, in the same change, by a fresh one counting what was lost as dropped.
    func modifyOutbox<R>(_ change: (inout Outbox) -> R) throws(AppGroupStoreError) -> R {
        try outboxFile.update(maximumBytes: Self.readLimit) { (stored) throws(AppGroupStoreError) -> (write: [UInt8]?, result: R) in
            var o: Outbox
            switch stored {
            case .missing: o = Outbox()
            case let .bytes(bytes): o = Self.decodeOutbox(bytes) ?? recovered(from: bytes)
            case .oversized: o = recovered(from: nil)
            }
            let result = change(&o)
            return (bounded(&o), result)
        }
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

    /// Applies the count and byte bounds (the oldest entries dropped and counted at their origins; origin records with
    /// no entries forgotten first, least recently queued first) and returns the encoded outbox.
    func bounded(_ o: inout Outbox) -> [UInt8] {
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
            if excess <= 0 { return bytes }
            var freed = 0
            for origin in idleOrigins() where freed < excess {
                freed += JSON.serialize(Self.originValue(origin, o.origins[origin]!)).count + 1
                o.origins[origin] = nil
            }
            var dropCount = 0
            for entry in o.entries where freed < excess {
                freed += JSON.serialize(Self.entryValue(entry)).count + 1
                dropCount += 1
            }
            for entry in o.entries.prefix(dropCount) { o.countDropped(entry) }
            o.entries.removeFirst(dropCount)
            if freed == 0 { return bytes }  // nothing left to drop (cannot happen: the cap is at least 16 KiB)
        }
    }

    static func entryValue(_ e: ReceiptOutboxEntry) -> JSONValue {
        .object(JSONObject([("seq", .int(Int64(clamping: e.sequence))), ("url", .string(e.url)), ("queued_at", .int(e.queuedAt)),
                            ("body", .object(e.message.jsonObject()))]))
    }

    static func originValue(_ origin: String, _ s: OriginState) -> JSONValue {
        .object(JSONObject([("origin", .string(origin)), ("dropped", .int(Int64(s.dropped))), ("failures", .int(Int64(s.failures))),
                            ("retry_at", .int(s.retryAt)), ("touched", .int(s.touched))]))
    }

    static func encodeOutbox(_ o: Outbox) -> [UInt8] {
        JSON.serialize(.object(JSONObject([
            ("next", .int(Int64(clamping: o.next))), ("dropped", .int(Int64(o.dropped))),
            ("origins", .array(o.origins.sorted { $0.key < $1.key }.map { originValue($0.key, $0.value) })),
            ("entries", .array(o.entries.map(entryValue))),
        ])))
    }

    /// The outbox as written, or `nil` when it is not. An empty file is an empty outbox.
    static func decodeOutbox(_ bytes: [UInt8]) -> Outbox? {
        guard !bytes.isEmpty else { return Outbox() }
        guard case let .object(o)? = try? JSON.parse(bytes), case let .int(next)? = o["next"], next >= 1,
              case let .int(dropped)? = o["dropped"], dropped >= 0, dropped <= Int64(Int32.max),
              case let .array(rows)? = o["origins"], case let .array(list)? = o["entries"] else { return nil }
        var out = Outbox(next: UInt64(next), dropped: Int(dropped), origins: [:], entries: [])
        for row in rows {
            guard case let .object(r) = row, case let .string(origin)? = r["origin"], case let .int(d)? = r["dropped"],
                  (0...Int64(Int32.max)).contains(d), case let .int(failures)? = r["failures"], (0...1_000_000).contains(failures),
                  case let .int(retryAt)? = r["retry_at"], case let .int(touched)? = r["touched"] else { return nil }
            out.origins[origin] = OriginState(dropped: Int(d), failures: Int(failures), retryAt: retryAt, touched: touched)
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

    /// A fresh outbox replacing a damaged one: every entry it listed is counted as dropped (at its origin when its URL
    /// reads), plus the dropped count it held; one, at no origin, when nothing can be counted. Logged without content.
    func recovered(from bytes: [UInt8]?) -> Outbox {
        var out = Outbox()
        var lost = 0
        if let bytes, case let .object(o)? = try? JSON.parse(bytes), case let .array(list)? = o["entries"] {
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
        logger.error("the receipt outbox was damaged; replaced it with a fresh outbox counting the lost entries as dropped",
                     metadata: ["lost": "\(lost)"])
        return out
    }

    // MARK: Report window

    /// Records a failure of `(reason, kid)`: the count a report made now stands for, or `nil` within `window` seconds
    /// of the pair's last report (the failure is then counted for the next one). One change of `report-window.json`.
    public func noteFailure(reason: ReasonCode, kid: KeyID?, now: Int64, window: Int64) throws(AppGroupStoreError) -> Int? {
        try modifyRows(windowFile) { rows in
            let kidValue: JSONValue = kid.map { .string($0.hex) } ?? .null
            // Pairs whose window has long passed carry nothing worth keeping.
            rows.removeAll { ($0["last"]?.intValue ?? 0) < now - window && ($0["suppressed"]?.intValue ?? 0) == 0 }
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
            // A flood of junk with ever new key ids cannot grow the file without bound: the least recently reported go.
            if rows.count > reportWindowPairs {
                rows.sort { ($0["last"]?.intValue ?? 0) < ($1["last"]?.intValue ?? 0) }
                rows.removeFirst(rows.count - reportWindowPairs)
            }
            return 1
        }
    }

    // MARK: Reveal receipt tickets

    /// Keeps `ticket` for the notification `requestIdentifier`, replacing one kept for it; expired tickets go, and
    /// beyond `maximumRevealTickets` the oldest kept. One change of `reveal-tickets.json`.
    public func keepTicket(_ ticket: RevealReceiptTicket, requestIdentifier: String, now: Int64) throws(AppGroupStoreError) {
        try modifyRows(ticketsFile) { rows in
            rows.removeAll { $0["request"] == .string(requestIdentifier) || ($0["until"]?.intValue ?? 0) < now }
            rows.append(JSONObject([("request", .string(requestIdentifier)), ("url", .string(ticket.request.url)),
                                    ("token", .string(ticket.request.token)), ("id", .string(ticket.messageID)), ("until", .int(ticket.keepUntil))]))
            if rows.count > Self.maximumRevealTickets { rows.removeFirst(rows.count - Self.maximumRevealTickets) }
        }
    }

    /// Removes and returns the unexpired ticket of `requestIdentifier`, and forgets every other ticket of the same
    /// message id: a message's `revealed` receipt goes out once. One change of `reveal-tickets.json`.
    public func takeTicket(requestIdentifier: String, now: Int64) throws(AppGroupStoreError) -> RevealReceiptTicket? {
        try modifyRows(ticketsFile) { rows -> RevealReceiptTicket? in
            rows.removeAll { ($0["until"]?.intValue ?? 0) < now }
            guard let row = rows.first(where: { $0["request"] == .string(requestIdentifier) }),
                  case let .string(url)? = row["url"], case let .string(token)? = row["token"], case let .string(id)? = row["id"],
                  let until = row["until"]?.intValue else { return nil }
            rows.removeAll { $0["id"] == .string(id) }
            return RevealReceiptTicket(request: ReceiptRequest(url: url, token: token), messageID: id, keepUntil: until)
        }
    }

    /// Applies `change` to a file holding a JSON array of objects, under its lock; a damaged file starts empty (logged).
    private func modifyRows<R>(_ file: AppGroupFile, _ change: (inout [JSONObject]) -> R) throws(AppGroupStoreError) -> R {
        try file.update(maximumBytes: Self.readLimit) { (stored) throws(AppGroupStoreError) -> (write: [UInt8]?, result: R) in
            var rows: [JSONObject] = []
            switch stored {
            case .missing: break
            case let .bytes(bytes):
                if case let .array(list)? = try? JSON.parse(bytes), list.allSatisfy({ $0.objectValue != nil }) {
                    rows = list.compactMap(\.objectValue)
                } else if !bytes.isEmpty {
                    logger.error("an app group receipts file was damaged; starting it empty", metadata: ["file": "\(file.name)"])
                }
            case .oversized:
                logger.error("an app group receipts file was damaged; starting it empty", metadata: ["file": "\(file.name)"])
            }
            let result = change(&rows)
            return (JSON.serialize(.array(rows.map { .object($0) })), result)
        }
    }
}
#endif
