import Foundation
import Logging
import NIOConcurrencyHelpers
@testable import SealedPushGateway
import SealedPushAPNsServer
import SealedPushTestSupport
import SealedPushWebPush
import SealedPushWebPushServer
import ServiceLifecycle
import Testing

/// A resolver that counts its lookups: a lookup is the start of a new connection.
struct CountingResolver: GatewayAddressResolver {
    let table: [String: [[UInt8]]]
    let lookups = NIOLockedValueBox(0)
    func addresses(of host: String) async throws -> [[UInt8]] {
        lookups.withLockedValue { $0 += 1 }
        return table[host] ?? []
    }
}

/// The Web Push sender's connections (platforms v1 §1.1): kept alive between deliveries to the same host, a new
/// one made only after resolving and checking the host again, against the local Web Push service in-process.
@Suite("Web Push connections are kept alive, and each new one is checked")
struct WebPushConnectionTests {
    /// Runs `body` with the local Web Push service (accepting any subscription id, closing connections idle for
    /// `idle`) and its origin.
    func withService(idle: Duration, _ body: (String, LocalCertificateAuthority) async throws -> Void) async throws {
        var configuration = LocalWebPushConfiguration(subscriptions: [])
        configuration.acceptUnknown = true
        configuration.idleTimeout = idle
        let authority = try LocalCertificateAuthority.make(caName: "SealedPush test Web Push CA")
        let server = LocalWebPushServer(rules: LocalWebPushRules(configuration: configuration), authority: authority)
        let (origins, continuation) = AsyncStream.makeStream(of: String.self)
        let application = try server.application { origin in continuation.yield(origin) }
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(services: [application], logger: Logger(label: "test.webpush")))
        let running = Task { try await group.run() }
        defer { running.cancel() }
        do {
            var iterator = origins.makeAsyncIterator()
            let origin = try #require(await iterator.next(), "the local Web Push service did not start")
            try await body(origin, authority)
        } catch {
            await group.triggerGracefulShutdown()
            _ = await running.result
            throw error
        }
        await group.triggerGracefulShutdown()  // graceful, never by cancel (swift-nio #2637)
        _ = await running.result
    }

    /// An RFC 8291 body, as the gateway makes one when it seals a message.
    let body = try! WebPushEncryptor(subscription: WebPushUserAgentKeys.generate().subscriptionKeys).encrypt(Array("{}".utf8))

    func claim(_ endpoint: String, id: String) -> ClaimedDelivery {
        ClaimedDelivery(deliveryID: id, app: "chat", deviceID: "b", address: endpoint, environment: .production,
                        payload: body, priority: 10, collapseID: "c", apnsExpiration: 0, expiresAt: 0, apnsID: id,
                        attempts: 0, generation: 1, platform: .webpush)
    }

    /// A sender over the service at `authority`, its resolver counting lookups (each the start of a new connection).
    func sender(_ authority: LocalCertificateAuthority, idleLimit: Duration = .seconds(30), maximumIdle: Int = 256) throws -> (WebPushPlatformSender, CountingResolver, PinnedHTTPSClient) {
        let resolver = CountingResolver(table: ["127.0.0.1": [[127, 0, 0, 1]]])
        // A long deadline: in a full parallel run the test process's threads can be busy for seconds at a time.
        let client = try PinnedHTTPSClient(additionalRootsPEM: Array(authority.caPEM.utf8), timeout: .seconds(60), idleLimit: idleLimit, maximumIdle: maximumIdle)
        let sender = WebPushPlatformSender(
            policy: WebPushEndpointPolicy(allowPrivateEndpoints: true),
            vapid: VAPIDTokenCache(key: VAPIDKey.generate().key, subject: try VAPIDSubject("mailto:ops@example.com"), clock: { Int64(Date().timeIntervalSince1970) }),
            resolver: resolver, client: client)
        return (sender, resolver, client)
    }

    var now: Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    @Test func deliveriesToOneHostShareAConnection() async throws {
        try await withService(idle: .seconds(120)) { origin, authority in
            let (sender, resolver, client) = try sender(authority)
            for n in 0..<5 {
                let answer = await sender.send(claim(origin + "/push/sub-\(n)", id: "d\(n)"), now: now)
                guard case .accepted(201, _) = answer else {
                    Issue.record("delivery \(n): \(answer)")
                    return
                }
            }
            #expect(resolver.lookups.withLockedValue { $0 } == 1, "five deliveries in a row made one connection")
            #expect(client.pool.count == 1)

            // Deliveries at once each get a connection; all of them are kept, none beyond what ran at once.
            let answers = await withTaskGroup(of: PushAnswer.self) { group in
                for n in 0..<8 { group.addTask { await sender.send(self.claim(origin + "/push/many-\(n)", id: "m\(n)"), now: self.now) } }
                return await group.reduce(into: []) { $0.append($1) }
            }
            #expect(answers.allSatisfy { if case .accepted(201, _) = $0 { true } else { false } }, "\(answers)")
            #expect((1...8).contains(client.pool.count))
            await sender.shutdown()
            #expect(client.pool.count == 0)
        }
    }

    @Test func aConnectionTheServiceClosedIsReplacedByOneResolvedAndCheckedAgain() async throws {
        try await withService(idle: .seconds(2)) { origin, authority in
            let (sender, resolver, client) = try sender(authority)
            // Under a full parallel run this process can be starved past the service's 2 s idle limit between a new
            // connection and its request: that is a retry (`connection`), so deliver until accepted, ten times at most
            // (under ThreadSanitizer three were once not enough).
            func deliver(_ id: String) async -> Bool {
                for n in 0..<10 {
                    let answer = await sender.send(claim(origin + "/push/" + id, id: "\(id)-\(n)"), now: now)
                    if case .accepted(201, _) = answer { return true }
                    #expect(answer == .retry(status: nil, reason: "connection", retryAfter: nil))
                }
                return false
            }
            #expect(await deliver("first"))
            let before = resolver.lookups.withLockedValue { $0 }
            // The service closes the idle connection after 2 s; the kept one is dropped, not used.
            let port = try #require(Int(origin.split(separator: ":").last ?? ""))
            try await waitUntil("the service to close the idle connection", within: .seconds(60)) {
                guard let kept = client.pool.take(ConnectionPool.key(host: "127.0.0.1", port: port)) else { return true }
                let open = kept.channel.isActive
                if open { client.pool.give(kept) } else { kept.close() }
                return !open
            }
            // The next delivery resolves, checks and connects anew.
            #expect(await deliver("again"))
            #expect(resolver.lookups.withLockedValue { $0 } > before)
            await sender.shutdown()
        }
    }

    @Test func aConnectionIsNeverKeptPastItsIdleLimitOrBeyondTheCap() async throws {
        try await withService(idle: .seconds(120)) { origin, authority in
            let (sender, resolver, client) = try sender(authority, idleLimit: .zero, maximumIdle: 1)
            for n in 0..<3 {
                guard case .accepted = await sender.send(claim(origin + "/push/s\(n)", id: "d\(n)"), now: now) else {
                    Issue.record("delivery \(n) was not accepted")
                    return
                }
            }
            #expect(resolver.lookups.withLockedValue { $0 } == 3, "an idle limit of zero keeps no connection for the next delivery")
            #expect(client.pool.count <= 1)
            await sender.shutdown()
        }
    }
}
