import Foundation
import Testing
import SealedPushCrypto
import SealedPushTestSupport
import SealedPushWire
@testable import SealedPushKeychain
#if canImport(Glibc)
import Glibc
#endif

/// Several `keychain-torture` processes on one store: concurrency and crashes across process boundaries.
@Suite("Multi-process and crash safety", .serialized, .timeLimit(.minutes(20)))
struct ProcessTests {
    func number(_ item: KeychainItem) -> Int { Int(text(item.data) ?? "") ?? -1 }

    /// Temp files of interrupted writes still in the store.
    func tempFiles(_ root: URL) -> [URL] { allFiles(under: root).filter { $0.lastPathComponent.hasPrefix(".tmp-") } }

    @Test("three writer processes and a reader: no update lost, no reader error")
    func concurrentWriters() throws {
        let dir = try TempDirectory()
        _ = try KeychainStore(url: dir.store)  // create it once up front
        let perWriter = 30  // 3 × 30 counter updates + 3 × 30 adds, interleaved by the kernel
        let writers = try (0..<3).map { _ in try Torture.start(["counter", dir.store.path, "shared", "\(perWriter)"]) }
        let reader = try Torture.start(["reader", dir.store.path, "shared", "150"])
        for w in writers {
            let r = try w.waitForExit(within: .seconds(120))
            #expect(r.status == 0, "writer failed: \(r.stderr)")
        }
        let r = try reader.waitForExit(within: .seconds(120))
        #expect(r.status == 0, "reader failed: \(r.stderr)")
        let store = try KeychainStore(url: dir.store)
        #expect(number(try store.read(itemClass: .genericPassword, service: "torture", account: "shared")) == 3 * perWriter)
        #expect(try store.copyMatching(KeychainQuery(service: "torture-own", limit: .all)).count == 3 * perWriter)
        #expect(tempFiles(dir.store).isEmpty)
    }

    /// How long a test waits for a child's `ready` line or next progress line before failing: far
    /// more than a sanitizer build's start-up, and only spent when something is broken.
    static let childWait: Duration = .seconds(30)

    /// Waits for a child's `ready` line, then for `steps` of its progress lines (`prefix`), each
    /// within `childWait`; folds the gaps between lines into `period` (the child's time per step in
    /// this build, so the kill window scales with a slow sanitizer build). `nil` if the child stalls.
    func advance(_ child: ChildProcess, steps: Int, progress prefix: String, period: inout Duration) -> String? {
        let clock = ContinuousClock()
        guard let ready = child.waitForLine(startingWith: "ready", within: Self.childWait) else { return nil }
        var last = clock.now
        for _ in 0..<steps {
            guard child.waitForLine(startingWith: prefix, within: Self.childWait) != nil else { return nil }
            let now = clock.now
            period = (period + (now - last)) / 2
            last = now
        }
        return ready
    }

    /// A random pause of 0 to 1.25 × `period`, so the kill lands at any point of the child's next step.
    func randomPause(within period: Duration, using rng: inout SeededGenerator) {
        let maxMicroseconds = Int(period.components.seconds) * 1_250_000 + Int(period.components.attoseconds / 800_000_000_000)
        let us = Int.random(in: 0...max(maxMicroseconds, 1), using: &rng)
        usleep(useconds_t(us))
    }

    @Test("a writer SIGKILLed at random points: the store always opens, every item is its old or new value, temp files go on the next write")
    func crashInjection() throws {
        let dir = try TempDirectory()
        _ = try KeychainStore(url: dir.store)
        let items = 4
        var last = [Int](repeating: 0, count: items)
        var rng = SeededGenerator.forTest()
        var generationsCommitted = 0
        var roundsThatWrote = 0
        var period: Duration = .milliseconds(30)  // one generation; measured from the child as it runs
        for round in 0..<25 {
            let writer = try Torture.start(["writer", dir.store.path, "\(items)"], readLines: true)
            // Time the kill from the child's progress, not from its start (a sanitizer build starts
            // several times slower): `ready` (store open), 0–2 complete generations, then a random
            // pause of up to about one generation, so the kill lands anywhere in a write.
            guard let ready = advance(writer, steps: Int.random(in: 0...2, using: &rng), progress: "gen", period: &period),
                  let start = Int(ready.dropFirst("ready ".count)) else {
                writer.kill()
                Issue.record("round \(round): the writer stalled before its kill point: \(writer.lines) \(writer.stderrText)")
                return
            }
            randomPause(within: period, using: &rng)
            #expect(writer.kill().killed(by: SIGKILL), "round \(round): the writer exited on its own: \(writer.stderrText)")
            // Every generation the writer reported complete before it died.
            let reported = writer.lines.filter { $0.hasPrefix("gen ") }.compactMap { Int($0.dropFirst(4)) }
            generationsCommitted += reported.count
            let store = try KeychainStore(url: dir.store)
            var values: [Int] = []
            for i in 0..<items {
                do {
                    values.append(number(try store.read(itemClass: .genericPassword, service: "torture", account: "x\(i)")))
                } catch .itemNotFound {
                    values.append(0)
                } catch {
                    Issue.record("round \(round): item x\(i) unreadable after SIGKILL: \(error.description)")
                    values.append(-1)
                }
            }
            // The writer only ever raises values: each item holds the value it had before the
            // kill or a newer one the writer completed, never a torn or rolled-back one.
            #expect(values.allSatisfy { $0 >= 0 }, "round \(round): \(values)")
            #expect(zip(values, last).allSatisfy { $0 >= $1 }, "round \(round): \(values) went back from \(last)")
            // No completed write is lost (every item holds at least the last generation reported
            // complete), and at most the write in progress is missing (nothing beyond the next generation).
            let done = reported.last ?? start
            if let g = reported.last { #expect(values.allSatisfy { $0 >= g }, "round \(round): \(values) lost generation \(g)") }
            #expect(values.allSatisfy { $0 <= done + 1 }, "round \(round): \(values) beyond generation \(done + 1)")
            if values != last { roundsThatWrote += 1 }
            last = values
            // The next write cleans up whatever the killed writer left in tmp/.
            try store.add(itemClass: .genericPassword, service: "marker", account: "r\(round)", data: secret("m"))
            #expect(tempFiles(dir.store).isEmpty, "round \(round): a temp file survived the next write")
        }
        // A child killed before it wrote anything would make every check above pass vacuously.
        #expect(generationsCommitted > 0 && roundsThatWrote >= 12,
                "the writer did too little: \(generationsCommitted) generations, \(roundsThatWrote) of 25 rounds changed an item")
    }

    @Test("rotation in one process while another decrypts with cold keyrings: zero spurious failures")
    func rotateWhileDecrypting() throws {
        let dir = try TempDirectory()
        try DeviceKeyring(root: dir.store).generate()
        let rotator = try Torture.start(["rotate", dir.store.path, "0"], readLines: true)
        // Start decrypting once the rotator is rotating, however slow its start-up (sanitizer builds).
        let ready = rotator.waitForLine(startingWith: "ready", within: Self.childWait)
        #expect(ready != nil, "the rotator never became ready: \(rotator.lines)")
        let started = try Torture.start(["decrypt", dir.store.path, "200"])
        // Keep reading the rotator's progress lines meanwhile, so it never blocks on a full pipe.
        while started.isRunning { _ = rotator.nextLine(within: .milliseconds(20)) }
        let decryptor = try started.waitForExit(within: .seconds(120))
        rotator.kill()  // crash-safe by design, and SIGKILL cannot be blocked
        #expect(decryptor.status == 0, "decryptor: \(decryptor.stdoutText) \(decryptor.stderr)")
        #expect(decryptor.stdoutText.contains("failures=0"))
        let list = try DeviceKeyring(root: dir.store).list()
        #expect(list.count > 3, "the rotator made only \(list.count - 1) rotations during the run")
        #expect(list.filter { $0.state == .active }.count == 1)
    }

    @Test("rotation SIGKILLed at random points: exactly one active key every time, no committed key lost")
    func killDuringRotation() throws {
        let dir = try TempDirectory()
        let first = try DeviceKeyring(root: dir.store).generate()
        var known: Set<KeyID> = [first.keyID]
        var rng = SeededGenerator.forTest()
        var committed = 0  // rotations that survived their kill
        var halfDone = 0   // rounds whose kill left a rotation between its first write and its commit
        let rounds = 20
        var period: Duration = .milliseconds(60)  // one rotation; measured from the child as it runs
        for round in 0..<rounds {
            let rotator = try Torture.start(["rotate", dir.store.path, "0"], readLines: true)
            // `ready` (store open, key present), then 0–2 committed rotations, then a random pause of
            // up to about one rotation: the kill lands anywhere in a rotation, or in the recovery of
            // the previous round's, whatever the build's speed.
            guard advance(rotator, steps: Int.random(in: 0...2, using: &rng), progress: "rotated", period: &period) != nil else {
                rotator.kill()
                Issue.record("round \(round): the rotator stalled before its kill point: \(rotator.lines) \(rotator.stderrText)")
                return
            }
            randomPause(within: period, using: &rng)
            #expect(rotator.kill().killed(by: SIGKILL), "round \(round): the rotator exited on its own: \(rotator.stderrText)")
            let reported = rotator.lines.filter { $0.hasPrefix("rotated ") }.compactMap { KeyID(hex: String($0.dropFirst(8))) }

            let store = try KeychainStore(url: dir.store)
            let pointer = try store.read(itemClass: .genericPassword, service: "sealedpush.device-key.active", account: "pointer")
            if text(pointer.data)?.contains("pending") == true { halfDone += 1 }
            let keyring = DeviceKeyring(store: store)
            let list = try keyring.list()
            let active = list.filter { $0.state == .active }
            #expect(active.count == 1, "round \(round): \(active.count) active keys")
            let present = Set(list.filter { $0.state != .destroyed }.map(\.keyID))
            #expect(known.isSubset(of: present), "round \(round): lost \(known.subtracting(present).map(\.hex))")
            // Every rotation the child reported is there; at most one more (committed, then killed
            // before it could say so) — the kill undoes at most the rotation in progress.
            #expect(Set(reported).isSubset(of: present), "round \(round): a reported rotation was lost")
            let new = present.subtracting(known)
            #expect(new.count == reported.count || new.count == reported.count + 1,
                    "round \(round): \(new.count) new keys, \(reported.count) reported")
            if let newest = reported.last, new.count == reported.count {
                #expect(active.first?.keyID == newest, "round \(round): the last reported rotation is not the active key")
            }
            committed += new.count
            for info in list where info.state != .destroyed {
                guard case .found = keyring.lookUpKey(id: info.keyID) else {
                    Issue.record("round \(round): key \(info.keyID.hex) (\(info.state)) does not look up")
                    continue
                }
            }
            #expect(try keyring.export().keyID == active.first?.keyID)
            known.formUnion(present)
        }
        // The next rotation recovers from whatever the last kill left and still leaves one active key.
        let keyring = try DeviceKeyring(root: dir.store)
        try keyring.rotate()
        #expect(try keyring.list().filter { $0.state == .active }.count == 1)
        // Meaningful rounds: rotations committed, and kills did land mid-rotation.
        #expect(committed >= rounds / 2, "only \(committed) rotations committed in \(rounds) rounds")
        #expect(halfDone >= 1, "no kill landed inside a rotation (\(rounds) rounds)")
    }
}
