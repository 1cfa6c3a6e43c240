import Foundation
import Logging
import SealedPushCrypto
import NIOConcurrencyHelpers
import SealedPushGateway
import SealedPushTestSupport
import SealedPushWire
import Testing

extension GatewayPostgresSuites {
    /// Receipts written in groups (#47: PostgreSQL takes every receipt queued meanwhile in one transaction of a
    /// constant number of statements): whatever lands in one group — repeats of one delivery, `revealed` and not,
    /// wrong tokens, unknown message ids — each receipt gets the answer it would get alone, every delivery is
    /// delivered once, with one `delivery.delivered` and at most one `delivery.revealed` event.
    ///
    /// Webhook attempts' outcomes likewise (one statement per group on PostgreSQL): mixed outcomes and stale leases
    /// at once each land as they would alone.
    @Suite("Gateway store: receipts and webhook outcomes in groups, on one store and on two at once", .serialized, .timeLimit(.minutes(5)))
    struct GatewayReceiptSetTests {
        typealias F = StoreFixtures

        /// A receipt for one delivery, and how it is meant to end.
        struct Receipt: Sendable {
            let messageID: String
            let token: String
            let revealed: Bool
            let deliveryID: String?
            let expected: ReceiptResult?
        }

        /// 2 messages × 40 devices; per delivery four receipts (two revealed); and wrong tokens, unknown message ids.
        static func receipts(seed: UInt64) -> (devices: [DeviceRecord], receipts: [Receipt]) {
            let devices = (0..<40).map { F.device("d\($0)", user: "u\($0)", token: $0 + 1) }
            var all: [Receipt] = []
            for m in ["m0", "m1"] {
                for d in devices {
                    let id = "d-\(m)-\(d.deviceID)"
                    for n in 0..<4 { all.append(Receipt(messageID: m, token: "r-\(id)", revealed: n % 2 == 1, deliveryID: id, expected: nil)) }
                }
                for n in 0..<5 { all.append(Receipt(messageID: m, token: "wrong-\(n)", revealed: false, deliveryID: nil, expected: .wrongToken)) }
            }
            for n in 0..<5 { all.append(Receipt(messageID: "m-unknown-\(n)", token: "r-x", revealed: true, deliveryID: nil, expected: .unknownID)) }
            var rng = SeededGenerator(seed: seed)
            all.shuffle(using: &rng)
            return (devices, all)
        }

        static func check(_ stores: [any GatewayStore], seed: UInt64) async throws {
            print("receipts in groups: seed \(seed)")
            let (devices, receipts) = Self.receipts(seed: seed)
            for d in devices { _ = try await stores[0].putDevice(d, maxDevicesPerUser: 10) }
            for m in ["m0", "m1"] { try await stores[0].insertMessage(F.message(m, devices: devices), idempotency: nil) }
            // Every receipt at once, spread over the stores: each store groups what arrives while it writes.
            let results = try await withThrowingTaskGroup(of: (Int, ReceiptResult).self) { group in
                for (n, r) in receipts.enumerated() {
                    let store = stores[n % stores.count]
                    group.addTask {
                        (n, try await store.recordReceipt(messageID: r.messageID, tokenSHA256: SHA256Hasher.hash(Array(r.token.utf8)),
                                                          revealed: r.revealed, now: 5000 + Int64(n)))
                    }
                }
                var out = [ReceiptResult?](repeating: nil, count: receipts.count)
                for try await (n, result) in group { out[n] = result }
                return out
            }
            var firsts: [String: Int] = [:]
            for (r, result) in zip(receipts, results) {
                if let expected = r.expected {
                    let answer = result.map { "\($0)" } ?? "none"
                    #expect(result == .some(expected), "\(r.messageID) \(r.token): \(answer)")
                } else if case let .matched(app, changed, platform)? = result {
                    #expect(app == "chat" && platform == .apns)
                    if changed, let id = r.deliveryID { firsts[id, default: 0] += 1 }
                } else {
                    Issue.record("\(r.deliveryID ?? "?"): \(String(describing: result))")
                }
            }
            // Exactly one receipt of each delivery delivered it.
            #expect(firsts.count == 80 && firsts.values.allSatisfy { $0 == 1 }, "\(firsts.filter { $0.value != 1 })")
            for m in ["m0", "m1"] {
                let message = try #require(try await stores[0].message(app: "chat", messageID: m))
                #expect(message.deliveries.count == 40)
                for d in message.deliveries {
                    #expect(d.state == .delivered && d.deliveredAt != nil && d.revealedAt != nil, "\(d.deliveryID) \(d.state)")
                }
            }
            let events = try #require(try await stores[0].events(app: "chat", after: nil, since: 0, limit: 1000))
            let delivered = events.filter { $0.type == .deliveryDelivered }, revealed = events.filter { $0.type == .deliveryRevealed }
            #expect(delivered.count == 80 && revealed.count == 80, "\(delivered.count) delivered, \(revealed.count) revealed")
            #expect(Set(events.map(\.id)).count == events.count)
        }

        @Test(arguments: StoreBackend.allCases)
        func oneStoreGroupsWhatArrivesAtOnce(_ backend: StoreBackend) async throws {
            try await withStore(backend) { store in try await Self.check([store], seed: UInt64.random(in: 1...UInt64.max)) }
        }

        /// 60 events claimed, then at once: 20 acknowledged, 20 retried, 10 dropped, 10 handed back, and a stale
        /// (earlier-generation) outcome for each acknowledged one, which writes nothing.
        @Test(arguments: StoreBackend.allCases)
        func webhookOutcomesInOneGroupLandAsAlone(_ backend: StoreBackend) async throws {
            try await withStore(backend) { store in
                let devices = (0..<60).map { F.device("d\($0)", user: "u\($0)", token: $0 + 1) }
                for d in devices { _ = try await store.putDevice(d, maxDevicesPerUser: 10) }
                try await store.insertMessage(F.message("m", devices: devices), idempotency: nil)
                #expect(try await store.cancelMessage(app: "chat", messageID: "m", now: 1500) == 60)
                let stale = try await store.claimEvents(app: "chat", now: 2000, leaseUntil: 3000, limit: 100)
                let claims = try await store.claimEvents(app: "chat", now: 4000, leaseUntil: 60_000, limit: 100)
                #expect(stale.count == 60 && claims.count == 60)
                let outcomes: [(ClaimedEvent, EventOutcome, Bool)] = claims.enumerated().map { n, claim in
                    switch n {
                    case 0..<20: (claim, .acknowledged, true)
                    case 20..<40: (claim, .retry(at: 9000), true)
                    case 40..<50: (claim, .dropped, true)
                    default: (claim, .handBack, true)
                    }
                } + stale.prefix(20).map { ($0, .acknowledged, false) }
                let results = try await withThrowingTaskGroup(of: (Int, Bool).self) { group in
                    for (n, (claim, outcome, _)) in outcomes.enumerated() {
                        group.addTask { (n, try await store.completeEvent(claim, outcome: outcome, now: 4500)) }
                    }
                    var out = [Bool](repeating: false, count: outcomes.count)
                    for try await (n, ok) in group { out[n] = ok }
                    return out
                }
                #expect(results == outcomes.map(\.2), "each outcome written exactly when its lease is current")
                // Handed back: due at once, attempt not counted; retried: due at 9000, one attempt; the rest final.
                let back = try await store.claimEvents(app: "chat", now: 5000, leaseUntil: 60_000, limit: 100)
                #expect(back.map(\.id).sorted() == claims[50...].map(\.id).sorted() && back.allSatisfy { $0.attempts == 0 })
                let retried = try await store.claimEvents(app: "chat", now: 9000, leaseUntil: 60_000, limit: 100)
                #expect(retried.map(\.id).sorted() == claims[20..<40].map(\.id).sorted() && retried.allSatisfy { $0.attempts == 1 })
                let app = try #require(try await store.dashboard(now: 9000).apps["chat"])
                #expect(app.eventsDropped == 10 && app.eventsPending == 30, "\(app.eventsDropped) dropped, \(app.eventsPending) pending")
            }
        }

        /// Two instances on one database: their groups lock the same rows in delivery-id order, never in a cycle.
        @Test func twoStoresOnOneDatabase() async throws {
            let url = try await PostgresCluster.shared().makeDatabase()
            let a = try await PostgresGatewayStore.open(url: url, options: .forTests, logger: GatewayPostgresTests.logger)
            let b = try await PostgresGatewayStore.open(url: url, options: .forTests, logger: GatewayPostgresTests.logger)
            do { try await Self.check([a, b], seed: UInt64.random(in: 1...UInt64.max)) } catch {
                await a.close(); await b.close()
                throw error
            }
            await a.close(); await b.close()
        }
    }
}
