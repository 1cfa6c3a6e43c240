#if canImport(Glibc)
import Glibc

/// A loopback TCP port that refuses every connection for as long as this value is kept: a socket bound to it that
/// never listens. Unlike a port that was bound and closed, no other test in the process can take it meanwhile (a
/// closed port may be handed out again at once, and then something answers or stays silent instead of refusing).
public final class RefusingPort: Sendable {
    /// The port, on 127.0.0.1.
    public let port: Int
    private let descriptor: Int32

    /// Binds a socket to a free loopback port without listening.
    public init() throws(RefusingPortError) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw RefusingPortError(errno: errno) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        let named = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        guard bound == 0, named == 0 else {
            let code = errno
            close(fd)
            throw RefusingPortError(errno: code)
        }
        descriptor = fd
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit { close(descriptor) }
}

/// A loopback port could not be bound for `RefusingPort`.
public struct RefusingPortError: Error, CustomStringConvertible {
    /// The `errno` of the failed call.
    public let errno: Int32
    /// What happened.
    public var description: String { "cannot bind a loopback port to refuse connections on (errno \(errno))" }
}
#endif
