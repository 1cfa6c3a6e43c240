#if canImport(UserNotifications)
public import Foundation
public import SealedPushWire
public import SealedPushCrypto
public import Logging
#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#endif

/// The receiver's replay cache in the app group container, shared by the app, its service extension and its
/// content extension (iOS's counterpart of `ReplayCache` in `SealedPushKeychain`, which an extension must not link).
///
/// **The rule** (`device-outcomes.md`, "Replays"): a message id accepted before, and not expired, is a replay —
/// except under the notification request identifier it was first accepted under (a retried push replacing its own
/// notification opens again). Opening again under that identifier writes nothing.
///
/// **On disk**: `replay-cache.bin`, protection `completeUntilFirstUserAuthentication` (the service extension must
/// read it while the phone is locked, after its first unlock). A 32-byte header — magic `SPAGRC01`, the record count
/// (big-endian `UInt32`), four zero bytes, a 16-byte BLAKE2b of the header's first 16 bytes and the records — then
/// one 40-byte record per id in the order they were accepted: the 16-byte BLAKE2b of the message id, the 16-byte
/// BLAKE2b of the request identifier (zeros: none known), the 8-byte big-endian time it is kept until (Unix
/// seconds). Ids and request identifiers are not stored in clear.
///
/// **Bounded**: at most `capacity` records (10 000 by default: a 400 KB file). A new id first drops expired records,
/// then the oldest accepted beyond the capacity; an entry's life is bounded by the opener (issued-at plus the replay
/// window, or `exp` when sooner), so a flood of far-future `exp` messages ages out like any other.
///
/// **Durable**: every new id rewrites the file whole — a new file of its class, `F_FULLFSYNC`, `rename`, directory
/// sync (`AppGroupFile`) — under the cache's `flock`, held for that read and write only. This is more work per push
/// than the Linux cache's in-place bucket (up to 400 KB written and a full sync), and in exchange no power loss
/// forgets an accepted id.
///
/// **Failures fail closed.** `recordIfNew` answers `false` (the message is refused as `replayed`) when the file cannot
/// be read or written: before the first unlock, a lock held too long by another process, an I/O error. A file that
/// is **damaged** (not its format, a wrong checksum, a length that does not match, larger than any cache writes)
/// refuses the message in hand — whether it is a replay cannot be known — and is set aside as
/// `replay-cache.damaged` (one kept, for whoever investigates) and replaced by a new cache holding that message's id,
/// so the next message is judged normally. Refusing every message until someone repairs the file would turn one
/// damaged file into a device that shows nothing, and would protect nothing: whoever can write the container can
/// also delete the file. (The Linux cache accepts the message in hand when it starts a new table; this one does not.)
public struct AppGroupReplayCache: ReplayGuard, Sendable {
    /// The cache's file name.
    public static let fileName = "replay-cache.bin"
    /// Where a damaged cache is set aside (the previous one set aside is replaced).
    public static let damagedFileName = "replay-cache.damaged"
    /// The protection class the cache is written with.
    public static let fileProtection = AppGroupFileProtection.completeUntilFirstUserAuthentication
    /// The default bound: 10 000 ids (a 400 KB file).
    public static let defaultCapacity = 10_000
    /// The largest capacity, and the most records a readable file may hold: 100 000 (4 MB).
    public static let maximumCapacity = 100_000

    static let magic: [UInt8] = Array("SPAGRC01".utf8)
    static let headerSize = 32
    static let recordSize = 40
    static let idDomain: [UInt8] = Array("sealedpush-replay-v1".utf8) + [0]
    static let requestDomain: [UInt8] = Array("sealedpush-replay-request-v1".utf8) + [0]

    /// The directory holding the cache (and its lock).
    public let directory: URL
    /// The most ids kept.
    public let capacity: Int
    /// The longest `recordIfNew` waits for another process holding the cache's lock.
    public let lockTimeout: Duration
    /// Where failures are logged (what failed and why; never a message id or request identifier).
    public var logger: Logging.Logger
    let files: any AppGroupFileSystem

    /// A cache in `directory` (a directory of the app group container; made `0700` if missing) of at most
    /// `capacity` ids (1 to `maximumCapacity`), waiting at most `lockTimeout` (1 s) for another process.
    public init(directory: URL, capacity: Int = AppGroupReplayCache.defaultCapacity, lockTimeout: Duration = .seconds(1),
                logger: Logging.Logger = Logging.Logger(label: "sealedpush.replay")) {
        self.init(directory: directory, capacity: capacity, lockTimeout: lockTimeout, logger: logger, files: SystemAppGroupFiles())
    }

    /// A cache in `SealedPush` in the container of the app group `groupIdentifier`; throws `containerUnavailable` when
    /// the process's App Groups entitlement does not list the group.
    public init(appGroup groupIdentifier: String, capacity: Int = AppGroupReplayCache.defaultCapacity, lockTimeout: Duration = .seconds(1),
                logger: Logging.Logger = Logging.Logger(label: "sealedpush.replay")) throws(AppGroupStoreError) {
        let files = SystemAppGroupFiles()
        self.init(directory: try AppGroupContainer.directory(groupIdentifier: groupIdentifier, files: files), capacity: capacity,
                  lockTimeout: lockTimeout, logger: logger, files: files)
    }

    init(directory: URL, capacity: Int, lockTimeout: Duration, logger: Logging.Logger, files: any AppGroupFileSystem) {
        self.directory = directory
        self.capacity = min(max(1, capacity), Self.maximumCapacity)
        self.lockTimeout = lockTimeout
        self.logger = logger
        self.files = files
    }

    var file: AppGroupFile {
        AppGroupFile(url: directory.appendingPathComponent(Self.fileName), protection: Self.fileProtection, files: files, lockTimeout: lockTimeout)
    }

    static var maximumFileSize: Int { headerSize + maximumCapacity * recordSize }

    /// Records `messageID` (arrived under `requestIdentifier`) until `expiresAt`; `false` when it was accepted before
    /// under another (or no) request identifier and has not expired — a replay — or when the cache cannot be used.
    public func recordIfNew(messageID: String, requestIdentifier: String?, keyID: KeyID, expiresAt: Int64, now: Int64) -> Bool {
        do {
            return try record(messageID: messageID, requestIdentifier: requestIdentifier, expiresAt: expiresAt, now: now)
        } catch {
            logger.error("replay cache unusable; refusing the message", metadata: ["error": "\(error.description)"])
            return false
        }
    }

    /// The number of unexpired ids at `now` (for tools and tests); a missing cache holds none.
    public func count(now: Int64) throws(AppGroupStoreError) -> Int {
        switch try file.read(maximumBytes: Self.maximumFileSize) {
        case .missing: return 0
        case .oversized: throw .damaged(file: Self.fileName)
        case let .bytes(bytes):
            guard let table = Table(bytes) else { throw .damaged(file: Self.fileName) }
            return table.live(now: now)
        }
    }

    func record(messageID: String, requestIdentifier: String?, expiresAt: Int64, now: Int64) throws(AppGroupStoreError) -> Bool {
        let id = Self.hash(messageID), request = Self.requestHash(requestIdentifier)
        let file = self.file
        return try file.update(maximumBytes: Self.maximumFileSize) { (stored) throws(AppGroupStoreError) -> (write: [UInt8]?, result: Bool) in
            var table: Table
            var damaged = false
            switch stored {
            case .missing: table = Table()
            case let .bytes(bytes):
                if let parsed = Table(bytes) { table = parsed } else { (table, damaged) = (Table(), true) }
            case .oversized: (table, damaged) = (Table(), true)
            }
            if damaged { setAside(file) }
            if let sameRequest = table.lookUp(id, request: request, now: now) {
                // Seen before: it opens again only under the request identifier it was first opened under.
                return (nil, requestIdentifier != nil && sameRequest)
            }
            table.removeExpired(now: now)
            table.append(id: id, request: request, keepUntil: expiresAt)
            table.keepNewest(capacity)
            return (table.encoded, !damaged)
        }
    }

    /// Moves a damaged cache aside (the caller holds the lock), replacing the one set aside before, and logs it.
    private func setAside(_ file: AppGroupFile) {
        let aside = directory.appendingPathComponent(Self.damagedFileName)
        let moved = rename(file.url.path, aside.path) == 0
        logger.error("the replay cache is damaged (not its format, or not as written); refusing the message in hand and starting a new cache",
                     metadata: ["setAside": "\(moved ? Self.damagedFileName : "no (\(String(cString: strerror(errno))))")"])
    }

    static func hash(_ messageID: String) -> [UInt8] { Blake2b.hash(idDomain + Array(messageID.utf8), outputLength: 16) }

    static func requestHash(_ identifier: String?) -> [UInt8] {
        guard let identifier else { return [UInt8](repeating: 0, count: 16) }
        return Blake2b.hash(requestDomain + Array(identifier.utf8), outputLength: 16)
    }

    /// The records, oldest accepted first, as the bytes of the file without its header.
    struct Table {
        var records: [UInt8] = []
        var count: Int { records.count / AppGroupReplayCache.recordSize }

        init() {}

        /// Parses a whole file; `nil` when it is not exactly as `encoded` writes it.
        init?(_ bytes: [UInt8]) {
            let size = AppGroupReplayCache.headerSize, record = AppGroupReplayCache.recordSize
            guard bytes.count >= size, Array(bytes[0..<8]) == AppGroupReplayCache.magic, bytes[12..<16].allSatisfy({ $0 == 0 }) else { return nil }
            let n = Int(bytes[8..<12].reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
            guard n <= AppGroupReplayCache.maximumCapacity, bytes.count == size + n * record else { return nil }
            let body = Array(bytes[size...])
            guard Self.checksum(Array(bytes[0..<16]), body) == Array(bytes[16..<32]) else { return nil }
            records = body
        }

        static func checksum(_ head: [UInt8], _ body: [UInt8]) -> [UInt8] { Blake2b.hash(head + body, outputLength: 16) }

        /// The file's bytes.
        var encoded: [UInt8] {
            let n = UInt32(count)
            let head = AppGroupReplayCache.magic + [UInt8(n >> 24), UInt8(truncatingIfNeeded: n >> 16), UInt8(truncatingIfNeeded: n >> 8),
                                                    UInt8(truncatingIfNeeded: n), 0, 0, 0, 0]
            return head + Self.checksum(head, records) + records
        }

        func keptUntil(_ index: Int) -> Int64 {
            let base = index * AppGroupReplayCache.recordSize + 32
            return Int64(bitPattern: records[base..<(base + 8)].reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
        }

        /// Whether the 16 bytes at `offset` equal `hash`, in time independent of where they differ.
        func matches(_ offset: Int, _ hash: [UInt8]) -> Bool {
            var difference: UInt8 = 0
            for i in 0..<16 { difference |= records[offset + i] ^ hash[i] }
            return difference == 0
        }

        /// `nil` when `id` is not recorded and unexpired at `now`; else whether it was recorded under `request`.
        func lookUp(_ id: [UInt8], request: [UInt8], now: Int64) -> Bool? {
            for index in 0..<count where keptUntil(index) >= now {
                let base = index * AppGroupReplayCache.recordSize
                if matches(base, id) { return matches(base + 16, request) }
            }
            return nil
        }

        func live(now: Int64) -> Int { (0..<count).filter { keptUntil($0) >= now }.count }

        mutating func removeExpired(now: Int64) {
            var kept: [UInt8] = []
            kept.reserveCapacity(records.count)
            for index in 0..<count where keptUntil(index) >= now {
                let base = index * AppGroupReplayCache.recordSize
                kept += records[base..<(base + AppGroupReplayCache.recordSize)]
            }
            records = kept
        }

        mutating func append(id: [UInt8], request: [UInt8], keepUntil: Int64) {
            let value = UInt64(bitPattern: keepUntil)
            records += id + request + (0..<8).map { UInt8(truncatingIfNeeded: value >> (56 - 8 * UInt64($0))) }
        }

        /// Drops the oldest accepted records beyond `capacity`.
        mutating func keepNewest(_ capacity: Int) {
            if count > capacity { records.removeFirst((count - capacity) * AppGroupReplayCache.recordSize) }
        }
    }
}
#endif
