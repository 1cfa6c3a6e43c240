import Testing
import SealedPushCrypto
import SealedPushWire

/// The receipt outbox's rules as values (receipts v1 §2, §3; reveal v1 §6), which both the keychain store's outbox
/// and the app group's apply. What the stores' suites already pin through files (bounds by count and age, the byte
/// cap, recovery, the window's ten minutes, tickets once per message id, backoff over a courier) is not repeated here.
@Suite("Receipt outbox state")
struct ReceiptOutboxStateTests {
    let token = Base64.encodeURLSafeNoPadding([UInt8](repeating: 1, count: 16))
    let limits = ReceiptOutboxLimits()

    func receipt(_ n: Int) -> ReceiptMessage { .delivered(id: "m\(n)", token: token, at: Int64(n), attachments: nil) }

    func entry(_ host: String, _ n: Int) throws -> ReceiptOutboxState.NewEntry {
        try ReceiptOutboxState.NewEntry(url: "https://\(host)/r", message: receipt(n))
    }

    @Test("limits: each raised to its least; the backoff doubles from the base per failure in a row, at most the cap, without overflow")
    func limitsAndBackoff() {
        let low = ReceiptOutboxLimits(capacity: 0, maximumAgeSeconds: 5, maximumEncodedBytes: 10, backoffBaseSeconds: 0, backoffCapSeconds: -1)
        #expect(low.capacity == 1 && low.maximumAgeSeconds == 5 && low.maximumEncodedBytes == 16 * 1024)
        #expect(low.backoffBaseSeconds == 1 && low.backoffCapSeconds == 1)
        #expect(limits == ReceiptOutboxLimits(capacity: 1000, maximumAgeSeconds: 7 * 86_400, maximumEncodedBytes: 512 * 1024,
                                              backoffBaseSeconds: 60, backoffCapSeconds: 3600))
        #expect([0, 1, 2, 3, 4, 5, 6, 7, 100, Int.max].map { limits.backoff(afterFailures: $0) }
            == [60, 60, 120, 240, 480, 960, 1920, 3600, 3600, 3600])
        let huge = ReceiptOutboxLimits(backoffBaseSeconds: 1 << 62, backoffCapSeconds: .max)
        #expect(huge.backoff(afterFailures: 1) == 1 << 62)
        #expect(huge.backoff(afterFailures: 3) == .max)
    }

    @Test("an entry is checked before it is queued: a receipt URL of at most 2048 bytes, a body of at most 4096 bytes")
    func newEntry() throws {
        let checked = try entry("r.example", 1)
        #expect(checked.origin == "https://r.example:443" && checked.url == "https://r.example/r" && checked.message == receipt(1))
        let long = "https://r.example/" + String(repeating: "a", count: 2048 - 17)
        #expect(throws: ReceiptOutboxEntryProblem.url("is longer than 2048 bytes")) {
            try ReceiptOutboxState.NewEntry(url: long, message: receipt(1))
        }
        #expect(ReceiptOutboxEntryProblem.url("is longer than 2048 bytes").description == "the receipt URL is longer than 2048 bytes")
        #expect(throws: ReceiptOutboxEntryProblem.self) { try ReceiptOutboxState.NewEntry(url: "http://example.com/r", message: receipt(1)) }
        let huge = ReceiptMessage.delivered(id: String(repeating: "\u{1F600}", count: 1100), token: token, at: 1, attachments: nil)
        do {
            _ = try ReceiptOutboxState.NewEntry(url: "https://r.example/r", message: huge)
            Issue.record("a body over 4096 bytes was accepted")
        } catch {
            guard case let .bodyTooLarge(bytes) = error else { Issue.record("\(error)"); return }
            #expect(bytes > ReceiptMessage.maximumBodyBytes)
            #expect(error.description == "the receipt body would be \(bytes) bytes, over the 4096 a collector accepts")
        }
    }

    @Test("queues: origins in the order of their oldest entry, then the origins with only a record, by name; each oldest first")
    func queueOrder() throws {
        var state = ReceiptOutboxState()
        for (n, host) in ["b.example", "a.example", "b.example"].enumerated() { state.enqueue(try entry(host, n), now: 100, limits: limits) }
        state.origins["https://z.example:443"] = .init(dropped: 2, touched: 100)
        state.origins["https://c.example:443"] = .init(dropped: 1, touched: 100)
        #expect(state.next == 4)
        let queues = state.queues(now: 100, limits: limits)
        #expect(queues.map(\.origin) == ["https://b.example:443", "https://a.example:443", "https://c.example:443", "https://z.example:443"])
        #expect(queues[0].entries.map(\.sequence) == [1, 3] && queues[1].entries.map(\.sequence) == [2])
        #expect(queues[2].entries.isEmpty && queues[2].dropped == 1 && queues[3].dropped == 2)
        #expect(state.totalDropped == 3)
    }

    @Test("settle: a failure backs the origin off (a retry time past the longest backoff is due now); a success clears it; dropped never below 0")
    func settle() throws {
        var state = ReceiptOutboxState()
        let origin = "https://b.example:443"
        state.enqueue(try entry("b.example", 1), now: 1000, limits: limits)
        state.enqueue(try entry("b.example", 2), now: 1000, limits: limits)
        state.origins[origin]?.dropped = 2
        state.settle(origin: origin, removing: [1], droppedReported: 5, failed: true, now: 1000, limits: limits)
        #expect(state.entries.map(\.sequence) == [2])
        #expect(state.origins[origin] == .init(dropped: 0, failures: 1, retryAt: 1060, touched: 1000))
        #expect(state.queues(now: 1000, limits: limits).first?.retryAt == 1060)
        #expect(state.queues(now: 1060, limits: limits).first?.retryAt == nil)
        // The device clock set back further than the longest backoff: due now.
        #expect(state.queues(now: 1060 - 3601, limits: limits).first?.retryAt == nil)
        state.settle(origin: origin, removing: [], droppedReported: 0, failed: true, now: 1100, limits: limits)
        #expect(state.origins[origin]?.retryAt == 1220)
        state.settle(origin: origin, removing: [], droppedReported: 0, failed: false, now: 1100, limits: limits)
        #expect(state.origins[origin] == .init(dropped: 0, failures: 0, retryAt: 0, touched: 1000))
        // An origin with no record: a failure makes one (touched now); a success leaves nothing to keep.
        state.settle(origin: "https://new.example:443", removing: [], droppedReported: 0, failed: false, now: 1100, limits: limits)
        #expect(state.origins["https://new.example:443"] == nil)
        state.settle(origin: "https://new.example:443", removing: [], droppedReported: 0, failed: true, now: 1100, limits: limits)
        #expect(state.origins["https://new.example:443"] == .init(dropped: 0, failures: 1, retryAt: 1160, touched: 1100))
        state.remove(sequences: [2])
        #expect(state.entries.isEmpty && state.origins[origin] != nil)
    }

    @Test("prune: entries past the age limit are counted at their origin; records without entries go when they hold nothing or are stale")
    func prune() throws {
        let limits = ReceiptOutboxLimits(maximumAgeSeconds: 100)
        var state = ReceiptOutboxState()
        state.enqueue(try entry("a.example", 1), now: 1000, limits: limits)
        state.enqueue(try entry("b.example", 2), now: 1050, limits: limits)
        state.origins["https://idle.example:443"] = .init(touched: 1000)
        state.origins["https://old.example:443"] = .init(dropped: 3, touched: 899)
        state.origins["https://recovered.example:443"] = .init(dropped: 1)
        #expect(state.needsPruning(now: 1000, limits: limits))
        state.prune(now: 1000, limits: limits)
        #expect(Set(state.origins.keys) == ["https://a.example:443", "https://b.example:443", "https://recovered.example:443"])
        // A record recovered without a time starts its age now.
        #expect(state.origins["https://recovered.example:443"]?.touched == 1000)
        // Exactly the age limit stays.
        #expect(!state.needsPruning(now: 1100, limits: limits))
        #expect(state.needsPruning(now: 1101, limits: limits))
        state.prune(now: 1101, limits: limits)
        #expect(state.entries.map(\.sequence) == [2])
        // a.example's entry aged out, counted there; its record, last queued to 101 s ago, went with it, as did the
        // recovered one: past the age limit, their counts are forgotten.
        #expect(Set(state.origins.keys) == ["https://b.example:443"])
        #expect(state.totalDropped == 0)
    }

    @Test("bounds on writing: the oldest entries beyond capacity are counted at their origins; idle records beyond capacity go, least recently queued first")
    func countBounds() throws {
        let limits = ReceiptOutboxLimits(capacity: 2)
        var state = ReceiptOutboxState()
        for (n, host) in ["a.example", "b.example", "a.example"].enumerated() { state.enqueue(try entry(host, n), now: 10, limits: limits) }
        var bytes = state.boundedEncoding(limits: limits)
        #expect(state.entries.map(\.sequence) == [2, 3])
        #expect(state.origins["https://a.example:443"]?.dropped == 1)
        #expect(ReceiptOutboxState(decoding: bytes, requiringOrigins: true) == state)
        var idle = ReceiptOutboxState()
        for n in 1...3 { idle.origins["https://i\(n).example:443"] = .init(dropped: 1, touched: Int64(4 - n)) }
        bytes = idle.boundedEncoding(limits: limits)
        #expect(Set(idle.origins.keys) == ["https://i1.example:443", "https://i2.example:443"])
        #expect(bytes == idle.encoded())
    }

    @Test("the byte bound: idle origin records go first, least recently queued first, then the oldest entries")
    func byteBound() throws {
        let limits = ReceiptOutboxLimits(maximumEncodedBytes: 16 * 1024)
        var state = ReceiptOutboxState()
        for n in 0..<300 { state.origins["https://idle-\(n).example:443"] = .init(dropped: 1, touched: Int64(n + 1)) }
        state.enqueue(try entry("live.example", 1), now: 1000, limits: limits)
        let bytes = state.boundedEncoding(limits: limits)
        #expect(bytes.count <= 16 * 1024 && bytes == state.encoded())
        #expect(state.entries.map(\.sequence) == [1])
        let kept = state.origins.filter { $0.key != "https://live.example:443" }.map(\.value.touched).sorted()
        #expect(!kept.isEmpty && kept.count < 300)
        #expect(kept == Array(kept[0]...300), "the most recently queued idle records are kept")
    }

    @Test("decoding: empty is empty; the format without origins is read only when origins are not required; round trips")
    func decoding() throws {
        #expect(ReceiptOutboxState(decoding: [], requiringOrigins: true) == ReceiptOutboxState())
        let legacy = Array(#"{"next":2,"dropped":1,"entries":[{"seq":1,"url":"https://b.example/r","queued_at":5,"body":{"v":1,"type":"delivered","id":"x","token":"leSLeiHU1ME6svkg7Bq3Yw","at":5}}]}"#.utf8)
        #expect(ReceiptOutboxState(decoding: legacy, requiringOrigins: true) == nil)
        let read = try #require(ReceiptOutboxState(decoding: legacy, requiringOrigins: false))
        #expect(read.next == 2 && read.dropped == 1 && read.entries.map(\.sequence) == [1])
        #expect(read.origins == ["https://b.example:443": .init(touched: 5)])
        #expect(ReceiptOutboxState(decoding: read.encoded(), requiringOrigins: true) == read)
        for text in ["not json", "{}", "[]", #"{"next":0,"dropped":0,"entries":[]}"#, #"{"next":1,"dropped":-1,"entries":[]}"#,
                     #"{"next":1,"dropped":0,"origins":{},"entries":[]}"#, #"{"next":1,"dropped":0,"origins":[],"entries":[{}]}"#] {
            #expect(ReceiptOutboxState(decoding: Array(text.utf8), requiringOrigins: false) == nil, "\(text)")
        }
    }

    @Test("recovering: every entry listed is counted as dropped (at its origin when its URL reads); one when nothing can be counted")
    func recovering() {
        let nothing = ReceiptOutboxState.recovering(from: nil)
        #expect(nothing.state == ReceiptOutboxState(dropped: 1) && nothing.lost == 1)
        #expect(ReceiptOutboxState.recovering(from: Array("not json".utf8)).state == ReceiptOutboxState(dropped: 1))
        let text = #"{"next": 9, "dropped": 2, "entries": [{"seq": 1, "url": "https://a.example/r"}, {"seq": 12}, 7]}"#
        let (state, lost) = ReceiptOutboxState.recovering(from: Array(text.utf8))
        #expect(lost == 3 && state.entries.isEmpty)
        #expect(state.next == 13 && state.dropped == 4 && state.origins == ["https://a.example:443": .init(dropped: 1)])
        #expect(state.totalDropped == 5)
    }

    @Test("report window: a clock set back makes a new report; at most maximumPairs pairs when bounded, every pair when not")
    func reportWindow() {
        var window = ReceiptReportWindow()
        let kid = KeyID(hex: "e2a0cdd02cd5f429")!
        #expect(window.noteFailure(reason: .unknownKey, kid: kid, now: 1000, window: 600, maximumPairs: nil) == 1)
        #expect(window.noteFailure(reason: .unknownKey, kid: kid, now: 1001, window: 600, maximumPairs: nil) == nil)
        #expect(window.noteFailure(reason: .unknownKey, kid: kid, now: 900, window: 600, maximumPairs: nil) == 2)
        var unbounded = ReceiptReportWindow()
        var bounded = ReceiptReportWindow()
        for n in 0..<5 {
            let junk = KeyID(publicKey: [UInt8](repeating: UInt8(n), count: 32))
            #expect(unbounded.noteFailure(reason: .decryptionFailed, kid: junk, now: 10 + Int64(n), window: 600, maximumPairs: nil) == 1)
            #expect(bounded.noteFailure(reason: .decryptionFailed, kid: junk, now: 10 + Int64(n), window: 600, maximumPairs: 3) == 1)
        }
        #expect(unbounded.rows.count == 5)
        #expect(bounded.rows.compactMap { $0["last"]?.intValue } == [12, 13, 14])
        #expect(ReceiptReportWindow(decoding: bounded.encoded(), skippingNonObjects: false) == bounded)
    }

    @Test("issue #36: report window rows that suppressed failures are forgotten after the maximum age, and the rows are bounded")
    func reportWindowIsPruned() {
        let week = ReceiptReportWindow.maximumAgeSeconds
        var window = ReceiptReportWindow()
        // Each junk key id fails twice inside its window: a row with a suppressed count that no later report clears.
        for n in 0..<50 {
            let junk = KeyID(publicKey: [UInt8](repeating: UInt8(n), count: 32))
            #expect(window.noteFailure(reason: .decryptionFailed, kid: junk, now: 1000 + Int64(n), window: 600, maximumPairs: nil) == 1)
            #expect(window.noteFailure(reason: .decryptionFailed, kid: junk, now: 1001 + Int64(n), window: 600, maximumPairs: nil) == nil)
        }
        #expect(window.rows.count == 50)
        // Within the maximum age the counts are kept for the next report of their pair…
        let kid = KeyID(hex: "e2a0cdd02cd5f429")!
        #expect(window.noteFailure(reason: .unknownKey, kid: kid, now: 1000 + week, window: 600, maximumPairs: nil) == 1)
        #expect(window.rows.count == 51)
        let again = KeyID(publicKey: [UInt8](repeating: 49, count: 32))
        var copy = window
        #expect(copy.noteFailure(reason: .decryptionFailed, kid: again, now: 1049 + week, window: 600, maximumPairs: nil) == 2)
        // … and once they are older than that, they go (the pair's next failure then reports itself alone).
        #expect(window.noteFailure(reason: .unknownKey, kid: kid, now: 1100 + week, window: 600, maximumPairs: nil) == nil)
        #expect(window.rows.count == 1, "\(window.rows.count) rows left")
        // A clock set far back forgets them too.
        var back = ReceiptReportWindow()
        _ = back.noteFailure(reason: .unknownKey, kid: kid, now: 10 * week, window: 600, maximumPairs: nil)
        _ = back.noteFailure(reason: .unknownKey, kid: kid, now: 10 * week + 1, window: 600, maximumPairs: nil)
        back.prune(now: week, window: 600)
        #expect(back.rows.isEmpty)
        // Bounded: at most maximumPairs rows, suppressed counts or not.
        var bounded = ReceiptReportWindow()
        for n in 0..<20 {
            let junk = KeyID(publicKey: [UInt8](repeating: UInt8(n), count: 32))
            _ = bounded.noteFailure(reason: .decryptionFailed, kid: junk, now: 1000 + Int64(n), window: 600, maximumPairs: 8)
            _ = bounded.noteFailure(reason: .decryptionFailed, kid: junk, now: 1000 + Int64(n), window: 600, maximumPairs: 8)
        }
        #expect(bounded.rows.count == 8)
    }

    @Test("issue #36: a Retry-After backs the origin off that long, at most the cap; without one, the exponential backoff")
    func retryAfterBackoff() {
        let limits = ReceiptOutboxLimits()
        var state = ReceiptOutboxState()
        let origin = "https://c.example:443"
        state.settle(origin: origin, removing: [], droppedReported: 0, failed: true, retryAfter: 1, now: 100, limits: limits)
        #expect(state.origins[origin]?.retryAt == 101 && state.origins[origin]?.failures == 1)
        state.settle(origin: origin, removing: [], droppedReported: 0, failed: true, retryAfter: 0, now: 200, limits: limits)
        #expect(state.origins[origin]?.retryAt == 200)
        state.settle(origin: origin, removing: [], droppedReported: 0, failed: true, retryAfter: 99_999, now: 300, limits: limits)
        #expect(state.origins[origin]?.retryAt == 300 + limits.backoffCapSeconds)
        state.settle(origin: origin, removing: [], droppedReported: 0, failed: true, retryAfter: -5, now: 400, limits: limits)
        #expect(state.origins[origin]?.retryAt == 400)
        state.settle(origin: origin, removing: [], droppedReported: 0, failed: true, now: 500, limits: limits)
        #expect(state.origins[origin]?.retryAt == 500 + limits.backoff(afterFailures: 5))
        state.settle(origin: origin, removing: [], droppedReported: 0, failed: false, retryAfter: 30, now: 600, limits: limits)
        #expect(state.origins[origin] == nil, "a success clears the backoff (the record, holding nothing, is forgotten)")
    }

    @Test("a list of rows: empty is empty; values other than objects are skipped or make it unreadable, as asked; not an array is unreadable")
    func rowDecoding() {
        #expect(ReceiptReportWindow(decoding: [], skippingNonObjects: false) == ReceiptReportWindow())
        let mixed = Array(#"[1, {"reason": "unknownKey", "kid": null, "last": 5, "suppressed": 0}]"#.utf8)
        #expect(ReceiptReportWindow(decoding: mixed, skippingNonObjects: true)?.rows.count == 1)
        #expect(ReceiptReportWindow(decoding: mixed, skippingNonObjects: false) == nil)
        #expect(RevealTicketList(decoding: Array("{}".utf8), skippingNonObjects: true) == nil)
        #expect(RevealTicketList(decoding: Array("[1, 2".utf8), skippingNonObjects: true) == nil)
    }

    @Test("tickets: one per notification (a later one replaces it); taken once per message id; expired ones go; at most maximumCount")
    func tickets() {
        var tickets = RevealTicketList()
        let request = ReceiptRequest(url: "https://r.example/r", token: token)
        tickets.keep(request, messageID: "m1", keepUntil: 100, requestIdentifier: "n1", now: 1)
        tickets.keep(request, messageID: "m2", keepUntil: 100, requestIdentifier: "n1", now: 1)
        tickets.keep(request, messageID: "m2", keepUntil: 100, requestIdentifier: "n2", now: 1)
        tickets.keep(request, messageID: "m3", keepUntil: 5, requestIdentifier: "n3", now: 1)
        #expect(tickets.rows.count == 3)
        let taken = tickets.take(requestIdentifier: "n1", now: 2)
        #expect(taken?.request == request && taken?.messageID == "m2" && taken?.keepUntil == 100)
        #expect(tickets.take(requestIdentifier: "n2", now: 2) == nil)
        #expect(tickets.take(requestIdentifier: "n3", now: 6) == nil && tickets.rows.isEmpty)
        for n in 0..<(RevealTicketList.maximumCount + 1) {
            tickets.keep(request, messageID: "m\(n)", keepUntil: 100, requestIdentifier: "r\(n)", now: 1)
        }
        #expect(tickets.rows.count == RevealTicketList.maximumCount && tickets.rows.first?["request"] == .string("r1"))
    }
}
