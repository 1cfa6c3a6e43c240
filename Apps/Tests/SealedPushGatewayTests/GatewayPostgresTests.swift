import Foundation
import Logging
import NIOConcurrencyHelpers
import SealedPushAPNs
import SealedPushAPNsCore
import SealedPushGateway
import SealedPushTestSupport
import SealedPushWire
import Testing

extension GatewayPostgresSuites {
    /// Several gateway instances on one PostgreSQL database (gateway v1 §9), against a throwaway cluster the
    /// tests start: no push sent twice, a dead instance's leases taken over, a database restart survived.
    @Suite("Gateway on PostgreSQL: several instances", .serialized, .timeLimit(.minutes(10)))
    struct GatewayPostgresTests {
        static var logger: Logger {
            var logger = Logger(label: "pg-test")
            logger.logLevel = .warning
            return logger
        }

        /// Two stores claiming one queue at once (`FOR UPDATE SKIP LOCKED`) never claim a delivery twice.
        @Test func twoStoresClaimingAtOnceNeverShareADelivery() async throws {
            let url = try await PostgresCluster.shared().makeDatabase()
            let a = try await PostgresGatewayStore.open(url: url, options: .forTests, logger: Self.logger)
            let b = try await PostgresGatewayStore.open(url: url, options: .forTests, logger: Self.logger)
            do {
                #expect(a.instanceID != b.instanceID)
                #expect(try await a.idempotencySecret() == b.idempotencySecret(), "one secret for every instance")
                var devices: [DeviceRecord] = []
                for n in 0..<100 {
                    let d = StoreFixtures.device("d\(n)", user: "u\(n)", token: n + 1)
                    _ = try await a.putDevice(d, maxDevicesPerUser: 10)
                    devices.append(d)
                }
                for m in 0..<4 { try await a.insertMessage(StoreFixtures.message("m\(m)", devices: devices), idempotency: nil) }
                let claimed = NIOLockedValueBox<[String]>([])
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for store in [a, b, a, b] {
                        group.addTask {
                            while true {
                                let claims = try await store.claimDue(app: "chat", platform: .apns, now: 2000, leaseUntil: 60_000, limit: 7)
                                if claims.isEmpty { return }
                                claimed.withLockedValue { $0 += claims.map(\.deliveryID) }
                            }
                        }
                    }
                    try await group.waitForAll()
                }
                let ids = claimed.withLockedValue { $0 }
                #expect(ids.count == 400 && Set(ids).count == 400)
                #expect(a.liveInstances >= 1)
            } catch {
                await a.close(); await b.close()
                throw error
            }
            await a.close(); await b.close()
        }

        /// Two stores claiming one app's events at once (`FOR UPDATE SKIP LOCKED`) never claim an event twice.
        @Test func twoStoresClaimingEventsAtOnceNeverShareAnEvent() async throws {
            let url = try await PostgresCluster.shared().makeDatabase()
            let a = try await PostgresGatewayStore.open(url: url, options: .forTests, logger: Self.logger)
            let b = try await PostgresGatewayStore.open(url: url, options: .forTests, logger: Self.logger)
            do {
                var devices: [DeviceRecord] = []
                for n in 0..<100 {
                    let d = StoreFixtures.device("d\(n)", user: "u\(n)", token: n + 1)
                    _ = try await a.putDevice(d, maxDevicesPerUser: 10)
                    devices.append(d)
                }
                // 400 `delivery.cancelled` events, written by both stores.
                for m in 0..<4 {
                    let store = m % 2 == 0 ? a : b
                    try await store.insertMessage(StoreFixtures.message("m\(m)", devices: devices), idempotency: nil)
                    #expect(try await store.cancelMessage(app: "chat", messageID: "m\(m)", now: 1500) == 100)
                }
                let claimed = NIOLockedValueBox<[String]>([])
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for store in [a, b, a, b] {
                        group.addTask {
                            while true {
                                let claims = try await store.claimEvents(app: "chat", now: 2000, leaseUntil: 60_000, limit: 7)
                                if claims.isEmpty { return }
                                claimed.withLockedValue { $0 += claims.map(\.id) }
                            }
                        }
                    }
                    try await group.waitForAll()
                }
                let ids = claimed.withLockedValue { $0 }
                #expect(ids.count == 400 && Set(ids).count == 400)
                let snapshot = try await a.dashboard(now: 2000)
                #expect(snapshot.instances.count == 2 && snapshot.instances.map(\.leasedEvents).reduce(0, +) == 400)
                #expect(snapshot.apps["chat"]?.eventsPending == 400)
            } catch {
                await a.close(); await b.close()
                throw error
            }
            await a.close(); await b.close()
        }

        /// Two gateways on one database, each taking half the messages: every delivery reaches the local APNs
        /// exactly once (no apns-id twice), whichever instance claimed it.
        @Test func twoInstancesDeliverOneQueueWithNoPushTwice() async throws {
            let url = try await PostgresCluster.shared().makeDatabase()
            let apns = try await TestAPNs()
            let first = try await GatewayHarness(name: "pg-a", apns: apns, database: url)
            let second: GatewayHarness
            do { second = try await GatewayHarness(name: "pg-b", apns: apns, database: url) } catch {
                await first.stop(); await apns.stop(); throw error
            }
            do {
                var phones: [Phone] = []
                for n in 0..<6 {
                    let phone = try Phone(in: first.directory, name: "p\(n)", token: hexToken(0x100 + n))
                    let registered = try await (n % 2 == 0 ? first : second).register(phone, device: "p\(n)", user: "u-\(n % 3)")
                    #expect(registered.status == 201, "\(registered.text)")
                    phones.append(phone)
                }
                var ids: [String] = []
                for m in 0..<20 {
                    let g = m % 2 == 0 ? first : second
                    let sent = try await g.send(JSONObject([("user_ids", .array(["u-0", "u-1", "u-2"]))]), body: "m\(m)")
                    #expect(sent.status == 202, "\(sent.text)")
                    ids.append(try #require(sent.json["message_id"]?.stringValue))
                }
                for id in ids { try await (Bool.random() ? first : second).waitForStates(id, ["accepted"]) }
                let pushes = apns.pushes
                #expect(pushes.count == 120, "6 devices × 20 messages, each sent once")
                #expect(Set(pushes.map(\.apnsID)).count == pushes.count, "no apns-id twice")
                // A receipt posted to either instance lands (the other reads it).
                let push = try #require(pushes.first { $0.deviceToken == phones[0].token })
                #expect(await phones[0].open(push.payload, transport: first.receipts).outcome == .decrypted)
            } catch {
                await first.stop(); await second.stop(); await apns.stop()
                throw error
            }
            await first.stop()
            await second.stop()
            await apns.stop()
        }

        /// An instance that stops mid-run without finishing its attempts (its store closed: no heartbeat, no
        /// outcomes): once its leases lapse, the other instance sends them, each once.
        @Test func aDeadInstancesLeasesAreTakenOverByTheOther() async throws {
            let url = try await PostgresCluster.shared().makeDatabase()
            let apns = try await TestAPNs()
            // The instance that dies: its APNs never answers, its lease is 2 s.
            let hanging = ScriptedAPNs()
            hanging.delay.withLockedValue { $0 = .seconds(3600) }
            var dyingOptions = scriptedOptions(hanging)
            dyingOptions.lease = .seconds(2)
            dyingOptions.drainTimeout = .milliseconds(100)
            let dying = try await GatewayHarness(name: "pg-dying", options: dyingOptions, apns: apns, database: url)
            var survivor: GatewayHarness?
            do {
                for n in 0..<4 {
                    try await dying.register(try Phone(in: dying.directory, name: "p\(n)", token: hexToken(0x200 + n)), device: "p\(n)", user: "u")
                }
                var ids: [String] = []
                for m in 0..<5 {
                    let sent = try await dying.send(JSONObject([("user_id", "u")]), body: "m\(m)")
                    #expect(sent.status == 202, "\(sent.text)")
                    ids.append(try #require(sent.json["message_id"]?.stringValue))
                }
                try await waitUntil("the dying instance to claim every delivery", within: .seconds(30)) { hanging.seen.withLockedValue { $0.count } == 20 }
                // It dies: its database connections and heartbeat stop; its attempts never finish.
                await dying.gateway.store.close()
                let started = ContinuousClock.now
                let other = try await GatewayHarness(name: "pg-survivor", apns: apns, database: url)
                survivor = other
                for id in ids { try await other.waitForStates(id, ["accepted"], within: .seconds(60)) }
                let took = started.duration(to: .now)
                let pushes = apns.pushes
                #expect(pushes.count == 20 && Set(pushes.map(\.apnsID)).count == 20, "each delivery sent once by the survivor")
                // Its apns-ids are the ones the dead instance had drawn (the same delivery, tried again).
                #expect(Set(pushes.map(\.apnsID)) == Set(hanging.seen.withLockedValue { $0 }.map(\.apnsID)))
                #expect(took < .seconds(30), "taken over \(took) after the death, with a 2 s lease")
                for id in ids {
                    let m = try await other.api.call(.GET, "/v1/apps/chat/messages/\(id)").json
                    #expect((m["deliveries"]?.arrayValue ?? []).allSatisfy { $0.objectValue?["attempts"] == .int(1) })
                }
            } catch {
                await dying.stop(); await survivor?.stop(); await apns.stop()
                throw error
            }
            await dying.stop()
            await survivor?.stop()
            await apns.stop()
        }

        /// An instance whose APNs answers after three leases is slow, not dead: its heartbeat renews the leases of
        /// the attempts it has in flight, so the other live instance never takes them over; each is sent once.
        @Test func aSlowInstancesLeasesAreRenewedNotTakenOver() async throws {
            let cluster = try await PostgresCluster.shared()
            let url = try await cluster.makeDatabase()
            let apns = try await TestAPNs()
            let slowAPNs = ScriptedAPNs()
            var slowOptions = scriptedOptions(slowAPNs)
            slowOptions.lease = .milliseconds(1500)  // the heartbeat renews every 500 ms
            let slow = try await GatewayHarness(name: "pg-slow", options: slowOptions, apns: apns, database: url)
            let otherAPNs = ScriptedAPNs()
            var otherOptions = scriptedOptions(otherAPNs)
            otherOptions.lease = .milliseconds(1500)
            var other: GatewayHarness?
            do {
                for n in 0..<4 {
                    try await slow.register(try Phone(in: slow.directory, name: "p\(n)", token: hexToken(0x400 + n)), device: "p\(n)", user: "u")
                }
                try await slow.register(try Phone(in: slow.directory, name: "w", token: hexToken(0x4ff)), device: "w", user: "w")
                // A first claim sets the heartbeat's pace to a third of the lease, from the heartbeat after it (the
                // one already asleep when the instance started waits the 5 s default): one quick message, then
                // a heartbeat, before the slow attempts.
                let warmUp = try #require(try await slow.send(JSONObject([("user_id", "w")]), body: "warm-up").json["message_id"]?.stringValue)
                try await slow.waitForStates(warmUp, ["accepted"])
                let warmedAt = Int64(Date().timeIntervalSince1970 * 1000)
                try await waitUntil("a heartbeat after the first claim", within: .seconds(15)) {
                    let seen = try await cluster.query(url, "SELECT max(last_seen) FROM instances").first?.first.flatMap { Int64($0) } ?? 0
                    if seen <= warmedAt { try await Task.sleep(for: .milliseconds(100)) }
                    return seen > warmedAt
                }
                slowAPNs.delay.withLockedValue { $0 = .seconds(6) }
                let sent = try await slow.send(JSONObject([("user_id", "u")]), body: "slow")
                #expect(sent.status == 202, "\(sent.text)")
                let id = try #require(sent.json["message_id"]?.stringValue)
                try await waitUntil("the slow instance to claim the four deliveries", within: .seconds(30)) { slowAPNs.seen.withLockedValue { $0.count } == 5 }
                other = try await GatewayHarness(name: "pg-alive", options: otherOptions, apns: apns, database: url)
                let message = try await slow.waitForStates(id, ["accepted"], within: .seconds(60))
                #expect(otherAPNs.seen.withLockedValue { $0.isEmpty }, "the live instance took over leases the heartbeat renewed")
                #expect(slowAPNs.seen.withLockedValue { $0.count } == 5, "each delivery sent once (and the warm-up)")
                #expect((message["deliveries"]?.arrayValue ?? []).allSatisfy { $0.objectValue?["attempts"] == .int(1) })
            } catch {
                await slow.stop(); await other?.stop(); await apns.stop()
                throw error
            }
            await slow.stop()
            await other?.stop()
            await apns.stop()
        }

        /// Two live instances divide the app's `max_in_flight` (4) between them: never more than 4 APNs requests
        /// at once in all, 2 per instance, while a queue of 24 deliveries drains through both.
        @Test func maxInFlightIsDividedAmongLiveInstances() async throws {
            let url = try await PostgresCluster.shared().makeDatabase()
            let apns = try await TestAPNs()
            let all = GaugedAPNs(parent: nil)
            let firstAPNs = GaugedAPNs(parent: all), secondAPNs = GaugedAPNs(parent: all)
            func options(_ apns: GaugedAPNs) -> GatewayOptions {
                var o = GatewayOptions()
                o.makeAPNsClient = { _, _, _ in apns }
                return o
            }
            let limit = JSONObject([("max_in_flight", .int(4))])
            let first = try await GatewayHarness(name: "pg-share-a", options: options(firstAPNs), extraApp: limit, apns: apns, database: url)
            var second: GatewayHarness?
            do {
                let other = try await GatewayHarness(name: "pg-share-b", options: options(secondAPNs), extraApp: limit, apns: apns, database: url)
                second = other
                for n in 0..<4 {
                    try await first.register(try Phone(in: first.directory, name: "p\(n)", token: hexToken(0x500 + n)), device: "p\(n)", user: "u")
                }
                // Each counts the other at its next heartbeat (every 5 s).
                try await waitUntil("each instance to count two live instances", within: .seconds(30)) {
                    first.gateway.store.liveInstances == 2 && other.gateway.store.liveInstances == 2
                }
                var ids: [String] = []
                for m in 0..<6 {
                    let sent = try await (m % 2 == 0 ? first : other).send(JSONObject([("user_id", "u")]), body: "m\(m)")
                    #expect(sent.status == 202, "\(sent.text)")
                    ids.append(try #require(sent.json["message_id"]?.stringValue))
                }
                for id in ids { try await first.waitForStates(id, ["accepted"], within: .seconds(60)) }
                #expect(all.sent.withLockedValue { $0 } == 24)
                #expect(all.peak.withLockedValue { $0 } <= 4, "max_in_flight 4 across both instances")
                #expect(firstAPNs.peak.withLockedValue { $0 } <= 2 && secondAPNs.peak.withLockedValue { $0 } <= 2, "each instance's share is 4 / 2")
                #expect(firstAPNs.sent.withLockedValue { $0 } > 0 && secondAPNs.sent.withLockedValue { $0 } > 0, "both instances sent")
            } catch {
                await first.stop(); await second?.stop(); await apns.stop()
                throw error
            }
            await first.stop()
            await second?.stop()
            await apns.stop()
        }

        /// PostgreSQL restarted while messages are being sent: a send the database could not store is answered
        /// 503 (never a 202 that is lost), the pool reconnects, and every message answered 202 is delivered.
        @Test func everyAcceptedMessageIsDeliveredAcrossADatabaseRestart() async throws {
            let cluster = try await PostgresCluster.shared()
            let url = try await cluster.makeDatabase()
            // A short lease: an attempt whose outcome could not be written during the restart is tried again soon.
            var options = GatewayOptions()
            options.lease = .seconds(5)
            try await withGateway("pg-restart", options: options, database: url) { g in
                for n in 0..<3 {
                    try await g.register(try Phone(in: g.directory, name: "p\(n)", token: hexToken(0x300 + n)), device: "p\(n)", user: "u")
                }
                let accepted = NIOLockedValueBox<[String]>([])
                let refused = NIOLockedValueBox(0)
                let restarted = NIOLockedValueBox(false)
                let acceptedAfterRestart = NIOLockedValueBox(0)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        // Sends until 10 messages were accepted after the restart (bounded: at most 400 requests).
                        var n = 0
                        while acceptedAfterRestart.withLockedValue({ $0 }) < 10, n < 400 {
                            n += 1
                            let answer = try await g.send(JSONObject([("user_id", "u")]), body: "m\(n)")
                            if answer.status == 202 {
                                accepted.withLockedValue { $0.append(answer.json["message_id"]?.stringValue ?? "") }
                                if restarted.withLockedValue({ $0 }) { acceptedAfterRestart.withLockedValue { $0 += 1 } }
                            } else {
                                #expect(answer.status == 503, "\(answer.text)")
                                refused.withLockedValue { $0 += 1 }
                                try await Task.sleep(for: .milliseconds(50))
                            }
                        }
                    }
                    group.addTask {
                        try await waitUntil("a few messages accepted before the restart", within: .seconds(60)) { accepted.withLockedValue { $0.count } >= 5 }
                        try await cluster.restart()
                        restarted.withLockedValue { $0 = true }
                    }
                    try await group.waitForAll()
                }
                let ids = accepted.withLockedValue { $0 }
                #expect(acceptedAfterRestart.withLockedValue { $0 } >= 10, "the gateway took messages again after the restart")
                #expect(!ids.contains(""))
                for id in ids { try await g.waitForStates(id, ["accepted"], within: .seconds(120)) }
                // At least once: an attempt APNs accepted but whose outcome the restart cut off is sent again, with
                // its apns-id; a send answered 503 whose COMMIT nonetheless landed is delivered too.
                let sent = Set(g.apns.pushes.map(\.apnsID))
                #expect(sent.count >= ids.count * 3, "\(ids.count) messages accepted (\(refused.withLockedValue { $0 }) refused with 503), each sent to 3 phones")
                let ready = try await g.admin.call(.GET, "/readyz", key: nil)
                #expect(ready.status == 200, "\(ready.text)")
            }
        }

        /// The configuration's PostgreSQL URL with an unreachable server: the start fails with a message naming
        /// the database (without its password) and what to check.
        @Test func anUnreachableDatabaseStopsTheStartWithAClearError() async throws {
            let port = try GatewayHarness.freePort()
            let started = ContinuousClock.now
            let error = await #expect(throws: GatewayStoreError.self) {
                var options = PostgresGatewayStore.Options()
                options.startTimeout = .seconds(3)
                _ = try await PostgresGatewayStore.open(url: "postgres://gw:secret-pw@127.0.0.1:\(port)/gw?sslmode=disable", options: options,
                                                        logger: Self.logger)
            }
            let text = error?.description ?? ""
            #expect(text.contains("postgres://gw@127.0.0.1:\(port)/gw"), "\(text)")
            #expect(!text.contains("secret-pw"))
            #expect(text.contains("check that it runs"))
            // The start timeout ends the start: the pool, which keeps retrying the server, is stopped.
            #expect(started.duration(to: .now) < .seconds(15), "the 3 s start timeout took \(started.duration(to: .now))")
        }
    }
}

/// An APNs stand-in that answers 200 after 200 ms and counts the requests it holds at once (and its parent's,
/// when several instances send through children of one).
final class GaugedAPNs: APNsSending {
    let parent: GaugedAPNs?
    let current = NIOLockedValueBox(0)
    let peak = NIOLockedValueBox(0)
    let sent = NIOLockedValueBox(0)

    init(parent: GaugedAPNs?) { self.parent = parent }

    func enter() {
        let now = current.withLockedValue { $0 += 1; return $0 }
        peak.withLockedValue { $0 = max($0, now) }
        parent?.enter()
    }

    func leave() {
        current.withLockedValue { $0 -= 1 }
        sent.withLockedValue { $0 += 1 }
        parent?.leave()
    }

    func send(_ push: APNsPush) async throws(APNsError) -> APNsAcceptance {
        enter()
        try? await Task.sleep(for: .milliseconds(200))
        leave()
        return APNsAcceptance(apnsID: push.apnsID, uniqueID: nil, tries: 1)
    }
}
