import Foundation
import Testing
import SealedPushCrypto
import SealedPushTestSupport
import SealedPushWire
@testable import SealedPushKeychain
#if canImport(Glibc)
import Glibc
#endif

/// The receipt outbox (receipts v1 §2) written by a `keychain-torture outbox` child SIGKILLed mid-write.
@Suite("Receipt outbox: SIGKILL while queueing", .serialized, .timeLimit(.minutes(20)))
struct OutboxCrashTests {
    @Test("an outbox writer SIGKILLed at random points, many times: the outbox always reads and no entry acknowledged as queued is lost")
    func killWhileQueueing() throws {
        let dir = try TempDirectory()
        _ = try KeychainStore(url: dir.store)
        var rng = SeededGenerator.forTest()
        var acknowledged = 0
        var roundsWithEntries = 0
        for round in 0..<30 {
            let child = try Torture.start(["outbox", dir.store.path], readLines: true)
            guard child.waitForLine(startingWith: "ready", within: .seconds(30)) != nil else {
                child.kill()
                Issue.record("round \(round): the outbox writer stalled: \(child.stderrText)")
                return
            }
            // 0–3 acknowledged entries, then a random pause of up to about one write.
            for _ in 0..<Int.random(in: 0...3, using: &rng) { _ = child.waitForLine(startingWith: "queued", within: .seconds(30)) }
            usleep(useconds_t(Int.random(in: 0...6_000, using: &rng)))
            #expect(child.kill().killed(by: SIGKILL), "round \(round): the writer exited on its own: \(child.stderrText)")
            let reported = Set(child.lines.filter { $0.hasPrefix("queued ") }.map { "m" + $0.dropFirst("queued ".count) })
            acknowledged += reported.count
            let store = try KeychainStore(url: dir.store)
            let outbox = ReceiptOutboxStore(store: store)
            let waiting: (entries: [ReceiptOutboxEntry], dropped: Int)
            do { waiting = try outbox.entries() } catch {
                Issue.record("round \(round): the outbox does not read after SIGKILL: \(error.description)")
                return
            }
            let ids = Set(waiting.entries.compactMap { entry -> String? in
                if case let .delivered(id, _, _, _) = entry.message { return id } else { return nil }
            })
            #expect(reported.isSubset(of: ids), "round \(round): lost \(reported.subtracting(ids).sorted())")
            #expect(waiting.dropped == 0)
            #expect(ids.count <= reported.count + 1, "round \(round): more than the write in progress appeared")
            if !ids.isEmpty { roundsWithEntries += 1 }
            // Empty it for the next round (through the store, as a flush does).
            try outbox.remove(sequences: waiting.entries.map(\.sequence))
        }
        #expect(acknowledged > 0 && roundsWithEntries >= 10, "the writer did too little: \(acknowledged) entries, \(roundsWithEntries) rounds")
    }
}
