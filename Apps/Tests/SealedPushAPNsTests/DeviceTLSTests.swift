import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import SealedPushAPNsServer
import SealedPushDeviceHTTP
import Testing

/// The device's own HTTPS clients (attachments, receipts) offer TLS 1.2 at least, like the provider client.
///
/// The server here speaks at most TLS 1.1 and records why its handshakes end: a client that offers only
/// TLS 1.2 and above is refused as an unsupported protocol before any certificate is sent; one that would
/// accept TLS 1.1 gets as far as refusing the server's (untrusted) certificate.
@Suite("Device HTTPS clients: TLS 1.2 at least", .serialized, .timeLimit(.minutes(10)))
struct DeviceTLSTests {
    /// Records the first error each server connection's pipeline reports.
    final class HandshakeWitness: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        let errors: NIOLockedValueBox<[String]>
        init(_ errors: NIOLockedValueBox<[String]>) { self.errors = errors }
        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            errors.withLockedValue { $0.append(String(describing: error)) }
            context.close(promise: nil)
        }
    }

    static func legacyServer(errors: NIOLockedValueBox<[String]>) async throws -> (any Channel, Int) {
        let authority = try LocalCertificateAuthority.make()
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMBytes(Array(authority.serverCertificatePEM.utf8)).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(authority.serverKeyPEM.utf8), format: .pem)))
        tls.minimumTLSVersion = .tlsv1
        tls.maximumTLSVersion = .tlsv11
        let context = try NIOSSLContext(configuration: tls)
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                    try channel.pipeline.syncOperations.addHandler(HandshakeWitness(errors))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return (channel, channel.localAddress?.port ?? 0)
    }

    /// Waits (bounded) for the server to record a handshake's end, and says whether it was a protocol refusal.
    static func refusedForItsProtocol(_ errors: NIOLockedValueBox<[String]>) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(10)
        while errors.withLockedValue({ $0.isEmpty }), ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
        let seen = errors.withLockedValue { $0 }
        return !seen.isEmpty && seen.allSatisfy { $0.contains("UNSUPPORTED_PROTOCOL") }
    }

    @Test func theAttachmentFetcherRefusesTLS11() async throws {
        let errors = NIOLockedValueBox<[String]>([])
        let (server, port) = try await Self.legacyServer(errors: errors)
        let fetcher = HTTPAttachmentFetcher(connectTimeout: .seconds(5))
        await #expect(throws: (any Error).self) { _ = try await fetcher.get("https://127.0.0.1:\(port)/a.bin", maximumBytes: 16) }
        #expect(await Self.refusedForItsProtocol(errors), "the server saw: \(errors.withLockedValue { $0 })")
        try await fetcher.shutdown()
        try await server.close()
    }

    @Test func theReceiptTransportRefusesTLS11() async throws {
        let errors = NIOLockedValueBox<[String]>([])
        let (server, port) = try await Self.legacyServer(errors: errors)
        let transport = HTTPReceiptTransport()
        let result = await transport.post(Array("{}".utf8), to: "https://127.0.0.1:\(port)/r", deadline: .now + .seconds(5))
        #expect(result == .failed)
        #expect(await Self.refusedForItsProtocol(errors), "the server saw: \(errors.withLockedValue { $0 })")
        await transport.shutdown()
        try await server.close()
    }

    /// A port on loopback that nothing listens on (bound, then closed).
    static func closedPort() async throws -> Int {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).get()
        let port = channel.localAddress?.port ?? 0
        try await channel.close()
        return port
    }

    @Test("a refused connection fails at once: receipts and attachments do not retry the connect until its timeout")
    func refusedConnectionFailsAtOnce() async throws {
        let port = try await Self.closedPort()
        // The fastest of three tries: a loaded machine (a sanitizer run holding the cooperative threads) can
        // delay any one of them, but retrying the refused connect until the 2 s connect timeout delays all three.
        var fastestReceipt = Duration.seconds(3600), fastestFetch = Duration.seconds(3600)
        for _ in 0..<3 {
            let transport = HTTPReceiptTransport()
            let start = ContinuousClock.now
            let result = await transport.post(Array("{}".utf8), to: "http://127.0.0.1:\(port)/r", deadline: .now + .seconds(10))
            fastestReceipt = min(fastestReceipt, ContinuousClock.now - start)
            await transport.shutdown()
            // #44 pilot 5: told apart from other failures, so that the outbox tries again within seconds.
            #expect(result == .connectionRefused)

            let fetcher = HTTPAttachmentFetcher(connectTimeout: .seconds(5))
            let fetchStart = ContinuousClock.now
            await #expect(throws: (any Error).self) { _ = try await fetcher.get("http://127.0.0.1:\(port)/a.bin", maximumBytes: 16) }
            fastestFetch = min(fastestFetch, ContinuousClock.now - fetchStart)
            try await fetcher.shutdown()
        }
        // The transport's connect timeout is 2 s and the fetcher's 5 s here: retrying the refused connect took that long.
        #expect(fastestReceipt < .milliseconds(1500), "a refused receipt took \(fastestReceipt) at best")
        #expect(fastestFetch < .seconds(3), "a refused attachment took \(fastestFetch) at best")
    }
}
