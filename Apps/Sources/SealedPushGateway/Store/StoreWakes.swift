import NIOConcurrencyHelpers

/// What a store announces when rows a worker claims may have appeared: new deliveries or new webhook events of
/// an app. The gateway turns each into a wake-up of the loop that claims them; the loops still poll as before,
/// so a wake-up that is lost (a listener connection down) only delays work to the next poll.
public enum StoreWake: Sendable, Hashable {
    /// New deliveries of `app` (any platform: each platform's loop claims only its own).
    case deliveries(app: String)
    /// New webhook events of `app`.
    case events(app: String)
    /// The store's listener connection (PostgreSQL's `LISTEN`) came up or was lost: while it is down the workers
    /// only poll, and the gateway says so in its metrics.
    case listener(connected: Bool)

    /// The PostgreSQL `NOTIFY` channel this kind of wake-up travels on.
    var channel: String {
        switch self {
        case .deliveries: StoreWake.deliveriesChannel
        case .events: StoreWake.eventsChannel
        case .listener: ""
        }
    }

    /// The channel the `deliveries` insert trigger notifies (migration 12), its payload the app id.
    static let deliveriesChannel = "sealedpush_deliveries"
    /// The channel the `events` insert trigger notifies (migration 12), its payload the app id.
    static let eventsChannel = "sealedpush_events"

    /// The wake-up a notification on `channel` with `payload` (an app id) stands for; nil for another channel.
    init?(channel: String, payload: String) {
        switch channel {
        case Self.deliveriesChannel: self = .deliveries(app: payload)
        case Self.eventsChannel: self = .events(app: payload)
        default: return nil
        }
    }
}

/// Where a store's wake-ups go: the handler the gateway sets (`GatewayStore.onWake`), called from any task.
final class StoreWakeHandler: Sendable {
    /// The handler, inside a struct. Not a bare closure as the box's value: a closure that is the generic value of
    /// `withLockedValue`'s `inout` is converted to and from the generic representation at each access, and written
    /// back wrapped in two more reabstraction thunks. `announce` reading it that way made the handler a chain two
    /// thunks longer per event — quadratic CPU (28 % of the gateway's under load) and, in time, a stack overflow.
    private struct Handler: Sendable {
        let body: @Sendable (StoreWake) -> Void
    }

    private let handler = NIOLockedValueBox<Handler?>(nil)

    /// Replaces the handler.
    func set(_ body: @escaping @Sendable (StoreWake) -> Void) {
        handler.withLockedValue { $0 = Handler(body: body) }
    }

    /// Hands `wake` to the handler, if one is set.
    func announce(_ wake: StoreWake) {
        handler.withLockedValue { $0 }?.body(wake)
    }
}
