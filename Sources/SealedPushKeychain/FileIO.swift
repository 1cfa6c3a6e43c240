import SystemPackage
import Synchronization
import SealedPushCrypto
import SealedPushKeyring
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Counts the files and directory listings the store touched, so tests can check lookup cost structurally.
///
/// One counter per opened store; reads from several threads are serialised by the `Mutex`.
public final class IOStatistics: Sendable {
    private let state = Mutex<(files: Int, listings: Int)>((0, 0))

    /// An empty counter.
    public init() {}

    /// How many files the store opened for reading (items, pointers, the store key, the lock state).
    public var filesRead: Int { state.withLock { $0.files } }
    /// How many directories the store listed.
    public var directoriesListed: Int { state.withLock { $0.listings } }

    /// Sets both counts back to zero.
    public func reset() { state.withLock { $0 = (0, 0) } }

    func countFile() { state.withLock { $0.files += 1 } }
    func countListing() { state.withLock { $0.listings += 1 } }
}

/// One durability step of the store, as `DurabilityLog` records it (paths only, never content).
enum DurabilityEvent: Equatable, Sendable, CustomStringConvertible {
    /// A temp file was fsynced before its rename.
    case fsyncFile(String)
    /// A temp file was renamed over its destination.
    case rename(from: String, to: String)
    /// A directory was fsynced (after a rename, unlink or mkdir in it).
    case fsyncDirectory(String)
    /// A file was unlinked (`wipeAndRemove`).
    case unlink(String)
    /// A directory was created.
    case mkdir(String)
    /// The change counter was moved to this value (odd: a transaction began; even: it ended).
    case counter(UInt64)

    /// The step in one line, for test failures.
    var description: String {
        switch self {
        case let .fsyncFile(path): return "fsync \(path)"
        case let .rename(from, to): return "rename \(from) -> \(to)"
        case let .fsyncDirectory(path): return "fsync dir \(path)"
        case let .unlink(path): return "unlink \(path)"
        case let .mkdir(path): return "mkdir \(path)"
        case let .counter(value): return "counter \(value)"
        }
    }
}

/// Records the store's durability syscalls, in order, for tests that check the temp fsync → rename →
/// directory fsync pattern: bind one with `DurabilityLog.$current.withValue(log) { … }`. Unbound (always,
/// outside tests) recording costs one task-local read.
final class DurabilityLog: Sendable {
    /// The log the current task records into, if any.
    @TaskLocal static var current: DurabilityLog?

    private let steps = Mutex<[DurabilityEvent]>([])

    /// An empty log.
    init() {}

    /// The steps recorded so far, oldest first.
    var events: [DurabilityEvent] { steps.withLock { $0 } }

    /// Records `event` into the current task's log, if there is one.
    static func note(_ event: @autoclosure () -> DurabilityEvent) {
        guard let log = current else { return }
        let value = event()
        log.steps.withLock { $0.append(value) }
    }
}

/// Low-level file operations with the store's rules: files and directories of this process's user
/// only, owner-only permissions, no symlinks,
/// temp file + fsync + rename + directory fsync for every write.
struct StoreIO: Sendable {
    let stats: IOStatistics

    static let maximumFileSize = 1 << 20

    // MARK: errors

    static func ioError(_ operation: String, _ path: FilePath, _ error: any Error) -> KeychainError {
        if let errno = error as? Errno { return .io(operation: operation, path: path.string, errno: errno.rawValue) }
        return .io(operation: operation, path: path.string, errno: EIO)
    }

    static func lastError(_ operation: String, _ path: FilePath) -> KeychainError {
        .io(operation: operation, path: path.string, errno: errno)
    }

    // MARK: permissions

    /// The uid every store file and directory must belong to, when set (tests only); otherwise the
    /// process's effective uid.
    @TaskLocal static var expectedOwner: uid_t?

    /// Refuses a file or directory that belongs to another user than the one running this process:
    /// whoever owns it can change its mode, its content or, for a directory, what it holds.
    static func checkOwner(_ owner: uid_t, path: FilePath) throws(KeychainError) {
        let expected = expectedOwner ?? geteuid()
        guard owner == expected else {
            throw .notOwner(path: path.string, owner: UInt32(owner), expected: UInt32(expected))
        }
    }

    /// Refuses a mode that lets group or others read, write or enter.
    static func checkMode(_ mode: UInt32, path: FilePath, isDirectory: Bool) throws(KeychainError) {
        guard mode & 0o077 == 0 else {
            let fix = isDirectory ? "chmod 700 '\(path.string)'" : "chmod 600 '\(path.string)'"
            throw .insecurePermissions(path: path.string, mode: mode & 0o7777, fix: fix)
        }
    }

    /// The owner check, then the mode check, on a file's `stat`.
    static func checkOwnerAndMode(_ st: stat, path: FilePath, isDirectory: Bool) throws(KeychainError) {
        try checkOwner(st.st_uid, path: path)
        try checkMode(UInt32(st.st_mode), path: path, isDirectory: isDirectory)
    }

    /// Checks an existing directory; `false` if it does not exist.
    static func checkDirectory(_ path: FilePath) throws(KeychainError) -> Bool {
        var st = stat()
        if lstat(path.string, &st) != 0 {
            if errno == ENOENT { return false }
            throw lastError("stat", path)
        }
        guard st.st_mode & S_IFMT == S_IFDIR else {
            throw .param("\(path.string) is not a directory; point the store at a directory")
        }
        try checkOwnerAndMode(st, path: path, isDirectory: true)
        return true
    }

    /// Checks the permissions of a store file or directory that may not exist yet (`generation`,
    /// `.lock`, `tmp/`, the replay cache's files): nothing to check when it is absent; a symbolic link
    /// or a file of the wrong kind is refused like any other.
    static func checkIfPresent(_ path: FilePath, isDirectory: Bool) throws(KeychainError) {
        var st = stat()
        if lstat(path.string, &st) != 0 {
            if errno == ENOENT { return }
            throw lastError("stat", path)
        }
        let kind = st.st_mode & S_IFMT
        if kind == S_IFLNK { throw .param("\(path.string) is a symbolic link; the store only uses files and directories it created") }
        guard kind == (isDirectory ? S_IFDIR : S_IFREG) else {
            throw .param("\(path.string) is not a \(isDirectory ? "directory" : "regular file"); remove it")
        }
        try checkOwnerAndMode(st, path: path, isDirectory: isDirectory)
    }

    /// Creates a 0700 directory if it is missing, then checks its owner and permissions. A directory it
    /// creates is made durable (its parent is fsynced) before anything is renamed into it.
    static func ensureDirectory(_ path: FilePath) throws(KeychainError) {
        guard mkdir(path.string, 0o700) == 0 else {
            if errno != EEXIST { throw lastError("create directory", path) }
            _ = try checkDirectory(path)
            return
        }
        DurabilityLog.note(.mkdir(path.string))
        try syncDirectory(path.removingLastComponent())
        _ = try checkDirectory(path)
    }

    // MARK: reading

    /// Opens `path` read-only (no symlinks) after checking it is a private regular file of this process's
    /// user (on the open descriptor); `nil` if it does not exist.
    func openForReading(_ path: FilePath) throws(KeychainError) -> FileDescriptor? {
        let fd: FileDescriptor
        do {
            fd = try FileDescriptor.open(path, .readOnly, options: [.noFollow, .closeOnExec])
        } catch let e as Errno where e == .noSuchFileOrDirectory {
            return nil
        } catch let e as Errno where e == .tooManySymbolicLinkLevels {
            throw .param("\(path.string) is a symbolic link; the store only uses regular files it created")
        } catch {
            throw StoreIO.ioError("open", path, error)
        }
        stats.countFile()
        var st = stat()
        guard fstat(fd.rawValue, &st) == 0 else {
            let e = StoreIO.lastError("stat", path)
            try? fd.close()
            throw e
        }
        guard st.st_mode & S_IFMT == S_IFREG else {
            try? fd.close()
            throw .param("\(path.string) is not a regular file; remove it")
        }
        do { try StoreIO.checkOwnerAndMode(st, path: path, isDirectory: false) } catch {
            try? fd.close()
            throw error
        }
        return fd
    }

    /// The whole content of a private regular file, or `nil` if it does not exist.
    func readFile(_ path: FilePath) throws(KeychainError) -> [UInt8]? {
        guard let fd = try openForReading(path) else { return nil }
        defer { try? fd.close() }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16384)
        while true {
            let n: Int
            do { n = try chunk.withUnsafeMutableBytes { try fd.read(into: $0) } } catch { throw StoreIO.ioError("read", path, error) }
            if n == 0 { break }
            out.append(contentsOf: chunk[0..<n])
            if out.count > StoreIO.maximumFileSize {
                throw .decode(path: path.string, why: "the file is over \(StoreIO.maximumFileSize) bytes")
            }
        }
        return out
    }

    /// Names in a directory (no `.`/`..`), or `[]` if it does not exist.
    func list(_ path: FilePath) throws(KeychainError) -> [String] {
        guard let dir = opendir(path.string) else {
            if errno == ENOENT { return [] }
            throw StoreIO.lastError("list", path)
        }
        stats.countListing()
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafePointer(to: entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }

    // MARK: writing

    /// fsyncs a directory so a rename or unlink in it is durable.
    static func syncDirectory(_ path: FilePath) throws(KeychainError) {
        let fd: FileDescriptor
        do { fd = try FileDescriptor.open(path, .readOnly, options: [.directory, .closeOnExec]) } catch {
            throw ioError("open directory", path, error)
        }
        defer { try? fd.close() }
        guard fsync(fd.rawValue) == 0 else { throw lastError("fsync directory", path) }
        DurabilityLog.note(.fsyncDirectory(path.string))
    }

    /// Writes a new temp file in `tmpDirectory` with the given parts, fsyncs it, renames it over
    /// `destination` and fsyncs the destination's directory. A reader sees the old or the new file, never a mix.
    static func atomicWrite(_ destination: FilePath, tmpDirectory: FilePath,
                            write body: (FileDescriptor) throws(KeychainError) -> Void) throws(KeychainError) {
        let tmp = tmpDirectory.appending(".tmp-\(Hex.encode(CryptoLibrary.randomBytes(count: 8)))")
        let fd: FileDescriptor
        do {
            fd = try FileDescriptor.open(tmp, .writeOnly, options: [.create, .exclusiveCreate, .noFollow, .closeOnExec],
                                         permissions: [.ownerReadWrite])
        } catch { throw ioError("create temp file", tmp, error) }
        do throws(KeychainError) {
            // The umask cannot widen 0600, but be explicit in case the file system ignores modes.
            _ = fchmod(fd.rawValue, 0o600)
            try body(fd)
            guard fsync(fd.rawValue) == 0 else { throw lastError("fsync", tmp) }
            DurabilityLog.note(.fsyncFile(tmp.string))
            do { try fd.close() } catch { throw ioError("close", tmp, error) }
        } catch {
            try? fd.close()
            unlink(tmp.string)
            throw error
        }
        guard rename(tmp.string, destination.string) == 0 else {
            let e = lastError("rename temp file onto", destination)
            unlink(tmp.string)
            throw e
        }
        DurabilityLog.note(.rename(from: tmp.string, to: destination.string))
        try syncDirectory(destination.removingLastComponent())
    }

    /// Writes `bytes` to `fd` entirely.
    static func writeAll(_ fd: FileDescriptor, _ bytes: [UInt8], path: FilePath) throws(KeychainError) {
        do { _ = try fd.writeAll(bytes) } catch { throw ioError("write", path, error) }
    }

    /// Atomically replaces `destination` with `bytes`.
    static func atomicWrite(_ destination: FilePath, tmpDirectory: FilePath, bytes: [UInt8]) throws(KeychainError) {
        try atomicWrite(destination, tmpDirectory: tmpDirectory) { fd throws(KeychainError) in
            try writeAll(fd, bytes, path: destination)
        }
    }

    /// Removes a file and overwrites its content with zeros (best effort against recovery from the
    /// same blocks), then fsyncs its directory. `false` if it did not exist.
    ///
    /// The file is unlinked *before* it is overwritten, through a descriptor opened first: if the
    /// directory cannot be written (read-only directory or file system) the unlink fails and the
    /// file is untouched, and a crash in between leaves the file gone rather than zeroed in place
    /// (which would read back as a damaged item).
    @discardableResult
    static func wipeAndRemove(_ path: FilePath) throws(KeychainError) -> Bool {
        let fd: FileDescriptor
        do {
            fd = try FileDescriptor.open(path, .writeOnly, options: [.noFollow, .closeOnExec])
        } catch let e as Errno where e == .noSuchFileOrDirectory {
            return false
        } catch { throw ioError("open for wiping", path, error) }
        guard unlink(path.string) == 0 || errno == ENOENT else {
            let e = lastError("remove", path)
            try? fd.close()
            throw e
        }
        DurabilityLog.note(.unlink(path.string))
        var st = stat()
        if fstat(fd.rawValue, &st) == 0, st.st_size > 0 {
            _ = try? fd.writeAll(toAbsoluteOffset: 0, [UInt8](repeating: 0, count: Int(st.st_size)))
            _ = fsync(fd.rawValue)
        }
        try? fd.close()
        try syncDirectory(path.removingLastComponent())
        return true
    }

    /// Removes every leftover temp file of an interrupted write in `directory`; returns how many.
    func cleanTemporaryFiles(in directory: FilePath) throws(KeychainError) -> Int {
        var removed = 0
        for name in try list(directory) where name.hasPrefix(".tmp-") {
            if unlink(directory.appending(name).string) == 0 { removed += 1 }
        }
        if removed > 0 { try StoreIO.syncDirectory(directory) }
        return removed
    }
}

/// An exclusive advisory lock (`flock`) on a lock file, released when closed or when the process dies.
///
/// `flock` locks belong to the open file description, so two stores in one process also exclude
/// each other, and a SIGKILLed holder never leaves the lock behind.
enum FileLock {
    /// How long a waiter sleeps between two tries of the lock.
    static let pollInterval: Duration = .milliseconds(2)

    /// Runs `body` holding the exclusive lock on `path` (created 0600 if missing). Without a
    /// `timeout` it waits as long as needed; with one it tries the lock without blocking every
    /// `pollInterval` and throws `busy` when another process still holds it at the deadline (a
    /// stuck holder then costs the caller `timeout`, not its whole deadline).
    static func withExclusiveLock<R>(_ path: FilePath, timeout: Duration? = nil,
                                     _ body: () throws(KeychainError) -> R) throws(KeychainError) -> R {
        let fd: FileDescriptor
        do {
            fd = try FileDescriptor.open(path, .readWrite, options: [.create, .noFollow, .closeOnExec], permissions: [.ownerReadWrite])
        } catch { throw StoreIO.ioError("open lock file", path, error) }
        defer { try? fd.close() }  // closing the descriptor releases the lock
        let clock = ContinuousClock()
        let deadline = timeout.map { clock.now + $0 }
        while flock(fd.rawValue, deadline == nil ? LOCK_EX : LOCK_EX | LOCK_NB) != 0 {
            let code = errno
            if code == EINTR { continue }
            if code == EWOULDBLOCK, let deadline, let timeout {
                guard clock.now < deadline else { throw .busy(path: path.string, waited: timeout) }
                let (seconds, attoseconds) = pollInterval.components
                usleep(useconds_t(seconds * 1_000_000 + attoseconds / 1_000_000_000_000))
                continue
            }
            throw .io(operation: "lock", path: path.string, errno: code)
        }
        return try body()
    }
}
