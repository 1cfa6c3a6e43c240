#if canImport(Clibsodium)
import Clibsodium  // iOS and macOS, AppleSodium trait: swift-sodium's libsodium
#elseif canImport(CSodium)
import CSodium  // Linux: the system libsodium
#endif  // neither: Sodium.swift stops the build with #error, naming the AppleSodium trait
import Dispatch
import Synchronization
#if canImport(Glibc)
import Glibc
private func systemWrite(_ fd: Int32, _ p: UnsafeRawPointer, _ n: Int) -> Int { Glibc.write(fd, p, n) }
private func systemRead(_ fd: Int32, _ p: UnsafeMutableRawPointer, _ n: Int) -> Int { Glibc.read(fd, p, n) }
private func systemClose(_ fd: Int32) -> Int32 { Glibc.close(fd) }
#elseif canImport(Darwin)
import Darwin
private func systemWrite(_ fd: Int32, _ p: UnsafeRawPointer, _ n: Int) -> Int { Darwin.write(fd, p, n) }
private func systemRead(_ fd: Int32, _ p: UnsafeMutableRawPointer, _ n: Int) -> Int { Darwin.read(fd, p, n) }
private func systemClose(_ fd: Int32) -> Int32 { Darwin.close(fd) }
#endif

/// Why a media file could not be opened, read or written; carries the path and `errno`, never content.
public struct MediaFileError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What was being done (`create`, `open`, `read`, `write`, `sync`, `close`, `rename`).
    public let operation: String
    /// The file's path.
    public let path: String
    /// The system error number.
    public let code: Int32

    /// Whether opening failed because the path is a symbolic link and links were not followed.
    public var isSymbolicLink: Bool { operation == "open" && code == ELOOP }
    /// Whether opening failed because the path is not a regular file (a directory, a FIFO, a device…).
    public var isNotRegularFile: Bool { operation == "open" && (code == EISDIR || code == EINVAL) }

    /// `operation path: strerror`.
    public var description: String { "cannot \(operation) \(path): \(String(cString: strerror(code)))" }
}

/// A file created for one media object or attachment and written in pieces, without Foundation (which the
/// extension modules do not link): `open(O_CREAT | O_EXCL | O_NOFOLLOW)` with the given mode, so nothing is
/// overwritten and no symbolic link is followed.
///
/// With a `bufferSize`, bytes are gathered in page-aligned buffers of that size (wiped when released) and
/// written with one `write` per full buffer; `flush()`, `synchronize()`, `close()` and `commit(renamingTo:)`
/// write what they hold, `remove()` drops it unwritten. A `MediaObjectDecryptor` decrypts straight into the
/// buffer (`consume(_:into:)`). With `buffers` above 1, a full buffer is written on a serial dispatch queue
/// while the caller fills the next one; the caller waits only when every buffer is full or being written
/// (so the file is written at the disk's pace, with at most `buffers · bufferSize` bytes held), and a failed
/// write is reported by the next call. Without a buffer (the default), every `write` goes to the file at once.
///
/// Not `Sendable`: one task writes it. Closed when released if `close()` was not called.
public final class MediaFileWriter {
    /// The file's path.
    public let path: String
    /// The first bytes of the file (at most the `keepingFirst` it was made with), kept as they are given.
    public private(set) var firstBytes: [UInt8] = []
    /// The number of bytes given so far (written, being written, or in a buffer).
    public private(set) var bytesGiven = 0
    private var descriptor: Int32
    private let keepingFirst: Int
    private let buffers: [UnsafeMutableRawBufferPointer]
    private var current = 0
    private var filled = 0
    private let background: BackgroundWrites?

    /// The alignment of each buffer (a page).
    static let pageAlignment = 4096

    /// Creates `path` (which must not exist) with permissions `mode` (e.g. `0o600`), writing through
    /// `buffers` buffers of `bufferSize` bytes when `bufferSize` is above 0 (in the background when `buffers`
    /// is above 1), and keeping the file's first `keepingFirst` bytes in `firstBytes`.
    public init(creating path: String, mode: UInt32, bufferSize: Int = 0, buffers: Int = 1, keepingFirst: Int = 0) throws(MediaFileError) {
        precondition(bufferSize >= 0 && keepingFirst >= 0 && buffers >= 1, "a buffer size, count or kept length out of range")
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode_t(mode))
        guard fd >= 0 else { throw MediaFileError(operation: "create", path: path, code: errno) }
        self.path = path
        self.keepingFirst = keepingFirst
        descriptor = fd
        self.buffers = bufferSize == 0 ? [] : (0..<buffers).map { _ in
            let base = UnsafeMutableRawPointer.allocate(byteCount: bufferSize, alignment: Self.pageAlignment)
            base.initializeMemory(as: UInt8.self, repeating: 0, count: bufferSize)
            return UnsafeMutableRawBufferPointer(start: base, count: bufferSize)
        }
        background = bufferSize > 0 && buffers > 1 ? BackgroundWrites(buffers: buffers) : nil
    }

    /// Appends `bytes` (all of them, retrying short writes).
    public func write(_ bytes: [UInt8]) throws(MediaFileError) {
        var failure: MediaFileError?
        bytes.withUnsafeBytes { b in
            do throws(MediaFileError) { try append(b) } catch { failure = error }
        }
        if let failure { throw failure }
    }

    /// Appends `bytes`: into the buffer, written out each time it fills, or straight to the file without one.
    func append(_ bytes: UnsafeRawBufferPointer) throws(MediaFileError) {
        guard descriptor >= 0 else { throw MediaFileError(operation: "write", path: path, code: EBADF) }
        guard !buffers.isEmpty else {
            keep(bytes)
            return try Self.writeAll(descriptor, bytes, path: path)
        }
        keep(bytes)
        var offset = 0
        while offset < bytes.count {
            let buffer = buffers[current]
            let n = min(buffer.count - filled, bytes.count - offset)
            (buffer.baseAddress! + filled).copyMemory(from: bytes.baseAddress! + offset, byteCount: n)
            filled += n
            offset += n
            if filled == buffer.count { try flush() }
        }
    }

    /// Lends `body` at least `minimum` bytes of the buffer's free space (writing the buffer out first if it
    /// has less) and appends the first bytes of it that `body` returns the count of. Without a buffer, or one
    /// smaller than `minimum`, returns `false` and calls nothing.
    func fill(minimum: Int, _ body: (UnsafeMutableRawBufferPointer) throws -> Int) throws -> Bool {
        guard !buffers.isEmpty, buffers[0].count >= minimum else { return false }
        guard descriptor >= 0 else { throw MediaFileError(operation: "write", path: path, code: EBADF) }
        if buffers[current].count - filled < minimum { try flush() }
        let buffer = buffers[current]
        let free = UnsafeMutableRawBufferPointer(rebasing: buffer[filled...])
        let n = try body(free)
        precondition(n >= 0 && n <= free.count, "a fill appends within the space it was lent")
        keep(UnsafeRawBufferPointer(rebasing: free[0..<n]))
        filled += n
        if filled == buffer.count { try flush() }
        return true
    }

    private func keep(_ bytes: UnsafeRawBufferPointer) {
        if firstBytes.count < keepingFirst { firstBytes += bytes.prefix(keepingFirst - firstBytes.count) }
        bytesGiven += bytes.count
    }

    /// Writes out what the buffer holds (hands it to the background queue when there is one).
    public func flush() throws(MediaFileError) {
        guard descriptor >= 0 else { throw MediaFileError(operation: "write", path: path, code: EBADF) }
        if let background { try background.check(path) }
        guard !buffers.isEmpty, filled > 0 else { return }
        let bytes = UnsafeRawBufferPointer(rebasing: buffers[current][0..<filled])
        filled = 0
        guard let background else { return try Self.writeAll(descriptor, bytes, path: path) }
        // The buffer is the queue's until its write is done; the next one is free once the semaphore says so
        // (writes finish in order, so the one after this is the oldest handed over).
        background.write(descriptor, bytes)
        current = (current + 1) % buffers.count
        background.free.wait()
        try background.check(path)
    }

    /// Writes all of `bytes` at the file's offset, retrying short writes.
    static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, path: String) throws(MediaFileError) {
        if let code = BackgroundWrites.writeAll(fd, bytes) { throw MediaFileError(operation: "write", path: path, code: code) }
    }

    /// Writes out the buffers and waits until the file's data is on the storage device, once: `fdatasync`
    /// (then, on Linux, `POSIX_FADV_DONTNEED`, so the written pages leave the page cache), `fsync` on Apple
    /// platforms.
    public func synchronize() throws(MediaFileError) {
        try flush()
        background?.drain()
        if let background { try background.check(path) }
        #if os(Linux)
        guard fdatasync(descriptor) == 0 else { throw MediaFileError(operation: "sync", path: path, code: errno) }
        _ = posix_fadvise(descriptor, 0, 0, POSIX_FADV_DONTNEED)
        #else
        guard fsync(descriptor) == 0 else { throw MediaFileError(operation: "sync", path: path, code: errno) }
        #endif
    }

    /// Writes out the buffers and closes the file.
    public func close() throws(MediaFileError) {
        guard descriptor >= 0 else { return }
        do {
            try flush()
            background?.drain()
            if let background { try background.check(path) }
        } catch {
            closeDiscarding()
            throw error
        }
        let fd = descriptor
        descriptor = -1
        if systemClose(fd) != 0 { throw MediaFileError(operation: "close", path: path, code: errno) }
    }

    /// Closes the file without writing what the buffers still hold (waiting for a write under way), and
    /// wipes them.
    private func closeDiscarding() {
        background?.discard()
        for buffer in buffers { sodium_memzero(buffer.baseAddress!, buffer.count) }
        filled = 0
        guard descriptor >= 0 else { return }
        _ = systemClose(descriptor)
        descriptor = -1
    }

    /// Closes the file (if open) without writing what the buffers hold, and removes it.
    public func remove() {
        closeDiscarding()
        _ = unlink(path)
    }

    /// Writes out the buffers, closes the file and renames it to `finalPath` (in the same directory, so the
    /// name changes atomically); on failure the file is removed.
    public func commit(renamingTo finalPath: String) throws(MediaFileError) {
        do { try close() } catch {
            _ = unlink(path)
            throw error
        }
        guard rename(path, finalPath) == 0 else {
            let code = errno
            _ = unlink(path)
            throw MediaFileError(operation: "rename", path: path, code: code)
        }
    }

    deinit {
        // No write may still use a buffer or the descriptor once they are released.
        background?.discard()
        if descriptor >= 0 { _ = systemClose(descriptor) }
        for buffer in buffers {
            sodium_memzero(buffer.baseAddress!, buffer.count)
            buffer.deallocate()
        }
    }
}

/// The background half of a `MediaFileWriter` with more than one buffer: a serial queue that writes the
/// buffers handed to it, in order, and signals `free` after each.
private final class BackgroundWrites: @unchecked Sendable {
    // Safe to send: `queue` and `free` are thread-safe, `state` is behind its mutex; the buffers a write
    // reads are not touched by the writer's owner until `free` says that write is done.
    let queue = DispatchQueue(label: "sealedpush.media-file-writer")
    let free: DispatchSemaphore
    private let state = Mutex<(failure: Int32, discarding: Bool)>((0, false))

    init(buffers: Int) { free = DispatchSemaphore(value: buffers - 1) }

    /// Writes `bytes` to `fd` on the queue (unless an earlier write failed or the file is being discarded),
    /// then signals `free`.
    func write(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) {
        let pending = Pending(bytes: bytes)
        queue.async { [self] in
            if state.withLock({ $0.failure == 0 && !$0.discarding }), let code = Self.writeAll(fd, pending.bytes) {
                state.withLock { $0.failure = code }
            }
            free.signal()
        }
    }

    /// Throws the first failed write's error.
    func check(_ path: String) throws(MediaFileError) {
        let code = state.withLock { $0.failure }
        if code != 0 { throw MediaFileError(operation: "write", path: path, code: code) }
    }

    /// Waits until every write handed over is done.
    func drain() { queue.sync {} }

    /// Skips the writes not started yet and waits for the one under way.
    func discard() {
        state.withLock { $0.discarding = true }
        drain()
    }

    /// Writes all of `bytes` at `fd`'s offset (`writeAllBytes`); the `errno` of a failure.
    static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int32? { writeAllBytes(fd, bytes) }

    /// A buffer handed to the queue (the owner leaves it alone until `free` is signalled).
    private struct Pending: @unchecked Sendable {
        let bytes: UnsafeRawBufferPointer
    }
}

/// A regular file read in pieces, without Foundation.
///
/// Not `Sendable`: one task reads it. Closed when released.
public final class MediaFileReader {
    /// The file's path.
    public let path: String
    /// The file's length when it was opened.
    public let size: Int
    private let descriptor: Int32

    /// Opens `path` for reading; it must be a regular file. With `followingSymlinks: false` a symbolic link
    /// as the last component is refused (`ELOOP`) instead of followed. Never blocks on a FIFO.
    public init(path: String, followingSymlinks: Bool = true) throws(MediaFileError) {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | (followingSymlinks ? 0 : O_NOFOLLOW))
        guard fd >= 0 else { throw MediaFileError(operation: "open", path: path, code: errno) }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            let code = errno
            _ = systemClose(fd)
            throw MediaFileError(operation: "open", path: path, code: code)
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            _ = systemClose(fd)
            throw MediaFileError(operation: "open", path: path, code: (info.st_mode & S_IFMT) == S_IFDIR ? EISDIR : EINVAL)
        }
        self.path = path
        size = Int(info.st_size)
        descriptor = fd
    }

    /// Up to `count` next bytes; empty at the end of the file.
    public func read(upTo count: Int) throws(MediaFileError) -> [UInt8] {
        var failure: Int32?
        let fd = descriptor
        let bytes = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            initialized = 0
            while true {
                let n = systemRead(fd, buffer.baseAddress!, count)
                if n < 0 {
                    if errno == EINTR { continue }
                    failure = errno
                    return
                }
                initialized = n
                return
            }
        }
        if let failure { throw MediaFileError(operation: "read", path: path, code: failure) }
        return bytes
    }

    deinit { _ = systemClose(descriptor) }
}

/// Writes all of `bytes` at `fd`'s offset, retrying short and interrupted writes; the `errno` of a failure,
/// `nil` when every byte was written. The one write loop of the crypto module (media files, secure bytes).
func writeAllBytes(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int32? {
    var done = 0
    while done < bytes.count {
        let n = systemWrite(fd, bytes.baseAddress! + done, bytes.count - done)
        if n < 0 {
            if errno == EINTR { continue }
            return errno
        }
        done += n
    }
    return nil
}
