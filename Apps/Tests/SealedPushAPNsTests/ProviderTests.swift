import AsyncHTTPClient
import Crypto
import Foundation
import NIOCore
import NIOSSL
import SealedPushAPNs
import SealedPushAPNsCore
import SealedPushAPNsServer
import SealedPushTestSupport
import NIOConcurrencyHelpers
import Testing

/// A wall clock tests move by hand (Unix seconds).
final class TestWallClock: Sendable {
    let seconds: NIOLockedValueBox<Int64>
    init(_ start: Int64 = Int64(Date().timeIntervalSince1970)) { seconds = NIOLockedValueBox(start) }
    func advance(minutes: Int64) { seconds.withLockedValue { $0 += minutes * 60 } }
    var now: Int64 { seconds.withLockedValue { $0 } }
}

/// A clock whose sleeps return at once, counting them: backoff is checked without waiting for it.
final class CountingClock: Clock, Sendable {
    typealias Instant = ContinuousClock.Instant
    let sleeps = NIOLockedValueBox<[Duration]>([])
    var now: Instant { ContinuousClock.now }
    var minimumResolution: Duration { .nanoseconds(1) }
    func sleep(until deadline: Instant, tolerance: Duration?) async throws {
        sleeps.withLockedValue { $0.append(deadline - ContinuousClock.now) }
    }
}

/// A local APNs on a free loopback port, a development key registered for `topic`, and clients for it.
struct LocalAPNs {
    static let topic = "com.example.secret"
    let key: APNsSigningKey
    let server: LocalAPNsServer
    let port: Int

    static func start(keyID: String = "KEY0000001", teamID: String = "TEAM000001",
                      devices: [String: String] = [:], configure: (inout LocalAPNsConfiguration) -> Void = { _ in }) async throws -> LocalAPNs {
        let key = try APNsSigningKey.generateForDevelopment(keyID: keyID, teamID: teamID).key
        var configuration = LocalAPNsConfiguration(
            port: 0, keys: [.init(keyID: keyID, teamID: teamID, publicKey: key.privateKey.publicKey, topics: [topic])],
            devices: devices)
        configure(&configuration)
        let server = LocalAPNsServer(configuration: configuration, authority: try LocalCertificateAuthority.make())
        let port = try await server.start()
        return LocalAPNs(key: key, server: server, port: port)
    }

    var baseURL: String { "https://127.0.0.1:\(port)" }

    func client(key: APNsSigningKey? = nil, clock: TestWallClock? = nil, sleepClock: (any Clock<Duration>)? = nil, maxTries: Int = 4,
                timeout: Duration = .seconds(10),
                onStopSending: (@Sendable (String, APNsRejection) -> Void)? = nil) throws -> APNsClient {
        let clockNow: @Sendable () -> Int64
        if let clock {
            clockNow = { clock.now }
        } else {
            clockNow = { Int64(Date().timeIntervalSince1970) }
        }
        return try APNsClient(configuration: APNsClientConfiguration(
            environment: .custom(baseURL), signingKey: key ?? self.key, topic: LocalAPNs.topic,
            trustedCertificatesPEM: [Array(server.authority.caPEM.utf8)], timeout: timeout,
            retry: .init(maxTries: maxTries, baseDelay: .milliseconds(10), maxDelay: .milliseconds(80)),
            now: clockNow, sleepClock: sleepClock ?? CountingClock(), onStopSending: onStopSending))
    }

    func stop() async { await server.stop() }
}

/// What `send` gave, as a value (typed-throws `catch let` patterns in test bodies crash this compiler).
func attempt(_ client: APNsClient, _ push: APNsPush) async -> Result<APNsAcceptance, APNsError> {
    do { return .success(try await client.send(push)) } catch { return .failure(error) }
}

func token(_ n: Int) -> String { String(format: "%064x", n) }

func push(_ n: Int, payload: [UInt8] = Array(#"{"aps":{"alert":"x"}}"#.utf8)) -> APNsPush {
    APNsPush(deviceToken: token(n), payload: payload, topic: LocalAPNs.topic, expiration: 0)
}

@Suite("APNs provider against the local APNs on loopback", .serialized, .timeLimit(.minutes(10)))
struct ProviderTests {
    @Test func acceptedPushEchoesItsIDAndReusesItsConnections() async throws {
        let apns = try await LocalAPNs.start { $0.acceptUnknownTokens = true }
        let client = try apns.client()
        let first = try await client.send(push(1))
        #expect(APNsPush.isValidAPNsID(first.apnsID))
        #expect(first.uniqueID.map(APNsPush.isValidAPNsID) == true, "apns-unique-id")
        #expect(first.tries == 1)
        let given = APNsPush(deviceToken: token(2), payload: Array("{}".utf8), topic: LocalAPNs.topic, expiration: 0,
                             apnsID: "123e4567-e89b-12d3-a456-426614174000")
        #expect(try await client.send(given).apnsID == "123e4567-e89b-12d3-a456-426614174000")
        try await withThrowingTaskGroup(of: Void.self) { group in
            for n in 0..<200 { group.addTask { _ = try await client.send(push(n)) } }
            try await group.waitForAll()
        }
        // HTTP/2 multiplexes: 202 pushes over the transport's pool of two connections at most (the second opens
        // only when the first has been up a second and the pushes are still coming).
        #expect(apns.server.connectionsAccepted <= 2, "HTTP/2 multiplexes every push over the pool's connections")
        #expect(apns.server.rules.counts.accepted == 202)
        await client.shutdown()
        await apns.stop()
    }

    @Test func stopSendingReasonsSurfaceAsUnregisteredWithTheirTimestamp() async throws {
        let apns = try await LocalAPNs.start(devices: [token(1): "com.other.app"])
        apns.server.rules.unregister(token(2), at: 1_700_000_000_123)
        let stopped = NIOLockedValueBox<[String: APNsReason]>([:])
        let client = try apns.client { token, rejection in stopped.withLockedValue { $0[token] = rejection.reason } }
        for (n, reason, status) in [(1, APNsReason.deviceTokenNotForTopic, 400), (2, .unregistered, 410), (3, .badDeviceToken, 400)] {
            guard case let .failure(.rejected(rejection)) = await attempt(client, push(n)) else {
                Issue.record("push \(n) was not refused")
                continue
            }
            #expect(rejection.reason == reason)
            #expect(rejection.status == status)
            #expect(rejection.stopSendingToToken)
            if reason == .unregistered { #expect(rejection.timestamp == 1_700_000_000_123) }
        }
        #expect(stopped.withLockedValue { $0 } == [token(1): .deviceTokenNotForTopic, token(2): .unregistered, token(3): .badDeviceToken])
        #expect(apns.server.rules.counts.rejected.values.reduce(0, +) == 3, "no refusal is retried")
        await client.shutdown()
        await apns.stop()
    }

    @Test func serverErrorsAndTooManyRequestsAreRetriedWithBackoffOthersNever() async throws {
        let apns = try await LocalAPNs.start { $0.acceptUnknownTokens = true; $0.failRate = 1 }
        let sleeps = CountingClock()
        let client = try apns.client(sleepClock: sleeps, maxTries: 4)
        guard case let .failure(.rejected(failure)) = await attempt(client, push(1)) else {
            Issue.record("not refused under --fail-rate 1")
            return
        }
        #expect([500, 503].contains(failure.status))
        #expect(apns.server.rules.counts.rejected.values.reduce(0, +) == 4, "4 tries")
        let delays = sleeps.sleeps.withLockedValue { $0 }
        #expect(delays.count == 3)
        // Equal jitter: each delay in [half, all] of min(cap, base·2^(n-1)) with base 10 ms, cap 80 ms.
        for (i, delay) in delays.enumerated() {
            let full = Duration.milliseconds(min(80, 10 << i))
            #expect(delay <= full && delay >= full / 2 - .milliseconds(1), "delay \(i + 1): \(delay)")
        }
        await client.shutdown()
        await apns.stop()

        // 429 TooManyRequests: one push a second per token, so every retry in the same second is refused again.
        let second = Int64(Date().timeIntervalSince1970) * 1000  // a fixed server clock: every try falls in one second
        let limited = try await LocalAPNs.start { c in
            c.acceptUnknownTokens = true
            c.maxPushesPerTokenPerSecond = 1
            c.nowMilliseconds = { second }
        }
        let limitedClient = try limited.client(maxTries: 3)
        _ = try await limitedClient.send(push(7))
        guard case let .failure(.rejected(limit)) = await attempt(limitedClient, push(7)) else {
            Issue.record("second push within a second was not refused")
            return
        }
        #expect(limit.reason == .tooManyRequests)
        #expect(limited.server.rules.counts.rejected["TooManyRequests"] == 3)
        await limitedClient.shutdown()
        await limited.stop()

        // 403: a key the server does not know is refused once.
        let strict = try await LocalAPNs.start()
        let stranger = try APNsSigningKey.generateForDevelopment(keyID: "KEY0000001", teamID: "TEAM000001").key
        let strangerClient = try strict.client(key: stranger)
        guard case let .failure(.rejected(refused)) = await attempt(strangerClient, push(1)) else {
            Issue.record("a stranger's token was not refused")
            return
        }
        #expect(refused.status == 403 && refused.reason == .invalidProviderToken)
        #expect(strict.server.rules.counts.rejected["InvalidProviderToken"] == 1)
        for reason in [APNsReason.badDeviceToken, .invalidProviderToken, .unregistered, .payloadTooLarge, .tooManyProviderTokenUpdates] {
            #expect(!APNsClient.isRetryable(reason))
        }
        await strangerClient.shutdown()
        await strict.stop()
    }

    @Test func tokenIsSharedRenewedBeforeAnHourAndOnceOnExpiredProviderToken() async throws {
        let serverClock = TestWallClock()
        let apns = try await LocalAPNs.start { c in
            c.acceptUnknownTokens = true
            c.nowMilliseconds = { serverClock.now * 1000 }
        }
        let clientClock = TestWallClock(serverClock.now)
        let client = try apns.client(clock: clientClock)
        func burst(_ base: Int) async throws {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for n in 0..<40 { group.addTask { _ = try await client.send(push(base + n)) } }
                try await group.waitForAll()
            }
        }
        try await burst(0)
        #expect(client.tokensIssued == 1, "one token for 40 concurrent pushes")
        clientClock.advance(minutes: 19); serverClock.advance(minutes: 19)
        try await burst(100)
        #expect(client.tokensIssued == 1, "not renewed within 20 minutes")
        clientClock.advance(minutes: 32); serverClock.advance(minutes: 32)  // 51 minutes: past the 50-minute lifetime
        try await burst(200)
        #expect(client.tokensIssued == 2, "renewed once before the hour, by one of the concurrent pushes")
        // The server's clock runs ahead: it calls the current token expired. The client renews once and retries.
        serverClock.advance(minutes: 65)
        clientClock.advance(minutes: 30)
        try await burst(300)
        #expect(client.tokensIssued == 3)
        #expect(apns.server.rules.counts.rejected["ExpiredProviderToken", default: 0] >= 1)
        #expect(apns.server.rules.counts.rejected["TooManyProviderTokenUpdates"] == nil)
        #expect(apns.server.rules.counts.accepted == 160)
        await client.shutdown()
        await apns.stop()
    }

    /// A batch under GOAWAY after every 25 requests: its pushes, the alert each carries, and the fewest
    /// connections the batch must have taken.
    struct GoawayBatch: Sendable, CustomTestStringConvertible {
        let pushes: Int
        let alertBytes: Int
        let minimumConnections: Int
        var testDescription: String { "\(pushes) pushes with \(alertBytes)-byte alerts" }
    }

    /// GOAWAY after every 25 requests with up to 100 in flight: about three in four streams of each connection
    /// are above the GOAWAY's last stream id (refused, or excluded by the GOAWAY itself), unprocessed, and sent
    /// again on the next one. Every push ends with a definite result, none is accepted twice, and with a budget
    /// for this extreme fault (12 tries) every push is accepted.
    ///
    /// With small pushes each connection processes its first 25 streams in order, so the batch takes at least
    /// one connection per 25 pushes. With 4 KB pushes, 100 in flight fill the 64 KiB connection window many
    /// times over: streams wait on flow control when the GOAWAY comes (NIOHTTP2 may then release their DATA in
    /// any order, so only a looser bound on connections holds), and a push may be excluded on connection after
    /// connection — once it has been sent again `maxUnprocessedResends` times, each further exclusion costs a
    /// try (with one try and a bound of 16 resends, about 1 push in 300 failed so; the bound is 32 now).
    @Test(arguments: [GoawayBatch(pushes: 300, alertBytes: 1, minimumConnections: 300 / 25),
                      GoawayBatch(pushes: 500, alertBytes: 3_900, minimumConnections: 500 / 100)])
    func goawayMidBatchLosesNoPush(_ batch: GoawayBatch) async throws {
        let apns = try await LocalAPNs.start { $0.acceptUnknownTokens = true; $0.goawayAfter = 25 }
        let client = try apns.client(maxTries: 12)
        let payload = Array(("{\"aps\":{\"alert\":\"" + String(repeating: "x", count: batch.alertBytes) + "\"}}").utf8)
        let outcomes = await withTaskGroup(of: Result<APNsAcceptance, APNsError>.self) { group in
            for n in 0..<batch.pushes { group.addTask { await attempt(client, push(n, payload: payload)) } }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(outcomes.count == batch.pushes, "every push ends with a result")
        let results = outcomes.compactMap { try? $0.get() }
        #expect(results.count == batch.pushes, "\(outcomes.compactMap { if case let .failure(e) = $0 { e.description } else { nil } }.prefix(3))")
        #expect(Set(results.map(\.apnsID)).count == batch.pushes)
        #expect(apns.server.connectionsAccepted >= batch.minimumConnections)
        #expect(apns.server.rules.counts.accepted == batch.pushes, "each push accepted exactly once")
        await client.shutdown()
        await apns.stop()
    }

    /// The streams a GOAWAY excludes were never processed: they are sent again at once on another connection,
    /// outside the retry budget. With one try per push (no retries at all) every push of the batch is still
    /// accepted, exactly once.
    @Test func streamsAGoawayExcludedAreResentOutsideTheRetryBudget() async throws {
        let apns = try await LocalAPNs.start { $0.acceptUnknownTokens = true; $0.goawayAfter = 25 }
        let client = try apns.client(maxTries: 1)
        let outcomes = await withTaskGroup(of: Result<APNsAcceptance, APNsError>.self) { group in
            for n in 0..<500 { group.addTask { await attempt(client, push(n)) } }
            return await group.reduce(into: []) { $0.append($1) }
        }
        let results = outcomes.compactMap { try? $0.get() }
        #expect(results.count == 500, "\(outcomes.compactMap { if case let .failure(e) = $0 { e.description } else { nil } }.prefix(3))")
        #expect(results.allSatisfy { $0.tries == 1 }, "a resend of an unprocessed stream is not a retry")
        #expect(apns.server.rules.counts.accepted == 500, "each push accepted exactly once")
        #expect(apns.server.connectionsAccepted >= 500 / 25)
        await client.shutdown()
        await apns.stop()
    }

    @Test func pushesInFlightAreBoundedAndEachTryHasADeadline() async throws {
        let apns = try await LocalAPNs.start { c in
            c.acceptUnknownTokens = true
            c.latency = .milliseconds(40)
            c.maxConcurrentStreams = 50
        }
        let client = try APNsClient(configuration: APNsClientConfiguration(
            environment: .custom(apns.baseURL), signingKey: apns.key, topic: LocalAPNs.topic,
            trustedCertificatesPEM: [Array(apns.server.authority.caPEM.utf8)], maxInFlight: 4))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for n in 0..<40 { group.addTask { _ = try await client.send(push(n)) } }
            try await group.waitForAll()
        }
        #expect(apns.server.peakConcurrentRequests <= 4, "maxInFlight 4")
        #expect(apns.server.peakConcurrentRequests >= 2, "pushes do go out in parallel")
        await client.shutdown()
        await apns.stop()

        // The server announces 3 concurrent streams: the client keeps to it, and every push still goes through.
        let narrow = try await LocalAPNs.start { c in
            c.acceptUnknownTokens = true
            c.latency = .milliseconds(20)
            c.maxConcurrentStreams = 3
        }
        let wide = try narrow.client()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for n in 0..<30 { group.addTask { _ = try await wide.send(push(n)) } }
            try await group.waitForAll()
        }
        #expect(narrow.server.rules.counts.accepted == 30)
        await wide.shutdown()
        await narrow.stop()

        // A server slower than the deadline: every try times out, and the error says how many there were.
        let slow = try await LocalAPNs.start { c in
            c.acceptUnknownTokens = true
            c.latency = .milliseconds(600)
        }
        let hurried = try slow.client(maxTries: 2, timeout: .milliseconds(150))
        guard case let .failure(.timedOut(tries)) = await attempt(hurried, push(1)) else {
            Issue.record("no timeout")
            await hurried.shutdown()
            await slow.stop()
            return
        }
        #expect(tries == 2)
        await hurried.shutdown()
        await slow.stop()
    }

    @Test func untrustedServerIsRefusedNamingTheCACertificate() async throws {
        let apns = try await LocalAPNs.start { $0.acceptUnknownTokens = true }
        let client = try APNsClient(configuration: APNsClientConfiguration(
            environment: .custom(apns.baseURL), signingKey: apns.key, topic: LocalAPNs.topic, timeout: .seconds(5),
            retry: .init(maxTries: 3, baseDelay: .milliseconds(1))))
        guard case .failure(.untrustedServer) = await attempt(client, push(1)) else {
            Issue.record("an untrusted server was not refused as such")
            return
        }
        #expect(APNsError.untrustedServer.description.contains("ca.pem"))
        #expect(apns.server.rules.counts.accepted == 0)
        await client.shutdown()
        await apns.stop()
    }

    @Test func pushesAreCheckedBeforeSending() async throws {
        let apns = try await LocalAPNs.start { $0.acceptUnknownTokens = true }
        let client = try apns.client()
        var tooBig = push(1)
        tooBig.payload = [UInt8](repeating: 0x20, count: 4097)
        for (bad, words) in [(tooBig, "4097 bytes"), (APNsPush(deviceToken: "abc", payload: [1], topic: "t", expiration: 0), "64 hexadecimal")] {
            guard case let .failure(.invalidRequest(message)) = await attempt(client, bad) else {
                Issue.record("sent")
                continue
            }
            #expect(message.contains(words))
        }
        #expect(apns.server.rules.counts.accepted + apns.server.rules.counts.rejected.count == 0)
        await client.shutdown()
        await apns.stop()
    }
}
