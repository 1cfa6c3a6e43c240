#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import SystemPackage
public import SealedPushCrypto
public import SealedPushKeyring
public import SealedPushWire
import Logging
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A Keychain-shaped store of items in a directory: add, copy-matching, update, delete.
///
/// Layout under the root (directories 0700, files 0600):
///
///     store.key                 32-byte XChaCha20-Poly1305 key sealing every item (stands in for a hardware-bound key)
///     lock-state                the simulated device lock state: beforeFirstUnlock, unlocked or locked
///     .lock                     the writers' flock file
///     generation                the change counter, moved by every transaction (see `CachedDeviceKeyring`)
///     tmp/                      temp files of writes in progress (cleaned on the next write)
///     items/<access group>/<class>@<service>@<account>.item
///     replay/                   the replay cache (see `ReplayCache`)
///
/// Writers serialise on `flock(.lock)`, waiting at most `lockTimeout` for it (then `busy`), and
/// replace files with temp + fsync + rename + directory fsync; readers take no lock and see either
/// the old or the new file. A value of this type is cheap to open: it reads only `store.key`.
public struct KeychainStore: Sendable {
    /// The access group new items go to when no group is named, and the default entitlement.
    public static let defaultAccessGroup = "sealedpush"
    /// How long a writer waits for another process's transaction by default: 3 s, far longer than a
    /// transaction holds the lock, well inside a notification extension's deadline.
    public static let defaultLockTimeout: Duration = .seconds(3)

    /// The store's directory.
    public let root: FilePath
    /// The access groups this caller is entitled to; the first is the default for `add`.
    public let accessGroups: [String]
    /// Files and directory listings this opened store has performed.
    public let statistics: IOStatistics
    /// The clock used for creation and modification dates and by keyrings.
    public let clock: WallClock
    /// The clock's reading function (`clock.now`).
    public var now: @Sendable () -> Date { clock.now }
    /// The longest a writer waits for the writers' lock before failing with `busy`.
    public let lockTimeout: Duration

    let storeKey: SecureBytes
    let io: StoreIO
    /// Whether this value is used inside `transaction`, where the writer lock is already held.
    let holdsLock: Bool

    static let logger = Logger(label: "sealedpush.keychain")
    static let storeKeyName = "store.key"
    static let lockStateName = "lock-state"

    var itemsDirectory: FilePath { root.appending("items") }
    var tmpDirectory: FilePath { root.appending("tmp") }
    var lockFile: FilePath { root.appending(".lock") }

    /// Opens the store at `root`, creating it (and its store key) if `create` and it does not exist.
    ///
    /// Refuses a root, file or directory that group or others can access, with the `chmod` that fixes it,
    /// and one that another user owns (`notOwner`), with the `chown` that fixes it.
    /// A writer waits at most `lockTimeout` for another process's transaction, then throws `busy`.
    public init(root: FilePath, accessGroups: [String] = [KeychainStore.defaultAccessGroup], create: Bool = true,
                clock: WallClock = .system, lockTimeout: Duration = KeychainStore.defaultLockTimeout) throws(KeychainError) {
        guard !accessGroups.isEmpty else { throw .param("give the store at least one access group the caller is entitled to") }
        for group in accessGroups { try ItemIdentity.validateGroup(group) }
        let io = StoreIO(stats: IOStatistics())
        if !(try StoreIO.checkDirectory(root)) {
            guard create else {
                throw .storeNotFound(path: root.string, why: "the directory does not exist")
            }
            if mkdir(root.string, 0o700) == 0 {
                DurabilityLog.note(.mkdir(root.string))
                // Best effort: the root's parent is not the store's, and may not be readable to open.
                try? StoreIO.syncDirectory(root.removingLastComponent())
            } else if errno != EEXIST {
                throw StoreIO.lastError("create store directory", root)
            }
            _ = try StoreIO.checkDirectory(root)
        }
        let keyPath = root.appending(Self.storeKeyName)
        var key = try Self.readStoreKey(keyPath, io: io)
        if key == nil {
            guard create else {
                throw .storeNotFound(path: root.string, why: "the directory has no store key")
            }
            key = try FileLock.withExclusiveLock(root.appending(".lock"), timeout: lockTimeout) { () throws(KeychainError) -> SecureBytes in
                if let existing = try Self.readStoreKey(keyPath, io: io) { return existing }
                try StoreIO.ensureDirectory(root.appending("tmp"))
                try StoreIO.ensureDirectory(root.appending("items"))
                let newKey = XChaCha20Poly1305.generateKey()
                try StoreIO.atomicWrite(keyPath, tmpDirectory: root.appending("tmp")) { fd throws(KeychainError) in
                    guard newKey.write(toFileDescriptor: fd.rawValue) else { throw StoreIO.lastError("write", keyPath) }
                }
                return newKey
            }
        }
        _ = try StoreIO.checkDirectory(root.appending("items"))
        // Every other file and directory docs/keychain.md lists, when present: the same refusal and chmod advice.
        try StoreIO.checkIfPresent(root.appending(".lock"), isDirectory: false)
        try StoreIO.checkIfPresent(root.appending(StoreGeneration.fileName), isDirectory: false)
        try StoreIO.checkIfPresent(root.appending(Self.lockStateName), isDirectory: false)
        try StoreIO.checkIfPresent(root.appending("tmp"), isDirectory: true)
        try StoreIO.checkIfPresent(root.appending("replay"), isDirectory: true)
        try StoreIO.checkIfPresent(root.appending("replay/replay.db"), isDirectory: false)
        try StoreIO.checkIfPresent(root.appending("replay/replay-v2.db"), isDirectory: false)
        try StoreIO.checkIfPresent(root.appending("replay/replay-v3.db"), isDirectory: false)
        try StoreIO.checkIfPresent(root.appending("replay/replay.lock"), isDirectory: false)
        self.root = root
        self.accessGroups = accessGroups
        self.statistics = io.stats
        self.clock = clock
        self.lockTimeout = lockTimeout
        self.storeKey = key!
        self.io = io
        self.holdsLock = false
    }

    /// Opens the store at a file URL (see `init(root:accessGroups:create:clock:lockTimeout:)`).
    public init(url: URL, accessGroups: [String] = [KeychainStore.defaultAccessGroup], create: Bool = true,
                clock: WallClock = .system, lockTimeout: Duration = KeychainStore.defaultLockTimeout) throws(KeychainError) {
        try self.init(root: FilePath(url.path), accessGroups: accessGroups, create: create, clock: clock, lockTimeout: lockTimeout)
    }

    private init(copy other: KeychainStore, holdsLock: Bool) {
        root = other.root
        accessGroups = other.accessGroups
        statistics = other.statistics
        clock = other.clock
        lockTimeout = other.lockTimeout
        storeKey = other.storeKey
        io = other.io
        self.holdsLock = holdsLock
    }

    private static func readStoreKey(_ path: FilePath, io: StoreIO) throws(KeychainError) -> SecureBytes? {
        guard let fd = try io.openForReading(path) else { return nil }
        defer { try? fd.close() }
        guard let key = SecureBytes.read(fromFileDescriptor: fd.rawValue, count: XChaCha20Poly1305.keyByteCount) else {
            throw .decode(path: path.string, why: "the store key is shorter than \(XChaCha20Poly1305.keyByteCount) bytes")
        }
        return key
    }

    // MARK: - Transactions

    /// Runs `body` holding the writers' lock, so reads and writes inside it form one atomic step
    /// with respect to other writers (in this or any other process). Temp files left by an
    /// interrupted write are removed first. Use the store passed to `body` for every operation inside.
    /// Waits at most `lockTimeout` for another process's transaction, then throws `busy` without running `body`.
    public func transaction<R>(_ body: (KeychainStore) throws(KeychainError) -> R) throws(KeychainError) -> R {
        if holdsLock { return try body(self) }
        return try FileLock.withExclusiveLock(lockFile, timeout: lockTimeout) { () throws(KeychainError) -> R in
            try StoreIO.ensureDirectory(tmpDirectory)
            let removed = try io.cleanTemporaryFiles(in: tmpDirectory)
            if removed > 0 {
                Self.logger.notice("removed \(removed) temp file(s) left by an interrupted write", metadata: ["store": "\(root.string)"])
            }
            // Readers that cache (CachedDeviceKeyring) see the counter move before and after the body.
            let generation = try StoreGeneration.begin(root: root)
            defer { StoreGeneration.end(generation, root: root) }
            return try body(KeychainStore(copy: self, holdsLock: true))
        }
    }

    // MARK: - Device lock state

    /// The simulated device lock state (a fresh store is `unlocked`).
    public func deviceLockState() throws(KeychainError) -> DeviceLockState {
        let path = root.appending(Self.lockStateName)
        guard let bytes = try io.readFile(path) else { return .unlocked }
        let trimmed = bytes.drop { $0 == 0x20 || $0 == 0x0a || $0 == 0x0d || $0 == 0x09 }
        let text = String(decoding: trimmed.reversed().drop { $0 == 0x20 || $0 == 0x0a || $0 == 0x0d || $0 == 0x09 }.reversed(),
                          as: UTF8.self)
        guard let state = DeviceLockState(rawValue: text) else {
            throw .decode(path: path.string, why: "expected beforeFirstUnlock, unlocked or locked")
        }
        return state
    }

    private func setLockState(_ transition: (DeviceLockState) -> DeviceLockState) throws(KeychainError) -> DeviceLockState {
        try transaction { (tx: KeychainStore) throws(KeychainError) -> DeviceLockState in
            let next = transition(try tx.deviceLockState())
            try StoreIO.atomicWrite(root.appending(Self.lockStateName), tmpDirectory: tmpDirectory,
                                    bytes: Array((next.rawValue + "\n").utf8))
            return next
        }
    }

    /// Simulates a reboot: the device is `beforeFirstUnlock` until the next unlock.
    @discardableResult
    public func reboot() throws(KeychainError) -> DeviceLockState { try setLockState { _ in .beforeFirstUnlock } }

    /// Simulates unlocking the device with its passcode.
    @discardableResult
    public func unlock() throws(KeychainError) -> DeviceLockState { try setLockState { _ in .unlocked } }

    /// Simulates locking the device; before the first unlock it stays `beforeFirstUnlock`.
    @discardableResult
    public func lock() throws(KeychainError) -> DeviceLockState {
        try setLockState { $0 == .beforeFirstUnlock ? .beforeFirstUnlock : .locked }
    }

    // MARK: - Paths and checks

    func checkEntitled(_ group: String) throws(KeychainError) {
        guard accessGroups.contains(group) else { throw .missingEntitlement(group: group) }
    }

    func groupDirectory(_ group: String) -> FilePath { itemsDirectory.appending(group) }

    func path(of identity: ItemIdentity) -> FilePath { groupDirectory(identity.accessGroup).appending(identity.fileName) }

    func checkAvailable(_ accessibility: Accessibility, _ what: @autoclosure () -> String,
                        state: DeviceLockState) throws(KeychainError) {
        guard accessibility.isAvailable(in: state) else {
            throw .interactionNotAllowed("\(what()) (accessibility \(accessibility.rawValue), device \(state.rawValue))")
        }
    }

    /// Reads and parses one item file; `nil` if it does not exist.
    func readItemFile(_ identity: ItemIdentity) throws(KeychainError) -> ItemFile? {
        let dir = groupDirectory(identity.accessGroup)
        guard try StoreIO.checkDirectory(dir) else { return nil }
        let path = dir.appending(identity.fileName)
        guard let bytes = try io.readFile(path) else { return nil }
        return try ItemFile(bytes: bytes, path: path.string, expected: identity)
    }

    // MARK: - Add

    /// Adds an item (`SecItemAdd`); throws `duplicateItem` if one with the same identity exists.
    public func add(itemClass: KeychainItemClass, service: String, account: String, data: SecureBytes,
                    accessGroup: String? = nil, label: String? = nil,
                    accessibility: Accessibility = .afterFirstUnlockThisDeviceOnly,
                    applicationTag: [UInt8]? = nil) throws(KeychainError) {
        let group = accessGroup ?? accessGroups[0]
        try checkEntitled(group)
        let identity = ItemIdentity(itemClass: itemClass, accessGroup: group, service: service, account: account)
        try identity.validate()
        let date = now()
        let header = ItemHeader(itemClass: itemClass, accessGroup: group, service: service, account: account, label: label,
                                accessibility: accessibility, applicationTag: applicationTag, created: date, modified: date)
        try transaction { (tx: KeychainStore) throws(KeychainError) in
            try tx.checkAvailable(accessibility, "adding \(identity.describe)", state: try tx.deviceLockState())
            if try tx.readItemFileExists(identity) { throw .duplicateItem(identity.describe) }
            try tx.writeItem(header, data: data)
        }
    }

    func readItemFileExists(_ identity: ItemIdentity) throws(KeychainError) -> Bool {
        var st = stat()
        return lstat(path(of: identity).string, &st) == 0
    }

    func writeItem(_ header: ItemHeader, data: SecureBytes) throws(KeychainError) {
        precondition(holdsLock, "item writes happen inside a transaction")
        try StoreIO.ensureDirectory(groupDirectory(header.accessGroup))
        let bytes = try ItemFile.encode(header: header, data: data, storeKey: storeKey)
        try StoreIO.atomicWrite(path(of: header.identity), tmpDirectory: tmpDirectory, bytes: bytes)
    }

    // MARK: - Copy matching

    /// The items matching `query` (`SecItemCopyMatching`), in a stable order; throws `itemNotFound` if none.
    ///
    /// Every item read is authenticated, even when no data is returned, so a tampered file is
    /// reported rather than listed. Asking for data of an item whose accessibility class is not
    /// available in the device's lock state throws `interactionNotAllowed`.
    public func copyMatching(_ query: KeychainQuery) throws(KeychainError) -> [KeychainItem] {
        let limit: Int
        switch query.limit {
        case .one: limit = 1
        case .all: limit = .max
        case let .max(n):
            guard n >= 1 else { throw .param("the match limit must be at least 1 (got \(n))") }
            limit = n
        }
        let files = try matchingFiles(query, limit: limit)
        guard !files.isEmpty else { throw .itemNotFound(query.describedForErrors) }
        let state: DeviceLockState? = query.returnData ? try deviceLockState() : nil
        var out: [KeychainItem] = []
        for file in files {
            let secret = try file.open(storeKey: storeKey)
            if let state {
                try checkAvailable(file.header.accessibility, "the secret of \(file.header.identity.describe)", state: state)
                out.append(file.header.item(data: secret))
            } else {
                out.append(file.header.item(data: nil))
            }
        }
        return out
    }

    /// The first matching item with its data (a convenience for `copyMatching` with `.one` and `returnData`).
    public func read(itemClass: KeychainItemClass, service: String, account: String,
                     accessGroup: String? = nil) throws(KeychainError) -> KeychainItem {
        try copyMatching(KeychainQuery(itemClass: itemClass, accessGroup: accessGroup, service: service, account: account,
                                       returnData: true))[0]
    }

    /// The parsed files matching `query` (not yet decrypted), at most `limit`.
    func matchingFiles(_ query: KeychainQuery, limit: Int) throws(KeychainError) -> [ItemFile] {
        if let group = query.accessGroup { try checkEntitled(group) }
        if let cls = query.itemClass, let group = query.accessGroup, let service = query.service, let account = query.account {
            let identity = ItemIdentity(itemClass: cls, accessGroup: group, service: service, account: account)
            try identity.validate()
            guard let file = try readItemFile(identity), query.matches(file.header) else { return [] }
            return [file]
        }
        let groups = query.accessGroup.map { [$0] } ?? accessGroups
        var out: [ItemFile] = []
        for group in groups {
            let dir = groupDirectory(group)
            guard try StoreIO.checkDirectory(dir) else { continue }
            let prefix = query.itemClass.map { "\($0.rawValue)@" }
            for name in try io.list(dir) where name.hasSuffix(".item") {
                if let prefix, !name.hasPrefix(prefix) { continue }
                let path = dir.appending(name)
                guard let bytes = try io.readFile(path) else { continue }  // deleted since the listing
                let file = try ItemFile(bytes: bytes, path: path.string, expected: nil)
                guard file.header.accessGroup == group, file.header.identity.fileName == name else {
                    throw .authFailed(path: path.string, why: "the file holds the item for another identity (a swapped or renamed file)")
                }
                guard query.matches(file.header) else { continue }
                out.append(file)
                if out.count >= limit { return out }
            }
        }
        return out
    }

    // MARK: - Update

    /// Changes every item matching `query` (`SecItemUpdate`); returns how many, throws `itemNotFound` if none.
    ///
    /// Re-sealing an item needs its secret, so the item's old and new classes must be available.
    @discardableResult
    public func update(_ query: KeychainQuery, with change: KeychainUpdate) throws(KeychainError) -> Int {
        try transaction { (tx: KeychainStore) throws(KeychainError) -> Int in
            let files = try tx.matchingFiles(query, limit: .max)
            guard !files.isEmpty else { throw .itemNotFound(query.describedForErrors) }
            let state = try tx.deviceLockState()
            for file in files {
                var header = file.header
                let old = try file.open(storeKey: tx.storeKey)
                try tx.checkAvailable(header.accessibility, "updating \(header.identity.describe)", state: state)
                if let accessibility = change.accessibility { header.accessibility = accessibility }
                header.label = change.label.applied(to: header.label)
                header.applicationTag = change.applicationTag.applied(to: header.applicationTag)
                try tx.checkAvailable(header.accessibility, "updating \(header.identity.describe)", state: state)
                header.modified = ItemHeader.wholeSeconds(tx.now())
                try tx.writeItem(header, data: change.data ?? old)
            }
            return files.count
        }
    }

    /// Reads one item's secret, computes its new value and writes it back, all under the writers'
    /// lock: concurrent `modify` calls from any number of processes never lose an update.
    /// `body` gets `nil` if the item does not exist yet, and it is then added with `accessibility`.
    public func modify(itemClass: KeychainItemClass, service: String, account: String, accessGroup: String? = nil,
                       accessibility: Accessibility = .afterFirstUnlockThisDeviceOnly,
                       _ body: (SecureBytes?) throws(KeychainError) -> SecureBytes) throws(KeychainError) {
        let group = accessGroup ?? accessGroups[0]
        try checkEntitled(group)
        let identity = ItemIdentity(itemClass: itemClass, accessGroup: group, service: service, account: account)
        try identity.validate()
        try transaction { (tx: KeychainStore) throws(KeychainError) in
            let state = try tx.deviceLockState()
            let date = tx.now()
            if let file = try tx.readItemFile(identity) {
                try tx.checkAvailable(file.header.accessibility, "updating \(identity.describe)", state: state)
                let new = try body(try file.open(storeKey: tx.storeKey))
                var header = file.header
                header.modified = ItemHeader.wholeSeconds(date)
                try tx.writeItem(header, data: new)
            } else {
                try tx.checkAvailable(accessibility, "adding \(identity.describe)", state: state)
                let new = try body(nil)
                try tx.writeItem(ItemHeader(itemClass: itemClass, accessGroup: group, service: service, account: account,
                                            label: nil, accessibility: accessibility, applicationTag: nil,
                                            created: date, modified: date), data: new)
            }
        }
    }

    // MARK: - Delete

    /// Deletes every item matching `query` (`SecItemDelete`), overwriting each file before
    /// unlinking it; returns how many, throws `itemNotFound` if none. Works in any lock state.
    @discardableResult
    public func delete(_ query: KeychainQuery) throws(KeychainError) -> Int {
        try transaction { (tx: KeychainStore) throws(KeychainError) -> Int in
            let files = try tx.matchingFiles(query, limit: .max)
            guard !files.isEmpty else { throw .itemNotFound(query.describedForErrors) }
            for file in files { try StoreIO.wipeAndRemove(tx.path(of: file.header.identity)) }
            return files.count
        }
    }

    /// Every file path under the store root (for audits and tests: scanning for leaked secrets).
    public func allFiles() throws(KeychainError) -> [FilePath] {
        var out: [FilePath] = []
        var pending = [root]
        while let dir = pending.popLast() {
            for name in try io.list(dir) {
                let path = dir.appending(name)
                var st = stat()
                guard lstat(path.string, &st) == 0 else { continue }
                if st.st_mode & S_IFMT == S_IFDIR { pending.append(path) } else { out.append(path) }
            }
        }
        return out.sorted { $0.string < $1.string }
    }
}

extension ItemIdentity {
    /// `class 'service'/'account' in group 'g'` — attribute values only, never data.
    var describe: String { "the \(itemClass.rawValue) item '\(service)'/'\(account)' in group '\(accessGroup)'" }
}
