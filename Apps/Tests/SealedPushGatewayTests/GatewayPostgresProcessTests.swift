import AsyncHTTPClient
import Foundation
import SealedPushGateway
import SealedPushWire
import SealedPushTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

extension GatewayPostgresSuites {
    /// Two `sealedpush-server gateway` processes on one throwaway PostgreSQL database (gateway v1 §9): one is
    /// killed with SIGKILL while it has deliveries in flight, and the other sends them once their lease lapses.
    @Suite("Two gateway processes on PostgreSQL", .serialized, .timeLimit(.minutes(10)))
    struct GatewayPostgresProcessTests {
        /// The victim claims four deliveries (a local APNs that takes 5 s to answer keeps them in flight), the
        /// victim is killed, the survivor starts: the survivor sends messages posted after the kill at once, and
        /// the victim's four only after the leases the victim took (`lease_seconds`: 30 s) have lapsed, with
        /// the same apns-ids; no apns-id reaches APNs more often than the victim's in-flight attempts allow.
        @Test func aKilledProcessesLeasedDeliveriesAreSentByTheOtherAfterTheLease() async throws {
            let cluster = try await PostgresCluster.shared()
            let url = try await cluster.makeDatabase()
            let apns = try await TestAPNs(latency: .seconds(5))
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gateway-pg-kill-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: directory) }
            let config = try GatewayHarness.writeConfiguration(in: directory, apns: apns, extraApp: JSONObject([("max_in_flight", .int(8))]),
                                                               extraRoot: JSONObject([("lease_seconds", .int(30))]), database: url)
            let http = HTTPClient(eventLoopGroupProvider: .singleton)
            defer { Task { try? await http.shutdown(); await apns.stop() } }

            let (victim, victimPort) = try await GatewaySuites.GatewayProcessTests.start(config, in: directory)
            defer { _ = victim.kill() }  // at once when the test killed it below
            let toVictim = GatewayClient(http: http, base: "http://127.0.0.1:\(victimPort)")
            let victimID = try #require(try await cluster.query(url, "SELECT instance_id FROM instances").first?.first)
            for n in 0..<8 {
                let phone = try Phone(in: directory, name: "phone-\(n)", token: hexToken(0x300 + n))
                let r = try await toVictim.call(.PUT, "/v1/apps/chat/devices/d\(n)", json: .object(JSONObject([
                    ("user_id", .string("u\(n)")), ("apns_token", .string(phone.token)), ("environment", "sandbox"), ("key_record", .object(phone.record))])))
                #expect(r.status == 201, "\(r.text)")
            }
            func send(_ client: GatewayClient, to n: Int) async throws -> String {
                let r = try await client.call(.POST, "/v1/apps/chat/messages", json: .object(JSONObject([
                    ("to", .object(JSONObject([("user_id", .string("u\(n)"))]))), ("body", "kill test")])))
                #expect(r.status == 202, "\(r.text)")
                return try #require(r.json["message_id"]?.stringValue)
            }
            var beforeKill: [String] = []
            for n in 0..<4 { beforeKill.append(try await send(toVictim, to: n)) }
            // The victim alone runs: it claims all four (max_in_flight 8, all its own) and waits on the slow APNs.
            var leases: [[String]] = []
            try await waitUntil("the victim to lease the four deliveries", within: .seconds(20)) {
                leases = try await cluster.query(url, "SELECT delivery_id, apns_id, lease_until, leased_by FROM deliveries WHERE state = 'queued' AND leased_by IS NOT NULL")
                return leases.count == 4
            }
            #expect(leases.allSatisfy { $0[3] == victimID })
            let leaseUntil = try #require(leases.compactMap { Int64($0[2]) }.max())

            let killed = try await offPool { victim.kill() }
            #expect(killed.killed(by: SIGKILL))
            let killedAt = Int64(Date().timeIntervalSince1970 * 1000)
            let stillLeased = try await cluster.query(url, "SELECT delivery_id FROM deliveries WHERE state = 'queued' AND leased_by = '\(victimID)'")
            #expect(stillLeased.count == 4, "the kill came while the victim's four attempts were in flight (APNs answers after 5 s)")
            let (survivor, survivorPort) = try await GatewaySuites.GatewayProcessTests.start(config, in: directory)
            defer { _ = survivor.terminate(grace: .seconds(30)) }  // at once when the test ended it below
            let toSurvivor = GatewayClient(http: http, base: "http://127.0.0.1:\(survivorPort)")
            var afterKill: [String] = []
            for n in 4..<8 { afterKill.append(try await send(toSurvivor, to: n)) }

            func accepted(_ ids: [String]) async throws -> [(apnsID: String, acceptedAt: Int64)]? {
                var found: [(apnsID: String, acceptedAt: Int64)] = []
                for id in ids {
                    let m = try await toSurvivor.call(.GET, "/v1/apps/chat/messages/\(id)").json
                    for d in m["deliveries"]?.arrayValue ?? [] {
                        guard let o = d.objectValue, o["state"]?.stringValue == "accepted", let apnsID = o["apns_id"]?.stringValue,
                              let at = o["accepted_at"]?.stringValue.flatMap(GatewayTime.parse) else { return nil }
                        found.append((apnsID: apnsID, acceptedAt: at))
                    }
                }
                return found
            }
            // The survivor's own four: sent at once (its share of max_in_flight is 4; 5 s at the slow APNs), not held back
            // by the victim's leases.
            var fresh: [(apnsID: String, acceptedAt: Int64)] = []
            try await waitUntil("the messages posted after the kill to be accepted", within: .seconds(50)) {
                fresh = try await accepted(afterKill) ?? []
                if fresh.count < 4 { try await Task.sleep(for: .milliseconds(250)) }
                return fresh.count == 4
            }
            // The victim's four: only once their leases lapsed, then 5 s at the slow APNs.
            var takenOver: [(apnsID: String, acceptedAt: Int64)] = []
            try await waitUntil("the victim's leased deliveries to be sent by the survivor", within: .seconds(150)) {
                takenOver = try await accepted(beforeKill) ?? []
                if takenOver.count < 4 { try await Task.sleep(for: .milliseconds(250)) }
                return takenOver.count == 4
            }
            #expect(takenOver.allSatisfy { $0.acceptedAt >= leaseUntil }, "sent again only after the victim's lease lapsed")
            #expect(fresh.allSatisfy { $0.acceptedAt < leaseUntil }, "the survivor's own messages did not wait for the victim's leases")
            #expect(Set(takenOver.map(\.apnsID)) == Set(leases.map { $0[1] }), "the same apns-ids the victim had drawn")

            let pushes = apns.pushes
            var perID: [String: Int] = [:]
            for push in pushes { perID[push.apnsID, default: 0] += 1 }
            #expect(Set(perID.keys) == Set((takenOver + fresh).map(\.apnsID)), "every delivery reached APNs")
            let twice = perID.values.filter { $0 > 1 }.count
            #expect(twice <= 4 && perID.values.allSatisfy { $0 <= 2 }, "no push went twice beyond the victim's four in flight: \(perID)")
            let ended = try await offPool { survivor.terminate(grace: .seconds(30)) }
            #expect(ended.exitedNormally && ended.status == 0, "\(ended.stderr.suffix(2000))")
            let latest = takenOver.map(\.acceptedAt).max() ?? killedAt
            print("gateway processes on PostgreSQL, SIGKILL: the victim's 4 leased deliveries accepted by the survivor \(Double(latest - killedAt) / 1000) s after the kill (lease ended \(Double(leaseUntil - killedAt) / 1000) s after it, then 5 s at the slow APNs); \(twice) sent twice")
        }
    }
}
