import Foundation
import Synchronization
import Testing
import SealedPushCrypto
import SealedPushWire
@testable import SealedPushKeychain
#if canImport(Glibc)
import Glibc
#endif

// The "Store" findings of the 2026-11 security review (issue #22): ownership, permission bits,
// the writers' lock wait and the order of the durability syscalls.

/// One file or directory of a store, by its path under the root (`""` is the root itself).
struct StorePart: Sendable, CustomTestStringConvertible {
    let relativePath: String
    let isDirectory: Bool

    var testDescription: String { relativePath.isEmpty ? "the store root" : relativePath }

    /// Its path in the store at `root`, spelled as the store spells it in errors.
    func path(in root: URL) -> String { relativePath.isEmpty ? root.path : root.path + "/" + relativePath }

    /// Every file the store keeps (the item file is the one `openedStore` adds).
    static let files: [StorePart] = ["store.key", ".lock", "generation", "lock-state", "items/sealedpush/key@s@a.item",
                                     "replay/replay-v3.db", "replay/replay.lock"].map { StorePart(relativePath: $0, isDirectory: false) }
    /// Every directory the store keeps, the root included.
    static let directories: [StorePart] = ["", "items", "items/sealedpush", "tmp", "replay"]
        .map { StorePart(relativePath: $0, isDirectory: true) }
    static let all = files + directories
}

/// A store with every file and directory of `StorePart.all` made: one item, a lock state, a replay cache.
func openedStore(_ dir: TempDirectory) throws -> KeychainStore {
    let store = try KeychainStore(url: dir.store)
    try store.add(itemClass: .key, service: "s", account: "a", data: secret("the-secret-value"))
    try store.lock()
    try store.unlock()
    #expect(ReplayCache(store: store).recordIfNew(messageID: "m", keyID: KeyID(publicKey: [UInt8](repeating: 1, count: 32)),
                                                  expiresAt: 2_000_000_000, now: 1_800_000_000))
    for part in StorePart.all {
        #expect(FileManager.default.fileExists(atPath: part.path(in: dir.store)), "\(part.testDescription) was not made")
    }
    return store
}

/// Opens the store at `dir` again and reads its item: touches every part of `StorePart.all`.
func reopenAndRead(_ dir: TempDirectory) -> KeychainError? {
    caught { _ = try KeychainStore(url: dir.store).read(itemClass: .key, service: "s", account: "a") }
}

@Suite("Store review: permission bits", .timeLimit(.minutes(10)))
struct PermissionBitTests {
    /// The six group and other permission bits, one at a time.
    static let groupAndOtherBits: [UInt32] = [0o040, 0o020, 0o010, 0o004, 0o002, 0o001]

    @Test("each single group or other bit on any store file or directory is refused, naming the path and the chmod",
          arguments: StorePart.all, groupAndOtherBits)
    func eachBitIsRefused(part: StorePart, bit: UInt32) throws {
        let dir = try TempDirectory()
        _ = try openedStore(dir)
        let path = part.path(in: dir.store)
        let mode: UInt32 = (part.isDirectory ? 0o700 : 0o600) | bit
        #expect(chmod(path, mode_t(mode)) == 0)
        let error = reopenAndRead(dir)
        #expect(error == .insecurePermissions(path: path, mode: mode, fix: part.isDirectory ? "chmod 700 '\(path)'" : "chmod 600 '\(path)'"),
                "mode \(String(mode, radix: 8)) on \(part.testDescription)")
        #expect(error?.description.contains("the-secret-value") != true)
        #expect(chmod(path, mode_t(part.isDirectory ? 0o700 : 0o600)) == 0)
        #expect(reopenAndRead(dir) == nil)
    }

    @Test("0600 files and 0700 directories are accepted", arguments: StorePart.all)
    func ownerOnlyIsAccepted(part: StorePart) throws {
        let dir = try TempDirectory()
        _ = try openedStore(dir)
        #expect(chmod(part.path(in: dir.store), part.isDirectory ? 0o700 : 0o600) == 0)
        #expect(reopenAndRead(dir) == nil)
    }
}

@Suite("Store review: ownership", .timeLimit(.minutes(10)))
struct OwnershipTests {
    /// A uid no test runs as.
    static let stranger: uid_t = 12345

    @Test("a store file or directory owned by another uid is refused, naming the path and the chown",
          .enabled(if: geteuid() == 0, "needs root to chown a file to another uid (the injected-owner test covers this without root)"),
          arguments: StorePart.all)
    func anotherOwnerIsRefused(part: StorePart) throws {
        let dir = try TempDirectory()
        _ = try openedStore(dir)
        let path = part.path(in: dir.store)
        #expect(lchown(path, Self.stranger, getegid()) == 0)
        let error = reopenAndRead(dir)
        #expect(error == .notOwner(path: path, owner: UInt32(Self.stranger), expected: UInt32(geteuid())),
                "\(part.testDescription) owned by uid \(Self.stranger): \(String(describing: error))")
        #expect(error?.description.contains("chown \(geteuid()) '\(path)'") == true)
        #expect(error?.description.contains("the-secret-value") != true)
        #expect(lchown(path, geteuid(), getegid()) == 0)
        #expect(reopenAndRead(dir) == nil)
    }

    @Test("with another uid injected as the expected owner, the store this process made is refused at its root")
    func injectedOwner() throws {
        let dir = try TempDirectory()
        _ = try openedStore(dir)
        let other = geteuid() &+ 1
        let error = StoreIO.$expectedOwner.withValue(other) { reopenAndRead(dir) }
        #expect(error == .notOwner(path: dir.store.path, owner: UInt32(geteuid()), expected: UInt32(other)))
        #expect(reopenAndRead(dir) == nil)
    }
}

/// Runs `body` on a thread of its own and waits for it at most `limit`. When it is still running then,
/// calls `unstick` (which must let it finish), waits for it and records an issue.
func boundedRun<R: Sendable>(_ what: String, within limit: Duration, unstick: () -> Void,
                             _ body: @escaping @Sendable () -> R) -> R {
    let result = Mutex<R?>(nil)
    let done = DispatchSemaphore(value: 0)
    let thread = Thread {
        let value = body()
        result.withLock { $0 = value }
        done.signal()
    }
    thread.start()
    let seconds = Double(limit.components.seconds) + Double(limit.components.attoseconds) / 1e18
    if done.wait(timeout: .now() + seconds) == .timedOut {
        Issue.record("\(what) was still running after \(limit)")
        unstick()
        done.wait()
    }
    return result.withLock { $0! }
}

@Suite("Store review: writers' lock wait", .serialized, .timeLimit(.minutes(10)))
struct LockWaitTests {
    /// Holds the store's writers' lock through a second open file description of `.lock`, as a stuck process would.
    final class StuckHolder {
        let fd: Int32
        init(_ store: URL) {
            fd = open(store.appendingPathComponent(".lock").path, O_RDWR | O_CLOEXEC)
            #expect(fd >= 0)
            #expect(flock(fd, LOCK_EX) == 0)
        }
        func release() { flock(fd, LOCK_UN) }
        deinit { close(fd) }
    }

    /// Every kind of writer, each one transaction on the store.
    static let writers: [String] = ["add", "update", "modify", "delete", "lock state", "outbox", "trust policy", "keyring"]

    static func write(_ kind: String, _ store: KeychainStore) throws(KeychainError) {
        switch kind {
        case "add": try store.add(itemClass: .key, service: "s", account: "b", data: secret("v"))
        case "update": try store.update(KeychainQuery(service: "s", account: "a"), with: KeychainUpdate(label: .set("l")))
        case "modify": try store.modify(itemClass: .key, service: "s", account: "a") { _ in secret("w") }
        case "delete": try store.delete(KeychainQuery(service: "s", account: "a"))
        case "lock state": try store.lock()
        case "outbox": try ReceiptOutboxStore(store: store).setReportURL("https://example.com/r")
        case "trust policy": try TrustStore(store: store).setRequireSignature(true)
        case "keyring": _ = try DeviceKeyring(store: store).generate()
        default: Issue.record("unknown writer \(kind)")
        }
    }

    @Test("a writer waits at most the store's lock timeout for a stuck holder, then fails with busy and changes nothing",
          arguments: writers)
    func stuckHolderGivesBusy(kind: String) throws {
        let dir = try TempDirectory()
        let setup = try KeychainStore(url: dir.store)
        try setup.add(itemClass: .key, service: "s", account: "a", data: secret("the-secret-value"))
        let store = try KeychainStore(url: dir.store, lockTimeout: .milliseconds(200))
        let before = try setup.allFiles().map(\.string)
        let holder = StuckHolder(dir.store)
        let start = ContinuousClock.now
        let error = boundedRun("the \(kind) write", within: .seconds(10), unstick: holder.release) { () -> KeychainError? in
            do throws(KeychainError) { try Self.write(kind, store); return nil } catch { return error }
        }
        let waited = ContinuousClock.now - start
        let lockPath = dir.store.path + "/.lock"
        #expect(error == .busy(path: lockPath, waited: .milliseconds(200)), "\(kind): \(String(describing: error))")
        #expect(waited >= .milliseconds(200) && waited < .seconds(5), "\(kind) waited \(waited)")
        #expect(error?.description.contains("another process held the store's lock \(lockPath)") == true)
        #expect(error?.description.contains("Retry") == true)
        #expect(error?.description.contains("the-secret-value") != true)
        #expect(try setup.allFiles().map(\.string) == before, "\(kind) changed the store while the lock was held elsewhere")
        holder.release()
        #expect(caught { try Self.write(kind, store) } == nil, "\(kind) after the holder let go")
    }

    @Test("the default lock timeout is a few seconds: bounded, and longer than any transaction's normal hold")
    func defaultTimeout() throws {
        let dir = try TempDirectory()
        #expect(KeychainStore.defaultLockTimeout >= .seconds(1) && KeychainStore.defaultLockTimeout <= .seconds(5))
        #expect(try KeychainStore(url: dir.store).lockTimeout == KeychainStore.defaultLockTimeout)
    }
}

@Suite("Store review: durability order", .timeLimit(.minutes(10)))
struct DurabilityOrderTests {
    /// Every kind of store write, each run on a store holding item `s`/`a` and a device key.
    static let writes: [String] = ["create store", "add", "add to a new access group", "update", "modify", "delete",
                                   "lock state", "outbox report URL", "trust policy", "keyring rotate", "keyring destroy"]

    /// Runs the write `kind` on a prepared store in `dir`, recording its durability steps.
    static func record(_ kind: String, in dir: TempDirectory) throws -> [DurabilityEvent] {
        let groups = [KeychainStore.defaultAccessGroup, "other"]
        let log = DurabilityLog()
        if kind == "create store" {
            try DurabilityLog.$current.withValue(log) { _ = try KeychainStore(url: dir.store, accessGroups: groups) }
            return log.events
        }
        let store = try KeychainStore(url: dir.store, accessGroups: groups)
        try store.add(itemClass: .key, service: "s", account: "a", data: secret("v"))
        let keyring = DeviceKeyring(store: store)
        let first = try keyring.generate()
        _ = try keyring.rotate(grace: .seconds(60))
        try DurabilityLog.$current.withValue(log) {
            switch kind {
            case "add": try store.add(itemClass: .key, service: "s", account: "b", data: secret("v"))
            case "add to a new access group":
                try store.add(itemClass: .key, service: "s", account: "b", data: secret("v"), accessGroup: "other")
            case "update": try store.update(KeychainQuery(service: "s", account: "a"), with: KeychainUpdate(label: .set("l")))
            case "modify": try store.modify(itemClass: .key, service: "s", account: "a") { _ in secret("w") }
            case "delete": try store.delete(KeychainQuery(service: "s", account: "a"))
            case "lock state": try store.lock()
            case "outbox report URL": try ReceiptOutboxStore(store: store).setReportURL("https://example.com/r")
            case "trust policy": try TrustStore(store: store).setRequireSignature(true)
            case "keyring rotate": _ = try keyring.rotate(grace: .seconds(60))
            case "keyring destroy": _ = try keyring.destroy(keyID: first.keyID)
            default: Issue.record("unknown write \(kind)")
            }
        }
        return log.events
    }

    static func parent(_ path: String) -> String { (path as NSString).deletingLastPathComponent }

    @Test("every write: temp fsync, rename, its directory's fsync; unlink and mkdir then their directory's fsync; all inside the counter's odd..even",
          arguments: writes)
    func order(kind: String) throws {
        let dir = try TempDirectory()
        let events = try Self.record(kind, in: dir)
        let trace = events.map(\.description).joined(separator: "\n")
        #expect(events.contains { if case .rename = $0 { true } else if case .unlink = $0 { true } else { false } },
                "\(kind) made no durable change:\n\(trace)")
        for (i, event) in events.enumerated() {
            let next = i + 1 < events.count ? events[i + 1] : nil
            switch event {
            case let .rename(from, to):
                #expect(i > 0 && events[i - 1] == .fsyncFile(from), "\(kind): rename of \(from) not right after its fsync:\n\(trace)")
                #expect(next == .fsyncDirectory(Self.parent(to)), "\(kind): rename onto \(to) not followed by its directory's fsync:\n\(trace)")
            case let .unlink(path):
                #expect(next == .fsyncDirectory(Self.parent(path)), "\(kind): unlink of \(path) not followed by its directory's fsync:\n\(trace)")
            case let .mkdir(path):
                #expect(next == .fsyncDirectory(Self.parent(path)), "\(kind): mkdir of \(path) not followed by its parent's fsync:\n\(trace)")
            case let .fsyncFile(path):
                let renamed = if case let .rename(from, _)? = next { from == path } else { false }
                #expect(renamed, "\(kind): fsync of \(path) not followed by its rename:\n\(trace)")
            case .fsyncDirectory, .counter: break
            }
        }
        let counters = events.enumerated().compactMap { if case let .counter(v) = $1 { ($0, v) } else { nil } }
        if kind == "create store" {
            #expect(counters.isEmpty)
            #expect(events.contains(.mkdir(dir.store.path + "/items")) && events.contains(.mkdir(dir.store.path + "/tmp")), "\(trace)")
        } else {
            #expect(counters.count == 2, "\(kind): \(trace)")
            if counters.count == 2 {
                #expect(counters[0].0 == 0 && counters[0].1 % 2 == 1, "\(kind): the counter did not move to odd first:\n\(trace)")
                #expect(counters[1].0 == events.count - 1 && counters[1].1 == counters[0].1 + 1,
                        "\(kind): the counter did not move to even last:\n\(trace)")
            }
        }
        if kind == "add to a new access group" {
            #expect(events.contains(.mkdir(dir.store.path + "/items/other")), "\(trace)")
        }
    }
}
