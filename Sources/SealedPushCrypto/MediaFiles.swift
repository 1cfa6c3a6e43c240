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
    /// What was being done (`create`, `open`, `read`, `write`, `close`).
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
/// Not `Sendable`: one task writes it. Closed when released if `close()` was not called.
public final class MediaFileWriter {
    /// The file's path.
    public let path: String
    private var descriptor: Int32

    /// Creates `path` (which must not exist) with permissions `mode` (e.g. `0o600`).
    public init(creating path: String, mode: UInt32) throws(MediaFileError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode_t(mode))
        guard fd >= 0 else { throw MediaFileError(operation: "create", path: path, code: errno) }
        self.path = path
        descriptor = fd
    }

    /// Appends `bytes` (all of them, retrying short writes).
    public func write(_ bytes: [UInt8]) throws(MediaFileError) {
        guard descriptor >= 0 else { throw MediaFileError(operation: "write", path: path, code: EBADF) }
        var done = 0
        let fd = descriptor
        let failure: Int32? = bytes.withUnsafeBytes { buffer -> Int32? in
            while done < buffer.count {
                let n = systemWrite(fd, buffer.baseAddress! + done, buffer.count - done)
                if n < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                done += n
            }
            return nil
        }
        if let failure { throw MediaFileError(operation: "write", path: path, code: failure) }
    }

    /// Closes the file.
    public func close() throws(MediaFileError) {
        guard descriptor >= 0 else { return }
        let fd = descriptor
        descriptor = -1
        if systemClose(fd) != 0 { throw MediaFileError(operation: "close", path: path, code: errno) }
    }

    /// Closes the file (if open) and removes it.
    public func remove() {
        try? close()
        _ = unlink(path)
    }

    /// Closes the file and renames it to `finalPath` (in the same directory, so the name changes atomically);
    /// on failure the file is removed.
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

    deinit { if descriptor >= 0 { _ = systemClose(descriptor) } }
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
