import SealedPushWire
import SealedPushCrypto

/// The event types of gateway v1 §8.
public enum GatewayEventType: String, Sendable, Equatable, CaseIterable {
    /// APNs answered 200.
    case deliveryAccepted = "delivery.accepted"
    /// The device's receipt arrived.
    case deliveryDelivered = "delivery.delivered"
    /// APNs refused the delivery for good.
    case deliveryRejected = "delivery.rejected"
    /// APNs said the token is gone.
    case deliveryUnregistered = "delivery.unregistered"
    /// The delivery's ttl ran out before APNs accepted it.
    case deliveryExpired = "delivery.expired"
    /// The delivery's device or message was deleted, or its token reassigned, before it was sent.
    case deliveryCancelled = "delivery.cancelled"
    /// A mailbox delivery was first fetched by its handle (mailbox v1 §3).
    case deliveryFetched = "delivery.fetched"
    /// The device's `revealed` receipt arrived: the user pressed and held (reveal v1 §8).
    case deliveryRevealed = "delivery.revealed"
    /// APNs said a device's token is gone and the device is now `unregistered`.
    case deviceUnregistered = "device.unregistered"

    /// The event a delivery's move into `state` causes, if any (`queued` causes none).
    public static func delivery(_ state: DeliveryState) -> GatewayEventType? {
        switch state {
        case .queued: nil
        case .accepted: .deliveryAccepted
        case .fetched: .deliveryFetched
        case .delivered: .deliveryDelivered
        case .rejected: .deliveryRejected
        case .unregistered: .deliveryUnregistered
        case .expired: .deliveryExpired
        case .cancelled: .deliveryCancelled
        }
    }
}

/// One webhook event (gateway v1 §8) as the store keeps it: written in the transaction of the state change
/// that causes it, listed by `GET …/events`, and POSTed to the app's webhook.
///
/// The body is built here, in Swift, so that every store writes the same bytes: a store only inserts the
/// record it is handed (see `GatewayEvents`).
public struct EventRecord: Sendable, Equatable {
    /// `evt_` and 32 random hex digits: unique, what receivers deduplicate by.
    public var id: String
    /// The app.
    public var app: String
    /// Its type.
    public var type: GatewayEventType
    /// When the state change happened (Unix milliseconds).
    public var createdAt: Int64
    /// The whole JSON body as POSTed: `{"id", "type", "created_at", "app", "data"}`.
    public var body: [UInt8]

    /// An event from its parts.
    public init(id: String, app: String, type: GatewayEventType, createdAt: Int64, body: [UInt8]) {
        self.id = id
        self.app = app
        self.type = type
        self.createdAt = createdAt
        self.body = body
    }
}

/// An event claimed by the webhook worker for one attempt, under a lease generation.
public struct ClaimedEvent: Sendable, Equatable {
    /// The event's id.
    public var id: String
    /// The app.
    public var app: String
    /// When it was written (Unix milliseconds): it is dropped 24 hours later if still unacknowledged.
    public var createdAt: Int64
    /// The JSON body to POST.
    public var body: [UInt8]
    /// Attempts before this one.
    public var attempts: Int
    /// The lease this claim holds: its outcome is written only under it.
    public var generation: Int64

    /// A claimed event from its parts.
    public init(id: String, app: String, createdAt: Int64, body: [UInt8], attempts: Int, generation: Int64) {
        self.id = id
        self.app = app
        self.createdAt = createdAt
        self.body = body
        self.attempts = attempts
        self.generation = generation
    }
}

/// What one webhook attempt came to.
public enum EventOutcome: Sendable, Equatable {
    /// The receiver answered 2xx: the event is done.
    case acknowledged
    /// Try again at `at` (Unix milliseconds).
    case retry(at: Int64)
    /// Unacknowledged for 24 hours: given up (and counted).
    case dropped
    /// The attempt was not made (shutdown): hand the event back untouched.
    case handBack
}

/// Builds events in Swift so every `GatewayStore` writes the same bodies; a store calls these inside the
/// transaction of the state change and inserts the result.
public enum GatewayEvents {
    /// A new event id made at `now`: `evt_` and 32 hex digits, the time first (`GatewayIDs.event`).
    public static func newID(now: Int64) -> String { GatewayIDs.event(now: now) }

    /// The event of a delivery that just moved into its (non-queued) state; nil for `queued`.
    public static func delivery(_ d: DeliveryRecord, now: Int64) -> EventRecord? {
        guard let type = GatewayEventType.delivery(d.state) else { return nil }
        let data = JSONObject([("message_id", .string(d.messageID)), ("delivery", .object(Gateway.json(d)))])
        return make(app: d.app, type: type, now: now, data: data)
    }

    /// The `delivery.revealed` event of a delivery whose `revealed` receipt just arrived.
    public static func revealed(_ d: DeliveryRecord, now: Int64) -> EventRecord {
        make(app: d.app, type: .deliveryRevealed, now: now,
             data: JSONObject([("message_id", .string(d.messageID)), ("delivery", .object(Gateway.json(d)))]))
    }

    /// The `device.unregistered` event of a device APNs just unregistered.
    public static func deviceUnregistered(_ device: DeviceRecord, now: Int64) -> EventRecord {
        make(app: device.app, type: .deviceUnregistered, now: now, data: Gateway.json(device))
    }

    static func make(app: String, type: GatewayEventType, now: Int64, data: JSONObject) -> EventRecord {
        let id = newID(now: now)
        let body = JSONObject([("id", .string(id)), ("type", .string(type.rawValue)), ("created_at", GatewayTime.json(now)),
                               ("app", .string(app)), ("data", .object(data))])
        return EventRecord(id: id, app: app, type: type, createdAt: now, body: JSON.serialize(.object(body)))
    }
}
