// The names this module's public API had before platforms v1, kept working for Swift callers with a deprecation
// notice: the address of a device is no longer always an APNs token, and an app's APNs settings moved into its
// `apns` section (which an app serving only FCM or Web Push does not have).

extension DeviceRecord {
    /// The device's address; for an `apns` device, its APNs token.
    @available(*, deprecated, renamed: "address", message: "a device's address is an APNs token, an FCM token or a Web Push endpoint")
    public var apnsToken: String {
        get { address }
        set { address = newValue }
    }
}

extension ClaimedDelivery {
    /// The address the delivery goes to; for `apns`, the APNs token.
    @available(*, deprecated, renamed: "address")
    public var apnsToken: String {
        get { address }
        set { address = newValue }
    }
}

extension NewDelivery {
    /// The address the delivery goes to; for `apns`, the APNs token.
    @available(*, deprecated, renamed: "address")
    public var apnsToken: String {
        get { address }
        set { address = newValue }
    }
}

extension GatewayAppConfiguration {
    /// The bundle id (`apns.topic`), or empty for an app without an `apns` section.
    @available(*, deprecated, message: "use apns?.topic")
    public var topic: String { apns?.topic ?? "" }
    /// The `.p8` path (`apns.authKeyPath`), or empty for an app without an `apns` section.
    @available(*, deprecated, message: "use apns?.authKeyPath")
    public var authKeyPath: String { apns?.authKeyPath ?? "" }
    /// The APNs key id (`apns.keyID`), or empty.
    @available(*, deprecated, message: "use apns?.keyID")
    public var keyID: String { apns?.keyID ?? "" }
    /// The Apple team id (`apns.teamID`), or empty.
    @available(*, deprecated, message: "use apns?.teamID")
    public var teamID: String { apns?.teamID ?? "" }
    /// Where production pushes go (`apns.productionURL`).
    @available(*, deprecated, message: "use apns?.productionURL")
    public var productionURL: String? { apns?.productionURL }
    /// Where sandbox pushes go (`apns.sandboxURL`).
    @available(*, deprecated, message: "use apns?.sandboxURL")
    public var sandboxURL: String? { apns?.sandboxURL }
    /// The extra trust anchor for those URLs (`apns.caCertPath`).
    @available(*, deprecated, message: "use apns?.caCertPath")
    public var caCertPath: String? { apns?.caCertPath }
}

extension DashboardSnapshot {
    /// How many deliveries last got one answer from APNs (now `AnswerCount`, which names its platform).
    @available(*, deprecated, renamed: "AnswerCount")
    public typealias APNsAnswerCount = AnswerCount
}

extension DashboardSnapshot.App {
    /// The deliveries of the last 24 hours by their last APNs answer (now `answers`, every platform's).
    @available(*, deprecated, message: "use answers, which holds every platform's; filter by platform == .apns")
    public var apnsAnswers: [DashboardSnapshot.AnswerCount] { answers.filter { $0.platform == .apns } }
}

// The gateway's clock before there was one clock for every server (issue #36): `GatewayClock` read Unix milliseconds
// as a bare `Int64`, and `GatewayOptions.limiterClock` was a second, monotonic clock. Both are now `SealedPushClock`.

/// The gateway's clock: now `SealedPushClock`, which carries a wall reading in `UnixMilliseconds` and a monotonic reading.
@available(*, deprecated, renamed: "SealedPushClock")
public typealias GatewayClock = SealedPushClock

extension SealedPushClock {
    /// A clock reading the wall time, in Unix milliseconds, from `milliseconds`, and the monotonic time from the system.
    @available(*, deprecated, message: "use SealedPushClock(wall:monotonic:), whose wall reading is a UnixMilliseconds, or a SealedPushManualClock's clock")
    public init(milliseconds: @escaping @Sendable () -> Int64) {
        self.init(wall: { UnixMilliseconds(milliseconds()) }, monotonic: { ContinuousClock.now })
    }

    /// Now on the wall clock, in Unix milliseconds as a bare `Int64`.
    @available(*, deprecated, message: "use wall(), which reads a UnixMilliseconds (its .milliseconds is this Int64)")
    public var milliseconds: @Sendable () -> Int64 {
        let wall = self.wall
        return { wall().milliseconds }
    }
}

extension GatewayOptions {
    /// The monotonic reading the rate limits refill by: now the monotonic reading of `clock`.
    @available(*, deprecated, message: "set clock (SealedPushClock(wall:monotonic:) or a SealedPushManualClock's clock); its monotonic reading is what the rate limits, the worker's pacing and its drain deadline read")
    public var limiterClock: @Sendable () -> ContinuousClock.Instant {
        get { clock.monotonic }
        set {
            let wall = clock.wall
            clock = SealedPushClock(wall: wall, monotonic: newValue)
        }
    }
}
