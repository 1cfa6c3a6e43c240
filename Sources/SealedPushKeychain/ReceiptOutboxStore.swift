public import SealedPushCrypto
public import SealedPushWire

/// The device's receipt outbox, failure-report window and report URL (receipts v1 §2, §3), kept as items
/// in the store: every change is one `modify` transaction (the writers' lock, temp file + fsync + rename +
/// directory fsync, the change counter), so a crash at any point leaves the old or the new outbox, whole.
///
/// Items (first access group, `alwaysThisDeviceOnly`: a `keychainLocked` report is queued before the first
/// unlock too; sealed under the store key like every item, so queued tokens are not readable on disk):
/// - `genericPassword@sealedpush.receipts@outbox.item`: `{"next", "dropped", "entries": [{"seq", "url", "queued_at", "body"}]}`;
/// - `genericPassword@sealedpush.receipts@report-window.item`: `[{"reason", "kid", "last", "suppressed"}]`;
/// - `genericPassword@sealedpush.receipts@report-url.item`: the report URL.
public struct ReceiptOutboxStore: Sendable {
    static let service = "sealedpush.receipts"
    static let outboxAccount = "outbox"
    static let windowAccount = "report-window"
    static let reportURLAccount = "report-url"

    /// The store holding the items.
    public let store: KeychainStore
    /// The most entries kept; beyond it the oldest are dropped and counted (1000).
    public let capacity: Int
    /// Entries older than this many seconds are dropped and counted (7 days).
    public let maximumAgeSeconds: Int64

    /// The outbox of `store`.
    public init(store: KeychainStore, capacity: Int = 1000, maximumAgeSeconds: Int64 = 7 * 86_400) {
        self.store = store
        self.capacity = max(1, capacity)
        self.maximumAgeSeconds = maximumAgeSeconds
    }

    struct Outbox {
        var next: UInt64 = 1
        var dropped = 0
        var entries: [ReceiptOutboxEntry] = []
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

    /// Reads the outbox without changing it (no lock: rename atomicity is enough).
    public func entries() throws(KeychainError) -> (entries: [ReceiptOutboxEntry], dropped: Int) {
        let outbox = try readOutbox()
        return (outbox.entries, outbox.dropped)
    }

    func readOutbox() throws(KeychainError) -> Outbox {
        do {
            let item = try store.read(itemClass: .genericPassword, service: Self.service, account: Self.outboxAccount,
                                      accessGroup: store.accessGroups[0])
            return try Self.decodeOutbox(item.data)
        } catch .itemNotFound { return Outbox() }
    }

    /// Applies `change` to the outbox under the writers' lock and writes it back durably.
    func modifyOutbox<R>(_ change: (inout Outbox) throws(KeychainError) -> R) throws(KeychainError) -> R {
        var result: R?
        try store.modify(itemClass: .genericPassword, service: Self.service, account: Self.outboxAccount,
                         accessGroup: store.accessGroups[0], accessibility: .alwaysThisDeviceOnly) { (old) throws(KeychainError) -> SecureBytes in
            var outbox = try Self.decodeOutbox(old)
            result = try change(&outbox)
            return Self.encodeOutbox(outbox)
        }
        return result!
    }

    /// Adds an entry; when this returns it is on disk. Beyond `capacity` the oldest entries are dropped and counted.
    public func enqueue(url: String, message: ReceiptMessage, now: Int64) throws(KeychainError) {
        try modifyOutbox { (o: inout Outbox) throws(KeychainError) in
            pruneOld(&o, now: now)
            o.entries.append(ReceiptOutboxEntry(sequence: o.next, url: url, message: message, queuedAt: now))
            o.next += 1
            if o.entries.count > capacity {
                let excess = o.entries.count - capacity
                o.entries.removeFirst(excess)
                o.dropped += excess
            }
        }
    }

    /// The entries waiting (oldest first) and the dropped count; entries past the age limit are dropped first
    /// (a write only when there are any).
    public func pending(now: Int64) throws(KeychainError) -> (entries: [ReceiptOutboxEntry], dropped: Int) {
        let current = try readOutbox()
        guard current.entries.contains(where: { isTooOld($0, now: now) }) else { return (current.entries, current.dropped) }
        return try modifyOutbox { (o: inout Outbox) throws(KeychainError) in
            pruneOld(&o, now: now)
            return (o.entries, o.dropped)
        }
    }

    /// Removes sent entries and the dropped count they reported.
    public func remove(sequences: [UInt64], droppedReported: Int) throws(KeychainError) {
        let done = Set(sequences)
        try modifyOutbox { (o: inout Outbox) throws(KeychainError) in
            o.entries.removeAll { done.contains($0.sequence) }
            o.dropped = max(0, o.dropped - droppedReported)
        }
    }

    private func isTooOld(_ entry: ReceiptOutboxEntry, now: Int64) -> Bool { now - entry.queuedAt > maximumAgeSeconds }

    private func pruneOld(_ o: inout Outbox, now: Int64) {
        let before = o.entries.count
        o.entries.removeAll { isTooOld($0, now: now) }
        o.dropped += before - o.entries.count
    }

    static func encodeOutbox(_ o: Outbox) -> SecureBytes {
        let entries: [JSONValue] = o.entries.map { e in
            .object(JSONObject([("seq", .int(Int64(clamping: e.sequence))), ("url", .string(e.url)), ("queued_at", .int(e.queuedAt)),
                                ("body", .object(e.message.jsonObject()))]))
        }
        return SecureBytes(JSON.serialize(.object(JSONObject([
            ("next", .int(Int64(clamping: o.next))), ("dropped", .int(Int64(o.dropped))), ("entries", .array(entries)),
        ]))))
    }

    static func decodeOutbox(_ data: SecureBytes?) throws(KeychainError) -> Outbox {
        guard let data, !data.isEmpty else { return Outbox() }
        let bad = KeychainError.decode(path: "\(service)/\(outboxAccount)", why: "the receipt outbox item is not as written")
        guard case let .object(o)? = try? JSON.parse(data.unsafeCopyToArray()), case let .int(next)? = o["next"], next >= 1,
              case let .int(dropped)? = o["dropped"], dropped >= 0, case let .array(list)? = o["entries"] else { throw bad }
        var out = Outbox(next: UInt64(next), dropped: Int(dropped), entries: [])
        for value in list {
            guard case let .object(e) = value, case let .int(seq)? = e["seq"], seq >= 1, case let .string(url)? = e["url"],
                  case let .int(queuedAt)? = e["queued_at"], case let .object(body)? = e["body"],
                  let (message, _) = ReceiptMessage.parse(JSON.serialize(.object(body))) else { throw bad }
            out.entries.append(ReceiptOutboxEntry(sequence: UInt64(seq), url: url, message: message, queuedAt: queuedAt))
        }
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
}
