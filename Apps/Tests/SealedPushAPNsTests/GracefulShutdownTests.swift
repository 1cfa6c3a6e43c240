import Foundation
import SealedPushAPNs
import SealedPushAPNsCore
import SealedPushAPNsServer
import SealedPushTestSupport
import ServiceLifecycle
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A local APNs in a ServiceGroup, a client with an open HTTP/2 connection, a push in flight.
private struct ShutdownRig {
    static let topic = "com.example.shutdown"
    let server: LocalAPNsServer
    let client: APNsClient
    let group: ServiceGroup
    let running: Task<Void, any Error>

    init(latency: Duration, grace: Duration) async throws {
        TestLogging.quiet()
        let key = try APNsSigningKey.generateForDevelopment(keyID: "SHUT000001", teamID: "TEAM000001").key
        var configuration = LocalAPNsConfiguration(
            port: 0, keys: [.init(keyID: key.keyID, teamID: key.teamID, publicKey: key.privateKey.publicKey, topics: [Self.topic])])
        configuration.acceptUnknownTokens = true
        configuration.latency = latency
        server = LocalAPNsServer(configuration: configuration, authority: try LocalCertificateAuthority.make(), shutdownGracePeriod: grace)
        let port = try await server.start()
        client = try APNsClient(configuration: APNsClientConfiguration(
            environment: .custom("https://127.0.0.1:\(port)"), signingKey: key, topic: Self.topic,
            trustedCertificatesPEM: [Array(server.authority.caPEM.utf8)], timeout: .seconds(60),
            retry: .init(maxTries: 1, baseDelay: .milliseconds(10), maxDelay: .milliseconds(10))))
        let group = ServiceGroup(services: [server])
        self.group = group
        running = Task { try await group.run() }
    }

    func push(_ n: Int) -> APNsPush {
        APNsPush(deviceToken: String(format: "%064x", n), payload: Array(#"{"aps":{"alert":"x"}}"#.utf8), topic: Self.topic, expiration: 0)
    }

    func send(_ n: Int) async -> Result<APNsAcceptance, APNsError> {
        do { return .success(try await client.send(push(n))) } catch { return .failure(error) }
    }

    /// Polls `condition` every 10 ms until it holds or `timeout` passed; whether it held.
    static func eventually(within timeout: Duration = .seconds(10), _ condition: () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while !condition() {
            if ContinuousClock.now >= deadline { return false }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return true
    }
}

@Suite("The local APNs as a Service: graceful shutdown", .serialized, .timeLimit(.minutes(10)))
struct GracefulShutdownTests {
    @Test func inFlightPushIsAnsweredThenTheGroupReturnsAndNewPushesFail() async throws {
        // A grace far longer than the latency: the group returning well before it means it waited for the
        // stream to finish, not for the grace to run out (the bounds are loose: under ThreadSanitizer on
        // CI's 2 cores this took 38 s).
        let rig = try await ShutdownRig(latency: .milliseconds(1500), grace: .seconds(300))
        let inFlight = Task { await rig.send(1) }
        #expect(await ShutdownRig.eventually(within: .seconds(60)) { rig.server.peakConcurrentRequests >= 1 },
                "the push never reached the server")
        #expect(rig.server.openConnections == 1)

        let started = ContinuousClock.now
        await rig.group.triggerGracefulShutdown()
        let answered = await inFlight.value
        #expect((try? answered.get()) != nil, "the push in flight must be answered 200, got \(answered)")
        try await rig.running.value
        let elapsed = ContinuousClock.now - started
        #expect(elapsed < .seconds(240), "the group took \(elapsed) to return (the grace is 300 s)")
        #expect(rig.server.openConnections == 0)

        let after = await rig.send(2)
        #expect((try? after.get()) == nil, "a push after shutdown must fail, got \(after)")
        await rig.client.shutdown()
    }

    @Test func streamsStillRunningWhenTheGraceEndsAreCut() async throws {
        let rig = try await ShutdownRig(latency: .seconds(300), grace: .milliseconds(500))
        let inFlight = Task { await rig.send(1) }
        #expect(await ShutdownRig.eventually(within: .seconds(60)) { rig.server.peakConcurrentRequests >= 1 },
                "the push never reached the server")

        let started = ContinuousClock.now
        await rig.group.triggerGracefulShutdown()
        try await rig.running.value
        let elapsed = ContinuousClock.now - started
        #expect(elapsed < .seconds(200), "the group took \(elapsed) to return with a 0.5 s grace (the push waits 300 s)")
        #expect(rig.server.openConnections == 0)
        let cut = await inFlight.value
        #expect((try? cut.get()) == nil, "a push longer than the grace is cut, got \(cut)")
        await rig.client.shutdown()
    }

    @Test func cancellingTheGroupClosesAtOnce() async throws {
        let rig = try await ShutdownRig(latency: .seconds(300), grace: .seconds(300))
        let inFlight = Task { await rig.send(1) }
        #expect(await ShutdownRig.eventually(within: .seconds(60)) { rig.server.peakConcurrentRequests >= 1 },
                "the push never reached the server")
        let started = ContinuousClock.now
        rig.running.cancel()
        _ = try? await rig.running.value
        // Well before the grace or the push's latency (300 s each): cancelling does not wait for either.
        #expect(ContinuousClock.now - started < .seconds(200))
        #expect(rig.server.openConnections == 0)
        _ = await inFlight.value
        await rig.client.shutdown()
    }
}

@Suite("sealedpush-server apns serve stops on SIGTERM", .serialized, .timeLimit(.minutes(10)))
struct APNsServeShutdownTests {
    @Test func sigtermExitsZero() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("apns-term-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let key = try ChildProcess.sealedpushServer(["apns", "generate-key", "--key-id", "TERM000001"], in: directory)
        try #require(key.status == 0, "\(key.stderr)")
        let server = try ChildProcess(launching: ProjectPaths.sealedpushServerBinary,
                                      ["apns", "serve", "--listen", "127.0.0.1:0", "--ca-out", "ca.pem", "--public-key", "AuthKey_TERM000001.pub.pem",
                                       "--team-id", "TEAM123456", "--topic", "com.example.app", "--accept-unknown"],
                                      in: directory, readLines: true)
        let first = try #require(server.nextLine(within: .seconds(60)), "apns serve printed nothing: \(server.stderrText)")
        #expect(first.hasPrefix("listening on https://127.0.0.1:"))
        // SIGTERM, then up to 15 s before SIGKILL: a clean exit 0, not a kill.
        let result = server.terminate(grace: .seconds(60))
        #expect(result.exitedNormally && result.status == 0, "apns serve must exit 0 on SIGTERM within 60 s; stderr: \(result.stderr)")
    }
}
