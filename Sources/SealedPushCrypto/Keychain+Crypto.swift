#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `read(2)`, named apart from `SecureBytes.read(fromFileDescriptor:count:)`.
private func posixRead(_ fd: Int32, _ buffer: UnsafeMutableRawPointer, _ count: Int) -> Int { read(fd, buffer, count) }

/// Moving secret bytes between files and `SecureBytes` without an unwiped intermediate copy.
///
/// The keychain store keeps its store key in a 0600 file; reading it straight into secret storage
/// keeps the key out of ordinary arrays. These are the only file-descriptor operations on secrets.
extension SecureBytes {
    /// Reads exactly `count` bytes from the open POSIX file descriptor `fd` into new guarded secret
    /// storage; `nil` if the file ends early or a read fails (the partial bytes are wiped).
    public static func read(fromFileDescriptor fd: Int32, count: Int) -> SecureBytes? {
        precondition(count >= 0, "cannot read a negative number of bytes")
        var out = SecureBytes(zeros: count, guarded: true)
        let ok = out.withUnsafeMutableBytes { buffer -> Bool in
            var done = 0
            while done < count {
                let n = posixRead(fd, buffer.baseAddress! + done, count - done)
                if n < 0 {
                    if errno == EINTR { continue }
                    return false
                }
                if n == 0 { return false }
                done += n
            }
            return true
        }
        if !ok {
            out.wipe()
            return nil
        }
        return out
    }

    /// Writes all the bytes to the open POSIX file descriptor `fd`; `false` if a write fails.
    public func write(toFileDescriptor fd: Int32) -> Bool {
        withUnsafeBytes { writeAllBytes(fd, $0) == nil }
    }
}
