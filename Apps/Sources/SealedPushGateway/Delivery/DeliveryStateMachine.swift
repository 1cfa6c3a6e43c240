/// A delivery's row as an attempt's outcome finds it: read, under the row's lock, in the transaction that
/// writes the outcome.
struct LeasedDeliveryRow: Sendable, Equatable {
    /// The delivery as it stands.
    var record: DeliveryRecord
    /// The generation of the delivery's current lease (grows with each claim).
    var leaseGeneration: Int64
    /// A cancellation asked for while the push was in flight (`message_deleted`, `device_deleted`,
    /// `token_reassigned`): it applies once the attempt ends without APNs accepting or refusing it for good.
    var pendingCancel: String?
}

/// A device to mark `unregistered` because APNs answered that its token is gone (gateway v1 §4).
struct DeviceUnregistration: Sendable, Equatable {
    /// The app.
    var app: String
    /// The platform of the address.
    var platform: PushPlatform
    /// The environment of the token (`apns`).
    var environment: APNsEnvironmentName
    /// The token APNs said is gone.
    var address: String
    /// APNs's reason.
    var reason: String
    /// Only a device whose token was last registered before this instant is unregistered (the 410 timestamp rule).
    var registeredBefore: Int64
    /// When (Unix milliseconds).
    var at: Int64
}

/// What writing an attempt's outcome changes: the delivery's row, the events, the device; computed by
/// `DeliveryStateMachine.complete` and written by a store as it is.
struct DeliveryCompletion: Sendable {
    /// The delivery's row after the change (every column the store writes), or nil: nothing is written.
    var row: DeliveryRecord?
    /// Whether the outcome itself landed (what `GatewayStore.complete` answers): false when the lease is no
    /// longer the delivery's current one, or the delivery reached a final state meanwhile.
    var landed: Bool
    /// Whether the sealed payload is dropped (the delivery will never be sent again).
    var dropsPayload: Bool
    /// The delivery's events (gateway v1 §8), in the order they are written.
    var events: [EventRecord]
    /// The device to mark unregistered, if APNs said its token is gone.
    var unregister: DeviceUnregistration?
    /// Whether the app's other queued deliveries are marked `credentials_paused` (gateway v1 §6).
    var pausesApp: Bool

    /// Nothing is written.
    static let nothing = DeliveryCompletion(row: nil, landed: false, dropsPayload: false, events: [], unregister: nil, pausesApp: false)

    /// The delivery's state once written, when the outcome landed.
    var landedState: DeliveryState? { landed ? row?.state : nil }
}

/// The delivery state machine of gateway v1 §5–§6, once for every store: a claimed delivery, an attempt's
/// outcome and the time give the row's changes and the events to write. Pure: no I/O, no clock.
enum DeliveryStateMachine {
    /// The changes `outcome` makes to `current` (nil: the delivery is gone), claimed as `claim`.
    ///
    /// - A lease that is no longer the delivery's current one writes nothing (gateway v1 §9).
    /// - A delivery that became final meanwhile (its receipt came first) keeps its state: an APNs answer
    ///   only sets `apns_status`.
    /// - A queued delivery moves as the outcome says; a retry at or past `expires_at` (or of a `ttl: 0`
    ///   message) ends it `expired` now, not at a later claim; a cancellation asked for while the push was
    ///   in flight ends it `cancelled` unless APNs accepted it or refused it for good.
    static func complete(_ current: LeasedDeliveryRow?, claim: ClaimedDelivery, outcome: AttemptOutcome,
                         unregisteredAt: Int64?, now: Int64) -> DeliveryCompletion {
        guard let current, current.leaseGeneration == claim.generation else { return .nothing }
        var row = current.record
        let attempted: Bool
        let status: Int?
        switch outcome {
        case let .accepted(s, _): (attempted, status) = (true, s)
        case let .retry(_, s, _): (attempted, status) = (true, s)
        case let .final(_, s, _, a): (attempted, status) = (a, s)
        case let .paused(s, _): (attempted, status) = (false, s)
        case .handBack, .held: (attempted, status) = (false, nil)
        }
        guard row.state == .queued else {
            // Final meanwhile (delivered by its receipt): an APNs answer that comes after that only sets apns_status
            // (gateway v1 §5); the lease is released.
            if let status { row.apnsStatus = status }
            // The push service's id for it still lands: a receipt can overtake the answer (the device is that fast).
            if case let .accepted(_, platformID?) = outcome { row.platformID = platformID }
            return DeliveryCompletion(row: row, landed: outcome == .handBack, dropsPayload: false, events: [], unregister: nil, pausesApp: false)
        }

        var unregister: DeviceUnregistration?
        var pausesApp = false
        if attempted { row.attempts += 1 }
        switch outcome {
        case .handBack:
            guard let cancel = current.pendingCancel else {
                // Untouched: due again at once, the attempt not counted.
                return DeliveryCompletion(row: row, landed: true, dropsPayload: false, events: [], unregister: nil, pausesApp: false)
            }
            row.state = .cancelled
            row.reason = cancel
        case let .accepted(s, platformID):
            row.state = .accepted
            row.platformID = platformID
            row.apnsStatus = s
            row.reason = nil
            row.acceptedAt = now
        case let .retry(at, s, reason):
            row.apnsStatus = s
            if claim.apnsExpiration == 0 || at >= claim.expiresAt {
                row.state = .expired
                row.reason = "ttl_expired"
            } else if let cancel = current.pendingCancel {
                row.state = .cancelled
                row.reason = cancel
            } else {
                row.reason = reason
                row.nextAttemptAt = at
            }
        case let .final(state, s, reason, _):
            row.state = state
            row.apnsStatus = s
            row.reason = reason
            if state == .unregistered {
                unregister = DeviceUnregistration(app: claim.app, platform: claim.platform, environment: claim.environment, address: claim.address, reason: reason,
                                                  registeredBefore: unregisteredAt ?? now + 1, at: now)
            }
        case let .held(until, reason):
            if let cancel = current.pendingCancel {
                row.state = .cancelled
                row.reason = cancel
            } else {
                // Looked at again at `until`, or at expiry (the next claim then writes it `expired`).
                row.reason = reason
                row.nextAttemptAt = min(until, claim.expiresAt)
            }
        case let .paused(s, _):
            row.apnsStatus = s
            if let cancel = current.pendingCancel {
                row.state = .cancelled
                row.reason = cancel
            } else {
                row.reason = "credentials_paused"
                pausesApp = true
            }
        }
        if row.state != .queued { row.nextAttemptAt = nil }
        row.updatedAt = now
        row.seq += 1
        let events = GatewayEvents.delivery(row, now: now).map { [$0] } ?? []
        return DeliveryCompletion(row: row, landed: true, dropsPayload: row.state != .queued, events: events, unregister: unregister,
                                  pausesApp: pausesApp)
    }
}
