import Foundation
import Logging
import NIOConcurrencyHelpers
@testable import SealedPushGateway
import SealedPushTestSupport
import Testing

extension GatewayPostgresSuites {
    /// Workers woken by the database (#47): a statement that inserts deliveries or events notifies every instance
    /// listening on the database, at commit; a lost listener is announced, the workers poll meanwhile, and it
    /// listens again by itself; `listen_notify: false` listens to nothing.
    @Suite("Gateway on PostgreSQL: LISTEN/NOTIFY", .serialized, .timeLimit(.minutes(5)))
    struct GatewayPostgresListenTests {
        typealias F = StoreFixtures

        static var logger: Logger {
            var logger = Logger(label: "pg-listen")
            logger.logLevel = .critical
            return logger
        }

        /// What a store announced, in order.
        final class Heard: Sendable {
            let wakes = NIOLockedValueBox<[StoreWake]>([])
            func count(_ wake: StoreWake) -> Int { wakes.withLockedValue { $0.filter { $0 == wake }.count } }
        }

        static func open(_ url: String, listen: Bool = true) async throws -> (PostgresGatewayStore, Heard) {
            var options = PostgresGatewayStore.Options()
            options.listenNotify = listen
            options.listenRetry = .milliseconds(100)
            let store = try await PostgresGatewayStore.open(url: url, options: options, logger: logger)
            let heard = Heard()
            store.onWake { wake in heard.wakes.withLockedValue { $0.append(wake) } }
            return (store, heard)
        }

        /// A message written by one instance wakes the other's delivery loop, and the events its outcomes write wake
        /// its webhook loop; one notification per app and statement, none for a statement that inserts nothing.
        @Test func oneInstancesInsertsWakeTheOther() async throws {
            let url = try await PostgresCluster.shared().makeDatabase()
            let (writer, _) = try await Self.open(url, listen: false)
            let (other, heard) = try await Self.open(url)
            do {
                try await waitUntil("the other instance to listen", within: .seconds(20)) { other.listener.withLockedValue { $0.up } }
                #expect(heard.count(.listener(connected: true)) == 1)
                let devices = [F.device("a", user: "u", token: 1), F.device("b", user: "u", token: 2)]
                for d in devices { _ = try await writer.putDevice(d, maxDevicesPerUser: 10) }
                try await writer.insertMessage(F.message("m1", devices: devices, at: 1000), idempotency: nil)
                try await waitUntil("the message's deliveries to wake the other instance", within: .seconds(20)) {
                    heard.count(.deliveries(app: "chat")) >= 1
                }
                #expect(heard.count(.deliveries(app: "chat")) == 1, "one notification for a statement's two rows of one app")
                #expect(heard.count(.events(app: "chat")) == 0, "queued deliveries make no event")
                let claims = try await writer.claimDue(app: "chat", platform: .apns, now: 1000, leaseUntil: 61_000, limit: 10)
                #expect(claims.count == 2)
                #expect(try await writer.complete(claims[0], outcome: .accepted(status: 200), unregisteredAt: nil, now: 1001))
                try await waitUntil("the outcome's event to wake the other instance's webhook loop", within: .seconds(20)) {
                    heard.count(.events(app: "chat")) >= 1
                }
                #expect(heard.count(.deliveries(app: "chat")) == 1, "an outcome inserts no delivery")
            } catch {
                await writer.close()
                await other.close()
                throw error
            }
            await writer.close()
            await other.close()
        }

        /// The listener's connection terminated by the server: the store announces the loss once (the gateway's
        /// metric and log), listens again within its retry, and hears the next message.
        @Test func aTerminatedListenerIsAnnouncedAndListensAgain() async throws {
            let url = try await PostgresCluster.shared().makeDatabase()
            let (store, heard) = try await Self.open(url)
            do {
                try await waitUntil("the store to listen", within: .seconds(20)) { store.listener.withLockedValue { $0.up } }
                let killed = try await PostgresCluster.shared().query(url, """
                    SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                    WHERE datname = current_database() AND pid <> pg_backend_pid() AND query ILIKE 'LISTEN%'
                    """)
                #expect(killed.count == 1, "one connection listens: \(killed)")
                try await waitUntil("the loss to be announced", within: .seconds(20)) { heard.count(.listener(connected: false)) >= 1 }
                try await waitUntil("the store to listen again", within: .seconds(20)) { heard.count(.listener(connected: true)) >= 2 }
                #expect(heard.count(.listener(connected: false)) == 1, "the loss is announced once")
                let device = F.device("a", user: "u", token: 1)
                _ = try await store.putDevice(device, maxDevicesPerUser: 10)
                try await store.insertMessage(F.message("m1", devices: [device]), idempotency: nil)
                try await waitUntil("the message to be heard on the new connection", within: .seconds(20)) {
                    heard.count(.deliveries(app: "chat")) >= 1
                }
            } catch {
                await store.close()
                throw error
            }
            await store.close()
        }

        /// `listen_notify: false` (PgBouncer in transaction mode): no connection listens and nothing is announced;
        /// the workers poll as before. The configuration member is a boolean, true by default.
        @Test func listenNotifyOffListensToNothing() async throws {
            let url = try await PostgresCluster.shared().makeDatabase()
            let (store, heard) = try await Self.open(url, listen: false)
            do {
                let device = F.device("a", user: "u", token: 1)
                _ = try await store.putDevice(device, maxDevicesPerUser: 10)
                try await store.insertMessage(F.message("m1", devices: [device]), idempotency: nil)
                try await Task.sleep(for: .milliseconds(500))
                #expect(heard.wakes.withLockedValue { $0 }.isEmpty)
                let listeners = try await PostgresCluster.shared().query(url, """
                    SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE 'LISTEN%'
                    """)
                #expect(listeners.isEmpty)
            } catch {
                await store.close()
                throw error
            }
            await store.close()
        }
    }
}

extension GatewaySuites {
    /// The `listen_notify` member: a boolean, true when absent; it reaches the PostgreSQL store's options.
    @Suite("Gateway configuration: listen_notify")
    struct GatewayListenNotifyConfigurationTests {
        /// A PostgreSQL configuration with `"name": value` at its root (none when `value` is nil), parsed.
        static func parse(_ name: String, _ value: String?, in directory: URL) throws -> GatewayConfiguration {
            let extra = value.map { #", "\#(name)": \#($0)"# } ?? ""
            let text = """
                {"public_url": "https://push.example.com", "database": "postgres://gw@127.0.0.1:5432/gw"\(extra), "apps": [{"id": "chat",
                 "topic": "com.example.chat", "apns": {"auth_key": "key.p8", "key_id": "KEY0000001", "team_id": "TEAM000001"},
                 "api_keys": [{"id": "k", "sha256": "\(String(repeating: "ab", count: 32))", "scopes": ["read"]}]}]}
                """
            return try GatewayConfiguration.parse(Array(text.utf8), baseDirectory: directory.path)
        }

        @Test func listenNotifyIsABooleanTrueByDefault() throws {
            let directory = try GatewayHarness.parseTestDirectory("listen-notify")
            defer { try? FileManager.default.removeItem(at: directory) }
            func parse(_ member: String?) throws -> GatewayConfiguration { try Self.parse("listen_notify", member, in: directory) }
            #expect(try parse(nil).listenNotify)
            #expect(try parse("true").listenNotify)
            #expect(try !parse("false").listenNotify)
            #expect(throws: GatewayConfigurationError.self) { try parse(#""no""#) }
        }

        /// `session_parameters`: a boolean, true when absent (for PgBouncer in transaction mode: false).
        @Test func sessionParametersIsABooleanTrueByDefault() throws {
            let directory = try GatewayHarness.parseTestDirectory("session-parameters")
            defer { try? FileManager.default.removeItem(at: directory) }
            func parse(_ member: String?) throws -> GatewayConfiguration { try Self.parse("session_parameters", member, in: directory) }
            #expect(try parse(nil).sessionParameters)
            #expect(try !parse("false").sessionParameters)
            do {
                _ = try parse("0")
                Issue.record("session_parameters: 0 was accepted")
            } catch let error as GatewayConfigurationError {
                #expect("\(error)".contains("/session_parameters") && "\(error)".contains("PgBouncer"), "\(error)")
            }
        }
    }
}
