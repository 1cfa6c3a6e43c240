#if canImport(Clibsodium)
import Clibsodium  // iOS and macOS, AppleSodium trait: swift-sodium's libsodium
#elseif canImport(CSodium)
import CSodium  // Linux: the system libsodium
#endif  // neither: Sodium.swift stops the build with #error, naming the AppleSodium trait
#if canImport(Glibc)
import Glibc
private func readBytes(_ fd: Int32, _ p: UnsafeMutableRawPointer, _ n: Int) -> Int { Glibc.read(fd, p, n) }
private func closeFile(_ fd: Int32) { _ = Glibc.close(fd) }
#elseif canImport(Darwin)
import Darwin
private func readBytes(_ fd: Int32, _ p: UnsafeMutableRawPointer, _ n: Int) -> Int { Darwin.read(fd, p, n) }
private func closeFile(_ fd: Int32) { _ = Darwin.close(fd) }
#endif

/// Why a private key file cannot be read.
public enum PrivateFileProblem: Error, Sendable, Equatable {
    /// There is no such file, or it cannot be opened (`errno`).
    case unreadable(errno: Int32)
    /// The path is a symbolic link (never followed for a key file).
    case symbolicLink
    /// The path is not a regular file (a directory, a device, a FIFO…).
    case notRegularFile(isDirectory: Bool)
    /// Another user owns the file (`owner`), not the one running this process.
    case notOwner(owner: UInt32)
    /// Group or others have some access (`mode`: the permission bits).
    case accessibleByOthers(mode: UInt32)
    /// The file is longer than `limit` bytes (a key file is small).
    case tooLarge(limit: Int)
    /// Reading failed (`errno`).
    case readFailed(errno: Int32)
}

/// Reads small secret files — a private key — the way every key SealedPush reads is read: opened once with
/// `O_NOFOLLOW` (no symlink), checked on the open descriptor (a regular file, owned by this process's user, no
/// group or other access: `chmod 600`), and read from that same descriptor into wiped storage, so the
/// file checked is the file read and no copy of the secret outlives its use.
public enum PrivateFile {
    /// The bytes of the private file at `path` (at most `limit` bytes), in `SecureBytes`.
    public static func read(_ path: String, limit: Int = 64 * 1024) throws(PrivateFileProblem) -> SecureBytes {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
        guard fd >= 0 else {
            let code = errno
            throw code == ELOOP ? .symbolicLink : .unreadable(errno: code)
        }
        defer { closeFile(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw .unreadable(errno: errno) }
        let kind = UInt32(info.st_mode) & UInt32(S_IFMT)
        guard kind == UInt32(S_IFREG) else { throw .notRegularFile(isDirectory: kind == UInt32(S_IFDIR)) }
        guard UInt32(info.st_uid) == UInt32(geteuid()) else { throw .notOwner(owner: UInt32(info.st_uid)) }
        let mode = UInt32(info.st_mode) & 0o7777
        guard mode & 0o077 == 0 else { throw .accessibleByOthers(mode: mode) }
        guard Int(info.st_size) <= limit else { throw .tooLarge(limit: limit) }
        do { return try readAll(fd, limit: limit) } catch { throw error.code == 0 ? .tooLarge(limit: limit) : .readFailed(errno: error.code) }
    }

    /// The read of an open descriptor failed (`code`: errno), or it held more than the limit (`code` 0).
    struct ReadFailure: Error { let code: Int32 }

    /// Every byte of `fd` (at most `limit`), into wiped storage.
    static func readAll(_ fd: Int32, limit: Int) throws(ReadFailure) -> SecureBytes {
        // One byte more than the limit, to notice a file that grew after fstat.
        var buffer = SecureBytes(zeros: limit + 1)
        var total = 0
        var failure: Int32?
        buffer.withUnsafeMutableBytes { bytes in
            while total < bytes.count {
                let n = readBytes(fd, bytes.baseAddress! + total, bytes.count - total)
                if n < 0 {
                    if errno == EINTR { continue }
                    failure = errno
                    return
                }
                if n == 0 { return }
                total += n
            }
        }
        if let failure { throw ReadFailure(code: failure) }
        guard total <= limit else { throw ReadFailure(code: 0) }
        return buffer.slice(0..<total)
    }

    /// How a mounted secret file was shared when `readSecret` read it.
    public struct SecretAccess: Sendable, Equatable {
        /// Its permission bits.
        public let mode: UInt32
        /// Whether another user owns it (read through the group's or the owner's grant, never writable by this user).
        public let ownedByAnotherUser: Bool
        /// Whether its group may read or write it (a warning, not a refusal: a secret mounted for the service's group).
        public var groupAccess: Bool { mode & 0o070 != 0 }
    }

    /// Why a mounted secret file cannot be used.
    public enum SecretProblem: Error, Sendable, Equatable {
        /// There is no such file, or it cannot be opened (`errno`).
        case unreadable(errno: Int32)
        /// The path is not a regular file (a directory, a device, a FIFO…).
        case notRegularFile(isDirectory: Bool)
        /// Any user may read or write it (`mode`: the permission bits).
        case accessibleByOthers(mode: UInt32)
        /// Another user (`owner`) owns it and this process may write it (through its group).
        case writableByThisUser(owner: UInt32, mode: UInt32)
        /// It is longer than `limit` bytes.
        case tooLarge(limit: Int)
        /// Reading failed (`errno`).
        case readFailed(errno: Int32)
    }

    /// The bytes of a secret a service is given (an APNs key, a service account, a VAPID key, a password), in
    /// `SecureBytes`, with how the file is shared: the rule of gateway v1 §1 for mounted secrets. The file is opened
    /// once — a symbolic link is followed, as a Kubernetes or systemd-credentials mount makes one — and everything is
    /// checked on the open descriptor (`fstat`) and read from it, so nothing can be swapped between the check and the
    /// read. Refused: anything but a regular file, any access for other users, and a file owned by another user that
    /// this process could write. Group access is reported (`SecretAccess.groupAccess`), for a warning.
    public static func readSecret(_ path: String, limit: Int = 64 * 1024) throws(SecretProblem) -> (bytes: SecureBytes, access: SecretAccess) {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
        guard fd >= 0 else { throw .unreadable(errno: errno) }
        defer { closeFile(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw .unreadable(errno: errno) }
        let kind = UInt32(info.st_mode) & UInt32(S_IFMT)
        guard kind == UInt32(S_IFREG) else { throw .notRegularFile(isDirectory: kind == UInt32(S_IFDIR)) }
        let mode = UInt32(info.st_mode) & 0o7777
        guard mode & 0o007 == 0 else { throw .accessibleByOthers(mode: mode) }
        let owner = UInt32(info.st_uid)
        let another = owner != UInt32(geteuid())
        if another, mode & 0o020 != 0, isMember(ofGroup: UInt32(info.st_gid)) { throw .writableByThisUser(owner: owner, mode: mode) }
        guard Int(info.st_size) <= limit else { throw .tooLarge(limit: limit) }
        do {
            return (try readAll(fd, limit: limit), SecretAccess(mode: mode, ownedByAnotherUser: another))
        } catch {
            throw error.code == 0 ? .tooLarge(limit: limit) : .readFailed(errno: error.code)
        }
    }

    /// Whether this process's effective or supplementary groups include `group`.
    static func isMember(ofGroup group: UInt32) -> Bool {
        if UInt32(getegid()) == group { return true }
        var groups = [gid_t](repeating: 0, count: 256)
        let n = getgroups(Int32(groups.count), &groups)
        return n > 0 && groups.prefix(Int(n)).contains { UInt32($0) == group }
    }
}

/// Reads the PEM armour of a private key without copying the secret out of wiped storage.
public enum PEM {
    /// Why a PEM block could not be read.
    public enum Problem: Error, Sendable, Equatable {
        /// No `-----BEGIN <label>-----` … `-----END <label>-----` block.
        case noBlock
        /// The text between the lines is not base64.
        case invalidBase64
    }

    /// The DER bytes of the first `label` block in `text` (e.g. `PRIVATE KEY` for PKCS#8), in `SecureBytes`:
    /// the base64 between the lines, whitespace dropped, decoded strictly.
    public static func decode(_ text: SecureBytes, label: String) throws(Problem) -> SecureBytes {
        let begin = Array("-----BEGIN \(label)-----".utf8), end = Array("-----END \(label)-----".utf8)
        return try text.withSpan { span throws(Problem) -> SecureBytes in
            guard let start = find(begin, in: span, from: 0), let stop = find(end, in: span, from: start + begin.count) else {
                throw .noBlock
            }
            var body = SecureBytes(zeros: stop - start - begin.count)
            var count = 0
            body.withUnsafeMutableBytes { out in
                for i in (start + begin.count)..<stop where span[i] > 0x20 {
                    out[count] = span[i]
                    count += 1
                }
            }
            guard count > 0, count % 4 == 0 else { throw .invalidBase64 }
            var der = SecureBytes(zeros: count / 4 * 3)
            var written = 0
            let rc = body.withUnsafeBytes { input in
                der.withUnsafeMutableBytes { output in
                    sodium_base642bin(output.baseAddress!.assumingMemoryBound(to: UInt8.self), output.count,
                                      input.baseAddress!.assumingMemoryBound(to: CChar.self), count, nil, &written, nil,
                                      sodium_base64_VARIANT_ORIGINAL)
                }
            }
            guard rc == 0 else { throw .invalidBase64 }
            return der.slice(0..<written)
        }
    }

    static func find(_ needle: [UInt8], in haystack: Span<UInt8>, from: Int) -> Int? {
        guard haystack.count >= needle.count, from <= haystack.count - needle.count else { return nil }
        outer: for i in from...(haystack.count - needle.count) {
            for j in 0..<needle.count where haystack[i + j] != needle[j] { continue outer }
            return i
        }
        return nil
    }
}
