import NIOCore
import NIOPosix
import NIOConcurrencyHelpers
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Resolves a host name to its addresses, for the outbound requests the gateway makes on a device's say-so
/// (Web Push endpoints, platforms v1 §1.1): the gateway checks every address and connects only to those, so a
/// name is never resolved twice (no DNS rebinding between the check and the connection). Tests pass their own.
public protocol GatewayAddressResolver: Sendable {
    /// Every IPv4 and IPv6 address of `host` (each 4 or 16 bytes, network order); empty when the name has none (it
    /// does not exist). Throws when the resolver could not answer (an outage: not the name's fault).
    func addresses(of host: String) async throws -> [[UInt8]]
}

/// The system resolver could not answer (`EAI_AGAIN`, `EAI_FAIL`, …): try again later.
public struct AddressResolutionUnavailable: Error, Sendable {
    /// `getaddrinfo`'s code.
    public let code: Int32
}

/// The system resolver (`getaddrinfo`), run on threads of its own (`ResolverThreads`).
public struct SystemAddressResolver: GatewayAddressResolver {
    /// The system resolver.
    public init() {}

    /// Every address `getaddrinfo` gives for `host` (TCP), deduplicated, in its order; empty for a name that does not
    /// exist or has no address; `AddressResolutionUnavailable` when the resolver failed.
    public func addresses(of host: String) async throws -> [[UInt8]] {
        try await ResolverThreads.pool.runIfActive { try Self.lookUp(host) }
    }

    #if canImport(Glibc)
    /// `EAI_NODATA` (a name without addresses), defined only under `_GNU_SOURCE` in glibc's `netdb.h`.
    static let noData: Int32 = -5
    #else
    static let noData: Int32 = EAI_NODATA
    #endif

    static func lookUp(_ host: String) throws -> [[UInt8]] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if canImport(Glibc)
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #else
        hints.ai_socktype = SOCK_STREAM
        #endif
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, nil, &hints, &list)
        if status == EAI_NONAME || status == Self.noData { return [] }
        guard status == 0 else { throw AddressResolutionUnavailable(code: status) }
        guard let first = list else { return [] }
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

/// The system resolver's own threads: a lookup that hangs (`getaddrinfo` cannot be cancelled) holds one of these,
/// never a thread of NIO's shared blocking pool (file I/O, shutdown). Never shut down: a lookup still running at
/// exit is abandoned with the process, so a graceful shutdown never waits on one.
enum ResolverThreads {
    /// 16 threads; each app runs at most `AddressLookups.limit` lookups at once.
    static let pool: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: 16)
        pool.start()
        return pool
    }()
}

/// One app's name lookups for Web Push endpoints (platforms v1 §4.1): at most `limit` run at once (a lookup that
/// was abandoned holds its slot until the resolver really returns), and each ends by `deadline` whatever the
/// resolver does — one that has not answered is abandoned, not awaited.
final class AddressLookups: Sendable {
    let resolver: any GatewayAddressResolver
    let limit: Int
    let deadline: Duration
    private let slots: LookupSlots

    /// Lookups through `resolver`, at most `limit` at once, each abandoned after `deadline`.
    init(resolver: any GatewayAddressResolver, limit: Int = 4, deadline: Duration = .seconds(5)) {
        self.resolver = resolver
        self.limit = max(1, limit)
        self.deadline = deadline
        slots = LookupSlots(limit: max(1, limit))
    }

    /// `host`'s addresses (the brackets of an IPv6 literal taken off); nil when no answer came within the deadline
    /// (waiting for a slot included) or the calling task was cancelled. Throws what the resolver threw.
    func addresses(of host: String) async throws -> [[UInt8]]? {
        let name = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        let resolver = resolver
        let slots = slots
        let answer = await Abandoning.run(within: deadline) { () async throws -> [[UInt8]]? in
            guard await slots.acquire() else { return nil }
            defer { slots.release() }
            return try await resolver.addresses(of: name)
        }
        switch answer {
        case nil: return nil
        case let .success(addresses)?: return addresses
        case let .failure(error)?: throw error
        }
    }

    /// Lookups holding a slot now (tests).
    var running: Int { slots.held }
}

/// Runs work that may never end, without ever waiting on it past a deadline.
enum Abandoning {
    /// Runs `operation` in a task of its own and returns its result, or nil once `limit` passes or the calling task
    /// is cancelled: the operation is then cancelled and left to end on its own, never awaited.
    static func run<T: Sendable>(within limit: Duration, _ operation: @escaping @Sendable () async throws -> T?) async -> Result<T, any Error>? {
        let outcome = OneShot<Result<T, any Error>?>()
        let work = Task {
            do {
                if let value = try await operation() { outcome.fulfil(.success(.success(value))) } else { outcome.fulfil(.success(nil)) }
            } catch {
                outcome.fulfil(.success(.failure(error)))
            }
        }
        let timer = Task {
            try? await Task.sleep(for: limit)
            outcome.fulfil(.success(nil))
        }
        let result = (try? await outcome.wait()) ?? nil
        timer.cancel()
        if result == nil { work.cancel() }
        return result
    }
}

/// A counting semaphore whose waiters stop waiting when cancelled.
final class LookupSlots: Sendable {
    private struct State {
        var free: Int
        var waiters: [(id: UInt64, continuation: CheckedContinuation<Bool, Never>)] = []
        var nextID: UInt64 = 0
    }

    private let state: NIOLockedValueBox<State>
    private let limit: Int

    init(limit: Int) {
        self.limit = limit
        state = NIOLockedValueBox(State(free: limit))
    }

    /// Takes a slot, waiting for one; false (no slot taken) when the task is cancelled first.
    func acquire() async -> Bool {
        let id = state.withLockedValue { s in
            defer { s.nextID += 1 }
            return s.nextID
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let now = state.withLockedValue { s -> Bool? in
                    if Task.isCancelled { return false }
                    if s.free > 0 {
                        s.free -= 1
                        return true
                    }
                    s.waiters.append((id, continuation))
                    return nil
                }
                if let now { continuation.resume(returning: now) }
            }
        } onCancel: {
            let waiter = state.withLockedValue { s -> CheckedContinuation<Bool, Never>? in
                guard let index = s.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return s.waiters.remove(at: index).continuation
            }
            waiter?.resume(returning: false)
        }
    }

    /// Gives a slot back: to the first waiter, if one waits.
    func release() {
        let next = state.withLockedValue { s -> CheckedContinuation<Bool, Never>? in
            if s.waiters.isEmpty {
                s.free += 1
                return nil
            }
            return s.waiters.removeFirst().continuation
        }
        next?.resume(returning: true)
    }

    /// Slots taken now.
    var held: Int { state.withLockedValue { limit - $0.free } }
}
