import Foundation
import Logging
import NIOConcurrencyHelpers
import PostgresNIO
@testable import SealedPushGateway
import SealedPushWire
import SealedPushCrypto
import Testing

extension GatewayPostgresSuites {
    /// The store's side of webhooks (gateway v1 §8) and the dashboard, without HTTP: what a second backend
    /// (PostgreSQL) must also do. Events are written by the change that causes them, claimed under a lease
    /// whose generation guards the outcome, listed after an id, pruned; the dashboard counts what is stored.
    @Suite("Gateway store: events and the dashboard's numbers", .serialized, .timeLimit(.minutes(5)))
    struct GatewayEventStoreTests {
        static func message(_ id: String, devices: [String], at t: Int64) -> NewMessage {
            NewMessage(app: "chat", messageID: id, createdAt: t, expiresAt: t + 3_600_000, deliveries: devices.enumerated().map { n, device in
                NewDelivery(deliveryID: "d_\(id)_\(n)", deviceID: device, address: String(format: "%064x", n + 1), environment: .production,
                            payload: [1, 2, 3], receiptTokenSHA256: nil, priority: 10, collapseID: "c", apnsExpiration: 0, apnsID: "a-\(id)-\(n)")
            })
        }

        static func body(_ e: EventRecord) -> JSONObject {
            (try? JSON.parse(e.body)).flatMap { if case let .object(o) = $0 { o } else { nil } } ?? JSONObject([])
        }

        @Test(arguments: StoreBackend.allCases)
        func eventsAreWrittenByTheirChangeAndClaimedUnderALease(_ backend: StoreBackend) async throws {
            try await withStore(backend) { store in try await Self.eventsAreWrittenByTheirChangeAndClaimedUnderALease(store) }
        }

        static func eventsAreWrittenByTheirChangeAndClaimedUnderALease(_ store: any GatewayStore) async throws {
            let t: Int64 = 1_800_000_000_000
            for (n, id) in ["d1", "d2"].enumerated() {
                _ = try await store.putDevice(DeviceRecord(
                    app: "chat", deviceID: id, userID: "u", address: String(format: "%064x", n + 1), environment: .production,
                    keyRecord: Array("{}".utf8), keyID: "00000000000000a\(n)", state: .active, createdAt: t - 10, updatedAt: t - 10,
                    registeredAt: t - 10, unregisteredAt: nil, unregisteredReason: nil, tokenReassigned: false, lastReport: nil), maxDevicesPerUser: 10)
            }
            try await store.insertMessage(Self.message("m1", devices: ["d1", "d2"], at: t), idempotency: nil)
            #expect(try await store.events(app: "chat", after: nil, since: 0, limit: 100)?.isEmpty == true, "queued makes no event")

            // accepted (d1) and unregistered (d2, which also unregisters the device): three events, one transaction each.
            let claims = try await store.claimDue(app: "chat", platform: .apns, now: t, leaseUntil: t + 60_000, limit: 10).sorted { $0.deviceID < $1.deviceID }
            #expect(claims.count == 2)
            #expect(try await store.complete(claims[0], outcome: .accepted(status: 200), unregisteredAt: nil, now: t + 1))
            #expect(try await store.complete(claims[1], outcome: .final(.unregistered, status: 410, reason: "Unregistered", attempted: true),
                                             unregisteredAt: nil, now: t + 2))
            var events = try #require(try await store.events(app: "chat", after: nil, since: 0, limit: 100))
            #expect(events.map(\.type) == [.deliveryAccepted, .deliveryUnregistered, .deviceUnregistered])
            let accepted = Self.body(events[0])
            #expect(accepted["id"]?.stringValue == events[0].id && accepted["app"]?.stringValue == "chat")
            #expect(accepted["data"]?.objectValue?["message_id"]?.stringValue == "m1")
            let delivery = try #require(accepted["data"]?.objectValue?["delivery"]?.objectValue)
            let stored = try #require(try await store.message(app: "chat", messageID: "m1")?.deliveries.first { $0.deviceID == "d1" })
            #expect(delivery["state"]?.stringValue == "accepted" && delivery["seq"] == .int(stored.seq), "the delivery as it is after the change")
            #expect(Self.body(events[2])["data"]?.objectValue?["device_id"]?.stringValue == "d2")

            // A receipt and a deleted message make their events too; a stale generation writes nothing.
            #expect(try await store.complete(claims[0], outcome: .accepted(status: 200), unregisteredAt: nil, now: t + 3) == false)
            try await store.insertMessage(Self.message("m2", devices: ["d1"], at: t + 4), idempotency: nil)
            #expect(try await store.cancelMessage(app: "chat", messageID: "m2", now: t + 5) == 1)
            events = try #require(try await store.events(app: "chat", after: nil, since: 0, limit: 100))
            #expect(events.map(\.type).last == .deliveryCancelled && events.count == 4)

            // Listing after an id; an unknown id is nil; `since` hides older ones; `limit` pages.
            #expect(try await store.events(app: "chat", after: events[1].id, since: 0, limit: 100)?.map(\.id) == events[2...].map(\.id))
            #expect(try await store.events(app: "chat", after: events[0].id, since: 0, limit: 1)?.map(\.id) == [events[1].id])
            #expect(try await store.events(app: "chat", after: "evt_" + String(repeating: "0", count: 32), since: 0, limit: 100) == nil)
            #expect(try await store.events(app: "other", after: events[0].id, since: 0, limit: 100) == nil, "another app's id")
            #expect(try await store.events(app: "chat", after: nil, since: t + 5, limit: 100)?.count == 1)

            // Claims: leased events are not claimed again until the lease lapses; the outcome needs the current lease.
            let first = try await store.claimEvents(app: "chat", now: t + 10, leaseUntil: t + 1_000, limit: 2)
            #expect(first.map(\.id) == [events[0].id, events[1].id])
            #expect(try await store.claimEvents(app: "chat", now: t + 20, leaseUntil: t + 1_000, limit: 10).map(\.id) == [events[2].id, events[3].id])
            #expect(try await store.claimEvents(app: "chat", now: t + 30, leaseUntil: t + 1_000, limit: 10).isEmpty, "all leased")
            let again = try await store.claimEvents(app: "chat", now: t + 2_000, leaseUntil: t + 3_000, limit: 1)
            #expect(again.map(\.id) == [events[0].id] && again[0].generation == first[0].generation + 1, "a lapsed lease is claimed again")
            #expect(try await store.completeEvent(first[0], outcome: .acknowledged, now: t + 2_001) == false, "the old lease writes nothing")
            #expect(try await store.completeEvent(again[0], outcome: .retry(at: t + 5_000), now: t + 2_002))
            #expect(try await store.claimEvents(app: "chat", now: t + 4_000, leaseUntil: t + 9_000, limit: 10).map(\.id) == [events[1].id, events[2].id, events[3].id])
            let retried = try await store.claimEvents(app: "chat", now: t + 5_000, leaseUntil: t + 9_000, limit: 10)
            #expect(retried.map(\.id) == [events[0].id] && retried[0].attempts == 1)
            #expect(try await store.completeEvent(retried[0], outcome: .acknowledged, now: t + 5_001))
            #expect(try await store.completeEvent(retried[0], outcome: .acknowledged, now: t + 5_002) == false, "final")

            // The dashboard's numbers.
            let now = t + 6_000
            let snapshot = try await store.dashboard(now: now)
            let app = try #require(snapshot.apps["chat"])
            #expect(app.lastHour == ["accepted": 1, "unregistered": 1, "cancelled": 1] && app.lastDay == app.lastHour)
            #expect(app.hourly[0] == app.lastHour && app.hourly[1...].allSatisfy(\.isEmpty))
            #expect(app.acceptedLastDay == 1 && app.deliveredLastDay == 0)
            #expect(app.answers.sorted { $0.status < $1.status } == [.init(platform: .apns, status: 200, reason: "", count: 1), .init(platform: .apns, status: 410, reason: "Unregistered", count: 1)])
            #expect(app.devicesActive == 1 && app.devicesUnregistered == 1 && app.queued == 0)
            #expect(app.eventsPending == 3 && app.eventsDropped == 0, "one acknowledged of four")
            #expect(snapshot.instances.count == 1 && snapshot.instances[0].leasedEvents == 3, "three still leased until t + 9000")

            // Pruning deletes events written before the cutoff, whatever their state.
            #expect(try await store.prune(messagesExpiredBefore: 0, idempotencyBefore: 0, eventsBefore: t + 3, limit: 100) == 3)
            #expect(try await store.events(app: "chat", after: nil, since: 0, limit: 100)?.map(\.type) == [.deliveryCancelled])
        }

        /// A revealed receipt makes its delivery delivered and sets `revealed_at` once: `delivery.delivered`, then
        /// `delivery.revealed`; a repeat writes nothing.
        @Test(arguments: StoreBackend.allCases)
        func aRevealedReceiptIsDeliveredAndRevealedOnce(_ backend: StoreBackend) async throws {
            try await withStore(backend) { store in
                let device = StoreFixtures.device("a", user: "u", token: 1)
                _ = try await store.putDevice(device, maxDevicesPerUser: 10)
                try await store.insertMessage(StoreFixtures.message("m", devices: [device]), idempotency: nil)
                let token = SHA256Hasher.hash(Array("r-d-m-a".utf8))
                #expect(try await store.recordReceipt(messageID: "m", tokenSHA256: token, revealed: true, now: 2000) == .matched(app: "chat", changed: true))
                #expect(try await store.recordReceipt(messageID: "m", tokenSHA256: token, revealed: true, now: 3000) == .matched(app: "chat", changed: false))
                let d = try #require(try await store.message(app: "chat", messageID: "m")?.deliveries.first)
                #expect(d.state == .delivered && d.deliveredAt == 2000 && d.revealedAt == 2000)
                let events = try #require(try await store.events(app: "chat", after: nil, since: 0, limit: 10))
                #expect(events.map(\.type) == [.deliveryDelivered, .deliveryRevealed])
                #expect(Self.body(events[1])["data"]?.objectValue?["delivery"]?.objectValue?["revealed_at"] != nil)
            }
        }

        /// On PostgreSQL an event's position is drawn at its INSERT, not its COMMIT: while a transaction that
        /// drew a lower position is still open, the listing does not answer a higher one (a reader paging with
        /// `after=` it would never see the lower); once that transaction ends both come, in order.
        @Test func theListingNeverStepsOverAnEventStillBeingWritten() async throws {
            let url = try await PostgresCluster.shared().makeDatabase()
            var options = PostgresGatewayStore.Options()
            options.eventsSettleWait = .milliseconds(300)
            let store = try await PostgresGatewayStore.open(url: url, options: options, logger: Logger(label: "pg-events"))
            @Sendable func event(_ id: String) -> EventRecord {
                EventRecord(id: id, app: "chat", type: .deliveryAccepted, createdAt: 1000, body: Array(#"{"id":"\#(id)"}"#.utf8))
            }
            let first = "evt_" + String(repeating: "1", count: 32), second = "evt_" + String(repeating: "2", count: 32)
            let drawn = NIOLockedValueBox(false), release = NIOLockedValueBox(false)
            // The first writer changes a row (so it has a transaction id), draws its position, then holds its
            // transaction open until released (at most 60 s).
            let slow = Task {
                try await store.transaction { conn in
                    try await conn.rows("INSERT INTO known_users (app, user_id) VALUES ('chat', 'writer-1')", logger: store.logger)
                    try await store.insertEvent(conn, event(first))
                    drawn.withLockedValue { $0 = true }
                    let bound = ContinuousClock.now + .seconds(60)
                    while !release.withLockedValue({ $0 }), ContinuousClock.now < bound { try await Task.sleep(for: .milliseconds(10)) }
                }
            }
            let bound = ContinuousClock.now + .seconds(30)
            while !drawn.withLockedValue({ $0 }), ContinuousClock.now < bound { try await Task.sleep(for: .milliseconds(10)) }
            #expect(drawn.withLockedValue { $0 })
            // The second writer draws a higher position and commits.
            try await store.transaction { conn in
                try await conn.rows("INSERT INTO known_users (app, user_id) VALUES ('chat', 'writer-2')", logger: store.logger)
                try await store.insertEvent(conn, event(second))
            }
            let meanwhile = try #require(try await store.events(app: "chat", after: nil, since: 0, limit: 100))
            #expect(!meanwhile.map(\.id).contains(second), "the listing answered a position above one still being written")
            release.withLockedValue { $0 = true }
            try await slow.value
            let after = try #require(try await store.events(app: "chat", after: nil, since: 0, limit: 100))
            #expect(after.map(\.id) == [first, second])
            await store.close()
        }
    }
}
