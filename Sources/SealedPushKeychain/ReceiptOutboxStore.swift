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
/// replaced by a fresh one that counts what was lost as dropped, so it never fails for ever. These rules are
/// `ReceiptOutboxState`, `ReceiptReportWindow` and `RevealTicketList` (SealedPushWire), which the app group outbox of
/// SealedPushApple applies too: this type reads an item, applies one, and writes the item back in its transaction.
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
    public static let maximumRevealTickets = RevealTicketList.maximumCount
    static let logger = Logger(label: "sealedpush.receipts")

    /// The store holding the items.
    public let store: KeychainStore
    /// The outbox's bounds and backoff, which `ReceiptOutboxState` applies on every change.
    public let limits: ReceiptOutboxLimits
    /// The most entries kept; beyond it the oldest are dropped and counted (1000).
    public var capacity: Int { limits.capacity }
    /// Entries older than this many seconds are dropped and counted (7 days).
    public var maximumAgeSeconds: Int64 { limits.maximumAgeSeconds }
    /// The most bytes the encoded outbox may hold; beyond it the oldest entries are dropped and counted (512 KiB,
    /// so the sealed, base64-encoded item file stays well under the store's 1 MiB read limit).
    public var maximumEncodedBytes: Int { limits.maximumEncodedBytes }
    /// The first backoff of an origin that failed, in seconds (60); it doubles with every failure in a row.
    public var backoffBaseSeconds: Int64 { limits.backoffBaseSeconds }
    /// The longest backoff, in seconds (1 hour).
    public var backoffCapSeconds: Int64 { limits.backoffCapSeconds }

    /// The default `maximumEncodedBytes`: 512 KiB.
    public static let defaultMaximumEncodedBytes = ReceiptOutboxLimits.defaultMaximumEncodedBytes

    /// The outbox of `store`.
    public init(store: KeychainStore, capacity: Int = 1000, maximumAgeSeconds: Int64 = 7 * 86_400,
                maximumEncodedBytes: Int = ReceiptOutboxStore.defaultMaximumEncodedBytes,
                backoffBaseSeconds: Int64 = 60, backoffCapSeconds: Int64 = 3600) {
        self.store = store
        limits = ReceiptOutboxLimits(capacity: capacity, maximumAgeSeconds: maximumAgeSeconds, maximumEncodedBytes: maximumEncodedBytes,
                                     backoffBaseSeconds: backoffBaseSeconds, backoffCapSeconds: backoffCapSeconds)
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
    func readOutbox() throws(KeychainError) -> ReceiptOutboxState {
        do throws(KeychainError) {
            let item = try store.read(itemClass: .genericPassword, service: Self.service, account: Self.outboxAccount,
                                      accessGroup: store.accessGroups[0])
            if let outbox = Self.decodeOutbox(item.data) { return outbox }
        } catch .itemNotFound {
            return ReceiptOutboxState()
        } catch let error where isOutboxFileUnreadable(error) {}
        // Not as written, or over the read limit: the recovering write path.
        return try modifyOutbox { (o: inout ReceiptOutboxState) throws(KeychainError) in o }
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
    func modifyOutbox<R>(_ change: (inout ReceiptOutboxState) throws(KeychainError) -> R) throws(KeychainError) -> R {
        try store.transaction { (tx: KeychainStore) throws(KeychainError) -> R in
            var result: R?
            do throws(KeychainError) {
                try tx.modify(itemClass: .genericPassword, service: Self.service, account: Self.outboxAccount,
                              accessGroup: tx.accessGroups[0], accessibility: .alwaysThisDeviceOnly) { (old) throws(KeychainError) -> SecureBytes in
                    var outbox = Self.decodeOutbox(old) ?? Self.recovered(from: old)
                    result = try change(&outbox)
                    return SecureBytes(outbox.boundedEncoding(limits: limits))
                }
            } catch let error where isOutboxFileUnreadable(error) {
                // The file itself does not read (over the read limit, or not an item): its entries cannot be counted.
                Self.logger.error("the receipt outbox item could not be read; replaced it with a fresh outbox counting 1 lost entry as dropped",
                                  metadata: ["why": "\(Self.unreadableReason(error))"])
                var outbox = ReceiptOutboxState.recovering(from: nil).state
                result = try change(&outbox)
                let date = tx.now()
                try tx.writeItem(ItemHeader(itemClass: .genericPassword, accessGroup: tx.accessGroups[0], service: Self.service,
                                            account: Self.outboxAccount, label: nil, accessibility: .alwaysThisDeviceOnly,
                                            applicationTag: nil, created: date, modified: date),
                                 data: SecureBytes(outbox.boundedEncoding(limits: limits)))
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
    /// not https or loopback http), a body over 4096 bytes, or a body that would not read back (a malformed token).
    public func enqueue(url: String, message: ReceiptMessage, now: Int64) throws(KeychainError) {
        let entry: ReceiptOutboxState.NewEntry
        do { entry = try ReceiptOutboxState.NewEntry(url: url, message: message) } catch { throw .param("\(error); it was not queued") }
        try modifyOutbox { (o: inout ReceiptOutboxState) throws(KeychainError) in o.enqueue(entry, now: now, limits: limits) }
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
        try prunedOutbox(now: now).queues(now: now, limits: limits)
    }

    private func prunedOutbox(now: Int64) throws(KeychainError) -> ReceiptOutboxState {
        let current = try readOutbox()
        guard current.needsPruning(now: now, limits: limits) else { return current }
        return try modifyOutbox { (o: inout ReceiptOutboxState) throws(KeychainError) in
            o.prune(now: now, limits: limits)
            return o
        }
    }

    /// Records what a flush of `origin` came to, in one transaction: removes the entries sent or refused for good,
    /// subtracts `droppedReported` from the origin's dropped count, and, when the origin `failed` (no answer, or
    /// neither `2xx` nor a final refusal), backs it off: `retryAfter` seconds when the server gave a `Retry-After`,
    /// else `backoffBaseSeconds` doubled for every failure in a row, either at most `backoffCapSeconds`; otherwise
    /// its backoff is cleared.
    public func settle(origin: String, removing sequences: [UInt64], droppedReported: Int, failed: Bool, retryAfter: Int64? = nil,
                       connectionRefused: Bool = false, now: Int64) throws(KeychainError) {
        try modifyOutbox { (o: inout ReceiptOutboxState) throws(KeychainError) in
            o.settle(origin: origin, removing: sequences, droppedReported: droppedReported, failed: failed, retryAfter: retryAfter,
                     connectionRefused: connectionRefused, now: now, limits: limits)
        }
    }

    /// Removes entries by sequence number (dropped counts and backoffs unchanged).
    public func remove(sequences: [UInt64]) throws(KeychainError) {
        try modifyOutbox { (o: inout ReceiptOutboxState) throws(KeychainError) in o.remove(sequences: sequences) }
    }

    /// The outbox as written (this version's, or the one before #22, which had no `origins`), or `nil` when the
    /// secret is not as written. An empty or missing secret is an empty outbox.
    static func decodeOutbox(_ data: SecureBytes?) -> ReceiptOutboxState? {
        ReceiptOutboxState(decoding: data?.unsafeCopyToArray() ?? [], requiringOrigins: false)
    }

    /// A fresh outbox replacing a secret that is not as written: it counts every entry the old one listed as dropped
    /// (at its origin when its URL reads), plus the dropped count it held; one when nothing can be counted.
    /// Logged at error, without content.
    static func recovered(from data: SecureBytes?) -> ReceiptOutboxState {
        let (outbox, lost) = ReceiptOutboxState.recovering(from: data?.unsafeCopyToArray())
        logger.error("the receipt outbox was not as written; replaced it with a fresh outbox counting the lost entries as dropped",
                     metadata: ["lost": "\(lost)"])
        return outbox
    }

    // MARK: Report window

    /// Records a failure of `(reason, kid)`: the count a report made now stands for, or `nil` within `window`
    /// seconds of the pair's last report (the failure is then counted for the next one). One transaction. The window
    /// forgets pairs whose count was reported once their window has passed, and any pair last reported more than 7
    /// days ago, and keeps at most `ReceiptReportWindow.defaultMaximumPairs` (the least recently reported go); one not
    /// as written throws `decode`.
    public func noteFailure(reason: ReasonCode, kid: KeyID?, now: Int64, window: Int64) throws(KeychainError) -> Int? {
        var result: Int?
        try store.modify(itemClass: .genericPassword, service: Self.service, account: Self.windowAccount,
                         accessGroup: store.accessGroups[0], accessibility: .alwaysThisDeviceOnly) { (old) throws(KeychainError) -> SecureBytes in
            guard var pairs = ReceiptReportWindow(decoding: old?.unsafeCopyToArray() ?? [], skippingNonObjects: true) else {
                throw .decode(path: "\(Self.service)/\(Self.windowAccount)", why: "the report window item is not as written")
            }
            result = pairs.noteFailure(reason: reason, kid: kid, now: now, window: window, maximumPairs: ReceiptReportWindow.defaultMaximumPairs)
            return SecureBytes(pairs.encoded())
        }
        return result
    }

    // MARK: Reveal receipt tickets

    /// Keeps the outer receipt of a held message for the notification `requestIdentifier` (reveal v1 §6), replacing
    /// one kept for it; expired tickets go, and beyond `maximumRevealTickets` the oldest kept. One transaction.
    public func keepRevealTicket(url: String, token: String, messageID: String, keepUntil: Int64, requestIdentifier: String,
                                 now: Int64) throws(KeychainError) {
        try modifyTickets { tickets in
            tickets.keep(ReceiptRequest(url: url, token: token), messageID: messageID, keepUntil: keepUntil,
                         requestIdentifier: requestIdentifier, now: now)
        }
    }

    /// Removes and returns the unexpired ticket of `requestIdentifier` (url, token, message id), and every other
    /// ticket for the same message id: a message's `revealed` receipt goes out once. One transaction.
    public func takeRevealTicket(requestIdentifier: String, now: Int64) throws(KeychainError) -> (url: String, token: String, messageID: String, keepUntil: Int64)? {
        try modifyTickets { tickets in
            tickets.take(requestIdentifier: requestIdentifier, now: now).map { ($0.request.url, $0.request.token, $0.messageID, $0.keepUntil) }
        }
    }

    private func modifyTickets<R>(_ change: (inout RevealTicketList) -> R) throws(KeychainError) -> R {
        var result: R?
        try store.modify(itemClass: .genericPassword, service: Self.service, account: Self.ticketsAccount,
                         accessGroup: store.accessGroups[0], accessibility: .alwaysThisDeviceOnly) { (old) throws(KeychainError) -> SecureBytes in
            var tickets = RevealTicketList(decoding: old?.unsafeCopyToArray() ?? [], skippingNonObjects: true) ?? {
                // Not as written: the tickets are lost (their revealed receipts are not sent), never the message.
                Self.logger.error("the revealed receipt tickets were not as written; starting with none")
                return RevealTicketList()
            }()
            result = change(&tickets)
            return SecureBytes(tickets.encoded())
        }
        return result!
    }
}
