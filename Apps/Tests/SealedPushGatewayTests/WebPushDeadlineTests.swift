import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
@testable import SealedPushGateway
import SealedPushAPNsServer
import SealedPushTestSupport
import SealedPushWebPush
import SealedPushWebPushServer
import ServiceLifecycle
import SealedPushWire
import Testing

/// A push service that never finishes an answer, on loopback: `silent` accepts TCP and never says a word (the TLS
/// handshake never ends); `headersOnly` completes TLS, reads the request and answers its head (announcing a body)
/// but never the body.
final class Tarpit: Sendable {
    let server: any Channel
    let accepted: NIOLockedValueBox<[any Channel]>
    /// Connections accepted so far.
    var connections: Int { accepted.withLockedValue { $0.count } }
    var port: Int { server.localAddress?.port ?? 0 }

    private init(server: any Channel, accepted: NIOLockedValueBox<[any Channel]>) {
        self.server = server
        self.accepted = accepted
    }

    static func silent() async throws -> Tarpit { try await start(tls: nil) }

    static func headersOnly(_ authority: LocalCertificateAuthority) async throws -> Tarpit {
        try await start(tls: try tls(authority)) { HeadersOnly() }
    }

    /// A push service that answers every request at once: `401` to a path containing `/evil`, else `201` with a
    /// `Location`; `requests` counts them.
    static func refusing(_ authority: LocalCertificateAuthority, requests: NIOLockedValueBox<Int>) async throws -> Tarpit {
        try await start(tls: try tls(authority)) { Refusing(requests: requests) }
    }

    static func tls(_ authority: LocalCertificateAuthority) throws -> NIOSSLContext {
        let configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(try NIOSSLCertificate(bytes: Array(authority.serverCertificatePEM.utf8), format: .pem))],
            privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(authority.serverKeyPEM.utf8), format: .pem)))
        return try NIOSSLContext(configuration: configuration)
    }

    private static func start(tls: NIOSSLContext?, _ handler: @escaping @Sendable () -> any ChannelHandler & Sendable = { HeadersOnly() }) async throws -> Tarpit {
        let accepted = NIOLockedValueBox<[any Channel]>([])
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                accepted.withLockedValue { $0.append(channel) }
                guard let tls else { return channel.eventLoop.makeSucceededVoidFuture() }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tls))
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(handler())
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return Tarpit(server: server, accepted: accepted)
    }

    func close() async {
        try? await server.close()
        for channel in accepted.withLockedValue({ $0 }) { try? await channel.close() }
    }

    /// Answers `401` to `/evil` paths and `201` to the others.
    final class Refusing: ChannelInboundHandler, Sendable {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let requests: NIOLockedValueBox<Int>
        let path = NIOLockedValueBox("")
        init(requests: NIOLockedValueBox<Int>) { self.requests = requests }
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case let .head(head): path.withLockedValue { $0 = head.uri }
            case .body: break
            case .end:
                requests.withLockedValue { $0 += 1 }
                let evil = path.withLockedValue { $0 }.contains("/evil")
                var headers = HTTPHeaders()
                headers.add(name: "Content-Length", value: "0")
                if !evil { headers.add(name: "Location", value: "https://push.example.net/message/1") }
                context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: evil ? .unauthorized : .created, headers: headers))), promise: nil)
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            }
        }
    }

    /// Answers every request's head, announcing 100 bytes of body it never sends.
    final class HeadersOnly: ChannelInboundHandler, Sendable {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard case .end = unwrapInboundIn(data) else { return }
            var headers = HTTPHeaders()
            headers.add(name: "Content-Length", value: "100")
            context.writeAndFlush(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .created, headers: headers))), promise: nil)
        }
    }
}

/// A resolver whose lookups of the hosts in `hang` never return and ignore cancellation, as a blocked
/// `getaddrinfo` does; other hosts answer from `table`. `release()` ends the parked lookups.
final class HangingResolver: GatewayAddressResolver {
    let table: [String: [[UInt8]]]
    let hang = NIOLockedValueBox<Set<String>>([])
    let parked = NIOLockedValueBox<[CheckedContinuation<[[UInt8]], Never>]>([])

    init(table: [String: [[UInt8]]], hang: Set<String> = []) {
        self.table = table
        self.hang.withLockedValue { $0 = hang }
    }

    func addresses(of host: String) async throws -> [[UInt8]] {
        if hang.withLockedValue({ $0.contains(host) }) {
            return await withCheckedContinuation { continuation in parked.withLockedValue { $0.append(continuation) } }
        }
        return table[host] ?? []
    }

    func release() {
        hang.withLockedValue { $0 = [] }
        let all = parked.withLockedValue { list in
            defer { list = [] }
            return list
        }
        for continuation in all { continuation.resume(returning: []) }
    }
}

/// `body`'s result, or nil when it has not returned within `limit` (it is then abandoned): a wait that would hang
/// fails the test instead of hanging the suite.
func bounded<T: Sendable>(_ limit: Duration, _ body: @escaping @Sendable () async -> T) async -> T? {
    if case let .success(value)? = await Abandoning.run(within: limit, { await body() }) { return value }
    return nil
}

/// Platforms v1 §4.1: every step toward a Web Push service ends by its deadline whatever the far side does — a
/// service that never finishes the TLS handshake, one that answers headers and never the body, a resolver that
/// never returns — and neither holds another device's delivery nor the gateway's shutdown.
@Suite("Web Push deadlines on every network step", .timeLimit(.minutes(5)))
struct WebPushDeadlineTests {
    static func post(_ client: PinnedHTTPSClient, port: Int) async -> Result<Int, PinnedHTTPSClient.Failure> {
        do {
            return .success(try await client.post(host: "127.0.0.1", port: port, address: [127, 0, 0, 1], path: "/push/x", headers: [], body: [1, 2, 3]).status)
        } catch {
            return .failure(error)
        }
    }

    @Test func aServiceThatNeverAnswersTheHandshakeTimesOut() async throws {
        let tarpit = try await Tarpit.silent()
        defer { Task { await tarpit.close() } }
        let client = try PinnedHTTPSClient(timeout: .milliseconds(300), connectTimeout: .milliseconds(300))
        let answer = await bounded(.seconds(60)) { await Self.post(client, port: tarpit.port) }
        #expect(answer == .failure(.timedOut), "a silent server must end the attempt at the connect deadline: \(String(describing: answer))")
        #expect(tarpit.connections == 1)
        #expect(client.pool.count == 0)
    }

    @Test func aServiceThatAnswersHeadersAndNeverTheBodyTimesOut() async throws {
        let authority = try LocalCertificateAuthority.make(caName: "SealedPush test tarpit CA")
        let tarpit = try await Tarpit.headersOnly(authority)
        defer { Task { await tarpit.close() } }
        let client = try PinnedHTTPSClient(additionalRootsPEM: Array(authority.caPEM.utf8), timeout: .milliseconds(500), connectTimeout: .seconds(30))
        let answer = await bounded(.seconds(60)) { await Self.post(client, port: tarpit.port) }
        #expect(answer == .failure(.timedOut), "\(String(describing: answer))")
        #expect(client.pool.count == 0, "a connection whose request timed out is never kept")
    }

    @Test func cancellingTheCallerClosesTheConnectionAtOnce() async throws {
        let tarpit = try await Tarpit.silent()
        defer { Task { await tarpit.close() } }
        let client = try PinnedHTTPSClient(timeout: .seconds(600), connectTimeout: .seconds(600))
        let attempt = Task { await Self.post(client, port: tarpit.port) }
        try await waitUntil("the tarpit to accept", within: .seconds(60)) { tarpit.connections == 1 }
        attempt.cancel()
        let answer = await bounded(.seconds(60)) { await attempt.value }
        #expect(answer == .failure(.timedOut), "\(String(describing: answer))")
    }

    @Test func aLookupThatNeverReturnsIsAbandonedAndBounded() async throws {
        let resolver = HangingResolver(table: ["fine.example": [[93, 184, 215, 14]]], hang: ["stuck.example"])
        defer { resolver.release() }
        // The registration's and the sender's helper: no wait on a lookup that ignores cancellation.
        let helper = await bounded(.seconds(60)) { try? await WebPushPlatformSender.addresses(of: "stuck.example", resolver: resolver, within: .milliseconds(200)) }
        #expect(helper == .some(nil), "the lookup must be abandoned at its deadline")

        let lookups = AddressLookups(resolver: resolver, limit: 2, deadline: .milliseconds(200))
        for _ in 0..<2 {
            let answer = await bounded(.seconds(60)) { try? await lookups.addresses(of: "stuck.example") }
            #expect(answer == .some(nil))
        }
        // The abandoned lookups still run (the resolver has not returned): they hold the app's two slots, so a third
        // waits for one no longer than its own deadline.
        #expect(lookups.running == 2)
        let blocked = await bounded(.seconds(60)) { try? await lookups.addresses(of: "fine.example") }
        #expect(blocked == .some(nil))
        resolver.release()
        try await waitUntil("the abandoned lookups to give their slots back", within: .seconds(60)) { lookups.running == 0 }
        let fine = await bounded(.seconds(60)) { try? await lookups.addresses(of: "fine.example") }
        #expect(fine == .some([[93, 184, 215, 14]]))
    }

    /// The pieces of a gateway whose app `chat` has Web Push to the local service, a silent tarpit, a headers-only
    /// tarpit and a name whose lookups hang; `max_in_flight` 2.
    struct Scene {
        let authority: LocalCertificateAuthority
        let silent: Tarpit
        let headers: Tarpit
        let resolver: HangingResolver
        let directory: URL
        let section: JSONObject

        init() async throws {
            authority = try LocalCertificateAuthority.make(caName: "SealedPush test Web Push CA")
            silent = try await Tarpit.silent()
            headers = try await Tarpit.headersOnly(authority)
            resolver = HangingResolver(table: ["127.0.0.1": [[127, 0, 0, 1]], "stuck.example": [[127, 0, 0, 1]]])
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("webpush-deadlines-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let vapid = directory.appendingPathComponent("vapid.p8")
            try VAPIDKey.generate().pem.withUnsafeBytes { try Data($0).write(to: vapid) }
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: vapid.path)
            let ca = directory.appendingPathComponent("webpush-ca.pem")
            try Data(authority.caPEM.utf8).write(to: ca)
            section = JSONObject([
                ("max_in_flight", .int(2)),
                ("webpush", .object(JSONObject([("vapid_key", .string(vapid.path)), ("subject", "mailto:ops@example.com"),
                                                ("allow_private_endpoints", .bool(true)), ("ca_cert", .string(ca.path))]))),
            ])
        }

        func options(_ deadline: Duration) -> GatewayOptions {
            var options = GatewayOptions()
            options.addressResolver = resolver
            options.webPushDeadlines = WebPushDeadlines(resolve: deadline, connect: deadline, request: deadline, lookupsPerApp: 4)
            options.drainTimeout = .seconds(1)
            return options
        }

        /// Registers the three bad devices (and `good` at `origin`, when given), then makes `stuck.example` hang.
        func register(_ g: GatewayHarness, goodOrigin: String?) async throws {
            var endpoints = ["silent": "https://127.0.0.1:\(silent.port)/push/a", "headers": "https://127.0.0.1:\(headers.port)/push/b",
                             "stuck": "https://stuck.example:\(silent.port)/push/c"]
            if let goodOrigin { endpoints["good"] = goodOrigin + "/push/good" }
            for (device, endpoint) in endpoints.sorted(by: { $0.key < $1.key }) {
                let phone = try Phone(in: g.directory, name: device, token: "")
                let answer = try await g.api.call(.PUT, "/v1/apps/chat/devices/\(device)",
                                                  json: GatewayPlatformTests.registration(phone, endpoint: endpoint, keys: WebPushUserAgentKeys.generate()))
                #expect(answer.status == 201, "\(device): \(answer.text)")
            }
            resolver.hang.withLockedValue { $0 = ["stuck.example"] }
        }

        func close() async {
            resolver.release()
            await silent.close()
            await headers.close()
            try? FileManager.default.removeItem(at: directory)
        }
    }

    /// Three deliveries that never get an answer, in an app with two slots: each attempt ends at its deadline and is
    /// retried, and a fourth device of the same app, on a working push service, is delivered meanwhile.
    @Test func stalledEndpointsAreRetriedAndAnotherDeviceIsDelivered() async throws {
        let scene = try await Scene()
        var configuration = LocalWebPushConfiguration(subscriptions: [])
        configuration.acceptUnknown = true
        let server = LocalWebPushServer(rules: LocalWebPushRules(configuration: configuration), authority: scene.authority)
        let (origins, continuation) = AsyncStream.makeStream(of: String.self)
        let application = try server.application { origin in continuation.yield(origin) }
        let services = ServiceGroup(configuration: ServiceGroupConfiguration(services: [application], logger: Logger(label: "test.webpush")))
        let running = Task { try await services.run() }
        var iterator = origins.makeAsyncIterator()
        let origin = try #require(await iterator.next(), "the local Web Push service did not start")
        do {
            try await withGateway("webpush-deadlines", options: scene.options(.milliseconds(500)), extraApp: scene.section) { g in
                try await scene.register(g, goodOrigin: origin)
                let stalled = try await g.send(JSONObject([("device_ids", .array(["silent", "headers", "stuck"]))]))
                #expect(stalled.status == 202, "\(stalled.text)")
                let stalledID = try #require(stalled.json["message_id"]?.stringValue)
                // Both slots are soon taken by the stalled ones; the good device still gets its turn.
                try await waitUntil("the stalled deliveries to be attempted", within: .seconds(60)) {
                    (g.gateway.apps["chat"]?.attemptsInFlight ?? 0) > 0
                }
                let good = try await g.send(JSONObject([("device_ids", .array(["good"]))]))
                let goodID = try #require(good.json["message_id"]?.stringValue)
                try await g.waitForStates(goodID, ["accepted"], within: .seconds(60))
                // Each stalled delivery ended at its deadline and waits for its retry (queued, attempted, a timeout).
                let reasons = NIOLockedValueBox<[String: String]>([:])
                try await waitUntil("each stalled delivery to time out", within: .seconds(60)) {
                    let message = try await g.api.call(.GET, "/v1/apps/chat/messages/\(stalledID)").json
                    var found: [String: String] = [:]
                    for case let .object(d) in message["deliveries"]?.arrayValue ?? [] where (d["attempts"]?.intValue ?? 0) >= 1 {
                        found[d["device_id"]?.stringValue ?? ""] = "\(d["state"]?.stringValue ?? "") \(d["reason"]?.stringValue ?? "")"
                    }
                    reasons.withLockedValue { $0 = found }
                    return found.count == 3
                }
                let found = reasons.withLockedValue { $0 }
                #expect(found["silent"] == "queued timeout", "\(found)")
                #expect(found["headers"] == "queued timeout", "\(found)")
                #expect(found["stuck"] == "queued dns_timeout", "\(found)")
            }
        } catch {
            await scene.close()
            await services.triggerGracefulShutdown()
            _ = await running.result
            throw error
        }
        await scene.close()
        await services.triggerGracefulShutdown()
        _ = await running.result
    }

    /// SIGTERM while both slots hold attempts that would wait minutes (a silent server, a lookup that never returns):
    /// the drain hands them back at its deadline and the gateway stops.
    @Test func theGatewayShutsDownPromptlyWithAttemptsStalled() async throws {
        let scene = try await Scene()
        do {
            try await withGateway("webpush-deadlines-stop", options: scene.options(.seconds(600)), extraApp: scene.section) { g in
                try await scene.register(g, goodOrigin: nil)
                let stalled = try await g.send(JSONObject([("device_ids", .array(["silent", "stuck"]))]))
                #expect(stalled.status == 202, "\(stalled.text)")
                try await waitUntil("both slots to hold a stalled attempt", within: .seconds(60)) {
                    (g.gateway.apps["chat"]?.attemptsInFlight ?? 0) == 2 && scene.silent.connections >= 1
                }
                await g.group.triggerGracefulShutdown()
                let running = g.running
                let ended = await bounded(.seconds(60)) { _ = await running.result; return true }
                #expect(ended == true, "the gateway did not stop within 60 s of SIGTERM with its drain timeout at 1 s")
            }
        } catch {
            await scene.close()
            throw error
        }
        await scene.close()
    }
}
