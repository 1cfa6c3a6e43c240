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

    @Test func deliveriesToOneHostShareAConnectionAndANewOneIsResolvedAndChecked() async throws {
        try await withService(idle: .seconds(1)) { origin, authority in
            let resolver = CountingResolver(table: ["127.0.0.1": [[127, 0, 0, 1]]])
            let client = try PinnedHTTPSClient(additionalRootsPEM: Array(authority.caPEM.utf8), timeout: .seconds(10))
            let sender = WebPushPlatformSender(
                policy: WebPushEndpointPolicy(allowPrivateEndpoints: true),
                vapid: VAPIDTokenCache(key: VAPIDKey.generate().key, subject: try VAPIDSubject("mailto:ops@example.com"), clock: { Int64(Date().timeIntervalSince1970) }),
                resolver: resolver, client: client)
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            for n in 0..<5 {
                let answer = await sender.send(claim(origin + "/push/sub-\(n)", id: "d\(n)"), now: now)
                guard case .accepted(201, _) = answer else {
                    Issue.record("delivery \(n): \(answer)")
                    return
                }
            }
            #expect(resolver.lookups.withLockedValue { $0 } == 1, "five deliveries in a row made one connection")
            #expect(client.pool.count == 1)

            // The service closes the idle connection after 1 s: the next delivery resolves, checks and connects anew.
            try await waitUntil("the service to close the idle connection", within: .seconds(30)) {
                client.pool.take(ConnectionPool.key(host: "127.0.0.1", port: Int(origin.split(separator: ":").last!)!)).map { kept in
                    let open = kept.channel.isActive
                    if open { client.pool.give(kept) } else { kept.close() }
                    return !open
                } ?? true
            }
            guard case .accepted(201, _) = await sender.send(claim(origin + "/push/again", id: "d9"), now: now) else {
                Issue.record("the delivery after the service closed the connection was not accepted")
                return
            }
            #expect(resolver.lookups.withLockedValue { $0 } == 2)

            // Deliveries at once each get a connection; all of them are kept, none beyond what ran at once.
            let answers = await withTaskGroup(of: PushAnswer.self) { group in
                for n in 0..<8 { group.addTask { await sender.send(claim(origin + "/push/many-\(n)", id: "m\(n)"), now: now) } }
                return await group.reduce(into: []) { $0.append($1) }
            }
            #expect(answers.allSatisfy { if case .accepted(201, _) = $0 { true } else { false } }, "\(answers)")
            #expect((1...8).contains(client.pool.count))
            await sender.shutdown()
            #expect(client.pool.count == 0)
        }
    }

    @Test func aConnectionIsNeverKeptPastItsIdleLimitOrBeyondTheCap() async throws {
        try await withService(idle: .seconds(60)) { origin, authority in
            let resolver = CountingResolver(table: ["127.0.0.1": [[127, 0, 0, 1]]])
            let client = try PinnedHTTPSClient(additionalRootsPEM: Array(authority.caPEM.utf8), idleLimit: .zero, maximumIdle: 1)
            let sender = WebPushPlatformSender(
                policy: WebPushEndpointPolicy(allowPrivateEndpoints: true),
                vapid: VAPIDTokenCache(key: VAPIDKey.generate().key, subject: try VAPIDSubject("mailto:ops@example.com"), clock: { Int64(Date().timeIntervalSince1970) }),
                resolver: resolver, client: client)
            let now = Int64(Date().timeIntervalSince1970 * 1000)
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
