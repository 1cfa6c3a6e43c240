#if canImport(Clibsodium)
import Clibsodium  // iOS and macOS, AppleSodium trait: swift-sodium's libsodium
#else
import CSodium  // Linux: the system libsodium
#endif
import Synchronization

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
final class IdentifierRandomness: Sendable {
    static let capacity = 4096
    static let shared = IdentifierRandomness()

    /// The bytes and how many of them were handed out (those are zero).
    private let state = Mutex<(bytes: [UInt8], used: Int)>(([UInt8](repeating: 0, count: capacity), capacity))

    func take(_ count: Int) -> [UInt8] {
        Sodium.ensureInitialized()
        return state.withLock { s in
            if s.used + count > Self.capacity {
                s.bytes.withUnsafeMutableBytes { randombytes_buf($0.baseAddress!, $0.count) }
                s.used = 0
            }
            let start = s.used
            let out = Array(s.bytes[start..<start + count])
            for i in start..<start + count { s.bytes[i] = 0 }
            s.used += count
            return out
        }
    }

    /// Whether every byte handed out since the last refill is zero in the buffer (for the tests).
    func handedOutAreZero() -> Bool {
        state.withLock { s in s.bytes[0..<s.used].allSatisfy { $0 == 0 } }
    }
}
