import NIOCore
import NIOPosix
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Resolves a host name to its addresses, for the outbound requests the gateway makes on a device's say-so
/// (Web Push endpoints, platforms v1 §1.1): the gateway checks every address and connects only to those, so a
/// name is never resolved twice (no DNS rebinding between the check and the connection). Tests pass their own.
public protocol GatewayAddressResolver: Sendable {
    /// Every IPv4 and IPv6 address of `host` (each 4 or 16 bytes, network order); empty when it has none.
    func addresses(of host: String) async throws -> [[UInt8]]
}

/// The system resolver (`getaddrinfo`), run on NIO's blocking-I/O thread pool.
public struct SystemAddressResolver: GatewayAddressResolver {
    /// The system resolver.
    public init() {}

    /// Every address `getaddrinfo` gives for `host` (TCP), deduplicated, in its order; empty for an unknown name.
    public func addresses(of host: String) async throws -> [[UInt8]] {
        try await NIOThreadPool.singleton.runIfActive { Self.lookUp(host) }
    }

    static func lookUp(_ host: String) -> [[UInt8]] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if canImport(Glibc)
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #else
        hints.ai_socktype = SOCK_STREAM
        #endif
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &list) == 0, let first = list else { return [] }
        defer { freeaddrinfo(first) }
        var out: [[UInt8]] = []
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let e = entry {
            if let address = e.pointee.ai_addr {
                switch e.pointee.ai_family {
                case AF_INET:
                    var sin = sockaddr_in()
                    memcpy(&sin, address, MemoryLayout<sockaddr_in>.size)
                    let bytes = withUnsafeBytes(of: &sin.sin_addr) { Array($0) }
                    if !out.contains(bytes) { out.append(bytes) }
                case AF_INET6:
                    var sin6 = sockaddr_in6()
                    memcpy(&sin6, address, MemoryLayout<sockaddr_in6>.size)
                    let bytes = withUnsafeBytes(of: &sin6.sin6_addr) { Array($0) }
                    if !out.contains(bytes) { out.append(bytes) }
                default:
                    break
                }
            }
            entry = e.pointee.ai_next
        }
        return out
    }
}

extension SocketAddress {
    /// The address of `bytes` (4 or 16, network order) and `port`.
    static func fromPacked(_ bytes: [UInt8], port: Int) throws -> SocketAddress {
        try SocketAddress(packedIPAddress: ByteBuffer(bytes: bytes), port: port)
    }
}
