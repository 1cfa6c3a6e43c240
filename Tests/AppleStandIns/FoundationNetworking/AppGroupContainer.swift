// Stand-in for the one app group call SealedPushApple makes that swift-corelibs-foundation lacks:
// `FileManager.containerURL(forSecurityApplicationGroupIdentifier:)` (Foundation on Apple platforms,
// developer.apple.com/documentation/foundation/filemanager/containerurl(forsecurityapplicationgroupidentifier:)).
// It lives in this module because SealedPushApple already reaches URLSession through
// `#if canImport(FoundationNetworking)`, which on Linux is this stand-in module (`-module-alias`) and on Apple
// platforms is absent, so an Apple build calls Foundation's own method under the same name.
//
// Linux's Foundation already has the rest of the API the app group stores use, with Apple's names and raw
// values: `FileProtectionType.none` / `.completeUntilFirstUserAuthentication`, `FileAttributeKey.protectionKey`
// and `Data.WritingOptions.noFileProtection` / `.completeFileProtectionUntilFirstUserAuthentication`
// (0x10000000 / 0x40000000). It ignores the protection classes (Linux has no data protection).
#if os(Linux)
public import Foundation
import Synchronization

extension FileManager {
    /// Stand-in: the container directory of the app group `groupIdentifier` — the directory a test registered
    /// with `StandInAppGroups.register(_:at:)`, or `nil` for any other group, as iOS answers for a group the
    /// process's App Groups entitlement does not list.
    public func containerURL(forSecurityApplicationGroupIdentifier groupIdentifier: String) -> URL? {
        StandInAppGroups.containers.withLock { $0[groupIdentifier] }
    }
}

/// Stand-in only: the app group containers `containerURL(forSecurityApplicationGroupIdentifier:)` knows.
public enum StandInAppGroups {
    static let containers = Mutex<[String: URL]>([:])

    /// Makes `directory` the container of `groupIdentifier` (as if the entitlement listed the group).
    public static func register(_ groupIdentifier: String, at directory: URL) {
        containers.withLock { $0[groupIdentifier] = directory }
    }

    /// Forgets the container of `groupIdentifier`.
    public static func unregister(_ groupIdentifier: String) {
        _ = containers.withLock { $0.removeValue(forKey: groupIdentifier) }
    }
}
#endif
