import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A wall-clock time: whole milliseconds since the Unix epoch (1970-01-01T00:00:00Z), the unit in the type.
public struct UnixMilliseconds: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The milliseconds since the epoch (negative before it).
    public var milliseconds: Int64

    /// The time `milliseconds` after the epoch.
    public init(_ milliseconds: Int64) { self.milliseconds = milliseconds }

    /// The whole seconds since the epoch, rounded down.
    public var seconds: Int64 { milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000 }

    /// The time `duration` later, to the whole millisecond (rounded toward zero).
    public static func + (time: UnixMilliseconds, duration: Duration) -> UnixMilliseconds {
        let (seconds, attoseconds) = duration.components
        return UnixMilliseconds(time.milliseconds + seconds * 1000 + attoseconds / 1_000_000_000_000_000)
    }

    /// Whether `a` is earlier than `b`.
    public static func < (a: UnixMilliseconds, b: UnixMilliseconds) -> Bool { a.milliseconds < b.milliseconds }

    /// The milliseconds, with their unit (`1764300000000 ms`).
    public var description: String { "\(milliseconds) ms" }
}

/// The one clock SealedPush's servers read, injected so that tests can move it: a wall reading in
/// `UnixMilliseconds` (stored times, expiry, leases, `last_seen`) and a monotonic reading (rate-limit refills,
/// pacing, deadlines). Both come from the same value, so a test that advances one advances the other.
///
/// It reads; it does not sleep: waits still last real time, and what a wait decides is read from this clock.
public struct SealedPushClock: Sendable {
    /// Now on the wall clock.
    public let wall: @Sendable () -> UnixMilliseconds
    /// Now on the monotonic clock (never goes back; unrelated to the wall clock's value).
    public let monotonic: @Sendable () -> ContinuousClock.Instant

    /// A clock reading the wall time from `wall` and the monotonic time from `monotonic`.
    public init(wall: @escaping @Sendable () -> UnixMilliseconds,
                monotonic: @escaping @Sendable () -> ContinuousClock.Instant) {
        self.wall = wall
        self.monotonic = monotonic
    }

    /// Now on the wall clock (`wall()`).
    public var now: UnixMilliseconds { wall() }

    /// Now on the monotonic clock (`monotonic()`).
    public var instant: ContinuousClock.Instant { monotonic() }

    /// The system's clocks: `CLOCK_REALTIME` for the wall reading, `ContinuousClock` for the monotonic one.
    public static let system = SealedPushClock(wall: { systemWallTime() }, monotonic: { ContinuousClock.now })

    /// The system's real-time clock, in Unix milliseconds.
    public static func systemWallTime() -> UnixMilliseconds {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return UnixMilliseconds(Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000)
    }
}

/// A clock that stands still until it is advanced (tests): its wall and monotonic readings move together,
/// by exactly what `advance(by:)` says, so a slow machine changes nothing a test observes. Deadlines read from it
/// pass only when it is advanced: a gateway stopped with attempts in flight waits for them (its drain deadline
/// does not pass) unless the test advances the clock past `drainTimeout`.
public final class SealedPushManualClock: Sendable {
    private let origin: ContinuousClock.Instant
    private let state: Mutex<(wall: UnixMilliseconds, elapsed: Duration)>

    /// A clock standing at `wall` (the system's wall time by default).
    public init(wall: UnixMilliseconds = SealedPushClock.systemWallTime()) {
        origin = ContinuousClock.now
        state = Mutex((wall, .zero))
    }

    /// Moves both readings forward by `duration` (a negative one is refused: monotonic time never goes back).
    public func advance(by duration: Duration) {
        precondition(duration >= .zero, "SealedPushManualClock.advance(by:) needs a duration of zero or more; a monotonic clock never goes back")
        state.withLock { s in
            s.wall = s.wall + duration
            s.elapsed += duration
        }
    }

    /// Sets the wall reading alone (a wall clock may be stepped either way); the monotonic reading stays.
    public func setWall(_ wall: UnixMilliseconds) {
        state.withLock { $0.wall = wall }
    }

    /// The wall reading now.
    public var wall: UnixMilliseconds { state.withLock { $0.wall } }

    /// The monotonic reading now.
    public var instant: ContinuousClock.Instant { origin + state.withLock { $0.elapsed } }

    /// This clock as the `SealedPushClock` the servers take.
    public var clock: SealedPushClock {
        SealedPushClock(wall: { self.wall }, monotonic: { self.instant })
    }
}
