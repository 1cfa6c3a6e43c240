import Foundation
import Logging
import NIOConcurrencyHelpers
import PostgresNIO
import SealedPushAPNs
@testable import SealedPushGateway
import SealedPushTestSupport
import SealedPushWire
import SealedPushTime
import ServiceLifecycle
import Testing

extension GatewayPostgresSuites {
    /// The PostgreSQL store's long-running parts as services of the gateway's one `ServiceGroup` (#36): its client's
    /// `run()` and its heartbeat (which migrates first) start and stop with the group, and read the injected clock.
    @Suite("Gateway on PostgreSQL: the store's services", .serialized, .timeLimit(.minutes(5)))
    struct GatewayPostgresServiceTests {
        static var logger: Logger {
            var logger = Logger(label: "pg-services")
            logger.logLevel = .warning
            return logger
        }

        /// This instance's `last_seen`, read through the store's own client.
        static func lastSeen(_ store: PostgresGatewayStore) async throws -> Int64? {
            try await store.client.query("SELECT last_seen AS s FROM instances WHERE instance_id = \(store.instanceID)", logger: logger)
                .collect().first?.makeRandomAccess()["s"].decode(Int64.self)
        }

        /// Whether a query through `client` fails within 10 s (a stopped pool refuses at once; a running one answers).
        static func queryFails(_ client: PostgresClient) async -> Bool {
            await withTaskGroup(of: Bool?.self) { group in
                group.addTask {
                    do { _ = try await client.query("SELECT 1", logger: logger).collect(); return false } catch { return true }
                }
                group.addTask {
                    try? await Task.sleep(for: .seconds(10))
                    return nil
                }
                let first = await group.next() ?? nil
                group.cancelAll()
                return first ?? false  // no answer within 10 s: not a refusal
            }
        }

        /// `make` connects nothing: its two services, run in a group, migrate and register the instance (`ready()`),
        /// the heartbeat writes the injected clock's wall time, and when the group shuts down gracefully both have
        /// stopped: the client refuses queries, the heartbeat reports it stopped, nothing of the store runs on.
        @Test func theClientAndHeartbeatRunAndStopWithTheGroup() async throws {
            let url = try await PostgresCluster.shared().makeDatabase()
            let clock = SealedPushManualClock(wall: UnixMilliseconds(1_900_000_000_000))
            var options = PostgresGatewayStore.Options()
            options.clock = clock.clock
            let store = try PostgresGatewayStore.make(url: url, options: options, logger: Self.logger)
            #expect(!store.clientState.withLockedValue { $0.ran }, "make connects nothing")
            let services = store.services
            #expect(services.count == 2)
            let group = ServiceGroup(configuration: ServiceGroupConfiguration(services: services, logger: Self.logger))
            let running = Task { try await group.run() }
            do {
                try await store.ready()
                #expect(store.clientState.withLockedValue { $0.running })
                #expect(store.heartbeatState.withLockedValue { $0.running })
                #expect(try await store.idempotencySecret().count == 32, "migrated: the settings table holds the secret")
                // The setup and each beat write this instance's row on the injected clock, not the machine's.
                #expect(try await Self.lastSeen(store) == 1_900_000_000_000)
                clock.advance(by: .seconds(90))
                try await store.beat()
                #expect(try await Self.lastSeen(store) == 1_900_000_090_000)
                #expect(store.liveInstances == 1, "live by the injected clock: its row was renewed at its now")
            } catch {
                await group.triggerGracefulShutdown()
                _ = try? await running.value
                throw error
            }
            await group.triggerGracefulShutdown()
            try await running.value  // the group ends without an error: no service ended early or threw
            #expect(!store.clientState.withLockedValue { $0.running }, "the client's run() returned with the group")
            #expect(!store.heartbeatState.withLockedValue { $0.running }, "the heartbeat returned with the group")
            #expect(store.heartbeatStopped.result != nil)
            #expect(await Self.queryFails(store.client), "the pool is shut down: no connection is left open")
            await store.close()  // after the group: nothing left to stop, returns at once
            await #expect(throws: GatewayStoreError.self) { try await store.ping() }
        }

        /// A gateway on PostgreSQL through `Gateway.open` (the store made, not opened): the store's services come first
        /// in `GatewayServer.services`, the servers listen only after the migrations (the API answers at once), and
        /// the group's graceful shutdown closes the store through its running client, then stops the client.
        @Test func aGatewayStartsMigratesServesAndStopsWithItsStoreServices() async throws {
            let url = try await PostgresCluster.shared().makeDatabase()
            let g = try await GatewayHarness(name: "pg-services", database: url)
            let store = try #require(g.gateway.store as? PostgresGatewayStore)
            do {
                #expect(store.detached.withLockedValue { $0 } == nil, "the group runs the store's services, not a task of its own")
                #expect(store.started.succeeded, "listening implies migrated")
                let phone = try Phone(in: g.directory, name: "p", token: hexToken(0x51))
                #expect(try await g.register(phone, device: "p", user: "u").status == 201)
                let sent = try await g.send(JSONObject([("user_id", "u")]))
                #expect(sent.status == 202, "\(sent.text)")
                let id = try #require(sent.json["message_id"]?.stringValue)
                try await g.waitForStates(id, ["accepted"])
            } catch {
                await g.stop()
                throw error
            }
            await g.group.triggerGracefulShutdown()
            try await g.running.value  // a clean shutdown: the store's services waited for their turn
            #expect(g.gateway.closed.withLockedValue { $0 })
            #expect(!store.clientState.withLockedValue { $0.running })
            #expect(!store.heartbeatState.withLockedValue { $0.running })
            // Its row was removed by the close, through the client that was still running then.
            let other = try await PostgresGatewayStore.open(url: url, options: .forTests, logger: Self.logger)
            let rows = try await other.client.query("SELECT COUNT(*) AS n FROM instances WHERE instance_id = \(store.instanceID)", logger: Self.logger)
                .collect().first?.makeRandomAccess()["n"].decode(Int.self)
            await other.close()
            #expect(rows == 0)
            await g.stop()
        }

        /// The servers and workers wait for the store: over a database that never answers, the gateway's group ends
        /// with the store's error and no server ever listens (nothing can be answered before the migrations).
        @Test func noServerListensBeforeTheStoreIsReady() async throws {
            let port = try GatewayHarness.freePort()
            var storeOptions = PostgresGatewayStore.Options()
            storeOptions.startTimeout = .seconds(2)
            let store = try PostgresGatewayStore.make(url: "postgres://gw@127.0.0.1:\(port)/gw?sslmode=disable", options: storeOptions,
                                                      logger: Self.logger)
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gateway-pg-unready-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: directory) }
            let (_, pem) = try APNsSigningKey.generateForDevelopment(keyID: "KEY0000001", teamID: "TEAM000001")
            let path = try GatewayHarness.writeConfiguration(in: directory, apnsKeyPEM: pem, apnsPort: 9, caPEM: TestCA.pem)
            let gateway = try await Gateway(configuration: try GatewayConfiguration.load(path: path), store: store, logger: Self.logger)
            #expect(throws: GatewayStoreError.self, "no idempotency key before the store is ready") { _ = try gateway.idempotencyKey }
            let listening = NIOLockedValueBox<[String]>([])
            let services = GatewayServer.services(gateway, logger: Self.logger) { name, _ in listening.withLockedValue { $0.append(name) } }
            let group = ServiceGroup(configuration: ServiceGroupConfiguration(services: services, logger: Self.logger))
            await #expect(throws: GatewayStoreError.self) { try await group.run() }
            #expect(listening.withLockedValue { $0 }.isEmpty, "a server listened before the store was ready")
            #expect(gateway.closed.withLockedValue { $0 }, "the resources closed the gateway")
            #expect(!store.clientState.withLockedValue { $0.running })
        }

        /// A stop (SIGTERM's graceful shutdown) while the store is still starting (a database that does not answer,
        /// an hour's start timeout) ends the group without an error and without waiting for that timeout: closing the
        /// store stops its client, which ends the setup at once.
        @Test func aStopWhileTheStoreStartsEndsTheGroupCleanly() async throws {
            let port = try GatewayHarness.freePort()
            var storeOptions = PostgresGatewayStore.Options()
            storeOptions.startTimeout = .seconds(3600)
            let store = try PostgresGatewayStore.make(url: "postgres://gw@127.0.0.1:\(port)/gw?sslmode=disable", options: storeOptions,
                                                      logger: Self.logger)
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gateway-pg-stop-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: directory) }
            let (_, pem) = try APNsSigningKey.generateForDevelopment(keyID: "KEY0000001", teamID: "TEAM000001")
            let path = try GatewayHarness.writeConfiguration(in: directory, apnsKeyPEM: pem, apnsPort: 9, caPEM: TestCA.pem)
            let gateway = try await Gateway(configuration: try GatewayConfiguration.load(path: path), store: store, logger: Self.logger)
            let listening = NIOLockedValueBox<[String]>([])
            let services = GatewayServer.services(gateway, logger: Self.logger) { name, _ in listening.withLockedValue { $0.append(name) } }
            let group = ServiceGroup(configuration: ServiceGroupConfiguration(services: services, logger: Self.logger))
            let running = Task { try await group.run() }
            try await waitUntil("the heartbeat to begin the setup", within: .seconds(30)) { store.heartbeatState.withLockedValue { $0.running } }
            await group.triggerGracefulShutdown()
            let outcome = await withTaskGroup(of: String.self) { waits in
                waits.addTask {
                    do { try await running.value; return "ended" } catch { return "threw \(error)" }
                }
                waits.addTask {
                    try? await Task.sleep(for: .seconds(60))
                    return "still running 60 s after the stop"
                }
                let first = await waits.next() ?? "nothing"
                waits.cancelAll()
                return first
            }
            if outcome != "ended" { running.cancel() }
            #expect(outcome == "ended")
            #expect(listening.withLockedValue { $0 }.isEmpty)
            #expect(gateway.closed.withLockedValue { $0 })
            #expect(!store.clientState.withLockedValue { $0.running })
            #expect(!store.heartbeatState.withLockedValue { $0.running })
        }

        /// A store whose setup cannot finish (an unreachable server) ends its heartbeat service with the error, which
        /// ends the group; the client is stopped with it and the gateway's servers never listen.
        @Test func anUnreachableDatabaseEndsTheGroupBeforeAnyServerListens() async throws {
            let port = try GatewayHarness.freePort()
            var options = PostgresGatewayStore.Options()
            options.startTimeout = .seconds(2)
            let store = try PostgresGatewayStore.make(url: "postgres://gw:secret-pw@127.0.0.1:\(port)/gw?sslmode=disable", options: options,
                                                      logger: Self.logger)
            let group = ServiceGroup(configuration: ServiceGroupConfiguration(services: store.services, logger: Self.logger))
            let error = await #expect(throws: GatewayStoreError.self) { try await group.run() }
            #expect(error?.description.contains("postgres://gw@127.0.0.1:\(port)/gw") == true, "\(String(describing: error))")
            #expect(error?.description.contains("secret-pw") == false)
            #expect(!store.clientState.withLockedValue { $0.running })
            await #expect(throws: GatewayStoreError.self) { try await store.ready() }
            await store.close()
        }
    }
}
