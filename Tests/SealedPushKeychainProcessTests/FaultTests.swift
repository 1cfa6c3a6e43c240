import Foundation
import Testing
import SealedPushCrypto
import SealedPushTestSupport
import SealedPushWire
@testable import SealedPushKeychain
#if canImport(Glibc)
import Glibc
#endif

/// A store prepared for a fault: four items with known values, two device keys (one rotation done),
/// one replay entry. The `keychain-torture fault` child knows these names (fault/a0…a3).
struct FaultFixture {
    let dir: TempDirectory
    let root: URL
    /// Account → secret value of the items fault/a0…a3 (random, so a test can search output for them).
    let values: [String: String]
    let keys: [KeyInfo]
    let storeKey: [UInt8]

    init(under base: URL? = nil) throws {
        dir = try TempDirectory()
        root = (base ?? dir.url).appendingPathComponent("store")
        let store = try KeychainStore(url: root)
        var values: [String: String] = [:]
        for i in 0..<4 {
            let value = "fault-secret-a\(i)-\(Hex.encode(CryptoLibrary.randomBytes(count: 8)))"
            try store.add(itemClass: .genericPassword, service: "fault", account: "a\(i)", data: secret(value))
            values["a\(i)"] = value
        }
        self.values = values
        let keyring = DeviceKeyring(store: store)
        try keyring.generate()
        try keyring.rotate()
        keys = try keyring.list()
        let now = Int64(Date().timeIntervalSince1970)
        #expect(ReplayCache(store: store).recordIfNew(messageID: "seen-1", keyID: keys[1].keyID, expiresAt: now + 3600, now: now))
        storeKey = Array(try Data(contentsOf: root.appendingPathComponent("store.key")))
    }

    var store: KeychainStore { get throws { try KeychainStore(url: root) } }

    /// Runs `keychain-torture fault` on the store; returns each operation's line by name, and stderr.
    func runChild(_ options: [String], _ ops: [String]) throws -> (results: [String: String], out: String, err: String) {
        let r = try Torture.run(["fault", root.path] + options + ops)
        #expect(r.status == 0, "the fault child failed: \(r.stdoutText) \(r.stderr)")
        var results: [String: String] = [:]
        for line in r.stdoutText.split(separator: "\n") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            results[String(line[..<colon])] = String(line[line.index(after: colon)...]).trimmingCharacters(in: .whitespaces)
        }
        return (results, r.stdoutText, r.stderr)
    }

    /// The child's output names no secret: no item value, no store-key bytes in any encoding.
    func expectNoSecrets(_ text: String, _ context: String) {
        for (account, value) in values { #expect(!text.contains(value), "\(context): the value of \(account) leaked") }
        #expect(!contains(Array(text.utf8), storeKey), "\(context): the store key leaked")
        #expect(!text.contains(Hex.encode(storeKey)), "\(context): the store key leaked (hex)")
        #expect(!text.contains(Base64.encode(storeKey)), "\(context): the store key leaked (base64)")
    }

    /// Nothing was lost or half-written: every item reads back its value (fault/a2 may be
    /// `deleted`), no fault/new item, the same keys with the same active one, each still found,
    /// the replay entry still there, no temp file, and every item file in the store authenticates.
    func expectIntact(deleted: Bool = false, _ context: String) throws {
        let store = try store
        for (account, value) in values.sorted(by: { $0.key < $1.key }) {
            if deleted && account == "a2" {
                #expect(throws: KeychainError.self, "\(context): fault/a2 still exists") {
                    try store.read(itemClass: .genericPassword, service: "fault", account: "a2")
                }
                continue
            }
            do {
                let item = try store.read(itemClass: .genericPassword, service: "fault", account: account)
                #expect(text(item.data) == value, "\(context): fault/\(account) changed")
            } catch {
                Issue.record("\(context): fault/\(account) unreadable: \(error.description)")
            }
        }
        do {
            _ = try store.read(itemClass: .genericPassword, service: "fault", account: "new")
            Issue.record("\(context): the failed add left an item")
        } catch .itemNotFound {
        } catch {
            Issue.record("\(context): \(error.description)")
        }
        let keyring = DeviceKeyring(store: store)
        let list = try keyring.list()
        #expect(list.map(\.keyID) == keys.map(\.keyID), "\(context): the key list changed")
        #expect(list.map(\.state) == keys.map(\.state), "\(context): a key changed state")
        for info in list {
            guard case .found = keyring.lookUpKey(id: info.keyID) else {
                Issue.record("\(context): key \(info.keyID.hex) no longer looks up")
                continue
            }
        }
        let now = Int64(Date().timeIntervalSince1970)
        #expect(try ReplayCache(store: store).count(now: now) == 1, "\(context): the replay cache changed")
        #expect(try store.deviceLockState() == .unlocked, "\(context): the lock state changed")
        #expect(allFiles(under: root).filter { $0.lastPathComponent.hasPrefix(".tmp-") }.isEmpty, "\(context): a temp file was left")
        // Every item file (including ones no query above reads) still authenticates.
        let everything = try store.copyMatching(KeychainQuery(limit: .all, returnData: true))
        #expect(everything.count == (deleted ? 3 : 4) + 2 * list.count + 1, "\(context): \(everything.count) items")
    }

    /// Once the fault is gone, every kind of write works again.
    func expectWritable(_ context: String) throws {
        let store = try store
        try store.add(itemClass: .genericPassword, service: "fault", account: "new", data: secret("new"))
        try store.update(KeychainQuery(itemClass: .genericPassword, service: "fault", account: "a0"), with: KeychainUpdate(data: secret("x")))
        try store.modify(itemClass: .genericPassword, service: "fault", account: "a1") { _ in secret("y") }
        try store.delete(KeychainQuery(service: "fault", account: "a3"))
        try store.lock()
        try store.unlock()
        let record = try DeviceKeyring(store: store).rotate()
        let now = Int64(Date().timeIntervalSince1970)
        let replay = ReplayCache(store: store)
        #expect(replay.recordIfNew(messageID: "after-\(context)", keyID: record.keyID, expiresAt: now + 60, now: now))
        #expect(!replay.recordIfNew(messageID: "seen-1", keyID: record.keyID, expiresAt: now + 60, now: now), "\(context): the old replay entry is gone")
        let reopened = try KeychainStore(url: root)
        #expect(text(try reopened.read(itemClass: .genericPassword, service: "fault", account: "new").data) == "new")
        #expect(text(try reopened.read(itemClass: .genericPassword, service: "fault", account: "a0").data) == "x")
        #expect(text(try reopened.read(itemClass: .genericPassword, service: "fault", account: "a1").data) == "y")
        #expect(try DeviceKeyring(store: reopened).export().keyID == record.keyID)
    }
}

/// Every directory and file under `url` (the directory itself first), not following symlinks.
func treeEntries(_ url: URL) -> (directories: [String], files: [String]) {
    var dirs = [url.path], files: [String] = []
    var pending = [url.path]
    while let dir = pending.popLast() {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? [] {
            let path = dir + "/" + name
            var st = stat()
            guard lstat(path, &st) == 0 else { continue }
            if st.st_mode & S_IFMT == S_IFDIR { dirs.append(path); pending.append(path) } else { files.append(path) }
        }
    }
    return (dirs, files)
}

@Suite("Faults: read-only and full keychain directory", .serialized, .timeLimit(.minutes(10)))
struct FaultTests {
    /// The unprivileged uid (`nobody`) the child becomes when the tests run as root, which ignores mode bits.
    static let unprivileged: uid_t = 65534
    static let writeOps = ["add", "update", "modify", "delete", "rotate", "lock"]

    /// Makes the store unwritable for the child: directories 0500 and, if `filesToo`, files 0400
    /// (as a read-only mount would). As root, hands the tree to `unprivileged` and returns the
    /// child options that make it drop to that uid, since root would write anyway.
    func makeReadOnly(_ f: FaultFixture, filesToo: Bool) -> [String] {
        let asRoot = geteuid() == 0
        if asRoot {
            let (dirs, files) = treeEntries(f.dir.url)
            for path in dirs + files { #expect(lchown(path, Self.unprivileged, gid_t(Self.unprivileged)) == 0) }
        }
        let (dirs, files) = treeEntries(f.root)
        for path in dirs { #expect(chmod(path, 0o500) == 0) }
        if filesToo { for path in files { #expect(chmod(path, 0o400) == 0) } }
        return asRoot ? ["--as-uid", "\(Self.unprivileged)"] : []
    }

    /// Undoes `makeReadOnly`: modes 0700/0600 and, as root, the tree back to this process's ids.
    func restore(_ f: FaultFixture) {
        let (dirs, files) = treeEntries(f.root)
        for path in dirs { chmod(path, 0o700) }
        for path in files { chmod(path, 0o600) }
        if geteuid() == 0 {
            let all = treeEntries(f.dir.url)
            for path in all.directories + all.files { lchown(path, geteuid(), getegid()) }
        }
    }

    /// Each write operation reported an `io` error with `errnoName` and the advice for it, and no
    /// operation claimed success: a store that ignored the error would print `ok` here.
    func expectFailedWrites(_ results: [String: String], _ ops: [String], errno name: String, advice: String, _ context: String) {
        for op in ops {
            let line = results[op] ?? "(no result)"
            #expect(line.hasPrefix("error io: "), "\(context): \(op) did not fail with an io error: \(line)")
            #expect(line.contains("(\(name))"), "\(context): \(op): \(line)")
            #expect(line.contains(advice), "\(context): \(op) does not say what to do: \(line)")
        }
    }

    @Test("read-only directories (files still writable): every write fails with EACCES and a clear message, nothing is lost, the store works once writable")
    func readOnlyDirectories() throws {
        let f = try FaultFixture()
        let options = makeReadOnly(f, filesToo: false)
        let run: (results: [String: String], out: String, err: String)
        do {
            defer { restore(f) }
            run = try f.runChild(options, ["read"] + Self.writeOps)
        }
        if geteuid() == 0 { #expect(run.out.contains("fault: uid=\(Self.unprivileged)"), "the child did not drop root: \(run.out)") }
        #expect(run.results["read"] == "ok", "reading a read-only store must work: \(run.out)")
        expectFailedWrites(run.results, Self.writeOps, errno: "EACCES", advice: "chmod 700", "read-only directories")
        f.expectNoSecrets(run.out + run.err, "read-only directories")
        // Delete used to zero the item before its unlink failed: the item must still read back.
        try f.expectIntact("read-only directories")
        try f.expectWritable("read-only directories")
    }

    @Test("read-only store (directories 0500, files 0400, like a read-only mount): writes fail with EACCES, the replay cache fails closed, nothing is lost")
    func readOnlyStore() throws {
        let f = try FaultFixture()
        let options = makeReadOnly(f, filesToo: true)
        let run: (results: [String: String], out: String, err: String)
        do {
            defer { restore(f) }
            run = try f.runChild(options, ["read"] + Self.writeOps + ["replay"])
        }
        #expect(run.results["read"] == "ok", "reading a read-only store must work: \(run.out)")
        expectFailedWrites(run.results, Self.writeOps, errno: "EACCES", advice: "chmod 700", "read-only store")
        #expect(run.results["replay"] == "refused", "an unwritable replay cache must refuse the message: \(run.out)")
        #expect(run.err.contains("replay cache unusable") && run.err.contains("(EACCES)"), "the refusal is not logged clearly: \(run.err)")
        f.expectNoSecrets(run.out + run.err, "read-only store")
        try f.expectIntact("read-only store")
        try f.expectWritable("read-only store")
    }

    @Test("a file size limit cuts writes short (EFBIG mid-write): a clear error, no temp file, nothing lost, the next write works")
    func fileSizeLimit() throws {
        let f = try FaultFixture()
        // 50 bytes: every item write stops after 50 of its ~400 bytes, and the replay cache's record
        // write (48 bytes, in place, far past offset 50) cannot start.
        let run = try f.runChild(["--file-size-limit", "50"], ["read", "add", "update", "modify", "rotate", "replay", "delete"])
        #expect(run.results["read"] == "ok", "\(run.out)")
        expectFailedWrites(run.results, ["add", "update", "modify", "rotate"], errno: "EFBIG", advice: "ulimit -f", "file size limit")
        #expect(run.results["replay"] == "refused", "a replay cache that cannot append must refuse the message: \(run.out)")
        #expect(run.err.contains("replay cache unusable") && run.err.contains("(EFBIG)"), "\(run.err)")
        // Deleting needs no space, so it works (and is what frees space on a full disk).
        #expect(run.results["delete"] == "ok", "\(run.out)")
        f.expectNoSecrets(run.out + run.err, "file size limit")
        let db = try Data(contentsOf: f.root.appendingPathComponent("replay/replay-v3.db"))
        #expect(db.count == 64 + 1250 * 16 * 48, "the replay table changed size (\(db.count) bytes)")
        try f.expectIntact(deleted: true, "file size limit")
        try f.expectWritable("file size limit")
    }

    @Test("rotation under file size limits that fail each of its writes: one active key, no key lost, the next rotation recovers")
    func rotationUnderSizeLimits() throws {
        let f = try FaultFixture()
        let largest = treeEntries(f.root.appendingPathComponent("items")).files.compactMap {
            (try? FileManager.default.attributesOfItem(atPath: $0)[.size] as? Int) ?? nil
        }.max() ?? 0
        #expect(largest > 200)
        var known = Set(f.keys.map(\.keyID))
        var outcomes: [String: Int] = [:]
        // Limits from below every file to above the largest: some fail on the first write, some
        // after the pending pointer (mid-rotation), some let the rotation commit.
        for limit in stride(from: 16, through: largest + 120, by: 40) {
            let store = try f.store
            let before = try DeviceKeyring(store: store).export().keyID
            let run = try f.runChild(["--file-size-limit", "\(limit)"], ["rotate"])
            let line = run.results["rotate"] ?? "(none)"
            let keyring = DeviceKeyring(store: try f.store)
            let list = try keyring.list()
            let active = list.filter { $0.state == .active }
            #expect(active.count == 1, "limit \(limit): \(active.count) active keys")
            #expect(known.isSubset(of: Set(list.map(\.keyID))), "limit \(limit): a key was lost")
            for info in list {
                guard case .found = keyring.lookUpKey(id: info.keyID) else {
                    Issue.record("limit \(limit): key \(info.keyID.hex) does not look up")
                    continue
                }
            }
            #expect(allFiles(under: f.root).filter { $0.lastPathComponent.hasPrefix(".tmp-") }.isEmpty, "limit \(limit): temp file left")
            if line == "ok" {
                #expect(active.first?.keyID != before, "limit \(limit): rotation said ok but the active key did not change")
                outcomes["committed", default: 0] += 1
            } else {
                #expect(line.hasPrefix("error io: ") && line.contains("(EFBIG)"), "limit \(limit): \(line)")
                #expect(active.first?.keyID == before, "limit \(limit): a failed rotation changed the active key")
                #expect(list.count == known.count, "limit \(limit): a failed rotation added a key")
                let pointer = try store.read(itemClass: .genericPassword, service: "sealedpush.device-key.active", account: "pointer")
                outcomes[text(pointer.data)?.contains("pending") == true ? "mid-rotation" : "before any write", default: 0] += 1
            }
            known.formUnion(list.map(\.keyID))
        }
        #expect(outcomes["before any write"] ?? 0 > 0 && outcomes["mid-rotation"] ?? 0 > 0 && outcomes["committed"] ?? 0 > 0,
                "the limits did not fault every stage: \(outcomes)")
        // Without the limit, the next rotation rolls back whatever was pending and commits.
        let keyring = DeviceKeyring(store: try f.store)
        let record = try keyring.rotate()
        #expect(try keyring.export().keyID == record.keyID)
        #expect(try keyring.list().filter { $0.state == .active }.count == 1)
    }
}
