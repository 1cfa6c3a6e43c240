import Foundation
import Testing
import SealedPushCrypto
import SealedPushWire
@testable import SealedPushKeychain
#if canImport(Glibc)
import Glibc
#endif

/// Several `keychain-torture` processes on one store: concurrency and crashes across process boundaries.
@Suite("Multi-process and crash safety", .serialized)
struct ProcessTests {
    func number(_ item: KeychainItem) -> Int { Int(text(item.data) ?? "") ?? -1 }

    func sleepMilliseconds(_ ms: Int) { usleep(useconds_t(ms * 1000)) }

    /// SIGKILLs a started helper and reaps it.
    @discardableResult
    func killHard(_ started: (Process, Pipe, Pipe)) -> Process {
        kill(started.0.processIdentifier, SIGKILL)
        _ = Torture.finish(started)
        return started.0
    }

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
            let r = Torture.finish(w)
            #expect(r.status == 0, "writer failed: \(r.err)")
        }
        let r = Torture.finish(reader)
        #expect(r.status == 0, "reader failed: \(r.err)")
        let store = try KeychainStore(url: dir.store)
        #expect(number(try store.read(itemClass: .genericPassword, service: "torture", account: "shared")) == 3 * perWriter)
        #expect(try store.copyMatching(KeychainQuery(service: "torture-own", limit: .all)).count == 3 * perWriter)
        #expect(tempFiles(dir.store).isEmpty)
    }

    @Test("a writer SIGKILLed at random points: the store always opens, every item is its old or new value, temp files go on the next write")
    func crashInjection() throws {
        let dir = try TempDirectory()
        _ = try KeychainStore(url: dir.store)
        let items = 4
        var last = [Int](repeating: 0, count: items)
        var rng = SystemRandomNumberGenerator()
        for round in 0..<25 {
            let writer = try Torture.start(["writer", dir.store.path, "\(items)"])
            sleepMilliseconds(Int.random(in: 40...160, using: &rng))
            let killed = killHard(writer)
            #expect(killed.terminationReason == .uncaughtSignal, "round \(round): the writer exited on its own")
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
            last = values
            // The next write cleans up whatever the killed writer left in tmp/.
            try store.add(itemClass: .genericPassword, service: "marker", account: "r\(round)", data: secret("m"))
            #expect(tempFiles(dir.store).isEmpty, "round \(round): a temp file survived the next write")
        }
        #expect(last.max() ?? 0 > 0, "the writer never got to write")
    }

    @Test("rotation in one process while another decrypts with cold keyrings: zero spurious failures")
    func rotateWhileDecrypting() throws {
        let dir = try TempDirectory()
        try DeviceKeyring(root: dir.store).generate()
        let rotator = try Torture.start(["rotate", dir.store.path, "0"])
        let decryptor = try Torture.run(["decrypt", dir.store.path, "200"])
        killHard(rotator)  // crash-safe by design, and SIGKILL cannot be blocked
        #expect(decryptor.status == 0, "decryptor: \(decryptor.out) \(decryptor.err)")
        #expect(decryptor.out.contains("failures=0"))
        let list = try DeviceKeyring(root: dir.store).list()
        #expect(list.count > 3, "the rotator made only \(list.count - 1) rotations during the run")
        #expect(list.filter { $0.state == .active }.count == 1)
    }

    @Test("rotation SIGKILLed at random points: exactly one active key every time, no committed key lost")
    func killDuringRotation() throws {
        let dir = try TempDirectory()
        let first = try DeviceKeyring(root: dir.store).generate()
        var known: Set<KeyID> = [first.keyID]
        var rng = SystemRandomNumberGenerator()
        for round in 0..<20 {
            let rotator = try Torture.start(["rotate", dir.store.path, "0"])
            sleepMilliseconds(Int.random(in: 40...160, using: &rng))
            killHard(rotator)
            let keyring = try DeviceKeyring(root: dir.store)
            let list = try keyring.list()
            let active = list.filter { $0.state == .active }
            #expect(active.count == 1, "round \(round): \(active.count) active keys")
            let present = Set(list.filter { $0.state != .destroyed }.map(\.keyID))
            #expect(known.isSubset(of: present), "round \(round): lost \(known.subtracting(present).map(\.hex))")
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
        #expect(known.count > 3, "the rotator never committed")
    }
}
