@testable import SealedPushGateway
import Testing

/// The delivery state machine alone (no store): every outcome kind against a queued delivery under its lease,
/// under an old lease, and against a delivery that became final meanwhile.
@Suite("Delivery state machine")
struct DeliveryStateMachineTests {
    static let now: Int64 = 50_000

    static func claim(generation: Int64 = 3, attempts: Int = 0, expiresAt: Int64 = 100_000, apnsExpiration: Int64 = 100) -> ClaimedDelivery {
        ClaimedDelivery(deliveryID: "dl-1", app: "chat", deviceID: "dev-1", address: "ab", environment: .production, payload: [1],
                        priority: 10, collapseID: "c", apnsExpiration: apnsExpiration, expiresAt: expiresAt, apnsID: "A-1",
                        attempts: attempts, generation: generation)
    }

    static func row(state: DeliveryState = .queued, attempts: Int = 0, generation: Int64 = 3, pendingCancel: String? = nil) -> LeasedDeliveryRow {
        LeasedDeliveryRow(record: DeliveryRecord(deliveryID: "dl-1", app: "chat", messageID: "m-1", deviceID: "dev-1", state: state,
                                                 attempts: attempts, apnsID: "A-1", apnsStatus: nil, reason: nil, createdAt: 1_000,
                                                 updatedAt: 1_000, nextAttemptAt: state == .queued ? 1_000 : nil, acceptedAt: nil,
                                                 deliveredAt: state == .delivered ? 2_000 : nil, seq: 4),
                          leaseGeneration: generation, pendingCancel: pendingCancel)
    }

    static func complete(_ row: LeasedDeliveryRow?, _ outcome: AttemptOutcome, claim: ClaimedDelivery = claim(), unregisteredAt: Int64? = nil) -> DeliveryCompletion {
        DeliveryStateMachine.complete(row, claim: claim, outcome: outcome, unregisteredAt: unregisteredAt, now: now)
    }

    static let everyOutcome: [AttemptOutcome] = [
        .accepted(status: 200), .retry(at: 60_000, status: 503, reason: "ServiceUnavailable"),
        .final(.rejected, status: 400, reason: "BadCollapseId", attempted: true),
        .final(.unregistered, status: 410, reason: "Unregistered", attempted: true),
        .final(.expired, status: nil, reason: "ttl_expired", attempted: false),
        .paused(status: 403, reason: "InvalidProviderToken"), .handBack,
    ]

    @Test func acceptedCountsTheAttemptAndDropsThePayload() throws {
        let change = Self.complete(Self.row(), .accepted(status: 200))
        let row = try #require(change.row)
        #expect(change.landed && change.landedState == .accepted && change.dropsPayload && !change.pausesApp && change.unregister == nil)
        #expect(row.attempts == 1 && row.apnsStatus == 200 && row.reason == nil && row.acceptedAt == Self.now && row.nextAttemptAt == nil)
        #expect(row.seq == 5 && row.updatedAt == Self.now)
        #expect(change.events.map(\.type) == [.deliveryAccepted])
    }

    @Test func retryCountsTheAttemptAndStaysQueuedUntilItsTime() throws {
        let change = Self.complete(Self.row(attempts: 2), .retry(at: 60_000, status: 503, reason: "ServiceUnavailable"))
        let row = try #require(change.row)
        #expect(change.landedState == .queued && !change.dropsPayload && change.events.isEmpty)
        #expect(row.attempts == 3 && row.apnsStatus == 503 && row.reason == "ServiceUnavailable" && row.nextAttemptAt == 60_000 && row.seq == 5)
    }

    /// The expiry check made when a failed attempt is written: a retry at or past `expires_at`, or of a
    /// `ttl: 0` message, ends the delivery `expired` now (no later claim needed).
    @Test func aRetryAtOrPastExpiryIsExpiredWhenWritten() throws {
        for (claim, at) in [(Self.claim(expiresAt: 60_000), Int64(60_000)), (Self.claim(expiresAt: 60_000), 70_000),
                            (Self.claim(apnsExpiration: 0), 51_000)] {
            let change = Self.complete(Self.row(), .retry(at: at, status: 503, reason: "ServiceUnavailable"), claim: claim)
            let row = try #require(change.row)
            #expect(change.landedState == .expired && change.dropsPayload)
            #expect(row.reason == "ttl_expired" && row.attempts == 1 && row.apnsStatus == 503 && row.nextAttemptAt == nil)
            #expect(change.events.map(\.type) == [.deliveryExpired])
        }
        // Just before: queued.
        #expect(Self.complete(Self.row(), .retry(at: 59_999, status: nil, reason: "timeout"), claim: Self.claim(expiresAt: 60_000)).landedState == .queued)
    }

    @Test func finalAnswersEndTheDelivery() throws {
        let rejected = Self.complete(Self.row(), .final(.rejected, status: 400, reason: "BadCollapseId", attempted: true))
        #expect(rejected.landedState == .rejected && rejected.row?.attempts == 1 && rejected.row?.reason == "BadCollapseId")
        #expect(rejected.dropsPayload && rejected.events.map(\.type) == [.deliveryRejected] && rejected.unregister == nil)
        // An expiry found before sending is not an attempt.
        let expired = Self.complete(Self.row(attempts: 1), .final(.expired, status: nil, reason: "ttl_expired", attempted: false))
        #expect(expired.landedState == .expired && expired.row?.attempts == 1 && expired.row?.apnsStatus == nil)
    }

    /// The 410 timestamp rule: the device is unregistered only if its token was registered before APNs's
    /// timestamp; without one, before now.
    @Test func unregisteredMarksTheDeviceUnderTheTimestampRule() throws {
        let gone = Self.complete(Self.row(), .final(.unregistered, status: 410, reason: "Unregistered", attempted: true), unregisteredAt: 42_000)
        #expect(gone.landedState == .unregistered && gone.events.map(\.type) == [.deliveryUnregistered])
        #expect(gone.unregister == DeviceUnregistration(app: "chat", platform: .apns, environment: .production, address: "ab", reason: "Unregistered",
                                                        registeredBefore: 42_000, at: Self.now))
        let bad = Self.complete(Self.row(), .final(.unregistered, status: 400, reason: "BadDeviceToken", attempted: true))
        #expect(bad.unregister?.registeredBefore == Self.now + 1)
    }

    @Test func pausedIsNotCountedAndPausesTheApp() throws {
        let change = Self.complete(Self.row(attempts: 1), .paused(status: 403, reason: "InvalidProviderToken"))
        let row = try #require(change.row)
        #expect(change.landedState == .queued && change.pausesApp && change.events.isEmpty && !change.dropsPayload)
        #expect(row.attempts == 1 && row.reason == "credentials_paused" && row.apnsStatus == 403 && row.seq == 5)
    }

    @Test func handBackReleasesTheLeaseOnly() throws {
        let change = Self.complete(Self.row(attempts: 1), .handBack)
        #expect(change.landedState == .queued && change.row == Self.row(attempts: 1).record && change.events.isEmpty && !change.dropsPayload)
    }

    /// Gateway v1 §9: a lease that is not the delivery's current one (a newer claim exists) writes nothing,
    /// whatever the outcome; nor does a delivery that is gone.
    @Test(arguments: everyOutcome) func anOldLeaseWritesNothing(_ outcome: AttemptOutcome) {
        let change = Self.complete(Self.row(generation: 4), outcome)
        #expect(change.row == nil && !change.landed && change.events.isEmpty && change.unregister == nil && !change.pausesApp)
        #expect(Self.complete(nil, outcome).row == nil)
    }

    /// Delivered (its receipt came first) or cancelled meanwhile: the state stays; an APNs answer only sets
    /// `apns_status` (gateway v1 §5).
    /// A receipt can overtake the push service's answer: the delivery is `delivered` already, and the answer still
    /// sets the service's id for it (`platform_id`) and its status, nothing else.
    @Test func aLateAcceptanceStillSetsThePlatformID() throws {
        let change = Self.complete(Self.row(state: .delivered), .accepted(status: 201, platformID: "https://push.example/m/1"))
        let row = try #require(change.row)
        #expect(row.state == .delivered && row.platformID == "https://push.example/m/1" && row.apnsStatus == 201 && change.events.isEmpty)
    }

    @Test(arguments: everyOutcome) func aFinalDeliveryKeepsItsState(_ outcome: AttemptOutcome) throws {
        for state in [DeliveryState.delivered, .cancelled] {
            let before = Self.row(state: state)
            let change = Self.complete(before, outcome)
            let row = try #require(change.row, "the lease is released")
            #expect(row.state == state && change.events.isEmpty && change.unregister == nil && !change.pausesApp && !change.dropsPayload)
            #expect(change.landed == (outcome == .handBack))
            var expected = before.record
            switch outcome {
            case .accepted: expected.apnsStatus = 200
            case .retry: expected.apnsStatus = 503
            case let .final(_, status, _, _): expected.apnsStatus = status
            case .paused: expected.apnsStatus = 403
            case .held, .handBack: break
            }
            #expect(row == expected, "\(outcome)")
        }
    }

    /// Gateway v1 §5 (revision 2): a delete that came while the push was in flight lets it end as APNs
    /// answers; only an attempt that did not get it accepted or refused for good ends `cancelled`.
    @Test func aDeleteDuringTheAttemptAppliesOnlyIfAPNsDidNotTakeIt() throws {
        let pending = Self.row(pendingCancel: "message_deleted")
        let accepted = Self.complete(pending, .accepted(status: 200))
        #expect(accepted.landedState == .accepted && accepted.row?.attempts == 1 && accepted.row?.apnsStatus == 200 && accepted.row?.reason == nil)
        let refused = Self.complete(pending, .final(.rejected, status: 400, reason: "BadCollapseId", attempted: true))
        #expect(refused.landedState == .rejected && refused.row?.reason == "BadCollapseId")
        for outcome in [AttemptOutcome.retry(at: 60_000, status: 503, reason: "ServiceUnavailable"), .paused(status: 403, reason: "Forbidden"), .handBack] {
            let change = Self.complete(pending, outcome)
            let row = try #require(change.row)
            #expect(change.landedState == .cancelled && row.reason == "message_deleted" && row.nextAttemptAt == nil && change.dropsPayload)
            #expect(change.events.map(\.type) == [.deliveryCancelled] && !change.pausesApp)
            #expect(row.attempts == (outcome == .handBack || outcome == .paused(status: 403, reason: "Forbidden") ? 0 : 1))
        }
        // A retry past expiry is expired, not cancelled: the ttl ran out first.
        #expect(Self.complete(pending, .retry(at: 200_000, status: 503, reason: "ServiceUnavailable")).landedState == .expired)
    }
}
