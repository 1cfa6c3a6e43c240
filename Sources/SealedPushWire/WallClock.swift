#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// The wall clock every SealedPush component reads: the system's, or one a test or the CLI sets.
///
/// Sender, keychain store and receiver all take time through this one type, so a test moves one
/// clock and every component sees the same instant.
public struct WallClock: Sendable {
    /// The current instant.
    public let now: @Sendable () -> Date

    /// A clock that reads `now`.
    public init(_ now: @escaping @Sendable () -> Date) {
        self.now = now
    }

    /// The system clock.
    public static let system = WallClock { Date() }

    /// A clock that always reads `date`.
    public static func fixed(_ date: Date) -> WallClock { WallClock { date } }

    /// A clock that always reads `seconds` after the Unix epoch.
    public static func fixed(unixSeconds seconds: Int64) -> WallClock {
        fixed(Date(timeIntervalSince1970: Double(seconds)))
    }

    /// The current time in whole Unix seconds, rounded down.
    public var unixSeconds: Int64 {
        let t = now().timeIntervalSince1970.rounded(.down)
        guard t.isFinite else { return t < 0 ? .min : .max }
        return t >= 9.2e18 ? .max : (t <= -9.2e18 ? .min : Int64(t))
    }
}
