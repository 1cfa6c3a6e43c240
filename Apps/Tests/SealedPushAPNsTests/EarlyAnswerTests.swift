import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import SealedPushAPNs
import SealedPushAPNsCore
import SealedPushAPNsServer
import Testing

/// An HTTP/2 server that answers each request as soon as its HEADERS arrive, before reading its body, and then
/// resets the stream with `NO_ERROR` (RFC 9113 §8.1), as nginx's `return 200` does when the body has not come
/// yet: here on every request, not on the ~12 % nginx's timing gave. It counts the requests by `apns-id` and
/// the GOAWAY frames clients send it.
final class EarlyAnsweringPeer: Sendable {
    struct Seen {
        var requests: [String: Int] = [:]
        var connections = 0
        var goAways: [HTTP2ErrorCode] = []
    }

    let seen: NIOLockedValueBox<Seen>
    let channel: any Channel
    let authority: LocalCertificateAuthority
    var port: Int { channel.localAddress?.port ?? 0 }

    init(authority: LocalCertificateAuthority) async throws {
        self.authority = authority
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMBytes(Array(authority.serverCertificatePEM.utf8)).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(authority.serverKeyPEM.utf8), format: .pem)))
        tls.applicationProtocols = ["h2"]
        let context = try NIOSSLContext(configuration: tls)
        let seen = NIOLockedValueBox(Seen())
        self.seen = seen
        channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    seen.withLockedValue { $0.connections += 1 }
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(NIOSSLServerHandler(context: context))
                    var connection = NIOHTTP2Handler.ConnectionConfiguration()
                    // The bodies of the streams it reset arrive later: it must remember them all to ignore them.
                    connection.maximumRecentlyResetStreams = 100_000
                    try sync.addHandler(NIOHTTP2Handler(mode: .server, connectionConfiguration: connection, streamConfiguration: .init()))
                    try sync.addHandler(Answerer(seen: seen))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
    }

    func stop() async { try? await channel.close() }

    /// Answers every request at its HEADERS: `200` with its `apns-id` and END_STREAM, then RST_STREAM `NO_ERROR`.
    final class Answerer: ChannelInboundHandler {
        typealias InboundIn = HTTP2Frame
        typealias OutboundOut = HTTP2Frame
        let seen: NIOLockedValueBox<Seen>
        init(seen: NIOLockedValueBox<Seen>) { self.seen = seen }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let frame = unwrapInboundIn(data)
            switch frame.payload {
            case let .headers(request):
                let apnsID = request.headers.first(name: "apns-id") ?? "?"
                seen.withLockedValue { $0.requests[apnsID, default: 0] += 1 }
                let answer: HPACKHeaders = [":status": "200", "apns-id": apnsID]
                context.write(wrapOutboundOut(HTTP2Frame(streamID: frame.streamID, payload: .headers(.init(headers: answer, endStream: true)))),
                              promise: nil)
                if !request.endStream {
                    context.write(wrapOutboundOut(HTTP2Frame(streamID: frame.streamID, payload: .rstStream(.noError))), promise: nil)
                }
                context.flush()
            case let .goAway(_, errorCode, _):
                seen.withLockedValue { $0.goAways.append(errorCode) }
            default:
                break
            }
        }
    }
}

@Suite("APNs client: a server that answers before reading the body", .serialized, .timeLimit(.minutes(5)))
struct EarlyAnswerTests {
    /// Issue #36, bug 10. The answer is complete when its HEADERS end the stream; the RST_STREAM `NO_ERROR` after it
    /// must change nothing (RFC 9113 §8.1). Before the fix NIOHTTP2 counted those resets against its rapid-reset budget
    /// (200 in 30 s): the 201st ended the connection with GOAWAY `ENHANCE_YOUR_CALM` and the pushes in flight on it
    /// were sent again. 600 pushes, 50 at a time, go over at most two connections, so one carries more than 200.
    @Test func aResetWithNoErrorAfterACompleteAnswerSendsNothingTwice() async throws {
        let authority = try LocalCertificateAuthority.make()
        let peer = try await EarlyAnsweringPeer(authority: authority)
        let key = try APNsSigningKey.generateForDevelopment(keyID: "KEY0000001", teamID: "TEAM000001").key
        let client = try APNsClient(configuration: APNsClientConfiguration(
            environment: .custom("https://127.0.0.1:\(peer.port)"), signingKey: key, topic: LocalAPNs.topic,
            trustedCertificatesPEM: [Array(authority.caPEM.utf8)], timeout: .seconds(30), maxInFlight: 50,
            retry: .init(maxTries: 4, baseDelay: .milliseconds(1), maxDelay: .milliseconds(5))))
        let total = 600
        let accepted = try await withThrowingTaskGroup(of: APNsAcceptance.self) { group in
            for n in 0..<total { group.addTask { try await client.send(push(n)) } }
            var all: [APNsAcceptance] = []
            for try await acceptance in group { all.append(acceptance) }
            return all
        }
        await client.shutdown()
        await peer.stop()
        let seen = peer.seen.withLockedValue { $0 }
        #expect(accepted.count == total)
        #expect(accepted.allSatisfy { $0.tries == 1 }, "pushes tried again: \(accepted.filter { $0.tries > 1 }.count)")
        #expect(seen.requests.count == total, "distinct pushes the server saw")
        let twice = seen.requests.values.filter { $0 > 1 }.count
        #expect(twice == 0, "\(twice) of \(total) pushes reached the server more than once")
        #expect(seen.goAways.isEmpty, "the client ended a connection: \(seen.goAways)")
        #expect(seen.connections <= 2)
    }
}
