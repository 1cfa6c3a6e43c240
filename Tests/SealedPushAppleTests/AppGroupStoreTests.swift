// The app group stores of SealedPushApple (replay cache, pending queue, receipt outbox) over real files in a
// temporary directory, with the platform seam recording the protection class every file is created with. The
// protection classes themselves are Apple's: Linux's Foundation has their names and ignores them.
#if os(Linux)
import Testing
import Foundation
import FoundationNetworking
import Glibc
import Synchronization
import Dispatch
@testable import SealedPushApple
import SealedPushReceiver
import SealedPushWire
import SealedPushCrypto
import SealedPushTestSupport

/// A temporary directory removed when the value goes.
final class AppGroupTempDirectory {
    let url: URL
    init() throws {
        url = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("sealedpush-appgroup-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(at: url) }
    func file(_ name: String) -> URL { url.appendingPathComponent(name) }
}

/// The system seam, recording what it creates and failing on demand.
final class RecordingFiles: AppGroupFileSystem {
    let system = SystemAppGroupFiles()
    /// Every file created: its name (a temporary file as the name of the file it becomes) and class.
    let created = Mutex<[(name: String, protection: AppGroupFileProtection)]>([])
    /// Every directory made, with its class.
    let directories = Mutex<[(name: String, protection: AppGroupFileProtection)]>([])
    /// When set, reads fail with it.
    let readFailure = Mutex<AppGroupStoreError?>(nil)
    /// When set, creating a file fails with it.
    let createFailure = Mutex<AppGroupStoreError?>(nil)

    func containerURL(forSecurityApplicationGroupIdentifier groupIdentifier: String) -> URL? {
        system.containerURL(forSecurityApplicationGroupIdentifier: groupIdentifier)
    }

    func createDirectory(at url: URL, protection: AppGroupFileProtection) throws(AppGroupStoreError) {
        directories.withLock { $0.append((url.lastPathComponent, protection)) }
        try system.createDirectory(at: url, protection: protection)
    }

    func createFile(at url: URL, protection: AppGroupFileProtection) throws(AppGroupStoreError) {
        if let failure = createFailure.withLock({ $0 }) { throw failure }
        var name = url.lastPathComponent
        if name.hasPrefix("."), let tmp = name.range(of: ".tmp-") { name = String(name[name.index(after: name.startIndex)..<tmp.lowerBound]) }
        created.withLock { $0.append((name, protection)) }
        try system.createFile(at: url, protection: protection)
    }

    func read(_ url: URL, maximumBytes: Int) throws(AppGroupStoreError) -> StoredBytes {
        if let failure = readFailure.withLock({ $0 }) { throw failure }
        return try system.read(url, maximumBytes: maximumBytes)
    }

    /// The classes the files named `name` were created with.
    func classes(of name: String) -> [AppGroupFileProtection] { created.withLock { $0.filter { $0.name == name }.map(\.protection) } }
}

func inode(_ url: URL) -> UInt64? {
    var st = stat()
    return stat(url.path, &st) == 0 ? UInt64(st.st_ino) : nil
}

func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
    guard needle.count <= haystack.count else { return false }
    return (0...(haystack.count - needle.count)).contains { Array(haystack[$0..<($0 + needle.count)]) == needle }
}

/// Holds the `flock` of `url` from another open file description, as another process would.
final class HeldLock {
    let fd: Int32
    init(_ url: URL) {
        fd = open(url.path, O_RDWR | O_CREAT, 0o600)
        precondition(fd >= 0 && flock(fd, LOCK_EX) == 0)
    }
    deinit {
        flock(fd, LOCK_UN)
        close(fd)
    }
}

/// The app group stores and the receipt transport, one test at a time: the stores' tests do synchronous file work
/// (every change is synced), which on a small machine holds the threads of the cooperative pool that the timed
/// transport tests need.
@Suite("App group stores and the receipt transport", .serialized) struct AppGroupAndReceiptTests {}

extension AppGroupAndReceiptTests {
    @Suite("AppGroupReplayCache") struct AppGroupReplayCacheTests {
        init() { TestLogging.quiet() }
        let kid = KeyID(publicKey: [UInt8](repeating: 3, count: 32))

        func cache(_ dir: AppGroupTempDirectory, capacity: Int = AppGroupReplayCache.defaultCapacity, files: RecordingFiles = RecordingFiles(),
                   lockTimeout: Duration = .seconds(1)) -> AppGroupReplayCache {
            AppGroupReplayCache(directory: dir.url, capacity: capacity, lockTimeout: lockTimeout, logger: .init(label: "test"), files: files)
        }

        @Test("a second delivery is refused until the entry expires; separate instances (processes) share it; ids are not stored in clear")
        func replay() throws {
            let dir = try AppGroupTempDirectory()
            let cache = cache(dir)
            #expect(cache.recordIfNew(messageID: "m1", keyID: kid, expiresAt: 100, now: 10))
            #expect(!cache.recordIfNew(messageID: "m1", keyID: kid, expiresAt: 100, now: 20))
            let other = AppGroupReplayCache(directory: dir.url)
            #expect(!other.recordIfNew(messageID: "m1", keyID: kid, expiresAt: 100, now: 30))
            #expect(other.recordIfNew(messageID: "m2", keyID: kid, expiresAt: 100, now: 30))
            // After expiry the id is accepted again.
            #expect(cache.recordIfNew(messageID: "m1", keyID: kid, expiresAt: 300, now: 101))
            let bytes = Array(try Data(contentsOf: dir.file(AppGroupReplayCache.fileName)))
            #expect(!contains(bytes, Array("m2".utf8)) && !contains(bytes, Array("m1".utf8)))
            #expect(try cache.count(now: 101) == 1)
        }

        @Test("an id opens again under the request identifier it was recorded under, and only that one; opening again writes nothing")
        func requestIdentifierRule() throws {
            let dir = try AppGroupTempDirectory()
            let cache = cache(dir)
            #expect(cache.recordIfNew(messageID: "m", requestIdentifier: "req-A", keyID: kid, expiresAt: 100, now: 1))
            let written = inode(dir.file(AppGroupReplayCache.fileName))
            #expect(cache.recordIfNew(messageID: "m", requestIdentifier: "req-A", keyID: kid, expiresAt: 100, now: 2))
            #expect(inode(dir.file(AppGroupReplayCache.fileName)) == written, "opening again rewrote the cache")
            #expect(!cache.recordIfNew(messageID: "m", requestIdentifier: "req-B", keyID: kid, expiresAt: 100, now: 3))
            #expect(!cache.recordIfNew(messageID: "m", requestIdentifier: nil, keyID: kid, expiresAt: 100, now: 4))
            #expect(try cache.count(now: 5) == 1, "opening again adds no entry")
            // Recorded without an identifier: every later arrival is a replay.
            #expect(cache.recordIfNew(messageID: "n", requestIdentifier: nil, keyID: kid, expiresAt: 100, now: 1))
            #expect(!cache.recordIfNew(messageID: "n", requestIdentifier: nil, keyID: kid, expiresAt: 100, now: 2))
            #expect(!contains(Array(try Data(contentsOf: dir.file(AppGroupReplayCache.fileName))), Array("req-A".utf8)))
        }

        @Test("bounded: over capacity the oldest accepted ids go, after the expired ones")
        func bounded() throws {
            let dir = try AppGroupTempDirectory()
            let cache = cache(dir, capacity: 10)
            for i in 0..<10 { #expect(cache.recordIfNew(messageID: "m\(i)", keyID: kid, expiresAt: Int64(1000 - i), now: 1)) }
            #expect(cache.recordIfNew(messageID: "late", keyID: kid, expiresAt: 5000, now: 1))
            #expect(try cache.count(now: 1) == 10)
            #expect(cache.recordIfNew(messageID: "m0", keyID: kid, expiresAt: 1000, now: 1))  // evicted: accepted first
            #expect(!cache.recordIfNew(messageID: "m9", keyID: kid, expiresAt: 991, now: 1))  // expires soonest, kept
            #expect(!cache.recordIfNew(messageID: "late", keyID: kid, expiresAt: 5000, now: 1))
            // Expired entries make room first.
            #expect(cache.recordIfNew(messageID: "x", keyID: kid, expiresAt: 9000, now: 2000))
            #expect(try cache.count(now: 2000) == 2)
            #expect(try Data(contentsOf: dir.file(AppGroupReplayCache.fileName)).count == 32 + 2 * 40)
            // The default bound is 10 000 ids (a 400 KB file); no capacity reaches past the maximum.
            #expect(AppGroupReplayCache(directory: dir.url).capacity == 10_000)
            #expect(AppGroupReplayCache(directory: dir.url, capacity: 10_000_000).capacity == AppGroupReplayCache.maximumCapacity)
        }

        @Test("a flood of far-future entries cannot push a real id out at once: it takes `capacity` newer ids")
        func floodDoesNotFlushARealID() throws {
            let dir = try AppGroupTempDirectory()
            let cache = cache(dir, capacity: 10)
            for i in 0..<10 { #expect(cache.recordIfNew(messageID: "flood-\(i)", keyID: kid, expiresAt: .max, now: 1)) }
            #expect(cache.recordIfNew(messageID: "real", keyID: kid, expiresAt: 1000, now: 1))
            for i in 10..<19 {
                #expect(cache.recordIfNew(messageID: "flood-\(i)", keyID: kid, expiresAt: .max, now: 1))
                #expect(!cache.recordIfNew(messageID: "real", keyID: kid, expiresAt: 1000, now: 1), "the real id was flushed by \(i - 9) flood entries")
            }
        }

        @Test("every new id writes a new file of class completeUntilFirstUserAuthentication (temp, sync, rename); the lock file is class none")
        func protectionAndDurability() throws {
            let dir = try AppGroupTempDirectory()
            let files = RecordingFiles()
            let cache = cache(dir, files: files)
            // What a writer killed mid-change leaves: removed by the next change.
            try FileManager.default.createDirectory(at: dir.url, withIntermediateDirectories: true)
            #expect(FileManager.default.createFile(atPath: dir.file(".replay-cache.bin.tmp-dead").path, contents: Data([1, 2, 3])))
            #expect(cache.recordIfNew(messageID: "a", keyID: kid, expiresAt: 100, now: 1))
            let first = inode(dir.file(AppGroupReplayCache.fileName))
            #expect(cache.recordIfNew(messageID: "b", keyID: kid, expiresAt: 100, now: 1))
            #expect(inode(dir.file(AppGroupReplayCache.fileName)) != first, "a change is a new file renamed over the old one")
            #expect(files.classes(of: AppGroupReplayCache.fileName) == [.completeUntilFirstUserAuthentication, .completeUntilFirstUserAuthentication])
            #expect(files.classes(of: AppGroupReplayCache.fileName + ".lock") == [.noProtection])
            #expect(AppGroupReplayCache.fileProtection == .completeUntilFirstUserAuthentication)
            #expect(try FileManager.default.contentsOfDirectory(atPath: dir.url.path).sorted() == ["replay-cache.bin", "replay-cache.bin.lock"])
            let mode = try #require(try FileManager.default.attributesOfItem(atPath: dir.file(AppGroupReplayCache.fileName).path)[.posixPermissions] as? Int)
            #expect(mode & 0o777 == 0o600)
        }

        @Test("a cache that cannot be opened (before the first unlock), or written, refuses the message (fail closed) and changes nothing")
        func failsClosed() throws {
            let dir = try AppGroupTempDirectory()
            let files = RecordingFiles()
            let cache = cache(dir, files: files)
            #expect(cache.recordIfNew(messageID: "a", keyID: kid, expiresAt: 100, now: 1))
            let before = try Data(contentsOf: dir.file(AppGroupReplayCache.fileName))
            files.readFailure.withLock { $0 = .protectedDataUnavailable(file: AppGroupReplayCache.fileName) }
            #expect(!cache.recordIfNew(messageID: "b", keyID: kid, expiresAt: 100, now: 2))
            #expect(throws: AppGroupStoreError.protectedDataUnavailable(file: "replay-cache.bin")) { try cache.count(now: 2) }
            files.readFailure.withLock { $0 = nil }
            files.createFailure.withLock { $0 = .io(operation: "create", file: "x", errno: ENOSPC) }
            #expect(!cache.recordIfNew(messageID: "b", keyID: kid, expiresAt: 100, now: 2))
            #expect(try Data(contentsOf: dir.file(AppGroupReplayCache.fileName)) == before)
            files.createFailure.withLock { $0 = nil }
            #expect(cache.recordIfNew(messageID: "b", keyID: kid, expiresAt: 100, now: 2), "a refusal for a failure recorded nothing")
        }

        @Test("another process holding the lock: a bounded wait, then the message is refused (fail closed)")
        func boundedWait() throws {
            let dir = try AppGroupTempDirectory()
            let cache = cache(dir, lockTimeout: .milliseconds(50))
            #expect(cache.recordIfNew(messageID: "a", keyID: kid, expiresAt: 100, now: 1))
            var held: HeldLock? = HeldLock(dir.file(AppGroupReplayCache.fileName + ".lock"))
            let start = ContinuousClock.now
            #expect(!cache.recordIfNew(messageID: "b", keyID: kid, expiresAt: 100, now: 1))
            #expect(ContinuousClock.now - start < .seconds(2))
            #expect(held != nil)
            held = nil
            #expect(cache.recordIfNew(messageID: "b", keyID: kid, expiresAt: 100, now: 1))
        }

        @Test("a damaged cache refuses the message in hand, is set aside and replaced by a new cache holding that message; the next are judged normally",
              arguments: ["magic", "checksum", "cut short", "appended", "count", "empty", "oversized"])
        func damaged(_ damage: String) throws {
            let dir = try AppGroupTempDirectory()
            let cache = cache(dir)
            #expect(cache.recordIfNew(messageID: "old", keyID: kid, expiresAt: 100, now: 1))
            #expect(cache.recordIfNew(messageID: "older", keyID: kid, expiresAt: 100, now: 1))
            let url = dir.file(AppGroupReplayCache.fileName)
            var bytes = Array(try Data(contentsOf: url))
            switch damage {
            case "magic": bytes[0] = UInt8(ascii: "X")
            case "checksum": bytes[40] ^= 1
            case "cut short": bytes.removeLast(7)
            case "appended": bytes += [1, 2, 3]
            case "count": bytes[11] = 3
            case "empty": bytes = []
            default: bytes = [UInt8](repeating: 0, count: AppGroupReplayCache.maximumFileSize + 1)
            }
            try Data(bytes).write(to: url)
            #expect(throws: AppGroupStoreError.damaged(file: "replay-cache.bin")) { try cache.count(now: 2) }
            // The message in hand cannot be judged: refused. The damaged file is kept aside; a new cache starts with that id.
            #expect(!cache.recordIfNew(messageID: "hand", requestIdentifier: "r1", keyID: kid, expiresAt: 100, now: 2))
            #expect(try Data(contentsOf: dir.file(AppGroupReplayCache.damagedFileName)) == Data(bytes))
            #expect(try cache.count(now: 2) == 1)
            #expect(cache.recordIfNew(messageID: "hand", requestIdentifier: "r1", keyID: kid, expiresAt: 100, now: 3), "its own retry opens")
            #expect(!cache.recordIfNew(messageID: "hand", requestIdentifier: "r2", keyID: kid, expiresAt: 100, now: 3))
            #expect(cache.recordIfNew(messageID: "next", keyID: kid, expiresAt: 100, now: 3))
            #expect(!cache.recordIfNew(messageID: "next", keyID: kid, expiresAt: 100, now: 4))
        }

        @Test("past its capacity exactly the most recent `capacity` ids are kept (oldest accepted go first)")
        func capacityHolds() throws {
            let dir = try AppGroupTempDirectory()
            let cache = cache(dir, capacity: 200)
            for i in 0..<400 { #expect(cache.recordIfNew(messageID: "id-\(i)", keyID: kid, expiresAt: 10_000, now: 1)) }
            #expect(try cache.count(now: 1) == 200)
            #expect(try Data(contentsOf: dir.file(AppGroupReplayCache.fileName)).count == 32 + 200 * 40)
            for i in 200..<400 { #expect(!cache.recordIfNew(messageID: "id-\(i)", keyID: kid, expiresAt: 10_000, now: 1)) }
            #expect(cache.recordIfNew(messageID: "id-199", keyID: kid, expiresAt: 10_000, now: 1), "the newest evicted id")
        }

        @Test("concurrent writers (separate instances and open files, as the app and its extensions are) lose no id: the flock serialises them")
        func concurrentWriters() throws {
            let dir = try AppGroupTempDirectory()
            let (url, kid) = (dir.url, self.kid)
            let accepted = Mutex(0)
            DispatchQueue.concurrentPerform(iterations: 6) { worker in
                let cache = AppGroupReplayCache(directory: url, lockTimeout: .seconds(60))
                for i in 0..<8 where cache.recordIfNew(messageID: "w\(worker)-\(i)", keyID: kid, expiresAt: 100, now: 1) {
                    accepted.withLock { $0 += 1 }
                }
            }
            #expect(accepted.withLock { $0 } == 48)
            #expect(try AppGroupReplayCache(directory: url).count(now: 1) == 48)
        }

        @Test("something other than a regular file at the cache's path (a FIFO) is damaged, never waited on")
        func notARegularFile() throws {
            let dir = try AppGroupTempDirectory()
            #expect(mkfifo(dir.file(AppGroupReplayCache.fileName).path, 0o600) == 0)
            let cache = cache(dir)
            #expect(throws: AppGroupStoreError.damaged(file: "replay-cache.bin")) { try cache.count(now: 1) }
            #expect(!cache.recordIfNew(messageID: "a", keyID: kid, expiresAt: 100, now: 1))
            #expect(cache.recordIfNew(messageID: "b", keyID: kid, expiresAt: 100, now: 1))
        }

        @Test("init(appGroup:) uses SealedPush in the app group container; a group not in the entitlement is containerUnavailable")
        func appGroupContainer() throws {
            let dir = try AppGroupTempDirectory()
            let group = "group.test.\(UUID().uuidString)"
            StandInAppGroups.register(group, at: dir.url)
            defer { StandInAppGroups.unregister(group) }
            let cache = try AppGroupReplayCache(appGroup: group)
            #expect(cache.directory == dir.url.appendingPathComponent("SealedPush", isDirectory: true))
            #expect(cache.recordIfNew(messageID: "a", keyID: kid, expiresAt: 100, now: 1))
            #expect(FileManager.default.fileExists(atPath: dir.url.appendingPathComponent("SealedPush/replay-cache.bin").path))
            #expect(throws: AppGroupStoreError.containerUnavailable) { try AppGroupReplayCache(appGroup: "group.not.entitled") }
            #expect(throws: AppGroupStoreError.containerUnavailable) { try AppGroupPendingQueue(appGroup: "group.not.entitled") }
            #expect(throws: AppGroupStoreError.containerUnavailable) { try AppGroupReceiptOutbox(appGroup: "group.not.entitled") }
            #expect(AppGroupStoreError.containerUnavailable.description.contains("App Groups capability"))
        }

        @Test("the classes' Apple constants: FileProtectionType raw values and Data.WritingOptions bits as in Apple's Foundation")
        func appleConstants() {
            #expect(AppGroupFileProtection.completeUntilFirstUserAuthentication.fileProtectionType.rawValue == "NSFileProtectionCompleteUntilFirstUserAuthentication")
            #expect(AppGroupFileProtection.noProtection.fileProtectionType.rawValue == "NSFileProtectionNone")
            #expect(AppGroupFileProtection.completeUntilFirstUserAuthentication.writingOption.rawValue == 0x4000_0000)
            #expect(AppGroupFileProtection.noProtection.writingOption.rawValue == 0x1000_0000)
        }
    }

}

extension AppGroupAndReceiptTests {
    @Suite("AppGroupPendingQueue") struct AppGroupPendingQueueTests {
        init() { TestLogging.quiet() }

        func message(_ n: Int, padding: Int = 0) -> PendingMessage {
            PendingMessage(requestID: "req-\(n)", thread: "t", receivedAt: Int64(n),
                           payload: JSONObject([("aps", .object(JSONObject([("mutable-content", .int(1))]))),
                                                ("ENCRYPTED_DATA", .string(String(repeating: "A", count: 40 + padding)))]))
        }

        func queue(_ dir: AppGroupTempDirectory, files: RecordingFiles = RecordingFiles(), maxEntries: Int = PendingQueueBounds.maxEntries,
                   maxBytes: Int = PendingQueueBounds.maxBytes, lockTimeout: Duration = .seconds(1), subdirectory: String? = nil) -> AppGroupPendingQueue {
            AppGroupPendingQueue(directory: subdirectory.map { dir.url.appendingPathComponent($0, isDirectory: true) } ?? dir.url, maxEntries: maxEntries, maxBytes: maxBytes, lockTimeout: lockTimeout,
                                 logger: .init(label: "test"), files: files)
        }

        @Test("append (replacing by request identifier), entries oldest first, remove, status; another instance sees the same queue")
        func basics() throws {
            let dir = try AppGroupTempDirectory()
            let queue = queue(dir)
            #expect(try queue.entries().isEmpty && queue.status() == PendingQueueStatus(pending: 0, dropped: 0))
            for n in 1...3 { try queue.append(message(n)) }
            var replaced = message(2)
            replaced.thread = "other"
            try queue.append(replaced)
            #expect(try queue.entries() == [message(1), message(3), replaced])
            try queue.remove(requestIDs: ["req-1", "req-9"])
            let other = AppGroupPendingQueue(directory: dir.url)
            #expect(try other.entries() == [message(3), replaced])
            #expect(try other.status() == PendingQueueStatus(pending: 2, dropped: 0))
            // The format is FilePendingQueue's.
            let json = try #require(try JSON.parse(Array(Data(contentsOf: dir.file(AppGroupPendingQueue.fileName)))).objectValue)
            #expect(json["dropped"] == .int(0) && json["entries"].map { if case let .array(a) = $0 { a.count } else { -1 } } == 2)
        }

        @Test("bounds: beyond maxEntries or maxBytes the oldest go and are counted; the defaults are reveal v1 §9's 100 and 512 KiB")
        func bounds() throws {
            let dir = try AppGroupTempDirectory()
            let queue = queue(dir, maxEntries: 3)
            for n in 1...5 { try queue.append(message(n)) }
            #expect(try queue.entries().map(\.requestID) == ["req-3", "req-4", "req-5"])
            #expect(try queue.status() == PendingQueueStatus(pending: 3, dropped: 2))
            let size = message(1, padding: 1000).encodedSize
            let other = try AppGroupTempDirectory()
            let bytes = self.queue(other, maxBytes: 2 * size + 10)
            for n in 1...4 { try bytes.append(message(n, padding: 1000)) }
            #expect(try bytes.entries().map(\.requestID) == ["req-3", "req-4"])
            #expect(try bytes.status().dropped == 2)
            let defaults = AppGroupPendingQueue(directory: dir.url)
            #expect(defaults.maxEntries == 100 && defaults.maxBytes == 512 * 1024)
        }

        @Test("written with protection none (readable before the first unlock), every change a new file; directories made none too")
        func protection() throws {
            let dir = try AppGroupTempDirectory()
            let files = RecordingFiles()
            let queue = queue(dir, files: files, subdirectory: "SealedPush")
            try queue.append(message(1))
            let first = inode(queue.directory.appendingPathComponent(AppGroupPendingQueue.fileName))
            try queue.remove(requestIDs: ["req-1"])
            #expect(inode(queue.directory.appendingPathComponent(AppGroupPendingQueue.fileName)) != first)
            #expect(files.classes(of: AppGroupPendingQueue.fileName) == [.noProtection, .noProtection])
            #expect(files.classes(of: AppGroupPendingQueue.fileName + ".lock") == [.noProtection])
            #expect(files.directories.withLock { $0.allSatisfy { $0.protection == .noProtection } } && !files.directories.withLock { $0.isEmpty })
            #expect(AppGroupPendingQueue.fileProtection == .noProtection)
            // Removing what is not there writes nothing.
            let now = inode(queue.directory.appendingPathComponent(AppGroupPendingQueue.fileName))
            try queue.remove(requestIDs: ["req-1"])
            #expect(inode(queue.directory.appendingPathComponent(AppGroupPendingQueue.fileName)) == now)
        }

        @Test("a damaged queue is replaced by an empty one that counts what it listed as dropped (one when nothing can be counted)",
              arguments: [(#"{"dropped": 2, "entries": [{"request_id": "a"}, 7, {}]}"#, 5), ("not json", 1), (#"{"entries": []}"#, 1), ("", 1)])
        func damaged(_ content: String, _ dropped: Int) throws {
            let dir = try AppGroupTempDirectory()
            let queue = queue(dir)
            try queue.append(message(1))
            try Data(content.utf8).write(to: dir.file(AppGroupPendingQueue.fileName))
            #expect(try queue.status() == PendingQueueStatus(pending: 0, dropped: dropped))
            // The recovery was written: the count stays, and the queue works again.
            try queue.append(message(2))
            #expect(try queue.status() == PendingQueueStatus(pending: 1, dropped: dropped))
        }

        @Test("a queue file larger than any queue writes is damaged (not read whole): replaced, one dropped")
        func oversized() throws {
            let dir = try AppGroupTempDirectory()
            let queue = queue(dir)
            try Data(count: queue.readLimit + 1).write(to: dir.file(AppGroupPendingQueue.fileName))
            #expect(try queue.entries().isEmpty)
            #expect(try queue.status() == PendingQueueStatus(pending: 0, dropped: 1))
        }

        @Test("failures throw typed errors that say what to do, and change nothing")
        func failures() throws {
            let dir = try AppGroupTempDirectory()
            let files = RecordingFiles()
            let queue = queue(dir, files: files, lockTimeout: .milliseconds(50))
            try queue.append(message(1))
            do {
                let held = HeldLock(dir.file(AppGroupPendingQueue.fileName + ".lock"))
                #expect(throws: AppGroupStoreError.lockTimeout(file: "pending-queue.json", milliseconds: 50)) { try queue.append(message(2)) }
                withExtendedLifetime(held) {}
            }
            files.createFailure.withLock { $0 = .io(operation: "create", file: "pending-queue.json", errno: ENOSPC) }
            #expect(throws: AppGroupStoreError.self) { try queue.append(message(3)) }
            files.createFailure.withLock { $0 = nil }
            #expect(try queue.entries() == [message(1)])
            let text = AppGroupStoreError.io(operation: "write", file: "pending-queue.json", errno: ENOSPC).description
            #expect(text.contains("pending-queue.json") && text.contains("free space") && text.contains("errno \(ENOSPC)"))
            #expect(AppGroupStoreError.lockTimeout(file: "f", milliseconds: 50).description.contains("try again later"))
        }
    }

}
#endif
