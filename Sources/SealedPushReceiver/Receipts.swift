public import SealedPushCrypto
public import SealedPushWire
import Synchronization
public import Logging

/// What one POST of a receipt or failure report came to.
public enum ReceiptPostResult: Sendable, Equatable {
    /// The server answered `2xx`.
    case accepted(status: Int)
    /// The server answered with another status, and with the seconds its `Retry-After` asked to wait, if it gave one
    /// (`RetryAfter.seconds(_:now:)` reads the header).
    case refused(status: Int, retryAfter: Int64? = nil)
    /// No answer in time (timeout, TLS failure, unreachable, cancelled).
    case failed
    /// The connection was refused: nothing listens at the URL's address, as while a collector restarts. The outbox
    /// tries such an origin again sooner (`ReceiptOutboxLimits.refusedBackoffBaseSeconds`) than after other failures.
    case connectionRefused

    /// The statuses whose `Retry-After` the outbox honours: `429` and `503` (gateway v1 §6).
    public static let retryAfterStatuses: Set<Int> = [429, 503]

    /// How long the server asked to wait before this origin is tried again: the `Retry-After` of a `429` or `503`,
    /// `nil` for any other answer.
    public var retryAfter: Int64? {
        if case let .refused(status, seconds) = self, Self.retryAfterStatuses.contains(status) { return seconds }
        return nil
    }
}

/// Reads an HTTP `Retry-After` header (RFC 9110 §10.2.3).
public enum RetryAfter {
    /// The seconds to wait that `value` asks for: delay-seconds as given, an HTTP-date (IMF-fixdate,
    /// `Sun, 06 Nov 1994 08:49:37 GMT`) as the seconds from `now` (Unix seconds) to it, 0 when it has passed;
    /// `nil` when the value is neither.
    public static func seconds(_ value: String, now: Int64) -> Int64? {
        let text = value.trimmingWhitespace()
        if !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }) { return Int64(text) }
        guard let date = imfFixdate(text) else { return nil }
        return max(0, date - now)
    }

    /// The Unix seconds of an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), or `nil`.
    static func imfFixdate(_ text: String) -> Int64? {
        let parts = text.split(separator: " ")
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        guard parts.count == 6, parts[0].count == 4, parts[0].hasSuffix(","), parts[5] == "GMT",
              parts[1].count == 2, let day = Int64(parts[1]), (1...31).contains(day),
              let monthIndex = months.firstIndex(of: String(parts[2])),
              parts[3].count == 4, let year = Int64(parts[3]), year >= 1970 else { return nil }
        let clock = parts[4].split(separator: ":", omittingEmptySubsequences: false)
        guard clock.count == 3, clock.allSatisfy({ $0.count == 2 }), let hour = Int64(clock[0]), let minute = Int64(clock[1]),
              let second = Int64(clock[2]), hour < 24, minute < 60, second < 61 else { return nil }
        // Days from 1970-01-01 to the date (proleptic Gregorian; Howard Hinnant's days_from_civil).
        let month = Int64(monthIndex + 1)
        let y = month <= 2 ? year - 1 : year
        let era = y / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        return days * 86_400 + hour * 3600 + minute * 60 + second
    }
}

extension String {
    /// The string without leading and trailing spaces and tabs.
    fileprivate func trimmingWhitespace() -> String {
        var view = Substring(self)
        while let first = view.first, first == " " || first == "\t" { view.removeFirst() }
        while let last = view.last, last == " " || last == "\t" { view.removeLast() }
        return String(view)
    }
}

/// Sends receipts and failure reports (receipts v1 §2, §3): an HTTP POST of `application/json`.
///
/// The extension module has no networking: the device (or an iOS app, with `URLSession`) supplies this.
public protocol ReceiptTransport: Sendable {
    /// POSTs `body` to `url` with `Content-Type: application/json`, giving up at `deadline`.
    func post(_ body: [UInt8], to url: String, deadline: ContinuousClock.Instant) async -> ReceiptPostResult
}

/// The device's durable outbox and failure-report window (receipts v1 §2, §3).
///
/// Every method is one atomic, durable step: when `enqueue` returns, the entry survives a crash. Entries are kept
/// per origin (`scheme://host:port`, `HTTPURL.origin`), each with its own dropped count and backoff.
public protocol ReceiptOutbox: Sendable {
    /// Adds an entry (dropping the oldest beyond the outbox's bounds, counted as dropped at their origins).
    func enqueue(url: String, message: ReceiptMessage, now: Int64) throws
    /// Adds an entry that is not kept past `expiresAt` (the message's `exp`); by default `enqueue(url:message:now:)`,
    /// which keeps it as long as the outbox's age limit.
    func enqueue(url: String, message: ReceiptMessage, now: Int64, expiresAt: Int64?) throws
    /// The entries waiting by origin, each origin's oldest first, with its dropped count not yet reported and its
    /// backoff; entries older than the outbox's age limit are dropped (and counted) first.
    func queues(now: Int64) throws -> [ReceiptOriginQueue]
    /// Records a flush of `origin`: removes the entries with these sequence numbers, subtracts `droppedReported`
    /// from its dropped count, and backs it off when it `failed` (or clears its backoff when it did not): for
    /// `retryAfter` seconds when the server gave a `Retry-After` (at most the outbox's backoff cap), else exponentially,
    /// from the outbox's shorter first wait when the failure was a `connectionRefused`.
    func settle(origin: String, removing sequences: [UInt64], droppedReported: Int, failed: Bool, retryAfter: Int64?,
                connectionRefused: Bool, now: Int64) throws
    /// Records a failure of `(reason, kid)` at `now`: returns how many failures a report sent now stands for,
    /// or `nil` when a report for the pair was made less than `window` seconds ago (this one is counted for the next).
    func noteFailure(reason: ReasonCode, kid: KeyID?, now: Int64, window: Int64) throws -> Int?
}

extension ReceiptOutbox {
    /// `enqueue(url:message:now:)`: an outbox that keeps no per-entry expiry keeps the entry its age limit.
    public func enqueue(url: String, message: ReceiptMessage, now: Int64, expiresAt: Int64?) throws {
        try enqueue(url: url, message: message, now: now)
    }
}

/// What a content extension needs to send a held message's `revealed` receipt (reveal v1 §6): the outer
/// body's receipt URL and token, which iOS's notification store must never hold, kept on the device by the
/// service extension under the notification's request identifier.
public struct RevealReceiptTicket: Sendable, Equatable {
    /// The outer body's `receipt` (URL and token).
    public var request: ReceiptRequest
    /// The message id the receipt names.
    public var messageID: String
    /// Kept until then (Unix seconds): the message's expiry, or a bounded time when it has none.
    public var keepUntil: Int64

    /// A ticket from its parts.
    public init(request: ReceiptRequest, messageID: String, keepUntil: Int64) {
        self.request = request
        self.messageID = messageID
        self.keepUntil = keepUntil
    }
}

/// Where the service extension leaves `revealed` receipt tickets for the content extension (device
/// storage shared by both, never the notification's content).
public protocol RevealReceiptTickets: Sendable {
    /// Keeps `ticket` for the notification `requestIdentifier` (replacing one kept for it before).
    func keepTicket(_ ticket: RevealReceiptTicket, requestIdentifier: String, now: Int64) throws
    /// Removes and returns the ticket of `requestIdentifier`, or of another notification carrying the same
    /// message id, if one is kept and not expired: a `revealed` receipt goes out once per message id.
    func takeTicket(requestIdentifier: String, now: Int64) throws -> RevealReceiptTicket?
}

/// Whether a delivered message's receipt was sent (`device push --json` member `receipt`).
public enum ReceiptStatus: String, Sendable, Equatable {
    /// The receipt URL answered `2xx` before the content was handed over.
    case sent
    /// No `2xx` in time: the receipt is in the outbox.
    case queued
}

/// What became of a failure report (`device push --json` member `report`).
public enum ReportStatus: String, Sendable, Equatable {
    /// The report URL answered `2xx`.
    case sent
    /// No `2xx` in time: the report is in the outbox.
    case queued
    /// A report for the same reason and key id was made less than 10 minutes ago; this failure is counted in the next.
    case suppressed
}

/// What a flush of the outbox did.
public struct OutboxFlushSummary: Sendable, Equatable {
    /// Entries the server accepted (`2xx`), now removed.
    public var sent = 0
    /// Entries the server refused for good (`400`, `403`, `404`, `413`), now removed.
    public var rejected = 0
    /// Entries still waiting (their origin was not reachable, answered otherwise, or is backing off).
    public var remaining = 0

    /// A summary from its counts.
    public init(sent: Int = 0, rejected: Int = 0, remaining: Int = 0) {
        self.sent = sent
        self.rejected = rejected
        self.remaining = remaining
    }
}

/// The origins whose outbox entries a flush of this process is sending now: a second flush at the same time (another
/// extension instance, iOS runs several in one process) leaves those origins to the first instead of posting the same
/// entries again (receipts are idempotent at the collector, but each duplicate costs the extension's time budget).
///
/// One gate per outbox file, `ReceiptFlushGate.forOutbox(at:)`: every instance of an extension process shares the
/// app group outbox's (`SealedPushSettings` sets it), and another outbox in the same process (a test's simulated
/// devices) has its own, so that its flushes never wait on theirs.
public final class ReceiptFlushGate: Sendable {
    private let busy = Mutex<Set<String>>([])

    /// A gate of its own (one per outbox).
    public init() {}

    private static let gates = Mutex<[String: ReceiptFlushGate]>([:])

    /// The one gate of the outbox stored at `path` in this process.
    public static func forOutbox(at path: String) -> ReceiptFlushGate {
        gates.withLock { gates in
            if let gate = gates[path] { return gate }
            let gate = ReceiptFlushGate()
            gates[path] = gate
            return gate
        }
    }

    /// Claims `origin`; `false` when another flush holds it.
    func enter(_ origin: String) -> Bool { busy.withLock { $0.insert(origin).inserted } }

    /// Releases `origin`.
    func leave(_ origin: String) { _ = busy.withLock { $0.remove(origin) } }
}

/// Sends receipts and failure reports for the extension, with their deadlines, and keeps what could not
/// be sent in the outbox (receipts v1 §2, §3).
public struct ReceiptCourier: Sendable {
    /// How receipts travel; `nil` queues everything (a build without networking).
    public var transport: (any ReceiptTransport)?
    /// The device's outbox and report window.
    public var outbox: any ReceiptOutbox
    /// The device's report URL, read per failure; `nil` (the default) sends no failure reports.
    public var reportURL: @Sendable () -> String?
    /// A receipt's own deadline (at most 2 s, and never past the delivery deadline).
    public var timeout: Duration
    /// The clock the deadline timer runs on (`ContinuousClock` by default; tests pass one they move
    /// by hand, so a slow test machine cannot turn an answered POST into a queued one).
    public var timer: any Clock<Duration>
    /// One report per `(reason, kid)` per this many seconds (10 minutes).
    public var reportWindowSeconds: Int64
    /// Where failures to queue are logged (never a token).
    public var logger: Logger
    /// Where `revealed` receipt tickets are kept between the service and content extensions; `nil`
    /// sends no `revealed` receipts (reveal v1 §6).
    public var revealTickets: (any RevealReceiptTickets)? = nil
    /// Shared by every courier over the same outbox in this process, so that two flushes at once never send one
    /// origin's entries twice; `nil` (the default) flushes without one (one courier per outbox).
    public var flushGate: ReceiptFlushGate? = nil

    /// A courier; by default a 2-second deadline and a 10-minute report window.
    public init(transport: (any ReceiptTransport)?, outbox: any ReceiptOutbox, reportURL: @escaping @Sendable () -> String? = { nil },
                timeout: Duration = .seconds(2), reportWindowSeconds: Int64 = 600,
                logger: Logger = Logger(label: "sealedpush.receipts"), timer: any Clock<Duration> = ContinuousClock()) {
        self.timer = timer
        self.transport = transport
        self.outbox = outbox
        self.reportURL = reportURL
        self.timeout = min(timeout, .seconds(2))
        self.reportWindowSeconds = reportWindowSeconds
        self.logger = logger
    }

    /// POSTs `message`, padded (`ReceiptMessage.paddedBody`), within `timeout`, and never past the delivery's `deadline` (`nil`: no delivery in
    /// progress, as for a flush); `.failed` when time runs out first or the task is cancelled. The wait runs
    /// on `timer`, so an injected clock decides alone when an answered POST is late.
    func post(_ message: ReceiptMessage, dropped: Int = 0, to url: String, deadline: ContinuousClock.Instant?) async -> ReceiptPostResult {
        guard let transport, !Task.isCancelled else { return .failed }
        let wait = deadline.map { min(timeout, ContinuousClock.now.duration(to: $0)) } ?? timeout
        guard wait > .zero else { return .failed }
        let body = message.paddedBody(dropped: dropped)
        let timer = self.timer
        let transportDeadline = ContinuousClock.now.advanced(by: wait)
        return await withTaskGroup(of: ReceiptPostResult?.self) { group in
            group.addTask { await transport.post(body, to: url, deadline: transportDeadline) }
            group.addTask {
                try? await timer.sleep(for: wait)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first ?? .failed
        }
    }

    /// The receipt for an opened message (§2): sent by `deadline`, else queued. `nil` when it could be neither.
    /// A receipt queued is kept no longer than `expiresAt` (the message's `exp`), when given.
    public func sendReceipt(_ request: ReceiptRequest, messageID: String, attachments: ReceiptAttachmentCounts?, now: Int64,
                            deadline: ContinuousClock.Instant, expiresAt: Int64? = nil) async -> ReceiptStatus? {
        let message = ReceiptMessage.delivered(id: messageID, token: request.token, at: now, attachments: attachments)
        let result = await post(message, to: request.url, deadline: deadline)
        if case .accepted = result { return .sent }
        do {
            try outbox.enqueue(url: request.url, message: message, now: now, expiresAt: expiresAt)
            deferOrigin(of: request.url, after: result, now: now)
            return .queued
        } catch {
            logger.error("receipt could neither be sent nor queued", metadata: ["error": "\(error)"])
            return nil
        }
    }

    /// The longest a `revealed` receipt ticket is kept for a message without `exp`: 7 days (the outbox's age limit).
    public static let revealTicketLifetimeSeconds: Int64 = 7 * 86_400
    /// How long this courier keeps a `revealed` ticket at most, seconds (`revealTicketLifetimeSeconds` unless set; the
    /// iOS settings keep 24 hours: a ticket holds a receipt token readable after the first unlock).
    public var revealTicketLifetime: Int64 = ReceiptCourier.revealTicketLifetimeSeconds

    /// Keeps a held (or preview-limited) message's receipt for the content extension's `revealed` receipt;
    /// a failure is logged and the receipt is then not sent (never the message's failure).
    public func keepRevealTicket(_ request: ReceiptRequest, messageID: String, requestIdentifier: String, expiresAt: Int64?, now: Int64) {
        guard let revealTickets else { return }
        let keepUntil = min(expiresAt ?? .max, now + revealTicketLifetime)
        do {
            try revealTickets.keepTicket(RevealReceiptTicket(request: request, messageID: messageID, keepUntil: keepUntil),
                                         requestIdentifier: requestIdentifier, now: now)
        } catch {
            logger.error("revealed receipt ticket could not be kept; no revealed receipt will be sent", metadata: ["error": "\(error)"])
        }
    }

    /// The `revealed` receipt of the notification `requestIdentifier` (reveal v1 §6), once per message id: sent by
    /// `deadline`, else queued; `nil` when there is no ticket (no receipt asked, or already sent) or it could be
    /// neither sent nor queued.
    public func sendRevealedReceipt(requestIdentifier: String, attachments: ReceiptAttachmentCounts?, now: Int64,
                                    deadline: ContinuousClock.Instant) async -> ReceiptStatus? {
        guard let revealTickets else { return nil }
        let ticket: RevealReceiptTicket?
        do { ticket = try revealTickets.takeTicket(requestIdentifier: requestIdentifier, now: now) } catch {
            logger.error("revealed receipt ticket unreadable; no revealed receipt sent", metadata: ["error": "\(error)"])
            return nil
        }
        guard let ticket else { return nil }
        let message = ReceiptMessage.revealed(id: ticket.messageID, token: ticket.request.token, at: now, attachments: attachments)
        let result = await post(message, to: ticket.request.url, deadline: deadline)
        if case .accepted = result { return .sent }
        do {
            try outbox.enqueue(url: ticket.request.url, message: message, now: now)
            deferOrigin(of: ticket.request.url, after: result, now: now)
            return .queued
        } catch {
            logger.error("revealed receipt could neither be sent nor queued", metadata: ["error": "\(error)"])
            return nil
        }
    }

    /// The failure report for a message that failed `reason` (§3), sealed to `kid`: `nil` when the device
    /// has no report URL or the reason is not reported (`replayed`, device-level codes).
    public func reportFailure(reason: ReasonCode, kid: KeyID?, now: Int64, deadline: ContinuousClock.Instant) async -> ReportStatus? {
        guard ReceiptMessage.reportableReasons.contains(reason), let url = reportURL() else { return nil }
        let count: Int?
        do { count = try outbox.noteFailure(reason: reason, kid: kid, now: now, window: reportWindowSeconds) } catch {
            logger.error("failure report window unreadable; report not made", metadata: ["error": "\(error)"])
            return nil
        }
        guard let count else { return .suppressed }
        let message = ReceiptMessage.failed(reason: reason, kid: kid, at: now, count: count)
        let result = await post(message, to: url, deadline: deadline)
        if case .accepted = result { return .sent }
        do {
            try outbox.enqueue(url: url, message: message, now: now)
            deferOrigin(of: url, after: result, now: now)
            return .queued
        } catch {
            logger.error("failure report could neither be sent nor queued", metadata: ["error": "\(error)"])
            return nil
        }
    }

    /// After a POST whose entry was queued: when the server answered `429` or `503` with `Retry-After`, its origin
    /// is not tried before then (a flush after this delivery skips it; the next one after that time sends it).
    /// Any other answer leaves the origin as it was: the entry waits for the next flush. A failure to record it is
    /// logged (the entry is queued all the same).
    func deferOrigin(of url: String, after result: ReceiptPostResult, now: Int64) {
        guard let retryAfter = result.retryAfter, let origin = HTTPURL(url)?.origin else { return }
        do {
            try outbox.settle(origin: origin, removing: [], droppedReported: 0, failed: true, retryAfter: retryAfter,
                              connectionRefused: false, now: now)
        } catch {
            logger.error("a collector's Retry-After could not be recorded in the outbox", metadata: ["error": "\(error)"])
        }
    }

    /// How many origins a flush sends to at once.
    static let flushConcurrency = 4

    /// The statuses that refuse an entry for good (it is removed): `400`, `403`, `404`, `410`, `413`.
    static let finalRefusals: Set<Int> = [400, 403, 404, 410, 413]

    /// Sends what waits in the outbox, each origin (`scheme://host:port`) on its own, a few at once: an origin's
    /// entries go oldest first, each with its own deadline, until one gets neither `2xx` nor a final refusal
    /// (no answer, `3xx`, `401`, `429`, `5xx`, …); that origin then backs off (kept in the outbox) and is not tried
    /// again before its backoff ends, unless `ignoringBackoff` (a flush asked for by hand): for as long as the
    /// server's `Retry-After` says on a `429` or `503` (at most the backoff cap), else exponentially (capped), from
    /// a shorter first wait when the connection was refused (a collector restarting; #44 pilot 5).
    /// An origin's first entry sent carries the dropped count of that origin's entries only.
    public func flush(now: Int64, ignoringBackoff: Bool = false) async -> OutboxFlushSummary {
        var summary = OutboxFlushSummary()
        let queues: [ReceiptOriginQueue]
        do { queues = try outbox.queues(now: now) } catch {
            logger.error("outbox unreadable", metadata: ["error": "\(error)"])
            return summary
        }
        summary.remaining = queues.reduce(0) { $0 + $1.entries.count }
        // Due origins, those failing least first: a healthy collector is not queued behind failing ones.
        let due = queues.enumerated().filter { !$0.element.entries.isEmpty && (ignoringBackoff || $0.element.retryAt == nil) }
            .sorted { ($0.element.failures, $0.offset) < ($1.element.failures, $1.offset) }.map(\.element)
        // Origins another flush of this process is sending now are left to it.
        let gate = flushGate
        let mine = gate.map { gate in due.filter { gate.enter($0.origin) } } ?? due
        defer { if let gate { for queue in mine { gate.leave(queue.origin) } } }
        await withTaskGroup(of: (sent: Int, rejected: Int).self) { group in
            var next = mine.makeIterator()
            for _ in 0..<Self.flushConcurrency {
                guard let queue = next.next() else { break }
                group.addTask { await self.flush(queue, now: now) }
            }
            while let done = await group.next() {
                summary.sent += done.sent
                summary.rejected += done.rejected
                summary.remaining -= done.sent + done.rejected
                if let queue = next.next() { group.addTask { await self.flush(queue, now: now) } }
            }
        }
        return summary
    }

    /// Flushes one origin's queue and records the outcome (one outbox transaction).
    func flush(_ queue: ReceiptOriginQueue, now: Int64) async -> (sent: Int, rejected: Int) {
        var sent = 0
        var rejected = 0
        var done: [UInt64] = []
        var droppedToReport = queue.dropped
        var droppedReported = 0
        var failed = false
        var retryAfter: Int64?
        var connectionRefused = false
        for entry in queue.entries {
            let result = await post(entry.message, dropped: droppedToReport, to: entry.url, deadline: nil)
            switch result {
            case .accepted:
                sent += 1
                done.append(entry.sequence)
                droppedReported += droppedToReport
                droppedToReport = 0
            case let .refused(status, _) where Self.finalRefusals.contains(status):
                rejected += 1
                done.append(entry.sequence)
            default:
                failed = true
                retryAfter = result.retryAfter
                connectionRefused = result == .connectionRefused
            }
            if failed { break }
        }
        do {
            try outbox.settle(origin: queue.origin, removing: done, droppedReported: droppedReported, failed: failed, retryAfter: retryAfter,
                              connectionRefused: connectionRefused, now: now)
        } catch {
            logger.error("a flush's outcome could not be recorded in the outbox (sent entries will be sent again)", metadata: ["error": "\(error)"])
        }
        return (sent, rejected)
    }
}
