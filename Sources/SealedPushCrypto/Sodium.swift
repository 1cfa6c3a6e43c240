#if canImport(Clibsodium)
import Clibsodium  // iOS, macOS, Mac Catalyst, visionOS, AppleSodium trait: swift-sodium's libsodium
#elseif canImport(CSodium)
import CSodium  // Linux: the system libsodium
#else
#error("""
    SealedPushCrypto needs libsodium, and this build has none. On iOS, macOS, Mac Catalyst and visionOS \
    enable the SealedPush package's AppleSodium trait, which links swift-sodium's Clibsodium: in Xcode \
    (26.4 or later), select the SealedPush package under the project's Package Dependencies and enable \
    AppleSodium among its traits; in a Package.swift, depend on the package with traits: ["AppleSodium"], e.g. \
    .package(url: "<SealedPush repository URL>", from: "<version>", traits: ["AppleSodium"]). \
    On Linux, install the distribution's libsodium with its pkg-config file (Debian, Ubuntu: apt install libsodium-dev).
    """)
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One-time libsodium initialisation.
///
/// Every public entry point of this module calls `Sodium.ensureInitialized()` (directly or through a
/// type that did), so callers never need to think about `sodium_init`.
enum Sodium {
    /// `sodium_init()` runs exactly once per process (Swift guarantees lazy globals are thread-safe).
    private static let status: Int32 = sodium_init()

    /// Makes sure libsodium is initialised; traps only if the system library cannot start at all.
    @inline(__always)
    static func ensureInitialized() {
        // sodium_init returns 0 on success, 1 if already initialised, -1 on failure.
        precondition(status >= 0, "libsodium failed to initialise (sodium_init returned \(status))")
    }

    /// The version string of the libsodium this process is linked against.
    static var versionString: String {
        ensureInitialized()
        return String(cString: sodium_version_string())
    }
}

/// Facts about the libsodium the toolkit runs on.
public enum CryptoLibrary {
    /// The linked libsodium's version string, e.g. `1.0.18`.
    public static var version: String { Sodium.versionString }

    /// Fills a new array with `count` cryptographically random bytes (`randombytes_buf`).
    public static func randomBytes(count: Int) -> [UInt8] {
        Sodium.ensureInitialized()
        var out = [UInt8](repeating: 0, count: count)
        out.withUnsafeMutableBytes { randombytes_buf($0.baseAddress!, $0.count) }
        return out
    }

    /// `count` random bytes for an identifier (a message id, an `apns-id`, a request id): never for a key,
    /// a nonce or a token.
    ///
    /// Served from a 4 KiB buffer that `randombytes_buf` refills, so a busy sender makes one `getrandom`
    /// call per 4 KiB of ids instead of one or two per push. Each byte is handed out once and zeroed in the
    /// buffer as it goes. A process that forks without exec must not use it in both processes (the child
    /// would repeat the parent's next ids); nothing in SealedPush forks that way.
    public static func randomIdentifierBytes(count: Int) -> [UInt8] {
        guard count <= IdentifierRandomness.capacity else { return randomBytes(count: count) }
        return IdentifierRandomness.shared.take(count)
    }
}

/// The buffer behind `CryptoLibrary.randomIdentifierBytes(count:)`.
///
/// `@unchecked Sendable`: `bytes` and `used` are read and written only between `pthread_mutex_lock` and
/// `pthread_mutex_unlock` of `mutex` (in `locked`). A pthread mutex rather than `Synchronization.Mutex`:
/// ThreadSanitizer sees the C library's lock, not the standard library's (it reported the accesses under
/// `Mutex.withLock` as races when `send --batch` took ids from several threads).
final class IdentifierRandomness: @unchecked Sendable {
    static let capacity = 4096
    static let shared = IdentifierRandomness()

    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    /// The bytes; those before `used` were handed out and are zero.
    private var bytes = [UInt8](repeating: 0, count: capacity)
    private var used = capacity

    init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    private func locked<R>(_ body: () -> R) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return body()
    }

    func take(_ count: Int) -> [UInt8] {
        Sodium.ensureInitialized()
        return locked {
            if used + count > Self.capacity {
                bytes.withUnsafeMutableBytes { randombytes_buf($0.baseAddress!, $0.count) }
                used = 0
            }
            let start = used
            let out = Array(bytes[start..<start + count])
            for i in start..<start + count { bytes[i] = 0 }
            used += count
            return out
        }
    }

    /// Whether every byte handed out since the last refill is zero in the buffer (for the tests).
    func handedOutAreZero() -> Bool {
        locked { bytes[0..<used].allSatisfy { $0 == 0 } }
    }
}
