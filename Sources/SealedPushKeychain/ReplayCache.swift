public import SealedPushCrypto
public import SealedPushKeyring
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
/// On disk: `replay/replay-v2.db`, fixed 40-byte records appended in arrival order under
/// `flock(replay/replay.lock)`: the 16-byte BLAKE2b of the message id, the 16-byte BLAKE2b of the
/// notification request identifier it arrived under (zeros: none known), and the 8-byte big-endian
/// time it is kept until, in Unix seconds. A message id recorded under a request identifier opens
/// again under that same identifier (a retried push replacing its own notification,
/// `device-outcomes.md`, "Replays"); under any other it is a replay.
///
/// An entry's life is bounded by the opener (issued-at plus the replay window, or `exp` when that
/// is sooner), and when the file reaches `capacity` records it is compacted: expired entries are
/// dropped, then the **oldest inserted**, into a temp file that is fsynced, renamed over the cache
/// and made durable with a directory fsync. Evicting by insertion order (not by expiry) means
/// messages with a far-future `exp` cannot settle in the cache and push real ids out at once:
/// flushing one id takes `capacity` newer messages, each of them shown.
///
/// A cache left by an earlier version (`replay/replay.db`, 24-byte records without a request
/// identifier) is imported on first use and removed.
///
/// Trade-off: no fsync per entry, so the hot path costs one read and one append. A power loss (not
/// a process crash) can forget the last few accepted ids, letting those messages be shown once
/// more; a torn final record is ignored. Entries are keyed by message id alone, so a message
/// delivered to both the old and the new device key during a rotation is shown once. If the cache
/// cannot be read or written the message is refused (fail closed) and the error logged.
public struct ReplayCache: ReplayGuard, Sendable {
    /// The default bound: 10 000 entries.
    public static let defaultCapacity = 10_000
    static let recordSize = 40
    static let legacyRecordSize = 24
    static let domain: [UInt8] = Array("sealedpush-replay-v1".utf8) + [0]
    static let requestDomain: [UInt8] = Array("sealedpush-replay-request-v1".utf8) + [0]
    static let logger = Logger(label: "sealedpush.replay")

    /// The store whose root holds the cache.
    public let store: KeychainStore
    /// The most entries kept.
    public let capacity: Int
    /// The longest `recordIfNew` waits for another process holding the cache's lock.
    public let lockTimeout: Duration

    var directory: FilePath { store.root.appending("replay") }
    var databasePath: FilePath { directory.appending("replay-v2.db") }
    var legacyPath: FilePath { directory.appending("replay.db") }

    /// A cache under `store`'s root holding at most `capacity` entries, waiting at most
    /// `lockTimeout` (default 1 s) for another process's update, so the extension keeps its deadline.
    public init(store: KeychainStore, capacity: Int = ReplayCache.defaultCapacity, lockTimeout: Duration = .seconds(1)) {
        precondition(capacity >= 1, "the replay cache needs room for at least one entry")
        self.store = store
        self.capacity = capacity
        self.lockTimeout = lockTimeout
    }

    /// Records `messageID` until `expiresAt`; `false` if it is already recorded and not expired
    /// under another request identifier (a replay), or if the cache cannot be used.
    public func recordIfNew(messageID: String, requestIdentifier: String?, keyID: KeyID, expiresAt: Int64, now: Int64) -> Bool {
        do {
            return try record(messageID: messageID, requestIdentifier: requestIdentifier, expiresAt: expiresAt, now: now)
        } catch {
            Self.logger.error("replay cache unusable; refusing the message", metadata: ["error": "\(error.description)"])
            return false
        }
    }

    /// The number of unexpired entries at `now`.
    public func count(now: Int64) throws(KeychainError) -> Int {
        guard let bytes = try store.io.readFile(databasePath) else { return 0 }
        return (0..<(bytes.count / Self.recordSize)).filter { Self.keptUntil(bytes, record: $0) >= now }.count
    }

    static func hash(_ messageID: String) -> [UInt8] { Blake2b.hash(domain + Array(messageID.utf8), outputLength: 16) }

    static func requestHash(_ identifier: String?) -> [UInt8] {
        guard let identifier else { return [UInt8](repeating: 0, count: 16) }
        return Blake2b.hash(requestDomain + Array(identifier.utf8), outputLength: 16)
    }

    /// The keep-until time of record `index` in `bytes`.
    static func keptUntil(_ bytes: [UInt8], record index: Int, size: Int = recordSize) -> Int64 {
        var exp: UInt64 = 0
        for b in bytes[(index * size + size - 8)..<(index * size + size)] { exp = exp << 8 | UInt64(b) }
        return Int64(bitPattern: exp)
    }

    /// Whether the 16 bytes at `offset` equal `hash`, in time independent of where they differ.
    static func matches(_ bytes: [UInt8], at offset: Int, _ hash: [UInt8]) -> Bool {
        var difference: UInt8 = 0
        for i in 0..<16 { difference |= bytes[offset + i] ^ hash[i] }
        return difference == 0
    }

    static func encode(hash: [UInt8], request: [UInt8], keepUntil: Int64) -> [UInt8] {
        let exp = UInt64(bitPattern: keepUntil)
        return hash + request + (0..<8).map { UInt8(truncatingIfNeeded: exp >> (56 - 8 * UInt64($0))) }
    }

    func record(messageID: String, requestIdentifier: String?, expiresAt: Int64, now: Int64) throws(KeychainError) -> Bool {
        try StoreIO.ensureDirectory(directory)
        return try FileLock.withExclusiveLock(directory.appending("replay.lock"), timeout: lockTimeout) { () throws(KeychainError) -> Bool in
            let hash = Self.hash(messageID)
            let request = Self.requestHash(requestIdentifier)
            let bytes = try currentBytes(now: now)
            let whole = bytes.count / Self.recordSize  // a torn final record is ignored
            // One pass over the records in place: no array per entry.
            for i in 0..<whole where Self.keptUntil(bytes, record: i) >= now && Self.matches(bytes, at: i * Self.recordSize, hash) {
                // Seen before: it opens again only under the request identifier it was first opened under.
                return requestIdentifier != nil && Self.matches(bytes, at: i * Self.recordSize + 16, request)
            }
            let entry = Self.encode(hash: hash, request: request, keepUntil: expiresAt)
            if whole + 1 > capacity {
                // Expired entries go first, then the oldest inserted, until the new one fits.
                var live = (0..<whole).filter { Self.keptUntil(bytes, record: $0) >= now }
                if live.count + 1 > capacity { live.removeFirst(live.count + 1 - capacity) }
                var compacted: [UInt8] = []
                compacted.reserveCapacity((live.count + 1) * Self.recordSize)
                for i in live { compacted += bytes[(i * Self.recordSize)..<((i + 1) * Self.recordSize)] }
                try StoreIO.atomicWrite(databasePath, tmpDirectory: directory, bytes: compacted + entry)
            } else {
                try append(entry, truncatingTo: whole * Self.recordSize)
            }
            return true
        }
    }

    /// The cache file's bytes, after importing (and removing) a cache left by an earlier version.
    private func currentBytes(now: Int64) throws(KeychainError) -> [UInt8] {
        if let bytes = try store.io.readFile(databasePath) { return bytes }
        guard let legacy = try store.io.readFile(legacyPath) else { return [] }
        let none = Self.requestHash(nil)
        var imported: [UInt8] = []
        for i in 0..<(legacy.count / Self.legacyRecordSize) {
            let keepUntil = Self.keptUntil(legacy, record: i, size: Self.legacyRecordSize)
            guard keepUntil >= now else { continue }
            let base = i * Self.legacyRecordSize
            imported += Self.encode(hash: Array(legacy[base..<(base + 16)]), request: none, keepUntil: keepUntil)
        }
        imported = Array(imported.suffix(capacity * Self.recordSize))
        try StoreIO.atomicWrite(databasePath, tmpDirectory: directory, bytes: imported)
        if unlink(legacyPath.string) == 0 { try StoreIO.syncDirectory(directory) }
        return imported
    }

    private func append(_ entry: [UInt8], truncatingTo validLength: Int) throws(KeychainError) {
        let fd: FileDescriptor
        do {
            fd = try FileDescriptor.open(databasePath, .writeOnly, options: [.create, .noFollow, .closeOnExec],
                                         permissions: [.ownerReadWrite])
        } catch { throw StoreIO.ioError("open", databasePath, error) }
        defer { try? fd.close() }
        do {
            // Drop a torn record left by a crash, then write at the end.
            try fd.resize(to: Int64(validLength))
            _ = try fd.writeAll(toAbsoluteOffset: Int64(validLength), entry)
        } catch { throw StoreIO.ioError("append to", databasePath, error) }
    }
}
