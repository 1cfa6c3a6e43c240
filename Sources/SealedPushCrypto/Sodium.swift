#if canImport(Clibsodium)
import Clibsodium  // iOS and macOS, AppleSodium trait: swift-sodium's libsodium
#else
import CSodium  // Linux: the system libsodium
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
}
