public import SealedPushCrypto
public import SealedPushKeyring
public import SealedPushWire
public import SystemPackage
import Logging
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The receiver's replay cache: message ids accepted and not yet expired, shared by every process
/// using the store.
///
/// On disk: `replay/replay-v3.db`, a fixed-size hash table written in place under
/// `flock(replay/replay.lock)`. A 64-byte header (magic `SPREPLY3`, slots per bucket and bucket count
/// as big-endian `UInt32`s, a random 32-byte bucket key, zeros) is followed by `buckets × slots`
/// records of 48 bytes: the 16-byte BLAKE2b of the message id, the 16-byte BLAKE2b of the notification
/// request identifier it arrived under (zeros: none known), the 8-byte big-endian time it is kept
/// until (Unix seconds; zero: an empty slot) and an 8-byte big-endian insertion number. A message id
/// recorded under a request identifier opens again under that same identifier (a retried push
/// replacing its own notification, `device-outcomes.md`, "Replays"); under any other it is a replay.
///
/// Bounded work per push, whatever the cache holds: an id's bucket is chosen by a BLAKE2b keyed with
/// the file's bucket key, so a push reads one bucket (16 records, 768 bytes) and writes at most one
/// record (48 bytes), and the lock is held only for that read and write — never across a suspension
/// (iOS ends a suspended process that holds a file lock in a shared container, 0xdead10cc). A full
/// bucket gives its slot to the new id after expired entries, then the **oldest inserted** of the
/// bucket, so messages with a far-future `exp` cannot settle and push real ids out: flushing one id
/// takes `slots` newer messages landing in its bucket, and which bucket an id lands in cannot be
/// predicted without the bucket key (each of those messages is also shown).
///
/// An entry's life is bounded by the opener (issued-at plus the replay window, or `exp` when that
/// is sooner). The geometry comes from `capacity` when the file is made (see `Table.new`: buckets of
/// 16 for twice the capacity, or one bucket of `capacity` slots up to 16) and is read from the header
/// afterwards.
///
/// Caches left by earlier versions (`replay/replay-v2.db`, 40-byte records in arrival order, and
/// `replay/replay.db`, 24-byte records without a request identifier) are imported on first use, in
/// their order, and removed. A header that is not this format's (damage, or tampering by someone who
/// can already write the store) starts a new, empty table, and says so in the log.
///
/// Trade-off: no fsync per entry. A power loss (not a process crash) can forget the last few accepted
/// ids, letting those messages be shown once more; a record torn by one matches nothing. Entries are
/// keyed by message id alone, so a message delivered to both the old and the new device key during a
/// rotation is shown once. If the cache cannot be read or written the message is refused (fail closed)
/// and the error logged.
public struct ReplayCache: ReplayGuard, Sendable {
    /// The default bound: 10 000 entries (1250 buckets of 16; a 960 KB file).
    public static let defaultCapacity = 10_000
    static let recordSize = 48
    static let headerSize = 64
    static let maximumSlots = 16
    static let magic: [UInt8] = Array("SPREPLY3".utf8)
    static let v2RecordSize = 40
    static let legacyRecordSize = 24
    static let domain: [UInt8] = Array("sealedpush-replay-v1".utf8) + [0]
    static let requestDomain: [UInt8] = Array("sealedpush-replay-request-v1".utf8) + [0]
    static let logger = Logger(label: "sealedpush.replay")

    /// The directory holding the cache's files (`replay/` under a store's root).
    public let directory: FilePath
    /// The most entries kept (rounded up to whole buckets) when the cache file is made.
    public let capacity: Int
    /// The longest `recordIfNew` waits for another process holding the cache's lock.
    public let lockTimeout: Duration
    let io: StoreIO

    var databasePath: FilePath { directory.appending("replay-v3.db") }
    var v2Path: FilePath { directory.appending("replay-v2.db") }
    var legacyPath: FilePath { directory.appending("replay.db") }

    /// A cache under `store`'s root holding at most `capacity` entries, waiting at most
    /// `lockTimeout` (default 1 s) for another process's update, so the extension keeps its deadline.
    public init(store: KeychainStore, capacity: Int = ReplayCache.defaultCapacity, lockTimeout: Duration = .seconds(1)) {
        self.init(directory: store.root.appending("replay"), io: store.io, capacity: capacity, lockTimeout: lockTimeout)
    }

    /// A cache in `directory` (made 0700 if missing; its files 0600, owned by this user), for a
    /// receiver without a keychain store: on iOS, a directory in the App Group container that the app
    /// and its extensions share.
    public init(directory: FilePath, capacity: Int = ReplayCache.defaultCapacity, lockTimeout: Duration = .seconds(1)) {
        self.init(directory: directory, io: StoreIO(stats: IOStatistics()), capacity: capacity, lockTimeout: lockTimeout)
    }

    init(directory: FilePath, io: StoreIO, capacity: Int, lockTimeout: Duration) {
        precondition(capacity >= 1, "the replay cache needs room for at least one entry")
        self.directory = directory
        self.io = io
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

    /// The number of unexpired entries at `now` (reads the whole table, bucket by bucket: for tools and tests).
    public func count(now: Int64) throws(KeychainError) -> Int {
        guard let fd = try io.openForReading(databasePath) else { return 0 }
        defer { try? fd.close() }
        guard let table = Table(try Self.read(fd, count: Self.headerSize, at: 0, path: databasePath, allowShort: true)) else { return 0 }
        var n = 0
        for bucket in 0..<table.buckets {
            let bytes = try Self.read(fd, count: table.slots * Self.recordSize, at: table.bucketOffset(bucket), path: databasePath)
            for slot in 0..<table.slots {
                let keptUntil = Self.int64(bytes, at: slot * Self.recordSize + 32)
                if keptUntil != 0 && keptUntil >= now { n += 1 }
            }
        }
        return n
    }

    /// Whether `messageID` is recorded and unexpired at `now`, changing nothing (for tests).
    func isRecorded(messageID: String, now: Int64) throws(KeychainError) -> Bool {
        guard let fd = try io.openForReading(databasePath) else { return false }
        defer { try? fd.close() }
        guard let table = Table(try Self.read(fd, count: Self.headerSize, at: 0, path: databasePath)) else { return false }
        let hash = Self.hash(messageID)
        let bucket = try Self.read(fd, count: table.slots * Self.recordSize, at: table.bucketOffset(table.bucket(hash)), path: databasePath)
        if case .seen = Self.lookUp(bucket, slots: table.slots, hash: hash, request: Self.requestHash(nil), now: now) { return true }
        return false
    }

    // MARK: format

    /// A table's geometry and bucket key, from its header.
    struct Table {
        let slots: Int
        let buckets: Int
        let key: [UInt8]
        var fileSize: Int { ReplayCache.headerSize + slots * buckets * ReplayCache.recordSize }

        init(slots: Int, buckets: Int, key: [UInt8]) {
            self.slots = slots
            self.buckets = buckets
            self.key = key
        }

        /// Parses a header; nil when it is not this format's.
        init?(_ header: [UInt8]) {
            guard header.count >= ReplayCache.headerSize, Array(header[0..<8]) == ReplayCache.magic else { return nil }
            let slots = Int(ReplayCache.uint32(header, at: 8)), buckets = Int(ReplayCache.uint32(header, at: 12))
            guard (1...ReplayCache.maximumSlots).contains(slots), (1...1_000_000).contains(buckets) else { return nil }
            self.init(slots: slots, buckets: buckets, key: Array(header[16..<48]))
        }

        /// A new table for `capacity` entries with a fresh bucket key.
        ///
        /// Up to 16 entries: one bucket of `capacity` slots (exact insertion order). More: buckets of 16
        /// for twice the capacity, so that at `capacity` ids the mean bucket is half full and a bucket
        /// overflows (evicting early) with a chance of about 0.4 %.
        static func new(capacity: Int) -> Table {
            let key = CryptoLibrary.randomBytes(count: 32)
            if capacity <= ReplayCache.maximumSlots { return Table(slots: capacity, buckets: 1, key: key) }
            let slots = ReplayCache.maximumSlots
            return Table(slots: slots, buckets: (2 * capacity + slots - 1) / slots, key: key)
        }

        var header: [UInt8] {
            ReplayCache.magic + ReplayCache.be(UInt64(slots), 4) + ReplayCache.be(UInt64(buckets), 4) + key + [UInt8](repeating: 0, count: 16)
        }

        /// The bucket of an id hash: unpredictable without the key.
        func bucket(_ idHash: [UInt8]) -> Int {
            let h = Blake2b.keyedHash(idHash, key: key, outputLength: 16)
            return Int(ReplayCache.uint64(h, at: 0) % UInt64(buckets))
        }

        func bucketOffset(_ bucket: Int) -> Int { ReplayCache.headerSize + bucket * slots * ReplayCache.recordSize }
    }

    /// What a bucket says about an id: seen (and whether under this request identifier), or the slot
    /// the id takes.
    enum Lookup: Equatable {
        case seen(sameRequest: Bool)
        case free(slot: Int, number: UInt64)
    }

    /// Looks `hash` up in one bucket's bytes at `now`; for a new id, the slot it takes: the first
    /// empty or expired one, else the oldest inserted; its insertion number is one past the bucket's
    /// highest.
    static func lookUp(_ bucket: [UInt8], slots: Int, hash: [UInt8], request: [UInt8], now: Int64) -> Lookup {
        var free: Int?
        var oldest = 0
        var oldestNumber = UInt64.max
        var highest: UInt64 = 0
        for slot in 0..<slots {
            let base = slot * recordSize
            let keptUntil = int64(bucket, at: base + 32), number = uint64(bucket, at: base + 40)
            highest = max(highest, number)
            guard keptUntil != 0, keptUntil >= now else {
                if free == nil { free = slot }
                continue
            }
            if matches(bucket, at: base, hash) { return .seen(sameRequest: matches(bucket, at: base + 16, request)) }
            if number < oldestNumber { (oldest, oldestNumber) = (slot, number) }
        }
        return .free(slot: free ?? oldest, number: highest &+ 1)
    }

    static func hash(_ messageID: String) -> [UInt8] { Blake2b.hash(domain + Array(messageID.utf8), outputLength: 16) }

    static func requestHash(_ identifier: String?) -> [UInt8] {
        guard let identifier else { return [UInt8](repeating: 0, count: 16) }
        return Blake2b.hash(requestDomain + Array(identifier.utf8), outputLength: 16)
    }

    static func uint64(_ bytes: [UInt8], at offset: Int) -> UInt64 {
        var v: UInt64 = 0
        for b in bytes[offset..<(offset + 8)] { v = v << 8 | UInt64(b) }
        return v
    }

    static func int64(_ bytes: [UInt8], at offset: Int) -> Int64 { Int64(bitPattern: uint64(bytes, at: offset)) }

    static func uint32(_ bytes: [UInt8], at offset: Int) -> UInt32 {
        var v: UInt32 = 0
        for b in bytes[offset..<(offset + 4)] { v = v << 8 | UInt32(b) }
        return v
    }

    static func be(_ value: UInt64, _ count: Int) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: value >> (8 * UInt64(count - 1 - $0))) }
    }

    /// Whether the 16 bytes at `offset` equal `hash`, in time independent of where they differ.
    static func matches(_ bytes: [UInt8], at offset: Int, _ hash: [UInt8]) -> Bool {
        var difference: UInt8 = 0
        for i in 0..<16 { difference |= bytes[offset + i] ^ hash[i] }
        return difference == 0
    }

    static func encode(hash: [UInt8], request: [UInt8], keepUntil: Int64, number: UInt64) -> [UInt8] {
        hash + request + be(UInt64(bitPattern: keepUntil), 8) + be(number, 8)
    }

    // MARK: the hot path

    func record(messageID: String, requestIdentifier: String?, expiresAt: Int64, now: Int64) throws(KeychainError) -> Bool {
        try StoreIO.ensureDirectory(directory)
        let hash = Self.hash(messageID)
        let request = Self.requestHash(requestIdentifier)
        // A zero keep-until marks an empty slot: an entry kept "until 0" is kept until 1 instead.
        let keepUntil = max(expiresAt, 1)
        return try FileLock.withExclusiveLock(directory.appending("replay.lock"), timeout: lockTimeout) { () throws(KeychainError) -> Bool in
            let fd = try openTable(now: now)
            defer { try? fd.close() }
            let header = try Self.read(fd, count: Self.headerSize, at: 0, path: databasePath)
            guard let table = Table(header) else { throw .decode(path: databasePath.string, why: "the replay table's header changed while locked") }
            let bucket = table.bucket(hash)
            let bytes = try Self.read(fd, count: table.slots * Self.recordSize, at: table.bucketOffset(bucket), path: databasePath)
            switch Self.lookUp(bytes, slots: table.slots, hash: hash, request: request, now: now) {
            case .seen(let sameRequest):
                // Seen before: it opens again only under the request identifier it was first opened under.
                return requestIdentifier != nil && sameRequest
            case .free(let slot, let number):
                let entry = Self.encode(hash: hash, request: request, keepUntil: keepUntil, number: number)
                do {
                    _ = try fd.writeAll(toAbsoluteOffset: Int64(table.bucketOffset(bucket) + slot * Self.recordSize), entry)
                } catch { throw StoreIO.ioError("write to", databasePath, error) }
                return true
            }
        }
    }

    /// Opens the table for reading and writing, making it (and importing earlier versions' caches) when
    /// it is missing, and starting a new one when its header is not this format's or it is cut short.
    private func openTable(now: Int64) throws(KeychainError) -> FileDescriptor {
        if let fd = try io.openForReading(databasePath) {
            let header = try Self.read(fd, count: Self.headerSize, at: 0, path: databasePath, allowShort: true)
            var st = stat()
            let size = fstat(fd.rawValue, &st) == 0 ? Int(st.st_size) : -1
            try? fd.close()
            if let table = Table(header), size >= table.fileSize {
                do {
                    return try FileDescriptor.open(databasePath, .readWrite, options: [.noFollow, .closeOnExec])
                } catch { throw StoreIO.ioError("open", databasePath, error) }
            }
            Self.logger.error("the replay table is damaged (not its format, or cut short); starting a new one",
                              metadata: ["path": "\(databasePath.string)"])
        }
        try StoreIO.atomicWrite(databasePath, tmpDirectory: directory, bytes: try newTable(now: now))
        try removeEarlierVersions()
        do {
            return try FileDescriptor.open(databasePath, .readWrite, options: [.noFollow, .closeOnExec])
        } catch { throw StoreIO.ioError("open", databasePath, error) }
    }

    /// A new table's bytes holding the live entries of an earlier version's cache, inserted in their
    /// order (the caller removes the earlier files once the table is durable).
    private func newTable(now: Int64) throws(KeychainError) -> [UInt8] {
        let table = Table.new(capacity: capacity)
        var bytes = table.header + [UInt8](repeating: 0, count: table.fileSize - Self.headerSize)
        var imported: [(hash: [UInt8], request: [UInt8], keepUntil: Int64)] = []
        if let v2 = try io.readFile(v2Path) {
            for i in 0..<(v2.count / Self.v2RecordSize) {
                let base = i * Self.v2RecordSize
                imported.append((Array(v2[base..<(base + 16)]), Array(v2[(base + 16)..<(base + 32)]), Self.int64(v2, at: base + 32)))
            }
        } else if let v1 = try io.readFile(legacyPath) {
            for i in 0..<(v1.count / Self.legacyRecordSize) {
                let base = i * Self.legacyRecordSize
                imported.append((Array(v1[base..<(base + 16)]), Self.requestHash(nil), Self.int64(v1, at: base + 16)))
            }
        }
        for entry in imported where entry.keepUntil >= now && entry.keepUntil != 0 {
            let offset = table.bucketOffset(table.bucket(entry.hash))
            let bucket = Array(bytes[offset..<(offset + table.slots * Self.recordSize)])
            guard case .free(let slot, let number) = Self.lookUp(bucket, slots: table.slots, hash: entry.hash, request: entry.request, now: now)
            else { continue }
            let at = offset + slot * Self.recordSize
            bytes.replaceSubrange(at..<(at + Self.recordSize),
                                  with: Self.encode(hash: entry.hash, request: entry.request, keepUntil: entry.keepUntil, number: number))
        }
        return bytes
    }

    /// Removes caches of earlier versions once the table that imported them is in place.
    private func removeEarlierVersions() throws(KeychainError) {
        var removed = false
        for path in [v2Path, legacyPath] where unlink(path.string) == 0 { removed = true }
        if removed { try StoreIO.syncDirectory(directory) }
    }

    static func read(_ fd: FileDescriptor, count: Int, at offset: Int, path: FilePath, allowShort: Bool = false) throws(KeychainError) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let n: Int
            do {
                n = try out.withUnsafeMutableBytes { buffer in
                    try fd.read(fromAbsoluteOffset: Int64(offset + done), into: UnsafeMutableRawBufferPointer(rebasing: buffer[done...]))
                }
            } catch { throw StoreIO.ioError("read", path, error) }
            if n == 0 {
                if allowShort { return Array(out[0..<done]) }
                throw .decode(path: path.string, why: "the replay table is shorter than its header says")
            }
            done += n
        }
        return out
    }
}
