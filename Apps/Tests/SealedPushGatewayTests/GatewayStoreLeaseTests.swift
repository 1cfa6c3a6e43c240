import Foundation
import SealedPushCrypto
@testable import SealedPushGateway
import Testing

extension GatewayPostgresSuites {
    /// What a delivery under a lease may and may not become, on both stores: a delete while its push is in
    /// flight (gateway v1 §5, revision 2) and an outcome written under an old lease (§9).
    @Suite("Gateway store: leases, in-flight deletes (SQLite and PostgreSQL)", .serialized, .timeLimit(.minutes(10)))
    struct GatewayStoreLeaseTests {
        typealias F = StoreFixtures

        static func delivery(_ store: any GatewayStore, _ message: String, device: String) async throws -> DeliveryRecord {
            try #require(try await store.message(app: "chat", messageID: message)?.deliveries.first { $0.deviceID == device })
        }

        /// Gateway v1 §5 (revision 2): a DELETE of a message, a device or a user's devices cancels only the
        /// deliveries not in flight; a push in flight ends as APNs answers (accepted stays accepted, counted, with
        /// its status), and is cancelled only if APNs did not take it. Before the fix the DELETE cancelled it at
        /// once (`cancelled, attempts: 0, apns_status: 200`), and a later receipt made it `delivered` with reason
        /// `message_deleted`.
        @Test(arguments: StoreBackend.allCases)
        func aDeleteWhileThePushIsInFlightLetsItEndAsAPNsAnswers(_ backend: StoreBackend) async throws {
            try await withStore(backend) { store in
                let devices = [F.device("a", user: "u", token: 1), F.device("b", user: "u", token: 2), F.device("c", user: "v", token: 3),
                               F.device("d", user: "w", token: 4), F.device("e", user: "x", token: 5)]
                for d in devices { _ = try await store.putDevice(d, maxDevicesPerUser: 10) }
                try await store.insertMessage(F.message("m1", devices: Array(devices[0...1]), at: 1000), idempotency: nil)
                try await store.insertMessage(F.message("m2", devices: [devices[2], devices[3]], at: 1000), idempotency: nil)
                try await store.insertMessage(F.message("m3", devices: [devices[4]], at: 1000), idempotency: nil)
                let claims = try await store.claimDue(app: "chat", platform: .apns, now: 1000, leaseUntil: 5000, limit: 10)
                let byDevice = Dictionary(uniqueKeysWithValues: claims.map { ($0.deviceID, $0) })
                #expect(byDevice.count == 5)

                // Every delivery of m1 is in flight: the DELETE cancels none yet.
                #expect(try await store.cancelMessage(app: "chat", messageID: "m1", now: 1500) == 0)
                #expect(try await Self.delivery(store, "m1", device: "a").state == .queued)
                // a: APNs accepts it. It is accepted, counted, with its status; a receipt makes it delivered, no gateway reason.
                #expect(try await store.completeAttempt(try #require(byDevice["a"]), outcome: .accepted(status: 200), unregisteredAt: nil, now: 1600) == .accepted)
                let a = try await Self.delivery(store, "m1", device: "a")
                #expect(a.state == .accepted && a.attempts == 1 && a.apnsStatus == 200 && a.reason == nil && a.acceptedAt == 1600)
                let token = SHA256Hasher.hash(Array("r-d-m1-a".utf8))
                #expect(try await store.recordReceipt(messageID: "m1", tokenSHA256: token, revealed: false, now: 1700) == .matched(app: "chat", changed: true))
                let opened = try await Self.delivery(store, "m1", device: "a")
                #expect(opened.state == .delivered && opened.reason == nil && opened.attempts == 1)
                // b: APNs answers 503. The delete applies now: cancelled, the attempt counted, never tried again.
                #expect(try await store.completeAttempt(try #require(byDevice["b"]), outcome: .retry(at: 3000, status: 503, reason: "ServiceUnavailable"),
                                                        unregisteredAt: nil, now: 1600) == .cancelled)
                let b = try await Self.delivery(store, "m1", device: "b")
                #expect(b.state == .cancelled && b.reason == "message_deleted" && b.attempts == 1 && b.apnsStatus == 503 && b.nextAttemptAt == nil)

                // The same for deleting a device (c) and a user's devices (d) while their pushes are in flight.
                #expect(try await store.deleteDevice(app: "chat", deviceID: "c", now: 1500) == 0)
                let deletedUser = try await store.deleteUserDevices(app: "chat", userID: "w", now: 1500)
                #expect(deletedUser.devices == 1 && deletedUser.cancelled == 0)
                #expect(try await store.completeAttempt(try #require(byDevice["c"]), outcome: .accepted(status: 200), unregisteredAt: nil, now: 1600) == .accepted)
                #expect(try await store.completeAttempt(try #require(byDevice["d"]), outcome: .paused(status: 403, reason: "Forbidden"),
                                                        unregisteredAt: nil, now: 1600) == .cancelled)
                #expect(try await Self.delivery(store, "m2", device: "c").state == .accepted)
                let d = try await Self.delivery(store, "m2", device: "d")
                #expect(d.state == .cancelled && d.reason == "device_deleted" && d.attempts == 0)

                // e: deleted in flight, and its instance ends without writing the attempt: once the lease lapses the
                // next claim cancels it instead of sending it again.
                #expect(try await store.cancelMessage(app: "chat", messageID: "m3", now: 1500) == 0)
                #expect(try await store.claimDue(app: "chat", platform: .apns, now: 5001, leaseUntil: 9000, limit: 10).isEmpty)
                let e = try await Self.delivery(store, "m3", device: "e")
                #expect(e.state == .cancelled && e.reason == "message_deleted")
                // Its late write lands nowhere.
                #expect(try await store.completeAttempt(try #require(byDevice["e"]), outcome: .accepted(status: 200), unregisteredAt: nil, now: 5002) == nil)

                // A delete with nothing in flight still cancels at once.
                try await store.insertMessage(F.message("m4", devices: [devices[0]], at: 6000), idempotency: nil)
                #expect(try await store.cancelMessage(app: "chat", messageID: "m4", now: 6001) == 1)
                #expect(try await Self.delivery(store, "m4", device: "a").state == .cancelled)
                // The events: accepted, delivered, cancelled for a and b; accepted for c, cancelled for d and e and m4.
                let events = try #require(try await store.events(app: "chat", after: nil, since: 0, limit: 100))
                #expect(events.map(\.type) == [.deliveryAccepted, .deliveryDelivered, .deliveryCancelled, .deliveryAccepted, .deliveryCancelled,
                                               .deliveryCancelled, .deliveryCancelled])
            }
        }

        /// Gateway v1 §9: an outcome is written only under the delivery's current lease. For every outcome kind,
        /// a claim whose lease lapsed and was taken by a newer claim writes nothing: not the row, not an event,
        /// not the device, not the app's pause, and it does not release the newer lease.
        @Test(arguments: StoreBackend.allCases)
        func noOutcomeLandsUnderAnOldLease(_ backend: StoreBackend) async throws {
            let outcomes: [AttemptOutcome] = [
                .accepted(status: 200), .retry(at: 500_000, status: 503, reason: "ServiceUnavailable"),
                .final(.rejected, status: 400, reason: "BadCollapseId", attempted: true),
                .final(.unregistered, status: 410, reason: "Unregistered", attempted: true),
                .final(.expired, status: nil, reason: "ttl_expired", attempted: false),
                .paused(status: 403, reason: "InvalidProviderToken"), .handBack,
            ]
            try await withStore(backend) { store in
                for (n, outcome) in outcomes.enumerated() {
                    let t = Int64(10_000 * (n + 1))
                    let device = F.device("old-\(n)", user: "u\(n)", token: 100 + n)
                    _ = try await store.putDevice(device, maxDevicesPerUser: 10)
                    try await store.insertMessage(F.message("m\(n)", devices: [device], at: t), idempotency: nil)
                    let old = try #require(try await store.claimDue(app: "chat", platform: .apns, now: t, leaseUntil: t + 10, limit: 10).first)
                    let newer = try #require(try await store.claimDue(app: "chat", platform: .apns, now: t + 11, leaseUntil: t + 5000, limit: 10).first)
                    #expect(newer.deliveryID == old.deliveryID && newer.generation > old.generation)
                    let before = try await Self.delivery(store, "m\(n)", device: device.deviceID)
                    let eventsBefore = try await store.events(app: "chat", after: nil, since: 0, limit: 1000)?.count

                    #expect(try await store.completeAttempt(old, outcome: outcome, unregisteredAt: t, now: t + 12) == nil, "\(outcome)")
                    #expect(try await Self.delivery(store, "m\(n)", device: device.deviceID) == before, "\(outcome)")
                    #expect(try await store.events(app: "chat", after: nil, since: 0, limit: 1000)?.count == eventsBefore, "\(outcome)")
                    #expect(try await store.device(app: "chat", deviceID: device.deviceID)?.state == .active, "\(outcome)")
                    #expect(try await store.claimDue(app: "chat", platform: .apns, now: t + 13, leaseUntil: t + 5000, limit: 10).isEmpty, "the newer lease holds: \(outcome)")
                    // The newer claim's outcome lands.
                    #expect(try await store.completeAttempt(newer, outcome: .accepted(status: 200), unregisteredAt: nil, now: t + 14) == .accepted)
                }
                // No paused outcome landed: no delivery waits for credentials.
                for n in outcomes.indices {
                    #expect(try await Self.delivery(store, "m\(n)", device: "old-\(n)").reason == nil)
                }
            }
        }
    }
}
