#if canImport(UserNotifications)
public import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking   // Linux: the stand-in's FileManager.containerURL(forSecurityApplicationGroupIdentifier:)
#endif
#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#endif

/// The iOS data protection class a file of an app group store is created with.
///
/// Every file is given its class explicitly when it is created (`Data.WritingOptions`, which Foundation applies
/// at `open`), never through the directory's or the app's default: with the entitlement
/// `com.apple.developer.default-data-protection` set to `NSFileProtectionComplete`, a file made without an
/// explicit class could not be opened while the phone is locked, and every message would show `(Encrypted)`.
public enum AppGroupFileProtection: String, Sendable, Equatable, CaseIterable {
    /// `FileProtectionType.completeUntilFirstUserAuthentication` (class C, "until first unlock"): readable while
    /// the phone is locked, but only once it was unlocked after it started.
    case completeUntilFirstUserAuthentication
    /// `FileProtectionType.none` (class D): readable at any time, before the first unlock too.
    case noProtection

    /// Foundation's `FileProtectionType` of this class (`FileAttributeKey.protectionKey`).
    public var fileProtectionType: FileProtectionType {
        switch self {
        case .completeUntilFirstUserAuthentication: return .completeUntilFirstUserAuthentication
        case .noProtection: return .none
        }
    }

    /// The `Data.WritingOptions` member that makes `Data.write(to:options:)` create a file of this class.
    public var writingOption: Data.WritingOptions {
        switch self {
        case .completeUntilFirstUserAuthentication: return .completeFileProtectionUntilFirstUserAuthentication
        case .noProtection: return .noFileProtection
        }
    }
}

/// Why an app group store could not do what it was asked, and what to do. Errors name a store's file by its
/// name only (never the container's path, which holds a per-install identifier) and never an id or token.
public enum AppGroupStoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// `FileManager.containerURL(forSecurityApplicationGroupIdentifier:)` returned `nil`.
    case containerUnavailable
    /// The file could not be opened in the phone's current lock state (`EPERM`/`EACCES`: its protection class
    /// is not available yet, i.e. before the first unlock since the phone started).
    case protectedDataUnavailable(file: String)
    /// Another process (the app or another extension) held the file's lock longer than the store waits.
    case lockTimeout(file: String, milliseconds: Int)
    /// The file is not as this version writes it (damaged, or written by something else).
    case damaged(file: String)
    /// A system call failed with `errno`.
    case io(operation: String, file: String, errno: Int32)
    /// An entry is not bounded as the store requires; the text says how.
    case invalidEntry(String)

    /// What happened, and what to do.
    public var description: String {
        switch self {
        case .containerUnavailable:
            return "the app group container could not be found (containerURL(forSecurityApplicationGroupIdentifier:) returned nil): "
                + "add the App Groups capability with this group to the app and to every extension that uses the store"
        case let .protectedDataUnavailable(file):
            return "\(file) cannot be opened in the phone's current lock state (its data protection class is not available before "
                + "the first unlock since the phone started); nothing was changed: use the store again after the user unlocks"
        case let .lockTimeout(file, milliseconds):
            return "\(file) stayed locked by another process (the app or another extension) for more than \(milliseconds) ms; "
                + "nothing was changed: try again later"
        case let .damaged(file):
            return "\(file) is not as this version writes it (damaged, or written by something else); the store replaces it "
                + "at its next change and logs what was lost"
        case let .io(operation, file, code):
            return "could not \(operation) \(file): \(String(cString: strerror(code))) (errno \(code)); check that the app group "
                + "container is writable and the phone has free space"
        case let .invalidEntry(why):
            return "\(why); it was not stored"
        }
    }
}

/// Where the stores live in an app group container.
public enum AppGroupContainer {
    /// The directory the stores use inside the container when made with `appGroup:` (`SealedPush`).
    public static let directoryName = "SealedPush"

    /// `SealedPush` in the container of the app group `groupIdentifier` (the `group.` identifier of the App Groups
    /// capability), which the app and its extensions share. Throws `containerUnavailable` when the process's
    /// entitlement does not list the group.
    public static func directory(groupIdentifier: String) throws(AppGroupStoreError) -> URL {
        try directory(groupIdentifier: groupIdentifier, files: SystemAppGroupFiles())
    }

    static func directory(groupIdentifier: String, files: any AppGroupFileSystem) throws(AppGroupStoreError) -> URL {
        guard let container = files.containerURL(forSecurityApplicationGroupIdentifier: groupIdentifier) else {
            throw .containerUnavailable
        }
        return container.appendingPathComponent(directoryName, isDirectory: true)
    }
}

/// What reading a store's file found.
enum StoredBytes: Equatable {
    /// No such file (a store not used yet).
    case missing
    /// The file's bytes.
    case bytes([UInt8])
    /// The file is larger than the store ever writes: not read.
    case oversized
}

/// The seam between the app group stores and the platform: the calls whose behaviour is Apple's (the container,
/// protection classes at creation) and the file reads, so tests observe the class every file is created with and
/// make calls fail. `SystemAppGroupFiles` is the one apps use.
protocol AppGroupFileSystem: Sendable {
    /// `FileManager.default.containerURL(forSecurityApplicationGroupIdentifier:)`.
    func containerURL(forSecurityApplicationGroupIdentifier groupIdentifier: String) -> URL?
    /// Makes `url` (and missing parents) a directory, `0700`, whose default class is `protection`; no error if it exists.
    func createDirectory(at url: URL, protection: AppGroupFileProtection) throws(AppGroupStoreError)
    /// Creates an empty file at `url` whose protection class is `protection`, set when it is created; fails if
    /// something is already there.
    func createFile(at url: URL, protection: AppGroupFileProtection) throws(AppGroupStoreError)
    /// Reads `url` whole, or answers `oversized` without reading when it is longer than `maximumBytes`.
    func read(_ url: URL, maximumBytes: Int) throws(AppGroupStoreError) -> StoredBytes
}

/// The app group file system of Apple's Foundation: `FileManager.containerURL(forSecurityApplicationGroupIdentifier:)`,
/// directories made with `FileAttributeKey.protectionKey`, files created by `Data.write(to:options:)` with
/// `.withoutOverwriting` and the class's writing option (Foundation passes the class to `open`, so the file never
/// exists without it). On Linux the same calls compile against swift-corelibs-foundation, which has the classes'
/// names and ignores them, and the stand-in container lookup.
struct SystemAppGroupFiles: AppGroupFileSystem {
    func containerURL(forSecurityApplicationGroupIdentifier groupIdentifier: String) -> URL? {
        FileManager.default.containerURL(forSecurityApplicationGroupIdentifier: groupIdentifier)
    }

    func createDirectory(at url: URL, protection: AppGroupFileProtection) throws(AppGroupStoreError) {
        let existed = FileManager.default.fileExists(atPath: url.path)
        if !existed { try DataProtection.check(.create, url.path, creating: protection) }
        defer { if !existed { DataProtection.created(url.path, protection: protection) } }
        do {
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true,
                                                    attributes: [.protectionKey: protection.fileProtectionType, .posixPermissions: 0o700])
        } catch {
            throw AppGroupStoreError.from(error, operation: "make the directory", file: url.lastPathComponent)
        }
    }

    func createFile(at url: URL, protection: AppGroupFileProtection) throws(AppGroupStoreError) {
        try DataProtection.check(.create, url.path, creating: protection)
        do {
            try Data().write(to: url, options: [.withoutOverwriting, protection.writingOption])
            DataProtection.created(url.path, protection: protection)
        } catch {
            throw AppGroupStoreError.from(error, operation: "create", file: url.lastPathComponent)
        }
    }

    func read(_ url: URL, maximumBytes: Int) throws(AppGroupStoreError) -> StoredBytes {
        try PosixFiles.read(url, maximumBytes: maximumBytes)
    }
}

extension AppGroupStoreError {
    /// The error of a failed POSIX call on `file`: `EPERM`/`EACCES` is the lock state (a data-protected file whose
    /// class is not available), anything else an I/O error.
    static func posix(_ code: Int32, operation: String, file: String) -> AppGroupStoreError {
        code == EPERM || code == EACCES ? .protectedDataUnavailable(file: file) : .io(operation: operation, file: file, errno: code)
    }

    /// The error of a failed Foundation call on `file`, from the POSIX error underneath when there is one.
    static func from(_ error: any Error, operation: String, file: String) -> AppGroupStoreError {
        let ns = error as NSError
        var code: Int32 = EIO
        if let posix = error as? POSIXError {
            code = posix.code.rawValue
        } else if let underlying = ns.userInfo[NSUnderlyingErrorKey] as? POSIXError {
            code = underlying.code.rawValue
        } else if let underlying = ns.userInfo[NSUnderlyingErrorKey] as? NSError, underlying.domain == NSPOSIXErrorDomain {
            code = Int32(truncatingIfNeeded: underlying.code)
        } else if ns.domain == NSPOSIXErrorDomain {
            code = Int32(truncatingIfNeeded: ns.code)
        } else if ns.domain == NSCocoaErrorDomain, ns.code == CocoaError.fileWriteFileExists.rawValue {
            code = EEXIST
        } else if ns.domain == NSCocoaErrorDomain, ns.code == CocoaError.fileWriteNoPermission.rawValue {
            code = EPERM
        }
        return posix(code, operation: operation, file: file)
    }
}

/// The POSIX half of the stores' file handling, the same on every platform.
enum PosixFiles {
    /// Reads `url` whole (`O_NOFOLLOW`), or `oversized` when it is longer than `maximumBytes` or not a regular file
    /// (`O_NONBLOCK`: a FIFO put in its place is not waited on).
    static func read(_ url: URL, maximumBytes: Int) throws(AppGroupStoreError) -> StoredBytes {
        let name = url.lastPathComponent
        let fd = open(url.path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else {
            if errno == ENOENT { return .missing }
            throw .posix(errno, operation: "open", file: name)
        }
        defer { close(fd) }
        try DataProtection.check(.read, url.path)
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw .posix(errno, operation: "inspect", file: name) }
        guard (info.st_mode & S_IFMT) == S_IFREG else { return .oversized }
        guard Int(info.st_size) <= maximumBytes else { return .oversized }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size) + 1)
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeMutableBytes { buffer in posixRead(fd, buffer.baseAddress! + done, buffer.count - done) }
            if n < 0 {
                if errno == EINTR { continue }
                throw .posix(errno, operation: "read", file: name)
            }
            if n == 0 { break }
            done += n
        }
        // One byte more than the size was asked for: a file that grew past the bound while read is oversized.
        guard done <= maximumBytes else { return .oversized }
        return .bytes(Array(bytes[0..<done]))
    }

    /// Writes all of `bytes` to `fd`.
    static func writeAll(_ fd: Int32, _ bytes: [UInt8], file: String) throws(AppGroupStoreError) {
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { buffer in posixWrite(fd, buffer.baseAddress! + done, buffer.count - done) }
            if n < 0 {
                if errno == EINTR { continue }
                throw .posix(errno, operation: "write", file: file)
            }
            done += n
        }
    }

    /// Flushes `fd` to stable storage: `F_FULLFSYNC` on Apple platforms (an `fsync` there reaches the drive but not
    /// through its cache), falling back to `fsync` where the file system refuses it.
    static func sync(_ fd: Int32) -> Bool {
        #if canImport(Darwin)
        if fcntl(fd, F_FULLFSYNC) == 0 { return true }
        #endif
        return fsync(fd) == 0
    }

    /// Flushes the directory `url`'s entries (a rename in it) to stable storage.
    static func syncDirectory(_ url: URL, file: String) throws(AppGroupStoreError) {
        let fd = open(url.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw .posix(errno, operation: "open the directory of", file: file) }
        defer { close(fd) }
        guard sync(fd) else { throw .posix(errno, operation: "sync the directory of", file: file) }
    }
}

#if canImport(Darwin)
private func posixRead(_ fd: Int32, _ buffer: UnsafeMutableRawPointer, _ count: Int) -> Int { Darwin.read(fd, buffer, count) }
private func posixWrite(_ fd: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int { Darwin.write(fd, buffer, count) }
#else
private func posixRead(_ fd: Int32, _ buffer: UnsafeMutableRawPointer, _ count: Int) -> Int { Glibc.read(fd, buffer, count) }
private func posixWrite(_ fd: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int { Glibc.write(fd, buffer, count) }
#endif

/// One file of an app group store: read without a lock (every change is an atomic rename, so a reader sees a whole
/// old or a whole new file), changed under the file's own lock.
///
/// **Writes.** A change writes a new file next to the old one — created empty with the store's protection class
/// (`AppGroupFileSystem.createFile`), then the bytes, `F_FULLFSYNC` (`fsync` on Linux), `rename` over the old file and
/// a sync of the directory — so a crash at any point leaves the old or the new file, whole, and the new file has its
/// class from its first byte. Temporary files a killed writer left are removed by the next change, under the lock.
///
/// **Cross-process safety: `flock` on `<file>.lock`, not `NSFileCoordinator`.** The app and its extensions are
/// separate processes. A `flock` is a few system calls with a bounded wait (`LOCK_NB` polled until `lockTimeout`,
/// so a stuck holder costs an extension at most that much of its budget), it is released by the kernel when the
/// holder dies, and it is held only inside one synchronous read-modify-write that never awaits — iOS ends a
/// suspended process that holds a file lock in a shared container (`0xdead10cc`), and nothing here can be suspended
/// while holding one (call the stores before the content handler, never after). `NSFileCoordinator` has no
/// mechanism for a process suspended mid-coordination (Apple's TN2408, which recommends "atomic safe save operations
/// on flat files" for extensions instead — what this does), waits without a bound on other processes, and does not
/// exist in Linux's Foundation, so none of it could be tested here. The lock file holds no data and is made with
/// protection `none`, so taking the lock never depends on the lock state.
struct AppGroupFile: Sendable {
    /// The file.
    let url: URL
    /// The class each new version of the file is created with.
    let protection: AppGroupFileProtection
    /// The platform seam.
    let files: any AppGroupFileSystem
    /// The longest a change waits for another process's lock.
    let lockTimeout: Duration

    /// The file's name (what errors and logs say).
    var name: String { url.lastPathComponent }
    /// The directory holding the file, its lock and its temporary files.
    var directory: URL { url.deletingLastPathComponent() }
    /// The lock file.
    var lockURL: URL { directory.appendingPathComponent(name + ".lock") }
    /// The prefix of the file's temporary files.
    var temporaryPrefix: String { "." + name + ".tmp-" }

    /// The file as it is now, without taking the lock.
    func read(maximumBytes: Int) throws(AppGroupStoreError) -> StoredBytes {
        try files.read(url, maximumBytes: maximumBytes)
    }

    /// Runs `change` on the file's current contents under its lock; when `change` returns bytes, they replace the file
    /// durably before the lock is released. Nothing in `change` may wait on anything but the file system.
    func update<R>(maximumBytes: Int, _ change: (StoredBytes) throws(AppGroupStoreError) -> (write: [UInt8]?, result: R)) throws(AppGroupStoreError) -> R {
        try withLock { () throws(AppGroupStoreError) -> R in
            let (bytes, result) = try change(try files.read(url, maximumBytes: maximumBytes))
            if let bytes { try replace(with: bytes) }
            return result
        }
    }

    /// Runs `body` holding the exclusive `flock` of `lockURL`, waiting at most `lockTimeout` for it.
    func withLock<R>(_ body: () throws(AppGroupStoreError) -> R) throws(AppGroupStoreError) -> R {
        var fd = open(lockURL.path, O_RDWR | O_NOFOLLOW | O_CLOEXEC)
        if fd < 0, errno == ENOENT {
            try files.createDirectory(at: directory, protection: .noProtection)
            do { try files.createFile(at: lockURL, protection: .noProtection) } catch {
                // Another process made it first: open it below; anything else fails there.
            }
            fd = open(lockURL.path, O_RDWR | O_NOFOLLOW | O_CLOEXEC)
        }
        guard fd >= 0 else { throw .posix(errno, operation: "open the lock of", file: name) }
        defer { close(fd) }   // closing the descriptor also releases the lock
        try DataProtection.check(.lock, lockURL.path)
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: lockTimeout)
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let code = errno
            guard code == EWOULDBLOCK || code == EAGAIN || code == EINTR else { throw .posix(code, operation: "lock", file: name) }
            guard clock.now < deadline else {
                let (seconds, attoseconds) = lockTimeout.components
                throw .lockTimeout(file: name, milliseconds: Int(seconds) * 1000 + Int(attoseconds / 1_000_000_000_000_000))
            }
            usleep(2000)
        }
        defer { flock(fd, LOCK_UN) }
        return try body()
    }

    /// Replaces the file with `bytes` (the caller holds the lock): a new file of the store's class, synced, renamed
    /// over the old one, the directory synced.
    func replace(with bytes: [UInt8]) throws(AppGroupStoreError) {
        try files.createDirectory(at: directory, protection: .noProtection)
        removeStaleTemporaries()
        let suffix = String(UInt64.random(in: .min ... .max), radix: 16)
        let temporary = directory.appendingPathComponent(temporaryPrefix + suffix)
        try files.createFile(at: temporary, protection: protection)
        var renamed = false
        defer { if !renamed { unlink(temporary.path) } }
        let fd = open(temporary.path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw .posix(errno, operation: "open a new version of", file: name) }
        var closed = false
        defer { if !closed { close(fd) } }
        _ = fchmod(fd, 0o600)
        try DataProtection.check(.write, temporary.path)
        try PosixFiles.writeAll(fd, bytes, file: name)
        try DataProtection.check(.fsync, temporary.path)
        guard PosixFiles.sync(fd) else { throw .posix(errno, operation: "sync", file: name) }
        closed = true
        guard close(fd) == 0 else { throw .posix(errno, operation: "close", file: name) }
        try DataProtection.check(.rename, url.path)
        guard rename(temporary.path, url.path) == 0 else { throw .posix(errno, operation: "rename a new version over", file: name) }
        renamed = true
        DataProtection.created(url.path, protection: protection)   // the class moved with the file
        try PosixFiles.syncDirectory(directory, file: name)
    }

    /// Removes this file's temporary files that a writer killed mid-change left (the caller holds the lock, so no
    /// writer of this file is running).
    func removeStaleTemporaries() {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path) else { return }
        for stale in names where stale.hasPrefix(temporaryPrefix) {
            unlink(directory.appendingPathComponent(stale).path)
        }
    }
}
#endif
