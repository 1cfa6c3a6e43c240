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
/// none older than `maximumAgeSeconds` (24 hours on the phone: a queued receipt holds a bearer token readable after the
/// first unlock, so it is not kept longer than a day): the oldest are dropped first and counted at their origin; each
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
///
/// **The rules** are `ReceiptOutboxState`, `ReceiptReportWindow` and `RevealTicketList` (SealedPushWire), the same the
/// Linux store applies: this type reads a file, applies one, and writes the file back under its lock. They differ
/// in three places, each a parameter of the rule: an outbox without `origins` is damaged here (no file was ever
/// written before per-origin queues), the window keeps at most `maximumReportWindowPairs` pairs, and a window or
/// ticket file holding anything but objects is damaged.
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
    public static let maximumRevealTickets = RevealTicketList.maximumCount
    /// The most `(reason, kid)` pairs the report window keeps; beyond it the least recently reported go.
    public static let maximumReportWindowPairs = 1000
    /// The default `maximumAgeSeconds` on the phone: 24 hours (the Linux store keeps 7 days).
    public static let defaultMaximumAgeSeconds: Int64 = 24 * 3600
    /// The default `maximumEncodedBytes`: 512 KiB.
    public static let defaultMaximumEncodedBytes = ReceiptOutboxLimits.defaultMaximumEncodedBytes
    /// The largest file of the three that is read (1 MiB); a larger one is damaged.
    static let readLimit = 1 << 20

    /// The directory holding the files (and their locks).
    public let directory: URL
    /// The outbox's bounds and backoff, which `ReceiptOutboxState` applies on every change.
    public let limits: ReceiptOutboxLimits
    /// The most entries kept; beyond it the oldest are dropped and counted (1000).
    public var capacity: Int { limits.capacity }
    /// Entries older than this many seconds are dropped and counted (24 hours by default).
    public var maximumAgeSeconds: Int64 { limits.maximumAgeSeconds }
    /// The most bytes the encoded outbox may hold; beyond it the oldest entries are dropped and counted (512 KiB, at
    /// most half the read limit).
    public var maximumEncodedBytes: Int { limits.maximumEncodedBytes }
    /// The first backoff of an origin that failed, in seconds (60); it doubles with every failure in a row.
    public var backoffBaseSeconds: Int64 { limits.backoffBaseSeconds }
    /// The longest backoff, in seconds (1 hour).
    public var backoffCapSeconds: Int64 { limits.backoffCapSeconds }
    /// The longest a call waits for another process holding a file's lock.
    public let lockTimeout: Duration
    /// Where damaged files are logged (counts only, never a URL, token or id).
    public var logger: Logging.Logger
    /// The most `(reason, kid)` pairs the report window keeps (`maximumReportWindowPairs`; tests lower it).
    let reportWindowPairs: Int
    let files: any AppGroupFileSystem

    /// The outbox in `directory` (a directory of the app group container; made `0700` if missing).
    public init(directory: URL, capacity: Int = 1000, maximumAgeSeconds: Int64 = AppGroupReceiptOutbox.defaultMaximumAgeSeconds,
                maximumEncodedBytes: Int = AppGroupReceiptOutbox.defaultMaximumEncodedBytes,
                backoffBaseSeconds: Int64 = 60, backoffCapSeconds: Int64 = 3600, lockTimeout: Duration = .seconds(1),
                logger: Logging.Logger = Logging.Logger(label: "sealedpush.receipts")) {
        self.init(directory: directory, capacity: capacity, maximumAgeSeconds: maximumAgeSeconds, maximumEncodedBytes: maximumEncodedBytes,
                  backoffBaseSeconds: backoffBaseSeconds, backoffCapSeconds: backoffCapSeconds, lockTimeout: lockTimeout, logger: logger,
                  files: SystemAppGroupFiles())
    }

    /// The outbox in `SealedPush` in the container of the app group `groupIdentifier`; throws `containerUnavailable`
    /// when the process's App Groups entitlement does not list the group.
    public init(appGroup groupIdentifier: String, capacity: Int = 1000, maximumAgeSeconds: Int64 = AppGroupReceiptOutbox.defaultMaximumAgeSeconds,
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
        limits = ReceiptOutboxLimits(capacity: capacity, maximumAgeSeconds: maximumAgeSeconds,
                                     maximumEncodedBytes: min(maximumEncodedBytes, Self.readLimit / 2),
                                     backoffBaseSeconds: backoffBaseSeconds, backoffCapSeconds: backoffCapSeconds)
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

    // MARK: Outbox

    /// Adds an entry; when this returns it is on disk. Beyond the bounds the oldest entries are dropped and counted.
    /// Throws `invalidEntry` for an entry that is not bounded: a URL that is not a receipt URL (over 2048 bytes, not
    /// https or loopback http), or a body over 4096 bytes.
    public func enqueue(url: String, message: ReceiptMessage, now: Int64) throws(AppGroupStoreError) {
        try enqueue(url: url, message: message, now: now, expiresAt: nil)
    }

    /// `enqueue(url:message:now:)` for a message that expires at `expiresAt`: the entry is dropped (and counted) once
    /// it has, or after `maximumAgeSeconds`, whichever comes first.
    public func enqueue(url: String, message: ReceiptMessage, now: Int64, expiresAt: Int64?) throws(AppGroupStoreError) {
        var entry: ReceiptOutboxState.NewEntry
        do { entry = try ReceiptOutboxState.NewEntry(url: url, message: message) } catch { throw .invalidEntry(error.description) }
        entry.expiresAt = expiresAt
        try modifyOutbox { o in o.enqueue(entry, now: now, limits: limits) }
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
        try prunedOutbox(now: now).queues(now: now, limits: limits)
    }

    /// Records a flush of `origin` in one change: removes the entries sent or refused for good, subtracts
    /// `droppedReported` from its dropped count, and backs it off when it `failed` (by `retryAfter` seconds when the
    /// server gave a `Retry-After`, at most the backoff cap), else clears its backoff.
    public func settle(origin: String, removing sequences: [UInt64], droppedReported: Int, failed: Bool, retryAfter: Int64? = nil,
                       connectionRefused: Bool = false, now: Int64) throws(AppGroupStoreError) {
        try modifyOutbox { o in
            o.settle(origin: origin, removing: sequences, droppedReported: droppedReported, failed: failed, retryAfter: retryAfter,
                     connectionRefused: connectionRefused, now: now, limits: limits)
        }
    }

    /// Removes entries by sequence number (dropped counts and backoffs unchanged).
    public func remove(sequences: [UInt64]) throws(AppGroupStoreError) {
        try modifyOutbox { o in o.remove(sequences: sequences) }
    }

    /// The outbox as it is (no lock: every change is an atomic rename); a damaged one is replaced first.
    func readOutbox() throws(AppGroupStoreError) -> ReceiptOutboxState {
        switch try outboxFile.read(maximumBytes: Self.readLimit) {
        case .missing: return ReceiptOutboxState()
        case let .bytes(bytes): if let o = ReceiptOutboxState(decoding: bytes, requiringOrigins: true) { return o }
        case .oversized: break
        }
        return try modifyOutbox { o in o }
    }

    private func prunedOutbox(now: Int64) throws(AppGroupStoreError) -> ReceiptOutboxState {
        let current = try readOutbox()
        guard current.needsPruning(now: now, limits: limits) else { return current }
        return try modifyOutbox { o in
            o.prune(now: now, limits: limits)
            return o
        }
    }

    /// Applies `change` to the outbox under its lock, bounds it, and writes it back durably. A damaged outbox is
    /// replaced, in the same change, by a fresh one counting what was lost as dropped.
    func modifyOutbox<R>(_ change: (inout ReceiptOutboxState) -> R) throws(AppGroupStoreError) -> R {
        try outboxFile.update(maximumBytes: Self.readLimit) { (stored) throws(AppGroupStoreError) -> (write: [UInt8]?, result: R) in
            var o: ReceiptOutboxState
            switch stored {
            case .missing: o = ReceiptOutboxState()
            case let .bytes(bytes): o = ReceiptOutboxState(decoding: bytes, requiringOrigins: true) ?? recovered(from: bytes)
            case .oversized: o = recovered(from: nil)
            }
            let result = change(&o)
            return (o.boundedEncoding(limits: limits), result)
        }
    }

    /// A fresh outbox replacing a damaged one (`ReceiptOutboxState.recovering(from:)`), logged without content.
    func recovered(from bytes: [UInt8]?) -> ReceiptOutboxState {
        let (o, lost) = ReceiptOutboxState.recovering(from: bytes)
        logger.error("the receipt outbox was damaged; replaced it with a fresh outbox counting the lost entries as dropped",
                     metadata: ["lost": "\(lost)"])
        return o
    }

    // MARK: Report window

    /// Records a failure of `(reason, kid)`: the count a report made now stands for, or `nil` within `window` seconds
    /// of the pair's last report (the failure is then counted for the next one). One change of `report-window.json`;
    /// at most `maximumReportWindowPairs` pairs are kept.
    public func noteFailure(reason: ReasonCode, kid: KeyID?, now: Int64, window: Int64) throws(AppGroupStoreError) -> Int? {
        try modifyRows(windowFile) { (w: inout ReceiptReportWindow) in
            w.noteFailure(reason: reason, kid: kid, now: now, window: window, maximumPairs: reportWindowPairs)
        }
    }

    // MARK: Reveal receipt tickets

    /// Keeps `ticket` for the notification `requestIdentifier`, replacing one kept for it; expired tickets go, and
    /// beyond `maximumRevealTickets` the oldest kept. One change of `reveal-tickets.json`.
    public func keepTicket(_ ticket: RevealReceiptTicket, requestIdentifier: String, now: Int64) throws(AppGroupStoreError) {
        try modifyRows(ticketsFile) { (t: inout RevealTicketList) in
            t.keep(ticket.request, messageID: ticket.messageID, keepUntil: ticket.keepUntil, requestIdentifier: requestIdentifier, now: now)
        }
    }

    /// Removes and returns the unexpired ticket of `requestIdentifier`, and forgets every other ticket of the same
    /// message id: a message's `revealed` receipt goes out once. One change of `reveal-tickets.json`.
    public func takeTicket(requestIdentifier: String, now: Int64) throws(AppGroupStoreError) -> RevealReceiptTicket? {
        try modifyRows(ticketsFile) { (t: inout RevealTicketList) in
            t.take(requestIdentifier: requestIdentifier, now: now).map {
                RevealReceiptTicket(request: $0.request, messageID: $0.messageID, keepUntil: $0.keepUntil)
            }
        }
    }

    /// Applies `change` to a file holding a JSON array of objects, under its lock; a damaged file starts empty (logged).
    private func modifyRows<List: JSONRowList, R>(_ file: AppGroupFile, _ change: (inout List) -> R) throws(AppGroupStoreError) -> R {
        try file.update(maximumBytes: Self.readLimit) { (stored) throws(AppGroupStoreError) -> (write: [UInt8]?, result: R) in
            var list = List(rows: [])
            switch stored {
            case .missing: break
            case let .bytes(bytes):
                if let read = List(decoding: bytes, skippingNonObjects: false) {
                    list = read
                } else {
                    logger.error("an app group receipts file was damaged; starting it empty", metadata: ["file": "\(file.name)"])
                }
            case .oversized:
                logger.error("an app group receipts file was damaged; starting it empty", metadata: ["file": "\(file.name)"])
            }
            let result = change(&list)
            return (list.encoded(), result)
        }
    }
}
#endif
