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

/// What a raw HTTP/2 client saw on its connection: each stream's status or reset, the GOAWAY, the close.
struct RawH2Observation: Sendable {
    var statuses: [Int: String] = [:]
    var resets: [Int: HTTP2ErrorCode] = [:]
    var goawayLastStreamID: Int?
    var closed = false
}

/// Records the frames that reach the end of a client pipeline with NIOHTTP2's connection handler and no
/// multiplexer: the test writes every frame itself, so it decides their order exactly.
final class RawH2Recorder: ChannelInboundHandler, Sendable {
    typealias InboundIn = HTTP2Frame
    let seen = NIOLockedValueBox(RawH2Observation())

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        let id = Int(frame.streamID)
        seen.withLockedValue { s in
            switch frame.payload {
            case let .headers(headers):
                if let status = headers.headers.first(name: ":status") { s.statuses[id] = status }
            case let .rstStream(code):
                s.resets[id] = code
            case let .goAway(lastStreamID, _, _):
                s.goawayLastStreamID = Int(lastStreamID)
            default:
                break
            }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        seen.withLockedValue { $0.closed = true }
        context.fireChannelInactive()
    }

    /// Waits up to `timeout` for `condition` over what was seen; returns what was seen then.
    func wait(within timeout: Duration = .seconds(10), until condition: (RawH2Observation) -> Bool) async -> RawH2Observation {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let now = seen.withLockedValue { $0 }
            if condition(now) { return now }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return seen.withLockedValue { $0 }
    }
}

@Suite("Local APNs: GOAWAY after N requests (RFC 9113 §6.8)", .serialized, .timeLimit(.minutes(2)))
struct LocalAPNsGoawayTests {
    /// Requests that complete out of order: the client opens streams 1, 3, 5 and 7 and sends the bodies of
    /// 3, 5 and 7 only. The third request makes the server send GOAWAY. Stream 1 is at or below its last stream
    /// id, so the client may assume the server processes it: once its body arrives (after the GOAWAY) it is
    /// answered 200, not reset or cut — and then the connection closes.
    @Test func aStreamBelowTheGoawaysLastStreamIDIsAnsweredAfterTheGoaway() async throws {
        let apns = try await LocalAPNs.start { $0.acceptUnknownTokens = true; $0.goawayAfter = 3 }
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMBytes(Array(apns.server.authority.caPEM.utf8)))
        tls.applicationProtocols = ["h2"]
        let sslContext = try NIOSSLContext(configuration: tls)
        let recorder = RawH2Recorder()
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(try NIOSSLClientHandler(context: sslContext, serverHostname: "localhost"))
                    try sync.addHandler(NIOHTTP2Handler(mode: .client))
                    try sync.addHandler(recorder)
                }
            }
            .connect(host: "127.0.0.1", port: apns.port).get()

        let jwt = try ProviderToken.make(key: apns.key, issuedAt: Int64(Date().timeIntervalSince1970))
        func headers(_ n: Int) -> HPACKHeaders {
            [":method": "POST", ":scheme": "https", ":path": "/3/device/" + token(n), ":authority": "127.0.0.1",
             "authorization": "bearer " + jwt, "apns-topic": LocalAPNs.topic, "apns-push-type": "alert"]
        }
        func body(_ id: Int) -> HTTP2Frame {
            HTTP2Frame(streamID: HTTP2StreamID(id), payload: .data(.init(data: .byteBuffer(ByteBuffer(string: #"{"aps":{"alert":"x"}}"#)),
                                                                        endStream: true)))
        }
        let streams = [1, 3, 5, 7]
        for id in streams {
            channel.write(HTTP2Frame(streamID: HTTP2StreamID(id), payload: .headers(.init(headers: headers(id)))), promise: nil)
        }
        for id in streams.dropFirst() { channel.write(body(id), promise: nil) }
        channel.flush()

        // The third complete request (stream 7) triggers the GOAWAY; stream 1 still waits for its body.
        let beforeLast = await recorder.wait { seen in seen.goawayLastStreamID != nil && [3, 5, 7].allSatisfy { seen.statuses[$0] != nil } }
        #expect(beforeLast.goawayLastStreamID == 7, "the highest stream processed: \(beforeLast)")
        #expect(beforeLast.statuses[1] == nil && beforeLast.resets[1] == nil && !beforeLast.closed,
                "stream 1 is still open, and so is the connection: \(beforeLast)")

        try await channel.writeAndFlush(body(1)).get()
        let after = await recorder.wait { $0.closed }
        for id in streams { #expect(after.statuses[id] == "200", "stream \(id): \(after)") }
        #expect(after.resets.isEmpty, "no stream at or below the last stream id is reset: \(after)")
        #expect(after.closed, "the connection closes once every stream it processes is answered: \(after)")
        #expect(apns.server.rules.counts.accepted == 4)
        try? await channel.close()
        await apns.stop()
    }
}
