import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
@testable import SealedPushGateway
import SealedPushTestSupport
import SealedPushWire
import Testing

/// Collects what a connection receives.
final class Collected: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    let bytes = NIOLockedValueBox<[UInt8]>([])
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        let read = buffer.readBytes(length: buffer.readableBytes) ?? []
        bytes.withLockedValue { $0 += read }
    }
}

/// A connection to `port` on 127.0.0.1 from `source` (a loopback address), having sent `bytes`.
func rawConnection(port: Int, from source: String, sending bytes: String) async throws -> (any Channel, Collected) {
    let collected = Collected()
    let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        .bind(to: try SocketAddress(ipAddress: source, port: 0))
        .channelInitializer { $0.pipeline.addHandler(collected) }
        .connect(host: "127.0.0.1", port: port).get()
    try? await channel.writeAndFlush(ByteBuffer(string: bytes))  // a refused connection may be closed already
    return (channel, collected)
}

extension GatewaySuites {
    /// #44 D: one source holds at most `http.max_connections_per_source` of the API (and device) listener's
    /// connections; the next is closed at once and counted, and other sources are served meanwhile.
    @Suite("Gateway listeners: connections per source", .serialized, .timeLimit(.minutes(3)))
    struct GatewaySourceLimitTests {
        @Test func oneSourceCannotHoldTheListener() async throws {
            let limits = JSONObject([("max_connections", .int(8)), ("max_connections_per_source", .int(2)), ("header_timeout", .int(120))])
            try await withGateway("per-source", extraRoot: JSONObject([("http", .object(limits))])) { g in
                let partial = "GET /openapi.json HTTP/1.1\r\nHost: x\r\nX-Slow: "
                var held: [any Channel] = []
                for _ in 0..<2 { held.append(try await rawConnection(port: g.apiPort, from: "127.0.0.3", sending: partial).0) }
                // The third from the same source is closed at once (long before the 120 s header deadline).
                let (third, _) = try await rawConnection(port: g.apiPort, from: "127.0.0.3", sending: partial)
                let closed = third.closeFuture
                let refused = await bounded(.seconds(60)) { (try? await closed.get()) != nil }
                #expect(refused == true, "the source's third connection was not closed")
                for channel in held { #expect(channel.isActive, "the source's first two connections stay") }
                // Another source is answered meanwhile.
                let (other, answer) = try await rawConnection(port: g.apiPort, from: "127.0.0.4",
                                                              sending: "GET /openapi.json HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                let otherClosed = other.closeFuture
                _ = await bounded(.seconds(60)) { (try? await otherClosed.get()) != nil }
                #expect(String(decoding: answer.bytes.withLockedValue { $0 }.prefix(12), as: UTF8.self) == "HTTP/1.1 200", "another source is served")
                let metrics = try await g.admin.call(.GET, "/metrics", key: nil).text
                #expect(metrics.contains(#"sealedpush_gateway_connections_refused_total{listener="api"} 1"#),
                        "\(metrics.split(separator: "\n").filter { $0.contains("refused") })")
                // A closed connection gives its place back.
                try await held.removeFirst().close()
                try await waitUntil("the source to get a place back", within: .seconds(60)) {
                    let (again, got) = try await rawConnection(port: g.apiPort, from: "127.0.0.3",
                                                               sending: "GET /openapi.json HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    let done = again.closeFuture
                    _ = await bounded(.seconds(30)) { (try? await done.get()) != nil }
                    return String(decoding: got.bytes.withLockedValue { $0 }.prefix(12), as: UTF8.self) == "HTTP/1.1 200"
                }
                for channel in held { try? await channel.close() }
            }
        }

        @Test func theLimitIsConfiguredWithASaneDefault() throws {
            let directory = try GatewayHarness.parseTestDirectory("per-source-config")
            defer { try? FileManager.default.removeItem(at: directory) }
            func limits(_ http: String) throws -> GatewayConfiguration.HTTPLimits {
                try GatewayConfiguration.parse(Array(configurationText(http.isEmpty ? "" : #""http": \#(http),"#, app: "").utf8), baseDirectory: directory.path).http
            }
            #expect(try limits("").maxConnectionsPerSource == 256)
            #expect(try limits(#"{"max_connections": 50}"#).maxConnectionsPerSource == 12)
            #expect(try limits(#"{"max_connections_per_source": 3}"#).maxConnectionsPerSource == 3)
            #expect(throws: GatewayConfigurationError.self) { try limits(#"{"max_connections_per_source": 0}"#) }
        }
    }
}

extension GatewaySuites {
    /// #44 pilot 5: on SIGTERM the listeners keep answering (receipts, reports) for `http.drain_linger` after the
    /// drain ended, then close; the default is 10 s.
    @Suite("Gateway shutdown: the drain's linger", .serialized, .timeLimit(.minutes(3)))
    struct GatewayDrainLingerTests {
        @Test func theListenersAnswerDuringTheLingerThenClose() async throws {
            let limits = JSONObject([("drain_linger", .int(3))])
            try await withGateway("linger", extraRoot: JSONObject([("http", .object(limits))])) { g in
                await g.group.triggerGracefulShutdown()
                // The drain ends at once (nothing in flight); the API still answers during the linger.
                try await Task.sleep(for: .milliseconds(500))
                let (channel, answer) = try await rawConnection(port: g.apiPort, from: "127.0.0.5",
                                                                sending: "GET /openapi.json HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                let closed = channel.closeFuture
                _ = await bounded(.seconds(30)) { (try? await closed.get()) != nil }
                #expect(String(decoding: answer.bytes.withLockedValue { $0 }.prefix(12), as: UTF8.self) == "HTTP/1.1 200", "the API answers during the linger")
                let ready = try await g.admin.call(.GET, "/readyz", key: nil)
                #expect(ready.status == 503 && ready.json["status"]?.stringValue == "draining", "\(ready.text)")
                let running = g.running
                let ended = await bounded(.seconds(60)) { _ = await running.result; return true }
                #expect(ended == true, "the gateway stops after its linger")
            }
        }

        @Test func theLingerIsConfigured() throws {
            let directory = try GatewayHarness.parseTestDirectory("linger-config")
            defer { try? FileManager.default.removeItem(at: directory) }
            func limits(_ http: String) throws -> GatewayConfiguration.HTTPLimits {
                try GatewayConfiguration.parse(Array(configurationText(http.isEmpty ? "" : #""http": \#(http),"#, app: "").utf8), baseDirectory: directory.path).http
            }
            #expect(try limits("").drainLinger == .seconds(10))
            #expect(try limits(#"{"drain_linger": 0}"#).drainLinger == .zero)
            #expect(throws: GatewayConfigurationError.self) { try limits(#"{"drain_linger": 301}"#) }
        }
    }
}
