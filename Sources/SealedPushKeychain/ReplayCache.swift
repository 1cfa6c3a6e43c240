public import SealedPushCrypto
public import SealedPushWire
import SystemPackage
import Logging
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The receiver's replay cache: message ids accepted and not yet expired, shared by every process
/// using the store.
///
/// On disk: `replay/replay.db`, fixed 24-byte records (16-byte BLAKE2b of the message id, 8-byte
/// big-endian expiry in Unix seconds), appended under `flock(replay/replay.lock)`. When the file
/// reaches `capacity` records it is compacted (expired entries dropped, then the entries that
/// expire soonest evicted) into a temp file renamed over it.
///
/// Trade-off: no fsync per entry, so the hot path costs one small read and one append. A power
/// loss (not a process crash) can forget the last few accepted ids, letting those messages be
/// shown once more; a torn final record is ignored. Entries are keyed by message id alone, so a
/// message delivered to both the old and the new device key during a rotation is shown once.
/// If the cache cannot be read or written the message is refused (fail closed) and the error logged.
public struct ReplayCache: ReplayGuard, Sendable {
    /// The default bound: 10 000 entries.
    public static let defaultCapacity = 10_000
    static let recordSize = 24
    static let domain: [UInt8] = Array("sealedpush-replay-v1".utf8) + [0]
    static let logger = Logger(label: "sealedpush.replay")

    /// The store whose root holds the cache.
    public let store: KeychainStore
    /// The most entries kept.
    public let capacity: Int
    /// The longest `recordIfNew` waits for another process holding the cache's lock.
    public let lockTimeout: Duration

    var directory: FilePath { store.root.appending("replay") }
    var databasePath: FilePath { directory.appending("replay.db") }

    /// A cache under `store`'s root holding at most `capacity` entries, waiting at most
    /// `lockTimeout` (default 1 s) for another process's update, so the extension keeps its deadline.
    public init(store: KeychainStore, capacity: Int = ReplayCache.defaultCapacity, lockTimeout: Duration = .seconds(1)) {
        precondition(capacity >= 1, "the replay cache needs room for at least one entry")
        self.store = store
        self.capacity = capacity
        self.lockTimeout = lockTimeout
    }

    /// Records `messageID` until `expiresAt`; `false` if it is already recorded and not expired
    /// (a replay), or if the cache cannot be used.
    public func recordIfNew(messageID: String, keyID: KeyID, expiresAt: Int64, now: Int64) -> Bool {
        do {
            return try record(messageID: messageID, expiresAt: expiresAt, now: now)
        } catch {
            Self.logger.error("replay cache unusable; refusing the message", metadata: ["error": "\(error.description)"])
            return false
        }
    }

    /// The number of unexpired entries at `now`.
    public func count(now: Int64) throws(KeychainError) -> Int {
        try entries().filter { $0.expiresAt >= now }.count
    }

    struct Entry { var hash: [UInt8]; var expiresAt: Int64 }

    static func hash(_ messageID: String) -> [UInt8] { Blake2b.hash(domain + Array(messageID.utf8), outputLength: 16) }

    func entries() throws(KeychainError) -> [Entry] {
        guard let bytes = try store.io.readFile(databasePath) else { return [] }
        let whole = bytes.count / Self.recordSize  // a torn final record is ignored
        var out: [Entry] = []
        out.reserveCapacity(whole)
        for i in 0..<whole {
            let base = i * Self.recordSize
            var exp: UInt64 = 0
            for b in bytes[(base + 16)..<(base + 24)] { exp = exp << 8 | UInt64(b) }
            out.append(Entry(hash: Array(bytes[base..<(base + 16)]), expiresAt: Int64(bitPattern: exp)))
        }
        return out
    }

    static func encode(_ e: Entry) -> [UInt8] {
        let exp = UInt64(bitPattern: e.expiresAt)
        return e.hash + (0..<8).map { UInt8(truncatingIfNeeded: exp >> (56 - 8 * UInt64($0))) }
    }

    func record(messageID: String, expiresAt: Int64, now: Int64) throws(KeychainError) -> Bool {
        try StoreIO.ensureDirectory(directory)
        return try FileLock.withExclusiveLock(directory.appending("replay.lock"), timeout: lockTimeout) { () throws(KeychainError) -> Bool in
            let hash = Self.hash(messageID)
            let existing = try entries()
            if existing.contains(where: { $0.expiresAt >= now && constantTimeEquals($0.hash, hash) }) { return false }
            let entry = Entry(hash: hash, expiresAt: expiresAt)
            if existing.count + 1 > capacity {
                var live = existing.filter { $0.expiresAt >= now }
                if live.count + 1 > capacity {
                    live.sort { $0.expiresAt > $1.expiresAt }  // keep the entries that expire last
                    live.removeLast(live.count + 1 - capacity)
                }
                live.append(entry)
                try rewrite(live)
            } else {
                try append(entry, truncatingTo: existing.count * Self.recordSize)
            }
            return true
        }
    }

    private func append(_ entry: Entry, truncatingTo validLength: Int) throws(KeychainError) {
        let fd: FileDescriptor
        do {
            fd = try FileDescriptor.open(databasePath, .writeOnly, options: [.create, .noFollow, .closeOnExec],
                                         permissions: [.ownerReadWrite])
        } catch { throw StoreIO.ioError("open", databasePath, error) }
        defer { try? fd.close() }
        do {
            // Drop a torn record left by a crash, then write at the end.
            try fd.resize(to: Int64(validLength))
            _ = try fd.writeAll(toAbsoluteOffset: Int64(validLength), Self.encode(entry))
        } catch { throw StoreIO.ioError("append to", databasePath, error) }
    }

    private func rewrite(_ entries: [Entry]) throws(KeychainError) {
        let tmp = directory.appending("replay.db.tmp")
        unlink(tmp.string)
        let fd: FileDescriptor
        do {
            fd = try FileDescriptor.open(tmp, .writeOnly, options: [.create, .exclusiveCreate, .noFollow, .closeOnExec],
                                         permissions: [.ownerReadWrite])
        } catch { throw StoreIO.ioError("create", tmp, error) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(entries.count * Self.recordSize)
        for e in entries { bytes += Self.encode(e) }
        do { _ = try fd.writeAll(bytes); try fd.close() } catch {
            try? fd.close()
            throw StoreIO.ioError("write", tmp, error)
        }
        guard rename(tmp.string, databasePath.string) == 0 else { throw StoreIO.lastError("rename onto", databasePath) }
    }
}
